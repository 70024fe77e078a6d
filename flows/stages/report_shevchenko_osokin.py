"""``report_shevchenko_osokin`` stage: Shevchenko & Osokin's Tables 1, 2 and 4 and Figure 1 beside
ours, with the findings (``components.reports.shevchenko_osokin``), from what the ``scaling`` stage
wrote and nothing else: every run's record (``metrics/stats/scaling/records.json``), the design and
the failed runs (``metrics/scaling.json``: ``design.tasks``, ``failed``) and the per-item statistics
(``metrics/stats/scaling/<task>.npz``, ``<task>_train.npz``, ``<task>_log_ratio.npz``). A wording or
kit change re-runs this stage, never the training.

Writes ``reports/shevchenko_osokin/`` (README.md with a "Failed runs" section when runs failed,
figure1a-c.png, online_alpha.png; also logged to MLflow) and its metrics: ``findings`` (the verdict
counts), ``verdicts`` (each verdict with its interval and n) and ``results`` (per cell of
``task/objective/procedure[/sigmoid][/alpha_<a>]``: mean, std, n and minutes over its runs, with the
counts again; the headline reads them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.config import ConfigError, load_section
from components.io import write_text
from components.metrics.scaling_stats import load_study_stats
from components.reports import kit
from components.reports import shevchenko_osokin as report
from flows.stages.common import StageContext, main

STAGE = "report_shevchenko_osokin"


@dataclass(frozen=True)
class ShevchenkoOsokinReportConfig:
    scaling_metrics: str = "metrics/scaling.json"     # the scaling stage's metrics: design.tasks, failed
    stats_dir: str = "metrics/stats/scaling"          # records.json and the per-item statistics (scaling stage)
    objective: str = "marginal_ce"                    # the objective of figures 1a-1c (an objective of the records)
    out_dir: str = "reports/shevchenko_osokin"

    def __post_init__(self):
        if self.objective not in report.OBJECTIVES:
            raise ConfigError(f"{STAGE}.objective: {self.objective!r} is not an objective the report draws; "
                              f"expected one of {list(report.OBJECTIVES)}")


def _read_json(path, what: str) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {what} (run `dvc repro scaling`)")
    return json.loads(path.read_text())


def failed_section(failed: list[dict[str, Any]]) -> str:
    """The README's "Failed runs" section: each failed run (as the sweep ran it) with its error."""
    return "\n## Failed runs\n\n" + "\n".join(f"- `{json.dumps(f['run'])}`: {f['error']}" for f in failed) + "\n"


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(ShevchenkoOsokinReportConfig, "report_shevchenko_osokin", params)   # a literal: flows.dvc_deps
    metrics = _read_json(ctx.path(cfg.scaling_metrics), "scaling metrics")
    stats_dir = ctx.path(cfg.stats_dir)
    records = _read_json(stats_dir / "records.json", "run records of the scaling study")
    if not isinstance(records, list) or not records:
        raise ValueError(f"{stats_dir / 'records.json'}: expected a non-empty list of run records")
    failed = metrics.get("failed") or []
    tasks = (metrics.get("design") or {}).get("tasks") or sorted({r["task"] for r in records})
    stats = load_study_stats(stats_dir, sorted({r["task"] for r in records}))
    verdicts = report.findings(records, stats, failed)
    out = ctx.path(cfg.out_dir)
    paths = report.write_report(records, out, verdicts, task="ocr" if "ocr" in tasks else records[0]["task"],
                                objective=cfg.objective)
    if failed:
        readme = paths["README.md"]
        write_text(readme, readme.read_text() + failed_section(failed))
    for p in paths.values():
        ctx.tracker.log_artifact(p, "shevchenko_osokin")
    scale = str(params.get("base", {}).get("scale", "default"))
    return {**kit.write_findings(out, verdicts, paper="shevchenko_osokin", scale=scale),
            "results": report.summary(records, verdicts)}


if __name__ == "__main__":
    main(STAGE)
