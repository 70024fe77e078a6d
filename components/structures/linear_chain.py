r"""Linear-chain CRF: log partition, marginals, Viterbi, scoring and sampling, batched and ragged.

Model (Lafferty et al., 2001; Shevchenko & Osokin, eq. 1). For a sequence of length ``n`` with
unary potentials ``U[t, y]`` and transition potentials ``W[y, y']`` (label ``y`` at position
``t`` followed by ``y'`` at ``t + 1``; optionally position dependent, ``W_t``),

    s(y) = sum_{t<n} U[t, y_t] + sum_{1<=t<n} W_{t-1}[y_{t-1}, y_t]
    log Z = log sum_y exp s(y),     p(y) = exp(s(y) - log Z).

A relaxed output ``q`` (rows on the simplex) is scored by the same multilinear expression,
``sum_t q_t . U_t + sum_t q_{t-1}^T W_{t-1} q_t``, so a one-hot ``q`` scores like its labels.

Shapes. ``B`` sequences, padded length ``N``, ``L`` labels:

    unary       [B, N, L]                float32 or float64, finite
    transition  [L, L]  or  [B, N-1, L, L]   (per position: [b, t] scores t -> t+1)
    mask        [B, N] bool, left-aligned (row b is True exactly for t < n_b, n_b >= 1)

Entries at masked positions (and per-position transitions past a sequence's end) never affect
any result. Every entry point runs :func:`validate` and raises ``ValueError`` naming the
offending tensor.

Algorithms.

- ``log_partition``: the forward algorithm in *scaled probability space* (Rabiner, 1989, Sec. V.A):
  ``alpha_t = normalise((alpha_{t-1} @ exp(W - c)) * exp(U_t + c - m_t))`` with the column maxima
  ``c`` of ``W`` folded into the next unary and the row maxima ``m_t`` kept in log space; log Z is
  the sum of the logs of the per-step normalisers. Each step is one (batched) matrix product, so
  the work runs in BLAS instead of a broadcast log-sum-exp over ``[B, L, L]``. When an entry of
  a step falls below ``(L + 1) * tiny / eps`` of the dtype (potential ranges beyond ~60 within a
  step, e.g. magnitudes ~1e2 and more), underflow could lose a label that later dominates, so
  the affected sequences are recomputed with a log-space forward algorithm: the result is
  accurate for any finite input.
- ``marginals``: the gradient of log Z with respect to the unaries (autograd; Eisner, 2016 —
  "derive rather than duplicate"); it stays differentiable when the inputs require grad, so a
  loss on the marginals can be trained.
- ``viterbi``: max-plus dynamic programming, ``delta_t[j] = max_i (delta_{t-1}[i] + W[i, j]) + U[t, j]``.
  For L > 24 each step is a reduction over the contiguous last axis of ``W^T``, evaluated in
  output-label chunks of bounded size (or, opt-in, as one fused ``torch.compile`` kernel); only
  the ``[B, N, L]`` score history is kept and the back-pointer of the chosen label is recomputed
  (``O(B L)`` per position) during the backtrace. For L <= 24, where per-operation overhead
  dominates, back-pointers are stored and the backtrace is one gather per position. Padded
  positions run like real ones; each sequence is read off at its own last position. ``allowed``
  / ``allowed_start`` / ``allowed_end`` forbid transitions, first and last labels (constrained
  decoding, e.g. :func:`bioes_allowed`). The returned score is ``score(labels)``: exactly the
  score (and, negated, the energy) of the returned labels.
- ``sample``: forward filtering, backward sampling (Carter & Kohn, 1994; Frühwirth-Schnatter,
  1994): ``y_n ~ alpha_n``, ``y_{t-1} | y_t ~ alpha_{t-1}(.) exp W_{t-1}[., y_t]``, drawn with the
  Gumbel-max trick for all samples and sequences at once.

Complexity (``B`` sequences of length ``N``): time ``O(B N L^2)`` for every algorithm; memory
``O(B N L)`` plus the transitions (``log_partition`` with autograd keeps ``O(B N L)``; the
log-space fallback with autograd keeps ``O(B N L^2)``). Viterbi's working buffer is bounded by
``_CHUNK_ELEMENTS``.

Compilation: ``viterbi(..., compile=True)`` (or the environment variable
``APPROXINFER_COMPILE=1``) runs the max-plus step as a ``torch.compile``\ d kernel when
``L >= 64`` (about 2.5-3x faster at L = 400 on a 2-core CPU); the first call compiles (about 5 s
with a warm inductor cache, 15 s cold; new shapes ~2 s more), so it is off by default and never
used for L < 64. If compilation fails, the eager step is used from then on (with one warning).

Precision: float32 log Z and marginals carry a relative error of a few ulps times N (tested
against float64 enumeration, including potentials of magnitude 1e3). On CUDA with TF32
matmuls enabled (``torch.backends.cuda.matmul.allow_tf32``) the scaled forward algorithm
inherits TF32's ~1e-3 relative precision.

References: J. Lafferty, A. McCallum, F. Pereira (2001), Conditional random fields. L. Rabiner
(1989), A tutorial on hidden Markov models. A. Viterbi (1967). C. Carter, R. Kohn (1994), On
Gibbs sampling for state space models. J. Eisner (2016), Inside-outside and forward-backward
algorithms are just backprop. A. Rush (2020), Torch-Struct (``linearchain.py``). A. Shevchenko,
A. Osokin, Scaling matters in deep structured-prediction models.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

import torch
from torch import Tensor

__all__ = [
    "Chain", "validate", "log_partition", "marginals", "viterbi", "score", "sample", "bioes_allowed",
]

_DTYPES = (torch.float32, torch.float64)
# Relaxed outputs: rows must be >= -tol and sum to 1 within tol.
_SIMPLEX_TOL = {torch.float32: 1e-3, torch.float64: 1e-5}
# Largest [B, chunk, L] block a max-plus / log-space step materialises at once (elements):
# 4 MiB of float32 stays in cache; one [B, L, L] block at L = 1000 would be 128 MiB.
_CHUNK_ELEMENTS = 1 << 20
_COMPILE_MIN_LABELS = 64  # below this the compiled step's call overhead outweighs its speed
_BACKPOINTER_MAX_LABELS = 24  # up to here Viterbi stores back-pointers (max with indices is cheap)
_COMPILE_ENV = "APPROXINFER_COMPILE"


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Chain:
    """Validated inputs. ``mask`` is materialised (all True when None was given); ``y`` is the
    labels as ``long`` (0 at masked positions) or the relaxed ``[B, N, L]`` tensor, or None."""

    unary: Tensor
    transition: Tensor
    mask: Tensor
    per_position: bool
    y: Tensor | None = None
    allowed: Tensor | None = None
    allowed_start: Tensor | None = None
    allowed_end: Tensor | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        B, N, L = self.unary.shape
        return B, N, L


def _fail(caller: str, msg: str) -> NoReturn:
    raise ValueError(f"{caller}: {msg}")


def _first_index(bad: Tensor) -> tuple[int, ...]:
    return tuple(bad.nonzero()[0].tolist())


def _check_bool_vector(caller: str, name: str, x: Tensor | None, shape: tuple[int, ...],
                       device: torch.device) -> Tensor | None:
    if x is None:
        return None
    if not isinstance(x, Tensor):
        _fail(caller, f"{name} must be a torch.Tensor of dtype bool, got {type(x).__name__}")
    if x.dtype != torch.bool:
        _fail(caller, f"{name} must have dtype torch.bool, got {x.dtype}")
    if tuple(x.shape) != shape:
        _fail(caller, f"{name} must have shape {list(shape)}, got {list(x.shape)}")
    # small constant masks: follow the potentials to their device
    return x.to(device)


def validate(unary: Tensor, transition: Tensor, mask: Tensor | None = None, *,
             y: Tensor | None = None, allowed: Tensor | None = None,
             allowed_start: Tensor | None = None, allowed_end: Tensor | None = None,
             caller: str = "linear_chain") -> Chain:
    """Check chain potentials (and optional outputs / constraints); raise ``ValueError`` naming
    the tensor and the problem. Used by every entry point of this package.

    ``y``: labels ``[B, N]`` of an integer dtype with values in ``[0, L)`` at unmasked positions,
    or relaxed ``[B, N, L]`` of the potentials' dtype with unmasked rows on the simplex.
    ``allowed`` ``[L, L]``, ``allowed_start`` / ``allowed_end`` ``[L]``: bool (moved to the
    potentials' device).
    """
    if not isinstance(unary, Tensor):
        _fail(caller, f"unary must be a torch.Tensor, got {type(unary).__name__}")
    if unary.dtype not in _DTYPES:
        _fail(caller, f"unary must have dtype float32 or float64, got {unary.dtype}")
    if unary.dim() != 3:
        _fail(caller, f"unary must have shape [B, N, L], got {list(unary.shape)}")
    B, N, L = unary.shape
    if B == 0:
        _fail(caller, f"unary has an empty batch (B=0), shape {list(unary.shape)}")
    if N == 0:
        _fail(caller, f"unary has empty sequences (N=0), shape {list(unary.shape)}")
    if L == 0:
        _fail(caller, f"unary has no labels (L=0), shape {list(unary.shape)}")
    device = unary.device

    if not isinstance(transition, Tensor):
        _fail(caller, f"transition must be a torch.Tensor, got {type(transition).__name__}")
    if transition.dtype != unary.dtype:
        _fail(caller, f"transition must have the dtype of unary ({unary.dtype}), got {transition.dtype}")
    if transition.device != device:
        _fail(caller, f"transition is on {transition.device} but unary is on {device}")
    if tuple(transition.shape) == (L, L):
        per_position = False
    elif tuple(transition.shape) == (B, N - 1, L, L):
        per_position = True
    else:
        _fail(caller, f"transition must have shape [L, L] = {[L, L]} or [B, N-1, L, L] = "
                      f"{[B, N - 1, L, L]}, got {list(transition.shape)}")

    if mask is None:
        mask = torch.ones(B, N, dtype=torch.bool, device=device)
    else:
        if not isinstance(mask, Tensor):
            _fail(caller, f"mask must be a torch.Tensor of dtype bool, got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            _fail(caller, f"mask must have dtype torch.bool, got {mask.dtype}")
        if tuple(mask.shape) != (B, N):
            _fail(caller, f"mask must have shape [B, N] = {[B, N]} (from unary), got {list(mask.shape)}")
        if mask.device != device:
            _fail(caller, f"mask is on {mask.device} but unary is on {device}")
        empty = ~mask[:, 0]
        if bool(empty.any()):
            _fail(caller, f"mask row {_first_index(empty)[0]} has length 0 (every sequence needs >= 1 position)")
        if N > 1:
            gap = mask[:, 1:] & ~mask[:, :-1]
            if bool(gap.any()):
                b, t = _first_index(gap)
                _fail(caller, f"mask must be left-aligned, but row {b} is True at {t + 1} after a False at {t}")

    bad = ~torch.isfinite(unary)
    if bool(bad.any()):
        _fail(caller, f"unary contains NaN or inf (first at index {list(_first_index(bad))})")
    bad = ~torch.isfinite(transition)
    if bool(bad.any()):
        _fail(caller, f"transition contains NaN or inf (first at index {list(_first_index(bad))}); "
                      "forbid transitions with `allowed` instead of -inf")

    if y is not None:
        y = _check_y(caller, y, unary, mask)

    allowed = _check_bool_vector(caller, "allowed", allowed, (L, L), device)
    allowed_start = _check_bool_vector(caller, "allowed_start", allowed_start, (L,), device)
    allowed_end = _check_bool_vector(caller, "allowed_end", allowed_end, (L,), device)
    return Chain(unary, transition, mask, per_position, y, allowed, allowed_start, allowed_end)


def _check_y(caller: str, y: Tensor, unary: Tensor, mask: Tensor) -> Tensor:
    B, N, L = unary.shape
    if not isinstance(y, Tensor):
        _fail(caller, f"y must be a torch.Tensor, got {type(y).__name__}")
    if y.device != unary.device:
        _fail(caller, f"y is on {y.device} but unary is on {unary.device}")
    if y.dim() == 2:
        if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
            _fail(caller, f"y with shape [B, N] must hold integer labels (torch.long), got {y.dtype}")
        if tuple(y.shape) != (B, N):
            _fail(caller, f"y labels must have shape [B, N] = {[B, N]}, got {list(y.shape)}")
        out = mask & ((y < 0) | (y >= L))
        if bool(out.any()):
            b, t = _first_index(out)
            _fail(caller, f"y label {int(y[b, t])} at (b={b}, t={t}) is out of range [0, {L})")
        return torch.where(mask, y.long(), 0)
    if y.dim() == 3:
        if y.dtype != unary.dtype:
            _fail(caller, f"relaxed y must have the dtype of unary ({unary.dtype}), got {y.dtype}")
        if tuple(y.shape) != (B, N, L):
            _fail(caller, f"relaxed y must have shape [B, N, L] = {[B, N, L]}, got {list(y.shape)}")
        tol = _SIMPLEX_TOL[y.dtype]
        m = mask[..., None]
        bad = m & ~torch.isfinite(y)
        if bool(bad.any()):
            _fail(caller, f"relaxed y contains NaN or inf at an unmasked position {list(_first_index(bad))}")
        neg = m & (y < -tol)
        if bool(neg.any()):
            idx = _first_index(neg)
            _fail(caller, f"relaxed y is not on the simplex: entry {list(idx)} = {float(y[idx]):.6g} < 0")
        sums = y.sum(-1)
        off = mask & ((sums - 1).abs() > tol)
        if bool(off.any()):
            b, t = _first_index(off)
            _fail(caller, f"relaxed y is not on the simplex: row (b={b}, t={t}) sums to {float(sums[b, t]):.6g}, "
                          f"not 1 (tolerance {tol:g})")
        return torch.where(m, y, torch.zeros((), dtype=y.dtype, device=y.device))
    _fail(caller, f"y must be labels [B, N] or relaxed [B, N, L], got shape {list(y.shape)}")


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

def _underflow_threshold(dtype: torch.dtype, L: int) -> float:
    """Smallest entry of an unnormalised forward vector that is still accurate.

    Entry ``x_j = (sum_i a_i E_ij) P_j`` of a step is a sum of L positive products of factors
    <= 1; underflow loses at most ``tiny`` (flush-to-zero) per product, ``(L + 1) tiny`` in all.
    If every ``x_j >= (L + 1) tiny / eps`` each entry keeps a relative error of a few ``eps``,
    and a positive linear recursion carries componentwise relative errors forward without
    amplification, so log Z and its gradient stay accurate. A smaller entry means a label
    whose weight fell ~exp(-60) below the step's scale: it could still dominate later (a large
    later potential), so the sequence is recomputed in log space.
    """
    fi = torch.finfo(dtype)
    return (L + 1) * fi.tiny / fi.eps


def _forward_scaled(unary: Tensor, transition: Tensor, mask: Tensor, per_position: bool,
                    keep: bool = False) -> tuple[Tensor, Tensor, list[Tensor]]:
    """Scaled forward algorithm. Returns (log Z [B], inexact [B] bool, normalised alphas).

    Rows flagged ``inexact`` had a forward entry below the underflow threshold and must be
    recomputed in log space; their values are finite (normalisers are clamped), so no NaN
    reaches autograd through them. ``keep``: return the normalised alphas (else ``[]``).
    """
    B, N, L = unary.shape
    thr = _underflow_threshold(unary.dtype, L)
    U = unary
    E_steps: Sequence[Tensor] = ()
    if N > 1:
        # The function is invariant to these shifts, so detaching them leaves gradients exact.
        if per_position:
            c = transition.detach().amax(-2)                      # [B, N-1, L] column maxima
            E = torch.exp(transition - c.unsqueeze(-2))
            E_steps = E.unbind(1)
        else:
            c = transition.detach().amax(0)                       # [L]
            E = torch.exp(transition - c)
        U = torch.cat([unary[:, :1], unary[:, 1:] + c], 1)
    m = U.detach().amax(-1, keepdim=True)                          # [B, N, 1]
    P = torch.exp(U - m).unbind(1)

    a = P[0]
    s = a.sum(-1, keepdim=True).clamp_min(thr)                     # >= 1: the max entry is 1
    a = a / s
    scales = [s]
    alphas = [a]
    for t in range(1, N):
        if per_position:
            x = torch.bmm(a.unsqueeze(1), E_steps[t - 1]).squeeze(1)
        else:
            x = torch.mm(a, E)
        x = x * P[t]
        s = x.sum(-1, keepdim=True).clamp_min(thr)
        a = x / s
        scales.append(s)
        alphas.append(a)
    S = torch.cat(scales, 1)                                       # [B, N]
    with torch.no_grad():
        smallest = torch.stack(alphas, 1).amin(-1) * S             # min_j x_j per step
        inexact = ((smallest < thr) & mask).any(1)
    logz = torch.where(mask, S.log() + m.squeeze(-1), torch.zeros((), dtype=S.dtype, device=S.device)).sum(1)
    return logz, inexact, alphas if keep else []


def _semiring_vecmat(a: Tensor, WT: Tensor, reduce: Callable[[Tensor], Tensor]) -> Tensor:
    """``out[b, j] = reduce_i(a[b, i] + WT[(b,) j, i])`` for ``WT`` [L, L] or [B, L, L].

    The [B, chunk, L] blocks are bounded by ``_CHUNK_ELEMENTS``; without autograd they reuse one
    buffer, so large L neither allocates [B, L, L] per step nor leaves the cache.
    """
    B, L = a.shape
    chunk = max(1, min(L, _CHUNK_ELEMENTS // max(1, B * L)))
    a3 = a.unsqueeze(-2)
    if chunk >= L:
        return reduce(a3 + WT)
    grad = torch.is_grad_enabled() and (a.requires_grad or WT.requires_grad)
    buf = None if grad else torch.empty((B, chunk, L), dtype=a.dtype, device=a.device)
    parts = []
    for s in range(0, L, chunk):
        w = WT[..., s:s + chunk, :]
        if buf is None:
            x = a3 + w
        else:
            x = torch.add(a3, w, out=buf[:, :w.shape[-2]])
        parts.append(reduce(x))
    return torch.cat(parts, -1)


def _logsumexp_last(x: Tensor) -> Tensor:
    return torch.logsumexp(x, -1)


def _amax_last(x: Tensor) -> Tensor:
    return torch.amax(x, -1)


def _forward_log(unary: Tensor, transition: Tensor, mask: Tensor, per_position: bool,
                 keep: bool = False) -> tuple[Tensor, list[Tensor]]:
    """Log-space forward algorithm (exact for any finite input; the fallback of the scaled one).
    Returns (log Z [B], log alphas per position if ``keep``)."""
    N = unary.shape[1]
    WT = transition.transpose(-1, -2)
    a = unary[:, 0]
    hist = [a] if keep else []
    for t in range(1, N):
        w = WT[:, t - 1] if per_position else WT
        nxt = _semiring_vecmat(a, w, _logsumexp_last) + unary[:, t]
        a = torch.where(mask[:, t, None], nxt, a)
        if keep:
            hist.append(a)
    return torch.logsumexp(a, -1), hist


def _log_partition(ch: Chain, unary: Tensor | None = None) -> Tensor:
    unary = ch.unary if unary is None else unary
    W, mask, per = ch.transition, ch.mask, ch.per_position
    logz, inexact, _ = _forward_scaled(unary, W, mask, per)
    if bool(inexact.any()):
        idx = inexact.nonzero().squeeze(1)
        exact, _ = _forward_log(unary[idx], W[idx] if per else W, mask[idx], per)
        logz = logz.index_put((idx,), exact)
    return logz


def _maxplus_step(delta: Tensor, WT: Tensor, u: Tensor) -> Tensor:
    """``max_i (delta[b, i] + W[i, j]) + u[b, j]`` in one expression (for torch.compile)."""
    return torch.amax(delta.unsqueeze(-2) + WT, -1) + u


def _eager_maxplus_step(delta: Tensor, WT: Tensor, u: Tensor) -> Tensor:
    return _semiring_vecmat(delta, WT, _amax_last) + u


class _LazyCompiled:
    """``torch.compile(fn)`` on first use; if compiling or running it fails, warn once and use
    ``fn`` from then on (the process-wide cache of one compiled kernel)."""

    def __init__(self, fn: Callable[..., Tensor], fallback: Callable[..., Tensor]):
        self._fn, self._fallback = fn, fallback
        self._compiled: Callable[..., Tensor] | None = None
        self.failed = False

    def __call__(self, *args: Tensor) -> Tensor:
        if not self.failed:
            try:
                if self._compiled is None:
                    self._compiled = torch.compile(self._fn, dynamic=True)
                return self._compiled(*args)
            except Exception as e:  # noqa: BLE001 - any backend failure means "use eager"
                self.failed = True
                warnings.warn(f"torch.compile of the Viterbi step failed ({type(e).__name__}: {e}); "
                              "using the eager step", RuntimeWarning, stacklevel=3)
        return self._fallback(*args)


_COMPILED_MAXPLUS = _LazyCompiled(_maxplus_step, _eager_maxplus_step)


def _use_compile(flag: bool | None, L: int) -> bool:
    if flag is None:
        flag = os.environ.get(_COMPILE_ENV, "0").strip().lower() in {"1", "true", "yes", "on"}
    return bool(flag) and L >= _COMPILE_MIN_LABELS


def _score(ch: Chain, y: Tensor) -> Tensor:
    """Score of validated ``y`` (labels with 0 at masked positions, or relaxed with zero rows)."""
    unary, W, mask = ch.unary, ch.transition, ch.mask
    B, N, L = unary.shape
    if y.dim() == 2:
        su = torch.where(mask, unary.gather(-1, y.unsqueeze(-1)).squeeze(-1), 0).sum(1)
        if N == 1:
            return su
        if ch.per_position:
            b = torch.arange(B, device=y.device)[:, None]
            t = torch.arange(N - 1, device=y.device)[None, :]
            st = W[b, t, y[:, :-1], y[:, 1:]]
        else:
            st = W[y[:, :-1], y[:, 1:]]
        return su + torch.where(mask[:, 1:], st, 0).sum(1)
    su = (y * unary).sum((1, 2))
    if N == 1:
        return su
    if ch.per_position:
        st = torch.einsum("bti,btij,btj->b", y[:, :-1], W, y[:, 1:])
    else:
        st = ((y[:, :-1] @ W) * y[:, 1:]).sum((1, 2))
    return su + st


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------

def log_partition(unary: Tensor, transition: Tensor, mask: Tensor | None = None) -> Tensor:
    """log Z [B] of each sequence (differentiable; see the module docstring)."""
    ch = validate(unary, transition, mask, caller="log_partition")
    return _log_partition(ch)


def marginals(unary: Tensor, transition: Tensor, mask: Tensor | None = None) -> Tensor:
    """Exact posteriors ``p(y_t = l)`` [B, N, L] (rows sum to 1; zero rows at masked positions).

    Computed as d log Z / d unary. When ``unary`` or ``transition`` requires grad (and grad mode
    is on) the result is differentiable (double backward through the forward algorithm).
    """
    ch = validate(unary, transition, mask, caller="marginals")
    create = torch.is_grad_enabled() and (unary.requires_grad or transition.requires_grad)
    with torch.enable_grad():
        u = unary if unary.requires_grad else unary.detach().requires_grad_()
        logz = _log_partition(ch, u)
        (m,) = torch.autograd.grad(logz.sum(), u, create_graph=create)
    return torch.where(ch.mask.unsqueeze(-1), m, torch.zeros((), dtype=m.dtype, device=m.device))


def score(unary: Tensor, transition: Tensor, mask: Tensor | None, y: Tensor) -> Tensor:
    """``s(y)`` [B] for labels ``y`` [B, N] (integer) or relaxed ``y`` [B, N, L] (rows on the
    simplex): ``sum_t y_t . U_t + sum_t y_{t-1}^T W_{t-1} y_t`` over unmasked positions.
    Masked positions of ``y`` are ignored (their values need not be valid)."""
    ch = validate(unary, transition, mask, y=y, caller="score")
    return _score(ch, ch.y)


def viterbi(unary: Tensor, transition: Tensor, mask: Tensor | None = None, *,
            allowed: Tensor | None = None, allowed_start: Tensor | None = None,
            allowed_end: Tensor | None = None, compile: bool | None = None) -> tuple[Tensor, Tensor]:
    """Highest-scoring labels [B, N] (long, 0 at masked positions) and their scores [B].

    ``allowed`` [L, L] bool: ``allowed[i, j]`` False forbids label ``j`` right after ``i``;
    ``allowed_start`` / ``allowed_end`` [L] bool restrict the first / last label of each sequence.
    Raises ``ValueError`` if some sequence has no labelling that satisfies them. The score is
    ``score(unary, transition, mask, labels)`` (differentiable if the inputs are).
    ``compile``: use the ``torch.compile``\\ d max-plus step for L >= 64 (default: the
    ``APPROXINFER_COMPILE`` environment variable, off when unset).
    """
    ch = validate(unary, transition, mask, allowed=allowed, allowed_start=allowed_start,
                  allowed_end=allowed_end, caller="viterbi")
    B, N, L = ch.shape
    mask, per = ch.mask, ch.per_position
    with torch.no_grad():
        U = unary.detach()
        W = transition.detach()
        neg_inf = torch.tensor(-math.inf, dtype=U.dtype, device=U.device)
        if ch.allowed is not None:
            W = torch.where(ch.allowed, W, neg_inf)
        Us = U.unbind(1)
        d = Us[0]
        if ch.allowed_start is not None:
            d = torch.where(ch.allowed_start, d, neg_inf)
        # Padded steps run like real ones (no per-step masking); each sequence's scores are read
        # at its last position, and the backtrace starts there.
        hist = [d]
        small = L <= _BACKPOINTER_MAX_LABELS
        if small:
            # Few labels: per-step op overhead dominates, so keep back-pointers (max with indices)
            # and backtrace with one gather per step.
            # W_t[i, j] + U[t+1, j] for every step at once: [B, N-1, L, L] is small here.
            WU = (W + U[:, 1:, None, :]).unbind(1)
            bps = []
            for t in range(1, N):
                d, i = (d.unsqueeze(-1) + WU[t - 1]).max(-2)
                hist.append(d)
                bps.append(i)
        else:
            step = _COMPILED_MAXPLUS if _use_compile(compile, L) else _eager_maxplus_step
            WT = W.transpose(-1, -2).contiguous()
            WT_steps = WT.unbind(1) if per else ()
            for t in range(1, N):
                d = step(d, WT_steps[t - 1] if per else WT, Us[t])
                hist.append(d)
        rows = torch.arange(B, device=U.device)
        last = mask.sum(1) - 1
        final = torch.stack(hist, 1)[rows, last] if N > 1 else d
        if ch.allowed_end is not None:
            final = torch.where(ch.allowed_end, final, neg_inf)
        best, end_label = final.max(-1)
        if ch.allowed is not None or ch.allowed_start is not None or ch.allowed_end is not None:
            infeasible = torch.isneginf(best)
            if bool(infeasible.any()):
                b = int(infeasible.nonzero()[0, 0])
                _fail("viterbi", f"no labelling of sequence {b} (length {int(mask[b].sum())}) satisfies "
                                 "allowed / allowed_start / allowed_end")
        cur = end_label
        out = [cur]
        if small and N > 1:
            # Past a sequence's end every back-pointer points at its last label.
            BP = torch.where(mask[:, 1:, None], torch.stack(bps, 1), end_label[:, None, None])
            for t in range(N - 2, -1, -1):
                cur = BP[:, t].gather(1, cur.unsqueeze(1)).squeeze(1)
                out.append(cur)
        elif N > 1:
            # Recompute the arg max only for the chosen label of each sequence.
            for t in range(N - 1, 0, -1):
                wrow = WT_steps[t - 1][rows, cur] if per else WT[cur]          # [B, L] = W[:, cur]
                prev = (hist[t - 1] + wrow).argmax(-1)
                cur = torch.where(mask[:, t], prev, end_label)
                out.append(cur)
        labels = torch.where(mask, torch.stack(out[::-1], 1), 0)
    return labels, _score(ch, labels)


def sample(unary: Tensor, transition: Tensor, mask: Tensor | None = None, n_samples: int = 1,
           generator: torch.Generator | None = None) -> Tensor:
    """``n_samples`` exact samples ``y ~ p(y)`` per sequence: labels [n_samples, B, N] (long, 0 at
    masked positions), by forward filtering, backward sampling. ``generator`` seeds the draws
    (it must live on the potentials' device)."""
    ch = validate(unary, transition, mask, caller="sample")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        _fail("sample", f"n_samples must be a positive int, got {n_samples!r}")
    B, N, L = ch.shape
    mask, per = ch.mask, ch.per_position
    S = n_samples
    with torch.no_grad():
        U, W = unary.detach(), transition.detach()
        _, inexact, alphas = _forward_scaled(U, W, mask, per, keep=True)
        log_alpha = torch.stack(alphas, 1).log()                       # [B, N, L], -inf allowed
        if bool(inexact.any()):
            idx = inexact.nonzero().squeeze(1)
            _, hist = _forward_log(U[idx], W[idx] if per else W, mask[idx], per, keep=True)
            log_alpha = log_alpha.index_put((idx,), torch.stack(hist, 1))
        WT = W.transpose(-1, -2)
        rows = torch.arange(B, device=U.device)

        def draw(logits: Tensor) -> Tensor:
            u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype, device=logits.device)
            return (logits - torch.log(-torch.log(u))).argmax(-1)     # Gumbel-max

        last = mask.sum(1) - 1
        cur = draw(log_alpha[rows, last].expand(S, B, L))              # [S, B]
        out = []
        for t in range(N - 1, 0, -1):
            mt = mask[:, t]
            out.append(torch.where(mt, cur, 0))
            wrow = WT[:, t - 1][rows, cur] if per else WT[cur]        # [S, B, L]: W[:, cur]
            prev = draw(log_alpha[:, t - 1] + wrow)
            cur = torch.where(mt, prev, cur)
        out.append(cur)
        return torch.stack(out[::-1], -1)


def bioes_allowed(labels: Sequence[str]) -> tuple[Tensor, Tensor, Tensor]:
    """Transition / start / end constraints of the BIOES scheme for ``labels`` (the label vocab).

    Returns ``(allowed [L, L], start [L], end [L])`` bool tensors (CPU; ``viterbi`` moves them):
    after ``B-X`` or ``I-X`` only ``I-X`` / ``E-X`` may follow; after ``O``, ``E-*``, ``S-*``
    (and at the start) only ``O``, ``B-*``, ``S-*``; a sequence may end only in ``O``, ``E-*`` or
    ``S-*``. The "other" label ``*`` (truncated vocabularies) behaves like ``O``. Any other label
    raises ``ValueError``.
    """
    parsed: list[tuple[str, str]] = []
    for i, lab in enumerate(labels):
        if not isinstance(lab, str):
            raise ValueError(f"bioes_allowed: labels[{i}] must be a str, got {type(lab).__name__}")
        if lab in ("O", "*"):
            parsed.append(("O", ""))
        elif len(lab) > 2 and lab[0] in "BIES" and lab[1] == "-":
            parsed.append((lab[0], lab[2:]))
        else:
            raise ValueError(f"bioes_allowed: labels[{i}] = {lab!r} is neither O, '*' nor B-, I-, E-, S- "
                             "followed by a type")
    L = len(parsed)
    if L == 0:
        raise ValueError("bioes_allowed: labels is empty")
    allowed = torch.zeros(L, L, dtype=torch.bool)
    for i, (p, typ) in enumerate(parsed):
        for j, (q, typ2) in enumerate(parsed):
            if p in "BI":
                allowed[i, j] = q in "IE" and typ2 == typ
            else:
                allowed[i, j] = q in "OBS"
    start = torch.tensor([p in "OBS" for p, _ in parsed], dtype=torch.bool)
    end = torch.tensor([p in "OES" for p, _ in parsed], dtype=torch.bool)
    return allowed, start, end
