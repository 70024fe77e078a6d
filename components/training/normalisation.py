"""Measurements for the local vs global normalisation study (Goyal, Dyer & Berg-Kirkpatrick 2019).

:func:`log_z_stats`: the mean and variance of the local log-normaliser log Z_L,t over every
gold-fed step of a dataset — the paper's Table 1, which shows that CE-trained networks have large
log Z (so their raw scores are far from a normalised model's) and self-normalised ones log Z ~ 0.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch

from components.training.search_aware import log_normalisers


@torch.no_grad()
def log_z_stats(scorer: Any, batches: Iterable[Any]) -> dict[str, float]:
    """-> {"mean", "var", "steps"} of log Z_L,t over the real steps of ``batches`` (eval mode)."""
    was = scorer.training
    scorer.eval()
    total = total_sq = 0.0
    n = 0
    try:
        for batch in batches:
            z = log_normalisers(scorer, batch).double()
            m = batch.mask
            total += float(z[m].sum())
            total_sq += float((z[m] ** 2).sum())
            n += int(m.sum())
    finally:
        scorer.train(was)
    if n == 0:
        raise ValueError("log_z_stats: no steps (empty batches)")
    mean = total / n
    return {"mean": mean, "var": max(total_sq / n - mean ** 2, 0.0), "steps": float(n)}
