"""Spearman's rank correlation (average ranks for ties), as in Tu & Gimpel (2019, Sec. 6.2).

Both functions are thin checks around :mod:`scipy.stats`: ``rankdata`` is ``scipy.stats.rankdata``
with ``method="average"``; ``spearman`` is ``scipy.stats.spearmanr`` (the Pearson correlation of the
average ranks), O(n log n) for n points. What this module adds is the contract the callers rely on:
a clear error for unequal lengths or fewer than two points, and NaN (without scipy's
``ConstantInputWarning``) when either side is constant, so its ranks have no variance.
"""
from __future__ import annotations

import numpy as np
from scipy import stats


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n ([n] float64) of ``x`` ([n]) with ties given their average rank."""
    return np.asarray(stats.rankdata(np.asarray(x, dtype=np.float64), method="average"), dtype=np.float64)


def spearman(x, y) -> float:
    """Spearman's rho of ``x`` and ``y`` (each [n], n >= 2); NaN when either is constant. A NaN in either
    input gives NaN (scipy's ``nan_policy="propagate"``)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman: expected two 1-D arrays of equal length, got {x.shape} and {y.shape}")
    if len(x) < 2:
        raise ValueError("spearman: need at least two points")
    if (x == x[0]).all() or (y == y[0]).all():
        return float("nan")                 # ranks without variance: rho is undefined
    return float(stats.spearmanr(x, y).statistic)
