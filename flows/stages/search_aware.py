"""``search_aware`` stage: search-aware training of seq2seq taggers (Goyal et al. 2018; Goyal
thesis ch. 3-4), decoded greedily, by hard beam and by soft beam; its report is the stage
``report_goyal_2018`` (``reports/goyal_2018``), which reads what this stage writes.

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
over seeds of each decoding's dev and test score), ``metrics/stats/search_aware/<task>.npz`` (the
per-sentence test statistics of every ``<variant>/<decoding>``, ``[seeds, n, d]`` with several
replicates, and the ``majority/constant`` baseline: the inputs of every verdict's paired-bootstrap
interval) and ``plots/search_aware/<task>.json`` (training curves of the best seed).

Did-not-learn guard (as ``scaling`` and the studies treat such runs: recorded as failed, the stage
goes on): a variant whose dev score is 0, or whose mean test score under the decoding it is trained
for is not above the majority-tag baseline's (``components.training.screen.majority_tag_stats``;
``components.training.guard.check_learned``), is ``failed`` with its reason; the report shows it as
no table cell and makes every claim that needs it *not testable*. An annealed-α run is kept only
from an epoch where α has left its start (``fit(selectable=...)``); a variant with a replicate where
no such epoch exists is recorded with ``no_selectable_epoch`` and its claims are *not testable*.
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.config import (BaseConfig, ConfigError, ResourcesConfig, check_range, from_dict, load_section,
                               resolve_device)
from components.data.tasks import load_tagging_task
from components.inference.evaluate_decoding import evaluate_decoding
from components.inference.registry import INFERENCE
from components.io import npz_bytes, write_json
from components.metrics.run_facts import results_only
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.recipes import recipe
from components.metrics.sentence_stats import save_stats
from components.metrics.tagging import stats_columns, stats_score
from components.seeds import seed_for
from components.training.guard import DidNotLearn, check_learned
from components.training.loop import TrainConfig, fit
from components.training.screen import majority_tag_stats
from components.training.registry import OBJECTIVES
from flows.lifecycle import work_dir
from flows.ray_runtime import copy_checkpoint, report_final, tensor_bytes
from flows.search_space import check_sweep_space, with_values
from flows.stages.common import StageContext, main
from flows.tuning import run_grid, tune_in_trial

STATS_FILE = "test_stats.npz"     # a trial's per-sentence test statistics, one array per decoding


@dataclass(frozen=True)
class VariantConfig:
    objective: str                                        # a step objective in OBJECTIVES
    config: dict[str, Any] = field(default_factory=dict)  # its config (strict)
    warm_start: bool = False                              # start from the task's CE model (variant ``ce``)
    tasks: tuple[str, ...] = ()                           # () = every task
    space: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Optuna space tuned on dev, in dotted params keys (``search_aware.optim.lr``,
    # ``search_aware.variants.<name>.config.decay_k``) -> {type: choice, values: [...]} |
    # {type: loguniform|uniform, low: .., high: ..}


@dataclass(frozen=True)
class SearchAwareConfig:
    tasks: tuple[str, ...] = ("ner", "greek_morph_k400")
    beam_size: dict[str, int] = field(default_factory=dict)           # task -> k (default 3)
    max_train_sentences: dict[str, int] = field(default_factory=dict)  # task -> cap (0 / absent = all)
    max_dev_sentences: int = 300         # dev sentences for tuning and early stopping (reported dev scores use all)
    seeds: tuple[int, ...] = (0,)        # replicate indices (components.seeds names them), not seeds
    trials: int = 2                      # Optuna trainings per (task, variant, replicate) over the variant's space
    decodings: tuple[str, ...] = ("greedy", "beam", "soft_beam")   # step decoders (INFERENCE names), each model
    decode_alpha: float = 10.0           # the soft beam's alpha for models not trained through it
    eval_batch_size: int = 64
    model: Seq2SeqTaggerConfig = Seq2SeqTaggerConfig()
    optim: TrainConfig = TrainConfig(lr=0.01, epochs=8, patience=3, batch_size=64)      # from scratch: CE, SS
    finetune: TrainConfig = TrainConfig(lr=0.001, epochs=4, patience=2, batch_size=64)  # from CE: DL, hinge
    variants: dict[str, VariantConfig] = field(default_factory=dict)
    max_concurrent: int = 2
    resources: ResourcesConfig = ResourcesConfig()
    models_dir: str = "models/search_aware"
    plots_dir: str = "plots/search_aware"
    stats_dir: str = "metrics/stats/search_aware"    # <task>.npz: test statistics of every <variant>/<decoding>

    def __post_init__(self):
        check_range(self, positive=("beam_size", "decode_alpha", "eval_batch_size", "max_concurrent"),
                    nonnegative=("max_train_sentences", "max_dev_sentences", "seeds"))     # 0 = all


def load_config(params: dict[str, Any]) -> SearchAwareConfig:
    """The section, strictly, with every variant's objective config and space checked before Ray
    starts: an unknown objective, decoding, config key or space key is a ``ConfigError`` naming it."""
    cfg = load_section(SearchAwareConfig, "search_aware", params)
    variants = {n: v if isinstance(v, VariantConfig) else from_dict(VariantConfig, v, where=f"search_aware.variants.{n}")
                for n, v in cfg.variants.items()}
    if "ce" not in variants:
        raise ConfigError("search_aware.variants: the CE baseline 'ce' is required (it warm-starts the others)")
    INFERENCE.check(cfg.decodings, "search_aware.decodings")
    bad = [d for d in cfg.decodings if INFERENCE[d].meta["needs"] != "StepScorer"]
    if bad or not cfg.decodings:
        raise ConfigError(f"search_aware.decodings: {list(cfg.decodings)} must name step decoders, "
                          f"{list(INFERENCE.names(needs='StepScorer'))}")
    for name, v in variants.items():
        where = f"search_aware.variants.{name}"
        if v.objective not in OBJECTIVES or OBJECTIVES[v.objective].meta["structure"] != "steps":
            steps = [n for n, e in OBJECTIVES.items() if e.meta["structure"] == "steps"]
            raise ConfigError(f"{where}.objective: {v.objective!r} is not a step objective; expected one of {steps}")
        OBJECTIVES.config(v.objective, v.config, where=f"{where}.config")
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
    check_task_maps(cfg, params)
    return dataclasses.replace(cfg, variants=variants)


#: the section's per-task maps (task -> value; a task not named takes the default)
TASK_MAPS = ("beam_size", "max_train_sentences")


def check_task_maps(cfg: SearchAwareConfig, params: dict[str, Any]) -> None:
    """Every key of a per-task map (:data:`TASK_MAPS`) names a task: one of ``search_aware.tasks``,
    or a task declared under ``prepare.tasks`` (a setting kept for a task a scale adds, as
    params.yaml keeps ``beam_size.greek_morph_k400`` for the study scale). A misspelled task would
    otherwise leave its task at the default without a word."""
    declared = (params.get("prepare") or {}).get("tasks") or {}
    known = set(cfg.tasks) | (set(declared) if isinstance(declared, dict) else set())
    for name in TASK_MAPS:
        for task in getattr(cfg, name):
            if task not in known:
                others = sorted(known - set(cfg.tasks))
                raise ConfigError(f"search_aware.{name}.{task}: {task!r} is not a task: search_aware.tasks is "
                                  f"{list(cfg.tasks)}" + (f", and prepare.tasks adds {others}" if others else "")
                                  + " (misspelled?)")


def check_config(params: dict[str, Any]) -> SearchAwareConfig:
    """:func:`load_config`, and every variant's space: each key a setting of the section, every
    value it can take valid (before Ray starts)."""
    cfg = load_config(params)
    for name, v in cfg.variants.items():
        check_sweep_space(v.space, params, "search_aware", load_config, where=f"search_aware.variants.{name}.space")
    return cfg


# -- one trial: (task, variant, replicate) ----------------------------------------------------------
def _warm_start(models: Path, task: str, replicate: int) -> Path:
    """Where the CE model of (task, replicate) waits for the variants that start from it: in the
    stage's working folder during the run (``models`` = ``work_dir``), in the models folder at its end."""
    return models / task / "warm_start" / f"ce.seed{replicate}"


def trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable over ``config["run"] = {task, variant, seed}`` (``seed``: the
    replicate index). Seeds (``components.seeds``): the model's initialisation and the batch order
    are named by (task, replicate) — every variant of a replicate starts alike (paired comparisons)
    — the objective's sampling and the Optuna study by the variant too."""
    from ray import tune

    run = config["run"]
    task_name, variant, rep = run["task"], run["variant"], int(run["seed"])
    base = load_section(BaseConfig, "base", params)
    cfg = load_config(params)
    v = cfg.variants[variant]
    name = ("search_aware", task_name, f"replicate{rep}")
    model_seed = seed_for(base.seed, *name, "model")
    device = resolve_device(base.device)
    rootp = Path(root)
    task = load_tagging_task(rootp / base.prepared_dir / task_name,
                             max_train_sentences=cfg.max_train_sentences.get(task_name, 0),
                             seed=seed_for(base.seed, "data", task_name, "train_subsample"))
    dev = task.dev.subset(np.arange(min(len(task.dev), cfg.max_dev_sentences))) if cfg.max_dev_sentences else task.dev
    labels = task.vocabs["label"]
    k = cfg.beam_size.get(task_name, 3)
    o_id = labels.tokens.index("O") if "O" in labels.tokens else -1
    entry = OBJECTIVES[v.objective]
    tune_on = INFERENCE.build_with(entry.meta["prediction"], {"k": k})   # greedy or hard beam: no alpha involved
    n_batches = -(-len(task.train) // (cfg.finetune if v.warm_start else cfg.optim).batch_size)
    warm = _warm_start(work_dir(rootp, "search_aware"), task_name, rep) / "model.pt"
    if v.warm_start and not warm.exists():
        raise FileNotFoundError(f"{warm}: the CE model this variant warm-starts from (variant 'ce' runs first)")

    def build() -> Seq2SeqTagger:
        model = Seq2SeqTagger(cfg.model, **task.sizes, glove_ids=task.glove_ids, glove_vectors=task.glove_vectors,
                              seed=model_seed)
        if v.warm_start:
            model.load_state_dict(torch.load(warm, map_location="cpu", weights_only=True))
        return model.to(device)

    def train(values: dict[str, Any], report, on_batch):
        c = load_config(with_values(params, values))       # the suggested settings, read like any params
        cv = c.variants[variant]
        optim = c.finetune if cv.warm_start else c.optim
        torch.manual_seed(model_seed)
        objective = OBJECTIVES.build(cv.objective, cv.config, updates_per_epoch=n_batches, o_id=o_id, k=k,
                                     seed=seed_for(base.seed, *name, variant, "objective"))
        model = build()
        state = fit(model, objective,
                    lambda epoch: task.train.batches(optim.batch_size, shuffle=True, device=device,
                                                     seed=seed_for(base.seed, *name, "batches", epoch)),
                    n_batches, lambda m: results_only(evaluate_decoding(m, tune_on, dev, labels, task.metric,
                                                                        batch_size=c.eval_batch_size, device=device)),
                    optim, on_epoch=lambda s, r: report(r), on_batch=on_batch, selectable=objective.selectable)
        return state.best_score, {"state": state, "objective": objective,
                                  "weights": {n: t.detach().cpu().clone() for n, t in model.state_dict().items()}}

    best = tune_in_trial(f"{task_name}/{variant}", v.space, cfg.trials, seed_for(base.seed, *name, variant, "tpe"),
                         train)
    state, objective = best.kept["state"], best.kept["objective"]
    model = build()
    model.load_state_dict(best.kept["weights"])
    model.eval()
    # the soft beam decodes a model trained through it with the alpha of its kept epoch
    alpha = (objective.alpha_at(state.best_epoch) if entry.meta["feed"] == "soft beam" else None) or cfg.decode_alpha
    scores: dict[str, dict[str, float]] = {"dev": {}, "test": {}}
    test_stats: dict[str, np.ndarray] = {}          # decoding -> per-sentence statistics [n, d] of test
    with torch.no_grad():
        for split, ds in (("dev", task.dev), ("test", task.test)):
            for d in cfg.decodings:
                res = evaluate_decoding(model, INFERENCE.build_with(d, {"k": k, "alpha": alpha}), ds, labels,
                                        task.metric, batch_size=cfg.eval_batch_size, device=device,
                                        instances=split == "test")
                if split == "test":
                    res, inst = res
                    test_stats[d] = inst["stats"]
                scores[split][d] = res["score"]
    # an annealed run whose alpha never left its start in any epoch has no annealed model (fit's
    # ``selectable``): its best score is -inf and it keeps its last weights
    selectable = math.isfinite(best.score)
    meta = {"task": task_name, "variant": variant, "seed": rep, "objective": v.objective,
            "config": dataclasses.asdict(objective.cfg), "describe": objective.describe(), "tuned": best.values,
            "recipe": recipe("seq2seq", "seq2seq", cfg.model, task.sizes), "history": state.history,
            "scores": scores, "beam_size": k, "decode_alpha": alpha}
    report_final({"best_dev_score": best.score if selectable else -1.0, "selectable": float(selectable),
                  "best_epoch": float(state.best_epoch),
                  "epochs_run": float(state.epoch),
                  "seconds_per_epoch": float(np.mean(state.seconds)) if state.seconds else 0.0,
                  "tuning_seconds": best.seconds,
                  **{f"{split}_{d}": sc for split in scores for d, sc in scores[split].items()}},
                 {"model.pt": tensor_bytes(best.kept["weights"]),
                  "model.json": json.dumps(meta, indent=2, default=str), STATS_FILE: npz_bytes(test_stats, compressed=False)})


# -- the stage ---------------------------------------------------------------------------------------
def _grid(cfg: SearchAwareConfig, variants: list[str]) -> list[dict[str, Any]]:
    return [{"task": t, "variant": name, "seed": s} for name in variants for t in cfg.tasks
            if not cfg.variants[name].tasks or t in cfg.variants[name].tasks for s in cfg.seeds]


def _short(key: str, variant: str) -> str:
    """A tuned key as the report shows it: relative to the variant (``config.decay_k``) or to the
    section (``optim.lr``)."""
    for prefix in (f"search_aware.variants.{variant}.", "search_aware."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _aggregate(cfg: SearchAwareConfig, task: str, name: str, runs: list[dict[str, Any]], baseline: float,
               metric: str) -> dict[str, Any]:
    """The variant's record over its seeds (means, stds, the best seed's settings and curve), its test
    statistics per decoding (``_stats``: ``[n, d]``, or ``[seeds, n, d]`` in replicate order) and the
    did-not-learn guard: a variant whose dev score is 0, or whose mean test score under the decoding it
    is trained for is not above ``baseline`` (the majority-tag baseline's test score), is ``failed``
    (``failure``: why) — recorded, never a table cell; the report makes its claims not testable."""
    v = cfg.variants[name]
    runs = sorted(runs, key=lambda r: int(r["run"]["seed"]))      # seeds paired across variants
    metas = [json.loads((Path(r["checkpoint"]) / "model.json").read_text()) for r in runs]
    best_i = int(np.argmax([r["metrics"]["best_dev_score"] for r in runs]))
    described = metas[best_i]["describe"]              # the objective's own account (alpha, decay, feed)
    decay = described["decay_k"]
    tuned_decay = any(key.endswith(".decay_k") for key in v.space)
    feed = OBJECTIVES[v.objective].meta["feed"] if described["feed"] == "gold" and v.objective != "seq_ce" else None
    out = {"objective": v.objective, "feed": feed or described["feed"], "alpha": described["alpha"],
           "decay_k": None if decay is None or tuned_decay else (-1.0 if decay == 0 else float(decay)),
           "config": {f"seed{m['seed']}.{_short(k, name)}": val for m in metas for k, val in m["tuned"].items()},
           "seeds": len(runs), "warm_start": v.warm_start}
    for split in ("dev", "test"):
        vals = {d: [r["metrics"][f"{split}_{d}"] for r in runs] for d in cfg.decodings}
        out[split] = {d: float(np.mean(x)) for d, x in vals.items()}
        out[f"{split}_std"] = {d: float(np.std(x)) for d, x in vals.items()}
    for key in ("epochs_run", "best_epoch", "seconds_per_epoch", "tuning_seconds"):
        out[key] = float(np.mean([r["metrics"][key] for r in runs]))
    pred = OBJECTIVES[v.objective].meta["prediction"]
    out["failed"], out["failure"] = False, ""
    if out["dev"][pred] <= 0.0:
        out["failed"], out["failure"] = True, f"dev score 0 ({pred} decoding): the model did not learn"
    else:
        try:
            check_learned(baseline, out["test"][pred], what=f"search_aware {task}/{name}")
        except DidNotLearn:
            out["failed"], out["failure"] = True, (
                f"test {metric} {out['test'][pred]:.2f} ({pred} decoding) is not above the majority-tag "
                f"baseline's {baseline:.2f}: the model did not learn")
    stuck = [r["run"]["seed"] for r in runs if not r["metrics"].get("selectable", 1.0)]
    if stuck:
        out["no_selectable_epoch"] = f"replicate(s) {stuck}: in none of the epochs run had α left its initial value"
    loaded = [np.load(io.BytesIO((Path(r["checkpoint"]) / STATS_FILE).read_bytes())) for r in runs]
    out["_stats"] = {d: (np.stack([z[d] for z in loaded]) if len(loaded) > 1 else loaded[0][d])
                     for d in cfg.decodings}
    out["best_seed"] = runs[best_i]["run"]["seed"]
    out["_best"] = runs[best_i]["checkpoint"]
    out["_curve"] = metas[best_i]["history"]
    return out


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = check_config(params)
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
                              max_train_sentences=cfg.max_train_sentences.get(task, 0),
                              seed=seed_for(ctx.base.seed, "data", task, "train_subsample"))
        labels = t.vocabs["label"]
        # the did-not-learn guard's bar: every test token tagged with the training set's most frequent tag
        majority = majority_tag_stats(t.train, t.test, t.metric)
        baseline = float(stats_score(t.metric)(majority.sum(0)))
        systems: dict[str, np.ndarray] = {"majority/constant": majority}
        entry: dict[str, Any] = {"metric": t.metric, "n_labels": len(labels),
                                 "top_k_labels": int(t.meta.get("top_k_labels", 0)),
                                 "beam_size": cfg.beam_size.get(task, 3), "n_train": len(t.train),
                                 "n_dev_tuning": min(len(t.dev), cfg.max_dev_sentences or len(t.dev)),
                                 "n_test": len(t.test), "majority_baseline": baseline,
                                 "variants": {}, "curves": {}}
        for name in cfg.variants:
            mine = [r for r in runs if r["run"]["task"] == task and r["run"]["variant"] == name]
            if not mine:
                continue
            agg = _aggregate(cfg, task, name, mine, baseline, t.metric)
            systems.update({f"{name}/{d}": x for d, x in agg.pop("_stats").items()})
            copy_checkpoint(Path(agg.pop("_best")), models / task / name)
            entry["curves"][name] = [{"epoch": h["epoch"], "train_loss": h["train_loss"], "dev_score": h["dev_score"]}
                                     for h in agg.pop("_curve")]
            entry["variants"][name] = agg
        for r in runs:                            # every grid finished: the warm starts join the models
            if r["run"]["task"] == task and r["run"]["variant"] == "ce":
                copy_checkpoint(_warm_start(ctx.work, task, r["run"]["seed"]), _warm_start(models, task, r["run"]["seed"]))
        metrics["tasks"][task] = entry
        save_stats(ctx.path(cfg.stats_dir) / f"{task}.npz", systems, stats_columns(t.metric))
    for task, entry in metrics["tasks"].items():      # the curves: plots/, not the metrics
        write_json(ctx.path(cfg.plots_dir) / f"{task}.json", entry.pop("curves"))
    return metrics


if __name__ == "__main__":
    main("search_aware")
