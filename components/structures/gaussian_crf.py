r"""Gaussian CRF inference with a class-agnostic Potts pairwise term (Chandra & Kokkinos 2016;
Chandra, Usunier & Kokkinos 2017; Shevchenko & Osokin, Sec. 4.2, eqs. 9-16).

Score and its maximiser. For one image with ``P = H * W`` pixels and ``M`` labels the scores
``s`` are stacked label-major, ``s = [s_{1,1..P} | ... | s_{M,1..P}]`` (eq. 10), and

    F(s) = -1/2 s^T (W + lam_eff I) s + U^T s,          s* = (W + lam_eff I)^{-1} U      (9, 12)

is maximised by solving one symmetric positive-definite linear system with batched conjugate
gradient (:func:`conjugate_gradient`). Predictions are ``argmax_k s*_{k,j}`` (13) and the
per-pixel "marginals" are ``softmax_k s*_{:,j}`` (14), trained with cross-entropy.

Pairwise term. Pixel embeddings ``A in R^{P x D}`` (the ``[B, D, H, W]`` output of a CNN,
flattened) define ``K = A A^T`` and the class-agnostic Potts matrix

    W_{(k,i),(l,j)} = [k != l] <A_i, A_j>,   i.e.   W = (J_M - I_M) ⊗ K,

which for ``M = 2`` is eq. 16, ``[[0, AA^T], [AA^T, 0]]``. It is applied without ever forming a
``P x P`` matrix: ``(W s)_k = K (sum_l s_l - s_k)`` with ``K x = A (A^T x)``: ``O(M P D)``.

Positive definiteness (``lam_eff``). ``W`` is *not* PSD: the eigenvalues of ``J - I`` are
``M - 1`` (once) and ``-1`` (``M - 1`` times), those of ``K`` are ``mu_1 >= ... >= 0``, so those of
``W`` are ``(M - 1) mu_i`` and ``-mu_i``. ``W + c I`` is positive definite iff ``c > mu_1 =
||A||_2^2``. We use, per example,

    lam_eff = lam + ||A||_F^2 = lam + tr K  >=  lam + mu_1,

so every eigenvalue of ``W + lam_eff I`` lies in ``[lam, lam + M ||A||_F^2]`` (``lam > 0``
required): the system is SPD and CG converges. Its condition number is at most
``(lam + tr K + (M - 1) mu_1) / (lam + tr K - mu_1)``: close to ``(D + M - 1) / (D - 1)`` when the
``D`` singular values of ``A`` are alike (few CG iterations), up to ``1 + M mu_1 / lam`` when ``A``
is nearly rank one with ``mu_1 >> lam`` (more iterations; ``lam`` bounds the conditioning).
Moreover ``W + lam_eff I`` has at most ``2 rank(A) + 1 <= 2 D + 1`` distinct eigenvalues
(``lam_eff + (M - 1) mu_i``, ``lam_eff - mu_i`` and ``lam_eff`` on the null space of ``K``), so in
exact arithmetic CG terminates after at most ``2 D + 1`` iterations whatever ``P`` and ``M``.
``lam_eff`` is a function of ``A`` and **its gradient path is kept**
(``d lam_eff / dA = 2 A``). Equivalently the quadratic term is ``W~(A) = W + ||A||_F^2 I`` plus
``lam I``; ``W~`` is homogeneous of degree 2 in ``A``, so scaling the embeddings by ``sqrt(d)``
scales the whole learned pairwise part, shift included, by ``d`` (:meth:`GCRFPotentials.rescale`).

Backward (implicit differentiation, eq. 15). With ``g = (W + lam_eff I)^{-1} dL/ds*`` (a second
CG solve; the matrix is symmetric):

    dL/dU = g,   dL/dW = -g s*^T,   dL/dlam_eff = -<g, s*>.

Through the Potts structure, ``dL/dK_ij = sum_{k != l} dL/dW_{(k,i),(l,j)}``, i.e.

    G = dL/dK = -( g_+ s_+^T - sum_k g_k s_k^T ),   g_+ = sum_k g_k,  s_+ = sum_k s*_k,

a rank-``(M + 1)`` matrix, and as ``K = A A^T``, ``dL/dA = (G + G^T) A``:

    dL/dA = -[ g_+ (s_+^T A) + s_+ (g_+^T A) - g^T (s* A) - s*^T (g A) ] + 2 (dL/dlam_eff) A,

with ``g, s*`` as ``[M, P]`` matrices: ``O(M P D)``, no ``P x P`` matrix.

Masks. An optional bool ``mask [B, H, W]`` marks valid pixels; invalid ones get zero unary and
zero embedding, so they decouple from the rest and get ``s* = 0``; norms and losses skip them.

Shapes: unary ``[B, M, H, W]``, embeddings ``[B, D, H, W]``, scores ``[B, M, H, W]``.
Complexity: ``O(n_iter B M P D)`` time for the forward solve and the same again backward;
``O(B M P + B P D)`` memory. ``pairwise_norm`` alone builds ``K`` (in row chunks): ``O(B P^2 D)``.

References: S. Chandra, I. Kokkinos, Fast, exact and multi-scale inference for semantic image
segmentation with deep Gaussian CRFs, ECCV 2016. S. Chandra, N. Usunier, I. Kokkinos, Dense and
low-rank Gaussian CRFs using deep embeddings, ICCV 2017. A. Shevchenko, A. Osokin, Scaling
matters in deep structured-prediction models, Sec. 4.2. J. R. Shewchuk, An introduction to the
conjugate gradient method without the agonizing pain, 1994.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from components.config import check_range

__all__ = [
    "GCRFPotentials",
    "GCRFSolveInfo",
    "GCRFSolverConfig",
    "conjugate_gradient",
    "dense_potts",
    "effective_lambda",
    "gcrf_marginals",
    "gcrf_score",
    "gcrf_solve",
    "potts_matvec",
    "predict",
]


@dataclass(frozen=True)
class GCRFSolverConfig:
    lam: float = 1.0          # the lam of eq. 9 (> 0); the solver adds ||A||_F^2 (module doc)
    max_iter: int = 100       # CG iterations, forward and backward each
    tol: float = 1e-5         # stop when ||r|| <= tol ||b|| for every example of the batch

    def __post_init__(self):
        check_range(self, positive=("lam", "max_iter"), nonnegative=("tol",))    # tol 0: max_iter steps


@dataclass
class GCRFSolveInfo:
    """Filled in by :func:`gcrf_solve` when passed as ``info``: CG iterations and the largest
    relative residual of the batch, for the forward solve and (after ``backward``) the backward one."""

    forward_iters: int = 0
    forward_residual: float = float("nan")
    backward_iters: int = 0
    backward_residual: float = float("nan")


def _bdot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).flatten(1).sum(1)


def _bcast(v: Tensor, like: Tensor) -> Tensor:
    return v.view(-1, *([1] * (like.dim() - 1)))


def conjugate_gradient(matvec: Callable[[Tensor], Tensor], b: Tensor, x0: Tensor | None = None,
                       max_iter: int = 100, tol: float = 1e-6) -> tuple[Tensor, int, Tensor]:
    """Solve ``A_b x_b = b_b`` for every example ``b`` of a batch of SPD systems.

    ``matvec`` maps ``[B, *]`` to ``[B, *]`` (example ``b``'s operator on row ``b``), ``b`` is
    ``[B, *]`` and ``x0`` (default 0) the same. Iterates until ``||r_b|| <= tol ||b_b||`` for all
    examples or ``max_iter`` iterations; converged examples are frozen (step 0) while the rest go
    on. Returns ``(x [B, *], n_iter, residual [B])`` with the relative residual norms ``||r_b|| /
    ||b_b||`` (0 for ``b_b = 0``, whose solution is 0). Not meant to be differentiated through
    (see :func:`gcrf_solve` for implicit differentiation). Cost: ``n_iter`` matvecs.
    """
    if b.dim() < 1 or b.shape[0] == 0:
        raise ValueError(f"conjugate_gradient: b must be [B, ...] with B >= 1, got {list(b.shape)}")
    if max_iter < 0 or not tol >= 0:
        raise ValueError(f"conjugate_gradient: need max_iter >= 0 and tol >= 0, got {max_iter}, {tol}")
    bnorm2 = _bdot(b, b)
    zero_rhs = bnorm2 == 0
    if x0 is None:
        x = torch.zeros_like(b)
    else:
        if x0.shape != b.shape:
            raise ValueError(f"conjugate_gradient: x0 must have b's shape {list(b.shape)}, got {list(x0.shape)}")
        x = torch.where(_bcast(zero_rhs, b), torch.zeros_like(x0), x0)
    r = b - matvec(x) if x0 is not None else b.clone()
    p = r.clone()
    rs = _bdot(r, r)
    thresh = (tol * tol) * bnorm2
    active = (rs > thresh) & ~zero_rhs
    n_iter = 0
    while n_iter < max_iter and bool(active.any()):
        Ap = matvec(p)
        pAp = _bdot(p, Ap)
        alpha = torch.where(active, rs / torch.where(active, pAp, torch.ones_like(pAp)), torch.zeros_like(rs))
        x = x + _bcast(alpha, x) * p
        r = r - _bcast(alpha, r) * Ap
        rs_new = _bdot(r, r)
        beta = torch.where(active, rs_new / torch.where(active, rs, torch.ones_like(rs)), torch.zeros_like(rs))
        p = r + _bcast(beta, p) * p
        rs = torch.where(active, rs_new, rs)
        active = active & (rs > thresh)
        n_iter += 1
    residual = torch.where(zero_rhs, torch.zeros_like(rs), rs.sqrt() / bnorm2.sqrt().clamp_min(torch.finfo(b.dtype).tiny))
    return x, n_iter, residual


def potts_matvec(A: Tensor, s: Tensor) -> Tensor:
    """``W s`` for ``W = (J - I) ⊗ A A^T``: ``(W s)_k = A A^T (sum_l s_l - s_k)``.

    A ``[B, P, D]``, s ``[B, M, P]`` -> ``[B, M, P]``; ``O(B M P D)``.
    """
    Ks = (s @ A) @ A.transpose(1, 2)                     # [B, M, P]: K s_k for every k
    return Ks.sum(1, keepdim=True) - Ks


def effective_lambda(embeddings: Tensor, lam: float | Tensor) -> Tensor:
    """``lam_eff = lam + ||A||_F^2`` per example ``[B]`` (differentiable in the embeddings)."""
    return lam + embeddings.pow(2).flatten(1).sum(1)


def dense_potts(embeddings: Tensor, n_labels: int) -> Tensor:
    """The dense ``(M P) x (M P)`` Potts matrix ``W = (J - I) ⊗ A A^T`` per example, label-major
    as in eq. 10: ``[B, M P, M P]``. For tests and tiny images only (``O(M^2 P^2)`` memory)."""
    A = _flat_embeddings(embeddings)
    K = A @ A.transpose(1, 2)
    JI = torch.ones(n_labels, n_labels, dtype=A.dtype, device=A.device) - torch.eye(n_labels, dtype=A.dtype, device=A.device)
    return torch.einsum("kl,bij->bkilj", JI, K).reshape(A.shape[0], n_labels * A.shape[1], n_labels * A.shape[1])


def _flat_embeddings(embeddings: Tensor) -> Tensor:
    if embeddings.dim() != 4:
        raise ValueError(f"embeddings must be [B, D, H, W], got {list(embeddings.shape)}")
    return embeddings.flatten(2).transpose(1, 2)          # [B, P, D]


def _check(unary: Tensor, embeddings: Tensor, mask: Tensor | None) -> None:
    if unary.dim() != 4:
        raise ValueError(f"unary must be [B, M, H, W], got {list(unary.shape)}")
    B, M, H, W = unary.shape
    if embeddings.dim() != 4 or embeddings.shape[0] != B or embeddings.shape[2:] != unary.shape[2:]:
        raise ValueError(f"embeddings must be [B, D, H, W] = [{B}, D, {H}, {W}] like unary, got {list(embeddings.shape)}")
    if mask is not None and (mask.shape != (B, H, W) or mask.dtype != torch.bool):
        raise ValueError(f"mask must be bool [B, H, W] = [{B}, {H}, {W}], got {mask.dtype} {list(mask.shape)}")


class _GCRFSolve(torch.autograd.Function):
    """s* = (W(A) + lam_eff I)^{-1} U on flattened tensors: unary [B, M, P], A [B, P, D], lam_eff [B]."""

    @staticmethod
    def forward(ctx, unary, A, lam_eff, max_iter, tol, info):
        def op(x):
            return potts_matvec(A, x) + lam_eff[:, None, None] * x

        s, n, res = conjugate_gradient(op, unary, x0=unary / lam_eff[:, None, None], max_iter=max_iter, tol=tol)
        if info is not None:
            info.forward_iters, info.forward_residual = n, float(res.max())
        ctx.save_for_backward(A, lam_eff, s)
        ctx.max_iter, ctx.tol, ctx.info = max_iter, tol, info
        return s

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_s):
        A, lam_eff, s = ctx.saved_tensors

        def op(x):
            return potts_matvec(A, x) + lam_eff[:, None, None] * x

        g, n, res = conjugate_gradient(op, grad_s, x0=grad_s / lam_eff[:, None, None],
                                       max_iter=ctx.max_iter, tol=ctx.tol)
        if ctx.info is not None:
            ctx.info.backward_iters, ctx.info.backward_residual = n, float(res.max())
        grad_unary = g if ctx.needs_input_grad[0] else None
        grad_lam = -(g * s).sum((1, 2)) if ctx.needs_input_grad[2] else None
        grad_A = None
        if ctx.needs_input_grad[1]:
            g_sum, s_sum = g.sum(1, keepdim=True), s.sum(1, keepdim=True)       # [B, 1, P]
            # -(G + G^T) A with G = -(g_+ s_+^T - sum_k g_k s_k^T), all products rank <= M + 1
            grad_A = -(g_sum.transpose(1, 2) @ (s_sum @ A) + s_sum.transpose(1, 2) @ (g_sum @ A)
                       - g.transpose(1, 2) @ (s @ A) - s.transpose(1, 2) @ (g @ A))
        return grad_unary, grad_A, grad_lam, None, None, None


def gcrf_solve(unary: Tensor, embeddings: Tensor, lam: float | Tensor = 1.0, *, mask: Tensor | None = None,
               max_iter: int = 100, tol: float = 1e-5, info: GCRFSolveInfo | None = None) -> Tensor:
    """``s* = (W + lam_eff I)^{-1} U`` [B, M, H, W] with the Potts ``W`` of the embeddings.

    unary ``[B, M, H, W]``, embeddings ``[B, D, H, W]``, ``lam > 0`` (float or ``[B]``), mask
    bool ``[B, H, W]`` or None. ``lam_eff = lam + ||A||_F^2`` (module doc). Differentiable in
    unary, embeddings (through ``W`` and ``lam_eff``) and a tensor ``lam`` by a second CG solve
    (eq. 15). ``info`` (optional) receives the iteration counts and residuals.
    """
    _check(unary, embeddings, mask)
    if isinstance(lam, Tensor):
        if lam.dim() > 1 or (lam.dim() == 1 and lam.shape[0] != unary.shape[0]):
            raise ValueError(f"lam must be a float, a 0-d tensor or [B] = [{unary.shape[0]}], got {list(lam.shape)}")
        if bool((lam <= 0).any()):
            raise ValueError("lam must be > 0 (it keeps W + lam_eff I positive definite)")
    elif not lam > 0:
        raise ValueError(f"lam must be > 0 (it keeps W + lam_eff I positive definite), got {lam}")
    if mask is not None:
        m = mask[:, None].to(unary.dtype)
        unary, embeddings = unary * m, embeddings * m
    B, M, H, W = unary.shape
    lam_eff = effective_lambda(embeddings, lam)                            # [B]
    s = _GCRFSolve.apply(unary.reshape(B, M, H * W), _flat_embeddings(embeddings), lam_eff.to(unary.dtype),
                         max_iter, tol, info)
    return s.reshape(B, M, H, W)


def gcrf_score(unary: Tensor, embeddings: Tensor, lam: float | Tensor, s: Tensor, *,
               mask: Tensor | None = None) -> Tensor:
    """``F(s) = -1/2 s^T (W + lam_eff I) s + U^T s`` [B] (eq. 9 with ``lam_eff``) for scores
    ``s [B, M, H, W]``; maximised by :func:`gcrf_solve`'s ``s*``. Differentiable; ``O(B M P D)``."""
    _check(unary, embeddings, mask)
    if s.shape != unary.shape:
        raise ValueError(f"s must be [B, M, H, W] = {list(unary.shape)} like unary, got {list(s.shape)}")
    if mask is not None:
        m = mask[:, None].to(unary.dtype)
        unary, embeddings, s = unary * m, embeddings * m, s * m
    B, M = unary.shape[:2]
    sf, uf = s.reshape(B, M, -1), unary.reshape(B, M, -1)
    lam_eff = effective_lambda(embeddings, lam)
    Hs = potts_matvec(_flat_embeddings(embeddings), sf) + _bcast(lam_eff.expand(B), sf) * sf
    return -0.5 * (sf * Hs).sum((1, 2)) + (uf * sf).sum((1, 2))


def gcrf_marginals(s: Tensor) -> Tensor:
    """Per-pixel label distributions ``softmax_k s_{k, j}`` (eq. 14): [B, M, H, W] -> [B, M, H, W]."""
    return s.softmax(1)


def predict(s: Tensor) -> Tensor:
    """Per-pixel ``argmax_k s_{k, j}`` (eq. 13): [B, M, H, W] -> long [B, H, W]."""
    return s.argmax(1)


def _per_example(f: float | Tensor, like: Tensor) -> float | Tensor:
    if isinstance(f, Tensor) and f.dim() == 1:
        if f.shape[0] != like.shape[0]:
            raise ValueError(f"scale factor must be a scalar or [B] = [{like.shape[0]}], got {list(f.shape)}")
        return _bcast(f, like)
    return f


@dataclass
class GCRFPotentials:
    """GCRF potentials: unary ``[B, M, H, W]``, embeddings ``[B, D, H, W]`` (``W = (J - I) ⊗ A A^T``),
    ``lam`` (> 0) and an optional bool ``mask [B, H, W]`` of valid pixels."""

    unary: Tensor
    embeddings: Tensor
    lam: float = 1.0
    mask: Tensor | None = None

    def __post_init__(self):
        _check(self.unary, self.embeddings, self.mask)

    @property
    def n_labels(self) -> int:
        return int(self.unary.shape[1])

    def _pixel_mask(self) -> Tensor:
        if self.mask is None:
            return torch.ones(self.unary.shape[0], self.unary.shape[2] * self.unary.shape[3],
                              dtype=torch.bool, device=self.unary.device)
        return self.mask.flatten(1)

    # The scaling methods (components.training.scaling) see potentials only through these three.
    def unary_norm(self) -> Tensor:
        """[B] mean absolute unary potential over valid pixels and all labels (S&O's ||U||)."""
        m = self._pixel_mask()[:, None].to(self.unary.dtype)                 # [B, 1, P]
        u = self.unary.flatten(2).abs() * m
        return u.sum((1, 2)) / (m.sum((1, 2)) * self.n_labels).clamp_min(1.0)

    def pairwise_norm(self, chunk: int = 1024) -> Tensor:
        """[B] mean absolute entry of the ``(M P) x (M P)`` Potts matrix over valid pixels (S&O's
        ||W||): ``(M - 1) / M * mean_{i,j} |<A_i, A_j>|``. Builds ``K`` in ``chunk``-row blocks,
        ``O(P^2 D)`` per example; differentiable."""
        A = _flat_embeddings(self.embeddings)
        m = self._pixel_mask().to(A.dtype)                                  # [B, P]
        A = A * m[..., None]                                                # invalid rows are zero
        total = []
        for b in range(A.shape[0]):
            acc = A.new_zeros(())
            for i in range(0, A.shape[1], chunk):
                acc = acc + (A[b, i:i + chunk] @ A[b].T).abs().sum()
            total.append(acc)
        n = m.sum(1).clamp_min(1.0)
        M = self.n_labels
        return torch.stack(total) / (n * n) * ((M - 1) / M)

    def rescale(self, unary: float | Tensor, pairwise: float | Tensor) -> "GCRFPotentials":
        """Unary potentials times ``unary`` and ``W`` times ``pairwise`` (embeddings times
        ``sqrt(pairwise)``, so the ``||A||_F^2`` shift scales too; ``lam`` is kept). Factors are
        scalars or [B] tensors; ``pairwise`` must be >= 0."""
        if bool(torch.as_tensor(pairwise < 0).any()):
            raise ValueError("pairwise scale factor must be >= 0 (W = (J - I) ⊗ A A^T scales by the square of A's factor)")
        root = pairwise.sqrt() if isinstance(pairwise, Tensor) else pairwise ** 0.5
        return GCRFPotentials(self.unary * _per_example(unary, self.unary),
                              self.embeddings * _per_example(root, self.embeddings), self.lam, self.mask)
