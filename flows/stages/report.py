"""``report`` stage: the Tu & Gimpel (2019) tables, findings and figure from the ``approx`` stage's
metrics (``metrics/approx/<task>.json``) and per-sentence statistics (``metrics/stats/approx/<task>.npz``,
``<task>.values.npz``), one per task of ``approx.tasks``, with the paper's numbers beside ours (and,
from ``metrics/train_energy`` and ``metrics/infnets``, which trained models hit their epoch cap), as
Markdown and PNG (``reports/tu_gimpel/``), in MLflow. Its metrics: ``findings`` (the verdict counts)
and ``verdicts`` (every verdict with its interval and n)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from components.config import load_section
from components.io import atomic_path, write_text
from components.metrics.sentence_stats import load_stats
from components.reports.curves import close
from components.inference.study_config import ApproxStudyConfig
from components.reports import kit
from components.reports.tu_gimpel import TaskData, findings, report
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class ReportConfig:
    approx_metrics: str = "metrics/approx"        # <task>.json per task of approx.tasks
    approx_stats: str = "metrics/stats/approx"    # <task>.npz, <task>.values.npz (the approx stage writes them)
    # <task>.json of the stages that trained the models (best epoch, epochs run): the report's budget note
    training_metrics: tuple[str, ...] = ("metrics/train_energy", "metrics/infnets")
    out_dir: str = "reports/tu_gimpel"


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(ReportConfig, "report", params)
    acfg = load_section(ApproxStudyConfig, "approx", params)
    results, stats = {}, {}
    for task in acfg.tasks:
        path = ctx.path(cfg.approx_metrics) / f"{task}.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no approx results for {task!r} (run `dvc repro approx@{task}`)")
        data = json.loads(path.read_text())
        if task not in data:
            raise ValueError(f"{path}: no results under {task!r} (keys {sorted(data)})")
        results[task] = data[task]
        folder = ctx.path(cfg.approx_stats)
        stats[task] = TaskData(data[task], load_stats(folder / f"{task}.npz"), load_stats(folder / f"{task}.values.npz"))
    training: dict[str, dict[str, Any]] = {}
    for folder in cfg.training_metrics:
        for task in acfg.tasks:
            path = ctx.path(folder) / f"{task}.json"
            if not path.exists():
                raise FileNotFoundError(f"{path}: no training metrics for {task!r} (report.training_metrics; "
                                        f"run the stage that writes {folder})")
            training.setdefault(task, {}).update(json.loads(path.read_text()))
    energies = (acfg.table1_energy, acfg.energy)
    verdicts = findings(results, stats, acfg.arch, energies)
    md, fig = report(results, acfg.arch, tuple(acfg.methods), energies, stats, verdicts, training)
    out = ctx.path(cfg.out_dir)
    write_text(out / "README.md", md)
    with atomic_path(out / "figure2.png") as tmp:
        fig.savefig(tmp, format="png")
    close(fig)
    ctx.tracker.log_artifact(out, "tu_gimpel")
    scale = str(params.get("base", {}).get("scale", "default"))
    return {"tasks": len(results), **kit.write_findings(out, verdicts, paper="tu_gimpel", scale=scale)}


if __name__ == "__main__":
    main("report")
