"""The scaling study's per-item statistics (Shevchenko & Osokin): how the run records' ``item_stats``
are stacked into systems, and the files they are kept in.

A run record of ``components.training.studies.train_and_evaluate`` carries ``item_stats``: per
kind (:data:`STATS_KINDS`) an ``[items, 2]`` array (the task metric's sufficient statistics per test
item, per item of the training subset D, or log₁₀ ‖U‖/‖W‖ with a count per item of D). The
``scaling`` stage stacks them per system (:func:`system_name`) with :func:`stats_systems` and saves
them under ``metrics/stats/scaling/`` (:func:`stats_file`); the report reads them back with
:func:`load_study_stats` (``components.reports.shevchenko_osokin``). Pairing: see
:func:`stats_systems`.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from components.metrics.sentence_stats import Stats, load_stats

# what each statistics file holds per item (a word, sentence or grid)
STATS_KINDS = {"test": "the test set's score", "train": "the score on the training subset D",
               "log_ratio": "log₁₀ ‖U‖/‖W‖ on D"}
LOG_RATIO_COLUMNS = ("log10_ratio", "count")


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def system_name(rec: Mapping[str, Any]) -> str:
    """A trained model's name in the statistics files: ``objective/procedure``, ``/sigmoid`` for the
    sigmoid last activation, ``/alpha=<a>`` for a fixed α (folds and seeds of one system are stacked)."""
    name = f"{rec['objective']}/{rec['procedure']}"
    if rec.get("last_activation") == "sigmoid":
        name += "/sigmoid"
    if rec["procedure"] == "fixed_alpha":
        name += f"/alpha={_float(rec['alpha']):g}"
    return name


def stats_file(stats_dir: str | Path, task: str, kind: str) -> Path:
    """``<stats_dir>/<task>.npz`` (test items), ``<task>_train.npz``, ``<task>_log_ratio.npz`` (D)."""
    if kind not in STATS_KINDS:
        raise ValueError(f"stats kind {kind!r}: expected one of {list(STATS_KINDS)}")
    return Path(stats_dir) / (f"{task}.npz" if kind == "test" else f"{task}_{kind}.npz")


def stats_systems(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, tuple[tuple[str, ...], dict[str, np.ndarray]]]]:
    """task -> kind (:data:`STATS_KINDS`) -> (columns, system -> statistics) from the records'
    ``item_stats`` (``components.training.studies.train_and_evaluate``).

    Pairing: every system of a task ran on the same folds and replicates, and replicate ``i`` of
    every variant shares its data, initial weights and batches. A fold's test items are its own, so
    the folds' items are concatenated in fold order (each item of the cross-validation once; D per
    fold likewise): ``[n, d]`` with one replicate, ``[seeds, n, d]`` with several (the bootstrap then
    resamples replicates, then items). A system missing a (fold, replicate) — a failed run — is left
    out (its claims say so)."""
    recs = [r for r in records if r.get("item_stats")]
    out: dict[str, dict[str, tuple[tuple[str, ...], dict[str, np.ndarray]]]] = {}
    for task in sorted({r["task"] for r in recs}):
        rs = [r for r in recs if r["task"] == task]
        folds = sorted({int(r["fold"]) for r in rs})
        seeds = sorted({int(r["seed"]) for r in rs})
        cols = {tuple(r["item_stats"]["columns"]) for r in rs}
        if len(cols) != 1:
            raise ValueError(f"stats_systems: task {task!r} has runs scored with different columns {sorted(cols)}")
        by_sys: dict[str, dict[tuple[int, int], Mapping[str, Any]]] = defaultdict(dict)
        for r in rs:
            by_sys[system_name(r)][(int(r["fold"]), int(r["seed"]))] = r["item_stats"]
        kinds: dict[str, tuple[tuple[str, ...], dict[str, np.ndarray]]] = {
            k: (next(iter(cols)) if k != "log_ratio" else LOG_RATIO_COLUMNS, {}) for k in STATS_KINDS}
        for name, runs in by_sys.items():
            if set(runs) != {(f, s) for f in folds for s in seeds}:
                continue
            for kind in STATS_KINDS:
                per_seed = [np.concatenate([np.asarray(runs[(f, s)][kind], dtype=np.float64).reshape(-1, 2)
                                            for f in folds]) for s in seeds]
                if len({len(x) for x in per_seed}) != 1:
                    raise ValueError(f"stats_systems: {task} {name} {kind}: replicates have different item counts "
                                     f"{[len(x) for x in per_seed]}")
                kinds[kind][1][name] = per_seed[0] if len(seeds) == 1 else np.stack(per_seed)
        out[task] = kinds
    return out


def load_study_stats(stats_dir: str | Path, tasks: Iterable[str]) -> dict[str, dict[str, Stats]]:
    """task -> kind -> :class:`~components.metrics.sentence_stats.Stats` for the files that exist."""
    out: dict[str, dict[str, Stats]] = {}
    for t in tasks:
        out[t] = {k: load_stats(stats_file(stats_dir, t, k)) for k in STATS_KINDS
                  if stats_file(stats_dir, t, k).is_file()}
    return out
