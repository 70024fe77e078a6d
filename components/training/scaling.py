r"""Scaling of unary vs pairwise potentials (Shevchenko & Osokin, "Scaling matters", Sec. 5, App. A.2).

A structured model scores outputs with unary potentials U and pairwise potentials W. Joint training
can fail when their relative scale is wrong; the methods here rescale them. Each works on any
potentials object with ``unary_norm() -> [B]``, ``pairwise_norm() -> [B]`` (mean absolute values,
S&O's ||U|| and ||W||) and ``rescale(u, w)`` (U times u, W times w; scalars or [B]):
``ChainPotentials`` and the Gaussian CRF's ``GCRFPotentials``.

``SCALINGS`` is the registry of methods; each entry has its own frozen config (only what it uses)
and ``make(cfg)`` returns a :class:`ScalingMethod`. With alpha the model's current scale:

- ``none``:        (U, W) — plain joint training.
- ``fixed``:       (alpha U, W) with a fixed alpha (S&O Fig. 1a).
- ``online``:      (alpha U, W) where, after every epoch, alpha is re-chosen from the grid
                   {base^t : t = lo..hi} as the minimiser of the training loss on a subset D of the
                   training set, L_alpha(D) = mean_{(X,Y) in D} L(Y, alpha U(X), W(X))  (eqs 18-19,
                   Algorithm 1); the selected alpha is also used at inference.
- ``offline``:     (alpha U / ||U||, W / ||W||) per example (eq. 20), a fixed alpha; invariant to
                   U -> cU and W -> cW (c > 0, per example).
- ``offline_reg``: (U, W) unchanged, plus lambda (||U|| / ||W|| - alpha)^2 added to the loss (eq. 21).
- ``temperature``: (alpha U, alpha W), both potentials scaled (the baseline of App. A.2).

``ScaledModel`` wraps an energy (anything with ``potentials(batch)``) with a method; alpha is a
buffer, so it travels with the model's state dict (the best-on-dev checkpoint keeps the alpha
that produced it). Every transform is O(size of the potentials); online selection costs one
forward pass over D plus |grid| loss evaluations on the cached potentials.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

import torch
from torch import nn

from components.config import check_range
from components.registry import NoConfig, Registry

SCALINGS = Registry("scaling method")


class ScalingMethod(Protocol):
    selects_alpha: bool        # online: alpha is re-chosen on the subset D after every epoch
    initial_alpha: float       # the starting value of ScaledModel.alpha

    def transform(self, p: Any, alpha: float) -> Any: ...      # the potentials loss and inference see
    def regulariser(self, raw: Any) -> torch.Tensor: ...       # [B] added to the loss (raw potentials)


def ratio(p: Any, eps: float = 1e-12) -> torch.Tensor:
    """[B] ||U|| / ||W|| per example (the quantity of S&O Fig. 1b/1c)."""
    return p.unary_norm() / p.pairwise_norm().clamp_min(eps)


def offline_normalise(p: Any, alpha: float, eps: float = 1e-8) -> Any:
    """(alpha U / ||U||, W / ||W||), norms per example (eq. 20). Invariant to U -> cU, c > 0."""
    return p.rescale(alpha / (p.unary_norm() + eps), 1.0 / (p.pairwise_norm() + eps))


def ratio_regulariser(p: Any, alpha: float, lam: float, eps: float = 1e-8) -> torch.Tensor:
    """[B] lambda (||U|| / ||W|| - alpha)^2 (eq. 21)."""
    return lam * (p.unary_norm() / (p.pairwise_norm() + eps) - alpha) ** 2


def _positive_alpha(cfg: Any, name: str) -> None:
    check_range(cfg, positive=("alpha",))


# -- configs: each holds only what its method uses ---------------------------------------------
@dataclass(frozen=True)
class FixedConfig:
    alpha: float = 1.0                # the unary scale

    def __post_init__(self):
        _positive_alpha(self, "fixed")


@dataclass(frozen=True)
class OnlineConfig:
    alpha: float = 1.0                # the initial alpha (before the first selection)
    grid_base: float = 2.0            # grid: {base^t : t = grid_lo..grid_hi}
    grid_lo: int = -8
    grid_hi: int = 8
    subset_fraction: float = 0.3333   # size of D as a fraction of the training set ...
    subset_max: int = 2000            # ... capped (the paper used ~a third: 2000 OCR words)

    def __post_init__(self):
        _positive_alpha(self, "online")
        check_range(self, positive=("grid_base", "subset_max"), within={"subset_fraction": "(0, 1]"},
                    ordered=[("grid_lo", "<=", "grid_hi")])

    def grid(self) -> list[float]:
        return [float(self.grid_base) ** t for t in range(self.grid_lo, self.grid_hi + 1)]

    def subset_size(self, n_train: int) -> int:
        return max(1, min(self.subset_max, int(round(self.subset_fraction * n_train))))


@dataclass(frozen=True)
class OfflineConfig:
    alpha: float = 8.0                # ||U|| after normalisation (eq. 20; tuned on validation in S&O)
    eps: float = 1e-8                 # added to the norms

    def __post_init__(self):
        _positive_alpha(self, "offline")
        check_range(self, nonnegative=("eps",))


@dataclass(frozen=True)
class OfflineRegConfig:
    alpha: float = 8.0                # the target ratio of eq. 21
    reg_lambda: float = 0.01          # lambda of eq. 21
    eps: float = 1e-8                 # added to ||W||

    def __post_init__(self):
        _positive_alpha(self, "offline_reg")
        check_range(self, nonnegative=("reg_lambda", "eps"))


@dataclass(frozen=True)
class TemperatureConfig:
    alpha: float = 2.0                # in front of both U and W (App. A.2)

    def __post_init__(self):
        _positive_alpha(self, "temperature")


# -- methods -----------------------------------------------------------------------------------
class _Method:
    """The identity transform and no regulariser; subclasses declare what differs."""
    selects_alpha = False

    def __init__(self, cfg: Any):
        self.cfg = cfg

    @property
    def initial_alpha(self) -> float:
        return float(getattr(self.cfg, "alpha", 1.0))

    def transform(self, p: Any, alpha: float) -> Any:
        return p

    def regulariser(self, raw: Any) -> torch.Tensor:
        n = raw.unary_norm()
        return n.new_zeros(n.shape)


class UnaryScale(_Method):
    """(alpha U, W)."""

    def transform(self, p, alpha):
        return p.rescale(alpha, 1.0)


class OnlineScale(UnaryScale):
    """(alpha U, W), alpha re-selected on D (see :meth:`ScaledModel.select_online_alpha`)."""
    selects_alpha = True

    def grid(self) -> list[float]:
        return self.cfg.grid()


class OfflineNormalise(_Method):
    def transform(self, p, alpha):
        return offline_normalise(p, alpha, self.cfg.eps)


class RatioRegularised(_Method):
    def regulariser(self, raw):
        return ratio_regulariser(raw, self.cfg.alpha, self.cfg.reg_lambda, self.cfg.eps)


class Temperature(_Method):
    """(alpha U, alpha W)."""

    def transform(self, p, alpha):
        return p.rescale(alpha, alpha)


SCALINGS.register("none", NoConfig, _Method, doc="(U, W): plain joint training")
SCALINGS.register("fixed", FixedConfig, UnaryScale, doc="(alpha U, W), alpha fixed (Fig. 1a)")
SCALINGS.register("online", OnlineConfig, OnlineScale, doc="(alpha U, W), alpha = argmin of L_alpha(D) each epoch (eqs 18-19)")
SCALINGS.register("offline", OfflineConfig, OfflineNormalise, doc="(alpha U/||U||, W/||W||) per example (eq. 20)")
SCALINGS.register("offline_reg", OfflineRegConfig, RatioRegularised, doc="+ lambda (||U||/||W|| - alpha)^2 (eq. 21)")
SCALINGS.register("temperature", TemperatureConfig, Temperature, doc="(alpha U, alpha W) (App. A.2)")


# -- online selection --------------------------------------------------------------------------
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
    """``energy`` (with ``potentials(batch)``) under the scaling method ``method`` of ``SCALINGS``,
    configured by ``cfg`` (a mapping, the entry's config, or None for its defaults); ``alpha`` is a
    buffer. ``method_name``, ``cfg`` (resolved) and ``method`` (the built object) are attributes."""

    def __init__(self, energy: nn.Module, method: str = "none", cfg: Any = None):
        super().__init__()
        self.energy = energy
        SCALINGS.check(method, "ScaledModel")
        self.method_name = method
        self.cfg = SCALINGS.config(method, cfg, where=f"scaling method {method!r}")
        self.method: ScalingMethod = SCALINGS[method].make(self.cfg)
        self.register_buffer("alpha", torch.tensor(float(self.method.initial_alpha)))

    def raw_potentials(self, batch: Any) -> Any:
        return self.energy.potentials(batch)

    def potentials(self, batch: Any, raw: Any | None = None) -> Any:
        return self.method.transform(raw if raw is not None else self.raw_potentials(batch), float(self.alpha))

    def regulariser(self, raw: Any) -> torch.Tensor:
        """[B] the loss term the method adds (zero except for ``offline_reg``)."""
        return self.method.regulariser(raw)

    @torch.no_grad()
    def select_online_alpha(self, batches: Iterable[Any], targets_of: Callable[[Any], Any],
                            loss: Callable[[Any, Any], torch.Tensor]) -> tuple[float, list[float]]:
        """Algorithm 1, lines 10-12: set alpha to the grid minimiser of L_alpha(D); D = ``batches``."""
        if not self.method.selects_alpha:
            raise ValueError(f"select_online_alpha: scaling method {self.method_name!r} does not select alpha")
        was = self.training
        self.eval()
        cached = [(self.raw_potentials(b), targets_of(b)) for b in batches]
        self.train(was)
        grid = self.method.grid()
        losses = subset_losses([c[0] for c in cached], [c[1] for c in cached], loss, grid)
        alpha = select_alpha(losses, grid)
        self.alpha.fill_(alpha)
        return alpha, losses
