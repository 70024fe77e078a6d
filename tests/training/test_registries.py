"""Conformance of the training registries: every entry of ``OBJECTIVES`` and ``SCALINGS`` is built
from its defaults and checked for what its contract and its maths guarantee, so a new entry is
tested the day it is added."""
import dataclasses

import pytest
import torch

from components.energies.chain import ChainPotentials
from components.energies.gcrf import GCRFConfig, GaussianCRF
from components.models.unet import UNetConfig
from components.structures import enumerate as brute
from components.structures import mean_field
from components.structures.gaussian_crf import GCRFPotentials
from components.training.registry import OBJECTIVES, objectives_for
from components.training.scaling import SCALINGS
from components.training.scaling import ScaledModel, ratio

F64 = torch.float64
CHAIN = sorted(objectives_for("chain"))
GRID = sorted(objectives_for("grid"))
LENGTHS = (4, 1, 3)


def _chain(seed, per_position=False, L=3):
    g = torch.Generator().manual_seed(seed)
    B, N = len(LENGTHS), max(LENGTHS)
    mask = torch.arange(N)[None] < torch.tensor(LENGTHS)[:, None]
    unary = torch.randn(B, N, L, generator=g, dtype=F64).requires_grad_()
    shape = (B, N - 1, L, L) if per_position else (L, L)
    trans = torch.randn(*shape, generator=g, dtype=F64).requires_grad_()
    gold = torch.randint(0, L, (B, N), generator=g) * mask
    return ChainPotentials(unary, trans, mask), gold


def _gcrf(seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[1, 2, 1:] = False
    return GCRFPotentials(torch.randn(2, 3, 3, 4, dtype=F64, generator=g),
                          0.7 * torch.randn(2, 2, 3, 4, dtype=F64, generator=g), 0.5, mask)


def test_every_entry_declares_its_structure_and_prediction():
    steps = objectives_for("steps")
    assert set(CHAIN) | set(GRID) | set(steps) == set(OBJECTIVES)
    assert not set(CHAIN) & set(GRID) and not (set(CHAIN) | set(GRID)) & set(steps)
    for name, entry in OBJECTIVES.items():
        allowed = ("greedy", "beam") if name in steps else ("map", "marginals", "mean_field", "scores")
        assert entry.meta["prediction"] in allowed, name
        assert dataclasses.is_dataclass(entry.config) and entry.doc, name
    # the Shevchenko & Osokin objectives in the paper's order, then the search-aware ones
    assert [n for n in OBJECTIVES if n not in steps] == ["marginal_ce", "ssvm", "nll", "mean_field_ce", "gcrf_ce"]
    assert steps == ("seq_ce", "self_normalised_ce", "scheduled_sampling", "soft_scheduled_sampling", "beam_dl",
                     "beam_hinge")


# --------------------------------------------------------------------------------------------
# OBJECTIVES
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("name", CHAIN)
def test_chain_objective_loss_contract(name, per_position):
    obj = OBJECTIVES.build(name)
    assert isinstance(obj.per_position, bool)
    p, gold = _chain(1, per_position)
    loss = obj.loss(p, gold)
    assert loss.shape == (len(LENGTHS),) and loss.dtype == F64 and bool(torch.isfinite(loss).all())
    # every chain objective here is >= 0: log Z >= s(y*); -log q <= 0 for q <= 1; y* is an SSVM candidate
    assert bool((loss >= -1e-9).all())
    loss.sum().backward()
    for t in (p.unary, p.transition):
        assert t.grad is not None and bool(torch.isfinite(t.grad).all()) and t.grad.abs().sum() > 0
    assert bool((p.unary.grad[~p.mask] == 0).all())            # padding gets no gradient


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("name", CHAIN)
def test_chain_objective_predicts_by_its_declared_rule(name, per_position):
    obj = OBJECTIVES.build(name)
    p, _ = _chain(2, per_position)
    pred = obj.predict(p)
    assert pred.shape == p.mask.shape and pred.dtype == torch.long
    assert bool((pred[~p.mask] == 0).all()) and not pred.requires_grad
    assert bool(((pred >= 0) & (pred < p.n_labels)).all())
    u, w = p.unary.detach(), p.transition.detach()
    rule = OBJECTIVES[name].meta["prediction"]
    if rule == "map":
        want = brute.argmax(u, w, p.mask)[0]
    elif rule == "marginals":
        want = brute.marginals(u, w, p.mask).argmax(-1)
    else:
        want = mean_field.mean_field(u, w, p.mask).marginals.argmax(-1)
    assert torch.equal(pred, want * p.mask)


@pytest.mark.parametrize("name", GRID)
def test_grid_objective_contract(name):
    small = UNetConfig(depth=1, width=4)
    energy = GaussianCRF(3, 3, GCRFConfig(embedding_dim=2, unary=small, pairwise=small), seed=0).double()
    obj = OBJECTIVES.build(name, energy=energy)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 4, dtype=F64, generator=g)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[1, 3] = False
    y = torch.randint(0, 3, (2, 4, 4), generator=g) * mask
    p = energy.potentials(x, mask)
    loss = obj.loss(p, y)
    assert loss.shape == (2,) and bool(torch.isfinite(loss).all()) and bool((loss >= 0).all())
    loss.sum().backward()
    assert all(q.grad is not None and bool(torch.isfinite(q.grad).all()) for q in energy.parameters())
    pred = obj.predict(p)
    assert pred.shape == (2, 4, 4) and pred.dtype == torch.long
    assert torch.equal(pred, energy.scores(p).argmax(1))
    assert obj.per_position is True                            # GaussianCRF.loss averages over pixels


def test_objective_configs_are_strict():
    assert OBJECTIVES.build("mean_field_ce", {"n_iters": 3}).loss(*_chain(3)).shape == (3,)
    with pytest.raises(ValueError, match="unknown key"):
        OBJECTIVES.config("nll", {"n_iters": 3})
    with pytest.raises(ValueError, match="n_iters"):
        OBJECTIVES.config("mean_field_ce", {"n_iters": 0})


# --------------------------------------------------------------------------------------------
# SCALINGS
# --------------------------------------------------------------------------------------------

def _alpha(name):
    return getattr(SCALINGS.config(name), "alpha", 1.0)


def _potentials(kind, seed=5):
    if kind == "gcrf":
        return _gcrf(seed)
    p, _ = _chain(seed, per_position=kind == "per_position")
    return p.detach()


def _parts(p):
    return (p.unary, p.embeddings) if isinstance(p, GCRFPotentials) else (p.unary, p.transition)


@pytest.mark.parametrize("kind", ["shared", "per_position", "gcrf"])
@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_scaling_method_contract(name, kind):
    method = SCALINGS.build(name)
    assert method.initial_alpha == _alpha(name) > 0 and isinstance(method.selects_alpha, bool)
    p = _potentials(kind)
    B = p.unary.shape[0]
    a = 3.0
    q = method.transform(p, a)
    assert q.unary.shape == p.unary.shape and type(q) is type(p)
    if kind == "shared" and q.transition.dim() == 4:            # per-example factors expand W per position
        assert q.transition.shape == (B, p.unary.shape[1] - 1, *p.transition.shape)
    else:
        assert _parts(q)[1].shape == _parts(p)[1].shape
    assert q.mask is p.mask
    un, pn = q.unary_norm(), q.pairwise_norm()
    assert un.shape == pn.shape == (B,) and bool(torch.isfinite(un).all() & torch.isfinite(pn).all())
    reg = method.regulariser(p)
    assert reg.shape == (B,) and bool(torch.isfinite(reg).all()) and bool((reg >= 0).all())


@pytest.mark.parametrize("kind", ["shared", "per_position", "gcrf"])
def test_none_is_the_identity(kind):
    p = _potentials(kind)
    method = SCALINGS.build("none")
    assert method.transform(p, 5.0) is p and bool((method.regulariser(p) == 0).all())
    assert method.initial_alpha == 1.0 and not method.selects_alpha


@pytest.mark.parametrize("c", [1e-2, 0.3, 7.0])
@pytest.mark.parametrize("kind", ["shared", "per_position", "gcrf"])
@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_scaling_invariances(name, kind, c):
    """What each method's maths gives under U -> cU (and W -> cW), norms per example."""
    method = SCALINGS.build(name, {"eps": 0.0} if "eps" in {f.name for f in dataclasses.fields(SCALINGS[name].config)} else None)
    p = _potentials(kind)
    a = 2.0
    ref = method.transform(p, a)
    has_edge = p.mask.flatten(1).sum(1) > 1      # the ratio is undefined without a pairwise term
    if name == "offline":            # invariant to positive rescaling of U and of W
        for q in (p.rescale(c, 1.0), p.rescale(1.0, c)):
            for got, want in zip(_parts(method.transform(q, a)), _parts(ref)):
                torch.testing.assert_close(got, want, rtol=1e-10, atol=0)
        torch.testing.assert_close(ref.unary_norm(), torch.full_like(ref.unary_norm(), a))
        torch.testing.assert_close(ref.pairwise_norm()[has_edge], torch.ones(int(has_edge.sum()), dtype=F64))
    elif name in ("fixed", "online"):       # ratio times alpha; linear in U
        torch.testing.assert_close(ratio(ref)[has_edge], a * ratio(p)[has_edge])
        torch.testing.assert_close(method.transform(p.rescale(c, 1.0), a).unary, c * ref.unary)
    elif name == "temperature":              # the ratio is unchanged; both parts times alpha
        torch.testing.assert_close(ratio(ref)[has_edge], ratio(p)[has_edge])
        torch.testing.assert_close(ref.unary, a * p.unary)
        torch.testing.assert_close(ref.pairwise_norm(), a * p.pairwise_norm())   # (a GCRF's W = A A^T)
    elif name in ("none", "offline_reg"):    # the potentials are left as they are
        assert ref is p
    if name == "offline_reg":                # the regulariser is zero exactly at ratio == alpha, scale-free
        cfg = SCALINGS.config(name, {"eps": 0.0})
        at = p.rescale(cfg.alpha * p.pairwise_norm() / p.unary_norm(), 1.0)
        torch.testing.assert_close(method.regulariser(at)[has_edge], torch.zeros(int(has_edge.sum()), dtype=F64),
                                   rtol=0, atol=1e-20)
        torch.testing.assert_close(method.regulariser(p.rescale(c, c)), method.regulariser(p))
    elif name != "offline_reg":
        assert bool((method.regulariser(p) == 0).all())


@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_scaled_model_starts_at_the_methods_alpha(name):
    from components.energies.unary_pairwise import UnaryPairwiseCRF
    from tests.training.toy import FeatUnary
    model = ScaledModel(UnaryPairwiseCRF(FeatUnary(2, 3, seed=0), 3), name)
    assert float(model.alpha) == _alpha(name) and "alpha" in model.state_dict()
    assert model.method_name == name and isinstance(model.cfg, SCALINGS[name].config)
    assert model.method.selects_alpha == (name == "online")
