r"""The step-scorer contract: what an autoregressive scorer offers its decoders.

A sequence model that emits one symbol at a time (the seq2seq tagger, a translation decoder) is a
*step scorer* (:class:`StepScorer`); the decoders that serve it (greedy, hard and soft beam) live in
:mod:`components.inference.beam`. The contract sits on this floor (``models``) so that the models
implementing it and the decoders using it both import it downward (DESIGN.md layering:
``models -> energies -> inference``), without a cycle.

Normalisation is the reading of one network's outputs (Goyal et al. 2019, Sec. 2): ``local``
(``log_softmax`` over the vocabulary at every step) or ``global`` (the raw scores); see
:func:`step_scores`. A state is a :class:`BeamState`: per-hypothesis tensors [B, k, ...] that a
search reorders (hard backpointers) or mixes (soft backpointers), plus a per-instance context the
search never touches.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Protocol, runtime_checkable

import torch

Normalisation = Literal["local", "global"]
NORMALISATIONS: tuple[str, ...] = ("local", "global")


@dataclass
class BeamState:
    """A decoder state: ``beam`` holds the per-hypothesis tensors [B, k, ...] that a search
    reorders (hard backpointers) or mixes (soft backpointers); ``context`` is per-instance and
    opaque to the search (encoder states, the step index)."""
    beam: tuple[torch.Tensor, ...]
    context: Any = None

    def reorder(self, index: torch.Tensor) -> "BeamState":
        """Hard backpointers: hypothesis i takes the state of ``index[b, i]`` (long [B, k'])."""
        out = []
        for x in self.beam:
            idx = index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:])
            out.append(x.gather(1, idx))
        return BeamState(tuple(out), self.context)

    def mix(self, weights: torch.Tensor) -> "BeamState":
        """Soft backpointers: hypothesis i takes sum_j weights[b, i, j] * state_j ([B, k', k])."""
        out = []
        for x in self.beam:
            flat = x.reshape(x.shape[0], x.shape[1], -1)
            out.append(torch.bmm(weights.to(flat.dtype), flat).reshape(x.shape[0], weights.shape[1], *x.shape[2:]))
        return BeamState(tuple(out), self.context)


@runtime_checkable
class StepScorer(Protocol):
    normalisation: Normalisation                       # log-softmax or raw scores, same network
    n_labels: int                                      # V

    def start(self, batch: Any, k: int) -> tuple[BeamState, torch.Tensor]: ...
    # -> (state with k copies of each instance's start, mask bool [B, T]: the steps each instance takes)
    def step(self, state: BeamState, prev_embedding: torch.Tensor | None) -> tuple[torch.Tensor, BeamState]: ...
    # prev_embedding [B, k, D] (None at the first step: the start symbol) -> (scores [B, k, V], next state)
    def embed(self, weights: torch.Tensor) -> torch.Tensor: ...      # [..., V] -> [..., D]: weights @ E
    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor: ...      # long [...] -> [..., D]


def eos_of(scorer: Any) -> int | None:
    """The scorer's end-of-sequence id, or None (a tagger: one label per input position)."""
    eos = getattr(scorer, "eos", None)
    if eos is not None and not 0 <= int(eos) < scorer.n_labels:
        raise ValueError(f"scorer eos id {eos} is out of range [0, {scorer.n_labels})")
    return None if eos is None else int(eos)


@contextmanager
def reading(scorer: Any, normalisation: str) -> Iterator[Any]:
    """Read ``scorer`` with ``normalisation`` (local | global) inside the block, then restore it."""
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")
    before = scorer.normalisation
    scorer.normalisation = normalisation
    try:
        yield scorer
    finally:
        scorer.normalisation = before


def step_scores(raw: torch.Tensor, normalisation: str) -> torch.Tensor:
    """The scores a decoder sees from a network's raw outputs [..., V]: ``log_softmax`` over the
    last axis (``local``) or the raw scores (``global``)."""
    if normalisation == "local":
        return torch.log_softmax(raw, -1)
    if normalisation == "global":
        return raw
    raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")


# -- input checks ---------------------------------------------------------------------------------
def check_beam_size(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"beam size k must be an integer >= 1, got {k!r}")


def check_mask(mask: torch.Tensor) -> None:
    lengths = mask.sum(1)
    if mask.shape[1] == 0 or bool((lengths == 0).any()):
        bad = [] if mask.shape[1] == 0 else (lengths == 0).nonzero().flatten().tolist()
        raise ValueError(f"empty sentence in the batch (rows {bad or 'all'}): every instance needs >= 1 step")


def check_labels(labels: torch.Tensor, mask: torch.Tensor, n_labels: int, what: str = "labels") -> None:
    """Labels at unmasked positions must lie in [0, n_labels)."""
    real = labels[mask]
    if real.numel() and (int(real.min()) < 0 or int(real.max()) >= n_labels):
        bad = int(real.max()) if int(real.max()) >= n_labels else int(real.min())
        raise ValueError(f"{what}: label id {bad} is out of range [0, {n_labels})")
