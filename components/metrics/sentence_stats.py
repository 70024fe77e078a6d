"""Per-item sufficient statistics of a test-set score, and the files that hold them.

A score on a test set is a function of per-item statistics summed over the set: accuracy is
``correct / tokens`` (columns ``[correct, tokens]``), span F1 is ``2 tp / (predicted + gold)``
(``[tp, predicted, gold]``), a mean energy is ``energy / 1``, corpus BLEU is sacrebleu's function of
summed n-gram counts (:data:`BLEU_COLUMNS`). Compute stages write each system's ``[n, d]`` or
``[seeds, n, d]`` statistics with :func:`save_stats`; the report stages read them with
:func:`load_stats` and compare systems with :mod:`components.metrics.significance`. This module holds
no interval maths, so a change of the interval procedure re-runs report stages, not training.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from components.io import atomic_path, npz_bytes
from components.metrics.correlation import rankdata

Score = Callable[[np.ndarray], np.ndarray]     # [..., d] summed statistics -> [...] scores


def mean_score(stats: np.ndarray) -> np.ndarray:
    """The mean of a one-column statistic (a per-sentence score): ``sum / count`` needs the count,
    so callers pass ``[value, 1]`` columns; this is ``stats[..., 0] / stats[..., 1]``."""
    return stats[..., 0] / stats[..., 1]


def ratio_score(scale: float = 100.0) -> Score:
    """``scale * stats[..., 0] / stats[..., 1]``: accuracy from ``[correct, tokens]``."""
    return lambda s: scale * s[..., 0] / np.maximum(s[..., 1], 1e-12)


def f1_score(scale: float = 100.0) -> Score:
    """``scale * 2 tp / (predicted + gold)`` from ``[tp, predicted, gold]`` (0 when both are 0)."""
    return lambda s: scale * 2 * s[..., 0] / np.maximum(s[..., 1] + s[..., 2], 1e-12)


BLEU_COLUMNS = ("sys_len", "ref_len", "correct_1", "correct_2", "correct_3", "correct_4",
                "total_1", "total_2", "total_3", "total_4")


def bleu_score() -> Score:
    """Corpus BLEU (sacrebleu's, ``smooth_method="exp"``, 4-grams) from summed per-sentence
    statistics in sacrebleu's layout (:data:`BLEU_COLUMNS`; ``components.metrics.bleu.sentence_stats``),
    vectorised over leading axes: with it :func:`~components.metrics.significance.paired_interval` compares systems by corpus
    BLEU with the test sentence as the unit."""
    def score(s: np.ndarray) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)
        sys_len, ref_len = s[..., 0], s[..., 1]
        correct, total = s[..., 2:6], s[..., 6:10]
        with np.errstate(divide="ignore", invalid="ignore"):
            bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.maximum(sys_len, 1e-12)), 0.0), 1.0)
            zero = correct == 0
            smooth = np.cumprod(np.where(zero, 2.0, 1.0), axis=-1)        # sacrebleu's smooth_mteval
            prec = np.where(zero, 100.0 / (smooth * np.maximum(total, 1e-12)), 100.0 * correct / np.maximum(total, 1e-12))
            # an order with no n-grams in the hypotheses (total 0) ends the loop: its precision stays 0
            seen = np.cumprod(total > 0, axis=-1).astype(bool)
            prec = np.where(seen, prec, 0.0)
            logs = np.where(prec > 0, np.log(np.maximum(prec, 1e-300)), -9999999999.0)
            out = bp * np.exp(logs.mean(-1))
        return np.where(correct.sum(-1) > 0, out, 0.0)
    return score


def rank_stats(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sentence ``[rx, ry, rx², ry², rx·ry, 1]`` from the average ranks of ``x`` and ``y`` ([n],
    ranked once on the full set): summed and scored by :func:`pearson_score` they give Spearman's
    rho, so :func:`~components.metrics.significance.paired_interval` gives an interval of a
    difference of two rank correlations."""
    rx, ry = rankdata(x), rankdata(y)
    return np.stack([rx, ry, rx ** 2, ry ** 2, rx * ry, np.ones_like(rx)], axis=1)


def pearson_score(s: np.ndarray) -> np.ndarray:
    """Pearson's r from summed ``[x, y, x², y², xy, count]`` (0 where a side has no variance or no
    count); with :func:`rank_stats`' columns, Spearman's rho (vectorised over leading axes)."""
    s = np.asarray(s, dtype=np.float64)
    n = s[..., 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = s[..., 4] - s[..., 0] * s[..., 1] / n
        vx, vy = s[..., 2] - s[..., 0] ** 2 / n, s[..., 3] - s[..., 1] ** 2 / n
        r = cov / np.sqrt(vx * vy)
    return np.where((n > 0) & (vx > 0) & (vy > 0), r, 0.0)


def save_stats(path, systems: dict[str, np.ndarray], columns: tuple[str, ...] | list[str]) -> None:
    """Write per-sentence statistics of several systems (name -> ``[n, d]`` or ``[seeds, n, d]``,
    ``d = len(columns)``) to one ``.npz`` file, atomically; :func:`load_stats` reads it back. The
    systems of one file are scored on the same sentences (same ``n``), so any two can be paired."""
    cols = list(columns)
    arrays: dict[str, np.ndarray] = {}
    n = None
    for name, x in systems.items():
        a = np.asarray(x, dtype=np.float64)
        if a.ndim not in (2, 3) or a.shape[-1] != len(cols):
            raise ValueError(f"save_stats {path}: system {name!r} has shape {a.shape}; expected [n, {len(cols)}] "
                             f"or [seeds, n, {len(cols)}] for columns {cols}")
        if not np.isfinite(a).all():
            raise ValueError(f"save_stats {path}: system {name!r} holds non-finite statistics")
        if n is not None and a.shape[-2] != n:
            raise ValueError(f"save_stats {path}: system {name!r} has {a.shape[-2]} sentences, others {n}")
        n = a.shape[-2]
        arrays[f"system:{name}"] = a
    data = npz_bytes({"__columns__": np.array(cols), **arrays})
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


@dataclass(frozen=True)
class Stats:
    """What :func:`save_stats` wrote: the column names and each system's statistics."""
    columns: tuple[str, ...]
    systems: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.systems:
            raise KeyError(f"no statistics for system {name!r}; have {sorted(self.systems)}")
        return self.systems[name]

    def get(self, name: str) -> np.ndarray | None:
        return self.systems.get(name)


def load_stats(path) -> Stats:
    """Read a file of :func:`save_stats` (a clear error naming the file when it is not one)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no per-sentence statistics (run the stage that scores the test set)")
    with np.load(path, allow_pickle=False) as z:
        if "__columns__" not in z.files:
            raise ValueError(f"{path}: not a statistics file of components.metrics.sentence_stats.save_stats")
        cols = tuple(str(c) for c in z["__columns__"])
        systems = {k[len("system:"):]: z[k] for k in z.files if k.startswith("system:")}
    return Stats(cols, systems)
