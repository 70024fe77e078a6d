"""Tiny real seq2seq taggers (``StepScorer``) and batches shared by the decoder and objective tests.

``well_separated`` picks instances whose hard beam has no near-tie: no two of the k + 1 best
candidates at any step closer than ``GAP``, so a peaked softmax at alpha = 1e4 weights everything
but the argmax by exp(-1e4 GAP^2) < 1e-15.
"""
from __future__ import annotations

import math
import types

import pytest
import torch

from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig

N_WORDS = 12
GAP = 0.06          # exp(-1e4 * GAP**2) ~ 2e-16


@pytest.fixture
def float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def tiny_tagger(seed: int, normalisation: str = "local", V: int = 3, scale: float = 8.0) -> Seq2SeqTagger:
    """A tiny tagger whose parameters are scaled up, so score gaps are large."""
    cfg = Seq2SeqTaggerConfig(embedding_dim=4, hidden=5, label_dim=3, dropout=0.0, normalisation=normalisation)
    m = Seq2SeqTagger(cfg, N_WORDS, V, seed=seed).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(scale)
    return m


def tiny_batch(seed: int, B: int = 3, T: int = 4, V: int = 3, lengths: list[int] | None = None):
    g = torch.Generator().manual_seed(1000 + seed)
    if lengths is None:
        lengths = [T, 1] + torch.randint(1, T + 1, (B - 2,), generator=g).tolist()
    lengths_t = torch.tensor(lengths)
    mask = torch.arange(T)[None] < lengths_t[:, None]
    words = torch.randint(1, N_WORDS, (B, T), generator=g) * mask
    tags = torch.randint(0, V, (B, T), generator=g) * mask
    return types.SimpleNamespace(words=words, mask=mask, tags=tags)


@torch.no_grad()
def min_gap(scorer, batch, k: int) -> float:
    """The smallest distance between neighbours among the k + 1 best candidates of any active step
    of the hard beam (an independent re-run of the hard beam's recurrence)."""
    state, mask = scorer.start(batch, k)
    B, T = mask.shape
    s, prev, gaps = None, None, []
    for t in range(T):
        scores, state = scorer.step(state, prev)
        V = scores.shape[-1]
        if s is None:
            s = torch.full((B, k), -math.inf)
            s[:, 0] = 0.0
        cand = (s[:, :, None] + scores).reshape(B, k * V)
        top = cand.sort(-1, descending=True).values[:, :k + 1]
        gap = (top[:, :-1] - top[:, 1:]).min(-1).values if top.shape[1] > 1 else torch.full((B,), math.inf)
        gaps.append(gap[mask[:, t]])
        vals, idx = cand.topk(k, -1)
        active = mask[:, t, None]
        s = torch.where(active, vals, s)
        state = state.reorder(torch.where(active, idx // V, torch.arange(k).expand(B, k)))
        prev = scorer.embed_ids(idx % V)
    return float(torch.cat(gaps).min())


def well_separated(normalisation: str, k: int, n: int = 3, **batch_kw):
    """The first n (tagger, batch) pairs over seeds whose hard beam has no near-tie."""
    out = []
    for seed in range(30):
        scorer, batch = tiny_tagger(seed, normalisation), tiny_batch(seed, **batch_kw)
        if min_gap(scorer, batch, k) > GAP:
            out.append((scorer, batch))
            if len(out) == n:
                return out
    raise AssertionError(f"fewer than {n} well-separated instances for {normalisation}, k={k}")


@torch.no_grad()
def score_of(scorer, batch, row: int, seq: tuple[int, ...]) -> float:
    """Teacher-forced score of ``seq`` for one row of ``batch`` (a dataclass or namespace of
    [B, ...] tensors): the sum of the step scores of its symbols."""
    one = type(batch)(**{k: v[row:row + 1] for k, v in vars(batch).items()})
    state, _ = scorer.start(one, 1)
    prev, total = None, 0.0
    for y in seq:
        scores, state = scorer.step(state, prev)
        total += float(scores[0, 0, y])
        prev = scorer.embed_ids(torch.tensor([[y]]))
    return total
