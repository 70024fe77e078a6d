"""The naive Algorithm 4 of ``mcmc_bench`` and ``mh_mlm`` are the same Markov kernel: the naive
sweep's exact transition matrix, built from its own pieces (T passes per energy, one pass per
proposal, Python acceptance), equals ``mh_mlm``'s exact sweep kernel on the toy space; the naive
loop's one-sweep frequencies match it; forward passes are counted. Nothing is timed."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from components.inference.mcmc.mlm_kernels import temperature_at
from components.inference.mcmc.registry import SAMPLERS
from components.bench.mcmc import (acceptance_gap, compare_mh, naive_energy, naive_log_accept, naive_mh,
                                              naive_proposal)
from components.metrics.timing import TimingConfig
from tests.energies.test_mlm_energy import MLMBatch
from tests.inference.test_mcmc_mlm import DT, N, V, Exact, bernstein, index_of, toy

CASES = [("raw", {}), ("norm", {}), ("raw", {"proposal_temperature": 0.7, "temperature": 0.6}),
         ("norm", {"top_p": 0.8})]


def naive_sweep_kernel(energy, batch, b: int, cfg) -> torch.Tensor:
    """The exact kernel of one naive sweep of instance b, from the naive pieces only."""
    model, ctx = energy.model, energy.context(batch)
    ex_states = Exact(energy, batch, b, cfg, 1.0)                      # only for the state list
    Y, n, K = ex_states.Y, ex_states.n, ex_states.K
    T = temperature_at(cfg, 0)
    E = [naive_energy(model, energy.kind, ctx, Y[i], b) for i in range(K)]
    site = []
    for t in range(n):
        P = torch.zeros(K, K, dtype=DT)
        for i in range(K):
            lq = naive_proposal(model, ctx, Y[i], t, b, cfg.proposal_temperature, cfg.top_p)
            for w in range(V):
                y2 = Y[i].clone()
                y2[t] = w
                j = int(index_of(y2))
                a = math.exp(naive_log_accept(E[i], naive_energy(model, energy.kind, ctx, y2, b), float(lq[w]),
                                              float(lq[Y[i, t]]), T))
                P[i, j] += math.exp(float(lq[w])) * a
            P[i, i] += 1.0 - P[i].sum()
        site.append(P)
    perms = list(itertools.permutations(range(n)))
    total = torch.zeros(K, K, dtype=DT)
    for perm in perms:
        M = torch.eye(K, dtype=DT)
        for t in perm:
            M = M @ site[t]
        total += M
    return total / len(perms)


@pytest.mark.parametrize("kind,over", CASES, ids=[f"{k}-{o}" for k, o in CASES])
def test_naive_and_fast_kernels_are_equal(kind, over):
    cfg = SAMPLERS.config("mh_mlm", over)
    energy, batch = toy(kind)
    for b in range(2):
        ex = Exact(energy, batch, b, cfg, temperature_at(cfg, 0))
        naive = naive_sweep_kernel(energy, batch, b, cfg)
        torch.testing.assert_close(naive, ex.sweep(), atol=1e-12, rtol=0)
        torch.testing.assert_close(ex.pi @ naive, ex.pi, atol=1e-10, rtol=0)


def test_naive_loop_follows_the_kernel_and_counts_passes():
    """One naive sweep from each of the 9 states of a length-2 instance, 250 chains each."""
    cfg = SAMPLERS.config("mh_mlm", {"top_p": 0.9})
    energy, batch = toy("norm", seed=2)
    one = MLMBatch(batch.ctx[1:], batch.mask[1:])                      # the length-2 instance alone
    ex = Exact(energy, one, 0, cfg, 1.0)
    R = 250
    C = ex.K * R
    start = torch.arange(C) // R
    y0 = torch.zeros(C, 1, N, dtype=torch.long)
    y0[:, 0, :2] = ex.Y[start]
    res = naive_mh(energy, one, y0, cfg, sweeps=1, seed=1)
    assert res.proposals == C * 2 and res.forward_passes == C * 2 * (1 + 2 * 2)
    assert 0 < res.accepted <= res.proposals
    counts = torch.zeros(ex.K, ex.K, dtype=DT).index_put_((start, index_of(res.y[:, 0, :2])),
                                                          torch.ones(C, dtype=DT), accumulate=True)
    P = ex.sweep()
    assert float(((counts / R - P).abs() / bernstein(P, R, ex.K ** 2)).max()) < 1.0


def test_acceptance_gap_and_compare_mh():
    energy, batch = toy("raw", seed=3)
    y = torch.tensor([[0, 1, 2], [2, 2, 0], [1, 0, 1], [1, 1, 0]])
    gap = acceptance_gap(energy, batch, y, torch.tensor([0, 1, 2, 0]), torch.tensor([2, 0, 0, 1]))
    assert gap < 1e-12
    out = compare_mh(energy, batch, n_chains=3, sweeps=2, timing=TimingConfig(min_rounds=1, max_rounds=1, warmup=0))
    proposals = 2 * 3 * (3 + 2)
    assert out["proposals"] == proposals and out["chains"] == 3 and out["tokens"] == 5
    assert out["naive_passes_per_proposal"] == pytest.approx(2 * 3 * (3 * 7 + 2 * 5) / proposals)
    assert out["fast_passes_per_proposal"] == pytest.approx(2 * 2 * 3 / proposals)   # 2 passes x 3 blocks x 2 sweeps
    # per sweep: proposal passes over 6 + 6 + 3 rows, energy passes over 15 + 15 + 9 masked copies
    assert out["fast_rows_per_proposal"] == pytest.approx(2 * (15 + 39) / proposals)
    for key in ("naive_s", "fast_s", "mh_ratio", "naive_proposals_per_s", "fast_proposals_per_s"):
        assert out[key] > 0, key
    with pytest.raises(ValueError, match="single-site"):
        compare_mh(energy, batch, SAMPLERS.config("mh_mlm", {"block_size": 2}))
