"""Gradient-descent inference (components.inference.gradient_descent) against exact Viterbi and the
naive per-run loop (components.inference.oracle_bench).

Yardsticks: the relaxed energy is multilinear in the rows of q, so its minimum over the product of
simplices is attained at a vertex, i.e. equals the Viterbi energy; hence both the relaxed and the
discretised energy of every GD output are >= the Viterbi energy. Started from ``s * onehot(viterbi)``
the softmax gradient is O(exp(-s)), so the logits cannot move enough to change any label within
the paper's grid (lr <= 1e4, N <= 1000): the output stays the Viterbi labelling.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.energies.chain import FixedPotentials
from components.inference.gd_config import GDConfig
from components.inference.gradient_descent import (GDInferenceConfig, GradientDescent, gradient_descent, initial_logits,
                                                   relaxed_energy)
from components.bench.oracle import naive_oracle_grid
from components.structures import linear_chain as lc

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _chain(seed: int, B: int, N: int, L: int, *, per_position=False, dtype=torch.float64, scale=2.0,
           lengths=None):
    g = torch.Generator().manual_seed(seed)
    unary = (torch.randn(B, N, L, generator=g) * scale).to(dtype)
    shape = (B, N - 1, L, L) if per_position else (L, L)
    trans = torch.randn(shape, generator=g).to(dtype)
    if lengths is None:
        lengths = torch.randint(1, N + 1, (B,), generator=g)
        lengths[0] = N
    mask = torch.arange(N)[None, :] < torch.as_tensor(lengths)[:, None]
    return unary, trans, mask


@st.composite
def chains(draw):
    B = draw(st.integers(1, 3))
    N = draw(st.integers(1, 5))
    L = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, N), min_size=B, max_size=B))
    lengths[0] = N
    per = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return _chain(seed, B, N, L, per_position=per, lengths=lengths)


def test_layout_and_relaxed_energy_matches_score():
    unary, trans, mask = _chain(0, 3, 6, 5)
    cfg = GDConfig(lrs=(100.0, 1.0), checkpoints=(0, 2, 7), restarts=2)
    res = gradient_descent(unary, trans, mask, cfg, generator=torch.Generator().manual_seed(1), keep_relaxed=True)
    C, R, K, B, N, L = 3, 2, 2, 3, 6, 5
    assert res.labels.shape == (C, R, K, B, N) and res.labels.dtype == torch.long
    assert res.energy.shape == res.relaxed_energy.shape == (C, R, K, B)
    assert res.relaxed.shape == (R, K, B, N, L) and res.restarts == R
    assert res.checkpoints == (0, 2, 7) and res.lrs == (100.0, 1.0)
    assert torch.all(res.labels[..., ~mask] == 0)
    # discretised energies are exactly -score of the labels
    for c in range(C):
        for r in range(R):
            for k in range(K):
                assert torch.equal(res.energy[c, r, k], -lc.score(unary, trans, mask, res.labels[c, r, k]))
    # the final relaxed output's energy is the last relaxed energy, and it argmaxes to the labels
    for r in range(R):
        for k in range(K):
            q = res.relaxed[r, k]
            assert torch.allclose(res.relaxed_energy[-1, r, k], -lc.score(unary, trans, mask, q))
            assert torch.equal(torch.where(mask, q.argmax(-1), 0), res.labels[-1, r, k])
    q = res.relaxed.reshape(R * K, B, N, L)
    assert torch.allclose(relaxed_energy(unary, trans, mask, q), res.relaxed_energy[-1].reshape(R * K, B))


def test_random_init_shared_across_learning_rates_and_checkpoint_zero_is_init():
    unary, trans, mask = _chain(1, 2, 4, 3)
    cfg = GDConfig(lrs=(1e3, 1.0, 0.1), checkpoints=(0, 3), restarts=3)
    z0 = initial_logits(unary, mask, cfg, None, torch.Generator().manual_seed(5))
    res = gradient_descent(unary, trans, mask, cfg, generator=torch.Generator().manual_seed(5))
    for r in range(3):
        want = torch.where(mask, z0[r].argmax(-1), 0)
        for k in range(3):
            assert torch.equal(res.labels[0, r, k], want)
    q0 = torch.softmax(z0, -1)
    assert torch.allclose(res.relaxed_energy[0, :, 0], relaxed_energy(unary, trans, mask, q0))


def test_warm_start_is_restart_zero_and_other_restarts_are_random():
    unary, trans, mask = _chain(2, 2, 5, 4)
    warm = torch.randn(2, 5, 4, dtype=torch.float64)
    cfg = GDConfig(lrs=(1.0,), checkpoints=(0,), restarts=3, init_std=1.0)
    z0 = initial_logits(unary, mask, cfg, warm, torch.Generator().manual_seed(0))
    assert torch.equal(z0[0][mask], warm[mask])
    assert not torch.equal(z0[1], z0[2]) and not torch.equal(z0[1][mask], warm[mask])
    with pytest.raises(ValueError, match="init_logits must have shape"):
        gradient_descent(unary, trans, mask, cfg, init_logits=warm[:, :4])


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_started_at_the_optimum_gd_stays_there(per_position, dtype):
    unary, trans, mask = _chain(3, 4, 7, 6, per_position=per_position, dtype=dtype)
    vit, score = lc.viterbi(unary, trans, mask)
    warm = 50.0 * F.one_hot(vit, 6).to(dtype)
    cfg = GDConfig(checkpoints=(0, 5, 50, 200))                 # the paper's nine learning rates
    res = gradient_descent(unary, trans, mask, cfg, init_logits=warm)
    assert torch.equal(res.labels, torch.where(mask, vit, 0).expand_as(res.labels))
    assert torch.equal(res.energy, (-score).expand_as(res.energy))
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    assert torch.allclose(res.relaxed_energy, (-score).expand_as(res.relaxed_energy), rtol=tol, atol=tol)


@SETTINGS
@given(chains(), st.sampled_from([torch.float32, torch.float64]))
def test_energies_never_below_viterbi(chain, dtype):
    unary, trans, mask = (chain[0].to(dtype), chain[1].to(dtype), chain[2])
    _, score = lc.viterbi(unary, trans, mask)
    cfg = GDConfig(lrs=(1e4, 100.0, 1.0), checkpoints=(0, 1, 5, 30), restarts=2)
    res = gradient_descent(unary, trans, mask, cfg, generator=torch.Generator().manual_seed(0))
    tol = 1e-4 * (1 + score.abs()) if dtype == torch.float32 else 1e-9 * (1 + score.abs())
    assert torch.all(res.energy >= -score - tol)
    assert torch.all(res.relaxed_energy >= -score - tol)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.integers(1, 2))
def test_batched_equals_naive_loop(chain, restarts):
    unary, trans, mask = chain
    cfg = GDConfig(lrs=(1e4, 50.0, 1.0), checkpoints=(0, 2, 6), restarts=restarts)
    z0 = initial_logits(unary, mask, cfg, None, torch.Generator().manual_seed(3))
    fast = gradient_descent(unary, trans, mask, cfg, init_logits=z0)
    slow = naive_oracle_grid(unary, trans, mask, cfg, init_logits=z0)
    assert torch.equal(fast.labels, slow.labels)
    assert torch.allclose(fast.energy, slow.energy, rtol=1e-12, atol=1e-12)
    assert torch.allclose(fast.relaxed_energy, slow.relaxed_energy, rtol=1e-9, atol=1e-9)


def test_energy_decreases_on_average_for_a_sane_learning_rate():
    unary, trans, mask = _chain(4, 16, 12, 8, dtype=torch.float32)
    cfg = GDConfig(lrs=(1.0,), checkpoints=(0, 5, 20, 50, 100))
    res = gradient_descent(unary, trans, mask, cfg, generator=torch.Generator().manual_seed(0))
    mean = res.relaxed_energy[:, 0, 0].mean(-1)
    assert torch.all(mean[1:] < mean[:-1])
    assert res.energy[-1, 0, 0].mean() < res.energy[0, 0, 0].mean()
    _, score = lc.viterbi(unary, trans, mask)
    # and it gets most of the way from the random start to the optimum
    gap0 = (res.energy[0, 0, 0] + score).mean()
    gap = (res.energy[-1, 0, 0] + score).mean()
    assert gap < 0.25 * gap0


@pytest.mark.parametrize("per_position", [False, True])
def test_finite_with_the_largest_learning_rate(per_position):
    unary, trans, mask = _chain(5, 4, 10, 17, per_position=per_position, dtype=torch.float32, scale=5.0)
    steps = []
    cfg = GDConfig(lrs=(1e4,), checkpoints=(5, 100, 1000))
    res = gradient_descent(unary, trans, mask, cfg, generator=torch.Generator().manual_seed(0),
                           on_step=lambda i, n: steps.append((i, n)), keep_relaxed=True)
    assert steps[0] == (1, 1000) and steps[-1] == (1000, 1000) and len(steps) == 1000
    for x in (res.energy, res.relaxed_energy, res.relaxed):
        assert torch.isfinite(x).all()
    assert torch.allclose(res.relaxed.sum(-1), mask.float())


def test_length_one_and_config_validation():
    unary, trans, mask = _chain(6, 2, 1, 3)
    res = gradient_descent(unary, trans, mask, GDConfig(lrs=(10.0,), checkpoints=(50,)),
                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(res.labels[0, 0, 0, :, 0], unary[:, 0].argmax(-1))       # unary-only: GD finds it
    for bad in (dict(lrs=()), dict(lrs=(-1.0,)), dict(checkpoints=(5, 5)),
                dict(checkpoints=(10, 5)), dict(momentum=1.0), dict(restarts=0)):
        with pytest.raises(ValueError):                  # GDConfig rejects these when it is built
            gradient_descent(unary, trans, mask, GDConfig(**bad))
    with pytest.raises(ValueError, match="unary"):
        gradient_descent(unary[0], trans, mask)


class _FixedLogits(torch.nn.Module):
    """A stand-in inference network that returns given logits (the warm start)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, words, mask, chars):
        return self.logits


class _Batch:
    def __init__(self, mask):
        self.words, self.mask, self.chars = None, mask, None


class _NoPotentials:
    def energy(self, batch, y):
        return torch.zeros(1)


def test_inference_protocol_with_and_without_warm_start():
    from components.energies.chain import ChainPotentials

    unary, trans, mask = _chain(7, 3, 6, 5)
    p = ChainPotentials(unary, trans, mask)
    vit, score = lc.viterbi(unary, trans, mask)
    method = GradientDescent(GDInferenceConfig(lr=10.0, iterations=30, init_std=1.0), seed=0)
    out = method(FixedPotentials(p), None)
    assert out.labels.shape == (3, 6) and out.relaxed.shape == (3, 6, 5) and out.energy.shape == (3,)
    assert torch.equal(out.energy, -lc.score(unary, trans, mask, out.labels))
    assert torch.all(out.energy >= -score - 1e-9)
    assert set(out.stats) == {"relaxed_energy", "lr", "iterations"}
    warm = GradientDescent(GDInferenceConfig(lr=1e4, iterations=10), warm_start=_FixedLogits(50.0 * F.one_hot(vit, 5).double()))
    out = warm(FixedPotentials(p), _Batch(mask))
    assert torch.equal(out.labels, vit) and torch.equal(out.energy, -score)
    with pytest.raises(TypeError, match="GradientDescent needs a ChainEnergy"):
        method(_NoPotentials(), None)


def test_evaluates_like_viterbi():
    from components.data.batching import TaggingDataset
    from components.data.types import TaggedSentence
    from components.data.vocab import build_label_vocab, build_vocab
    from components.energies.registry import ENERGIES
    from components.inference.evaluate import evaluate_inference
    from components.inference.exact import Viterbi
    from components.models.encoders import BLSTMConfig

    sents = [TaggedSentence(("a", "b", "c"), ("X", "Y", "X")), TaggedSentence(("b",), ("Y",)),
             TaggedSentence(("c", "a"), ("X", "X"))]
    vocabs = {"word": build_vocab(w for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    ds = TaggingDataset(sents, vocabs)
    torch.manual_seed(0)
    energy = ENERGIES.build("blstm_crf", BLSTMConfig(hidden=4), n_words=len(vocabs["word"]),
                            n_chars=len(vocabs["char"]), n_labels=2).double()
    with torch.no_grad():
        torch.nn.init.normal_(energy.transition)
    exact = evaluate_inference(energy, Viterbi(), ds, vocabs["label"], "accuracy", batch_size=2)
    gd = evaluate_inference(energy, GradientDescent(GDInferenceConfig(lr=10.0, iterations=20)), ds, vocabs["label"],
                            "accuracy", batch_size=2)
    assert gd["energy_pred"] >= exact["energy_pred"] - 1e-9 and 0 <= gd["accuracy"] <= 100
