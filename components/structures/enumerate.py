"""Brute force over all labelings of a linear chain: the oracle for tiny sizes.

For each sequence ``b`` of length ``n_b`` (from the mask) every one of the ``L^{n_b}`` labelings
``y`` is scored directly, ``s(y) = sum_t U[b, t, y_t] + sum_t W_{(b, t-1)}[y_{t-1}, y_t]``, with no
dynamic programming, so it checks ``linear_chain`` independently:

    log Z_b = logsumexp_y s(y),   p_b(y_t = l) = sum_{y: y_t = l} exp(s(y) - log Z_b),
    argmax_b = the best y (optionally among those whose transitions, first and last labels are
    allowed).

Shapes follow ``linear_chain`` (unary [B, N, L], transition [L, L] or [B, N-1, L, L], mask [B, N]
bool, left-aligned); inputs are checked by ``linear_chain.validate``. Complexity ``O(L^n n)`` time
and memory per sequence; refuses more than ``MAX_LABELINGS`` labelings per sequence.
"""
from __future__ import annotations

import torch
from torch import Tensor

from components.structures.linear_chain import Chain, validate

__all__ = ["MAX_LABELINGS", "labelings", "all_scores", "log_partition", "marginals", "argmax"]

MAX_LABELINGS = 1 << 20


def labelings(L: int, n: int, device: torch.device | str = "cpu") -> Tensor:
    """All ``L^n`` label sequences of length ``n`` as ``[L^n, n]`` long, lexicographic order."""
    if L ** n > MAX_LABELINGS:
        raise ValueError(f"enumerate: L^n = {L}^{n} labelings exceed MAX_LABELINGS = {MAX_LABELINGS}")
    k = torch.arange(L ** n, device=device)
    powers = L ** torch.arange(n - 1, -1, -1, device=device)
    return (k[:, None] // powers) % L


def _scores(ch: Chain, b: int) -> tuple[Tensor, Tensor]:
    unary, W = ch.unary, ch.transition
    n = int(ch.mask[b].sum())
    L = unary.shape[-1]
    Y = labelings(L, n, unary.device)                                  # [K, n]
    t = torch.arange(n, device=unary.device)
    s = unary[b, t, Y].sum(1)
    if n > 1:
        Wb = W[b, : n - 1] if ch.per_position else W.expand(n - 1, L, L)
        s = s + Wb[t[:-1], Y[:, :-1], Y[:, 1:]].sum(1)
    return Y, s


def all_scores(unary: Tensor, transition: Tensor, mask: Tensor | None, b: int) -> tuple[Tensor, Tensor]:
    """Every labeling of sequence ``b`` (``[K, n_b]``) and its score (``[K]``)."""
    ch = validate(unary, transition, mask, caller="enumerate.all_scores")
    return _scores(ch, b)


def log_partition(unary: Tensor, transition: Tensor, mask: Tensor | None = None) -> Tensor:
    """log Z [B] by enumeration."""
    ch = validate(unary, transition, mask, caller="enumerate.log_partition")
    return torch.stack([torch.logsumexp(_scores(ch, b)[1], 0) for b in range(unary.shape[0])])


def marginals(unary: Tensor, transition: Tensor, mask: Tensor | None = None) -> Tensor:
    """Exact posteriors [B, N, L] by enumeration (zero rows at masked positions)."""
    ch = validate(unary, transition, mask, caller="enumerate.marginals")
    B, N, L = unary.shape
    out = []
    for b in range(B):
        Y, s = _scores(ch, b)
        p = torch.softmax(s, 0)
        m = (p[:, None, None] * torch.nn.functional.one_hot(Y, L).to(p.dtype)).sum(0)   # [n, L]
        out.append(torch.cat([m, m.new_zeros(N - m.shape[0], L)], 0))
    return torch.stack(out)


def argmax(unary: Tensor, transition: Tensor, mask: Tensor | None = None, *,
           allowed: Tensor | None = None, allowed_start: Tensor | None = None,
           allowed_end: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Best labels [B, N] (0 at masked positions) and scores [B] by enumeration, optionally only
    over labelings with allowed transitions (``allowed[i, j]``) and first / last labels.
    Raises ``ValueError`` when no labeling of a sequence is allowed."""
    ch = validate(unary, transition, mask, allowed=allowed, allowed_start=allowed_start,
                  allowed_end=allowed_end, caller="enumerate.argmax")
    B, N, L = unary.shape
    labels = torch.zeros(B, N, dtype=torch.long, device=unary.device)
    best = []
    for b in range(B):
        Y, s = _scores(ch, b)
        ok = torch.ones(Y.shape[0], dtype=torch.bool, device=Y.device)
        if ch.allowed is not None and Y.shape[1] > 1:
            ok &= ch.allowed[Y[:, :-1], Y[:, 1:]].all(1)
        if ch.allowed_start is not None:
            ok &= ch.allowed_start[Y[:, 0]]
        if ch.allowed_end is not None:
            ok &= ch.allowed_end[Y[:, -1]]
        if not bool(ok.any()):
            raise ValueError(f"enumerate.argmax: no labeling of sequence {b} satisfies allowed / "
                             "allowed_start / allowed_end")
        s = torch.where(ok, s, torch.tensor(-float("inf"), dtype=s.dtype, device=s.device))
        k = int(s.argmax())
        labels[b, : Y.shape[1]] = Y[k]
        best.append(s[k])
    return labels, torch.stack(best)
