"""Objectives checked against brute-force enumeration of every labelling."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from components.energies.chain import ChainPotentials
from components.structures import enumerate as brute
from components.structures import mean_field
from components.training.registry import OBJECTIVES, objectives_for
from components.training.objectives import hamming_augmented_unary


def _loss(name, p, gold):
    return OBJECTIVES.build(name).loss(p, gold)


def predict(name, p):
    return OBJECTIVES.build(name).predict(p)


def _potentials(seed, B=3, N=4, L=3, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    unary = (torch.randn(B, N, L, generator=g, dtype=dtype) * scale).requires_grad_()
    trans = (torch.randn(L, L, generator=g, dtype=dtype) * scale).requires_grad_()
    lengths = torch.tensor([N, 1, max(N - 2, 1)])[:B]
    mask = torch.arange(N)[None] < lengths[:, None]
    gold = torch.randint(0, L, (B, N), generator=g) * mask
    return ChainPotentials(unary, trans, mask), gold


def _seq_score(u, W, y):
    return sum(u[t, y[t]] for t in range(len(y))) + sum(W[y[t - 1], y[t]] for t in range(1, len(y)))


@pytest.mark.parametrize("name", sorted(objectives_for("chain")))
def test_every_objective_is_finite_and_differentiable(name):
    p, gold = _potentials(0)
    loss = _loss(name, p, gold)
    assert loss.shape == (3,) and torch.isfinite(loss).all()
    loss.sum().backward()
    assert torch.isfinite(p.unary.grad).all() and p.unary.grad.abs().sum() > 0


def test_nll_and_marginal_ce_equal_brute_force():
    p, gold = _potentials(1)
    logz = brute.log_partition(p.unary, p.transition, p.mask)
    marg = brute.marginals(p.unary, p.transition, p.mask)
    for b in range(3):
        n = int(p.mask[b].sum())
        s = _seq_score(p.unary[b], p.transition, gold[b, :n].tolist())
        assert _loss("nll", p, gold)[b].item() == pytest.approx((logz[b] - s).item(), rel=1e-9, abs=1e-9)
        ce = -sum(torch.log(marg[b, t, gold[b, t]]) for t in range(n))
        assert _loss("marginal_ce", p, gold)[b].item() == pytest.approx(ce.item(), rel=1e-7, abs=1e-9)


def test_ssvm_equals_enumerated_loss_augmented_max():
    for seed in range(5):
        p, gold = _potentials(seed)
        loss = _loss("ssvm", p, gold)
        for b in range(3):
            n = int(p.mask[b].sum())
            g = gold[b, :n].tolist()
            s_gold = _seq_score(p.unary[b], p.transition, g)
            best = max(_seq_score(p.unary[b], p.transition, y) + sum(a != c for a, c in zip(y, g)) / n
                       for y in itertools.product(range(3), repeat=n))
            assert loss[b].item() == pytest.approx((best - s_gold).item(), abs=1e-9)
            assert loss[b].item() >= -1e-12


def test_ssvm_is_zero_when_gold_wins_by_the_margin():
    p, gold = _potentials(3)
    # make the gold labelling beat every other by more than the largest normalised Hamming loss (1)
    strong = p.unary.detach() + 20.0 * F.one_hot(gold, 3).to(p.unary.dtype)
    q = ChainPotentials(strong, p.transition.detach() * 0.1, p.mask)
    assert torch.all(_loss("ssvm", q, gold) == 0)
    aug = hamming_augmented_unary(q, gold)
    assert torch.allclose((aug - strong)[~q.mask], torch.zeros(()).double())


def test_prediction_rules():
    p, _ = _potentials(4)
    labels, _ = brute.argmax(p.unary.detach(), p.transition.detach(), p.mask)
    assert torch.equal(predict("nll", p), labels * p.mask)
    marg = brute.marginals(p.unary.detach(), p.transition.detach(), p.mask)
    assert torch.equal(predict("marginal_ce", p), marg.argmax(-1) * p.mask)
    assert torch.equal(predict("ssvm", p), labels * p.mask)
    q = mean_field.mean_field(p.unary.detach(), p.transition.detach(), p.mask).marginals     # default iterations
    assert torch.equal(predict("mean_field_ce", p), q.argmax(-1) * p.mask)
