"""Measurements for the local vs global normalisation study (Goyal, Dyer & Berg-Kirkpatrick 2019).

:func:`log_z_stats`: the mean and variance of the local log-normaliser log Z_L,t over every
gold-fed step of a dataset — the paper's Table 1, which shows that CE-trained networks have large
log Z (so their raw scores are far from a normalised model's) and self-normalised ones log Z ~ 0.

:func:`log_z_sentence_stats`: the same per sentence (sums of log Z and of its square, and steps), the
paired bootstrap's input for the findings on Table 1.

:func:`centre_log_z`: shift a trained model's raw scores so that its mean log Z is 0, which leaves its
softmax unchanged: the start of self-normalisation fine-tuned from a CE model.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
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


@torch.no_grad()
def centre_log_z(scorer: Any, batches: Iterable[Any]) -> dict[str, float]:
    """Subtract the mean log Z over ``batches`` from every raw score (``scorer.shift_scores``), so the
    mean becomes ~0 with the locally normalised model unchanged. Self-normalisation fine-tuned from a
    CE model needs it: the L2 penalty lambda (log Z)^2 would otherwise pull a mean log Z of ~12 toward
    0 through every weight (Adam moves the one bias that does it exactly by ~lr per update), trading
    translation quality for it. -> {"shift", "mean_before", "var"} (the variance is shift-invariant)."""
    if not callable(getattr(scorer, "shift_scores", None)):
        raise TypeError(f"centre_log_z: {type(scorer).__name__} has no shift_scores(c); it cannot move its "
                        "raw scores by a constant")
    st = log_z_stats(scorer, batches)
    scorer.shift_scores(-st["mean"])
    return {"shift": -st["mean"], "mean_before": st["mean"], "var": st["var"]}


LOG_Z_COLUMNS = ("log_z_sum", "log_z_sq_sum", "steps")


@torch.no_grad()
def log_z_sentence_stats(scorer: Any, batches: Iterable[Any], n: int) -> np.ndarray:
    """Per-sentence sufficient statistics of log Z_L,t, ``[n, 3]`` in dataset order (the batches'
    ``index``): the sum of log Z over the sentence's real steps, the sum of its squares and the
    number of steps (:data:`LOG_Z_COLUMNS`). Summed over sentences they give :func:`log_z_stats`'s
    mean (``sum / steps``) and variance (``sum_sq / steps - mean^2``); the paired bootstrap resamples
    their rows (``components.metrics.sentence_stats``)."""
    was = scorer.training
    scorer.eval()
    out = np.full((n, 3), np.nan)
    try:
        for batch in batches:
            z = log_normalisers(scorer, batch).double()
            m = batch.mask.double()
            rows = batch.index.cpu().numpy()
            out[rows, 0] = (z * m).sum(1).cpu().numpy()
            out[rows, 1] = (z ** 2 * m).sum(1).cpu().numpy()
            out[rows, 2] = m.sum(1).cpu().numpy()
    finally:
        scorer.train(was)
    if np.isnan(out).any():
        raise ValueError(f"log_z_sentence_stats: {int(np.isnan(out[:, 0]).sum())} of {n} sentences not in the batches")
    return out
