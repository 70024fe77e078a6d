"""Linear-chain CRF energy (Lafferty et al. 2001; Tu & Gimpel 2019, eq. 2).

    E(x, y) = -( sum_t y_t . U(x)_t  +  sum_{t>1} y_{t-1}^T W y_t )

U(x) [B, N, L] comes from a feature network (BLSTM-CRF: a BLSTM over fixed GloVe embeddings;
BLSTM-CRF+: plus a character CNN and fine-tuned embeddings), W [L, L] is a learned transition
matrix (W[i, j]: label i followed by label j). The same expression scores discrete labels and
relaxed outputs (rows of [B, N, L] on the simplex), which is what gradient-descent inference and
inference networks optimise.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from components.energies.base import ChainPotentials


class ChainCRFEnergy(nn.Module):
    structure = "chain"                 # see components.energies.base.ChainEnergy

    def __init__(self, features: nn.Module, n_labels: int):
        super().__init__()
        self.features = features
        self.transition = nn.Parameter(torch.zeros(n_labels, n_labels))

    def potentials(self, batch: Any) -> ChainPotentials:
        unary = self.features(batch.words, batch.mask, batch.chars)
        return ChainPotentials(unary, self.transition, batch.mask)

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor:
        return self.potentials(batch).energy(y)
