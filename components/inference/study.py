"""Batch loops of the approximate-inference study (Tu & Gimpel 2019) over a dataset.

- :func:`gd_grid` runs the whole gradient-descent grid (every learning rate and checkpoint N) on a
  range of instances, batch by batch, and returns per-instance counts and energies for the oracle
  (``components.inference.oracle.oracle_select``), as numpy arrays so shards can be gathered.
- :func:`speed` times an inference method at a given batch size (examples per second).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from components.data.batching import TaggingDataset
from components.inference.gradient_descent import GDConfig, gradient_descent
from components.inference.oracle import instance_counts


@torch.no_grad()
def gd_grid(energy: Any, ds: TaggingDataset, indices: Sequence[int], labels: Sequence[str], metric: str,
            cfg: GDConfig, *, batch_size: int = 32, seed: int = 0, device: str = "cpu",
            init_logits: Callable[[Any], torch.Tensor] | None = None,
            on_batch: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """-> ``index`` [n], ``counts`` [C, R, K, n, 3], ``energy`` and ``relaxed_energy`` [C, R, K, n].

    Random starts are drawn per batch from a generator seeded by ``seed`` and the batch's first
    index, so a shard's results do not depend on how the instances were sharded.
    """
    indices = np.asarray(list(indices), dtype=np.int64)
    order = indices[np.argsort(ds.lengths[indices], kind="stable")]
    parts: dict[str, list[np.ndarray]] = {"index": [], "counts": [], "energy": [], "relaxed_energy": []}
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for j, idx in enumerate(chunks):
        batch = ds.collate(idx.tolist()).to(device)
        p = energy.potentials(batch)
        gen = torch.Generator(device="cpu").manual_seed(seed * 1_000_003 + int(idx[0]))
        z0 = init_logits(batch) if init_logits is not None else None
        res = gradient_descent(p.unary, p.transition, p.mask, cfg, init_logits=z0, generator=gen)
        parts["index"].append(idx)
        parts["counts"].append(instance_counts(res.labels.cpu(), batch.tags.cpu(), batch.mask.cpu(), labels, metric).numpy())
        parts["energy"].append(res.energy.double().cpu().numpy())
        parts["relaxed_energy"].append(res.relaxed_energy.double().cpu().numpy())
        if on_batch:
            on_batch(j + 1, len(chunks))
    return {"index": np.concatenate(parts["index"]), "counts": np.concatenate(parts["counts"], axis=-2),
            "energy": np.concatenate(parts["energy"], axis=-1),
            "relaxed_energy": np.concatenate(parts["relaxed_energy"], axis=-1)}


@torch.no_grad()
def speed(energy: Any, method: Any, ds: TaggingDataset, batch_size: int, *, device: str = "cpu",
          max_examples: int = 0) -> float:
    """Examples per second of ``method`` (potentials included, as a deployed tagger would run)."""
    n = len(ds) if max_examples <= 0 else min(max_examples, len(ds))
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    batches = [ds.collate(list(range(i, min(i + batch_size, n)))).to(device) for i in range(0, n, batch_size)]
    energy.eval()
    method(energy, batches[0])                 # warm-up
    sync()
    t0 = time.perf_counter()
    for b in batches:
        method(energy, b)
    sync()
    return n / max(time.perf_counter() - t0, 1e-9)
