"""Stage ``scaling``: the Shevchenko & Osokin study of unary vs pairwise scaling, as one Ray Tune grid.

Every (task, objective, procedure, fold, seed) of ``components.training.studies.design`` is one
trial of a grid run through the sweep spine (``flows.sweeps.run_sweep(grid=...)``); trials ask Ray
for the resources in ``scaling.sweep.resources`` (one GPU each where there are GPUs) and log to
MLflow as child runs of ``sweep/scaling`` (params ``run/task``, ``run/objective``,
``run/procedure`` ...; per-epoch dev score, alpha and unary/pairwise ratio as metric curves). The
tasks (``ocr``, ``tagging``, ``snakes``), procedures and scaling methods are the registries'
(``STUDY_TASKS``, ``PROCEDURES``, ``SCALINGS``); a trial calls
``studies.train_and_evaluate`` and reports its record.

Tuning on the validation fold (S&O Sec. 5.2, App. A.2 and B). Before the grid, one Ray trial per
(task, method) of ``scaling.tune.space`` (offline alpha, the regulariser's alpha and lambda, the
temperature; keys ``scaling.<task>.methods.<method>.<key>``) runs a seeded Optuna study of
``scaling.tune.trials`` trials inside it (``flows.tuning.tune_in_trial``): each Optuna trial trains the method
jointly on the first test fold's training folds and scores it on the validation data (OCR fold
``select_fold``; the dev split of the other tasks) by its best dev score. The best values replace
``scaling.<task>.methods.<method>`` for the grid; they are in every record of that method
(``tuned``), in ``metrics/scaling.json`` (``tuned``) and logged to ``sweep/scaling`` (params
``tuned.<task>.<method>.<key>``, metrics ``tuned_dev.<task>.<method>``).

The stage writes what the report (stage ``report_shevchenko_osokin``) reads: every run's record
(``metrics/stats/scaling/records.json``: settings, scores, histories, tuned values), ``metrics/scaling.json``
(the design, the tuned settings, ``failed``: each failed run with its error) and, per task, the
per-item statistics every verdict's interval rests on (``metrics/stats/scaling/<task>.npz``: test items;
``<task>_train.npz``: the training subset D; ``<task>_log_ratio.npz``: log10 ||U||/||W|| on D), one
system per (objective, procedure[, sigmoid][, fixed alpha]), folds concatenated, replicates stacked
(``components.metrics.scaling_stats.stats_systems``).
``base.scale: paper`` switches to all nine folds, eight seeds, the full data and all objectives.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from components.config import BaseConfig, ConfigError, ResourcesConfig, load_section, resolve_device
from components.io import write_json
from components.metrics.scaling_stats import stats_file, stats_systems
from components.metrics.sentence_stats import save_stats
from components.seeds import seed_for
from components.training.guard import DidNotLearn
from components.training.studies import ScalingStudyConfig, design, missing_inputs, train_and_evaluate
from components.training.structured import PHASES
from flows.ray_runtime import epoch_bar, report_final
from flows.search_space import check_sweep_space, distinct_trials, with_values
from flows.stages.common import StageContext, main
from flows.sweeps import SweepConfig, run_sweep
from flows.tuning import run_grid, tune_in_trial

TUNABLE = ("offline", "offline_reg", "temperature")     # the methods whose settings S&O tune on validation
STATS_DIR = "metrics/stats/scaling"      # per-item statistics: <task>.npz (test), <task>_train.npz, <task>_log_ratio.npz
RECORDS = f"{STATS_DIR}/records.json"    # every run's record (no item statistics): the report's input


@dataclass(frozen=True)
class TuneConfig:
    """Validation-fold tuning of the scaling methods' settings (see the module doc). ``space``:
    dotted params keys ``scaling.<task>.methods.<method>.<key>`` (method one of ``TUNABLE``) -> an
    Optuna spec; one tuning trial per (task, method) the keys name, in their order; a method
    without keys keeps ``scaling.<task>.methods``. ``trials``: Optuna trials per (task, method)."""
    trials: int = 2
    space: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        if self.trials < 1:
            raise ConfigError(f"scaling.tune.trials: expected >= 1, got {self.trials}")

    def groups(self) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
        """(task, method) -> its part of ``space``; a key of another form is a ``ConfigError``."""
        out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for key, spec in self.space.items():
            parts = key.split(".")
            if len(parts) < 5 or parts[0] != "scaling" or parts[2] != "methods":
                raise ConfigError(f"scaling.tune.space: key {key!r} is not scaling.<task>.methods.<method>.<key>")
            if parts[3] not in TUNABLE:
                raise ConfigError(f"scaling.tune.space: {parts[3]!r} (in {key!r}) is not a tuned method; "
                                  f"expected one of {TUNABLE}")
            out.setdefault((parts[1], parts[3]), {})[key] = spec
        return out


@dataclass(frozen=True)
class ScalingStageConfig(ScalingStudyConfig):
    """The ``scaling`` params section: the study plus its sweep settings."""
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=2, metric="best_dev_score",
                                     resources=ResourcesConfig(cpu=1, gpu="auto"))
    tune: TuneConfig = TuneConfig()


def load_config(params: dict[str, Any]) -> ScalingStageConfig:
    return load_section(ScalingStageConfig, "scaling", params)


def _method_key(key: str) -> str:
    """``scaling.<task>.methods.<method>.<key>`` -> ``<key>`` (the method config's own name)."""
    return key.split(".", 4)[4]


def tune_grid(cfg: ScalingStageConfig, params: dict[str, Any]) -> list[dict[str, Any]]:
    """One tuning run per (task, method) of ``tune.space``: the method's joint run on the task's
    first fold, first replicate, with the first objective that runs it; every value of the space
    is checked against the section's strict config before Ray starts."""
    groups = cfg.tune.groups()          # the keys' form first, then every value against the strict config
    # design() reads every method's config strictly (the section's load leaves them as mappings)
    check_sweep_space(cfg.tune.space, params, "scaling", lambda q: design(load_config(q)), where="scaling.tune.space")
    rows = []
    for (kind, method) in groups:
        if kind not in cfg.tasks:
            raise ConfigError(f"scaling.tune.space: task {kind!r} is not in scaling.tasks {list(cfg.tasks)}")
        match = [run for run in design(cfg) if run["kind"] == kind and run["procedure"] == method
                 and run["fold"] == cfg.task(kind).folds[0] and run["last_activation"] == cfg.task(kind).base_activation]
        if not match:
            raise ConfigError(f"scaling.tune.space: {kind}/{method} is tuned but scaling.{kind}.runs does not run it")
        rows.append({**match[0], "seed": int(cfg.seeds[0]), "tune": True})
    return rows


def tune_trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable: a seeded Optuna study over the (task, method)'s keys of
    ``tune.space``; each training is scored by its best validation score."""
    run = config["run"]
    kind, method = run["kind"], run["procedure"]
    base = load_section(BaseConfig, "base", params)
    cfg = load_config(params)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))

    def train(values: dict[str, Any], report, on_batch):
        best = {"dev": -1.0}

        def on_epoch(rec: dict[str, Any]) -> None:
            best["dev"] = max(best["dev"], float(rec["dev_score"]))
            report(rec)

        train_and_evaluate(run, load_config(with_values(params, values)), Path(root) / base.prepared_dir,
                           resolve_device(base.device), base_seed=base.seed, on_epoch=on_epoch, on_batch=on_batch)
        return best["dev"], None

    try:
        tuned = tune_in_trial(f"tune {kind}/{method}", cfg.tune.groups()[(kind, method)], cfg.tune.trials,
                              seed_for(base.seed, "scaling", "tune", kind, method, "tpe"), train)
    except DidNotLearn as e:
        # no setting tried on dev learned: a finding about the method on this task, not a crash; its
        # grid runs become failed runs that name this (run), and the sweep's other work goes on
        n = distinct_trials(cfg.tune.groups()[(kind, method)], cfg.tune.trials)
        report_final({"best_dev_score": -1.0, "n_trials": float(n), "n_did_not_learn": float(n)},
                     {"tuned.json": json.dumps({"run": run, "values": {}, "dev_score": None, "trials": [],
                                                "did_not_learn": str(e)}, indent=1)})
        return
    report_final({"best_dev_score": tuned.score, "n_trials": float(len(tuned.trials)),
                  "n_did_not_learn": float(sum("did_not_learn" in t for t in tuned.trials)),
                  **{f"tuned/{_method_key(k)}": float(v) for k, v in tuned.values.items()}},
                 {"tuned.json": json.dumps({"run": run, "values": tuned.values, "dev_score": tuned.score,
                                            "trials": tuned.trials}, indent=1)})


def tune_methods(ctx: StageContext, params: dict[str, Any], cfg: ScalingStageConfig) -> dict[tuple[str, str], dict[str, Any]]:
    """Run the tuning grid; -> {(task, method): {"values", "dev_score", "trials"}} (empty without a space)."""
    grid = tune_grid(cfg, params)
    if not grid:
        return {}
    out = {}
    for t in run_grid(ctx, params, tune_trial, "tune", grid, max_concurrent=cfg.sweep.max_concurrent,
                      resources=cfg.sweep.resources):
        info = json.loads((Path(t["checkpoint"]) / "tuned.json").read_text())
        out[(t["run"]["kind"], t["run"]["procedure"])] = info
    return out


def scaling_trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable: trains and scores one run of the design, reports its record."""
    from ray import tune

    run = config["run"]
    base = load_section(BaseConfig, "base", params)
    cfg = load_config(params)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    best = {"dev": -1.0}

    def on_epoch(rec: dict[str, Any]) -> None:
        best["dev"] = max(best["dev"], float(rec["dev_score"]))
        tune.report({k: float(v) for k, v in rec.items() if isinstance(v, (int, float))}
                    | {"best_dev_score": best["dev"], "phase_index": float(PHASES.index(rec["phase"]))})

    record = train_and_evaluate(
        run, cfg, Path(root) / base.prepared_dir, resolve_device(base.device), base_seed=base.seed, on_epoch=on_epoch,
        on_batch=epoch_bar(f"{run['task']}/{run['objective']}/{run['procedure']}/f{run['fold']}/s{run['seed']}"))
    record["stopped_by"] = [h["stopped_by"] for h in record["history"] if "stopped_by" in h]   # per phase, in order
    report_final({"best_dev_score": best["dev"], "test_score": record["test_score"],
                  "train_score": record["train_score"], "train_minutes": record["train_minutes"],
                  "alpha": record["alpha"], "epochs_run": float(record["epochs"])},
                 {"record.json": json.dumps(record, indent=1)})


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_config(params)
    grid = design(cfg)
    tune_grid(cfg, params)              # validated before any work
    missing = missing_inputs(cfg, ctx.path(ctx.base.prepared_dir))
    if missing:
        raise FileNotFoundError("; ".join(missing))
    t0 = time.perf_counter()
    tuned = tune_methods(ctx, params, cfg)
    tune_minutes = (time.perf_counter() - t0) / 60.0
    params = with_values(params, {k: v for info in tuned.values() for k, v in info["values"].items()})
    cfg = load_config(params)
    untrained = {key: info["did_not_learn"] for key, info in tuned.items() if info.get("did_not_learn")}
    not_run = [r for r in grid if (r["kind"], r["procedure"]) in untrained]
    grid = [r for r in grid if (r["kind"], r["procedure"]) not in untrained]
    with ctx.tracker.start_run("sweep/scaling", parent_run_id=ctx.run_id, tags={"stage": ctx.stage, "study": "shevchenko_osokin"}) as parent:
        ctx.tracker.log_params({"n_runs": len(grid), "tasks": ",".join(cfg.tasks), "seeds": str(list(cfg.seeds))})
        ctx.tracker.log_params({f"tuned.{kind}.{m}.{_method_key(k)}": v
                                for (kind, m), info in tuned.items() for k, v in info["values"].items()})
        if tuned:
            ctx.tracker.log_metrics({f"tuned_dev.{kind}.{m}": float(info["dev_score"]) for (kind, m), info in tuned.items()
                                     if info["dev_score"] is not None})
        trainable = tune.with_parameters(scaling_trial, params=params, root=str(ctx.root))
        res = run_sweep(trainable, name="scaling", cfg=cfg.sweep, params=params,
                        seed=seed_for(ctx.base.seed, "scaling", "grid"),
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.ray_storage,
                        tags={"stage": ctx.stage}, grid=grid,
                        # a run that did not learn, or diverged, is a finding ("Failed runs"); a crash is not
                        allow_errors=(DidNotLearn, FloatingPointError))
        records = []
        failed = [{"run": r, "error": f"not run: tuning found no setting that learned (DidNotLearn): "
                                      f"{untrained[(r['kind'], r['procedure'])]}"} for r in not_run]
        for tr in res.trials:
            rec = Path(tr["checkpoint"]) / "record.json" if tr["checkpoint"] else None
            if tr["error"] or rec is None or not rec.exists():
                failed.append({"run": tr["config"].get("run"), "error": tr["error"] or "no record.json"})
            else:
                r = json.loads(rec.read_text())
                kind = tr["config"]["run"]["kind"]
                if (kind, r["procedure"]) in tuned:
                    r["tuned"] = {_method_key(k): v for k, v in tuned[(kind, r["procedure"])]["values"].items()}
                records.append(r)
        # every run's per-item statistics, stacked per system (folds, replicates), one file set per task
        stats_dir = ctx.path(STATS_DIR)
        for task, kinds in stats_systems(records).items():
            for kind, (columns, systems) in kinds.items():
                if systems:
                    save_stats(stats_file(stats_dir, task, kind), systems, columns)
                else:                       # every run of the task failed: no stale file from an earlier run
                    stats_file(stats_dir, task, kind).unlink(missing_ok=True)
        records = [{k: v for k, v in r.items() if k != "item_stats"} for r in records]
        write_json(ctx.path(RECORDS), records)
        ctx.tracker.log_artifact(ctx.path(RECORDS), "shevchenko_osokin")
    return {"runs": len(grid) + len(not_run), "n_failed": len(failed), "failed": failed,
            "sweep_minutes": (time.perf_counter() - t0) / 60.0,
            "tune_minutes": tune_minutes,
            "tuned": {f"{kind}/{m}": {"values": {_method_key(k): v for k, v in info["values"].items()},
                                      "dev_score": info["dev_score"], "trials": len(info["trials"]),
                                      **({"did_not_learn": info["did_not_learn"]} if info.get("did_not_learn") else {})}
                      for (kind, m), info in tuned.items()},
            "design": {"tasks": list(cfg.tasks), "seeds": list(cfg.seeds), "ocr_test_folds": list(cfg.ocr.test_folds)}}


if __name__ == "__main__":
    main("scaling")
