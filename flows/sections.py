"""Each ``params.yaml`` section -> the frozen dataclass its stage reads it with, once.

The dataclass holds the section's defaults, which are the default scale where ``params.yaml`` is
silent (DESIGN.md, convention 4). Named as ``module:Class`` and imported only when asked for, so
that reading one section's defaults does not import every stage.
"""
from __future__ import annotations

import importlib
from typing import Any

from components.config import ConfigError, get_dotted, load_section, to_dict

SECTIONS: dict[str, str] = {
    "base": "components.config:BaseConfig",
    "fetch": "flows.stages.fetch:FetchConfig",
    "prepare": "components.data.prepare:PrepareConfig",
    "train": "flows.task_sweeps:TaskSweepConfig",
    "train_energy": "flows.stages.train_energy:EnergyStageConfig",
    "infnets": "flows.stages.infnets:InfNetStageConfig",
    "approx": "components.inference.study_config:ApproxStudyConfig",
    "report": "flows.stages.report:ReportConfig",
    "report_shevchenko_osokin": "flows.stages.report_shevchenko_osokin:ShevchenkoOsokinReportConfig",
    "report_goyal_2018": "flows.stages.report_goyal_2018:Goyal2018ReportConfig",
    "report_stand_in_screen": "flows.stages.report_stand_in_screen:ScreenReportConfig",
    "report_goyal_2019": "flows.stages.report_goyal_2019:Goyal2019ReportConfig",
    "report_goyal_mlm": "flows.stages.report_goyal_mlm:GoyalMLMReportConfig",
    "bench": "flows.stages.bench:BenchConfig",
    "mlm_exact": "flows.stages.mlm_exact:MLMExactConfig",
    "cmlm": "flows.stages.cmlm:CMLMStageConfig",
    "mcmc": "flows.stages.mcmc:MCMCStageConfig",
    "scaling": "flows.stages.scaling:ScalingStageConfig",
    "search_aware": "flows.stages.search_aware:SearchAwareConfig",
    "translator": "flows.translation_configs:TranslatorStageConfig",
    "distil": "flows.translation_configs:DistilConfig",
    "normalisation": "flows.stages.normalisation:NormalisationConfig",
    "headline": "flows.stages.headline:HeadlineConfig",
    "screen": "flows.stages.screen:ScreenConfig",
}


def section_class(section: str) -> type:
    """The dataclass of ``section`` (``KeyError`` for a section no stage loads as a whole)."""
    module, name = SECTIONS[section].split(":")
    return getattr(importlib.import_module(module), name)


def code_default(key: str) -> Any:
    """The value of the dotted ``key`` when ``params.yaml`` does not set it: its section's dataclass
    default. ``KeyError`` when no section's dataclass holds it (a per-task map's key, say)."""
    section, _, rest = key.partition(".")
    defaults = _as_params(to_dict(load_section(section_class(section), section, {})))
    if not rest:
        return defaults
    try:
        return get_dotted(defaults, rest)
    except ConfigError as e:
        raise KeyError(key) from e


def _as_params(value: Any) -> Any:
    """A dataclass's value as params.yaml would write it (tuples as lists)."""
    if isinstance(value, dict):
        return {k: _as_params(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_params(v) for v in value]
    return value
