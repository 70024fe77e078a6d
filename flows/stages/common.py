"""What every stage shares: argument parsing, params, the tracker run, metrics/<stage>.json.

``python -m flows.stages.<name> [--params params.yaml] [--root .]`` loads ``params.yaml``
(resolving ``base.scale``), opens one tracker run named after the stage, logs the stage's params
section, calls ``run(params, ctx)``, logs the returned metrics and writes them atomically to
``metrics/<stage>.json`` for ``dvc metrics``.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from components.config import (BaseConfig, ConfigError, flatten, get_dotted, load_params, load_section, resolve_scale,
                               set_dotted)
from components.io import write_json
from components.tracking import Tracker, make_tracker

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


@dataclass
class StageContext:
    root: Path
    base: BaseConfig
    tracker: Tracker
    run_id: str
    stage: str

    def path(self, p: str | Path) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.root / p


def numeric(d: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in flatten(d).items():
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = float(v)
    return out


def metrics_path(root: Path, stage: str, task: str | None = None) -> Path:
    """``metrics/<stage>.json``, or ``metrics/<stage>/<task>.json`` for one task of a per-task stage."""
    return root / "metrics" / (f"{stage}.json" if task is None else f"{stage}/{task}.json")


def for_task(params: dict[str, Any], stage: str, task: str) -> dict[str, Any]:
    """``params`` with ``<stage>.tasks`` narrowed to ``[task]`` (which must be one of them)."""
    tasks = get_dotted(params, f"{stage}.tasks")
    if task not in tasks:
        raise ConfigError(f"--task {task!r}: not one of {stage}.tasks {list(tasks)}")
    return set_dotted(params, f"{stage}.tasks", [task])


def run_stage(stage: str, run: Callable[[dict[str, Any], StageContext], dict[str, Any]],
              params: dict[str, Any], root: str | Path = ".", tracker: Tracker | None = None,
              task: str | None = None) -> dict[str, Any]:
    """Run a stage; with ``task``, only that task of a per-task stage (``dvc.yaml`` ``foreach``):
    its MLflow run is ``<stage>@<task>`` and its metrics ``metrics/<stage>/<task>.json``."""
    root = Path(root).resolve()
    params = resolve_scale(params)
    if task is not None:
        params = for_task(params, stage, task)
    base = load_section(BaseConfig, "base", params)
    if base.threads > 0:
        import torch
        torch.set_num_threads(base.threads)
    tracker = tracker or make_tracker(base.tracker, base.experiment, root)
    tracker.ensure_experiment()
    t0 = time.perf_counter()
    tags = {"stage": stage} if task is None else {"stage": stage, "task": task}
    with tracker.start_run(stage if task is None else f"{stage}@{task}", tags=tags) as run_id:
        tracker.log_params(flatten({"base": params.get("base") or {}, stage: params.get(stage) or {}}))
        ctx = StageContext(root=root, base=base, tracker=tracker, run_id=run_id, stage=stage)
        metrics = run(params, ctx)
        metrics["stage_seconds"] = round(time.perf_counter() - t0, 3)
        tracker.log_metrics(numeric(metrics))
    write_json(metrics_path(root, stage, task), metrics)
    return metrics


def main(stage: str, argv: list[str] | None = None) -> None:
    """Entry point of ``python -m flows.stages.<stage>``.

    The stage's ``run`` is imported from ``flows.stages.<stage>`` (not taken from ``__main__``), so
    that Ray pickles the stage's functions and dataclasses by reference to an importable module.
    """
    run = importlib.import_module(f"flows.stages.{stage}").run
    ap = argparse.ArgumentParser(prog=f"python -m flows.stages.{stage}")
    ap.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    ap.add_argument("--root", default=".", help="project root holding data/, metrics/, models/ (default: .)")
    ap.add_argument("--task", default=None, help="run one task of <stage>.tasks (dvc.yaml foreach); "
                                                 "metrics go to metrics/<stage>/<task>.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_stage(stage, run, load_params(args.params), args.root, task=args.task)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        raise SystemExit(1) from e
