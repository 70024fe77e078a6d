"""Stage ``mcmc``: masked LMs as energies, sampled by many parallel Metropolis–Hastings chains
(thesis ch. 6, Sec. 6.6–6.8), and the chapter's report ``reports/goyal_mlm/``.

The conditional MLM of the ``cmlm`` stage is read as two energies (``ENERGIES``: ``mlm_raw``,
``mlm_norm``) and sampled, for the test verses whose source has at most
``mcmc.data.max_source_words`` words (the thesis: 20), at the target length the model predicts:

- ``main`` (Figure 6.2): MH with E_raw, MH with E_norm, the degenerate Gibbs sampler (``deg``);
- ``temperature`` / ``nucleus`` (Tables 6.2, 6.3): norm and deg under tempered / nucleus proposals;
- ``block`` (Table 6.4, Figure 6.3): block MH (raw, norm) and block Gibbs, block size annealed;
- ``anneal`` (Table 6.5, Figure 6.4): MH with the target's temperature lowered every sweep;
- ``full`` (Table 6.6): warm-started, tempered proposals, annealed target, on ``full_sentences``,
  against mask-predict and the warm start itself.

Every configuration runs ``chains`` chains per sentence for ``burn_in + sweeps`` sweeps (one sweep
= every position once, in a random order). Configurations x sentence chunks are shards: Ray tasks
(``flows.parallel.sharded_map``, a GPU each where present), each vectorised over its chains and
sentences; a configuration identical to another (temperature 1 or nucleus 1 = main) is run once.

Outputs: ``data/mcmc/traces.parquet`` (one row per run, sweep, chain and sentence: energy, E_norm,
accepted, novel, Hamming distance to the start, text, sentence BLEU; also logged to MLflow),
``metrics/mcmc.json`` (per configuration: means over the sampling sweeps, per-sweep curves, corpus
BLEU, R-hat / ESS of the energy traces; the baselines), and the report, which also reads
``metrics/mlm_exact.json``.
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from components.config import ConfigError, check_range, field_error, from_dict, load_section, resolve_device
from components.data.translation import TranslationConfig, load_translation_task
from components.inference.chains import ShardSpec, run_shard, summarise_run
from components.inference.mask_predict import MaskPredictConfig
from components.inference.mcmc import SAMPLERS
from components.io import atomic_path
from components.reports.goyal_mlm import write_report
from components.training.cmlm import decode_bleu, load_cmlm, predict_lengths
from flows.parallel import sharded_map
from flows.stages.common import StageContext, main
from flows.sweeps import ResourcesConfig

SCHEMES = {"raw": ("mh_mlm", "raw"), "norm": ("mh_mlm", "norm"), "deg": ("gibbs_mlm", "norm")}


@dataclass(frozen=True)
class MCMCDataConfig:
    max_source_words: int = 20          # the thesis' De-En (20)
    sentences: int = 8                  # test verses sampled by every configuration but `full`
    shortest: bool = False              # the verses with the shortest predicted targets (else random; both sets)
    full_sentences: int = 32            # Table 6.6's set (0: the whole test set)
    seed: int = 0                       # which verses

    def __post_init__(self):
        check_range(self, positive=("max_source_words", "sentences"), nonnegative=("full_sentences", "seed"))


@dataclass(frozen=True)
class MCMCRunsConfig:
    temperatures: tuple[float, ...] = (2.0, 1.5, 1.0, 0.8, 0.5)     # Table 6.2
    nuclei: tuple[float, ...] = (1.0, 0.99, 0.95, 0.9, 0.8)        # Table 6.3
    block_size: int = 4                 # Table 6.4: annealed linearly from this ...
    block_anneal_sweeps: int = 20       # ... to 1 at this sweep
    anneal_steps: tuple[float, ...] = (0.02, 0.04, 0.06)          # Table 6.5
    min_temperature: float = 0.05
    full_proposal_temperature: float = 0.8     # Table 6.6's setup
    full_anneal_step: float = 0.02
    full_accept_first: int = 2

    def __post_init__(self):
        check_range(self, positive=("temperatures", "block_size", "block_anneal_sweeps", "anneal_steps",
                                    "min_temperature", "full_proposal_temperature"),
                    nonnegative=("full_anneal_step", "full_accept_first"), within={"nuclei": "(0, 1]"})


@dataclass(frozen=True)
class MCMCStageConfig:
    data: MCMCDataConfig = MCMCDataConfig()
    runs: MCMCRunsConfig = MCMCRunsConfig()
    chains: int = 5                     # >= 5 per configuration (the thesis)
    burn_in: int = 7
    sweeps: int = 26
    seed: int = 0                       # the samplers' generators (every configuration: the same starts)
    shard_sentences: int = 4            # sentences per shard
    max_rows: int = 0                   # energy pass chunking (0: one pass)
    mask_predict: MaskPredictConfig = MaskPredictConfig()
    resources: ResourcesConfig = ResourcesConfig(cpu=1, gpu="auto")
    model_dir: str = "models/cmlm"
    traces: str = "data/mcmc/traces.parquet"
    exact_metrics: str = "metrics/mlm_exact.json"
    report_dir: str = "reports/goyal_mlm"

    def __post_init__(self):
        check_range(self, positive=("chains", "sweeps", "shard_sentences"), nonnegative=("burn_in", "seed", "max_rows"))
        # the R-hat / ESS of every run's summary (components.inference.diagnostics) need these: fail here, not
        # after the sampling
        if self.chains < 2:
            raise field_error(self, "chains", f"must be >= 2 (R-hat compares chains), got {self.chains}")
        if self.sweeps < 4:
            raise field_error(self, "sweeps", f"must be >= 4 sampling sweeps (R-hat / ESS), got {self.sweeps}")


def load_config(params: dict[str, Any]) -> MCMCStageConfig:
    cfg = load_section(MCMCStageConfig, "mcmc", params)
    for run in design(cfg):                              # every sampler config is valid before any work
        SAMPLERS.config(run["sampler"], run["config"], where=f"mcmc run {run['name']}")
    return cfg


def design(cfg: MCMCStageConfig) -> list[dict[str, Any]]:
    """The configurations: ``name, group, value, scheme, block, sampler, config, energy, set``."""
    r = cfg.runs
    out: list[dict[str, Any]] = []

    def add(group: str, value: Any, scheme: str, block: str = "single", sset: str = "short", **over: Any) -> None:
        sampler, energy = SCHEMES[scheme]
        c: dict[str, Any] = {"seed": cfg.seed, "init": "uniform", **over}
        if sampler == "gibbs_mlm":
            for k in ("temperature", "anneal_step", "min_temperature", "accept_first_sweeps"):
                c.pop(k, None)
        name = f"{group}/{scheme}" + ("" if value is None else f"/{value}")
        out.append({"name": name, "group": group, "value": value, "scheme": scheme, "block": block,
                    "sampler": sampler, "config": c, "energy": energy, "set": sset})

    for s in ("raw", "norm", "deg"):
        add("main", None, s)
    for t in r.temperatures:
        for s in ("norm", "deg"):
            add("temperature", t, s, proposal_temperature=t)
    for p in r.nuclei:
        for s in ("norm", "deg"):
            add("nucleus", p, s, top_p=p)
    for s in ("deg", "raw", "norm"):
        add("block", None, s, block="annealed", block_size=r.block_size, block_size_final=1,
            block_anneal_sweeps=r.block_anneal_sweeps, clip_block=True)
    for a in r.anneal_steps:
        for s in ("norm", "raw"):
            add("anneal", a, s, anneal_step=a, min_temperature=r.min_temperature)
    for s in ("deg", "norm", "raw"):
        add("full", None, s, sset="full", init="warm", proposal_temperature=r.full_proposal_temperature,
            anneal_step=r.full_anneal_step, min_temperature=r.min_temperature,
            accept_first_sweeps=r.full_accept_first)
    return out


def _key(run: dict[str, Any]) -> str:
    """Runs with the same sampler, energy, sentences and (default-filled) config are one run."""
    full = dataclasses.asdict(SAMPLERS.config(run["sampler"], run["config"]))
    return json.dumps([run["sampler"], run["energy"], run["set"], full], sort_keys=True)


def _select(ds: Any, max_words: int, n: int, seed: int, lengths: list[int] | None = None) -> list[int]:
    """Indices (sorted) of up to ``n`` test verses with at most ``max_words`` source words: with
    ``lengths`` (the predicted target length of every verse), the ``n`` shortest targets, ties in a
    seeded random order (sampling costs O(T^3) a sweep); else a seeded random ``n`` (0: all)."""
    short = [i for i, w in enumerate(ds.src_lengths.tolist()) if w <= max_words]
    g = torch.Generator().manual_seed(seed)
    order = [short[i] for i in torch.randperm(len(short), generator=g).tolist()]
    if lengths is not None:
        order.sort(key=lambda i: lengths[i])                  # stable: the seeded order breaks ties
    return sorted(order[:n] if n else order)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_config(params)
    data_cfg = _cmlm_data(params)                         # the cmlm stage's data: its vocabularies
    model_dir = ctx.path(cfg.model_dir)
    device = resolve_device(ctx.base.device)
    model = load_cmlm(model_dir, device=device)
    task = load_translation_task(ctx.path(ctx.base.prepared_dir) / "greek_english", model_dir / "vocab", data_cfg,
                                 seed=ctx.base.seed)
    if task.stats.get("vocab_trained"):
        raise RuntimeError(f"mcmc: the subword vocabularies in {model_dir / 'vocab'} do not match cmlm.data: "
                           "re-run the cmlm stage")
    test = task.test
    t0 = time.perf_counter()
    predicted = predict_lengths(model, test, batch_size=64)     # the chains' lengths: the model's own
    sets = {"short": _select(test, cfg.data.max_source_words, cfg.data.sentences, cfg.data.seed,
                             predicted if cfg.data.shortest else None),
            "full": _select(test, 10 ** 9, cfg.data.full_sentences, cfg.data.seed,
                            predicted if cfg.data.shortest and cfg.data.full_sentences else None)}
    if not sets["short"]:
        raise ValueError(f"mcmc: no test verse has <= {cfg.data.max_source_words} source words")
    lengths, baselines = {}, {}
    for name, idx in sets.items():
        sub = test.subset(idx)
        lengths[name] = [predicted[i] for i in idx]
        mp = decode_bleu(model, sub, task.tgt_vocab, cfg.mask_predict, batch_size=64)
        warm = decode_bleu(model, sub, task.tgt_vocab, dataclasses.replace(cfg.mask_predict, iterations=1,
                                                                            length_candidates=1), batch_size=64)
        baselines[name] = {"mask_predict": {"bleu": mp["bleu"], "iterations": cfg.mask_predict.iterations,
                                            "length_candidates": cfg.mask_predict.length_candidates},
                           "warm_start": {"bleu": warm["bleu"]}}
    runs = design(cfg)
    unique: dict[str, dict[str, Any]] = {}
    for r in runs:
        unique.setdefault(_key(r), r)
    refs_all, vids = test.references, test.verse_ids
    specs = []
    threads = max(1, int(cfg.resources.cpu))
    for key, r in unique.items():
        idx = sets[r["set"]]
        for s in range(0, len(idx), cfg.shard_sentences):
            chunk = idx[s:s + cfg.shard_sentences]
            specs.append(ShardSpec(
                run=key, model_dir=str(model_dir), sampler=r["sampler"], sampler_config=r["config"],
                energy=r["energy"], chains=cfg.chains, steps=cfg.burn_in + cfg.sweeps,
                sources=tuple(tuple(test.src_ids[i]) for i in chunk),
                lengths=tuple(lengths[r["set"]][s:s + cfg.shard_sentences]),
                references=tuple(refs_all[i] for i in chunk),
                sentence_ids=tuple(vids[i] for i in chunk),
                device=str(device), threads=threads, max_rows=cfg.max_rows))
    results = sharded_map(run_shard, specs, resources=cfg.resources, desc="mcmc shards")
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rows in results:
        for row in rows:
            by_key[row["run"]].append(row)
    refs = dict(zip(vids, refs_all))
    summaries = {key: summarise_run(by_key[key], refs, burn_in=cfg.burn_in) for key in unique}
    out_runs = []
    for r in runs:
        s = summaries[_key(r)]
        out_runs.append({k: r[k] for k in ("name", "group", "value", "scheme", "block", "sampler", "energy", "set")}
                        | {"config": r["config"]} | s)
    frame = pd.DataFrame([row | {"run": unique[row["run"]]["name"]} for key in unique for row in by_key[key]])
    traces = ctx.path(cfg.traces)
    traces.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(traces) as tmp:
        frame.to_parquet(tmp, index=False)
    ctx.tracker.log_artifact(traces, "mcmc")
    model_info = json.loads((ctx.path("metrics") / "cmlm.json").read_text()) if (ctx.path("metrics") / "cmlm.json").exists() else {}
    metrics = {
        "model": {"dev_masked_loss": model_info.get("dev", {}).get("token_loss"),
                  "dev_unigram_loss": model_info.get("dev", {}).get("unigram_loss"),
                  "dev_length_accuracy": model_info.get("dev", {}).get("length_acc"),
                  "dev_bleu_mask_predict": (model_info.get("dev_bleu_mask_predict") or {}).get("bleu"),
                  "n_train": len(task.train), **task.sizes},
        "settings": {"chains": cfg.chains, "burn_in": cfg.burn_in, "sweeps": cfg.sweeps,
                     "sentences": len(sets["short"]), "max_source_len": cfg.data.max_source_words,
                     "full_sentences": len(sets["full"]), "test_sentences": len(test),
                     "distinct_runs": len(unique), "shards": len(specs), "seed": cfg.seed},
        "runs": out_runs,
        "baselines": baselines["full"],
        "baselines_short": baselines["short"],
        "sampling_minutes": (time.perf_counter() - t0) / 60.0,
    }
    ctx.tracker.log_metrics({f"{r['name']}.{k}": r[k] for r in out_runs for k in ("e_norm", "accept", "novel", "bleu")
                             if isinstance(r.get(k), (int, float))})
    exact_path = ctx.path(cfg.exact_metrics)
    exact = json.loads(exact_path.read_text()) if exact_path.exists() else None
    files = write_report(exact, metrics, ctx.path(cfg.report_dir))
    for p in files.values():
        ctx.tracker.log_artifact(Path(p), "goyal_mlm")
    return metrics


def _cmlm_data(params: dict[str, Any]) -> TranslationConfig:
    try:
        return from_dict(TranslationConfig, params["cmlm"]["data"], where="cmlm.data")
    except KeyError:
        raise ConfigError("params: the mcmc stage reads cmlm.data (the vocabularies' settings), which is missing") from None


if __name__ == "__main__":
    main("mcmc")
