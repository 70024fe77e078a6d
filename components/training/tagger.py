"""Local (per-token) tagging: token cross-entropy, argmax prediction and evaluation.

The BLSTM softmax tagger trained this way is the "local baseline" of Tu & Gimpel (2019, appendix).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from components.data.batching import TaggingBatch, TaggingDataset, decode_dataset
from components.data.vocab import Vocab
from components.metrics.tagging import tagging_scores


def token_ce_loss(model: torch.nn.Module, batch: TaggingBatch) -> torch.Tensor:
    """Mean token cross-entropy over unmasked positions."""
    scores = model(batch.words, batch.mask, batch.chars)          # [B, N, L]
    return F.cross_entropy(scores[batch.mask], batch.tags[batch.mask])


@torch.no_grad()
def predict_tags(model: torch.nn.Module, ds: TaggingDataset, labels: Vocab, *, batch_size: int = 64,
                 device: str | torch.device = "cpu") -> list[list[str]]:
    """Per-position argmax labels for every sentence of ``ds``, in dataset order."""
    model.eval()
    return decode_dataset(ds, lambda b: model(b.words, b.mask, b.chars).argmax(-1), labels,
                          batch_size=batch_size, device=device)


def evaluate_tagger(model: torch.nn.Module, ds: TaggingDataset, labels: Vocab, metric: str, *,
                    batch_size: int = 64, device: str | torch.device = "cpu") -> dict[str, float]:
    pred = predict_tags(model, ds, labels, batch_size=batch_size, device=device)
    gold: Sequence[Sequence[str]] = [s.tags for s in ds.sentences]
    return tagging_scores(metric, gold, pred)
