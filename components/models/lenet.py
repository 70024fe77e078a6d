"""LeNet-5-like unary network for OCR letters (LeCun et al. 1998; Shevchenko & Osokin, Sec. 6.1).

Per letter image [1, 32, 32]: conv 10 filters 5x5 -> ReLU -> 2x2 max-pool -> conv 20 filters 5x5
-> ReLU -> 2x2 max-pool -> flatten (20 * 5 * 5 = 500) -> FC 140 -> *last activation* -> FC 26
(linear output). The last activation is the one after the last hidden linear layer — the paper
describes a ReLU after the first FC layer and none after the output, and Sec. 2 swaps "the ReLU
activation of the last linear layer" for a sigmoid: ``relu`` is the default under which joint
training falls behind stage training, ``sigmoid`` the variant where the two agree; ``none`` too.

``LeNetUnary.forward(batch)`` maps an ``OcrBatch`` (images [B, N, 1, 32, 32], mask [B, N]) to
unary potentials [B, N, 26]; only the valid letters go through the CNN (masked rows are 0).
``classify`` gives per-letter scores for stage training's first stage.
Cost: about 0.7 M multiply-adds per letter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from components.config import check_range

ACTIVATIONS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "none": nn.Identity}


@dataclass(frozen=True)
class LeNetConfig:
    conv1: int = 10
    conv2: int = 20
    kernel: int = 5
    hidden: int = 140
    last_activation: Literal["relu", "sigmoid", "none"] = "relu"

    def __post_init__(self):
        check_range(self, positive=("conv1", "conv2", "kernel", "hidden"))


class LeNetUnary(nn.Module):
    def __init__(self, cfg: LeNetConfig = LeNetConfig(), n_labels: int = 26, seed: int = 0):
        super().__init__()
        if cfg.last_activation not in ACTIVATIONS:
            raise ValueError(f"last_activation {cfg.last_activation!r}: expected one of {sorted(ACTIVATIONS)}")
        g = torch.random.fork_rng()
        with g:
            torch.manual_seed(seed)
            k = cfg.kernel
            side = ((32 - k + 1) // 2 - k + 1) // 2
            self.net = nn.Sequential(
                nn.Conv2d(1, cfg.conv1, k), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(cfg.conv1, cfg.conv2, k), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(cfg.conv2 * side * side, cfg.hidden), ACTIVATIONS[cfg.last_activation](),
                nn.Linear(cfg.hidden, n_labels))
        self.n_labels = n_labels

    def classify(self, images: torch.Tensor) -> torch.Tensor:
        """images [M, 1, 32, 32] -> scores [M, L]."""
        if images.dim() != 4 or images.shape[1:] != (1, 32, 32):
            raise ValueError(f"images: expected [M, 1, 32, 32], got {list(images.shape)}")
        return self.net(images)

    def forward(self, batch) -> torch.Tensor:
        images, mask = batch.images, batch.mask
        if images.dim() != 5 or images.shape[:2] != mask.shape:
            raise ValueError(f"batch.images: expected [B, N, 1, 32, 32] matching mask {list(mask.shape)}, "
                             f"got {list(images.shape)}")
        out = images.new_zeros(*mask.shape, self.n_labels)
        out[mask] = self.classify(images[mask])
        return out
