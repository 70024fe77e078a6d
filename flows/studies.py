"""The studies of the pipeline: which stage belongs to which paper, once.

``STUDIES`` maps a study to its stages. It names each stage's MLflow experiment
(``<base.experiment>/<study>``: one experiment per study, so the UI compares a paper's runs
without the others'), the study a report belongs to, and the task list a study's tagging stages
share. ``REPORTS`` names the stage that writes each paper's report (``reports/<study>/``): it reads
only the metrics, statistics and records the study's compute stages wrote, so a report or kit edit
re-runs it and never the training; it ends the paper's chain at a scale (``flows.scale_pipeline``).

**One task list per study.** The Tu & Gimpel stages (``train``, ``train_energy``, ``infnets``,
``approx``; ``report`` reads ``approx``'s) take their tagging tasks from one params list,
``studies.tu_gimpel``, which ``dvc.yaml``'s ``foreach`` also iterates. A corpus is declared once,
under ``prepare.tasks`` (format, paths, label scheme), and joins the study by its name in that list;
:func:`apply_study_tasks` copies the list into each of those stages' ``tasks`` before their sections
are read (a stage section that sets its own ``tasks`` keeps it: a one-off run of a subset; ``dvc.yaml``
iterates the study's list, and a task outside the stage's own list is then refused by name). The other studies have one list each in their own section (``search_aware.tasks``,
the ``scaling`` tasks, ...).
"""
from __future__ import annotations

from typing import Any

from components.config import ConfigError

# study -> its stages, in pipeline order; "pipeline" holds the stages every study shares
STUDIES: dict[str, tuple[str, ...]] = {
    "pipeline": ("fetch", "prepare", "bench", "headline"),
    "tu_gimpel": ("train", "train_energy", "infnets", "approx", "report"),
    "shevchenko_osokin": ("scaling", "report_shevchenko_osokin"),
    "goyal_2018": ("screen", "report_stand_in_screen", "search_aware", "report_goyal_2018"),
    "goyal_2019": ("translator", "normalisation", "report_goyal_2019"),
    "goyal_mlm": ("distil", "mlm_exact", "cmlm", "mcmc", "report_goyal_mlm"),
}

# paper (a study of STUDIES) -> the report stage that writes reports/<paper>/ (one of the study's stages)
REPORTS: dict[str, str] = {
    "tu_gimpel": "report",
    "shevchenko_osokin": "report_shevchenko_osokin",
    "goyal_2018": "report_goyal_2018",
    "goyal_2019": "report_goyal_2019",
    "goyal_mlm": "report_goyal_mlm",
}

# study -> the stages whose `tasks` come from params `studies.<study>` (dvc.yaml's foreach list)
TASK_LISTS: dict[str, tuple[str, ...]] = {
    "tu_gimpel": ("train", "train_energy", "infnets", "approx"),
}


def study_of(stage: str) -> str:
    """The study ``stage`` belongs to (an error naming the stage if none)."""
    for study, stages in STUDIES.items():
        if stage in stages:
            return study
    raise ConfigError(f"stage {stage!r} belongs to no study of flows.studies.STUDIES")


def experiment_name(base_experiment: str, stage: str) -> str:
    """The MLflow experiment of ``stage``'s runs: ``<base.experiment>/<study>``."""
    return f"{base_experiment}/{study_of(stage)}"


def apply_study_tasks(params: dict[str, Any], where: str = "params.yaml") -> dict[str, Any]:
    """``params`` with ``<stage>.tasks = studies.<study>`` for every stage of :data:`TASK_LISTS`
    whose section does not set ``tasks`` itself (a new dict; sections not involved are shared)."""
    lists = params.get("studies") or {}
    if not isinstance(lists, dict):
        raise ConfigError(f"{where}: studies: expected a mapping study -> list of tasks, got {type(lists).__name__}")
    unknown = sorted(set(lists) - set(TASK_LISTS))
    if unknown:
        raise ConfigError(f"{where}: studies: unknown study {unknown}; a task list is kept for {sorted(TASK_LISTS)}")
    out = dict(params)
    for study, stages in TASK_LISTS.items():
        if study not in lists:
            continue
        tasks = lists[study]
        if not (isinstance(tasks, list) and tasks and all(isinstance(t, str) and t for t in tasks)):
            raise ConfigError(f"{where}: studies.{study}: expected a non-empty list of task names, got {tasks!r}")
        if len(set(tasks)) != len(tasks):
            raise ConfigError(f"{where}: studies.{study}: a task is named twice in {tasks}")
        for stage in stages:
            section = out.get(stage) or {}
            if not isinstance(section, dict):
                continue                      # the section's own loader reports it
            if "tasks" not in section:      # a section's own list (a one-off run, a test) wins
                out[stage] = {**section, "tasks": list(tasks)}
    return out
