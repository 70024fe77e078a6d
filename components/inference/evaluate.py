"""Evaluate an inference method on a dataset under an energy: task score, energies, speed.

Returns the tagging metrics (accuracy or conlleval span F1), the mean energy of the gold outputs
and of the method's outputs, and decoding speed (sentences and tokens per second of the
inference call alone, potentials excluded, as Tu & Gimpel time inference: the method sees a
``FixedPotentials`` energy whose potentials were computed before the clock started).

:func:`components.inference.evaluate_decoding.evaluate_decoding` does the same for a decoder of a
``StepScorer`` (greedy, beam, soft beam).

:func:`components.data.batching.decode_dataset` is the one loop over a tagging dataset: evaluation
here and a tagger's own argmax (``components.training.tagger.predict_tags``) both go through it.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from components.data.batching import TaggingDataset, decode_dataset
from components.data.vocab import Vocab
from components.energies.base import require
from components.energies.chain import ChainEnergy, FixedPotentials
from components.metrics.tagging import sentence_stats, tagging_scores


@torch.no_grad()
def evaluate_inference(energy: Any, method: Any, ds: TaggingDataset, labels: Vocab, metric: str, *,
                       batch_size: int = 64, device: str | torch.device = "cpu", instances: bool = False):
    """-> metrics, or (metrics, per-instance arrays ``energy`` [n], ``relaxed_energy`` [n] (NaN
    for methods without a relaxed output), ``gold_energy`` [n] and ``stats`` [n, d] — the metric's
    per-sentence sufficient statistics, ``components.metrics.tagging.sentence_stats`` — in dataset
    order) when ``instances``."""
    require(energy, ChainEnergy, "evaluate_inference")
    energy.eval()
    inst_e = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    inst_r = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    inst_g = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    acc = {"gold": 0.0, "pred": 0.0, "seconds": 0.0}
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)

    def decode(batch) -> torch.Tensor:
        fixed = FixedPotentials.of(energy, batch)
        p = fixed.p
        sync()
        t0 = time.perf_counter()
        res = method(fixed, batch)
        sync()
        acc["seconds"] += time.perf_counter() - t0
        e_g = p.energy(batch.tags)
        acc["gold"] += float(e_g.sum())
        inst_g[batch.index.cpu()] = e_g.double().cpu()
        e_b = p.energy(res.labels)
        acc["pred"] += float(e_b.sum())
        inst_e[batch.index.cpu()] = e_b.double().cpu()
        if res.relaxed is not None:
            inst_r[batch.index.cpu()] = p.energy(res.relaxed).double().cpu()
        return res.labels

    preds = decode_dataset(ds, decode, labels, batch_size=batch_size, device=device)
    gold = [s.tags for s in ds.sentences]
    out = tagging_scores(metric, gold, preds)
    n, seconds = len(ds), acc["seconds"]
    out.update({"energy_gold": acc["gold"] / n, "energy_pred": acc["pred"] / n,
                "decode_seconds": seconds, "decode_sentences_per_s": n / max(seconds, 1e-9),
                "decode_tokens_per_s": ds.n_tokens / max(seconds, 1e-9)})
    if not torch.isnan(inst_r).all():
        out["energy_relaxed"] = float(inst_r.mean())
    if instances:
        return out, {"energy": inst_e.numpy(), "relaxed_energy": inst_r.numpy(), "gold_energy": inst_g.numpy(),
                     "stats": sentence_stats(metric, gold, preds)}
    return out
