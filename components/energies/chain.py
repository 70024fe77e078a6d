"""The linear-chain energy contract (DESIGN.md): potentials, the ``ChainEnergy`` protocol and
energies with fixed potentials.

- :class:`ChainPotentials`: unary [B, N, L], transition [L, L] or [B, N-1, L, L], mask [B, N];
  ``energy(y)`` scores labels or relaxed rows through :mod:`components.structures.linear_chain`.
- :class:`ChainEnergy`: linear-chain energies add ``potentials(batch) -> ChainPotentials``, so
  exact inference is the yardstick of every approximate method, and the potentials (not the
  network) are what inference and the scaling methods see.
- :class:`FixedPotentials`: a ChainEnergy whose potentials were computed once for one batch;
  evaluation times inference without the network's forward pass, and an energy frozen for
  inference-network training is scored without recomputing its potentials.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from components.energies.base import Energy, require
from components.structures import linear_chain


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

    def energy(self, y: torch.Tensor) -> torch.Tensor:
        """E(y) = -score(y) [B] for labels [B, N] or relaxed rows [B, N, L] (see linear_chain.score)."""
        return -linear_chain.score(self.unary, self.transition, self.mask, y)

    def detach(self) -> "ChainPotentials":
        return ChainPotentials(self.unary.detach(), self.transition.detach(), self.mask)


@runtime_checkable
class ChainEnergy(Energy, Protocol):
    """A linear-chain energy: E(x, y) = -(sum_t U_t[y_t] + sum_t W[y_t, y_t+1]) from its potentials.

    Implementations also declare ``structure = "chain"``: a Gaussian CRF has a ``potentials`` method
    too (of another kind, ``structure = "grid"``), and a structural check alone cannot tell them
    apart; :func:`conforms` checks both."""

    structure: str

    def potentials(self, batch: Any) -> ChainPotentials: ...


class FixedPotentials:
    """The ChainEnergy ``E(x, y) = -score(p, y)`` with potentials ``p`` computed once for ``batch``.

    Asking for the potentials of another batch is an error (they would be silently wrong).
    """

    structure = "chain"

    def __init__(self, potentials: ChainPotentials, batch: Any = None):
        self.p, self.batch = potentials, batch

    @classmethod
    @torch.no_grad()
    def of(cls, energy: ChainEnergy, batch: Any) -> "FixedPotentials":
        require(energy, ChainEnergy, "FixedPotentials.of")
        return cls(energy.potentials(batch).detach(), batch)

    def _check(self, batch: Any) -> None:
        if self.batch is not None and batch is not self.batch:
            raise ValueError("FixedPotentials: potentials were computed for another batch")

    def potentials(self, batch: Any) -> ChainPotentials:
        self._check(batch)
        return self.p

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor:
        self._check(batch)
        return self.p.energy(y)

    def eval(self) -> "FixedPotentials":
        return self
