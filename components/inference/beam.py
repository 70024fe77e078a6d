r"""Autoregressive scorers and the decoders that serve them (the ``StepScorer`` contract).

A sequence model that emits one symbol at a time — the seq2seq tagger of Goyal et al. (2018) and
Goyal, Dyer & Berg-Kirkpatrick (2019), a translation decoder — is a *step scorer*: from a batch it
starts ``k`` hypotheses per instance, and each step maps the previous symbols' embeddings to
scores over the vocabulary:

    state_0 = start(batch, k)                                # k hypotheses per instance
    scores_t, state_{t+1} = step(state_t, prev_embedding)    # scores [B, k, V]; prev_embedding [B, k, D]

``prev_embedding`` is an embedding, not an id, so a decoder may feed a hard symbol's embedding
(greedy, hard beam), an expectation under a distribution (soft argmax, differentiable scheduled
sampling) or a weighted mix of beam items (the soft beam's backpointers, Goyal et al. 2018 Alg. 3).

Normalisation is the reading of one network's outputs (Goyal et al. 2019, Sec. 2):

- ``local``: ``log_softmax`` over the vocabulary at every step: a locally normalised model,
  ``log p(y) = sum_t log p(y_t | y_<t, x)``;
- ``global``: the raw scores: a globally normalised model whose sequence score
  ``s(y) = sum_t s_t(y_t)`` is normalised over whole sequences (energy ``E(x, y) = -s(y)``).

:func:`step_scores` applies the reading. A state is a :class:`BeamState`: per-hypothesis tensors
[B, k, ...] that a search reorders (hard backpointers) or mixes (soft backpointers), plus a
per-instance context the search never touches.

Searches, batched over instances and beam items (the only Python loop is over time steps):

- :func:`greedy`; :func:`beam_search` (hard beam of size k, Goyal et al. 2018 Alg. 1);
- :func:`soft_beam_search` (Alg. 3): :func:`continuous_top_k` (Alg. 2) over the k x V candidates,
  soft backpointers, the beam recurrence on mixed states and embeddings, the relaxed cumulative
  cost D and the relaxed loss; hard backpointers for decoding (the paper's soft beam decoding);
- :func:`unroll` (one hypothesis with any feed: teacher forcing, scheduled sampling, soft argmax)
  and :func:`sequence_scores` (teacher-forced s(y)).

End of sequence. A scorer whose output length is not the input's (translation) has an ``eos`` id
(taggers have none: ``eos_of(scorer)`` is None); ``start``'s mask is then the most steps each
instance may take (a decoding horizon; for a ``TranslationBatch`` its ``decode_mask``). A hypothesis
that emits ``eos`` is finished: from then on its only continuation is ``eos`` again at score 0, so
finished and unfinished hypotheses compete on their total score in the beam; results carry each
hypothesis's length (up to and including its first ``eos``, or the horizon). Greedy and hard beam
stop once every hypothesis is finished; the soft beam runs to the horizon when it has a cost table
(a finished item goes on paying d_t(eos): emitting eos before the reference ends costs what the
missing tokens cost). In the soft beam "finished" follows the hard backpointers (the identifiable
path the paper decodes with). Without a cost table, a sentence whose every beam item has finished is
frozen (its scores, relaxed max score and labels stay as they are), so that every decoder's output
and scores depend on the sentence alone, never on the batch-mates that are still running
(``tests/inference/test_batch_invariance.py``).

Readings: :func:`reading` switches a scorer's ``normalisation`` for a block (the self-normalisation
objective reads the raw scores of a network that is otherwise read locally).

Registered in ``INFERENCE`` as ``greedy``, ``beam`` and ``soft_beam`` (``needs=StepScorer``):
``method(scorer, batch) -> InferenceResult`` with energy -s(y).

Bad input is a ``ValueError`` naming it: an empty sentence, a label id out of range, k < 1,
alpha <= 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch

from components.config import field_error
from components.inference.base import InferenceResult, check
from components.models.step_scorer import (NORMALISATIONS, BeamState, Normalisation, StepScorer, check_beam_size,
                                           check_labels, check_mask, eos_of, reading, step_scores)

_NEG = -1e9        # the score of the k-1 copies of the start hypothesis in the soft beam (finite: gradients stay 0)


# -- input checks ---------------------------------------------------------------------------------
def check_alpha(alpha: float) -> None:
    a = float(alpha)
    if not a > 0 or a != a or a == float("inf"):
        raise ValueError(f"alpha (the peaked-softmax temperature) must be a finite number > 0, got {alpha!r}")


# -- relaxations ----------------------------------------------------------------------------------
def peaked_softmax(scores: torch.Tensor, alpha: float, dim: int = -1) -> torch.Tensor:
    """softmax(alpha * scores): -> the one-hot argmax as alpha -> inf (no ties)."""
    return torch.softmax(alpha * scores, dim)


def continuous_top_k(scores: torch.Tensor, k: int, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Goyal et al. (2018) Alg. 2: scores [B, N] -> (p [B, k, N], m [B, k]) with m the top-k values
    and p_i = peaked-softmax_alpha(-(s - m_i)^2), peaked on the i-th best entry."""
    m = scores.topk(k, dim=-1).values
    p = torch.softmax(-alpha * (scores[:, None, :] - m[:, :, None]) ** 2, -1)
    return p, m


# -- searches --------------------------------------------------------------------------------------
@dataclass
class SearchResult:
    labels: torch.Tensor                 # long [B, T]: the best hypothesis (0 at masked steps)
    score: torch.Tensor                  # [B]: its model score s(y) (search-relaxed for the soft beam)
    beam_labels: torch.Tensor            # long [B, k, T]: every hypothesis, best first for the hard beam
    beam_scores: torch.Tensor            # [B, k]
    stats: dict[str, Any] = field(default_factory=dict)
    lengths: torch.Tensor | None = None       # long [B]: the best hypothesis's length (incl. its eos)
    beam_lengths: torch.Tensor | None = None  # long [B, k]


@dataclass
class SoftBeamResult(SearchResult):
    beam_costs: torch.Tensor | None = None   # [B, k]: D_T, the relaxed cumulative cost of each item
    loss: torch.Tensor | None = None         # [B]: peaked-softmax_alpha(s_T) . D_T  (G~_DL)
    max_score: torch.Tensor | None = None    # [B]: peaked-softmax_alpha(s_T) . s_T  (the hinge's s_max)


def _follow(back: list[torch.Tensor], toks: list[torch.Tensor]) -> torch.Tensor:
    """Backtrack hard backpointers: back[t], toks[t] long [B, k] -> labels [B, k, T]."""
    B, k = toks[-1].shape
    ptr = torch.arange(k, device=toks[-1].device).expand(B, k)
    out = []
    for t in range(len(toks) - 1, -1, -1):
        out.append(toks[t].gather(1, ptr))
        ptr = back[t].gather(1, ptr)
    return torch.stack(out[::-1], -1)


def _only_eos(scores: torch.Tensor, finished: torch.Tensor, eos: int, low: float) -> torch.Tensor:
    """A finished hypothesis's one continuation: ``eos`` at score 0, every other symbol at ``low``."""
    forced = torch.full_like(scores, low)
    forced[..., eos] = 0.0
    return torch.where(finished[..., None], forced, scores)


def _all_done(finished: torch.Tensor, mask: torch.Tensor, t: int) -> bool:
    """Every hypothesis finished or out of steps after step t."""
    left = mask[:, t + 1:].any(1) if t + 1 < mask.shape[1] else torch.zeros_like(mask[:, 0])
    return bool((finished | ~left.reshape(-1, *([1] * (finished.dim() - 1)))).all())


def greedy(scorer: StepScorer, batch: Any) -> SearchResult:
    """Greedy decoding: the argmax symbol's embedding is fed to the next step (until ``eos``, for a
    scorer that has one)."""
    eos = eos_of(scorer)
    state, mask = scorer.start(batch, 1)
    check_mask(mask)
    prev = None
    toks, total = [], None
    finished = torch.zeros_like(mask[:, 0])
    length = torch.zeros(mask.shape[0], dtype=torch.long, device=mask.device)
    for t in range(mask.shape[1]):
        scores, state = scorer.step(state, prev)
        best, tok = scores[:, 0].max(-1)
        active = mask[:, t] & ~finished
        tok = torch.where(active, tok, torch.full_like(tok, eos) if eos is not None else torch.zeros_like(tok))
        if eos is not None:
            tok = torch.where(mask[:, t], tok, torch.zeros_like(tok))
        step = torch.where(active, best, torch.zeros_like(best))
        total = step if total is None else total + step
        length = length + active.long()
        toks.append(tok)
        if eos is not None:
            finished = finished | (active & (tok == eos))
            if _all_done(finished, mask, t):
                break
        prev = scorer.embed_ids(tok[:, None])
    labels = torch.stack(toks, -1)
    return SearchResult(labels, total, labels[:, None], total[:, None], lengths=length, beam_lengths=length[:, None])


def length_normaliser(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """Wu et al. (2016)'s length penalty lp(|Y|) = ((5 + |Y|) / 6)^alpha (1 at alpha = 0)."""
    return ((5.0 + lengths.to(torch.float64)) / 6.0) ** float(alpha)


def beam_search(scorer: StepScorer, batch: Any, k: int, length_penalty: float = 0.0) -> SearchResult:
    """Hard beam search of size ``k`` (Goyal et al. 2018 Alg. 1), batched over instances and items:
    each step's k x V candidates s_i + f(h_i, v) are cut to the top k; states follow the hard
    backpointers. The beam starts from one hypothesis (the other k-1 at -inf).

    ``length_penalty`` alpha > 0 (an eos scorer's translations): candidates are ranked, and the best
    item picked, by s / lp(length) (:func:`length_normaliser`), so a hypothesis that finished early
    no longer crowds out longer ones by the sum of fewer log-probabilities (the beam's bias to short
    outputs); the scores returned stay the raw sums s. At alpha = 0 the ranking is s itself."""
    check_beam_size(k)
    if not (length_penalty >= 0.0 and math.isfinite(length_penalty)):
        raise ValueError(f"beam_search: length_penalty must be a finite number >= 0, got {length_penalty}")
    eos = eos_of(scorer)
    state, mask = scorer.start(batch, k)
    check_mask(mask)
    B, T = mask.shape
    dev = mask.device
    ident = torch.arange(k, device=dev).expand(B, k)
    s = None
    prev = None
    back, toks = [], []
    finished = torch.zeros(B, k, dtype=torch.bool, device=dev)
    blen = torch.zeros(B, k, dtype=torch.long, device=dev)
    for t in range(T):
        scores, state = scorer.step(state, prev)               # [B, k, V]
        V = scores.shape[-1]
        if s is None:
            s = torch.full((B, k), float("-inf"), dtype=scores.dtype, device=dev)
            s[:, 0] = 0.0
        if eos is not None:
            scores = _only_eos(scores, finished, eos, float("-inf"))
        cand = (s[:, :, None] + scores).reshape(B, k * V)
        if length_penalty > 0.0:
            # a candidate's length after this step: a finished item's stays (its forced eos is free)
            after = (blen + (~finished).long())[:, :, None].expand(B, k, V).reshape(B, k * V)
            rank = cand / length_normaliser(after, length_penalty).to(cand.dtype)
            _, idx = rank.topk(k, dim=-1)
            vals = cand.gather(1, idx)
        else:
            vals, idx = cand.topk(k, dim=-1)
        b_t, y_t = idx // V, idx % V
        active = mask[:, t, None]
        s = torch.where(active, vals, s)
        b_t = torch.where(active, b_t, ident)
        y_t = torch.where(active, y_t, torch.zeros_like(y_t))
        back.append(b_t)
        toks.append(y_t)
        was_done = finished.gather(1, b_t)
        blen = torch.where(active, blen.gather(1, b_t) + (~was_done).long(), blen)
        state = state.reorder(b_t)
        if eos is not None:
            finished = torch.where(active, was_done | (y_t == eos), finished)
            if _all_done(finished, mask, t):
                break
        prev = scorer.embed_ids(y_t)
    beam_labels = _follow(back, toks)
    best = (s / length_normaliser(blen, length_penalty).to(s.dtype) if length_penalty > 0.0 else s).argmax(-1)
    rows = torch.arange(B, device=dev)
    return SearchResult(beam_labels[rows, best], s.gather(1, best[:, None])[:, 0], beam_labels, s,
                        lengths=blen[rows, best], beam_lengths=blen)


def soft_beam_search(scorer: StepScorer, batch: Any, k: int, alpha: float, *, cost: torch.Tensor | None = None,
                     augment: bool = False) -> SoftBeamResult:
    """Goyal et al. (2018) Alg. 3, the continuous relaxation of beam search, batched.

    At each step the k x V candidate scores s~ = s_i + f(h_i, v) (``augment``: + d_t(v), the
    cost-augmented search of the hinge surrogate) go through :func:`continuous_top_k`; item i's
    soft backpointer is the row sum of p_i over the vocabulary, its input embedding the column
    sum a_i @ E, its score sum(s~ * p_i), its cumulative cost a_i . d_t + sum_j b~_ij D_j (``cost``
    [B, T, V]: d_t(v), the decomposable cost of emitting v at step t) and its decoder state the
    soft mix sum_j b~_ij h_j. Hard backpointers (the argmax of each p_i) are followed to decode,
    as the paper's soft beam decoding does. Returns the relaxed loss peaked-softmax_alpha(s_T) . D_T
    (``loss``, when ``cost`` is given) and the relaxed max score (``max_score``)."""
    check_beam_size(k)
    check_alpha(alpha)
    if augment and cost is None:
        raise ValueError("soft_beam_search: augment=True needs a cost table [B, T, V]")
    eos = eos_of(scorer)
    state, mask = scorer.start(batch, k)
    check_mask(mask)
    B, T = mask.shape
    dev = mask.device
    if cost is not None and (cost.shape[0] != B or cost.shape[1] != T):
        raise ValueError(f"soft_beam_search: cost has shape {tuple(cost.shape)}, expected [{B}, {T}, V]")
    ident = torch.arange(k, device=dev).expand(B, k)
    eye = torch.eye(k, device=dev)
    s = D = None
    prev = None
    back, toks = [], []
    finished = torch.zeros(B, k, dtype=torch.bool, device=dev)
    blen = torch.zeros(B, k, dtype=torch.long, device=dev)
    for t in range(T):
        scores, state = scorer.step(state, prev)               # [B, k, V]
        V = scores.shape[-1]
        if eos is not None:
            scores = _only_eos(scores, finished, eos, _NEG)
        if s is None:
            s = torch.full((B, k), _NEG, dtype=scores.dtype, device=dev)
            s[:, 0] = 0.0
            D = torch.zeros(B, k, dtype=scores.dtype, device=dev)
        if cost is not None and cost.shape[-1] != V:
            raise ValueError(f"soft_beam_search: cost has {cost.shape[-1]} labels, the scorer {V}")
        d_t = cost[:, t].to(scores.dtype) if cost is not None else None
        cand = s[:, :, None] + scores
        if augment:
            cand = cand + d_t[:, None, :]
        flat = cand.reshape(B, k * V)
        p, _ = continuous_top_k(flat, k, alpha)                 # [B, k(new), k*V]
        p4 = p.reshape(B, k, k, V)                              # [b, new i, old j, v]
        soft_back = p4.sum(-1)                                  # [B, k, k]
        a = p4.sum(2)                                           # [B, k, V]
        s_new = (p * flat[:, None, :]).sum(-1)
        D_new = torch.bmm(soft_back, D[:, :, None])[..., 0]
        if d_t is not None:
            D_new = D_new + (a * d_t[:, None, :]).sum(-1)
        hard = p.argmax(-1)
        b_t, y_t = hard // V, hard % V
        active = mask[:, t, None]
        if eos is not None and cost is None:
            # a sentence whose every item has finished is frozen: at finite alpha the relaxed top-k
            # would go on mixing its finished items' scores for as long as its batch-mates run
            active = active & ~finished.all(-1, keepdim=True)
        s = torch.where(active, s_new, s)
        D = torch.where(active, D_new, D)
        b_t = torch.where(active, b_t, ident)
        y_t = torch.where(active, y_t, torch.zeros_like(y_t))
        back.append(b_t)
        toks.append(y_t)
        was_done = finished.gather(1, b_t)
        blen = torch.where(active, blen.gather(1, b_t) + (~was_done).long(), blen)
        w = torch.where(active[..., None], soft_back, eye.to(soft_back.dtype))
        state = state.mix(w)
        if eos is not None:
            finished = torch.where(active, was_done | (y_t == eos), finished)
            if cost is None and _all_done(finished, mask, t):
                break
        prev = scorer.embed(a)
    beam_labels = _follow(back, toks)
    top = peaked_softmax(s, alpha)                              # soft pick of the best item
    best = s.argmax(-1)
    rows = torch.arange(B, device=dev)
    return SoftBeamResult(beam_labels[rows, best], s.gather(1, best[:, None])[:, 0],
                          beam_labels, s, lengths=blen[rows, best], beam_lengths=blen, beam_costs=D,
                          loss=(top * D).sum(-1) if cost is not None else None, max_score=(top * s).sum(-1))


def unroll(scorer: StepScorer, batch: Any, feed: Callable[[int, torch.Tensor], torch.Tensor],
           steps: int | None = None) -> torch.Tensor:
    """Run the decoder with one hypothesis per instance, feeding ``feed(t, scores_t [B, V]) ->
    embedding [B, D]`` to step t+1 (teacher forcing feeds the gold symbol; scheduled sampling a
    mix of gold and model choices) -> the step scores [B, T, V]; ``steps`` = T (default: the
    length of ``start``'s mask; the gold length when the decoder is fed gold beyond an ``eos``
    scorer's horizon)."""
    state, mask = scorer.start(batch, 1)
    check_mask(mask)
    T = mask.shape[1] if steps is None else int(steps)
    prev = None
    out = []
    for t in range(T):
        scores, state = scorer.step(state, prev)
        out.append(scores[:, 0])
        if t + 1 < T:
            prev = feed(t, scores[:, 0])[:, None]
    return torch.stack(out, 1)


def sequence_scores(scorer: StepScorer, batch: Any, labels: torch.Tensor) -> torch.Tensor:
    """s(y) = sum_t score_t(y_t) with the decoder fed y (teacher forcing) -> [B]; for a locally
    normalised scorer this is log p(y | x)."""
    mask = batch.mask
    check_labels(labels, mask, scorer.n_labels)
    scores = unroll(scorer, batch, lambda t, _: scorer.embed_ids(labels[:, t]), steps=labels.shape[1])
    return (scores.gather(-1, labels[..., None])[..., 0] * mask).sum(1)


# -- INFERENCE entries: decoders as inference methods --------------------------------------------
@dataclass(frozen=True)
class GreedyConfig:
    pass


@dataclass(frozen=True)
class BeamConfig:
    k: int = 3
    length_penalty: float = 0.0      # Wu et al. (2016)'s alpha; 0 = rank by the raw score (the papers' beam)

    def __post_init__(self):
        check_beam_size(self.k)
        if not (self.length_penalty >= 0.0 and math.isfinite(self.length_penalty)):
            raise field_error(self, "length_penalty", f"must be a finite number >= 0, got {self.length_penalty}")


@dataclass(frozen=True)
class SoftBeamConfig:
    k: int = 3
    alpha: float = 1.0

    def __post_init__(self):
        check_beam_size(self.k)
        check_alpha(self.alpha)


def _result(res: SearchResult):
    return InferenceResult(labels=res.labels, relaxed=None, energy=-res.score.detach(), stats=dict(res.stats))


class GreedyDecoder:
    needs: ClassVar[type] = StepScorer

    def __call__(self, scorer: StepScorer, batch: Any):
        check(self, scorer)
        return _result(greedy(scorer, batch))


class BeamDecoder:
    needs: ClassVar[type] = StepScorer

    def __init__(self, cfg: BeamConfig):
        self.cfg = cfg

    def __call__(self, scorer: StepScorer, batch: Any):
        check(self, scorer)
        return _result(beam_search(scorer, batch, self.cfg.k, self.cfg.length_penalty))


class SoftBeamDecoder:
    needs: ClassVar[type] = StepScorer

    def __init__(self, cfg: SoftBeamConfig):
        self.cfg = cfg

    def __call__(self, scorer: StepScorer, batch: Any):
        check(self, scorer)
        return _result(soft_beam_search(scorer, batch, self.cfg.k, self.cfg.alpha))


def make_greedy(cfg: GreedyConfig) -> GreedyDecoder:
    """The ``INFERENCE`` builder of ``greedy``."""
    return GreedyDecoder()
