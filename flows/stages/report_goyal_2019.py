"""``report_goyal_2019`` stage: Goyal, Dyer & Berg-Kirkpatrick 2019 Tables 1-6 and the thesis's
Table 3.1 MT rows beside ours, with the findings (``components.reports.goyal_2019``), from what the
``normalisation`` stage wrote and nothing else: its metrics (``metrics/normalisation.json``, which
holds the translator's summary too) and every scored system's per-sentence statistics
(``metrics/stats/normalisation/``). A wording or kit change re-runs this stage, never the training.

Writes ``reports/goyal_2019/`` (README.md, tables_2_3.png, table_6.png, translator_curve.png; also
logged to MLflow) and its metrics: ``findings`` (the verdict counts) and ``verdicts`` (each verdict
with its interval and n).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config import load_section
from components.reports import kit
from components.reports.goyal_2019 import load_stats_dir, verdicts, write_report
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class Goyal2019ReportConfig:
    normalisation_metrics: str = "metrics/normalisation.json"   # the normalisation stage's metrics
    stats_dir: str = "metrics/stats/normalisation"             # its per-sentence statistics
    out_dir: str = "reports/goyal_2019"


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(Goyal2019ReportConfig, "report_goyal_2019", params)
    path, stats_dir = ctx.path(cfg.normalisation_metrics), ctx.path(cfg.stats_dir)
    for p in (path, stats_dir):
        if not p.exists():
            raise FileNotFoundError(f"{p}: not found; the normalisation stage writes it (run `dvc repro normalisation`)")
    metrics = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("findings", "verdicts")}
    found = verdicts(metrics, load_stats_dir(stats_dir))
    files = write_report(metrics, ctx.path(cfg.out_dir), found)
    for p in files.values():
        ctx.tracker.log_artifact(Path(p), "goyal_2019")
    scale = str(params.get("base", {}).get("scale", "default"))
    return kit.write_findings(ctx.path(cfg.out_dir), found, paper="goyal_2019", scale=scale)


if __name__ == "__main__":
    main("report_goyal_2019")
