"""A toy chain model shared by the training tests: unary = a linear map of per-position features."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ToyBatch:
    feats: torch.Tensor   # [B, N, F]
    tags: torch.Tensor    # long [B, N]
    mask: torch.Tensor    # bool [B, N]


class FeatUnary(nn.Module):
    def __init__(self, n_feats: int, n_labels: int, *, bias: bool = True, seed: int | None = None):
        super().__init__()
        if seed is not None:
            torch.manual_seed(seed)
        self.lin = nn.Linear(n_feats, n_labels, bias=bias)

    def forward(self, batch):
        return self.lin(batch.feats)
