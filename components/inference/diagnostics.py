r"""Convergence diagnostics of MCMC energy traces: rank-normalised split R-hat and bulk ESS.

For one instance, the energies of C chains over S sweeps form a trace ``x`` [C, S]. Following
Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), via ArviZ (``arviz.rhat(x, method="rank")``,
``arviz.ess(x, method="bulk")``):

- split R-hat: each chain is cut in two halves (2C chains of S/2 draws), the draws are replaced by
  the normal scores of their ranks over all chains, and R-hat = sqrt(var_plus / W) compares the
  pooled variance with the within-chain variance W (the rank-normalised and folded versions' max).
  Values near 1 (< 1.01 recommended, < 1.05 lenient) mean the chains agree; chains stuck in
  different modes give R-hat >> 1.
- bulk ESS: the effective number of independent draws of the rank-normalised trace, from its
  autocorrelations (Geyer's initial monotone sequence).

A constant trace (every chain at one energy; e.g. chains that never move or a one-state space) has
no defined R-hat: ArviZ returns nan, and so do we, with ``constant`` set, never an exception.

:func:`trace_diagnostics` takes ``[C, S]`` or ``[C, B, S]`` (B instances) and returns per-instance
tensors; :func:`summarize` turns them into a metric dict; :class:`EnergyTrace` is a ``run_chains``
callback that records ``state.energy`` after each sweep. Needs C >= 2 chains and S >= 4 sweeps.
Cost: O(B C S log(C S)) (the ranks), in NumPy on the CPU.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["trace_diagnostics", "summarize", "EnergyTrace"]


def trace_diagnostics(trace: Tensor) -> dict[str, Tensor]:
    """``rhat`` [B] (float64), ``ess_bulk`` [B] (float64) and ``constant`` [B] (bool) of an energy
    trace ``[C, B, S]`` (C chains, B instances, S sweeps) or ``[C, S]`` (one instance: B = 1).
    Constant instances get nan for both. Non-finite energies are a ``ValueError``."""
    import arviz

    if not isinstance(trace, Tensor) or trace.dim() not in (2, 3):
        raise ValueError(f"trace_diagnostics: trace must be a tensor [C, S] or [C, B, S], got "
                         f"{list(getattr(trace, 'shape', [])) or type(trace).__name__}")
    x = trace.detach().to("cpu", torch.float64)
    if x.dim() == 2:
        x = x[:, None]
    C, B, S = x.shape
    if C < 2 or S < 4:
        raise ValueError(f"trace_diagnostics: need >= 2 chains and >= 4 sweeps, got trace [C={C}, B={B}, S={S}]")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("trace_diagnostics: the trace holds non-finite energies")
    arr = x.numpy()
    rhat = np.full(B, np.nan)
    ess = np.full(B, np.nan)
    constant = np.zeros(B, dtype=bool)
    for b in range(B):
        xb = arr[:, b, :]                                          # [chain, draw]
        if np.ptp(xb) == 0:
            constant[b] = True
            continue
        with warnings.catch_warnings():                            # a constant half-chain divides 0 by 0
            warnings.simplefilter("ignore", RuntimeWarning)
            rhat[b] = float(arviz.rhat(xb, method="rank"))
            ess[b] = float(arviz.ess(xb, method="bulk"))
    return {"rhat": torch.from_numpy(rhat), "ess_bulk": torch.from_numpy(ess), "constant": torch.from_numpy(constant)}


def summarize(diag: dict[str, Tensor], threshold: float = 1.05) -> dict[str, float]:
    """Metric dict over instances: ``rhat_mean``/``rhat_max`` and ``ess_bulk_mean``/``ess_bulk_min``
    over the non-constant ones (nan if none), ``rhat_below`` (fraction of non-constant instances
    with R-hat < ``threshold``), ``constant`` (fraction of constant instances), ``instances``."""
    rhat, ess, const = diag["rhat"], diag["ess_bulk"], diag["constant"]
    ok = ~const & torch.isfinite(rhat)
    n_ok = int(ok.sum())

    def agg(v: Tensor, fn) -> float:
        return float(fn(v[ok])) if n_ok else math.nan

    return {"rhat_mean": agg(rhat, torch.mean), "rhat_max": agg(rhat, torch.max),
            "ess_bulk_mean": agg(ess, torch.mean), "ess_bulk_min": agg(ess, torch.min),
            "rhat_below": float((rhat[ok] < threshold).double().mean()) if n_ok else math.nan,
            "constant": float(const.double().mean()), "instances": float(len(rhat))}


class EnergyTrace:
    """A ``run_chains`` callback recording the energies [C, B] after every step; ``tensor()`` is
    the trace [C, B, S]."""

    def __init__(self) -> None:
        self.energies: list[Tensor] = []

    def __call__(self, i: int, state: Any, stats: dict[str, Tensor]) -> None:
        self.energies.append(state.energy.detach().to("cpu", torch.float64).clone())

    def tensor(self) -> Tensor:
        if not self.energies:
            raise ValueError("EnergyTrace: no steps were recorded")
        return torch.stack(self.energies, -1)
