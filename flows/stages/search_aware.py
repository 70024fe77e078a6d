"""``search_aware`` stage: search-aware training of seq2seq taggers (Goyal et al. 2018; Goyal
thesis ch. 3-4), decoded greedily, by hard beam and by soft beam; report in ``reports/goyal_2018``.

Every (task, variant, seed) is one Ray Tune trial of one grid (both cores busy, one trial start
per configuration); inside a trial a seeded Optuna study tunes the variant's ``space`` (learning
rate, alpha annealing, decay strength k) on dev for ``trials`` trainings, each with early stopping
on dev under the decoding the variant is meant for (greedy for CE and scheduled sampling, hard
beam for the relaxed-beam objectives). The best training is then decoded greedily, by hard beam
and by soft beam on dev and test. Two grids run one after the other: the CE models first, then
every other variant — the relaxed-beam objectives start from the CE model of their task and seed
(the papers pretrain with CE); scheduled sampling trains from scratch, gold-fed in epoch 1.

Outputs: ``models/search_aware/<task>/<variant>/`` (the best seed, with its recipe; the CE model of
every seed under ``warm_start/``),
``metrics/search_aware.json`` (per task and variant: the dev-tuned settings and the mean / std
over seeds of each decoding's dev and test score), ``plots/search_aware/<task>.json`` (training
curves of the best seed) and the report.
"""
from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.config import (BaseConfig, ConfigError, ResourcesConfig, check_range, from_dict, load_section,
                               resolve_device)
from components.data.tasks import load_tagging_task
from components.inference.registry import INFERENCE
from components.models.step_scorer import StepScorer
from components.inference.evaluate_decoding import evaluate_decoding
from components.io import write_json
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.recipes import recipe
from components.reports.goyal_2018 import write_report
from components.training.registry import OBJECTIVES
from components.training.loop import TrainConfig, fit
from flows.lifecycle import work_dir
from flows.stages.common import StageContext, main
from flows.sweeps import copy_checkpoint, epoch_bar
from flows.tuning import check_space, objective_config, run_grid, suggest

DECODINGS = INFERENCE.names(needs="StepScorer")   # greedy, beam, soft_beam


@dataclass(frozen=True)
class VariantConfig:
    objective: str                                        # a step objective in OBJECTIVES
    config: dict[str, Any] = field(default_factory=dict)  # its config (strict)
    warm_start: bool = False                              # start from the task's CE model (variant ``ce``)
    tasks: tuple[str, ...] = ()                           # () = every task
    space: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Optuna space tuned on dev: ``lr`` or ``config.<dotted key of the objective's config>`` ->
    # {type: choice, values: [...]} | {type: loguniform|uniform, low: .., high: ..}


@dataclass(frozen=True)
class SearchAwareConfig:
    tasks: tuple[str, ...] = ("ner", "greek_morph_k400")
    beam_size: dict[str, int] = field(default_factory=dict)           # task -> k (default 3)
    max_train_sentences: dict[str, int] = field(default_factory=dict)  # task -> cap (0 / absent = all)
    max_dev_sentences: int = 0
    seeds: tuple[int, ...] = (0,)
    trials: int = 2                      # Optuna trainings per (task, variant, seed)
    decode_alpha: float = 10.0           # the soft beam's alpha for models not trained with one
    eval_batch_size: int = 64
    model: Seq2SeqTaggerConfig = Seq2SeqTaggerConfig()
    optim: TrainConfig = TrainConfig(lr=0.005, epochs=8, patience=3, batch_size=32)
    finetune: TrainConfig = TrainConfig(lr=0.001, epochs=4, patience=2, batch_size=32)
    variants: dict[str, VariantConfig] = field(default_factory=dict)
    max_concurrent: int = 2
    resources: ResourcesConfig = ResourcesConfig()
    models_dir: str = "models/search_aware"
    plots_dir: str = "plots/search_aware"
    report_dir: str = "reports/goyal_2018"

    def __post_init__(self):
        check_range(self, positive=("beam_size", "decode_alpha", "eval_batch_size", "max_concurrent"),
                    nonnegative=("max_train_sentences", "max_dev_sentences", "seeds"))     # 0 = all


def load_config(params: dict[str, Any]) -> SearchAwareConfig:
    """The section, strictly, with every variant's objective config and space checked before Ray
    starts: an unknown objective, config key or space key is a ``ConfigError`` naming it."""
    cfg = load_section(SearchAwareConfig, "search_aware", params)
    variants = {n: v if isinstance(v, VariantConfig) else from_dict(VariantConfig, v, where=f"search_aware.variants.{n}")
                for n, v in cfg.variants.items()}
    if "ce" not in variants:
        raise ConfigError("search_aware.variants: the CE baseline 'ce' is required (it warm-starts the others)")
    for name, v in variants.items():
        where = f"search_aware.variants.{name}"
        if v.objective not in OBJECTIVES or OBJECTIVES[v.objective].meta["structure"] != "steps":
            steps = [n for n, e in OBJECTIVES.items() if e.meta["structure"] == "steps"]
            raise ConfigError(f"{where}.objective: {v.objective!r} is not a step objective; expected one of {steps}")
        OBJECTIVES.config(v.objective, v.config, where=f"{where}.config")
        check_space(v.space, f"{where}.space", lambda values, w, v=v: objective_config(v.objective, v.config, values, w))
        bad = [t for t in v.tasks if t not in cfg.tasks]
        if bad:
            raise ConfigError(f"{where}.tasks: {bad} are not in search_aware.tasks {list(cfg.tasks)}")
    if not cfg.seeds:
        raise ConfigError("search_aware.seeds: at least one seed")
    if cfg.trials < 1:
        raise ConfigError(f"search_aware.trials must be >= 1, got {cfg.trials}")
    for k in cfg.beam_size.values():
        if k < 1:
            raise ConfigError(f"search_aware.beam_size: every k must be >= 1, got {dict(cfg.beam_size)}")
    return dataclasses.replace(cfg, variants=variants)


def _alpha_of(obj_cfg: Any, epoch: int) -> float | None:
    alpha = getattr(obj_cfg, "alpha", None)
    return alpha.at(epoch) if alpha is not None else None


# -- one trial: (task, variant, seed) ---------------------------------------------------------------
def _warm_start(models: Path, task: str, seed: int) -> Path:
    """Where the CE model of (task, seed) waits for the variants that start from it: in the stage's
    working folder during the run (``models`` = ``work_dir``), in the models folder at its end."""
    return models / task / "warm_start" / f"ce.seed{seed}"


def _decoder(name: str, k: int, alpha: float) -> Any:
    """The ``INFERENCE`` decoder ``name`` with the task's beam size (and the soft beam's alpha)."""
    cfg = {"greedy": {}, "beam": {"k": k}, "soft_beam": {"k": k, "alpha": alpha}}[name]
    return INFERENCE.build(name, cfg)


def trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable over ``config["run"] = {task, variant, seed}``."""
    import optuna
    from ray import tune

    run = config["run"]
    task_name, variant, seed = run["task"], run["variant"], int(run["seed"])
    base = load_section(BaseConfig, "base", params)
    cfg = load_config(params)
    v = cfg.variants[variant]
    device = resolve_device(base.device)
    rootp = Path(root)
    task = load_tagging_task(rootp / base.prepared_dir / task_name,
                             max_train_sentences=cfg.max_train_sentences.get(task_name, 0), seed=base.seed)
    dev = task.dev.subset(np.arange(min(len(task.dev), cfg.max_dev_sentences))) if cfg.max_dev_sentences else task.dev
    labels = task.vocabs["label"]
    k = cfg.beam_size.get(task_name, 3)
    o_id = labels.tokens.index("O") if "O" in labels.tokens else -1
    entry = OBJECTIVES[v.objective]
    tune_on = entry.meta["prediction"]                 # greedy | beam
    optim = cfg.finetune if v.warm_start else cfg.optim
    n_batches = -(-len(task.train) // optim.batch_size)
    warm = _warm_start(work_dir(rootp, "search_aware"), task_name, seed) / "model.pt"
    if v.warm_start and not warm.exists():
        raise FileNotFoundError(f"{warm}: the CE model this variant warm-starts from (variant 'ce' runs first)")

    def build() -> Seq2SeqTagger:
        model = Seq2SeqTagger(cfg.model, **task.sizes, glove_ids=task.glove_ids, glove_vectors=task.glove_vectors, seed=seed)
        if v.warm_start:
            model.load_state_dict(torch.load(warm, map_location="cpu", weights_only=True))
        return model.to(device)

    def train(values: dict[str, Any], on_epoch=None, on_batch=None):
        torch.manual_seed(seed)
        obj_cfg = objective_config(v.objective, v.config, values, where=f"search_aware.variants.{variant}")
        if hasattr(obj_cfg, "k"):                      # the relaxed beam searches with the task's beam size
            obj_cfg = dataclasses.replace(obj_cfg, k=k)
        objective = OBJECTIVES.build(v.objective, obj_cfg, updates_per_epoch=n_batches, seed=seed, o_id=o_id)
        model = build()
        tcfg = dataclasses.replace(optim, lr=float(values.get("lr", optim.lr)))

        method = _decoder(tune_on, k, cfg.decode_alpha)        # greedy or hard beam: no alpha involved

        def evaluate(m) -> dict[str, float]:
            return evaluate_decoding(m, method, dev, labels, task.metric, batch_size=cfg.eval_batch_size,
                                     device=device)

        state = fit(model, objective,
                    lambda epoch: task.train.batches(optim.batch_size, shuffle=True, seed=seed * 1000 + epoch, device=device),
                    n_batches, evaluate, tcfg, on_epoch=on_epoch, on_batch=on_batch)
        return model, state, obj_cfg, objective

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    best: dict[str, Any] = {}
    n_trials = cfg.trials if v.space else 1
    t_start = time.perf_counter()
    for i in range(n_trials):
        ot = study.ask()
        values = suggest(ot, v.space)
        so_far = best.get("score", -math.inf)
        model, state, obj_cfg, objective = train(values, on_epoch=lambda s, r, i=i, b=so_far: tune.report(
            {"optuna_trial": float(i), "epoch": r["epoch"], "dev_score": r["dev_score"], "train_loss": r["train_loss"],
             "best_dev_score": max(b, s.best_score)}), on_batch=epoch_bar(f"{task_name}/{variant} ({i + 1}/{n_trials})"))
        study.tell(ot, state.best_score)
        if not best or state.best_score > best["score"]:
            best = {"score": state.best_score, "values": values, "state": state, "obj_cfg": obj_cfg,
                    "weights": {n: t.detach().cpu().clone() for n, t in model.state_dict().items()},
                    "final_alpha": _alpha_of(obj_cfg, state.best_epoch) if entry.meta["feed"] == "soft beam" else None}
    tuning_seconds = time.perf_counter() - t_start

    model = build()
    model.load_state_dict(best["weights"])
    model.eval()
    alpha = best["final_alpha"] or cfg.decode_alpha
    scores: dict[str, dict[str, float]] = {"dev": {}, "test": {}}
    with torch.no_grad():
        for split, ds in (("dev", task.dev), ("test", task.test)):
            for name in DECODINGS:
                scores[split][name] = evaluate_decoding(model, _decoder(name, k, alpha), ds, labels, task.metric,
                                                        batch_size=cfg.eval_batch_size, device=device)["score"]
    history = best["state"].history
    epoch_s = [h["train_seconds"] for h in history]
    with tempfile.TemporaryDirectory() as d:
        torch.save(best["weights"], Path(d) / "model.pt")
        meta = {"task": task_name, "variant": variant, "seed": seed, "objective": v.objective,
                "config": dataclasses.asdict(best["obj_cfg"]), "tuned": best["values"],
                "recipe": recipe("seq2seq", "seq2seq", cfg.model, task.sizes), "history": history,
                "scores": scores, "beam_size": k, "decode_alpha": alpha}
        (Path(d) / "model.json").write_text(json.dumps(meta, indent=2, default=str))
        tune.report({"best_dev_score": best["score"], "best_epoch": float(best["state"].best_epoch),
                     "epochs_run": float(best["state"].epoch), "seconds_per_epoch": float(np.mean(epoch_s)),
                     "tuning_seconds": tuning_seconds,
                     **{f"{split}_{name}": s for split in scores for name, s in scores[split].items()}},
                    checkpoint=tune.Checkpoint.from_directory(d))


# -- the stage ---------------------------------------------------------------------------------------
def _grid(cfg: SearchAwareConfig, variants: list[str]) -> list[dict[str, Any]]:
    return [{"task": t, "variant": name, "seed": s} for name in variants for t in cfg.tasks
            if not cfg.variants[name].tasks or t in cfg.variants[name].tasks for s in cfg.seeds]


def _aggregate(cfg: SearchAwareConfig, task: str, name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    v = cfg.variants[name]
    obj_cfg = OBJECTIVES.config(v.objective, v.config)
    metas = [json.loads((Path(r["checkpoint"]) / "model.json").read_text()) for r in runs]
    best_i = int(np.argmax([r["metrics"]["best_dev_score"] for r in runs]))
    alpha = getattr(obj_cfg, "alpha", None)
    decay = getattr(obj_cfg, "decay_k", None)
    tuned_decay = "config.decay_k" in v.space
    out = {"objective": v.objective, "feed": OBJECTIVES[v.objective].meta["feed"] if v.objective != "seq_ce" else "gold",
           "alpha": "none" if alpha is None else ("annealed" if alpha.annealed else "fixed"),
           "decay_k": None if decay is None or tuned_decay else (-1.0 if decay == 0 else float(decay)),
           "config": {f"seed{m['seed']}.{k}": val for m in metas for k, val in m["tuned"].items()},
           "seeds": len(runs), "warm_start": v.warm_start}
    if v.objective in ("scheduled_sampling", "soft_scheduled_sampling"):
        out["feed"] = obj_cfg.feed
    for split in ("dev", "test"):
        vals = {d: [r["metrics"][f"{split}_{d}"] for r in runs] for d in DECODINGS}
        out[split] = {d: float(np.mean(x)) for d, x in vals.items()}
        out[f"{split}_std"] = {d: float(np.std(x)) for d, x in vals.items()}
    for key in ("epochs_run", "best_epoch", "seconds_per_epoch", "tuning_seconds"):
        out[key] = float(np.mean([r["metrics"][key] for r in runs]))
    out["failed"] = bool(out["dev"][OBJECTIVES[v.objective].meta["prediction"]] <= 0.0)
    out["failure"] = "dev score 0: the model did not learn" if out["failed"] else ""
    out["best_seed"] = runs[best_i]["run"]["seed"]
    out["_best"] = runs[best_i]["checkpoint"]
    out["_curve"] = metas[best_i]["history"]
    return out


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_config(params)
    for task in cfg.tasks:
        if not (ctx.path(ctx.base.prepared_dir) / task / "meta.json").exists():
            raise FileNotFoundError(f"search_aware.tasks: task {task!r} has not been prepared "
                                    f"(is it under prepare.tasks in params.yaml?)")
    models = ctx.path(cfg.models_dir)
    runs = run_grid(ctx, params, trial, "ce", _grid(cfg, ["ce"]), max_concurrent=cfg.max_concurrent,
                    resources=cfg.resources)
    for r in runs:                                # the warm starts of the second grid
        copy_checkpoint(Path(r["checkpoint"]), _warm_start(ctx.work, r["run"]["task"], r["run"]["seed"]))
    others = [n for n in cfg.variants if n != "ce"]
    if others:
        runs += run_grid(ctx, params, trial, "variants", _grid(cfg, others), max_concurrent=cfg.max_concurrent,
                         resources=cfg.resources)

    metrics: dict[str, Any] = {"tasks": {}}
    for task in cfg.tasks:
        t = load_tagging_task(ctx.path(ctx.base.prepared_dir) / task,
                              max_train_sentences=cfg.max_train_sentences.get(task, 0), seed=ctx.base.seed)
        labels = t.vocabs["label"]
        entry: dict[str, Any] = {"metric": t.metric, "n_labels": len(labels),
                                 "top_k_labels": int(t.meta.get("top_k_labels", 0)),
                                 "beam_size": cfg.beam_size.get(task, 3), "n_train": len(t.train),
                                 "n_dev_tuning": min(len(t.dev), cfg.max_dev_sentences or len(t.dev)),
                                 "variants": {}, "curves": {}}
        for name in cfg.variants:
            mine = [r for r in runs if r["run"]["task"] == task and r["run"]["variant"] == name]
            if not mine:
                continue
            agg = _aggregate(cfg, task, name, mine)
            copy_checkpoint(Path(agg.pop("_best")), models / task / name)
            entry["curves"][name] = [{"epoch": h["epoch"], "train_loss": h["train_loss"], "dev_score": h["dev_score"]}
                                     for h in agg.pop("_curve")]
            entry["variants"][name] = agg
        for r in runs:                            # every grid finished: the warm starts join the models
            if r["run"]["task"] == task and r["run"]["variant"] == "ce":
                copy_checkpoint(_warm_start(ctx.work, task, r["run"]["seed"]), _warm_start(models, task, r["run"]["seed"]))
        metrics["tasks"][task] = entry
    for task, entry in metrics["tasks"].items():
        write_json(ctx.path(cfg.plots_dir) / f"{task}.json", entry["curves"])
    files = write_report(metrics, ctx.path(cfg.report_dir))
    for path in files.values():
        ctx.tracker.log_artifact(Path(path), "report")
    for task, entry in metrics["tasks"].items():
        entry.pop("curves")
    return metrics


if __name__ == "__main__":
    main("search_aware")
