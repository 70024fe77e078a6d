"""Where the masked-LM chains start (thesis ch. 6, Algorithm 4 line 3) and the ``start_noise``
perturbation that makes their R-hat meaningful, and the ``mcmc`` stage's design of starts.

- The warm start is exactly mask-predict with one iteration and one length candidate, on a tiny
  conditional MLM, at the lengths mask-predict picks (the batch's lengths are the predicted ones).
- On the enumerable toy space of ``tests/inference/test_mcmc_mlm.py`` (V = 3, length 3): the exact
  law of the perturbed start (full support), and the exact laws after t sweeps from the warm start
  and from the perturbed start both converge to the same law (pi for MH, Gibbs' own law for
  degenerate Gibbs), under the spectral bound (MH, reversible single-site sweep) and the Dobrushin
  bound (any kernel); the real sampler's perturbed starts follow the exact start law.
- ``start_noise = 0`` consumes no randomness (the chains are those of a config without it);
  ``> 0`` gives per-position id frequencies (1 - s) 1{v = w_t} + s / |allowed| within Bernstein bounds.
- The stage's ``design()``: warm start with noise by default; the ``random_start`` group: one
  uniform sequence, no noise; both samplers accept the keys.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from components.config import ConfigError, from_dict
from components.energies.mlm import MLMEnergy
from components.inference.mask_predict import MaskPredictConfig, mask_predict
from components.inference.mcmc.base import run_chains
from components.inference.mcmc.registry import SAMPLERS
from components.inference.mcmc.traces import shard_batch
from components.models.mlm import CMLMConfig, ConditionalMLM
from flows.stages import mcmc
from tests.energies.test_mlm_energy import TableMLM, ragged_batch
from tests.inference.test_mcmc_mlm import Exact, bernstein, index_of, stationary, toy, tv

DT = torch.float64


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


# ------------------------------------------------------------------------------------------------
# (a) the warm start is mask-predict with one iteration
# ------------------------------------------------------------------------------------------------

SOURCES = [[1, 2, 3, 4], [5, 6], [7, 8, 9, 10, 1, 2, 3], [4], [9, 9, 8, 7, 6]]


@pytest.mark.parametrize("seed", [1, 2, 6])          # untrained models whose greedy decodes vary
@pytest.mark.parametrize("name", ["mh_mlm", "gibbs_mlm"])
def test_warm_start_is_one_iteration_of_mask_predict(name, seed):
    """Both greedy-decode the all-[MASK] sequence: the same conditionals call (tokens = [MASK] at the
    valid positions, 0 at padding; the same mask, context and rows), argmax vs the max of a float64
    softmax — the same ids. mask_predict chooses its length (argmax of predict_length); the chains
    sample the batch's lengths, so the batch takes mask-predict's lengths and the comparison is exact."""
    cfg = CMLMConfig(d_model=16, heads=2, encoder_layers=2, decoder_layers=2, ff=24, dropout=0.1,
                     max_source_len=10, max_target_len=9)
    model = ConditionalMLM(11, 12, cfg, seed=seed).eval()                # ids 0, 1, 2 (pad, unk, eos) disallowed
    probe = shard_batch(SOURCES, [1] * len(SOURCES))
    res = mask_predict(model, probe, MaskPredictConfig(iterations=1, length_candidates=1))
    lengths = res.lengths.tolist()
    with torch.no_grad():                                                # the length mask-predict used: the argmax
        assert lengths == model.predict_length(model.encode(probe)).argmax(1).tolist()
    batch = shard_batch(SOURCES, lengths)
    assert torch.equal(batch.mask, res.mask)
    C = 4
    state = SAMPLERS.build(name, {"init": "warm"}, seed=seed).init(MLMEnergy(model, "norm"), batch, C)
    assert state.y.shape == (C, len(SOURCES), max(lengths))
    for c in range(C):
        assert torch.equal(state.y[c], res.tokens), (c, state.y[c], res.tokens)
    assert bool(model.allowed[state.y[:, batch.mask]].all())
    # with start_noise the chains leave it, each independently, only where they were perturbed
    noisy = SAMPLERS.build(name, {"init": "warm", "start_noise": 0.5}, seed=seed).init(
        MLMEnergy(model, "norm"), batch, 50)
    assert not bool((noisy.y == noisy.y[0]).all())
    assert bool((noisy.y[:, ~batch.mask] == 0).all()) and bool(model.allowed[noisy.y[:, batch.mask]].all())


# ------------------------------------------------------------------------------------------------
# (b) different starts, one law: exact matrices on the toy space
# ------------------------------------------------------------------------------------------------

def perturbed_law(w: torch.Tensor, n_allowed: int, s: float) -> torch.Tensor:
    """The exact law over the V^n states (``labelings`` order) of the start w (long [n]) with each
    position independently replaced, with probability s, by a uniform draw over V = n_allowed ids."""
    n = len(w)
    out = torch.ones(n_allowed ** n, dtype=DT)
    for k, y in enumerate(itertools.product(range(n_allowed), repeat=n)):
        for t in range(n):
            out[k] *= (1 - s) * float(y[t] == int(w[t])) + s / n_allowed
    return out


def dobrushin(K: torch.Tensor) -> float:
    """Dobrushin's coefficient max_{i, j} TV(K_i, K_j): TV(mu K, nu K) <= it * TV(mu, nu) for any mu, nu."""
    return float(0.5 * (K[:, None, :] - K[None, :, :]).abs().sum(-1).max())


NOISE = 0.3
V3 = 3                                                                  # the toy's ids, all allowed


def _toy_starts(name: str):
    cfg = SAMPLERS.config(name)
    energy, batch = toy("norm", seed=0, scale=0.5)                      # the mild table: the chains mix
    ex = Exact(energy, batch, 0, cfg, 1.0, "mh" if name == "mh_mlm" else "always")
    w = SAMPLERS.build(name, {"init": "warm"}).init(energy, batch, 1).y[0, 0, :ex.n]
    point = torch.zeros(ex.K, dtype=DT)
    point[int(index_of(w))] = 1.0
    return energy, batch, ex, w, point, perturbed_law(w, V3, NOISE)


def test_perturbed_start_law_has_full_support():
    _, _, ex, w, point, nu = _toy_starts("mh_mlm")
    assert ex.K == 27 and torch.equal(ex.Y[int(index_of(w))], w)
    torch.testing.assert_close(nu.sum(), torch.tensor(1.0, dtype=DT), atol=1e-15, rtol=0)
    assert bool((nu > 0).all())                                         # every state reachable at sweep 0
    assert float(nu.min()) == pytest.approx((NOISE / 3) ** 3, rel=1e-12)  # every position redrawn away from w
    assert float(nu.max()) == pytest.approx((1 - NOISE + NOISE / 3) ** 3, rel=1e-12) == float(nu @ point)
    assert tv(point, nu) == pytest.approx(1 - (1 - NOISE + NOISE / 3) ** 3, rel=1e-12)
    assert int((point > 0).sum()) == 1                                  # the warm start alone: one state


def test_mh_from_the_warm_start_and_from_perturbed_starts_converges_to_pi():
    """The single-site sweep kernel K of MH is pi-reversible (the average over all orders contains each
    order's reverse), so TV(mu K^t, pi) <= 1/2 lambda*^t sqrt(chi2(mu, pi)), lambda* its second largest
    |eigenvalue|; both starts obey it at every t, TV never rises, and at t = 40 both are within 1e-7."""
    _, _, ex, w, point, nu = _toy_starts("mh_mlm")
    K, pi = ex.sweep(), ex.pi
    flow = pi[:, None] * K
    torch.testing.assert_close(flow, flow.T, atol=1e-15, rtol=0)       # reversible
    d = pi.sqrt()
    ev = torch.linalg.eigvalsh(d[:, None] * K / d[None, :])              # symmetric: real spectrum
    assert float(ev[-1]) == pytest.approx(1.0, abs=1e-12)
    lam = max(abs(float(ev[0])), abs(float(ev[-2])))
    assert lam < 0.6
    for mu0 in (point, nu):
        chi2 = float(((mu0 - pi) ** 2 / pi).sum())
        mu, prev = mu0.clone(), 1.0
        for t in range(41):
            gap = tv(mu, pi)
            bound = 0.5 * lam ** t * math.sqrt(chi2)
            assert gap <= bound * (1 + 1e-9) + 1e-14, (t, gap, bound)
            assert gap <= prev + 1e-14                                   # a Markov kernel never moves away from pi
            prev = gap
            mu = mu @ K
        assert gap < 1e-7
    # the two starts forget where they began: their laws agree to Dobrushin's bound
    delta = dobrushin(K)
    mu, nu_t = point.clone(), nu.clone()
    for t in range(41):
        assert tv(mu, nu_t) <= delta ** t * tv(point, nu) * (1 + 1e-9) + 1e-14
        mu, nu_t = mu @ K, nu_t @ K


def test_degenerate_gibbs_from_both_starts_converges_to_its_own_law_not_pi():
    """No reversibility here: Dobrushin's coefficient delta < 1 contracts any two laws, so from the warm
    start and from the perturbed starts the laws converge (TV <= delta^t) to Gibbs' own stationary
    law, which is not pi."""
    _, _, ex, w, point, nu = _toy_starts("gibbs_mlm")
    K = ex.sweep()
    mu_g = stationary(K)
    torch.testing.assert_close(mu_g @ K, mu_g, atol=1e-12, rtol=0)
    delta = dobrushin(K)
    assert delta < 0.35
    for mu0 in (point, nu):
        mu = mu0.clone()
        for t in range(21):
            assert tv(mu, mu_g) <= delta ** t * tv(mu0, mu_g) * (1 + 1e-9) + 1e-14, t
            mu = mu @ K
        assert tv(mu, mu_g) < 1e-9
    assert tv(mu_g, ex.pi) > 0.03


@pytest.mark.parametrize("name", ["mh_mlm", "gibbs_mlm"])
def test_real_perturbed_starts_follow_the_exact_start_law_and_then_the_kernel(name):
    """20000 chains from the perturbed warm start: the empirical start law of instance 0 is within the
    slack of the exact one (E TV <= 1/2 sqrt((K - 1) / C) by Cauchy-Schwarz, plus McDiarmid's
    sqrt(log(1 / 1e-4) / (2 C))), and so is the law after 5 sweeps (exact: nu K^5)."""
    energy, batch, ex, w, point, nu = _toy_starts(name)
    C, S = 20000, 5
    slack = 0.5 * math.sqrt((ex.K - 1) / C) + math.sqrt(math.log(1 / 1e-4) / (2 * C))
    sampler = SAMPLERS.build(name, {"init": "warm", "start_noise": NOISE}, seed=11)
    state = sampler.init(energy, batch, C)
    emp = torch.bincount(index_of(state.y[:, 0, :ex.n]), minlength=ex.K).to(DT) / C
    assert tv(emp, nu) < slack, tv(emp, nu)
    for _ in range(S):
        state, _ = sampler.step(state)
    law = nu @ torch.linalg.matrix_power(ex.sweep(), S)
    emp = torch.bincount(index_of(state.y[:, 0, :ex.n]), minlength=ex.K).to(DT) / C
    assert tv(emp, law) < slack, tv(emp, law)


# ------------------------------------------------------------------------------------------------
# (c) start_noise: none consumes nothing; some perturbs each position at its rate
# ------------------------------------------------------------------------------------------------

def _toy4():
    """V = 4 with id 1 disallowed (|allowed| = 3), lengths 3 and 2."""
    model = TableMLM(V=4, N=3, n_ctx=2, seed=8, allowed=[True, False, True, True])
    return MLMEnergy(model, "norm"), ragged_batch(B=2, N=3, lengths=(3, 2), n_ctx=2)


@pytest.mark.parametrize("init", ["warm", "uniform"])
@pytest.mark.parametrize("name", ["mh_mlm", "gibbs_mlm"])
def test_zero_start_noise_draws_nothing(name, init):
    energy, batch = _toy4()
    runs = []
    for over in ({"init": init}, {"init": init, "start_noise": 0.0}):
        sampler = SAMPLERS.build(name, over, seed=7)
        state = sampler.init(energy, batch, 6)
        # the generator is where the start alone leaves it: untouched (warm) or after the uniform draw
        g = torch.Generator().manual_seed(7)
        if init == "uniform":
            torch.randint(0, 3, (1, 2, 3), generator=g)
        assert torch.equal(state.generator.get_state(), g.get_state())
        ys = [state.y.clone()]
        for _ in range(3):
            state, _ = sampler.step(state)
            ys.append(state.y.clone())
        runs.append(torch.stack(ys))
    assert torch.equal(runs[0], runs[1])
    assert bool((runs[0][0] == runs[0][0][0]).all())                   # shared start, as without the setting


@pytest.mark.parametrize("s", [0.1, 0.45])
def test_start_noise_redraws_each_position_at_its_rate(s):
    """Per chain and valid position t, the start id is v with probability (1 - s) 1{v = w_t} + s / 3
    (3 allowed ids), so it changes with probability 2 s / 3; 30000 chains, every (instance, t, v)
    frequency and every change rate within Bernstein bounds (union over all of them, delta 1e-4)."""
    energy, batch = _toy4()
    C = 30000
    warm = SAMPLERS.build("mh_mlm", {"init": "warm"}).init(energy, batch, 1).y[0]
    state = SAMPLERS.build("mh_mlm", {"init": "warm", "start_noise": s}, seed=3).init(energy, batch, C)
    y = state.y
    assert bool((y[:, ~batch.mask] == 0).all())                          # padding untouched
    assert not bool((y == y[0]).all())                                   # the chains start apart
    cells = [(b, t) for b in range(2) for t in range(3) if batch.mask[b, t]]
    n_tests = len(cells) * 5
    for b, t in cells:
        w = int(warm[b, t])
        col = y[:, b, t]
        for v in range(4):
            p = torch.tensor((1 - s) * (v == w) + (s / 3 if v != 1 else 0.0), dtype=DT)
            freq = float((col == v).to(DT).mean())
            assert abs(freq - float(p)) < float(bernstein(p, C, n_tests)), (b, t, v, freq, float(p))
        p_change = torch.tensor(2 * s / 3, dtype=DT)
        rate = float((col != w).to(DT).mean())
        assert abs(rate - float(p_change)) < float(bernstein(p_change, C, n_tests)), (b, t, rate)
    # the chains' cached energies are their starts'
    torch.testing.assert_close(state.energy[:5], torch.stack([energy.energy(batch, y[c]) for c in range(5)]),
                               atol=1e-12, rtol=0)


def test_start_noise_perturbs_uniform_and_given_starts_and_is_seeded():
    energy, batch = _toy4()
    y0 = torch.tensor([[0, 2, 3], [3, 3, 0]])
    a = SAMPLERS.build("gibbs_mlm", {"start_noise": 0.5}, seed=4).init(energy, batch, 400, y0=y0)
    b = SAMPLERS.build("gibbs_mlm", {"start_noise": 0.5}, seed=4).init(energy, batch, 400, y0=y0)
    assert torch.equal(a.y, b.y)                                          # deterministic per seed
    assert bool((a.y != y0).any(0)[batch.mask].all())                     # every position moved in some chain
    assert bool(((a.y == y0).all(2)).any())                               # and some chains kept y0 whole
    u = SAMPLERS.build("mh_mlm", {"init": "uniform", "start_noise": 0.5}, seed=4).init(energy, batch, 50)
    assert not bool((u.y == u.y[0]).all()) and bool((u.y[:, batch.mask] != 1).all())


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, "x", True])
def test_start_noise_range(bad):
    for name in ("mh_mlm", "gibbs_mlm"):
        with pytest.raises(ConfigError, match="start_noise"):
            SAMPLERS.config(name, {"start_noise": bad})


# ------------------------------------------------------------------------------------------------
# (d) the stage's design
# ------------------------------------------------------------------------------------------------

def test_design_starts_warm_with_noise_and_random_start_is_uniform_without():
    cfg = mcmc.MCMCStageConfig()
    assert cfg.init == "warm" and cfg.start_noise == 0.2
    runs = {r["name"]: r for r in mcmc.design(cfg)}
    for s in ("raw", "norm", "deg"):
        assert runs[f"main/{s}"]["config"] == {"init": "warm", "start_noise": 0.2}
        assert runs[f"random_start/{s}"]["config"] == {"init": "uniform", "start_noise": 0.0}
        assert runs[f"random_start/{s}"]["sampler"] == runs[f"main/{s}"]["sampler"]
        assert runs[f"random_start/{s}"]["energy"] == runs[f"main/{s}"]["energy"]
        assert runs[f"full/{s}"]["config"]["init"] == "warm" and runs[f"full/{s}"]["config"]["start_noise"] == 0.0   # Table 6.6: Algorithm 4 exactly
    assert runs["temperature/norm/2.0"]["config"] == {"init": "warm", "start_noise": 0.2, "proposal_temperature": 2.0}
    # both samplers take the keys; temperature 1 is still the main run
    for r in runs.values():
        built = SAMPLERS.config(r["sampler"], r["config"])
        assert built.init == r["config"]["init"] and built.start_noise == r["config"]["start_noise"]
    assert SAMPLERS.config("gibbs_mlm", runs["random_start/deg"]["config"]).init == "uniform"
    assert mcmc._key(runs["main/norm"]) == mcmc._key(runs["temperature/norm/1.0"])
    assert mcmc._key(runs["main/norm"]) != mcmc._key(runs["random_start/norm"])
    # the stage-wide start, and a group's own, from params
    plain = from_dict(mcmc.MCMCStageConfig, {"init": "uniform", "start_noise": 0.0,
                                             "groups": {"main": {"schemes": ["raw", "deg"]},
                                                        "mine": {"schemes": ["norm"], "config": {"start_noise": 0.5}}}})
    runs = {r["name"]: r["config"] for r in mcmc.design(plain)}
    assert runs == {"main/raw": {"init": "uniform", "start_noise": 0.0},
                    "main/deg": {"init": "uniform", "start_noise": 0.0},
                    "mine/norm": {"init": "uniform", "start_noise": 0.5}}


@pytest.mark.parametrize("over, match", [({"start_noise": 1.0}, "start_noise"), ({"start_noise": -0.2}, "start_noise"),
                                         ({"init": "cold"}, "init")])
def test_stage_start_settings_are_checked(over, match):
    with pytest.raises(ConfigError, match=match):
        from_dict(mcmc.MCMCStageConfig, over)
