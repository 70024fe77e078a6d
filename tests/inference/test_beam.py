"""Decoders of step scorers (components.inference.beam) on tiny real seq2seq taggers in float64.

What each is checked against:

- the soft beam (Goyal et al. 2018 Alg. 3) at alpha = 1e4 against the hard beam (every item's
  labels and score), on instances where no two of the k + 1 best candidates at a step are closer
  than GAP (then the peaked softmax weights everything else by exp(-1e4 GAP^2) < 1e-15);
- the hard beam of width k >= V^T against brute-force enumeration of every label sequence, each
  scored by ``sequence_scores`` (teacher forcing), per sentence of its own length;
- greedy against the beam of width 1; the alpha-soft argmax feed against the greedy feed;
- ``continuous_top_k`` (Alg. 2) gradients against finite differences (``gradcheck``);
- the INFERENCE entries against the search functions (energy == -score), masked positions 0,
  batch invariance (each sentence decoded alone, at its own length), and bad input: a ValueError
  naming it (empty sentence, k < 1, alpha <= 0, label out of range) or a TypeError naming what a
  non-StepScorer lacks.
"""
from __future__ import annotations

import itertools
import math
import types

import pytest
import torch

from components.energies.chain import FixedPotentials
from components.energies.chain import ChainPotentials
from components.inference.base import InferenceResult
from components.inference.registry import INFERENCE
from components.inference.beam import (BeamConfig, BeamState, SoftBeamConfig, StepScorer, beam_search,
                                       continuous_top_k, greedy, peaked_softmax, sequence_scores, soft_beam_search,
                                       unroll)
from tests.step_scorers import float64_default, tiny_batch, tiny_tagger, well_separated  # noqa: F401 (fixture)

BIG_ALPHA = 1e4


@pytest.fixture(autouse=True)
def _float64(float64_default):
    yield


def _row(batch, b: int):
    """Sentence b alone, cut to its own length."""
    n = int(batch.mask[b].sum())
    return types.SimpleNamespace(words=batch.words[b:b + 1, :n], mask=batch.mask[b:b + 1, :n],
                                 tags=batch.tags[b:b + 1, :n])


# -- the soft beam at large alpha is the hard beam ----------------------------------------------
@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_soft_beam_at_large_alpha_is_the_hard_beam(normalisation, k):
    for scorer, batch in well_separated(normalisation, k):
        with torch.no_grad():
            hard = beam_search(scorer, batch, k)
            soft = soft_beam_search(scorer, batch, k, BIG_ALPHA)
        assert torch.equal(soft.beam_labels, hard.beam_labels)
        torch.testing.assert_close(soft.beam_scores, hard.beam_scores, rtol=0, atol=1e-6)
        assert torch.equal(soft.labels, hard.labels)
        torch.testing.assert_close(soft.score, hard.score, rtol=0, atol=1e-6)
        # and its relaxed max score is the best item's score
        torch.testing.assert_close(soft.max_score, hard.score, rtol=0, atol=1e-6)


def test_soft_beam_at_small_alpha_is_not_the_hard_beam():
    """The comparison above is not vacuous: a smooth relaxation gives other scores."""
    scorer, batch = well_separated("local", 2, n=1)[0]
    with torch.no_grad():
        hard = beam_search(scorer, batch, 2)
        soft = soft_beam_search(scorer, batch, 2, 0.05)
    assert (soft.beam_scores - hard.beam_scores).abs().max() > 1e-3


# -- the hard beam against enumeration ----------------------------------------------------------
@pytest.mark.parametrize("V,T", [(2, 3), (3, 2)])
@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("seed", range(3))
def test_wide_beam_is_exact_search(V, T, normalisation, seed):
    k = V ** T
    lengths = [T, 1, max(T - 1, 1)]
    scorer, batch = tiny_tagger(seed, normalisation, V=V), tiny_batch(seed, B=3, T=T, V=V, lengths=lengths)
    every = torch.tensor(list(itertools.product(range(V), repeat=T)))              # [V^T, T]
    with torch.no_grad():
        table = torch.stack([sequence_scores(scorer, batch, y.expand(3, T) * batch.mask) for y in every], 1)
        res = beam_search(scorer, batch, k)
    for b, n in enumerate(lengths):
        own = (every[:, n:] == 0).all(1)                  # the V^n sequences of sentence b (0-padded)
        ys, scores = every[own], table[b, own]
        best = int(scores.argmax())
        assert torch.equal(res.labels[b], ys[best])
        torch.testing.assert_close(res.score[b], scores[best], rtol=0, atol=1e-9)
        # the beam holds every sequence of the sentence, best first
        finite = res.beam_scores[b].isfinite()
        assert int(finite.sum()) == V ** n
        torch.testing.assert_close(res.beam_scores[b, finite], scores.sort(descending=True).values, rtol=0, atol=1e-9)
        found = {tuple(y.tolist()) for y in res.beam_labels[b, finite]}
        assert found == {tuple(y.tolist()) for y in ys}


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(2))
def test_beam_scores_are_sequence_scores(normalisation, k, seed):
    scorer, batch = tiny_tagger(seed, normalisation), tiny_batch(seed, B=4, T=5)
    with torch.no_grad():
        res = beam_search(scorer, batch, k)
        torch.testing.assert_close(res.score, sequence_scores(scorer, batch, res.labels), rtol=0, atol=1e-9)
        assert (res.beam_scores[:, :-1] >= res.beam_scores[:, 1:]).all()          # best first
        for i in range(k):
            finite = res.beam_scores[:, i].isfinite()
            seq = sequence_scores(scorer, batch, res.beam_labels[:, i])
            torch.testing.assert_close(res.beam_scores[finite, i], seq[finite], rtol=0, atol=1e-9)


# -- greedy ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("seed", range(4))
def test_greedy_is_beam_of_width_one(normalisation, seed):
    scorer, batch = tiny_tagger(seed, normalisation), tiny_batch(seed, B=4, T=5)
    with torch.no_grad():
        g, b = greedy(scorer, batch), beam_search(scorer, batch, 1)
        assert torch.equal(g.labels, b.labels)
        assert torch.equal(g.beam_labels, b.beam_labels)
        torch.testing.assert_close(g.score, b.score, rtol=0, atol=1e-12)
        torch.testing.assert_close(g.score, sequence_scores(scorer, batch, g.labels), rtol=0, atol=1e-9)


@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_soft_argmax_feed_at_large_alpha_is_the_greedy_feed(normalisation):
    for scorer, batch in well_separated(normalisation, 1):
        with torch.no_grad():
            hard = unroll(scorer, batch, lambda t, s: scorer.embed_ids(s.argmax(-1)))
            soft = unroll(scorer, batch, lambda t, s: scorer.embed(peaked_softmax(s, BIG_ALPHA)))
            dec = greedy(scorer, batch)
        m = batch.mask
        torch.testing.assert_close(soft[m], hard[m], rtol=0, atol=1e-9)
        assert torch.equal(hard.argmax(-1) * m, dec.labels)
        torch.testing.assert_close((hard.max(-1).values * m).sum(1), dec.score, rtol=0, atol=1e-9)


# -- continuous top-k (Alg. 2) ------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_continuous_top_k_gradcheck(k, alpha):
    scores = torch.randn(2, 6, generator=torch.Generator().manual_seed(k), dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda s: continuous_top_k(s, k, alpha), (scores,))


def test_continuous_top_k_values():
    scores = torch.tensor([[0.3, 2.0, -1.0, 1.2]])
    p, m = continuous_top_k(scores, 2, BIG_ALPHA)
    torch.testing.assert_close(m, torch.tensor([[2.0, 1.2]]))
    torch.testing.assert_close(p, torch.tensor([[[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]]))
    p, _ = continuous_top_k(scores, 3, 1.0)
    torch.testing.assert_close(p.sum(-1), torch.ones(1, 3))
    torch.testing.assert_close(p[0, 0], torch.softmax(-(scores[0] - 2.0) ** 2, -1))


# -- the INFERENCE entries ------------------------------------------------------------------------
@pytest.mark.parametrize("name,cfg,search", [
    ("greedy", {}, lambda s, b: greedy(s, b)),
    ("beam", {"k": 3}, lambda s, b: beam_search(s, b, 3)),
    ("soft_beam", {"k": 2, "alpha": 1.5}, lambda s, b: soft_beam_search(s, b, 2, 1.5)),
])
def test_decoders_in_inference(name, cfg, search):
    assert INFERENCE[name].meta["needs"] == "StepScorer"
    method = INFERENCE.build(name, cfg)
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=4, T=5)
    assert isinstance(scorer, StepScorer)
    with torch.no_grad():
        res, ref = method(scorer, batch), search(scorer, batch)
    assert isinstance(res, InferenceResult)
    assert res.relaxed is None
    assert torch.equal(res.labels, ref.labels)
    assert torch.equal(res.energy, -ref.score)
    assert not (res.labels * ~batch.mask).any()


def test_soft_beam_config_defaults_build():
    cfg = INFERENCE.config("soft_beam", {"k": 4})
    assert cfg == SoftBeamConfig(k=4, alpha=1.0)
    assert INFERENCE.config("beam", None) == BeamConfig(k=3)


@pytest.mark.parametrize("name,cfg", [("greedy", {}), ("beam", {"k": 2}), ("soft_beam", {"k": 2})])
def test_decoders_reject_non_step_scorers(name, cfg):
    method = INFERENCE.build(name, cfg)
    batch = tiny_batch(0)
    with pytest.raises(TypeError, match=rf"{type(method).__name__} needs a StepScorer; got object, "
                                        r"which has no start\W+step\b"):
        method(object(), batch)
    p = ChainPotentials(torch.zeros(3, 4, 3), torch.zeros(3, 3), batch.mask)
    with pytest.raises(TypeError, match=r"needs a StepScorer; got FixedPotentials, which has no start\W+step\b"):
        method(FixedPotentials(p), batch)


# -- masks and batch invariance -------------------------------------------------------------------
SEARCHES = {            # (scorer, batch, cost [B, T, V]) -> result; the soft beam also relaxes the cost
    "greedy": lambda s, b, c: greedy(s, b),
    "beam": lambda s, b, c: beam_search(s, b, 3),
    "soft_beam": lambda s, b, c: soft_beam_search(s, b, 3, 1.0, cost=c),
}


@pytest.mark.parametrize("search", sorted(SEARCHES))
@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_masks_and_batch_invariance(search, normalisation):
    scorer, batch = tiny_tagger(1, normalisation), tiny_batch(1, B=4, T=5, lengths=[5, 1, 3, 4])
    cost = torch.rand(4, 5, 3, generator=torch.Generator().manual_seed(7)) * batch.mask[..., None]
    run = SEARCHES[search]
    with torch.no_grad():
        together = run(scorer, batch, cost)
        assert not (together.labels * ~batch.mask).any()
        assert not (together.beam_labels * ~batch.mask[:, None]).any()
        for b in range(4):
            n = int(batch.mask[b].sum())
            alone = run(scorer, _row(batch, b), cost[b:b + 1, :n])
            assert torch.equal(alone.labels[0], together.labels[b, :n])
            assert torch.equal(alone.beam_labels[0], together.beam_labels[b, :, :n])
            torch.testing.assert_close(alone.score[0], together.score[b], rtol=0, atol=1e-10)
            torch.testing.assert_close(alone.beam_scores[0], together.beam_scores[b], rtol=0, atol=1e-10)
            if search == "soft_beam":
                for field in ("loss", "beam_costs", "max_score"):
                    torch.testing.assert_close(getattr(alone, field)[0], getattr(together, field)[b], rtol=0, atol=1e-10)


# -- bad input ------------------------------------------------------------------------------------
def _empty_row_batch():
    b = tiny_batch(0, B=3, T=4, lengths=[4, 2, 3])
    b.mask[1] = False
    b.words[1] = 0
    b.tags[1] = 0
    return b


DECODES = {
    "greedy": lambda s, b: greedy(s, b),
    "beam": lambda s, b: beam_search(s, b, 2),
    "soft_beam": lambda s, b: soft_beam_search(s, b, 2, 1.0),
    "sequence_scores": lambda s, b: sequence_scores(s, b, b.tags),
    "unroll": lambda s, b: unroll(s, b, lambda t, sc: s.embed_ids(sc.argmax(-1))),
}


@pytest.mark.parametrize("what", sorted(DECODES))
def test_empty_sentence_is_a_value_error(what):
    with pytest.raises(ValueError, match=r"empty sentence in the batch \(rows \[1\]\)"):
        DECODES[what](tiny_tagger(0), _empty_row_batch())


class _NoSteps:
    """A step scorer that must never be stepped: the searches check the mask first."""
    normalisation = "local"
    n_labels = 3

    def start(self, batch, k):
        return BeamState((torch.zeros(batch.mask.shape[0], k, 1),)), batch.mask

    def step(self, state, prev_embedding):
        raise AssertionError("stepped a batch without steps")

    def embed(self, weights):
        raise AssertionError("embedded for a batch without steps")

    def embed_ids(self, ids):
        raise AssertionError("embedded for a batch without steps")


def _no_steps_batch():
    return types.SimpleNamespace(words=torch.zeros(2, 0, dtype=torch.long), mask=torch.zeros(2, 0, dtype=torch.bool),
                                 tags=torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize("what", sorted(DECODES))
def test_batch_without_steps_is_a_value_error(what):
    with pytest.raises(ValueError, match=r"empty sentence"):
        DECODES[what](_NoSteps(), _no_steps_batch())


@pytest.mark.parametrize("what", sorted(DECODES))
def test_tagger_batch_without_steps_is_a_value_error(what):
    with pytest.raises(ValueError, match=r"empty sentence"):
        DECODES[what](tiny_tagger(0), _no_steps_batch())


@pytest.mark.parametrize("bad", [3, 7, -1])
def test_label_out_of_range_is_a_value_error(bad):
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 2, 3])
    labels = batch.tags.clone()
    labels[2, 1] = bad
    with pytest.raises(ValueError, match=rf"label id {bad} is out of range \[0, 3\)"):
        sequence_scores(scorer, batch, labels)


def test_labels_at_masked_positions_are_not_checked():
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 2, 3])
    labels = batch.tags.clone()
    labels[1, 3] = 0                    # padding: any in-range id is ignored
    with torch.no_grad():
        torch.testing.assert_close(sequence_scores(scorer, batch, labels), sequence_scores(scorer, batch, batch.tags))


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_beam_size_below_one_is_a_value_error(k):
    scorer, batch = tiny_tagger(0), tiny_batch(0)
    for make in (lambda: beam_search(scorer, batch, k), lambda: soft_beam_search(scorer, batch, k, 1.0),
                 lambda: BeamConfig(k=k), lambda: SoftBeamConfig(k=k, alpha=1.0)):
        with pytest.raises(ValueError, match=r"beam size k must be an integer >= 1"):
            make()


@pytest.mark.parametrize("alpha", [0.0, -1.0, math.nan, math.inf])
def test_alpha_not_positive_is_a_value_error(alpha):
    scorer, batch = tiny_tagger(0), tiny_batch(0)
    for make in (lambda: soft_beam_search(scorer, batch, 2, alpha), lambda: SoftBeamConfig(k=2, alpha=alpha)):
        with pytest.raises(ValueError, match=r"alpha \(the peaked-softmax temperature\) must be a finite number > 0"):
            make()


def test_soft_beam_cost_shape_is_checked():
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4)
    with pytest.raises(ValueError, match=r"cost has shape"):
        soft_beam_search(scorer, batch, 2, 1.0, cost=torch.zeros(3, 5, 3))
    with pytest.raises(ValueError, match=r"cost has 4 labels, the scorer 3"):
        soft_beam_search(scorer, batch, 2, 1.0, cost=torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match=r"augment=True needs a cost"):
        soft_beam_search(scorer, batch, 2, 1.0, augment=True)
