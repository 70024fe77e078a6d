"""MCMC kernels against exact enumeration on toy spaces.

- Exactness: each sampler's one-step transition matrix K is built analytically from the same pure
  functions the sampler calls (``site_logits`` for Gibbs, ``mh_log_accept`` and the uniform
  single-site proposal for MH) over every labeling; ``pi K = pi`` (and detailed balance for the
  reversible kernels) holds to 1e-12 in float64, and the sampler's real ``step`` reproduces K's
  rows empirically.
- Statistics: thousands of independent chains from a uniform start match exp(-E/T)/Z.
- Conformance over every entry of ``SAMPLERS`` and every kind of energy (chain, plain, masked-LM).
  The MLM samplers' exact kernels are tested in ``test_mcmc_mlm.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from components.energies.base import Energy
from components.energies.chain import ChainEnergy, ChainPotentials, FixedPotentials
from components.energies.mlm import MLMEnergy, MLMScorer
from components.inference.mcmc.base import ChainState, mh_log_accept, repeat_batch, run_chains
from components.inference.mcmc.chain_kernels import chain_energy, site_logits
from components.inference.mcmc.registry import SAMPLERS
from components.structures.enumerate import all_scores, labelings
from tests.energies.test_mlm_energy import TableMLM, ragged_batch

DT = torch.float64
NEEDS = {"Energy": Energy, "ChainEnergy": ChainEnergy, "MLMScorer": MLMScorer}


# ------------------------------------------------------------------------------------------------
# Toy energies
# ------------------------------------------------------------------------------------------------

@dataclass
class ToyBatch:
    unary: torch.Tensor      # [B, N, L]
    mask: torch.Tensor       # bool [B, N]
    name: str = "toy"        # a non-tensor field: repeat_batch must keep it


class SkipEnergy:
    """A plain Energy (no potentials; not a chain): unary + adjacent pairs + skip-one pairs,
    ``E(y) = -(sum_t U_t[y_t] + sum_t W[y_t, y_t+1] + sum_t V[y_t, y_t+2])`` over valid positions.
    Evaluated row by row of the batch it is given, so a batch that was not repeated fails."""

    def __init__(self, W: torch.Tensor, V: torch.Tensor):
        self.W, self.V = W, V
        self.n_labels = W.shape[0]

    def energy(self, batch: ToyBatch, y: torch.Tensor) -> torch.Tensor:
        U, m = batch.unary, batch.mask
        assert y.shape == m.shape, (y.shape, m.shape)
        y = y.masked_fill(~m, 0)
        s = (U.gather(2, y[..., None])[..., 0] * m).sum(1)
        s = s + (self.W[y[:, :-1], y[:, 1:]] * (m[:, :-1] & m[:, 1:])).sum(1)
        s = s + (self.V[y[:, :-2], y[:, 2:]] * (m[:, :-2] & m[:, 2:])).sum(1)
        return -s


def toy_potentials(per_position: bool, seed: int = 0, B: int = 2, N: int = 3, L: int = 3,
                   lengths=(3, 2)) -> ChainPotentials:
    g = torch.Generator().manual_seed(seed)
    unary = torch.randn(B, N, L, generator=g, dtype=DT)
    shape = (B, N - 1, L, L) if per_position else (L, L)
    transition = torch.randn(*shape, generator=g, dtype=DT)
    mask = torch.arange(N)[None] < torch.tensor(lengths)[:, None]
    return ChainPotentials(unary, transition, mask)


def toy_energy(kind: str, seed: int = 0, **kw):
    """(energy, batch) of one kind: 'chain' (shared W), 'chain_pp' (per-position W), 'plain'."""
    p = toy_potentials(kind == "chain_pp", seed, **kw)
    batch = ToyBatch(p.unary, p.mask)
    if kind == "plain":
        g = torch.Generator().manual_seed(seed + 100)
        L = p.n_labels
        return SkipEnergy(torch.randn(L, L, generator=g, dtype=DT), torch.randn(L, L, generator=g, dtype=DT)), batch
    return FixedPotentials(p, batch), batch


def index_of(Y: torch.Tensor, L: int) -> torch.Tensor:
    """Lexicographic index of labelings Y [..., n] (the order of enumerate.labelings)."""
    n = Y.shape[-1]
    return (Y * L ** torch.arange(n - 1, -1, -1)).sum(-1)


def enumerated_energies(energy, batch, b: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All labelings Y [K, n_b] of instance b and their energies E [K], from the energy itself."""
    n = int(batch.mask[b].sum())
    N = batch.mask.shape[1]
    Y = labelings(L, n)
    K = Y.shape[0]
    y = torch.zeros(K, N, dtype=torch.long)
    y[:, :n] = Y
    if isinstance(energy, FixedPotentials):
        p = energy.p
        Y2, s = all_scores(p.unary, p.transition, p.mask, b)
        assert torch.equal(Y2, Y)
        return Y, -s
    sub = ToyBatch(batch.unary[b].expand(K, -1, -1), batch.mask[b].expand(K, -1))
    return Y, energy.energy(sub, y)


# ------------------------------------------------------------------------------------------------
# Exact kernels, built from the sampler's own pure functions
# ------------------------------------------------------------------------------------------------

def gibbs_site_kernel(p: ChainPotentials, b: int, t: int, T: float) -> torch.Tensor:
    """K_t [K, K] for instance b: resample position t from site_logits."""
    B, N, L = p.unary.shape
    n = int(p.mask[b].sum())
    Y = labelings(L, n)
    K = Y.shape[0]
    y = torch.zeros(K, B, N, dtype=torch.long)
    y[:, b, :n] = Y
    probs = torch.softmax(site_logits(p, y, torch.full((K, B), t), T)[:, b], -1)     # [K, L]
    M = torch.zeros(K, K, dtype=DT)
    place = L ** (n - 1 - t)
    base = index_of(Y, L) - Y[:, t] * place
    for l in range(L):
        M[torch.arange(K), base + l * place] += probs[:, l]
    return M


def gibbs_kernel(p: ChainPotentials, b: int, T: float, scan: str) -> torch.Tensor:
    n = int(p.mask[b].sum())
    Ks = [gibbs_site_kernel(p, b, t, T) for t in range(n)]
    if scan == "systematic":
        K = Ks[0]
        for M in Ks[1:]:
            K = K @ M
        return K
    return torch.linalg.matrix_power(sum(Ks) / n, n)


def mh_kernel(E: torch.Tensor, Y: torch.Tensor, L: int, T: float) -> torch.Tensor:
    """Uniform single-site proposal (position among n, label among the L-1 others) x acceptance."""
    K, n = Y.shape
    M = torch.zeros(K, K, dtype=DT)
    idx = index_of(Y, L)
    q = 1.0 / (n * (L - 1))
    for t in range(n):
        place = L ** (n - 1 - t)
        for shift in range(1, L):
            j = idx + (((Y[:, t] + shift) % L) - Y[:, t]) * place
            M[idx, j] += q * mh_log_accept(E[idx], E[j], T).exp()
    M[torch.arange(K), torch.arange(K)] += 1.0 - M.sum(1)
    return M


CASES = [  # (id, sampler, config, energy kind, temperature)
    ("gibbs_sys", "gibbs_chain", {"scan": "systematic"}, "chain", 1.0),
    ("gibbs_sys_pp_T", "gibbs_chain", {"scan": "systematic"}, "chain_pp", 0.7),
    ("gibbs_rand_pp", "gibbs_chain", {"scan": "random"}, "chain_pp", 1.0),
    ("mh_chain", "mh_uniform", {}, "chain", 1.0),
    ("mh_chain_pp_T", "mh_uniform", {}, "chain_pp", 1.5),
    ("mh_plain", "mh_uniform", {}, "plain", 1.0),
]
REVERSIBLE = {"gibbs_rand_pp", "mh_chain", "mh_chain_pp_T", "mh_plain"}


def exact(case, b: int):
    """(Y [K, n_b], pi [K], K [K, K]) of instance b for a case."""
    _, name, cfg, kind, T = case
    energy, batch = toy_energy(kind)
    L = 3
    Y, E = enumerated_energies(energy, batch, b, L)
    pi = torch.softmax(-E / T, 0)
    if name == "gibbs_chain":
        K = gibbs_kernel(energy.p, b, T, cfg["scan"])
    else:
        K = mh_kernel(E, Y, L, T)
    return Y, pi, K


def build(case):
    _, name, cfg, kind, T = case
    return SAMPLERS.build(name, {**cfg, "temperature": T})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("b", [0, 1])
def test_kernel_leaves_boltzmann_invariant(case, b):
    Y, pi, K = exact(case, b)
    assert bool((K >= -1e-15).all())
    torch.testing.assert_close(K.sum(1), torch.ones(len(pi), dtype=DT), atol=1e-12, rtol=0)
    torch.testing.assert_close(pi @ K, pi, atol=1e-12, rtol=0)
    if case[0] in REVERSIBLE:
        flow = pi[:, None] * K
        torch.testing.assert_close(flow, flow.T, atol=1e-12, rtol=0)
    # irreducible and aperiodic: some power of K is strictly positive
    assert bool((torch.linalg.matrix_power(K, 2 * Y.shape[1] + 2) > 0).all())


def test_site_logits_are_the_exact_conditionals():
    for kind, T in (("chain", 1.0), ("chain_pp", 0.6)):
        energy, batch = toy_energy(kind, seed=3)
        p = energy.p
        B, N, L = p.unary.shape
        for b in range(B):
            Y, E = enumerated_energies(energy, batch, b, L)
            n = Y.shape[1]
            pi = torch.softmax(-E / T, 0)
            idx = index_of(Y, L)
            for t in range(n):
                y = torch.zeros(len(Y), B, N, dtype=torch.long)
                y[:, b, :n] = Y
                got = torch.softmax(site_logits(p, y, t, T)[:, b], -1)
                place = L ** (n - 1 - t)
                nbrs = idx[:, None] + (torch.arange(L)[None] - Y[:, t:t + 1]) * place    # [K, L]
                want = pi[nbrs] / pi[nbrs].sum(1, keepdim=True)
                torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_chain_energy_matches_score():
    for kind in ("chain", "chain_pp"):
        p = toy_potentials(kind == "chain_pp", seed=5, B=3, N=4, L=5, lengths=(4, 1, 2))
        y = torch.randint(0, 5, (7, 3, 4), generator=torch.Generator().manual_seed(0))
        got = chain_energy(p, y)
        want = torch.stack([p.energy(y[c]) for c in range(7)])
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------------------
# The real step against the exact kernel and the exact target
# ------------------------------------------------------------------------------------------------

def tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p - q).abs().sum())


def tv_bound(k: int, n: int, n_tests: int, delta: float = 1e-3) -> float:
    """E[TV(empirical of n draws, truth)] <= 0.5 sqrt((k-1)/n) (Cauchy-Schwarz); TV moves by at most
    1/n per draw, so by McDiarmid it exceeds that by sqrt(log(n_tests/delta)/(2n)) with probability
    <= delta over all n_tests comparisons (the seeds are fixed, so the test is deterministic)."""
    return 0.5 * math.sqrt((k - 1) / n) + math.sqrt(math.log(n_tests / delta) / (2 * n))


def histogram(idx: torch.Tensor, k: int) -> torch.Tensor:
    return torch.bincount(idx, minlength=k).to(DT) / len(idx)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_one_step_matches_exact_kernel(case):
    """Start R chains in every labeling; the empirical law after one real step is K's row."""
    R, L = 2000, 3
    energy, batch = toy_energy(case[3])
    kernels = [exact(case, b) for b in range(2)]
    k0 = kernels[0][0].shape[0]
    C = k0 * R
    start = torch.arange(C) // R                                       # state index per chain
    y0 = torch.zeros(C, 2, 3, dtype=torch.long)
    for b, (Y, _, _) in enumerate(kernels):
        y0[:, b, :Y.shape[1]] = Y[start % Y.shape[0]]
    sampler = build(case)
    state = sampler.init(energy, batch, C, y0=y0)
    state, _ = sampler.step(state)
    for b, (Y, _, K) in enumerate(kernels):
        k, n = Y.shape
        end = index_of(state.y[:, b, :n], L)
        rows = start % k
        worst = max(tv(histogram(end[rows == i], k), K[i]) for i in range(k))
        assert worst < tv_bound(k, int((rows == 0).sum()), k0 + k), (b, worst)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_chains_reach_boltzmann(case):
    C, L = 4000, 3
    steps = 30 if case[1] == "gibbs_chain" else 120
    energy, batch = toy_energy(case[3])
    state, stats = run_chains(build(case), energy, batch, n_chains=C, n_steps=steps)
    assert state.step == steps and set(stats) >= {"accepted", "changed"}
    for b in range(2):
        Y, pi, K = exact(case, b)
        k, n = Y.shape
        law = torch.full((k,), 1.0 / k, dtype=DT) @ torch.linalg.matrix_power(K, steps)   # exact law after `steps`
        bias = tv(law, pi)
        assert bias < 1e-3, bias                                       # converged: the target is pi itself
        emp = histogram(index_of(state.y[:, b, :n], L), k)
        assert tv(emp, pi) < bias + tv_bound(k, C, 2), (b, tv(emp, pi))
    # the cached energy is the energy of the final state
    torch.testing.assert_close(state.energy, torch.stack([energy.energy(batch, state.y[c]) for c in range(C)]))


# ------------------------------------------------------------------------------------------------
# Conformance: every registered sampler, every kind of energy
# ------------------------------------------------------------------------------------------------

ENERGY_KINDS = ["chain", "chain_pp", "plain", "mlm"]


def conformance_energy(kind: str):
    if kind == "mlm":                      # a table MLM over 5 ids, id 0 not allowed
        model = TableMLM(V=5, N=4, n_ctx=3, seed=11, allowed=[False, True, True, True, True])
        return MLMEnergy(model, "norm"), ragged_batch(B=3, N=4, lengths=(4, 1, 2), n_ctx=3)
    return toy_energy(kind, seed=11, B=3, N=4, L=5, lengths=(4, 1, 2))


@pytest.mark.parametrize("kind", ENERGY_KINDS)
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler_conformance(name, kind):
    entry = SAMPLERS[name]
    sampler = SAMPLERS.build(name)
    needs = NEEDS[entry.meta["needs"]]             # meta names the protocol (plain data); the kernel holds it
    assert sampler.needs is needs
    energy, batch = conformance_energy(kind)
    if not isinstance(energy, needs):
        with pytest.raises(TypeError, match=f"{name}.*needs a {needs.__name__}"):
            sampler.init(energy, batch, 2)
        return
    C, (B, N), L = 5, batch.mask.shape, 5
    state = sampler.init(energy, batch, C)
    assert isinstance(state, ChainState) and state.step == 0
    for i in range(4):
        assert state.y.shape == (C, B, N) and state.y.dtype == torch.long
        assert bool((state.y[:, ~batch.mask] == 0).all())
        assert bool(((state.y >= 0) & (state.y < L)).all())
        assert state.energy.shape == (C, B)
        want = torch.stack([energy.energy(batch, state.y[c]) for c in range(C)])
        torch.testing.assert_close(state.energy, want, atol=1e-12, rtol=0)
        if i == 3:
            break
        before = state.y.clone()
        state_next, stats = sampler.step(state)
        assert torch.equal(state.y, before)                          # step returns a new state
        assert state_next.step == state.step + 1
        assert {"accepted", "changed"} <= set(stats)
        for k, v in stats.items():
            assert v.shape == (C, B) and v.is_floating_point(), k
            if k == "energy":                                        # the energy after the step
                torch.testing.assert_close(v, state_next.energy)
            else:                                                    # rates
                assert bool(((v >= 0) & (v <= 1)).all()), k
        assert torch.equal(stats["changed"] > 0, (state_next.y != before).any(2))
        state = state_next
    # reproducible from the kernel's seed (a build input, never a config field)
    again, _ = run_chains(SAMPLERS.build(name), energy, batch, n_chains=C, n_steps=3)
    assert torch.equal(again.y, state.y)
    other, _ = run_chains(SAMPLERS.build(name, seed=1), energy, batch, n_chains=C, n_steps=3)
    assert not torch.equal(other.y, state.y)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler_rejects_non_energy(name):
    with pytest.raises(TypeError, match=f"{name}.*needs a"):
        SAMPLERS.build(name).init(object(), None, 2)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_init_options_and_errors(name):
    mlm = SAMPLERS[name].meta["needs"] == "MLMScorer"
    energy, batch = conformance_energy("mlm" if mlm else "chain")
    if mlm:                                # Algorithm 4's warm start: greedy MLM decode of all-[MASK]
        s = SAMPLERS.build(name, {"init": "warm"})
        logits = energy.model.conditionals(torch.full((3, 4), 5), batch.mask, batch.ctx, torch.arange(3))
        assert torch.equal(s.init(energy, batch, 3).y[1], logits.argmax(-1).masked_fill(~batch.mask, 0))
    else:
        s = SAMPLERS.build(name, {"init": "zeros"})
        assert bool((s.init(energy, batch, 3).y == 0).all())
    y0 = torch.full((3, 4), 4)
    state = s.init(energy, batch, 2, y0=y0)
    assert torch.equal(state.y, y0.masked_fill(~batch.mask, 0).expand(2, 3, 4))
    with pytest.raises(ValueError, match="y0 must have shape"):
        s.init(energy, batch, 2, y0=torch.zeros(2, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"outside \[0, 5\)"):
        s.init(energy, batch, 2, y0=torch.full((3, 4), 5))
    with pytest.raises(ValueError, match="n_chains"):
        s.init(energy, batch, 0)
    key = "proposal_temperature" if mlm else "temperature"
    with pytest.raises(ValueError, match=key):
        SAMPLERS.config(name, {key: 0.0})


def test_mh_general_energy_needs_mask_and_labels():
    energy, batch = conformance_energy("plain")
    mh = SAMPLERS.build("mh_uniform")
    with pytest.raises(ValueError, match="valid positions"):
        mh.init(energy, {"unary": batch.unary}, 2)
    del energy.n_labels
    with pytest.raises(ValueError, match="number of labels"):
        mh.init(energy, batch, 2)
    assert mh.init(energy, batch, 2, n_labels=5).n_labels == 5
    assert SAMPLERS.build("mh_uniform", {"n_labels": 5}).init(energy, batch, 2).n_labels == 5


def test_repeat_batch():
    x = torch.arange(6).view(2, 3)
    shared = torch.ones(4)
    b = ToyBatch(x, x > 2, "keep")
    r = repeat_batch(b, 3, 2)
    assert r.name == "keep" and torch.equal(r.unary, torch.cat([x] * 3)) and r.mask.shape == (6, 3)
    d = repeat_batch({"x": x, "w": shared, "k": 1}, 2, 2)
    assert torch.equal(d["x"], torch.cat([x, x])) and d["w"] is shared and d["k"] == 1
    assert repeat_batch(None, 2, 2) is None
    assert torch.equal(repeat_batch((x,), 2, 2)[0], torch.cat([x, x]))
    with pytest.raises(TypeError, match="repeat_batch"):
        repeat_batch(object(), 2, 2)
