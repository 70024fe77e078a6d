"""``report_goyal_2018`` stage: Goyal et al. 2018 Tables 1-2 and the thesis's Tables 3.1-3.2 beside
ours, with the findings (``components.reports.goyal_2018``), from what the ``search_aware`` stage wrote
and nothing else: its metrics (``metrics/search_aware.json``), the per-sentence test statistics of every
``<variant>/<decoding>`` (``metrics/stats/search_aware/<task>.npz``) and the best seed's training curves
(``plots/search_aware/<task>.json``). A wording or kit change re-runs this stage, never the training.

Writes ``reports/goyal_2018/`` (README.md, ``curves_<task>.png`` per task; also logged to MLflow) and its
metrics: ``findings`` (the verdict counts) and ``verdicts`` (each verdict with its interval and n).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config import load_section
from components.metrics.sentence_stats import load_stats
from components.reports import kit
from components.reports.goyal_2018 import findings, write_report
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class Goyal2018ReportConfig:
    search_aware_metrics: str = "metrics/search_aware.json"   # the search_aware stage's metrics
    stats_dir: str = "metrics/stats/search_aware"             # <task>.npz (search_aware stage)
    curves_dir: str = "plots/search_aware"                     # <task>.json: training curves (search_aware.plots_dir)
    out_dir: str = "reports/goyal_2018"


def _read(path: Path, what: str) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {what} (run `dvc repro search_aware`)")
    return json.loads(path.read_text())


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(Goyal2018ReportConfig, "report_goyal_2018", params)
    metrics = _read(ctx.path(cfg.search_aware_metrics), "search_aware metrics")
    metrics = {k: v for k, v in metrics.items() if k not in ("findings", "verdicts")}   # judged here
    stats: dict[str, Any] = {}
    for task, entry in (metrics.get("tasks") or {}).items():
        entry["curves"] = _read(ctx.path(cfg.curves_dir) / f"{task}.json", f"training curves of {task!r}")
        path = ctx.path(cfg.stats_dir) / f"{task}.npz"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no per-sentence statistics of {task!r} (run `dvc repro search_aware`)")
        stats[task] = load_stats(path)
    verdicts = findings(metrics, stats)
    files = write_report(metrics, ctx.path(cfg.out_dir), stats, verdicts)
    for path in files.values():
        ctx.tracker.log_artifact(Path(path), "goyal_2018")
    scale = str(params.get("base", {}).get("scale", "default"))
    return kit.write_findings(ctx.path(cfg.out_dir), verdicts, paper="goyal_2018", scale=scale)


if __name__ == "__main__":
    main("report_goyal_2018")
