r"""Mean-field marginals for linear-chain potentials (Shevchenko & Osokin, eq. 6).

The fully factorised ``q(y) = prod_t q_t(y_t)`` that (locally) minimises KL(q || p) for the chain
CRF ``p(y) ∝ exp(sum_t U[t, y_t] + sum_t W_t[y_t, y_{t+1}])`` satisfies, at every position,

    log q_t(l) = U[t, l] + sum_{l'} q_{t-1}(l') W_{t-1}[l', l] + sum_{l'} W_t[l, l'] q_{t+1}(l') + C_t,

i.e. ``q_t = softmax(U_t + q_{t-1} @ W_{t-1} + W_t @ q_{t+1})`` (the neighbour terms vanish at the
ends of each sequence).

Update schedules (``schedule``):

- ``"alternating"`` (default): block coordinate ascent. Positions of the same parity do not
  interact in the chain, so updating all even positions at once and then all odd positions is
  an exact coordinate minimisation of the mean-field free energy over each block; the free
  energy decreases monotonically and the iteration converges to a fixed point.
- ``"parallel"``: Jacobi updates of every position from the previous iterate. Cheaper to
  reason about but may oscillate (period 2) without damping.

``damping`` ``d`` in ``[0, 1)`` replaces an update by ``(1 - d) * q_new + d * q_old`` (rows stay on
the simplex). One iteration is one sweep over all positions; iteration stops after ``n_iters``
sweeps or as soon as a sweep changes no entry of ``q`` by ``tol`` or more (``converged``).
The iterations are differentiable (unrolled), so a loss on the result can be trained.

Shapes: unary [B, N, L], transition [L, L] or [B, N-1, L, L], mask [B, N] (see
``linear_chain``); the result's marginals are [B, N, L] with zero rows at masked positions.
Complexity: ``O(B N L^2)`` per sweep; memory ``O(B N L)`` (times the sweeps under autograd).

References: A. Shevchenko, A. Osokin, Scaling matters in deep structured-prediction models, eq. (6).
D. Koller, N. Friedman (2009), Probabilistic Graphical Models, Sec. 11.5.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from components.structures.linear_chain import Chain, validate

__all__ = ["MeanFieldResult", "mean_field", "neighbour_messages"]


@dataclass(frozen=True)
class MeanFieldResult:
    marginals: Tensor   # [B, N, L], rows on the simplex at unmasked positions, zero elsewhere
    n_iters: int        # sweeps performed
    converged: bool     # the last sweep changed no entry by tol or more
    delta: float        # largest absolute change of an entry in the last sweep


def neighbour_messages(q: Tensor, transition: Tensor, per_position: bool) -> Tensor:
    """``q_{t-1} @ W_{t-1} + W_t @ q_{t+1}`` [B, N, L] (missing neighbours contribute 0; rows of
    ``q`` at masked positions must be zero)."""
    B, N, L = q.shape
    if N == 1:
        return torch.zeros_like(q)
    if per_position:
        from_left = torch.einsum("bti,btij->btj", q[:, :-1], transition)
        from_right = torch.einsum("btij,btj->bti", transition, q[:, 1:])
    else:
        from_left = q[:, :-1] @ transition
        from_right = q[:, 1:] @ transition.transpose(0, 1)
    zero = q.new_zeros(B, 1, L)
    return torch.cat([zero, from_left], 1) + torch.cat([from_right, zero], 1)


def _update(ch: Chain, q: Tensor, select: Tensor, damping: float) -> Tensor:
    """New q at the positions in ``select`` [B, N] (others unchanged)."""
    new = torch.softmax(ch.unary + neighbour_messages(q, ch.transition, ch.per_position), -1)
    if damping:
        new = (1.0 - damping) * new + damping * q
    return torch.where(select.unsqueeze(-1), new, q)


def mean_field(unary: Tensor, transition: Tensor, mask: Tensor | None = None, *,
               n_iters: int = 50, tol: float = 1e-5,
               schedule: Literal["alternating", "parallel"] = "alternating",
               damping: float = 0.0, init: Tensor | None = None) -> MeanFieldResult:
    """Mean-field marginals of the chain CRF (see the module docstring).

    ``init`` [B, N, L]: starting marginals (rows on the simplex at unmasked positions); default
    ``softmax(unary)``. ``tol`` <= 0 disables early stopping.
    """
    if init is not None and (not isinstance(init, Tensor) or init.dim() != 3):
        raise ValueError(f"mean_field: init must be relaxed marginals [B, N, L], got "
                         f"{list(init.shape) if isinstance(init, Tensor) else type(init).__name__}")
    ch = validate(unary, transition, mask, y=init, caller="mean_field")
    if isinstance(n_iters, bool) or not isinstance(n_iters, int) or n_iters < 1:
        raise ValueError(f"mean_field: n_iters must be a positive int, got {n_iters!r}")
    if schedule not in ("alternating", "parallel"):
        raise ValueError(f"mean_field: schedule must be 'alternating' or 'parallel', got {schedule!r}")
    if not 0.0 <= float(damping) < 1.0:
        raise ValueError(f"mean_field: damping must be in [0, 1), got {damping!r}")
    B, N, L = ch.shape
    mask = ch.mask
    m3 = mask.unsqueeze(-1)
    zero = torch.zeros((), dtype=unary.dtype, device=unary.device)
    q = ch.y if init is not None else torch.where(m3, torch.softmax(unary, -1), zero)
    if schedule == "alternating":
        even = (torch.arange(N, device=unary.device) % 2 == 0).unsqueeze(0) & mask
        blocks = [even, mask & ~even]
    else:
        blocks = [mask]
    delta = float("inf")
    it = 0
    for it in range(1, n_iters + 1):
        old = q
        for sel in blocks:
            q = _update(ch, q, sel, float(damping))
        delta = float((q.detach() - old.detach()).abs().max())
        if tol > 0 and delta < tol:
            break
    return MeanFieldResult(q, it, bool(delta < tol), delta)
