"""The one seeded subsample of this project.

``subsample_indices(n, k, seed)`` picks ``k`` of ``range(n)`` without replacement, sorted (so a
subsample keeps the corpus order); ``k <= 0`` or ``k >= n`` keeps everything. Every "a seeded part
of the training set" (default-scale caps, dev/test caps, online scaling's subset D) goes through
it, so the same (n, k, seed) always names the same examples.
"""
from __future__ import annotations

import numpy as np


def subsample_indices(n: int, k: int, seed: int) -> np.ndarray:
    """Sorted int64 indices: ``k`` of ``range(n)`` drawn with ``numpy.random.default_rng(seed)``."""
    if n < 0:
        raise ValueError(f"subsample_indices: n must be >= 0, got {n}")
    if k <= 0 or k >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(n, k, replace=False)).astype(np.int64)
