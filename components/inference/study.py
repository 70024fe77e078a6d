"""The approximate-inference study of Tu & Gimpel (2019) over a dataset: its config and its parts.

- :class:`ApproxStudyConfig`: what the ``approx`` stage runs (tasks, energies, the GD oracle grid,
  the methods evaluated with one config, the methods tuned on dev, speed, the LM analysis).
- :func:`gd_grid` runs the whole gradient-descent grid (every learning rate and checkpoint N) on a
  range of instances, batch by batch, and returns per-instance counts and energies for the oracle
  (``components.inference.oracle.oracle_select``), as numpy arrays so shards can be gathered;
  :func:`merge_shards` puts shards back in instance order; :func:`grid_table` lays the grid out as
  one long table (a row per instance x N x restart x lr) for the Parquet artifact.
- :func:`tune_on_dev`: for each row value (e.g. N), the tuned value (e.g. lr) with the best dev
  score, then that configuration on test, the same for every instance (Sec. 4.2).
- :func:`speed` times an inference method at a given batch size (examples per second);
  :func:`speed_repeats` times several methods a few times each, interleaved (the repeats behind an
  interval of a speed ratio).
- :func:`selection_stats`: the per-sentence statistics of a GD selection (its counts) in the layout of
  ``components.metrics.tagging.sentence_stats``.
- :func:`subset`: the seeded evaluation subset of a split.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

from components.data.batching import TaggingDataset
from components.data.sampling import subsample_indices
from components.inference.evaluate import evaluate_inference
from components.inference.gd_config import GDConfig
from components.inference.gradient_descent import gradient_descent
from components.inference.oracle import instance_counts
from components.inference.study_config import TunedConfig
from components.seeds import seed_for


def subset(ds: TaggingDataset, n: int, seed: int) -> TaggingDataset:
    """A seeded subset of ``n`` sentences of ``ds`` (all of it when ``n`` <= 0 or >= its size)."""
    return ds.subset(subsample_indices(len(ds), n, seed)) if 0 < n < len(ds) else ds


@torch.no_grad()
def gd_grid(energy: Any, ds: TaggingDataset, indices: Sequence[int], labels: Sequence[str], metric: str,
            cfg: GDConfig, *, batch_size: int = 32, seed: int = 0, device: str = "cpu",
            init_logits: Callable[[Any], torch.Tensor] | None = None,
            on_batch: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """-> ``index`` [n], ``counts`` [C, R, K, n, 3], ``energy`` and ``relaxed_energy`` [C, R, K, n].

    Random starts are drawn per batch from a generator seeded by ``seed_for(seed, "batch_from", i)``,
    ``i`` the batch's first instance, so a shard's results do not depend on how the instances were
    sharded (``seed``: the base of the grid's starts, from the caller's seed policy).
    """
    indices = np.asarray(list(indices), dtype=np.int64)
    order = indices[np.argsort(ds.lengths[indices], kind="stable")]
    parts: dict[str, list[np.ndarray]] = {"index": [], "counts": [], "energy": [], "relaxed_energy": []}
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for j, idx in enumerate(chunks):
        batch = ds.collate(idx.tolist()).to(device)
        p = energy.potentials(batch)
        gen = torch.Generator(device="cpu").manual_seed(seed_for(seed, "batch_from", int(idx[0])))
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


def merge_shards(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Shards of :func:`gd_grid` -> one grid in instance order: ``counts`` [C, R, K, n, 3],
    ``energy`` and ``relaxed_energy`` [C, R, K, n] (tensors)."""
    index = np.concatenate([p["index"] for p in parts])
    order = np.argsort(index, kind="stable")
    if not np.array_equal(index[order], np.arange(len(index))):
        raise ValueError(f"merge_shards: the shards cover instances {sorted(set(index.tolist()))[:10]}..., "
                         f"not each of 0..{len(index) - 1} exactly once")
    counts = np.concatenate([p["counts"] for p in parts], axis=-2)[..., order, :]
    cat = {k: np.concatenate([p[k] for p in parts], axis=-1)[..., order] for k in ("energy", "relaxed_energy")}
    return {"counts": torch.as_tensor(counts), "energy": torch.as_tensor(cat["energy"]),
            "relaxed_energy": torch.as_tensor(cat["relaxed_energy"])}


def grid_table(grid: dict[str, torch.Tensor], cfg: GDConfig) -> pa.Table:
    """The per-instance grid as a long table: instance, N, restart, lr, correct, predicted, gold,
    energy, relaxed_energy (one row per candidate)."""
    counts, e, r = grid["counts"], grid["energy"], grid["relaxed_energy"]
    C, R, K, n = e.shape
    return pa.table({"instance": np.tile(np.arange(n), C * R * K),
                     "N": np.repeat(np.array(cfg.checkpoints), R * K * n),
                     "restart": np.tile(np.repeat(np.arange(R), K * n), C),
                     "lr": np.tile(np.repeat(np.array(cfg.lrs), n), C * R),
                     "correct": counts[..., 0].reshape(-1).numpy(), "predicted": counts[..., 1].reshape(-1).numpy(),
                     "gold": counts[..., 2].reshape(-1).numpy(), "energy": e.reshape(-1).numpy(),
                     "relaxed_energy": r.reshape(-1).numpy()})


def tune_on_dev(make: Callable[[dict[str, Any]], Any], tuned: TunedConfig, energy: Any, dev: TaggingDataset,
                test: TaggingDataset, labels: Any, metric: str, *, batch_size: int = 32,
                device: str = "cpu", instances: bool = False):
    """For each row value: the tuned value with the best dev score (ties: the first listed), then
    that configuration on test. ``make(config mapping)`` builds the method. -> ``{row: metrics +
    {tune_key: chosen}}``; with ``instances``, also ``{row: per-instance arrays}`` of the test run
    (``evaluate_inference(..., instances=True)``'s)."""
    out, inst = {}, {}
    for row in tuned.rows:
        def at(value):
            return make({**tuned.config, tuned.rows_key: row, tuned.tune_key: value})
        dev_scores = [evaluate_inference(energy, at(v), dev, labels, metric, batch_size=batch_size,
                                         device=device)["score"] for v in tuned.values]
        best = tuned.values[int(np.argmax(dev_scores))]
        m = evaluate_inference(energy, at(best), test, labels, metric, batch_size=batch_size, device=device,
                               instances=instances)
        if instances:
            m, inst[str(row)] = m
        out[str(row)] = {**m, tuned.tune_key: best, "dev_score": float(max(dev_scores))}
    return (out, inst) if instances else out


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


@torch.no_grad()
def speed_repeats(energy: Any, methods: dict[str, Any], ds: TaggingDataset, batch_size: int, repeats: int, *,
                  device: str = "cpu") -> dict[str, list[float]]:
    """Examples per second of each of ``methods`` (name -> method) on ``ds`` at ``batch_size``, timed
    ``repeats`` times, interleaved: round ``r`` times every method once, in the order rotated by ``r``,
    so a drift in the machine's load falls on every method alike and round ``r``'s timings are paired.
    -> name -> ``repeats`` speeds (round order). Each method is warmed up once first."""
    if repeats < 1:
        raise ValueError(f"speed_repeats: repeats must be >= 1, got {repeats}")
    n = len(ds)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    batches = [ds.collate(list(range(i, min(i + batch_size, n)))).to(device) for i in range(0, n, batch_size)]
    energy.eval()
    names = list(methods)
    for name in names:
        methods[name](energy, batches[0])          # warm-up
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        k = r % max(len(names), 1)
        for name in names[k:] + names[:k]:
            sync()
            t0 = time.perf_counter()
            for b in batches:
                methods[name](energy, b)
            sync()
            out[name].append(n / max(time.perf_counter() - t0, 1e-9))
    return out


def selection_stats(counts: Any, metric: str) -> np.ndarray:
    """Per-sentence statistics ``[n, d]`` of a GD selection from its counts ``[n, 3]`` = (correct,
    predicted, gold) (:func:`~components.inference.oracle.instance_counts`), in the columns of
    ``components.metrics.tagging.stats_columns(metric)``: ``accuracy`` -> (correct, tokens),
    ``span_f1`` -> (tp, predicted, gold). Summed and scored they give the selection's ``score``."""
    c = np.asarray(counts.numpy() if hasattr(counts, "numpy") else counts, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != 3:
        raise ValueError(f"selection_stats: counts must have shape [n, 3], got {c.shape}")
    if metric == "accuracy":
        return c[:, :2].copy()
    if metric == "span_f1":
        return c.copy()
    raise ValueError(f"selection_stats: unknown metric {metric!r}: expected 'accuracy' or 'span_f1'")
