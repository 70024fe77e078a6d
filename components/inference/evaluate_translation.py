"""Evaluation of a translation ``StepScorer``: decode a :class:`ParallelDataset` with an
``INFERENCE`` decoder (greedy, hard or soft beam; each stops a hypothesis at ``eos``), turn the
target subwords back into detokenised text and score it with sacrebleu against the detokenised
references (``components.metrics.bleu``)."""
from __future__ import annotations

import time
from typing import Any

import torch

from components.metrics.bleu import corpus_bleu, sentence_stats


@torch.no_grad()
def translate(scorer: Any, method: Any, ds: Any, tgt_vocab: Any, *, batch_size: int = 64,
              device: str | torch.device = "cpu") -> tuple[list[str], float]:
    """-> (the detokenised hypothesis of every pair of ``ds``, in its order; decoding seconds)."""
    scorer.eval()
    out: list[str | None] = [None] * len(ds)
    seconds = 0.0
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    for batch in ds.batches(batch_size, device=device):
        sync()
        t0 = time.perf_counter()
        labels = method(scorer, batch).labels
        sync()
        seconds += time.perf_counter() - t0
        for row, i in zip(labels.tolist(), batch.index.tolist()):
            out[i] = tgt_vocab.decode(row)
    missing = [i for i, h in enumerate(out) if h is None]
    if missing:
        raise RuntimeError(f"translate: pairs {missing[:10]} were never decoded (the dataset's batches skip them)")
    return out, seconds  # type: ignore[return-value]


def evaluate_translation(scorer: Any, method: Any, ds: Any, tgt_vocab: Any, *, batch_size: int = 64,
                         device: str | torch.device = "cpu") -> dict[str, Any]:
    """-> {"score": corpus BLEU, "bleu": the BleuResult, "hypotheses": [...], "decode_seconds",
    "stats": per-sentence BLEU statistics [n, 10] (``components.metrics.bleu.sentence_stats``, for the
    paired bootstrap)}."""
    hyps, seconds = translate(scorer, method, ds, tgt_vocab, batch_size=batch_size, device=device)
    refs = list(ds.references)
    res = corpus_bleu(hyps, refs)
    return {"score": res.score, "bleu": res, "hypotheses": hyps, "decode_seconds": seconds,
            "stats": sentence_stats(hyps, refs)}
