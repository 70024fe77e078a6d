"""Exact inference for chain energies: Viterbi (the yardstick of every approximate method).

For a chain energy E(x, y) = -score, the Viterbi labels minimise E exactly, so the search error
of any method is E(y_method) - E(y_viterbi) >= 0.
"""
from __future__ import annotations

from typing import Any

import torch

from components.inference.base import InferenceResult
from components.structures import linear_chain


class Viterbi:
    """``allowed`` [L, L] bool optionally forbids transitions (constrained decoding, e.g. BIOES)."""

    def __init__(self, allowed: torch.Tensor | None = None):
        self.allowed = allowed

    @torch.no_grad()
    def __call__(self, energy: Any, batch: Any, potentials=None) -> InferenceResult:
        p = potentials if potentials is not None else energy.potentials(batch)
        if self.allowed is None:
            labels, score = linear_chain.viterbi(p.unary, p.transition, p.mask)
        else:
            labels, score = linear_chain.viterbi(p.unary, p.transition, p.mask, allowed=self.allowed)
        return InferenceResult(labels=labels, relaxed=None, energy=-score)
