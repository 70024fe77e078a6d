"""Stage ``scaling``: the Shevchenko & Osokin study of unary vs pairwise scaling, as one Ray Tune grid.

Every (task, objective, procedure, fold, seed) of ``components.training.studies.design`` is one
trial of a grid run through the sweep spine (``flows.sweeps.run_sweep(grid=...)``); trials ask Ray
for the resources in ``scaling.sweep.resources`` (one GPU each where there are GPUs) and log to
MLflow as child runs of ``sweep/scaling`` (params ``run/task``, ``run/objective``,
``run/procedure`` ...; per-epoch dev score, alpha and unary/pairwise ratio as metric curves). The
tasks (``ocr``, ``tagging``, ``snakes``), procedures and scaling methods are the registries'
(``STUDY_TASKS``, ``PROCEDURES``, ``SCALINGS``); a trial calls
``studies.train_and_evaluate`` and reports its record.

The stage writes ``reports/shevchenko_osokin/`` (README with the Table 1 / Table 2 analogs beside
the paper's numbers, figures 1a-1c, ``records.json`` with every run) and ``metrics/scaling.json``.
``base.scale: paper`` switches to all nine folds, eight seeds, the full data and all objectives.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from components.config import BaseConfig, load_section, resolve_device
from components.io import write_json, write_text
from components.reports import shevchenko_osokin as report
from components.training.structured import PHASES
from components.training.studies import ScalingStudyConfig, design, missing_inputs, train_and_evaluate
from flows.stages.common import StageContext, main, numeric
from flows.sweeps import ResourcesConfig, SweepConfig, epoch_bar, report_final, run_sweep


@dataclass(frozen=True)
class ScalingStageConfig(ScalingStudyConfig):
    """The ``scaling`` params section: the study plus its sweep settings."""
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=2, metric="best_dev_score",
                                     resources=ResourcesConfig(cpu=1, gpu="auto"))


def scaling_trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable: trains and scores one run of the design, reports its record."""
    from ray import tune

    run = config["run"]
    base = load_section(BaseConfig, "base", params)
    cfg = load_section(ScalingStageConfig, "scaling", params)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    best = {"dev": -1.0}

    def on_epoch(rec: dict[str, Any]) -> None:
        best["dev"] = max(best["dev"], float(rec["dev_score"]))
        tune.report({k: float(v) for k, v in rec.items() if isinstance(v, (int, float))}
                    | {"best_dev_score": best["dev"], "phase_index": float(PHASES.index(rec["phase"]))})

    record = train_and_evaluate(
        run, cfg, Path(root) / base.prepared_dir, resolve_device(base.device), on_epoch=on_epoch,
        on_batch=epoch_bar(f"{run['task']}/{run['objective']}/{run['procedure']}/f{run['fold']}/s{run['seed']}"))
    report_final({"best_dev_score": best["dev"], "test_score": record["test_score"],
                  "train_score": record["train_score"], "train_minutes": record["train_minutes"],
                  "alpha": record["alpha"], "epochs_run": float(record["epochs"])},
                 {"record.json": json.dumps(record, indent=1)})


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_section(ScalingStageConfig, "scaling", params)
    grid = design(cfg)
    missing = missing_inputs(cfg, ctx.path(ctx.base.prepared_dir))
    if missing:
        raise FileNotFoundError("; ".join(missing))
    t0 = time.perf_counter()
    with ctx.tracker.start_run("sweep/scaling", parent_run_id=ctx.run_id, tags={"stage": ctx.stage, "study": "shevchenko_osokin"}) as parent:
        ctx.tracker.log_params({"n_runs": len(grid), "tasks": ",".join(cfg.tasks), "seeds": str(list(cfg.seeds))})
        trainable = tune.with_parameters(scaling_trial, params=params, root=str(ctx.root))
        res = run_sweep(trainable, name="scaling", cfg=cfg.sweep, params=params, seed=ctx.base.seed,
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.ray_storage,
                        tags={"stage": ctx.stage}, grid=grid, allow_errors=True)
        records, failed = [], []
        for tr in res.trials:
            rec = Path(tr["checkpoint"]) / "record.json" if tr["checkpoint"] else None
            if tr["error"] or rec is None or not rec.exists():
                failed.append({"run": tr["config"].get("run"), "error": tr["error"] or "no record.json"})
            else:
                records.append(json.loads(rec.read_text()))
        out_dir = ctx.path(cfg.report_dir)
        write_json(out_dir / "records.json", records)
        paths = report.write_report(records, out_dir, task="ocr" if "ocr" in cfg.tasks else records[0]["task"],
                                    objective=cfg.report_objective)
        if failed:
            readme = paths["README.md"]
            write_text(readme, readme.read_text() + "\n## Failed runs\n\n" + "\n".join(
                f"- `{json.dumps(f['run'])}`: {f['error']}" for f in failed) + "\n")
        for p in paths.values():
            ctx.tracker.log_artifact(p, "shevchenko_osokin")
        ctx.tracker.log_artifact(out_dir / "records.json", "shevchenko_osokin")
        summary = report.summary(records)
        ctx.tracker.log_metrics(numeric(summary))
    return {"runs": len(grid), "n_failed": len(failed), "sweep_minutes": (time.perf_counter() - t0) / 60.0,
            "results": summary, "design": {"tasks": list(cfg.tasks), "seeds": list(cfg.seeds),
                                           "ocr_test_folds": list(cfg.ocr.test_folds)}}


if __name__ == "__main__":
    main("scaling")
