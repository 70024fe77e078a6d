r"""Honest selections over the GD grid: no test labels (Tu & Gimpel 2019, beside their Table 6).

The paper's oracle (:mod:`components.inference.oracle`) chooses GD's iteration count N and learning
rate per *test* sentence by that sentence's accuracy or F1, which needs the test labels: it bounds
what GD could do, it is not a decoder. This module gives the two selections a user can run:

- **lowest energy** (:func:`min_energy_select`): per sentence, the candidate of lowest discretised
  energy ``E(x, argmax z)`` — per N (over restarts and learning rates) and over the whole grid
  (N, restart, lr). Ties: the smaller N, then the smaller learning rate (value), then the lower
  restart. Inference only looks at the energy, as any energy-based decoder may.
- **tuned on dev** (:func:`dev_tuned_select`): one (N, lr) for every sentence, the pair with the best
  corpus score on dev (ties: smaller N, then smaller lr); within the pair, each sentence's restart is
  its lowest-energy one (label-free; with one restart there is nothing to choose). Sec. 4.2 of the
  paper tunes the warm-start and instance-tailored methods this way.

Grids are the :func:`~components.inference.study.gd_grid` layout: counts ``long [C, R, K, B, 3]``
(:func:`~components.inference.oracle.instance_counts`), energies ``[C, R, K, B]`` (C checkpoints N,
R restarts, K learning rates, B sentences). Cost: a few sorts over ``C R K B``; pure, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from components.inference.oracle import corpus_score, lexmin

__all__ = ["Picked", "min_energy_select", "DevTuned", "dev_tuned_select"]


@dataclass
class Picked:
    """Per-sentence choices (indices into checkpoints / restarts / lrs) and what they score."""
    checkpoint: Tensor            # long [B]
    restart: Tensor               # long [B]
    lr: Tensor                    # long [B]
    counts: Tensor                # long [B, 3]
    energy: Tensor                # [B] discretised energy of the chosen outputs
    relaxed_energy: Tensor | None = None
    search_error: Tensor | None = None

    def summary(self) -> dict[str, float]:
        """``score`` (corpus metric, percent) and the mean energies / search error."""
        d = {"score": float(corpus_score(self.counts)), "energy": float(self.energy.double().mean())}
        if self.relaxed_energy is not None:
            d["relaxed_energy"] = float(self.relaxed_energy.double().mean())
        if self.search_error is not None:
            d["search_error"] = float(self.search_error.double().mean())
        return d


def _check(counts: Tensor, energy: Tensor, lrs: Sequence[float], checkpoints: Sequence[int], who: str) -> None:
    if counts.dim() != 5 or counts.shape[-1] != 3:
        raise ValueError(f"{who}: counts must have shape [C, R, K, B, 3], got {list(counts.shape)}")
    if tuple(energy.shape) != tuple(counts.shape[:4]):
        raise ValueError(f"{who}: energy must have shape [C, R, K, B] = {list(counts.shape[:4])}, "
                         f"got {list(energy.shape)}")
    if len(checkpoints) != counts.shape[0] or len(lrs) != counts.shape[2]:
        raise ValueError(f"{who}: {len(checkpoints)} checkpoints and {len(lrs)} lrs given for a grid of "
                         f"C = {counts.shape[0]}, K = {counts.shape[2]}")
    if bool(torch.isnan(energy).any()):
        raise ValueError(f"{who}: energy contains NaN")


def _pick(flat_index: Tensor, shape: tuple[int, int, int], counts: Tensor, energy: Tensor,
          relaxed: Tensor | None, vit: Tensor | None) -> Picked:
    """``flat_index`` [B] into the (c, r, k) candidates of ``counts [C, R, K, B, 3]`` -> Picked."""
    C, R, K = shape
    B = energy.shape[-1]
    b = torch.arange(B)
    c, r, k = flat_index // (R * K), flat_index // K % R, flat_index % K
    e = energy[c, r, k, b]
    return Picked(checkpoint=c, restart=r, lr=k, counts=counts[c, r, k, b], energy=e,
                  relaxed_energy=None if relaxed is None else relaxed[c, r, k, b],
                  search_error=None if vit is None else e - vit.to(e.dtype))


def _cpu(*xs: Tensor | None) -> list[Tensor | None]:
    return [None if x is None else x.detach().cpu() for x in xs]


def min_energy_select(counts: Tensor, energy: Tensor, *, lrs: Sequence[float], checkpoints: Sequence[int],
                      relaxed_energy: Tensor | None = None,
                      viterbi_energy: Tensor | None = None) -> tuple[list[Picked], Picked]:
    """Label-free selection -> (per N: a :class:`Picked` for each checkpoint, over restarts and lrs;
    the whole grid: (N, restart, lr) per sentence). ``counts`` only score the choice, never steer it."""
    _check(counts, energy, lrs, checkpoints, "min_energy_select")
    counts, energy, relaxed, vit = _cpu(counts, energy, relaxed_energy, viterbi_energy)
    C, R, K, B = energy.shape
    e = energy.double()
    lr_key = torch.tensor([float(x) for x in lrs], dtype=torch.float64).view(1, 1, K, 1).expand(C, R, K, B)
    r_key = torch.arange(R, dtype=torch.float64).view(1, R, 1, 1).expand(C, R, K, B)
    n_key = torch.tensor([float(n) for n in checkpoints], dtype=torch.float64).view(C, 1, 1, 1).expand(C, R, K, B)
    per_n = []
    for c in range(C):
        best = lexmin([x[c].reshape(R * K, B) for x in (e, lr_key, r_key)])          # into (r, k)
        per_n.append(_pick(best + c * R * K, (C, R, K), counts, energy, relaxed, vit))
    best = lexmin([x.reshape(C * R * K, B) for x in (e, n_key, lr_key, r_key)])
    return per_n, _pick(best, (C, R, K), counts, energy, relaxed, vit)


@dataclass
class DevTuned:
    """The (N, lr) tuned on dev, its dev score (percent), and the test choices at that pair."""
    n: int
    lr: float
    dev_score: float
    dev_scores: Tensor            # float64 [C, K]: every pair's dev score
    test: Picked

    def summary(self) -> dict[str, float]:
        return {**self.test.summary(), "N": float(self.n), "lr": float(self.lr), "dev_score": self.dev_score}


def _restart_by_energy(energy: Tensor) -> Tensor:
    """[C, R, K, B] -> long [C, K, B]: per (N, lr, sentence) the lowest-energy restart (ties: lower)."""
    C, R, K, B = energy.shape
    e = energy.double().permute(1, 0, 2, 3).reshape(R, C * K * B)
    return lexmin([e]).view(C, K, B)


def dev_tuned_select(dev_counts: Tensor, dev_energy: Tensor, counts: Tensor, energy: Tensor, *,
                     lrs: Sequence[float], checkpoints: Sequence[int], relaxed_energy: Tensor | None = None,
                     viterbi_energy: Tensor | None = None) -> DevTuned:
    """One (N, lr) for every test sentence, chosen by the corpus score on the dev grid (same N and
    lrs; restarts per sentence by lowest energy on both splits)."""
    _check(dev_counts, dev_energy, lrs, checkpoints, "dev_tuned_select (dev)")
    _check(counts, energy, lrs, checkpoints, "dev_tuned_select (test)")
    if tuple(dev_counts.shape[:3]) != tuple(counts.shape[:3]):
        raise ValueError(f"dev_tuned_select: the dev grid [C, R, K] = {list(dev_counts.shape[:3])} differs from "
                         f"the test grid's {list(counts.shape[:3])}")
    dev_counts, dev_energy, counts, energy, relaxed, vit = _cpu(dev_counts, dev_energy, counts, energy,
                                                                relaxed_energy, viterbi_energy)
    C, R, K, Bd = dev_energy.shape
    r = _restart_by_energy(dev_energy)                                            # [C, K, Bd]
    c_i = torch.arange(C).view(C, 1, 1).expand(C, K, Bd)
    k_i = torch.arange(K).view(1, K, 1).expand(C, K, Bd)
    b_i = torch.arange(Bd).view(1, 1, Bd).expand(C, K, Bd)
    scores = corpus_score(dev_counts[c_i, r, k_i, b_i])                           # [C, K]
    n_key = torch.tensor([float(n) for n in checkpoints], dtype=torch.float64).view(C, 1).expand(C, K)
    lr_key = torch.tensor([float(x) for x in lrs], dtype=torch.float64).view(1, K).expand(C, K)
    flat = lexmin([(-scores).reshape(-1, 1), n_key.reshape(-1, 1), lr_key.reshape(-1, 1)])
    c, k = int(flat) // K, int(flat) % K
    rt = _restart_by_energy(energy)[c, k]                                          # [B]
    test = _pick(c * R * K + rt * K + k, (C, R, K), counts, energy, relaxed, vit)
    return DevTuned(n=int(checkpoints[c]), lr=float(lrs[k]), dev_score=float(scores[c, k]), dev_scores=scores,
                    test=test)
