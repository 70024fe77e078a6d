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


@runtime_checkable
class Energy(Protocol):
    def potentials(self, batch: Any) -> ChainPotentials: ...
    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor: ...
