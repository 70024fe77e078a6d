"""R-hat and bulk ESS of energy traces: chains drawn independently from one exact target agree
(R-hat ~ 1), chains stuck in different modes do not (R-hat > 1.1), constant traces give nan with
a flag; and an MH run on a toy MLM energy, recorded by ``EnergyTrace``."""
from __future__ import annotations

import math

import pytest
import torch

from components.inference.diagnostics import EnergyTrace, summarize, trace_diagnostics
from components.inference.mcmc.base import run_chains
from components.inference.mcmc.registry import SAMPLERS
from tests.inference.test_mcmc_mlm import DT, Exact, toy


def exact_energies(seed: int = 0):
    energy, batch = toy("norm", seed=seed)
    ex = Exact(energy, batch, 0, SAMPLERS.config("mh_mlm"), 1.0)
    return ex.E, ex.pi


def draws(pi: torch.Tensor, E: torch.Tensor, C: int, S: int, seed: int, support: torch.Tensor | None = None):
    """[C, S] energies of i.i.d. states drawn from pi (restricted to ``support`` if given)."""
    p = pi if support is None else torch.where(support, pi, torch.zeros_like(pi))
    g = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(p, C * S, replacement=True, generator=g).view(C, S)
    return E[idx]


def test_independent_chains_from_the_target_agree():
    E, pi = exact_energies()
    trace = torch.stack([draws(pi, E, 4, 500, s) for s in range(3)], 1)        # [C=4, B=3, S=500]
    d = trace_diagnostics(trace)
    assert d["rhat"].shape == (3,) and not bool(d["constant"].any())
    assert bool((d["rhat"] < 1.05).all()), d["rhat"]
    assert bool((d["ess_bulk"] > 0.5 * 4 * 500).all()), d["ess_bulk"]          # i.i.d.: ESS ~ C S


def test_chains_stuck_in_different_modes_disagree():
    E, pi = exact_energies()
    low = E <= E.median()
    trace = torch.cat([draws(pi, E, 2, 400, 1, low), draws(pi, E, 2, 400, 2, ~low)])   # [4, 400]
    d = trace_diagnostics(trace)
    assert float(d["rhat"][0]) > 1.1, d["rhat"]


def test_constant_traces_are_flagged_not_fatal():
    E, pi = exact_energies()
    trace = torch.stack([draws(pi, E, 3, 50, 0), torch.full((3, 50), 2.5, dtype=DT)], 1)
    d = trace_diagnostics(trace)
    assert d["constant"].tolist() == [False, True]
    assert math.isfinite(float(d["rhat"][0])) and math.isnan(float(d["rhat"][1]))
    assert math.isnan(float(d["ess_bulk"][1]))
    s = summarize(d)
    assert s["constant"] == 0.5 and s["instances"] == 2.0 and s["rhat_max"] == float(d["rhat"][0])
    only_constant = summarize(trace_diagnostics(torch.ones(2, 6)))
    assert only_constant["constant"] == 1.0 and math.isnan(only_constant["rhat_mean"])


def test_mh_run_recorded_by_the_callback():
    energy, batch = toy("norm", seed=0, scale=0.5)
    trace = EnergyTrace()
    sampler = SAMPLERS.build("mh_mlm", {"shared_start": False}, seed=3)
    run_chains(sampler, energy, batch, n_chains=4, n_steps=300, callback=trace)
    t = trace.tensor()
    assert t.shape == (4, 2, 300)
    d = trace_diagnostics(t[..., 50:])                                         # after burn-in
    assert bool((d["rhat"] < 1.05).all()), d["rhat"]
    assert 0.0 < summarize(d)["rhat_below"] <= 1.0


def test_bad_traces():
    with pytest.raises(ValueError, match="2 chains and >= 4 sweeps"):
        trace_diagnostics(torch.randn(1, 10))
    with pytest.raises(ValueError, match="2 chains and >= 4 sweeps"):
        trace_diagnostics(torch.randn(3, 3))
    with pytest.raises(ValueError, match="non-finite"):
        trace_diagnostics(torch.tensor([[1.0, 2.0, float("inf"), 3.0]] * 2))
    with pytest.raises(ValueError, match="trace must be"):
        trace_diagnostics(torch.randn(5))
    with pytest.raises(ValueError, match="no steps"):
        EnergyTrace().tensor()
