"""Evaluate a decoder of a ``StepScorer`` (greedy, hard beam, soft beam) on a tagging dataset:
tagging metrics (accuracy or conlleval span F1), the mean model score of its outputs and decoding
speed (sentences per second of the decoding calls alone). The chain-energy counterpart is
:func:`components.inference.evaluate.evaluate_inference`; both loop through
:func:`components.data.batching.decode_dataset`.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from components.data.batching import TaggingDataset, decode_dataset
from components.data.vocab import Vocab
from components.metrics.tagging import sentence_stats, tagging_scores


@torch.no_grad()
def evaluate_decoding(scorer: Any, method: Any, ds: TaggingDataset, labels: Vocab, metric: str, *,
                      batch_size: int = 64, device: str | torch.device = "cpu", instances: bool = False):
    """A ``StepScorer`` decoded by ``method`` (an ``INFERENCE`` decoder) on ``ds`` -> tagging
    metrics (``score``), ``energy_pred`` (mean -s(y) of the outputs) and decoding speed; with
    ``instances``, (metrics, per-sentence arrays in dataset order: ``stats`` [n, d] — the metric's
    sufficient statistics, ``components.metrics.tagging.sentence_stats`` — and ``energy`` [n])."""
    scorer.eval()
    acc = {"energy": 0.0, "seconds": 0.0}
    inst_e = torch.full((len(ds),), float("nan"), dtype=torch.float64)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)

    def decode(batch) -> torch.Tensor:
        sync()
        t0 = time.perf_counter()
        res = method(scorer, batch)
        sync()
        acc["seconds"] += time.perf_counter() - t0
        acc["energy"] += float(res.energy.sum())
        inst_e[batch.index.cpu()] = res.energy.detach().double().cpu()
        return res.labels

    preds = decode_dataset(ds, decode, labels, batch_size=batch_size, device=device)
    gold = [s.tags for s in ds.sentences]
    out = tagging_scores(metric, gold, preds)
    n, seconds = len(ds), acc["seconds"]
    out.update({"energy_pred": acc["energy"] / max(n, 1), "decode_seconds": seconds,
                "decode_sentences_per_s": n / max(seconds, 1e-9)})
    if instances:
        return out, {"stats": sentence_stats(metric, gold, preds), "energy": inst_e.numpy()}
    return out
