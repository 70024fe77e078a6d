"""The Energy contract: lower energy = better; E(x, y) = -score(x, y).

An energy maps a batch and an output y — labels [B, N] (long) or relaxed rows on the simplex
[B, N, L] — to energies [B]. Chain energies also expose their potentials, so exact inference
(``components.structures.linear_chain``) can serve as the yardstick for every approximate method.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class ChainPotentials:
    unary: torch.Tensor        # [B, N, L]
    transition: torch.Tensor   # [L, L] (shared) or [B, N-1, L, L] (per position)
    mask: torch.Tensor         # bool [B, N], left-aligned

    @property
    def n_labels(self) -> int:
        return int(self.unary.shape[-1])

    # The scaling methods (components.training.scaling) see potentials only through these three.
    def unary_norm(self) -> torch.Tensor:
        """[B] mean absolute unary potential over each sequence's valid positions (S&O's ||U||)."""
        m = self.mask[..., None].to(self.unary.dtype)
        return (self.unary.abs() * m).sum((1, 2)) / (m.sum((1, 2)) * self.n_labels).clamp_min(1.0)

    def pairwise_norm(self) -> torch.Tensor:
        """[B] mean absolute pairwise potential (S&O's ||W||); a shared [L, L] matrix gives one
        value broadcast over the batch, per-position matrices are averaged over valid edges."""
        B = self.unary.shape[0]
        if self.transition.dim() == 2:
            return self.transition.abs().mean().expand(B)
        e = (self.mask[:, 1:] & self.mask[:, :-1])[..., None, None].to(self.transition.dtype)
        L2 = self.n_labels ** 2
        return (self.transition.abs() * e).sum((1, 2, 3)) / (e.sum((1, 2, 3)) * L2).clamp_min(1.0)

    def rescale(self, unary: torch.Tensor | float, pairwise: torch.Tensor | float) -> "ChainPotentials":
        """Unary potentials times ``unary`` and pairwise times ``pairwise`` (scalars or [B])."""
        def per_seq(f, t):
            if isinstance(f, torch.Tensor) and f.dim() == 1:
                return f.view(-1, *([1] * (t.dim() - 1)))
            return f
        u = self.unary * per_seq(unary, self.unary)
        if isinstance(pairwise, torch.Tensor) and pairwise.dim() == 1 and self.transition.dim() == 2:
            w = self.transition[None, None] * pairwise.view(-1, 1, 1, 1)
            w = w.expand(-1, max(self.unary.shape[1] - 1, 0), -1, -1)
        else:
            w = self.transition * per_seq(pairwise, self.transition)
        return ChainPotentials(u, w, self.mask)


@runtime_checkable
class Energy(Protocol):
    def potentials(self, batch: Any) -> ChainPotentials: ...
    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor: ...
