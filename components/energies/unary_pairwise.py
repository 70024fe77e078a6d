"""A chain CRF with an arbitrary unary network and a learned label-transition matrix.

    score(x, y) = sum_t U(x)_t[y_t] + sum_{t<n} W[y_t, y_{t+1}]      (S&O eq. 1)

``unary_net(batch) -> [B, N, L]`` (LeNet on OCR letter images, an MLP on word features, ...);
``batch.mask`` [B, N] marks the valid positions. W [L, L] starts at N(0, init_std^2) so that the
unary/pairwise ratio of S&O Fig. 1 is defined from the first epoch. The parts are exposed
separately (``unary_parameters`` / ``pairwise_parameters``) for stage training.
"""
from __future__ import annotations

from typing import Any, Iterator

import torch
from torch import nn

from components.energies.chain import ChainPotentials


class UnaryPairwiseCRF(nn.Module):
    structure = "chain"                 # see components.energies.base.ChainEnergy

    def __init__(self, unary_net: nn.Module, n_labels: int, init_std: float = 0.1, seed: int = 0):
        super().__init__()
        self.unary_net = unary_net
        g = torch.Generator().manual_seed(seed)
        self.transition = nn.Parameter(init_std * torch.randn(n_labels, n_labels, generator=g))

    def potentials(self, batch: Any) -> ChainPotentials:
        unary = self.unary_net(batch)
        if unary.shape[:2] != batch.mask.shape or unary.shape[-1] != self.transition.shape[0]:
            raise ValueError(f"unary_net output: expected [B, N, {self.transition.shape[0]}] matching "
                             f"mask {list(batch.mask.shape)}, got {list(unary.shape)}")
        return ChainPotentials(unary, self.transition, batch.mask)

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor:
        return self.potentials(batch).energy(y)

    def unary_parameters(self) -> Iterator[nn.Parameter]:
        return self.unary_net.parameters()

    def pairwise_parameters(self) -> Iterator[nn.Parameter]:
        return iter([self.transition])
