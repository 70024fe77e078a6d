"""UNet-like fully convolutional networks (Ronneberger et al. 2015, as used by Shevchenko & Osokin,
Sec. 6.1, for the unary and pixel-embedding networks of the Gaussian CRF).

Encoder: ``depth + 1`` blocks, each ``(conv3x3 -> BatchNorm -> ReLU) x 2`` with
``width * 2^i`` channels at level ``i``, a 2x2 max-pool between consecutive blocks (so the
coarsest level has ``floor``-halved the size ``depth`` times). Decoder: ``depth`` blocks, each
upsampling the coarser features bilinearly *to the exact size of the skip features* (so odd sizes
such as 10 -> 5 -> 2 -> 5 -> 10 work), concatenating the encoder features of that resolution
(shortcut connection) and applying a block of ``width * 2^i`` channels. A final 1x1 convolution
(the "regression layer") maps ``width`` channels to ``out_channels``. The embedding network of
the GCRF is the same architecture with ``out_channels`` = the embedding dimension.

Shapes: ``x [B, C_in, H, W] -> [B, C_out, H, W]`` for any ``H, W >= 1`` (levels whose size would
reach 0 are not pooled further: a pooling step is skipped when a side is 1).
Cost: ``O(B H W width^2)`` per level (a level has 4x fewer pixels and 4x more channel pairs than
the one above), ``O((depth + 1) B H W width^2)`` in all.

Reference: O. Ronneberger, P. Fischer, T. Brox, U-Net: convolutional networks for biomedical
image segmentation, MICCAI 2015.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from components.config import check_range

__all__ = ["UNet", "UNetConfig"]


@dataclass(frozen=True)
class UNetConfig:
    depth: int = 2            # number of 2x2 max-pool steps (encoder levels - 1)
    width: int = 16           # channels at full resolution; doubled at each coarser level
    batch_norm: bool = True   # BatchNorm after every 3x3 convolution

    def __post_init__(self):
        check_range(self, nonnegative=("depth",), positive=("width",))     # depth 0: no pooling


class _Block(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, batch_norm: bool):
        layers: list[nn.Module] = []
        for c in (c_in, c_out):
            layers += [nn.Conv2d(c, c_out, 3, padding=1, bias=not batch_norm)]
            if batch_norm:
                layers += [nn.BatchNorm2d(c_out)]
            layers += [nn.ReLU(inplace=True)]
        super().__init__(*layers)


class UNet(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, cfg: UNetConfig = UNetConfig()):
        super().__init__()
        if cfg.depth < 0 or cfg.width < 1 or in_channels < 1 or out_channels < 1:
            raise ValueError(f"UNet: need depth >= 0, width >= 1 and channels >= 1, got {cfg}, "
                             f"in_channels={in_channels}, out_channels={out_channels}")
        self.cfg = cfg
        self.in_channels = in_channels
        widths = [cfg.width * 2 ** i for i in range(cfg.depth + 1)]
        self.down = nn.ModuleList([_Block(in_channels, widths[0], cfg.batch_norm)] +
                                  [_Block(widths[i - 1], widths[i], cfg.batch_norm) for i in range(1, cfg.depth + 1)])
        self.up = nn.ModuleList([_Block(widths[i + 1] + widths[i], widths[i], cfg.batch_norm)
                                 for i in reversed(range(cfg.depth))])
        self.head = nn.Conv2d(widths[0], out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, in_channels, H, W] -> [B, out_channels, H, W]."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"UNet input x must be [B, {self.in_channels}, H, W], got {list(x.shape)}")
        skips = []
        h = x
        for i, block in enumerate(self.down):
            if i > 0 and min(h.shape[-2:]) >= 2:
                h = F.max_pool2d(h, 2)
            h = block(h)
            skips.append(h)
        skips.pop()
        for block in self.up:
            skip = skips.pop()
            if h.shape[-2:] != skip.shape[-2:]:
                h = F.interpolate(h, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            h = block(torch.cat([h, skip], 1))
        return self.head(h)
