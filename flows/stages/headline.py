"""``headline`` stage: a small headline-metrics file per study, ``metrics/headline/<study>.json``
(at most ``headline.max_keys`` flat numbers each, no timings), for ``dvc exp show`` and ``dvc
metrics diff``; the detailed metrics stay beside them in ``metrics/``.

Which numbers, and from which detailed metrics file, is ``components.reports.headline``
(``HEADLINES``). The Tu & Gimpel files are ``metrics/approx/<task>.json`` per task of
``studies.tu_gimpel`` (``approx.tasks`` once ``run_stage`` has applied the study's list), read under
``approx.energy`` and ``approx.arch``. Every input file is read and every headline built before any
is written. A missing or unreadable input is an error naming the file — except for a study none of
whose stages (``flows.studies.STUDIES``) is in the project's ``dvc.yaml``: that study gets no
headline (a project without ``dvc.yaml`` expects every study). A number its metrics lack (not run,
failed to train) is left out of the file, with a warning naming it.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.config import ConfigError, check_range, load_section
from components.inference.study_config import ApproxStudyConfig
from components.io import write_json
from components.reports.headline import HEADLINES, MAX_KEYS, build, input_paths, left_out, values
from flows.stages.common import StageContext, main
from flows.studies import STUDIES

log = logging.getLogger(__name__)

STAGE = "headline"


@dataclass(frozen=True)
class HeadlineConfig:
    out_dir: str = "metrics/headline"        # <study>.json per study
    max_keys: int = MAX_KEYS                 # per study: more is an error (a headline must stay readable)

    def __post_init__(self):
        check_range(self, positive=("max_keys",))


def pipeline_stages(root: Path) -> set[str] | None:
    """The stage names of ``root/dvc.yaml`` (``None`` when there is no ``dvc.yaml``)."""
    path = root / "dvc.yaml"
    if not path.exists():
        return None
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: unreadable ({e}); the headline stage reads which stages the pipeline has") from e
    stages = doc.get("stages") if isinstance(doc, dict) else None
    if not isinstance(stages, dict):
        raise ConfigError(f"{path}: no 'stages' mapping; the headline stage reads which stages the pipeline has")
    return set(stages)


def in_pipeline(study: str, stages: set[str] | None) -> bool:
    """Whether one of ``study``'s stages (this one aside) is in the pipeline (always, without a ``dvc.yaml``)."""
    return stages is None or bool((set(STUDIES.get(study, ())) - {STAGE}) & stages)


def producer(rel: str) -> str:
    """The DVC stage that writes a metrics file (``flows.stages.common.metrics_path``'s convention):
    ``metrics/mcmc.json`` -> ``mcmc``, ``metrics/approx/pos.json`` -> ``approx@pos``."""
    parts = Path(rel).with_suffix("").parts[1:]
    return "@".join(parts)


def read_metrics(path: Path, study: str, rel: str = "") -> dict[str, Any]:
    """One detailed metrics file, parsed; an error naming it when it is missing or not a JSON object."""
    if not path.is_file():
        hint = f"`dvc repro {producer(rel)}`" if rel else "its stage"
        raise FileNotFoundError(f"{path}: no such metrics file; the {study} headline reads it (run {hint})")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable as JSON ({e}); the {study} headline reads it") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top, got {type(data).__name__}")
    return data


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(HeadlineConfig, "headline", params)       # a literal: flows.dvc_deps reads it
    acfg = load_section(ApproxStudyConfig, "approx", params)
    design = {"tu_gimpel": {"tasks": tuple(acfg.tasks), "energy": acfg.energy, "arch": dict(acfg.arch)}}
    stages = pipeline_stages(ctx.root)

    built, skipped = {}, []
    for study in HEADLINES:
        if not in_pipeline(study, stages):
            skipped.append(study)
            continue
        kw = design.get(study, {})
        data = {p: read_metrics(ctx.path(p), study, p) for p in input_paths(study, kw.get("tasks", ()))}
        built[study] = build(study, data, cfg.max_keys, **kw)
    if skipped:
        log.info("headline: no stage of %s in %s: no headline for it", ", ".join(skipped), ctx.path("dvc.yaml"))

    out = ctx.path(cfg.out_dir)
    for study, picks in built.items():
        for key, file in left_out(picks).items():
            log.warning("headline %s: %s left out: %s has no finite number for it (not run, or failed to train)",
                        study, key, file)
        write_json(out / f"{study}.json", values(picks))
    ctx.tracker.log_metrics({f"{study}.{k}": float(v) for study, picks in built.items()
                             for k, v in values(picks).items()})
    return {"keys": {s: len(values(p)) for s, p in built.items()},
            "left_out": {s: len(left_out(p)) for s, p in built.items()},
            "skipped": skipped}


if __name__ == "__main__":
    main(STAGE)
