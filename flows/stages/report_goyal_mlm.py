"""``report_goyal_mlm`` stage: the thesis's ch. 6 Tables 6.1-6.6 and Figures 6.1-6.4 beside ours, with
the findings (``components.reports.goyal_mlm``), from what the ``mcmc`` and ``mlm_exact`` stages wrote
and nothing else: their metrics (``metrics/mcmc.json``, with the schemes' ``labels``;
``metrics/mlm_exact.json``) and per-chain / per-sequence statistics (``metrics/stats/mcmc/``,
``metrics/stats/mlm_exact/``). A wording or kit change re-runs this stage, never the sampling.

Writes ``reports/goyal_mlm/`` (README.md, figure_6_1.png ... figure_6_4.png, cmlm_curve.png; also
logged to MLflow) and its metrics: ``findings`` (the verdict counts) and ``verdicts`` (each verdict
with its interval and n).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config import load_section
from components.metrics.sentence_stats import load_stats
from components.reports import kit
from components.reports.goyal_mlm import report_verdicts, write_report
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class GoyalMLMReportConfig:
    mcmc_metrics: str = "metrics/mcmc.json"                # the mcmc stage's metrics
    mcmc_stats_dir: str = "metrics/stats/mcmc"             # its per-chain, per-sentence statistics
    exact_metrics: str = "metrics/mlm_exact.json"          # the mlm_exact stage's (Table 6.1, Figure 6.1)
    exact_stats_dir: str = "metrics/stats/mlm_exact"       # its per-sequence statistics
    out_dir: str = "reports/goyal_mlm"


def _stats(folder: Path, prefix: str) -> dict[str, Any]:
    return {f"{prefix}/{p.stem}": load_stats(p) for p in sorted(folder.glob("*.npz"))}


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(GoyalMLMReportConfig, "report_goyal_mlm", params)
    path = ctx.path(cfg.mcmc_metrics)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no mcmc metrics (run `dvc repro mcmc`)")
    mcmc = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("findings", "verdicts")}
    exact_path = ctx.path(cfg.exact_metrics)
    exact = json.loads(exact_path.read_text()) if exact_path.is_file() else None    # Table 6.1: not run
    stats = {**_stats(ctx.path(cfg.mcmc_stats_dir), "mcmc"), **_stats(ctx.path(cfg.exact_stats_dir), "mlm_exact")}
    verdicts = report_verdicts(exact, mcmc, stats)
    files = write_report(exact, mcmc, ctx.path(cfg.out_dir), labels=mcmc.get("labels"), verdicts=verdicts)
    for p in files.values():
        ctx.tracker.log_artifact(Path(p), "goyal_mlm")
    scale = str(params.get("base", {}).get("scale", "default"))
    return kit.write_findings(ctx.path(cfg.out_dir), verdicts, paper="goyal_mlm", scale=scale)


if __name__ == "__main__":
    main("report_goyal_mlm")
