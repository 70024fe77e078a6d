r"""Scaling of unary vs pairwise potentials (Shevchenko & Osokin, "Scaling matters", Sec. 5, App. A.2).

A structured model scores outputs with unary potentials U and pairwise potentials W. Joint training
can fail when their relative scale is wrong; the methods here rescale them. Each works on any
potentials object with ``unary_norm() -> [B]``, ``pairwise_norm() -> [B]`` (mean absolute values,
S&O's ||U|| and ||W||) and ``rescale(u, w)`` (U times u, W times w): ``ChainPotentials`` and the
Gaussian CRF's ``GCRFPotentials``.

Methods (``ScalingConfig.method``):

- ``none``:        (U, W) — plain joint training.
- ``fixed``:       (alpha U, W) with a fixed alpha (S&O Fig. 1a).
- ``online``:      (alpha U, W) where, after every epoch, alpha is re-chosen from the grid
                   {2^t : t = lo..hi} as the minimiser of the training loss on a subset D of the
                   training set, L_alpha(D) = mean_{(X,Y) in D} L(Y, alpha U(X), W(X))  (eqs 18-19,
                   Algorithm 1); the selected alpha is also used at inference.
- ``offline``:     (alpha U / ||U||, W / ||W||) per example (eq. 20), a fixed alpha.
- ``offline_reg``: (U, W) unchanged, plus lambda (||U|| / ||W|| - alpha)^2 added to the loss (eq. 21).
- ``temperature``: (alpha U, alpha W), both potentials scaled (the baseline of App. A.2).

``ScaledModel`` wraps an energy (anything with ``potentials(batch)``) with a method; alpha is a
buffer, so it travels with the model's state dict (the best-on-dev checkpoint keeps the alpha
that produced it). Online selection costs one forward pass over D plus |grid| loss evaluations
on the cached potentials.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

import torch
from torch import nn

METHODS = ("none", "fixed", "online", "offline", "offline_reg", "temperature")


@dataclass(frozen=True)
class ScalingConfig:
    method: Literal["none", "fixed", "online", "offline", "offline_reg", "temperature"] = "none"
    alpha: float = 1.0            # fixed / offline / offline_reg target / temperature; online: initial
    reg_lambda: float = 1.0       # offline_reg weight
    grid_base: float = 2.0        # online grid: {base^t : t = grid_lo..grid_hi}
    grid_lo: int = -8
    grid_hi: int = 8
    subset_fraction: float = 0.3333   # online: size of D as a fraction of the training set ...
    subset_max: int = 2000            # ... capped (the paper used ~a third: 2000 OCR words)
    eps: float = 1e-8

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"scaling.method {self.method!r}: expected one of {METHODS}")
        if not self.alpha > 0:
            raise ValueError(f"scaling.alpha must be > 0, got {self.alpha}")
        if self.grid_lo > self.grid_hi:
            raise ValueError(f"scaling grid: grid_lo {self.grid_lo} > grid_hi {self.grid_hi}")
        if not 0 < self.subset_fraction <= 1:
            raise ValueError(f"scaling.subset_fraction must be in (0, 1], got {self.subset_fraction}")

    def grid(self) -> list[float]:
        return [float(self.grid_base) ** t for t in range(self.grid_lo, self.grid_hi + 1)]

    def subset_size(self, n_train: int) -> int:
        return max(1, min(self.subset_max, int(round(self.subset_fraction * n_train))))


def ratio(p: Any, eps: float = 1e-12) -> torch.Tensor:
    """[B] ||U|| / ||W|| per example (the quantity of S&O Fig. 1b/1c)."""
    return p.unary_norm() / p.pairwise_norm().clamp_min(eps)


def offline_normalise(p: Any, alpha: float, eps: float = 1e-8) -> Any:
    """(alpha U / ||U||, W / ||W||), norms per example (eq. 20). Invariant to U -> cU, c > 0."""
    return p.rescale(alpha / (p.unary_norm() + eps), 1.0 / (p.pairwise_norm() + eps))


def ratio_regulariser(p: Any, alpha: float, lam: float, eps: float = 1e-8) -> torch.Tensor:
    """[B] lambda (||U|| / ||W|| - alpha)^2 (eq. 21)."""
    return lam * (p.unary_norm() / (p.pairwise_norm() + eps) - alpha) ** 2


def transform(p: Any, method: str, alpha: float, eps: float = 1e-8) -> Any:
    """The potentials that the loss and inference see under ``method`` (see the module doc)."""
    if method in ("none", "offline_reg"):
        return p
    if method in ("fixed", "online"):
        return p.rescale(alpha, 1.0)
    if method == "offline":
        return offline_normalise(p, alpha, eps)
    if method == "temperature":
        return p.rescale(alpha, alpha)
    raise ValueError(f"scaling method {method!r}: expected one of {METHODS}")


@torch.no_grad()
def subset_losses(potentials: Sequence[Any], targets: Sequence[Any], loss: Callable[[Any, Any], torch.Tensor],
                  grid: Sequence[float]) -> list[float]:
    """L_alpha(D) for every alpha in ``grid``: the mean per-example loss of (alpha U, W) over the
    cached raw potentials of D (a list of batches) and their targets."""
    out = []
    for a in grid:
        total, count = 0.0, 0
        for p, y in zip(potentials, targets):
            ls = loss(p.rescale(a, 1.0), y)
            total += float(ls.sum())
            count += int(ls.numel())
        out.append(total / max(count, 1))
    return out


def select_alpha(losses: Sequence[float], grid: Sequence[float]) -> float:
    """The grid value with the smallest finite loss (ties: the first). All non-finite -> error."""
    finite = [(l, i) for i, l in enumerate(losses) if math.isfinite(l)]
    if not finite:
        raise FloatingPointError(f"online scaling: the subset loss is not finite for any alpha in {list(grid)}")
    return float(grid[min(finite)[1]])


class ScaledModel(nn.Module):
    """``energy`` (with ``potentials(batch)``) under a scaling method; ``alpha`` is a buffer."""

    def __init__(self, energy: nn.Module, cfg: ScalingConfig):
        super().__init__()
        self.energy = energy
        self.cfg = cfg
        self.register_buffer("alpha", torch.tensor(float(cfg.alpha)))

    def raw_potentials(self, batch: Any) -> Any:
        return self.energy.potentials(batch)

    def potentials(self, batch: Any, raw: Any | None = None) -> Any:
        return transform(raw if raw is not None else self.raw_potentials(batch), self.cfg.method,
                         float(self.alpha), self.cfg.eps)

    def regulariser(self, raw: Any) -> torch.Tensor:
        """[B] the loss term the method adds (zero except for ``offline_reg``)."""
        if self.cfg.method != "offline_reg":
            return raw.unary_norm().new_zeros(raw.unary_norm().shape)
        return ratio_regulariser(raw, self.cfg.alpha, self.cfg.reg_lambda, self.cfg.eps)

    @torch.no_grad()
    def select_online_alpha(self, batches: Iterable[Any], targets_of: Callable[[Any], Any],
                            loss: Callable[[Any, Any], torch.Tensor]) -> tuple[float, list[float]]:
        """Algorithm 1, lines 10-12: set alpha to the grid minimiser of L_alpha(D); D = ``batches``."""
        was = self.training
        self.eval()
        cached = [(self.raw_potentials(b), targets_of(b)) for b in batches]
        self.train(was)
        grid = self.cfg.grid()
        losses = subset_losses([c[0] for c in cached], [c[1] for c in cached], loss, grid)
        alpha = select_alpha(losses, grid)
        self.alpha.fill_(alpha)
        return alpha, losses
