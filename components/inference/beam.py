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

:func:`step_scores` applies the reading; greedy, hard-beam and soft-beam search serve every
``StepScorer`` alike (the search-aware training issue adds them to ``INFERENCE``).
"""
from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

import torch

Normalisation = Literal["local", "global"]
NORMALISATIONS: tuple[str, ...] = ("local", "global")


@runtime_checkable
class StepScorer(Protocol):
    normalisation: Normalisation                       # log-softmax or raw scores, same network

    def start(self, batch: Any, k: int) -> Any: ...
    def step(self, state: Any, prev_embedding: torch.Tensor) -> tuple[torch.Tensor, Any]: ...


def step_scores(raw: torch.Tensor, normalisation: str) -> torch.Tensor:
    """The scores a decoder sees from a network's raw outputs [..., V]: ``log_softmax`` over the
    last axis (``local``) or the raw scores (``global``)."""
    if normalisation == "local":
        return torch.log_softmax(raw, -1)
    if normalisation == "global":
        return raw
    raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")
