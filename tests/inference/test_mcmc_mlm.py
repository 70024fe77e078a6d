"""MH with masked-LM proposals and the degenerate Gibbs sampler (thesis ch. 6) against exact
enumeration on a toy space: vocabulary 3, lengths 3 and 2, a random-table MLM whose conditionals
are consistent with no joint distribution (so neither with its own energies).

- Exact kernels. For every state, every block S of positions and every proposal y'_S, the
  per-block transition matrix is built from the sampler's own pure pieces (the model's
  ``proposal_logits`` for the masked block, ``proposal_log_probs``, ``block_log_q``,
  ``mh_mlm_log_accept``) and the energies of all states; a sweep is the average, over the random
  orders of the positions, of the product of its block kernels. Each block kernel is reversible
  w.r.t. pi ∝ exp(-E/T) and the sweep leaves pi invariant, to 1e-10 in float64: single-site, block,
  clipped block, proposal temperature, nucleus, target temperature; raw and norm energies.
- The degenerate Gibbs kernel (the same proposals, always accepted) has a stationary law that is
  NOT pi: its total-variation distance to pi is measured and clearly > 0.
- The real ``step`` against the exact sweep kernel: one sweep from every state, many chains each;
  every transition frequency within a Bernstein bound of the exact probability.
- Cost: one proposal pass and one batched energy pass per block (counted on the model).
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from components.config import ConfigError
from components.energies.mlm import MLMEnergy
from components.inference.mcmc.base import run_chains
from components.inference.mcmc.mlm_kernels import (MLMChainState, block_log_q, block_size_at, mh_mlm_log_accept,
                                                   proposal_log_probs, temperature_at)
from components.inference.mcmc.registry import SAMPLERS
from components.structures.enumerate import labelings
from tests.energies.test_mlm_energy import MLMBatch, TableMLM, ragged_batch

DT = torch.float64
V, N = 3, 3
LENGTHS = (3, 2)


def toy(kind: str, seed: int = 0, scale: float = 1.5):
    """(energy, batch): a non-single-site table MLM, 2 instances of lengths 3 and 2, 2 contexts."""
    model = TableMLM(V=V, N=N, n_ctx=2, seed=seed, scale=scale)
    return MLMEnergy(model, kind), ragged_batch(B=2, N=N, lengths=LENGTHS, n_ctx=2)


def index_of(Y: torch.Tensor) -> torch.Tensor:
    n = Y.shape[-1]
    return (Y * V ** torch.arange(n - 1, -1, -1)).sum(-1)


# ------------------------------------------------------------------------------------------------
# Exact kernels
# ------------------------------------------------------------------------------------------------

class Exact:
    """All V^n states of instance b, their energies, and the exact block / sweep kernels."""

    def __init__(self, energy, batch, b: int, cfg, T: float, accept: str = "mh"):
        self.energy, self.cfg, self.T, self.accept = energy, cfg, T, accept
        self.n = n = int(batch.mask[b].sum())
        self.Y = labelings(V, n)
        K = self.K = self.Y.shape[0]
        self.Yp = torch.zeros(K, N, dtype=torch.long)
        self.Yp[:, :n] = self.Y
        self.mask = batch.mask[b].expand(K, N)
        self.rows = torch.full((K,), b)
        self.ctx = energy.context(batch)
        with torch.no_grad():
            self.E = energy.score(self.ctx, self.Yp, self.mask, self.rows)
        self.pi = torch.softmax(-self.E / T, 0)
        self._blocks: dict[tuple[int, ...], torch.Tensor] = {}

    def block(self, S: tuple[int, ...]) -> torch.Tensor:
        S = tuple(sorted(S))
        if S in self._blocks:
            return self._blocks[S]
        K = self.K
        pos = torch.zeros(K, N, dtype=torch.bool)
        pos[:, list(S)] = True
        with torch.no_grad():
            logits = self.energy.proposal_logits(self.ctx, self.Yp, self.mask, self.rows, pos)
        log_q = proposal_log_probs(logits, self.cfg.proposal_temperature, self.cfg.top_p)
        lq_rev = block_log_q(log_q, self.Yp, pos)
        P = torch.zeros(K, K, dtype=DT)
        for w in itertools.product(range(V), repeat=len(S)):
            Y2 = self.Yp.clone()
            Y2[:, list(S)] = torch.tensor(w)
            j = index_of(Y2[:, :self.n])
            lq_fwd = block_log_q(log_q, Y2, pos)
            if self.accept == "mh":
                a = mh_mlm_log_accept(self.E, self.E[j], lq_fwd, lq_rev, self.T).exp()
            else:
                a = torch.ones(K, dtype=DT)
            P[torch.arange(K), j] += lq_fwd.exp() * a
        P[torch.arange(K), torch.arange(K)] += 1.0 - P.sum(1)
        self._blocks[S] = P
        return P

    def block_size(self, sweep: int = 0) -> int:
        b = block_size_at(self.cfg, sweep)
        return min(b, self.n) if self.cfg.clip_block else b

    def sweep(self, sweep: int = 0) -> torch.Tensor:
        """E over uniform random orders of the positions of prod_k P_{block k} (blocks of size b)."""
        b = self.block_size(sweep)
        total = torch.zeros(self.K, self.K, dtype=DT)
        perms = list(itertools.permutations(range(self.n)))
        for perm in perms:
            M = torch.eye(self.K, dtype=DT)
            for k in range(0, self.n, b):
                M = M @ self.block(perm[k:k + b])
            total += M
        return total / len(perms)

    def blocks_used(self, sweep: int = 0) -> list[tuple[int, ...]]:
        b = self.block_size(sweep)
        return sorted({tuple(sorted(p[k:k + b])) for p in itertools.permutations(range(self.n))
                       for k in range(0, self.n, b)})


def stationary(P: torch.Tensor) -> torch.Tensor:
    """The stationary law of an irreducible stochastic matrix: solve pi (P - I) = 0, sum pi = 1."""
    K = P.shape[0]
    A = torch.cat([(P - torch.eye(K, dtype=DT)).T, torch.ones(1, K, dtype=DT)])
    rhs = torch.zeros(K + 1, dtype=DT)
    rhs[-1] = 1.0
    return torch.linalg.lstsq(A, rhs[:, None]).solution[:, 0]


def tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p - q).abs().sum())


CASES = [  # (id, energy kind, config overrides)
    ("single_raw", "raw", {}),
    ("single_norm", "norm", {}),
    ("block2_raw", "raw", {"block_size": 2}),
    ("block2_norm", "norm", {"block_size": 2}),
    ("block3_clip_norm", "norm", {"block_size": 3, "clip_block": True}),
    ("ptemp_cold_raw", "raw", {"proposal_temperature": 0.5}),
    ("ptemp_hot_norm", "norm", {"proposal_temperature": 2.0, "block_size": 2}),
    ("nucleus_raw", "raw", {"top_p": 0.7}),
    ("nucleus_block_norm", "norm", {"top_p": 0.6, "block_size": 2}),
    ("target_T_raw", "raw", {"temperature": 0.6}),
    ("all_norm", "norm", {"temperature": 1.7, "proposal_temperature": 0.8, "top_p": 0.9, "block_size": 2}),
]


def case_setup(case, name: str = "mh_mlm"):
    _, kind, over = case
    if name == "gibbs_mlm":
        over = {k: v for k, v in over.items() if k != "temperature"}
    cfg = SAMPLERS.config(name, over)
    energy, batch = toy(kind)
    accept = "mh" if name == "mh_mlm" else "always"
    return cfg, energy, batch, [Exact(energy, batch, b, cfg, temperature_at(cfg, 0), accept) for b in range(2)]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mh_kernels_leave_target_invariant(case):
    _, _, _, exacts = case_setup(case)
    for ex in exacts:
        ones = torch.ones(ex.K, dtype=DT)
        for S in ex.blocks_used():
            P = ex.block(S)
            assert bool((P >= -1e-15).all())
            torch.testing.assert_close(P.sum(1), ones, atol=1e-12, rtol=0)
            flow = ex.pi[:, None] * P                                # detailed balance for each fixed block
            torch.testing.assert_close(flow, flow.T, atol=1e-12, rtol=0)
            torch.testing.assert_close(ex.pi @ P, ex.pi, atol=1e-10, rtol=0)
        K = ex.sweep()
        torch.testing.assert_close(K.sum(1), ones, atol=1e-12, rtol=0)
        torch.testing.assert_close(ex.pi @ K, ex.pi, atol=1e-10, rtol=0)
        if case[2].get("top_p", 1.0) == 1.0:                          # full-support proposals: ergodic, pi unique
            assert bool((torch.linalg.matrix_power(K, 4) > 0).all())
            torch.testing.assert_close(stationary(K), ex.pi, atol=1e-10, rtol=0)


GIBBS_CASES = [c for c in CASES if c[0] in ("single_raw", "single_norm", "block2_norm", "ptemp_cold_raw")]


@pytest.mark.parametrize("case", GIBBS_CASES, ids=[c[0] for c in GIBBS_CASES])
def test_degenerate_gibbs_is_biased(case):
    """Same proposals, always accepted: a valid Markov kernel whose stationary law is not pi."""
    _, _, _, exacts = case_setup(case, "gibbs_mlm")
    for ex in exacts:
        K = ex.sweep()
        torch.testing.assert_close(K.sum(1), torch.ones(ex.K, dtype=DT), atol=1e-12, rtol=0)
        mu = stationary(K)
        torch.testing.assert_close(mu @ K, mu, atol=1e-10, rtol=0)     # mu is Gibbs' own fixed point
        assert tv(mu, ex.pi) > 0.1, tv(mu, ex.pi)                        # ... far from the target
        assert float((ex.pi @ K - ex.pi).abs().max()) > 1e-3


def test_annealed_sweeps_each_leave_their_target_invariant():
    """Block size annealed 3 -> 1 and target temperature annealed: sweep s leaves exp(-E / T_s) invariant."""
    cfg = SAMPLERS.config("mh_mlm", {"block_size": 3, "block_size_final": 1, "block_anneal_sweeps": 2,
                                     "clip_block": True, "anneal_step": 0.3, "min_temperature": 0.5})
    assert [block_size_at(cfg, s) for s in range(4)] == [3, 2, 1, 1]
    assert [temperature_at(cfg, s) for s in range(4)] == pytest.approx([1.0, 0.7, 0.5, 0.5])
    energy, batch = toy("raw", seed=3)
    for s in range(3):
        for b in range(2):
            ex = Exact(energy, batch, b, cfg, temperature_at(cfg, s))
            torch.testing.assert_close(ex.pi @ ex.sweep(s), ex.pi, atol=1e-10, rtol=0)


# ------------------------------------------------------------------------------------------------
# The real step against the exact kernel
# ------------------------------------------------------------------------------------------------

def bernstein(p: torch.Tensor, n: int, n_tests: int, delta: float = 1e-4) -> torch.Tensor:
    """Half-width e with P(|freq - p| >= e) <= delta / n_tests for a frequency of n Bernoulli(p)
    draws (Bernstein: 2 exp(-n e^2 / (2 (p (1 - p) + e / 3))))."""
    L = math.log(2 * n_tests / delta)
    a = L / (3 * n)
    return a + torch.sqrt(a * a + 2 * p * (1 - p) * L / n)


STEP_CASES = [("mh_mlm", c) for c in CASES if c[0] in ("single_raw", "block2_norm", "nucleus_block_norm",
                                                       "block3_clip_norm", "all_norm")] + \
             [("gibbs_mlm", c) for c in CASES if c[0] in ("single_norm", "block2_norm")]


@pytest.mark.parametrize("name,case", STEP_CASES, ids=[f"{n}-{c[0]}" for n, c in STEP_CASES])
def test_real_sweep_matches_exact_kernel(name, case):
    R = 4000
    cfg, energy, batch, exacts = case_setup(case, name)
    K0 = exacts[0].K
    C = K0 * R
    start = torch.arange(C) // R                                       # start state of instance 0
    y0 = torch.zeros(C, 2, N, dtype=torch.long)
    for b, ex in enumerate(exacts):
        y0[:, b, :ex.n] = ex.Y[start % ex.K]
    sampler = SAMPLERS.build(name, cfg)
    state = sampler.init(energy, batch, C, y0=y0)
    state, stats = sampler.step(state)
    n_tests = sum(ex.K ** 2 for ex in exacts)
    for b, ex in enumerate(exacts):
        P = ex.sweep()
        s = start % ex.K
        end = index_of(state.y[:, b, :ex.n])
        counts = torch.zeros(ex.K, ex.K, dtype=DT).index_put_((s, end), torch.ones(C, dtype=DT), accumulate=True)
        per_row = counts.sum(1, keepdim=True)
        freq = counts / per_row
        bound = bernstein(P, int(per_row.min()), n_tests)
        worst = float(((freq - P).abs() / bound).max())
        assert worst < 1.0, (b, worst)
    # the cached energy is the energy of the final state
    want = torch.stack([energy.energy(batch, state.y[c]) for c in range(0, C, 997)])
    torch.testing.assert_close(state.energy[::997], want, atol=1e-12, rtol=0)
    assert set(stats) == {"accepted", "novel", "changed", "energy"}
    assert bool((stats["novel"] <= stats["accepted"]).all())
    if name == "gibbs_mlm":
        assert bool((stats["accepted"] == 1).all())


def test_annealed_real_sweep_uses_its_temperature():
    """At sweep 2 of a target annealed by 0.25 per sweep the real step follows the kernel at T = 0.5."""
    cfg = SAMPLERS.config("mh_mlm", {"anneal_step": 0.25, "min_temperature": 0.1})
    energy, batch = toy("norm", seed=4)
    ex = Exact(energy, batch, 0, cfg, temperature_at(cfg, 2))
    assert ex.T == pytest.approx(0.5)
    R = 4000
    C = ex.K * R
    start = torch.arange(C) // R
    y0 = torch.zeros(C, 2, N, dtype=torch.long)
    y0[:, 0] = ex.Y[start]
    sampler = SAMPLERS.build("mh_mlm", cfg)
    state = dataclasses.replace(sampler.init(energy, batch, C, y0=y0), step=2)
    state, _ = sampler.step(state)
    assert state.step == 3 and state.temperature == pytest.approx(0.25)
    counts = torch.zeros(ex.K, ex.K, dtype=DT).index_put_((start, index_of(state.y[:, 0])), torch.ones(C, dtype=DT),
                                                          accumulate=True)
    P = ex.sweep()
    assert float(((counts / R - P).abs() / bernstein(P, R, ex.K ** 2)).max()) < 1.0


@pytest.mark.parametrize("name", ["mh_mlm", "gibbs_mlm"])
def test_chains_reach_their_stationary_law(name):
    """From one shared start, 3000 chains after 20 sweeps follow the exact law e_start P^20, which
    (a milder table, so the chains mix) is pi for MH and Gibbs' own, visibly different, law."""
    cfg = SAMPLERS.config(name)
    energy, batch = toy("norm", seed=0, scale=0.5)
    accept = "mh" if name == "mh_mlm" else "always"
    exacts = [Exact(energy, batch, b, cfg, 1.0, accept) for b in range(2)]
    C, S = 3000, 20
    sampler = SAMPLERS.build(name, cfg, seed=5)
    state0 = sampler.init(energy, batch, C)
    assert bool((state0.y == state0.y[0]).all())                        # shared start (the thesis)
    state, _ = run_chains(sampler, energy, batch, n_chains=C, n_steps=S)
    for b, ex in enumerate(exacts):
        P = ex.sweep()
        i0 = int(index_of(state0.y[0, b, :ex.n]))
        law = torch.linalg.matrix_power(P, S)[i0]                       # exact law after S sweeps
        target = ex.pi if name == "mh_mlm" else stationary(P)
        assert tv(law, target) < 0.01
        emp = torch.bincount(index_of(state.y[:, b, :ex.n]), minlength=ex.K).to(DT) / C
        slack = 0.5 * math.sqrt((ex.K - 1) / C) + math.sqrt(math.log(4 / 1e-3) / (2 * C))
        assert tv(emp, law) < slack, (b, tv(emp, law))
        if name == "gibbs_mlm":                                         # significantly away from the target
            assert tv(law, ex.pi) - slack > 0.03 and tv(emp, ex.pi) > tv(law, ex.pi) - slack


# ------------------------------------------------------------------------------------------------
# Cost, stats, schedules, init and errors
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,block,calls", [("mh_mlm", 1, 6), ("mh_mlm", 2, 4), ("gibbs_mlm", 1, 4),
                                              ("gibbs_mlm", 2, 3)])
def test_one_proposal_pass_and_one_energy_pass_per_block(name, block, calls):
    """Lengths 3 and 2: ceil(3 / b) blocks. MH: 2 passes per block; Gibbs: 1 per block + 1 energy pass."""
    energy, batch = toy("raw")
    sampler = SAMPLERS.build(name, {"block_size": block})
    state = sampler.init(energy, batch, 7)
    model = energy.model
    model.calls = 0
    for _ in range(3):
        state, _ = sampler.step(state)
    assert model.calls == 3 * calls
    model.calls = 0
    SAMPLERS.build(name, {"init": "warm"}).init(energy, batch, 7)
    assert model.calls == 2                                             # the warm start's pass + the energy pass


def test_stats_count_proposals():
    """One block per sweep (b = n): accepted in {0, 1}, novel = changed; Gibbs at a cold proposal
    changes less often than at a hot one."""
    energy, batch = toy("norm")
    state = SAMPLERS.build("mh_mlm", {"block_size": 2}).init(energy, batch, 50, mask=batch.mask.clone()
                                                                 & torch.tensor([True, True, False]))
    state, stats = SAMPLERS.build("mh_mlm", {"block_size": 2}).step(state)
    assert bool(((stats["accepted"] == 0) | (stats["accepted"] == 1)).all())
    assert torch.equal(stats["novel"], stats["changed"])
    assert stats["energy"].shape == (50, 2) and torch.equal(stats["energy"], state.energy)
    rates = []
    for tau in (0.2, 5.0):
        _, s = run_chains(SAMPLERS.build("gibbs_mlm", {"proposal_temperature": tau}), energy, batch,
                          n_chains=200, n_steps=3)
        rates.append(float(s["novel"].mean()))
    assert rates[0] < rates[1]


def test_accept_first_sweeps():
    energy, batch = toy("raw")
    sampler = SAMPLERS.build("mh_mlm", {"accept_first_sweeps": 2, "temperature": 0.05, "proposal_temperature": 3.0})
    state = sampler.init(energy, batch, 40)
    seen = []
    for _ in range(4):
        state, stats = sampler.step(state)
        seen.append(float(stats["accepted"].mean()))
    assert seen[0] == 1.0 and seen[1] == 1.0 and seen[2] < 1.0 and seen[3] < 1.0
    want = torch.stack([energy.energy(batch, state.y[c]) for c in range(40)])
    torch.testing.assert_close(state.energy, want, atol=1e-12, rtol=0)


def test_init_modes():
    model = TableMLM(V=4, N=N, n_ctx=2, seed=8, allowed=[True, False, True, True])
    energy = MLMEnergy(model, "norm")
    batch = ragged_batch(B=2, N=N, lengths=LENGTHS, n_ctx=2)
    warm = SAMPLERS.build("mh_mlm", {"init": "warm"}).init(energy, batch, 3)
    logits = model.conditionals(torch.full((2, N), 4), batch.mask, batch.ctx, torch.arange(2))
    assert isinstance(warm, MLMChainState)
    assert torch.equal(warm.y[0], logits.argmax(-1).masked_fill(~batch.mask, 0)) and bool((warm.y == warm.y[0]).all())
    indep = SAMPLERS.build("mh_mlm", {"shared_start": False}).init(energy, batch, 200)
    assert not bool((indep.y == indep.y[0]).all())
    valid = indep.y[:, batch.mask]
    assert bool((valid != 1).all()) and set(valid.unique().tolist()) == {0, 2, 3}   # allowed ids only
    state, _ = run_chains(SAMPLERS.build("mh_mlm", {"block_size": 2, "proposal_temperature": 3.0}), energy, batch,
                          n_chains=100, n_steps=3)
    assert bool((state.y[:, batch.mask] != 1).all())                     # never proposes a disallowed id
    with pytest.raises(ValueError, match="unknown token id 1"):
        SAMPLERS.build("mh_mlm").init(energy, batch, 2, y0=torch.ones(2, N, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown token id 4"):
        SAMPLERS.build("gibbs_mlm").init(energy, batch, 2, y0=torch.full((2, N), 4))


def test_bad_input():
    energy, batch = toy("raw")
    with pytest.raises(ValueError, match="block_size 3 > length 2 of instance 1"):
        SAMPLERS.build("mh_mlm", {"block_size": 3}).init(energy, batch, 2)
    with pytest.raises(ValueError, match="block_size 3 > length 2"):
        SAMPLERS.build("gibbs_mlm", {"block_size": 1, "block_size_final": 3, "block_anneal_sweeps": 2}).init(
            energy, batch, 2)
    for key, value in (("top_p", 0.0), ("top_p", 1.5), ("block_size", 0), ("proposal_temperature", 0.0),
                       ("min_temperature", 0.0), ("anneal_step", -0.1), ("init", "zeros")):
        with pytest.raises(ConfigError, match=key):
            SAMPLERS.config("mh_mlm", {key: value})
    with pytest.raises(ConfigError, match="block_anneal_sweeps"):
        SAMPLERS.config("mh_mlm", {"block_size_final": 1, "block_size": 2})
    with pytest.raises(ValueError, match="top_p"):
        proposal_log_probs(torch.zeros(3), 1.0, 0.0)
    empty = MLMBatch(batch.ctx, torch.tensor([[True, True, False], [False, False, False]]))
    with pytest.raises(ValueError, match="length >= 1"):
        SAMPLERS.build("mh_mlm").init(energy, empty, 2)
    with pytest.raises(ValueError, match="empty"):
        SAMPLERS.build("mh_mlm").init(energy, MLMBatch(batch.ctx[:0], torch.zeros(0, 3, dtype=torch.bool)), 2)


def test_nucleus_is_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=DT))
    for p, kept in ((0.49, 1), (0.51, 2), (0.79, 2), (0.81, 3), (0.94, 3), (0.96, 4), (1.0, 4)):
        lq = proposal_log_probs(logits, 1.0, p)[0]
        assert int(torch.isfinite(lq).sum()) == kept, p
        torch.testing.assert_close(lq.exp()[:kept], logits.exp()[0, :kept] / logits.exp()[0, :kept].sum())
    torch.testing.assert_close(proposal_log_probs(logits, 2.0).exp(), torch.softmax(logits / 2.0, -1))
    lq = torch.tensor([[[0.0, float("-inf")]]])
    assert mh_mlm_log_accept(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.tensor([float("-inf")]))[0] \
        == float("-inf")
    assert block_log_q(lq, torch.tensor([[1]]), torch.tensor([[True]]))[0] == float("-inf")
