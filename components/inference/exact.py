"""Exact inference for chain energies: Viterbi (the yardstick of every approximate method).

For a chain energy E(x, y) = -score, the Viterbi labels minimise E exactly, so the search error
of any method is E(y_method) - E(y_viterbi) >= 0. Cost O(B N L^2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from components.energies.chain import ChainEnergy
from components.inference.base import InferenceResult, check
from components.structures import linear_chain


@dataclass(frozen=True)
class ViterbiConfig:
    """Viterbi has no settings; constrained decoding takes ``allowed`` as an input."""


class Viterbi:
    """``allowed`` [L, L] bool optionally forbids transitions (constrained decoding, e.g. BIOES)."""

    needs = ChainEnergy

    def __init__(self, allowed: torch.Tensor | None = None):
        self.allowed = allowed

    @torch.no_grad()
    def __call__(self, energy: Any, batch: Any) -> InferenceResult:
        check(self, energy)
        p = energy.potentials(batch)
        if self.allowed is None:
            labels, score = linear_chain.viterbi(p.unary, p.transition, p.mask)
        else:
            labels, score = linear_chain.viterbi(p.unary, p.transition, p.mask, allowed=self.allowed)
        return InferenceResult(labels=labels, relaxed=None, energy=-score)


def make_viterbi(cfg: ViterbiConfig) -> Viterbi:
    """The ``INFERENCE`` builder of ``viterbi`` (exact MAP: the yardstick)."""
    return Viterbi()
