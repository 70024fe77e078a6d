"""Scaling methods (Shevchenko & Osokin Sec. 5): online alpha selection against a direct evaluation
of L_alpha(D) (eq. 19), offline invariance (eq. 20), the ratio regulariser (eq. 21), and the
potential norms / rescaling that every method goes through."""
import dataclasses
import math

import pytest
import torch

from components.energies.chain import ChainPotentials
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.structures import linear_chain
from components.structures.gaussian_crf import GCRFPotentials, gcrf_solve
from components.structures.gaussian_crf import predict as gcrf_predict
from components.config import ConfigError
from components.training.registry import OBJECTIVES, objectives_for
from components.training.scaling import SCALINGS
from components.training.scaling import (OnlineConfig, ScaledModel, offline_normalise, ratio, ratio_regulariser,
                                         select_alpha, subset_losses)
from components.training.structured import ChainTask
from tests.training.toy import FeatUnary
from tests.training.toy import ToyBatch as _Batch

F64 = torch.float64
CHAIN_OBJECTIVES = sorted(objectives_for("chain"))


def transform(p, method, alpha, eps=None):
    """The potentials method ``method`` gives at alpha (its config's alpha and eps where it has them)."""
    fields = {f.name for f in dataclasses.fields(SCALINGS[method].config)}
    cfg = {k: v for k, v in (("alpha", alpha), ("eps", eps)) if k in fields and v is not None}
    return SCALINGS.build(method, cfg).transform(p, alpha)


def predict(objective, p):
    return OBJECTIVES.build(objective).predict(p)


def _FeatUnary(n_feats, n_labels):
    return FeatUnary(n_feats, n_labels, bias=False)


def _mask(lengths, N):
    return torch.arange(N)[None] < torch.tensor(lengths)[:, None]


def _potentials(seed, lengths=(4, 1, 3), L=3, per_position=False, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    B, N = len(lengths), max(lengths)
    U = scale * torch.randn(B, N, L, generator=g, dtype=F64)
    W = scale * (torch.randn(B, N - 1, L, L, generator=g, dtype=F64) if per_position
                 else torch.randn(L, L, generator=g, dtype=F64))
    return ChainPotentials(U, W, _mask(lengths, N))


# --------------------------------------------------------------------------------------------
# Online scaling (eqs 18-19, Algorithm 1)
# --------------------------------------------------------------------------------------------

def _online_setup(mode, seed=0, L=3, n_feats=4):
    """A ScaledModel over a UnaryPairwiseCRF and subset batches of sizes 3 and 2 (ragged lengths).
    mode: 'random' gold; 'gold' = gold is the unary argmax (large alpha wins); 'adversarial' =
    gold is the unary argmin (small alpha wins)."""
    g = torch.Generator().manual_seed(seed)
    net = _FeatUnary(n_feats, L)
    with torch.no_grad():
        net.lin.weight.copy_(2.0 * torch.randn(L, n_feats, generator=g))
    crf = UnaryPairwiseCRF(net, L, init_std=0.3, seed=seed).double()
    model = ScaledModel(crf, "online", {"grid_lo": -3, "grid_hi": 3})
    batches = []
    for lengths in ([4, 2, 1], [3, 5]):
        N = max(lengths)
        mask = _mask(lengths, N)
        feats = torch.randn(len(lengths), N, n_feats, generator=g, dtype=F64)
        with torch.no_grad():
            U = net(_Batch(feats, None, mask))
        if mode == "gold":
            tags = U.argmax(-1)
        elif mode == "adversarial":
            tags = U.argmin(-1)
        elif mode == "noisy":       # gold = argmax at ~3/4 of the positions: a calibrated alpha in between
            flip = torch.rand(mask.shape, generator=g) < 0.25
            tags = torch.where(flip, torch.randint(0, L, mask.shape, generator=g), U.argmax(-1))
        else:
            tags = torch.randint(0, L, mask.shape, generator=g)
        batches.append(_Batch(feats, tags * mask, mask))
    return model, batches


def _direct_losses(model, batches, objective):
    """L_alpha(D) by hand: the objective on ChainPotentials(alpha U, W, mask), CE objectives per
    position (eq. 5), averaged per example over all the subset's batches."""
    W = model.energy.transition.detach()
    out = []
    for a in model.cfg.grid():
        vals = []
        for b in batches:
            with torch.no_grad():
                U = model.energy.unary_net(b)
            ls = OBJECTIVES.build(objective).loss(ChainPotentials(a * U, W, b.mask), b.tags)
            if objective in ("marginal_ce", "mean_field_ce"):
                ls = ls / b.mask.sum(1).to(ls.dtype)
            vals.extend(ls.tolist())
        out.append(sum(vals) / len(vals))
    return out


def _first_argmin(vals, rel=1e-9):
    best = min(vals)
    return next(i for i, v in enumerate(vals) if v <= best + rel * (1 + abs(best)))


@pytest.mark.parametrize("mode", ["random", "gold", "adversarial", "noisy"])
@pytest.mark.parametrize("objective", CHAIN_OBJECTIVES)
def test_online_alpha_is_the_argmin_of_the_direct_subset_loss(objective, mode):
    model, batches = _online_setup(mode, seed=3)
    model.train()
    assert float(model.alpha) == 1.0
    alpha, losses = model.select_online_alpha(batches, lambda b: b, ChainTask(objective).loss)
    direct = _direct_losses(model, batches, objective)
    grid = model.cfg.grid()
    assert len(losses) == len(grid)
    for got, want in zip(losses, direct):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    assert alpha == grid[_first_argmin(direct)]
    assert float(model.alpha) == alpha
    assert model.training                       # the train/eval mode is restored
    if mode == "gold":                          # unaries that favour the gold labels: scale them up
        assert alpha > 1.0
    elif mode == "adversarial":                 # unaries that favour wrong labels: scale them down
        assert alpha < 1.0
    elif mode == "noisy" and objective != "ssvm":   # an interior minimiser, not alpha = 1
        assert grid[0] < alpha < grid[-1] and alpha != 1.0
    # the selected alpha is what the model then uses
    p = model.potentials(batches[0])
    raw = model.raw_potentials(batches[0])
    torch.testing.assert_close(p.unary, alpha * raw.unary)
    torch.testing.assert_close(p.transition, raw.transition)


def test_online_alpha_travels_with_the_state_dict():
    model, batches = _online_setup("gold", seed=1)
    alpha, _ = model.select_online_alpha(batches, lambda b: b, ChainTask("nll").loss)
    other, _ = _online_setup("random", seed=1)
    other.load_state_dict(model.state_dict())
    assert float(other.alpha) == alpha != 1.0


def test_subset_losses_weight_examples_not_batches():
    p1, p2 = _potentials(0, lengths=(2, 2, 2)), _potentials(1, lengths=(3,))
    loss = lambda p, y: p.unary.sum((1, 2))          # [B]; depends on alpha linearly
    out = subset_losses([p1, p2], [None, None], loss, [1.0, 2.0])
    want = torch.cat([loss(p1, None), loss(p2, None)]).mean().item()
    assert math.isclose(out[0], want, rel_tol=1e-12) and math.isclose(out[1], 2 * want, rel_tol=1e-12)


def test_select_alpha_skips_non_finite_and_takes_the_first_tie():
    grid = [0.5, 1.0, 2.0, 4.0]
    assert select_alpha([float("nan"), 3.0, 1.0, 2.0], grid) == 2.0
    assert select_alpha([float("nan"), float("-inf"), float("inf"), 7.0], grid) == 4.0   # -inf is not finite
    assert select_alpha([2.0, 1.0, 1.0, 1.0], grid) == 1.0
    assert select_alpha([1.0, 1.0, float("nan"), 0.5], grid) == 4.0
    assert select_alpha([0.0, 0.0, 0.0, 0.0], grid) == 0.5
    with pytest.raises(FloatingPointError, match="not finite"):
        select_alpha([float("nan"), float("inf"), float("-inf"), float("nan")], grid)


def test_scaling_config_validates_and_builds_its_grid():
    cfg = OnlineConfig(grid_lo=-2, grid_hi=2)
    assert cfg.grid() == [0.25, 0.5, 1.0, 2.0, 4.0]
    assert SCALINGS.build("online", cfg).grid() == cfg.grid()
    assert OnlineConfig(subset_fraction=0.5, subset_max=10).subset_size(7) == 4
    assert OnlineConfig(subset_fraction=0.5, subset_max=10).subset_size(100) == 10
    assert OnlineConfig(subset_fraction=0.01).subset_size(3) == 1
    for bad in (dict(alpha=0.0), dict(grid_lo=3, grid_hi=2), dict(subset_fraction=0.0)):
        with pytest.raises(ValueError):
            SCALINGS.config("online", bad)
    for method in ("fixed", "offline", "offline_reg", "temperature"):
        with pytest.raises(ValueError, match="alpha"):
            SCALINGS.config(method, {"alpha": 0.0})
    with pytest.raises(ConfigError, match="unknown key"):        # a method's config holds only what it uses
        SCALINGS.config("fixed", {"reg_lambda": 1.0})
    crf = UnaryPairwiseCRF(_FeatUnary(4, 3), 3)
    with pytest.raises(ValueError, match="scaling method"):
        ScaledModel(crf, "nope")
    with pytest.raises(ValueError, match="does not select alpha"):
        ScaledModel(crf, "fixed").select_online_alpha([], lambda b: b, ChainTask().loss)


# --------------------------------------------------------------------------------------------
# Offline scaling (eq. 20): invariance to positive rescaling of U and of W
# --------------------------------------------------------------------------------------------

SCALES = [1e-3, 0.5, 7.0, 1e3]


def _assert_same_potentials(a, b, rtol):
    """Equal on what inference sees: every unary, and the transitions of valid edges (a length-1
    sequence has none; its padded per-position transitions are free)."""
    torch.testing.assert_close(a.unary, b.unary, rtol=rtol, atol=0)
    assert a.transition.shape == b.transition.shape
    if a.transition.dim() == 2:
        torch.testing.assert_close(a.transition, b.transition, rtol=rtol, atol=0)
    else:
        edge = a.mask[:, 1:] & a.mask[:, :-1]
        torch.testing.assert_close(a.transition[edge], b.transition[edge], rtol=rtol, atol=0)


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("c", SCALES)
def test_offline_is_invariant_to_positive_rescaling(c, per_position):
    p = _potentials(5, lengths=(5, 1, 3, 4), per_position=per_position)
    alpha = 2.5
    ref = transform(p, "offline", alpha)
    variants = {
        "U": ChainPotentials(c * p.unary, p.transition, p.mask),
        "W": ChainPotentials(p.unary, c * p.transition, p.mask),
        "both": ChainPotentials(c * p.unary, (3.0 / c) * p.transition, p.mask),
        # per-example factors: the norms are per example, so this is invariant too
        "per_example": p.rescale(c * torch.tensor([1.0, 2.0, 0.1, 5.0], dtype=F64),
                                 torch.tensor([0.3, 1.0, 4.0, c], dtype=F64)),
    }
    for name, q in variants.items():
        got = transform(q, "offline", alpha)
        # the default eps = 1e-8 added to norms ~1e-4 perturbs the result by ~1e-4 relative
        _assert_same_potentials(got, ref, rtol=1e-3)
        _assert_same_potentials(transform(q, "offline", alpha, eps=0.0), transform(p, "offline", alpha, eps=0.0),
                                rtol=1e-10)
        for objective in CHAIN_OBJECTIVES:
            assert torch.equal(predict(objective, got), predict(objective, ref)), (name, objective)
    # and the normalised potentials have ||U|| = alpha, ||W|| = 1 wherever an edge exists
    torch.testing.assert_close(ref.unary_norm(), torch.full((4,), alpha, dtype=F64), rtol=1e-6, atol=0)
    pn = ref.pairwise_norm()
    has_edge = p.mask.sum(1) > 1
    torch.testing.assert_close(pn[has_edge], torch.ones(int(has_edge.sum()), dtype=F64), rtol=1e-6, atol=0)


def _gcrf(seed, mask=True):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(2, 3, 3, 4, dtype=F64, generator=g)
    A = 0.7 * torch.randn(2, 2, 3, 4, dtype=F64, generator=g)
    m = None
    if mask:
        m = torch.ones(2, 3, 4, dtype=torch.bool)
        m[1, 2, 1:] = False
    return GCRFPotentials(U, A, 0.5, m)


def _gcrf_pred(p):
    return gcrf_predict(gcrf_solve(p.unary, p.embeddings, p.lam, mask=p.mask, max_iter=200, tol=1e-12))


@pytest.mark.parametrize("c", SCALES)
def test_offline_gcrf_is_invariant_to_positive_rescaling(c):
    p = _gcrf(2)
    alpha = 0.7
    ref = transform(p, "offline", alpha)
    for q in (p.rescale(c, 1.0), p.rescale(1.0, c), p.rescale(c, 1.0 / c),
              p.rescale(torch.tensor([c, 1.0], dtype=F64), torch.tensor([2.0, c], dtype=F64))):
        got = transform(q, "offline", alpha)
        torch.testing.assert_close(got.unary, ref.unary, rtol=1e-3, atol=0)
        torch.testing.assert_close(got.embeddings, ref.embeddings, rtol=1e-3, atol=0)
        exact = transform(q, "offline", alpha, eps=0.0)
        torch.testing.assert_close(exact.unary, transform(p, "offline", alpha, eps=0.0).unary, rtol=1e-10, atol=0)
        torch.testing.assert_close(exact.embeddings, transform(p, "offline", alpha, eps=0.0).embeddings,
                                   rtol=1e-10, atol=0)
        assert got.lam == ref.lam
        assert torch.equal(_gcrf_pred(got), _gcrf_pred(ref))
    torch.testing.assert_close(ref.unary_norm(), torch.full((2,), alpha, dtype=F64), rtol=1e-6, atol=0)
    torch.testing.assert_close(ref.pairwise_norm(), torch.ones(2, dtype=F64), rtol=1e-6, atol=0)


def test_offline_normalise_is_transform_offline():
    p = _potentials(9)
    a, b = offline_normalise(p, 3.0), transform(p, "offline", 3.0)
    assert torch.equal(a.unary, b.unary) and torch.equal(a.transition, b.transition)


# --------------------------------------------------------------------------------------------
# The ratio regulariser (eq. 21) and the other transforms
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_position", [False, True])
def test_ratio_regulariser_zero_at_target_positive_elsewhere(per_position):
    p = _potentials(4, lengths=(3, 2, 4), per_position=per_position)
    alpha, lam = 1.7, 0.3
    # per-example rescaling of U so that ||U|| / ||W|| == alpha exactly (the eps of the regulariser aside)
    at = p.rescale(alpha * (p.pairwise_norm() + 1e-8) / p.unary_norm(), 1.0)
    torch.testing.assert_close(ratio_regulariser(at, alpha, lam), torch.zeros(3, dtype=F64), rtol=0, atol=1e-20)
    torch.testing.assert_close(ratio(at), torch.full((3,), alpha, dtype=F64), rtol=1e-6, atol=0)
    for f in (0.5, 2.0):
        off = at.rescale(f, 1.0)
        r = ratio_regulariser(off, alpha, lam)
        assert bool((r > 0).all())
        torch.testing.assert_close(r, lam * ((f - 1) * alpha) ** 2 * torch.ones(3, dtype=F64), rtol=1e-6, atol=0)


@pytest.mark.parametrize("f", [0.5, 2.0])
def test_ratio_regulariser_gradient_pulls_the_ratio_to_alpha(f):
    p = _potentials(6, lengths=(4, 2))
    alpha, lam = 1.3, 2.0
    base = p.rescale(alpha * p.pairwise_norm() / p.unary_norm(), 1.0)   # ratio == alpha
    U = (f * base.unary).detach().requires_grad_()
    q = ChainPotentials(U, p.transition, p.mask)
    ratio_regulariser(q, alpha, lam).sum().backward()
    g = U.grad
    m = p.mask[..., None].expand_as(U)
    assert bool((g[~m] == 0).all())                                    # padding gets no gradient
    # d/dU lam (||U||/||W|| - alpha)^2 = 2 lam (r - alpha) / ||W|| * sign(U) / (n L)
    r, wn = ratio(q).detach(), p.pairwise_norm()
    n = p.mask.sum(1).to(F64) * p.n_labels
    want = (2 * lam * (r - alpha) / (wn + 1e-8) / n)[:, None, None] * torch.sign(U.detach()) * m
    torch.testing.assert_close(g, want)
    # a gradient step moves ||U|| / ||W|| towards alpha
    s = (g * U.detach())[m]
    assert bool((s > 0).all()) if f > 1 else bool((s < 0).all())
    stepped = ChainPotentials(U.detach() - 1e-2 * g, p.transition, p.mask)
    assert bool(((ratio(stepped) - alpha).abs() < (ratio(q) - alpha).abs()).all())


@pytest.mark.parametrize("per_position", [False, True])
def test_transforms_scale_the_right_parts(per_position):
    p = _potentials(7, lengths=(3, 1, 2), per_position=per_position)
    un, pn = p.unary_norm(), p.pairwise_norm()
    a = 3.0
    for m in ("none", "offline_reg"):
        assert transform(p, m, a) is p
    for m in ("fixed", "online"):
        q = transform(p, m, a)
        torch.testing.assert_close(q.unary_norm(), a * un)
        torch.testing.assert_close(q.pairwise_norm(), pn)
        torch.testing.assert_close(q.unary, a * p.unary)
        torch.testing.assert_close(q.transition, p.transition)
    q = transform(p, "temperature", a)
    torch.testing.assert_close(q.unary_norm(), a * un)
    torch.testing.assert_close(q.pairwise_norm(), a * pn)
    has_edge = p.mask.sum(1) > 1       # the ratio is undefined without a pairwise term
    torch.testing.assert_close(ratio(q)[has_edge], ratio(p)[has_edge])
    assert set(SCALINGS) == {"none", "fixed", "online", "offline", "offline_reg", "temperature"}


def test_scaled_model_regulariser_only_for_offline_reg():
    torch.manual_seed(0)
    crf = UnaryPairwiseCRF(_FeatUnary(4, 3), 3, init_std=0.3)
    g = torch.Generator().manual_seed(0)
    b = _Batch(torch.randn(2, 3, 4, generator=g), torch.zeros(2, 3, dtype=torch.long), _mask([3, 2], 3))
    for method in SCALINGS:
        fields = {f.name for f in dataclasses.fields(SCALINGS[method].config)}
        model = ScaledModel(crf, method, {k: v for k, v in (("alpha", 2.0), ("reg_lambda", 0.5)) if k in fields})
        raw = model.raw_potentials(b)
        reg = model.regulariser(raw)
        assert reg.shape == (2,)
        if method == "offline_reg":
            torch.testing.assert_close(reg, ratio_regulariser(raw, 2.0, 0.5))
            assert bool((reg > 0).all())
        else:
            assert bool((reg == 0).all())
        p = model.potentials(b)
        q = transform(raw, method, 2.0)
        torch.testing.assert_close(p.unary, q.unary)
        torch.testing.assert_close(p.transition, q.transition)


# --------------------------------------------------------------------------------------------
# ChainPotentials.unary_norm / pairwise_norm / rescale
# --------------------------------------------------------------------------------------------

def test_unary_norm_ignores_masked_positions():
    p = _potentials(11, lengths=(4, 1, 2))
    hand = torch.stack([p.unary[b, :n].abs().mean() for b, n in enumerate((4, 1, 2))])
    torch.testing.assert_close(p.unary_norm(), hand)
    padded = p.unary.clone()
    padded[~p.mask] = 1e6
    torch.testing.assert_close(ChainPotentials(padded, p.transition, p.mask).unary_norm(), hand)


def test_pairwise_norm_shared_and_per_position():
    p = _potentials(12, lengths=(4, 1, 3))
    torch.testing.assert_close(p.pairwise_norm(), p.transition.abs().mean().expand(3))
    q = _potentials(12, lengths=(4, 1, 3), per_position=True)
    W = q.transition.clone()
    for b, n in enumerate((4, 1, 3)):
        W[b, max(n - 1, 0):] = -1e6                     # edges touching padding
    q = ChainPotentials(q.unary, W, q.mask)
    hand = torch.stack([W[0, :3].abs().mean(), torch.zeros((), dtype=F64), W[2, :2].abs().mean()])
    torch.testing.assert_close(q.pairwise_norm(), hand)


def test_rescale_scalars_and_per_example_factors():
    p = _potentials(13, lengths=(4, 2, 3))
    q = p.rescale(2.0, 0.5)
    torch.testing.assert_close(q.unary, 2.0 * p.unary)
    torch.testing.assert_close(q.transition, 0.5 * p.transition)
    assert q.mask is p.mask

    u = torch.tensor([1.0, 3.0, 0.25], dtype=F64)
    w = torch.tensor([2.0, 0.1, 5.0], dtype=F64)
    r = p.rescale(u, w)
    assert r.transition.shape == (3, 3, 3, 3)          # shared [L, L] expanded to [B, N-1, L, L]
    for b in range(3):
        torch.testing.assert_close(r.unary[b], u[b] * p.unary[b])
        for t in range(3):
            torch.testing.assert_close(r.transition[b, t], w[b] * p.transition)
    torch.testing.assert_close(r.unary_norm(), u * p.unary_norm())
    torch.testing.assert_close(r.pairwise_norm()[[0, 2]], (w * p.pairwise_norm())[[0, 2]])
    logz = linear_chain.log_partition(r.unary, r.transition, r.mask)
    for b, n in enumerate((4, 2, 3)):
        hand = linear_chain.log_partition(u[b] * p.unary[b:b + 1, :n], w[b] * p.transition)
        torch.testing.assert_close(logz[b:b + 1], hand)

    pp = _potentials(14, lengths=(4, 2, 3), per_position=True)
    rp = pp.rescale(u, w)
    torch.testing.assert_close(rp.transition, w[:, None, None, None] * pp.transition)
    torch.testing.assert_close(pp.rescale(u, 2.0).transition, 2.0 * pp.transition)
    # a 0-d tensor factor acts as a scalar
    torch.testing.assert_close(p.rescale(torch.tensor(2.0, dtype=F64), torch.tensor(3.0, dtype=F64)).transition,
                               3.0 * p.transition)


def test_rescale_per_example_with_length_one_batch():
    p = _potentials(15, lengths=(1, 1))
    r = p.rescale(torch.tensor([1.0, 2.0], dtype=F64), torch.tensor([3.0, 4.0], dtype=F64))
    assert r.transition.shape == (2, 0, 3, 3)
    torch.testing.assert_close(linear_chain.log_partition(r.unary, r.transition, r.mask),
                               torch.logsumexp(p.unary[:, 0] * torch.tensor([[1.0], [2.0]], dtype=F64), -1))


# --------------------------------------------------------------------------------------------
# Why online scaling can keep alpha = 1 for a whole run (issue 13: the committed OCR online run
# chose alpha = 1 after every epoch and equals the joint run bit for bit). Not a bug: when U is
# positively homogeneous in the parameters of its last layer (LeNet's and the MLP's last layer is
# linear, U = V h + b), rescaling U by alpha is a direction in parameter space:
#     d/d alpha L(alpha U, W) |_{alpha=1} = <dL/dV, V> + <dL/db, b>.
# Training already minimises L along that direction, so once the optimiser is near-stationary
# along it the subset loss on the factor-2 grid is smallest at the alpha in use. Online scaling
# only moves alpha where L is flat along alpha or the optimiser lags (the tagging and snakes runs).
# --------------------------------------------------------------------------------------------

def _trained_online(n_steps=300, seed=0, n_feats=2, L=3):
    """A ScaledModel ('online', grid 2^-3..2^3) over a linear-unary chain CRF trained with Adam to
    near-stationarity on D (40 sequences, noisy labels: not separable, so the loss has a finite
    minimiser along U's scale), and D."""
    g = torch.Generator().manual_seed(seed)
    crf = UnaryPairwiseCRF(FeatUnary(n_feats, L, bias=True, seed=seed), L, init_std=0.3, seed=seed).double()
    model = ScaledModel(crf, "online", {"grid_lo": -3, "grid_hi": 3})
    centres = 0.7 * torch.randn(L, n_feats, generator=g, dtype=F64)
    batches = []
    for _ in range(2):
        lengths = torch.randint(1, 7, (20,), generator=g).tolist()
        N, mask = max(lengths), _mask(lengths, max(lengths))
        tags = torch.randint(0, L, mask.shape, generator=g)
        feats = centres[tags] + torch.randn(*mask.shape, n_feats, generator=g, dtype=F64)
        batches.append(_Batch(feats, tags * mask, mask))
    task = ChainTask("marginal_ce")
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(n_steps):
        for grp in opt.param_groups:
            grp["lr"] = 0.05 if step < n_steps // 2 else 0.005
        opt.zero_grad()
        loss = torch.cat([task.loss(model.potentials(b), b) for b in batches]).mean()
        loss.backward()
        opt.step()
    return model, batches, task


def test_online_alpha_derivative_is_the_radial_gradient_of_the_last_layer():
    model, batches, task = _trained_online(n_steps=5)          # far from stationary: a non-zero derivative
    lin = model.energy.unary_net.lin
    alpha = torch.tensor(1.0, dtype=F64, requires_grad=True)
    L_alpha = torch.cat([task.loss(model.raw_potentials(b).rescale(alpha, 1.0), b) for b in batches]).mean()
    (d_alpha,) = torch.autograd.grad(L_alpha, alpha)
    L = torch.cat([task.loss(model.potentials(b), b) for b in batches]).mean()
    gV, gb = torch.autograd.grad(L, [lin.weight, lin.bias])
    radial = (gV * lin.weight).sum() + (gb * lin.bias).sum()
    assert abs(float(d_alpha)) > 1e-4
    torch.testing.assert_close(d_alpha, radial.detach(), rtol=1e-9, atol=1e-12)
    # scaling W instead (a wrong online transform) would not give this identity
    L_w = torch.cat([task.loss(model.raw_potentials(b).rescale(1.0, alpha), b) for b in batches]).mean()
    (d_w,) = torch.autograd.grad(L_w, alpha)
    assert not torch.isclose(d_w, radial.detach(), rtol=1e-3)


def test_online_keeps_alpha_one_at_a_trained_model_and_moves_when_u_is_mis_scaled():
    model, batches, task = _trained_online()
    lin = model.energy.unary_net.lin
    L = torch.cat([task.loss(model.potentials(b), b) for b in batches]).mean()
    gV, gb = torch.autograd.grad(L, [lin.weight, lin.bias])
    assert abs(float((gV * lin.weight).sum() + (gb * lin.bias).sum())) < 1e-3   # stationary along U's scale
    alpha, losses = model.select_online_alpha(batches, lambda b: b, task.loss)
    grid = model.cfg.grid()
    assert alpha == 1.0                                        # the optimiser already tuned U's scale
    i = grid.index(1.0)
    assert losses[i] < losses[i - 1] and losses[i] < losses[i + 1]   # a strict interior minimum
    # the same model with its last layer scaled by 4 (U -> 4U): online selection undoes it exactly
    with torch.no_grad():
        model.energy.unary_net.lin.weight.mul_(4.0)
        model.energy.unary_net.lin.bias.mul_(4.0)
    model.alpha.fill_(1.0)
    alpha4, losses4 = model.select_online_alpha(batches, lambda b: b, task.loss)
    assert alpha4 == 0.25
    for a, l4 in zip(grid, losses4):                           # L(a 4U) = L(4a U): the curve shifted by 2 steps
        if 4 * a in grid:
            assert math.isclose(l4, losses[grid.index(4 * a)], rel_tol=1e-9)
