"""Evaluate an inference method on a dataset under an energy: task score, energies, speed.

Returns the tagging metrics (accuracy or conlleval span F1), the mean energy of the gold outputs
and of the method's outputs, and decoding speed (sentences and tokens per second of the
inference call alone, potentials excluded, as Tu & Gimpel time inference).
"""
from __future__ import annotations

import time
from typing import Any

import torch

from components.data.batching import TaggingDataset
from components.data.vocab import Vocab
from components.metrics.tagging import tagging_scores


@torch.no_grad()
def evaluate_inference(energy: Any, method: Any, ds: TaggingDataset, labels: Vocab, metric: str, *,
                       batch_size: int = 64, device: str | torch.device = "cpu", instances: bool = False):
    """-> metrics, or (metrics, per-instance arrays ``energy`` [n] and ``relaxed_energy`` [n] (NaN
    for methods without a relaxed output), in dataset order) when ``instances``."""
    energy.eval()
    preds: list[list[str] | None] = [None] * len(ds)
    inst_e = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    inst_r = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    gold_e = pred_e = 0.0
    seconds = 0.0
    for batch in ds.batches(batch_size):
        batch = batch.to(device)
        p = energy.potentials(batch)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        res = method(energy, batch, potentials=p)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        seconds += time.perf_counter() - t0
        gold_e += float(energy.energy(batch, batch.tags, potentials=p).sum())
        e_b = energy.energy(batch, res.labels, potentials=p)
        pred_e += float(e_b.sum())
        inst_e[batch.index.cpu()] = e_b.double().cpu()
        if res.relaxed is not None:
            inst_r[batch.index.cpu()] = energy.energy(batch, res.relaxed, potentials=p).double().cpu()
        lab = res.labels.cpu()
        for b, i in enumerate(batch.index.tolist()):
            preds[i] = [labels.tokens[j] for j in lab[b, :int(batch.lengths[b])].tolist()]
    out = tagging_scores(metric, [s.tags for s in ds.sentences], preds)  # type: ignore[arg-type]
    n = len(ds)
    out.update({"energy_gold": gold_e / n, "energy_pred": pred_e / n,
                "decode_seconds": seconds, "decode_sentences_per_s": n / max(seconds, 1e-9),
                "decode_tokens_per_s": ds.n_tokens / max(seconds, 1e-9)})
    if not torch.isnan(inst_r).all():
        out["energy_relaxed"] = float(inst_r.mean())
    if instances:
        return out, {"energy": inst_e.numpy(), "relaxed_energy": inst_r.numpy()}
    return out
