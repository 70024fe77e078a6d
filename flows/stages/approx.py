"""``approx`` stage: the approximate-inference benchmark of Tu & Gimpel (2019) on every task.

Per task, against the frozen chain energies of ``train_energy`` and the networks of ``infnets``:

- exact Viterbi (the yardstick: energies, search error, accuracy / span F1);
- gradient descent with per-instance oracle tuning over the paper's grid (9 learning rates x N up
  to 1000), sharded over Ray tasks (``flows/parallel.py``), each shard vectorised; per-N rows and
  the full oracle (Table 6); the shards' per-instance results are one Parquet artifact;
- inference networks and local baselines (Tables 1 and 4), discretised outputs (Table 6);
- instance-tailored inference networks and inference-network warm starts for GD, with the learning
  rate tuned on dev for each N and applied to all test instances (Table 6);
- speed at batch size 10 and at the fastest batch size (Table 3);
- Spearman correlation of search error with the perplexity of the word sequence and of the gold
  label sequence under two LSTM language models trained on the task (Sec. 6.2).

Everything lands in ``metrics/approx.json`` (read by the ``report`` stage) and in MLflow.
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from components.config import BaseConfig, load_section, resolve_device
from components.data.tasks import TaggingTask, load_tagging_task
from components.inference.evaluate import evaluate_inference
from components.inference.exact import Viterbi
from components.inference.gradient_descent import GDConfig, GradientDescent
from components.inference.inference_net import InferenceNetwork, TailoredInferenceNetwork, TailorConfig, warm_start_logits
from components.inference.oracle import oracle_select
from components.inference.study import gd_grid, speed
from components.metrics.correlation import spearman
from components.models.infnets import build_infnet
from components.models.lm import LMConfig, LSTMLM
from components.training.loop import TrainConfig, fit
from flows.energy_io import load_energy
from flows.parallel import ResourcesConfig, shards, sharded_map
from flows.stages.common import StageContext, main, numeric
from flows.stages.infnets import InfNetStageConfig, NetUnderEnergy, net_config


@dataclass(frozen=True)
class GDGridConfig(GDConfig):
    """The paper's GD grid (:class:`GDConfig`) plus a per-task cap on N for large label sets."""
    max_iterations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ApproxConfig:
    tasks: tuple[str, ...] = ("pos", "ner", "greek_morph")
    energy: str = "blstm_crf_plus"            # Tables 4 and 6
    table1_energy: str = "blstm_crf"          # Tables 1 and 3
    arch: dict[str, str] = field(default_factory=lambda: {"pos": "cnn", "ner": "seq2seq", "greek_morph": "blstm"})
    max_test_sentences: dict[str, int] = field(default_factory=dict)   # 0 / absent = the whole test set
    max_dev_sentences: int = 100
    batch_size: int = 32
    gd: GDGridConfig = GDGridConfig(init_std=0.01)      # near-uniform start (see the README)
    shard_size: int = 50
    resources: ResourcesConfig = ResourcesConfig()
    tailor_steps: tuple[int, ...] = (3, 5, 10)
    tailor_lrs: tuple[float, ...] = (0.1, 0.01, 0.001)
    warm_start_steps: tuple[int, ...] = (3, 5, 10)
    warm_start_lrs: tuple[float, ...] = (1.0, 5.0, 10.0, 50.0)
    speed_batch_sizes: tuple[int, ...] = (10, 32, 100)
    speed_gd_iterations: int = 20
    lm: LMConfig = LMConfig()
    lm_epochs: int = 5
    energy_dir: str = "models/energy"
    infnet_dir: str = "models/infnet"


def _subset(task: TaggingTask, split: str, n: int, seed: int):
    from components.data.batching import TaggingDataset
    ds = getattr(task, split)
    if 0 < n < len(ds):
        keep = np.sort(np.random.default_rng(seed).choice(len(ds), n, replace=False))
        return TaggingDataset([ds.sentences[i] for i in keep], task.vocabs)
    return ds


def _load_net(root: Path, cfg: ApproxConfig, icfg: InfNetStageConfig, task: TaggingTask, energy_name: str,
              arch: str, mode: str, energy) -> torch.nn.Module:
    folder = root / cfg.infnet_dir / task.name / f"{energy_name}.{arch}.{mode}"
    weights = folder / "model.pt"
    if not weights.exists():
        raise FileNotFoundError(f"{weights}: no trained network (run `dvc repro infnets` with {task.name!r}, "
                                f"{energy_name!r}, {arch!r} and {mode!r} in its params)")
    meta = json.loads((folder / "model.json").read_text())
    for key, value in meta.get("config", {}).items():         # the best trial's swept values
        if key == "infnets.infnet.hidden":
            icfg = dataclasses.replace(icfg, infnet=dataclasses.replace(icfg.infnet, hidden=value))
    net = build_infnet(net_config(icfg, energy_name, arch), len(task.vocabs["word"]), len(task.vocabs["char"]),
                       len(task.vocabs["label"]))
    both = NetUnderEnergy(net, energy)
    both.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return both.net.eval()


def _gd_shard(args: dict[str, Any]) -> dict[str, np.ndarray]:
    """One Ray task: load the task and energy, run the GD grid on instances [start, stop)."""
    torch.set_num_threads(1)
    root = Path(args["root"])
    task = load_tagging_task(root / args["prepared_dir"] / args["task"])
    ds = _subset(task, "test", args["n_test"], args["seed"])
    device = resolve_device(args["device"])
    energy = load_energy(root / args["energy_dir"] / args["task"] / args["energy"], args["energy"], task, device)
    cfg = GDConfig(**args["gd"])
    return gd_grid(energy, ds, range(args["start"], args["stop"]), task.vocabs["label"].tokens, task.metric, cfg,
                   batch_size=args["batch_size"], seed=args["seed"], device=device)


def _gd_config(cfg: ApproxConfig, task: str) -> dict[str, Any]:
    cap = cfg.gd.max_iterations.get(task, 0)
    checkpoints = tuple(n for n in cfg.gd.checkpoints if cap <= 0 or n <= cap)
    return {"lrs": tuple(float(x) for x in cfg.gd.lrs), "checkpoints": checkpoints, "momentum": cfg.gd.momentum,
            "init_std": cfg.gd.init_std, "restarts": cfg.gd.restarts}


def _train_lm(seqs: list[list[int]], vocab: int, cfg: ApproxConfig, seed: int) -> LSTMLM:
    torch.manual_seed(seed)
    lm = LSTMLM(vocab, cfg.lm)
    order = np.argsort([len(s) for s in seqs], kind="stable")
    batches = [order[i:i + 32] for i in range(0, len(order), 32)]

    def collate(idx):
        n = max(len(seqs[i]) for i in idx)
        ids = torch.zeros(len(idx), n, dtype=torch.long)
        for b, i in enumerate(idx):
            ids[b, :len(seqs[i])] = torch.tensor(seqs[i])
        return ids, torch.arange(n)[None] < torch.tensor([len(seqs[i]) for i in idx])[:, None]

    data = [collate(b) for b in batches]
    rng = np.random.default_rng(seed)
    fit(lm, lambda m, b: m.loss(*b), lambda e: [data[i] for i in rng.permutation(len(data))], len(data),
        lambda m: {"score": -float(sum(m.loss(*b) for b in data[:5]))},
        TrainConfig(lr=0.01, epochs=cfg.lm_epochs, patience=cfg.lm_epochs))
    return lm.eval()


def _perplexities(lm: LSTMLM, seqs: list[list[int]]) -> np.ndarray:
    out = []
    for s in seqs:
        ids = torch.tensor([s])
        out.append(float(lm.perplexity(ids, torch.ones_like(ids, dtype=torch.bool))))
    return np.array(out)


def _tune_on_dev(make, steps: tuple[int, ...], lrs: tuple[float, ...], energy, dev, test, labels, metric, bs, device):
    """For each N: the lr with the best dev score, then that (N, lr) on test (same for all instances)."""
    rows = {}
    for n in steps:
        best = max(lrs, key=lambda lr: evaluate_inference(energy, make(n, lr), dev, labels, metric, batch_size=bs,
                                                          device=device)["score"])
        m = evaluate_inference(energy, make(n, best), test, labels, metric, batch_size=bs, device=device)
        rows[str(n)] = {**m, "lr": best}
    return rows


def study_task(task_name: str, cfg: ApproxConfig, icfg: InfNetStageConfig, base: BaseConfig, ctx: StageContext) -> dict[str, Any]:
    root, device, seed = ctx.root, resolve_device(base.device), base.seed
    t0 = time.perf_counter()

    def done(what: str) -> None:
        tqdm.write(f"approx/{task_name}: {what} done at {time.perf_counter() - t0:.1f} s")
    task = load_tagging_task(ctx.path(base.prepared_dir) / task_name)
    labels, metric, bs = task.vocabs["label"], task.metric, cfg.batch_size
    n_test = cfg.max_test_sentences.get(task_name, 0)
    test = _subset(task, "test", n_test, seed)
    dev = _subset(task, "dev", cfg.max_dev_sentences, seed)
    out: dict[str, Any] = {"n_test": len(test), "metric": metric, "n_labels": len(labels)}
    energies = {name: load_energy(ctx.path(cfg.energy_dir) / task_name / name, name, task, device)
                for name in dict.fromkeys([cfg.table1_energy, cfg.energy])}

    # exact inference: the yardstick, per energy
    vit: dict[str, np.ndarray] = {}
    for name, energy in energies.items():
        m, inst = evaluate_inference(energy, Viterbi(), test, labels, metric, batch_size=bs, device=device, instances=True)
        out[f"{name}.viterbi"] = m
        vit[name] = inst["energy"]

    done("viterbi")

    # gradient descent with per-instance oracle tuning (both energies), sharded over Ray tasks
    for name in energies:
        gd = _gd_config(cfg, task_name)
        args = [{"root": str(root), "prepared_dir": base.prepared_dir, "task": task_name, "n_test": n_test,
                 "seed": seed, "device": base.device, "energy_dir": cfg.energy_dir, "energy": name, "gd": gd,
                 "start": a, "stop": b, "batch_size": bs} for a, b in shards(len(test), cfg.shard_size)]
        parts = sharded_map(_gd_shard, args, resources=cfg.resources, desc=f"{task_name}/{name} GD oracle shards")
        index = np.concatenate([p["index"] for p in parts])
        order = np.argsort(index)
        cat = {k: np.concatenate([p[k] for p in parts], axis=-1 if k != "counts" else -2) for k in ("counts", "energy", "relaxed_energy")}
        counts = torch.as_tensor(cat["counts"])[..., order, :]
        e = torch.as_tensor(cat["energy"])[..., order]
        r = torch.as_tensor(cat["relaxed_energy"])[..., order]
        sel = oracle_select(counts, e, lrs=gd["lrs"], checkpoints=gd["checkpoints"], relaxed_energy=r,
                            viterbi_energy=torch.as_tensor(vit[name]))
        out[f"{name}.gd_oracle"] = {str(row["N"]): {k: v for k, v in row.items() if k != "N"} for row in sel.rows()}
        out[f"{name}.gd_search_error"] = sel.full.search_error.numpy().tolist()
        C, R, K, n = e.shape
        table = pa.table({"instance": np.tile(np.arange(n), C * R * K),
                          "N": np.repeat(np.array(gd["checkpoints"]), R * K * n),
                          "restart": np.tile(np.repeat(np.arange(R), K * n), C),
                          "lr": np.tile(np.repeat(np.array(gd["lrs"]), n), C * R),
                          "correct": counts[..., 0].reshape(-1).numpy(), "predicted": counts[..., 1].reshape(-1).numpy(),
                          "gold": counts[..., 2].reshape(-1).numpy(), "energy": e.reshape(-1).numpy(),
                          "relaxed_energy": r.reshape(-1).numpy()})
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"{task_name}_{name}_gd_grid.parquet"
            pq.write_table(table, path, compression="zstd")
            ctx.tracker.log_artifact(path, "gd_grid")

    done("gradient descent oracle")

    # inference networks and local baselines (Table 1: every arch under the BLSTM-CRF energy;
    # Table 4/6: the task's arch under BLSTM-CRF+)
    nets: dict[str, torch.nn.Module] = {}
    for name, energy in energies.items():
        archs = icfg.archs if name == cfg.table1_energy else (cfg.arch.get(task_name, "blstm"),)
        for arch in archs:
            for mode in icfg.modes:
                net = _load_net(root, cfg, icfg, task, name, arch, mode, energy)
                nets[f"{name}.{arch}.{mode}"] = net
                m, inst = evaluate_inference(energy, InferenceNetwork(net), test, labels, metric, batch_size=bs,
                                             device=device, instances=True)
                m["search_error"] = float(np.mean(inst["energy"] - vit[name]))
                out[f"{name}.{arch}.{mode}"] = m
                if mode == "infnet":
                    out[f"{name}.{arch}.infnet_search_error"] = (inst["energy"] - vit[name]).tolist()

    done("inference networks")

    # Table 6: instance tailoring and warm starts on the BLSTM-CRF+ energy, tuned on dev
    arch = cfg.arch.get(task_name, "blstm")
    net = nets[f"{cfg.energy}.{arch}.infnet"]
    energy = energies[cfg.energy]
    out[f"{cfg.energy}.tailored"] = _tune_on_dev(
        lambda n, lr: TailoredInferenceNetwork(net, TailorConfig(n_steps=n, lr=lr, method="vmap")),
        cfg.tailor_steps, cfg.tailor_lrs, energy, dev, test, labels, metric, bs, device)
    out[f"{cfg.energy}.warm_start"] = _tune_on_dev(
        lambda n, lr: GradientDescent(lr=lr, iterations=n, seed=seed, warm_start=lambda e, b, p: warm_start_logits(net, b)),
        cfg.warm_start_steps, cfg.warm_start_lrs, energy, dev, test, labels, metric, bs, device)

    done("tailoring and warm starts")

    # Table 3: speed (examples/s) under the BLSTM-CRF energy, at batch size 10 and the fastest size
    e1 = energies[cfg.table1_energy]
    methods = {"viterbi": Viterbi(), "gd": GradientDescent(lr=100.0, iterations=cfg.speed_gd_iterations, seed=seed)}
    methods.update({a: InferenceNetwork(nets[f"{cfg.table1_energy}.{a}.infnet"]) for a in icfg.archs})
    sp = {}
    for mname, method in methods.items():
        per_bs = {b: speed(e1, method, test, b, device=device) for b in cfg.speed_batch_sizes}
        sp[mname] = {"bs10": per_bs.get(10, float("nan")), "fastest": max(per_bs.values()),
                     "fastest_bs": float(max(per_bs, key=per_bs.get))}
    out["speed"] = sp

    done("speed")

    # Sec. 6.2: Spearman of search error vs LM perplexity of the words and of the gold labels
    wv = task.vocabs["word"]
    words = [[wv.index(w.lower(), wv.unk_id) for w in s.words] for s in task.train.sentences]
    tags = [t for t in task.train.tags]
    lm_w = _train_lm(words, len(wv), cfg, seed)
    lm_t = _train_lm(tags, len(labels), cfg, seed)
    ppl_w = _perplexities(lm_w, [[wv.index(w.lower(), wv.unk_id) for w in s.words] for s in test.sentences])
    ppl_t = _perplexities(lm_t, test.tags)
    corr = {}
    for mname, err in {"infnet": out[f"{cfg.table1_energy}.blstm.infnet_search_error"] if "blstm" in icfg.archs else None,
                       "gd": out[f"{cfg.table1_energy}.gd_search_error"]}.items():
        if err is not None:
            corr[f"{mname}.words"] = spearman(ppl_w, np.asarray(err))
            corr[f"{mname}.labels"] = spearman(ppl_t, np.asarray(err))
    out["spearman"] = corr
    done("language models and Spearman")
    for k in [k for k in out if k.endswith("search_error") and isinstance(out[k], list)]:
        out[k] = float(np.mean(out[k]))            # keep the means in metrics; lists went into the study
    return out


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(ApproxConfig, "approx", params)
    icfg = load_section(InfNetStageConfig, "infnets", params)
    base = ctx.base
    metrics = {}
    for task in tqdm(cfg.tasks, desc="approx: tasks", unit="task"):
        with ctx.tracker.start_run(f"approx/{task}", parent_run_id=ctx.run_id, tags={"task": task}):
            metrics[task] = study_task(task, cfg, icfg, base, ctx)
            ctx.tracker.log_metrics(numeric(metrics[task]))
    return metrics


if __name__ == "__main__":
    main("approx")
