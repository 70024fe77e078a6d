"""``report_stand_in_screen`` stage: the table of the CE screen of stand-in tasks (issue 27;
``components.reports.goyal_2018.screen_markdown``), from the ``screen`` stage's outputs and nothing
else: its metrics (``metrics/screen.json``: per task the scores) and per-sentence test statistics
(``metrics/stats/screen/<task>.npz``), on which the kit judges each gap. A wording or kit change
re-runs this stage, never the screen's training.

Writes ``reports/stand_in_screen/README.md`` (also logged to MLflow) and its metrics: ``findings``
(the counts of the kit's verdicts on the premise, one per task) and ``verdicts`` (every gap's and
premise's verdict with its interval and n).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.config import load_section
from components.io import write_text
from components.metrics.sentence_stats import load_stats
from components.reports import kit
from components.reports.goyal_2018 import screen_markdown, screen_verdicts
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class ScreenReportConfig:
    screen_metrics: str = "metrics/screen.json"      # the screen stage's metrics
    stats_dir: str = "metrics/stats/screen"          # <task>.npz: its per-sentence test statistics
    out_dir: str = "reports/stand_in_screen"


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(ScreenReportConfig, "report_stand_in_screen", params)
    path = ctx.path(cfg.screen_metrics)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no screen metrics (run `dvc repro screen`)")
    screen = json.loads(path.read_text())
    folder = ctx.path(cfg.stats_dir)
    stats = {t: load_stats(folder / f"{t}.npz") for t in (screen.get("tasks") or {}) if (folder / f"{t}.npz").is_file()}
    readme = ctx.path(cfg.out_dir) / "README.md"
    write_text(readme, screen_markdown(screen, stats))
    ctx.tracker.log_artifact(readme, "goyal_2018")
    verdicts = screen_verdicts(screen, stats)
    return {"findings": kit.counts([v["premise"] for v in verdicts.values()]),
            "verdicts": kit.records([v for task in verdicts.values() for v in task.values()])}


if __name__ == "__main__":
    main("report_stand_in_screen")
