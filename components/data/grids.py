"""Grid-labelling examples (snakes, Weizmann Horses) between the Parquet store and tensors.

:func:`read_grids` reads a table of schema :data:`components.data.store.GRID` (one row a grid:
``height``, ``width``, ``channels``, ``x`` uint8 ``[H * W * C]`` row-major ``H, W, C``, ``y`` int8
``[H * W]``) back into :class:`~components.data.types.GridExample` records (``x`` uint8
``[H, W, C]``, ``y`` int64 ``[H, W]``); :func:`write_grids` is its inverse. :func:`grid_tensors`
stacks same-sized examples into a batch ``x`` float ``[B, C, H, W]`` in ``[0, 1]`` (uint8 divided
by 255) and ``y`` long ``[B, H, W]``; grids of different sizes are an error, never silently
cropped. :func:`padded_grid_tensors` pads grids of different sizes (the snakes grids run from 4x4
to 10x11) at the bottom and right to a common size with ``x = 0``, ``y = 0`` and returns the bool
``mask [B, H, W]`` of real pixels (the ``mask`` of ``GCRFPotentials``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from components.data import store
from components.data.types import GridExample

__all__ = ["grid_tensors", "padded_grid_tensors", "read_grids", "write_grids"]


def read_grids(path: str | Path) -> list[GridExample]:
    """The grids of a GRID Parquet file, in ``index`` order; a row whose lists do not match its
    ``height * width * channels`` is an error naming the file and the row's index."""
    t = store.read_table(path, store.GRID).to_pydict()
    out = []
    order = np.argsort(np.asarray(t["index"], dtype=np.int64), kind="stable")
    for r in order:
        idx, H, W, C = t["index"][r], t["height"][r], t["width"][r], t["channels"][r]
        x, y = t["x"][r], t["y"][r]
        if min(H, W, C) < 1 or len(x) != H * W * C or len(y) != H * W:
            raise ValueError(f"{path}: grid index {idx}: x has {len(x)} values and y {len(y)}; expected "
                             f"H*W*C = {H}*{W}*{C} and H*W = {H * W} (H, W, C >= 1)")
        out.append(GridExample(x=np.asarray(x, dtype=np.uint8).reshape(H, W, C),
                               y=np.asarray(y, dtype=np.int64).reshape(H, W)))
    if not out:
        raise ValueError(f"{path}: no grids in the file")
    return out


def write_grids(path: str | Path, examples: Sequence[GridExample]) -> int:
    """Write ``examples`` (``x`` uint8-valued ``[H, W, C]``, ``y`` ``[H, W]`` in -128..127) as a
    GRID table, ``index`` = position in the list; returns the row count."""
    xs, ys = [np.asarray(e.x) for e in examples], [np.asarray(e.y) for e in examples]
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.ndim != 3 or y.shape != x.shape[:2]:
            raise ValueError(f"{path}: example {i}: x {list(x.shape)} / y {list(y.shape)}; expected [H, W, C] / [H, W]")
    return store.write_table(path, {
        "index": list(range(len(xs))), "height": [x.shape[0] for x in xs], "width": [x.shape[1] for x in xs],
        "channels": [x.shape[2] for x in xs], "x": [x.astype(np.uint8).reshape(-1).tolist() for x in xs],
        "y": [y.astype(np.int8).reshape(-1).tolist() for y in ys]}, store.GRID)


def _as_float(i: int, x: np.ndarray) -> np.ndarray:
    if x.dtype == np.uint8:
        return x.astype(np.float32) / 255.0
    if np.issubdtype(x.dtype, np.floating):
        if x.size and (x.min() < 0 or x.max() > 1):
            raise ValueError(f"grid tensors: example {i}: float x has values {x.min()}..{x.max()}; expected [0, 1]")
        return x.astype(np.float32)
    raise ValueError(f"grid tensors: example {i}: x has dtype {x.dtype}; expected uint8 or float in [0, 1]")


def _labels(i: int, y: np.ndarray) -> np.ndarray:
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"grid tensors: example {i}: y has dtype {y.dtype}; expected integer labels")
    return y.astype(np.int64)


def grid_tensors(examples: Sequence[GridExample]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack grids: ``(x float32 [B, C, H, W] in [0, 1], y long [B, H, W])``. uint8 ``x`` is divided
    by 255; float ``x`` must already lie in ``[0, 1]``. All grids must share ``[H, W, C]``."""
    if not examples:
        raise ValueError("grid_tensors: no examples")
    shape = np.asarray(examples[0].x).shape
    xs, ys = [], []
    for i, e in enumerate(examples):
        x, y = np.asarray(e.x), np.asarray(e.y)
        if x.ndim != 3 or x.shape != shape or y.shape != shape[:2]:
            raise ValueError(f"grid_tensors: example {i} has x {list(x.shape)} and y {list(y.shape)}; expected "
                             f"x {list(shape)} and y {list(shape[:2])} like example 0 (use padded_grid_tensors for grids of different sizes)")
        xs.append(_as_float(i, x))
        ys.append(_labels(i, y))
    x = torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).contiguous()
    return x, torch.from_numpy(np.stack(ys))


def padded_grid_tensors(examples: Sequence[GridExample], size: tuple[int, int] | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad grids at the bottom/right to ``size = (H, W)`` (default: the largest height and width):
    ``(x float32 [B, C, H, W] in [0, 1], y long [B, H, W], mask bool [B, H, W])``; padding has
    ``x = 0``, ``y = 0`` and ``mask = False``. A grid larger than ``size`` or with another channel
    count is an error naming it."""
    if not examples:
        raise ValueError("padded_grid_tensors: no examples")
    xs, ys = [np.asarray(e.x) for e in examples], [np.asarray(e.y) for e in examples]
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.ndim != 3 or y.shape != x.shape[:2] or x.shape[2] != xs[0].shape[-1]:
            raise ValueError(f"padded_grid_tensors: example {i} has x {list(x.shape)} and y {list(y.shape)}; "
                             f"expected x [H, W, {np.asarray(xs[0]).shape[-1]}] and y [H, W]")
    H, W = size if size is not None else (max(x.shape[0] for x in xs), max(x.shape[1] for x in xs))
    C = xs[0].shape[2]
    x_out = torch.zeros(len(xs), C, H, W)
    y_out = torch.zeros(len(xs), H, W, dtype=torch.long)
    mask = torch.zeros(len(xs), H, W, dtype=torch.bool)
    for i, (x, y) in enumerate(zip(xs, ys)):
        h, w = x.shape[:2]
        if h > H or w > W:
            raise ValueError(f"padded_grid_tensors: example {i} is {h}x{w}, larger than the size {H}x{W}")
        x_out[i, :, :h, :w] = torch.from_numpy(_as_float(i, x)).permute(2, 0, 1)
        y_out[i, :h, :w] = torch.from_numpy(_labels(i, y))
        mask[i, :h, :w] = True
    return x_out, y_out, mask


@dataclass
class GridBatch:
    x: torch.Tensor      # float [B, C, H, W]
    y: torch.Tensor      # long [B, H, W]
    mask: torch.Tensor   # bool [B, H, W]

    def to(self, device) -> "GridBatch":
        return GridBatch(self.x.to(device), self.y.to(device), self.mask.to(device))

    def __len__(self) -> int:
        return int(self.y.shape[0])


class GridSet:
    """Padded grids in memory, batched like the other datasets (``batches(size, shuffle, seed)``)."""

    def __init__(self, examples: Sequence[GridExample]):
        self.x, self.y, self.mask = padded_grid_tensors(examples)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def subset(self, rows: Sequence[int]) -> "GridSet":
        out = GridSet.__new__(GridSet)
        idx = torch.as_tensor(list(rows), dtype=torch.long)
        out.x, out.y, out.mask = self.x[idx], self.y[idx], self.mask[idx]
        return out

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0) -> Iterator[GridBatch]:
        order = np.arange(len(self))
        if shuffle:
            np.random.default_rng(seed).shuffle(order)
        for s in range(0, len(order), batch_size):
            i = torch.as_tensor(order[s:s + batch_size], dtype=torch.long)
            yield GridBatch(self.x[i], self.y[i], self.mask[i])
