"""Search-aware step objectives (components.training.search_aware) on tiny real seq2seq taggers in
float64.

What each is checked against:

- scheduled sampling (hard and alpha-soft) with gold probability 1 against teacher-forced
  cross-entropy; the alpha-soft version at alpha = 1e4 with eps = 0 against the hard greedy feed;
  ``gold_probability`` against the thesis's inverse sigmoid of epochs k / (k + exp(i / k)) written out;
- the relaxed direct loss G~_DL at alpha = 1e4 against the Hamming cost (``o_cost`` for a wrong O)
  of the hard beam's best sequence, on instances without near-ties (see tests/inference/test_beam.py);
  its gradients against finite differences (``gradcheck``);
- the relaxed hinge: >= 0, exactly 0 when the gold sequence wins by far more than the cost, > 0
  when a wrong label wins;
- ``hamming_costs`` against its definition; bad input against a ValueError naming it.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from components.inference.beam import beam_search, sequence_scores, soft_beam_search
from components.models.seq2seq import Seq2SeqTagger
from tests.step_scorers import float64_default, tiny_batch, tiny_tagger, well_separated  # noqa: F401 (fixture)
from components.training.registry import OBJECTIVES, objectives_for
from components.training.search_aware import (AlphaSchedule, BeamDirectLoss, BeamHinge, BeamObjectiveConfig,
                                              ScheduledSampling, ScheduledSamplingConfig, SeqCE, SeqCEConfig,
                                              SoftScheduledSamplingConfig, gold_probability, hamming_costs)
from components.inference.beam import unroll

V = 3
BIG = AlphaSchedule(init=1e4, max=1e4)


@pytest.fixture(autouse=True)
def _float64(float64_default):
    yield


def _at_epoch(obj, epoch: int):
    obj.epoch = epoch
    return obj


# -- the registry ---------------------------------------------------------------------------------
def test_step_objectives_are_registered():
    assert set(objectives_for("steps")) == {"seq_ce", "self_normalised_ce", "scheduled_sampling",
                                            "soft_scheduled_sampling", "beam_dl", "beam_hinge"}
    scorer, batch = tiny_tagger(0), tiny_batch(0)
    for name in objectives_for("steps"):
        obj = OBJECTIVES.build(name, None, updates_per_epoch=2, seed=0, o_id=0)
        loss = obj(scorer, batch)
        assert loss.dim() == 0 and torch.isfinite(loss)
        loss.backward()
        assert scorer.out.bias.grad is not None and torch.isfinite(scorer.out.bias.grad).all()
        scorer.zero_grad()


# -- scheduled sampling ---------------------------------------------------------------------------
@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("feed", ["greedy", "sample"])
@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_scheduled_sampling_in_epoch_one_is_teacher_forcing(soft, feed, normalisation):
    cfg = SoftScheduledSamplingConfig(feed=feed, decay_k=0) if soft else ScheduledSamplingConfig(feed=feed, decay_k=0)
    ss = _at_epoch(ScheduledSampling(cfg, soft=soft), 1)
    assert ss.eps == 1.0
    for seed in range(2):
        scorer, batch = tiny_tagger(seed, normalisation), tiny_batch(seed, B=4, T=5)
        ce = SeqCE()
        torch.testing.assert_close(ss.loss(scorer, batch), ce.loss(scorer, batch), rtol=0, atol=1e-12)
        torch.testing.assert_close(ss(scorer, batch), ce(scorer, batch), rtol=0, atol=1e-12)


def test_seq_ce_is_the_token_cross_entropy():
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 1, 2])
    with torch.no_grad():
        per = SeqCE().loss(scorer, batch)
        torch.testing.assert_close(per, -sequence_scores(scorer, batch, batch.tags))    # local: -log p(y*)
        torch.testing.assert_close(SeqCE()(scorer, batch), per.sum() / 7)


@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_soft_scheduled_sampling_at_large_alpha_is_hard_scheduled_sampling(normalisation):
    """eps = 0 (decay_k 0, epoch 2): both feed the model's choice at every step; the alpha-soft
    argmax embedding at alpha = 1e4 is the argmax's embedding."""
    for scorer, batch in well_separated(normalisation, 1):
        hard = _at_epoch(ScheduledSampling(ScheduledSamplingConfig(feed="greedy", decay_k=0), soft=False), 2)
        soft = _at_epoch(ScheduledSampling(SoftScheduledSamplingConfig(feed="greedy", decay_k=0, alpha=BIG),
                                           soft=True), 2)
        lh, ls = hard.loss(scorer, batch), soft.loss(scorer, batch)
        assert hard.eps == soft.eps == 0.0 and soft.alpha == 1e4
        torch.testing.assert_close(ls, lh, rtol=0, atol=1e-9)
        # and it is not teacher forcing (the comparison is not vacuous)
        assert (lh - SeqCE().loss(scorer, batch)).abs().max() > 1e-3


def test_gold_probability_is_the_thesis_inverse_sigmoid_of_epochs():
    """Thesis Sec. 3.3: ground truth for the first epoch, then eps = k / (k + exp(i / k)) with i the
    epoch's 0-based index (epoch e: i = e - 1), written out here; k = 0 is "always" (Table 3.2)."""
    assert gold_probability(1, 10.0) == gold_probability(0, 10.0) == 1.0
    for k in (1.0, 10.0, 100.0):
        for epoch in (2, 3, 5, 20, 50):
            assert gold_probability(epoch, k) == pytest.approx(k / (k + math.exp((epoch - 1) / k)), rel=1e-12)
        values = [gold_probability(e, k) for e in range(1, 200)]
        assert all(a >= b for a, b in zip(values, values[1:]))           # never rises
    # Table 3.2's schedules: k = 100 stays near teacher forcing, k = 1 is model-fed within epochs
    assert gold_probability(2, 100.0) == pytest.approx(100 / (100 + math.exp(0.01)))
    assert gold_probability(20, 100.0) > 0.98 and gold_probability(2, 1.0) == pytest.approx(1 / (1 + math.e))
    assert gold_probability(6, 1.0) < 0.01
    assert gold_probability(10 ** 6, 1.0) == 0.0                          # exp overflow guarded
    for epoch in (2, 3, 10):
        assert gold_probability(epoch, 0) == 0.0


def test_scheduled_sampling_eps_is_constant_within_an_epoch():
    """eps follows the epoch, not the number of updates (before: k counted updates, so k = 10, 1
    and "always" were all model-fed within two epochs)."""
    k = 4.0
    ss = ScheduledSampling(ScheduledSamplingConfig(decay_k=k), soft=False)
    scorer, batch = tiny_tagger(0), tiny_batch(0)
    ss.epoch = 2
    for _ in range(5):
        ss(scorer, batch)                                    # updates in epoch 2
        assert ss.eps == pytest.approx(gold_probability(2, k))
    with torch.no_grad():                                    # evaluation: teacher forcing
        torch.testing.assert_close(ss.loss(scorer, batch), SeqCE().loss(scorer, batch))
    ss.epoch = 3
    ss(scorer, batch)
    assert ss.eps == pytest.approx(gold_probability(3, k)) and ss.eps < gold_probability(2, k)


def test_alpha_schedule():
    assert [AlphaSchedule(init=2.0).at(e) for e in (1, 2, 5)] == [2.0, 2.0, 2.0]
    a = AlphaSchedule(init=1.0, anneal=2.0, max=10.0)
    assert [a.at(e) for e in (1, 2, 3, 4, 5, 6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert a.annealed and not AlphaSchedule().annealed


# -- Hamming costs and the relaxed direct loss ----------------------------------------------------
@pytest.mark.parametrize("o_id", [-1, 0, 2])
def test_hamming_costs(o_id):
    batch = tiny_batch(0, B=3, T=4, lengths=[4, 1, 3])
    d = hamming_costs(batch.tags, batch.mask, V, o_id=o_id, o_cost=2.5)
    assert d.shape == (3, 4, V)
    for b in range(3):
        for t in range(4):
            for v in range(V):
                if not batch.mask[b, t]:
                    want = 0.0
                elif v == batch.tags[b, t]:
                    want = 0.0
                else:
                    want = 2.5 if v == o_id else 1.0
                assert float(d[b, t, v]) == want


def _hamming(labels, gold, mask, o_id: int, o_cost: float):
    wrong = (labels != gold) & mask
    w = torch.where(labels == o_id, o_cost, 1.0)
    return (wrong * w).sum(1)


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("o_id", [-1, 0])
def test_direct_loss_at_large_alpha_is_the_hard_beams_cost(normalisation, k, o_id):
    for scorer, batch in well_separated(normalisation, k):
        obj = BeamDirectLoss(BeamObjectiveConfig(k=k, alpha=BIG, o_cost=2.0), o_id=o_id)
        assert obj.alpha == 1e4
        with torch.no_grad():
            loss = obj.loss(scorer, batch)
            hard = beam_search(scorer, batch, k)
            want = _hamming(hard.labels, batch.tags, batch.mask, o_id, 2.0)
            torch.testing.assert_close(loss, want, rtol=0, atol=1e-6)
            # every item's relaxed cost is its own sequence's cost
            res = soft_beam_search(scorer, batch, k, 1e4, cost=obj.costs(scorer, batch))
            for i in range(k):
                items = _hamming(hard.beam_labels[:, i], batch.tags, batch.mask, o_id, 2.0)
                torch.testing.assert_close(res.beam_costs[:, i], items, rtol=0, atol=1e-6)
        torch.testing.assert_close(obj(scorer, batch), want.mean(), rtol=0, atol=1e-6)


class _WithParam(nn.Module):
    """``objective.loss(scorer, batch)`` as a module, so ``functional_call`` can swap a parameter."""

    def __init__(self, scorer, obj, batch):
        super().__init__()
        self.scorer, self.obj, self.batch = scorer, obj, batch

    def forward(self):
        return self.obj.loss(self.scorer, self.batch)


@pytest.mark.parametrize("param", ["out.bias", "labels.weight", "start_label"])
@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_direct_loss_gradcheck(param, normalisation):
    scorer, batch = tiny_tagger(2, normalisation, scale=2.0), tiny_batch(2, B=2, T=3, lengths=[3, 2])
    obj = BeamDirectLoss(BeamObjectiveConfig(k=2, alpha=AlphaSchedule(init=1.0)), o_id=0)
    wrapped = _WithParam(scorer, obj, batch)
    theta = dict(wrapped.named_parameters())["scorer." + param].detach().clone().requires_grad_()

    def f(x):
        return torch.func.functional_call(wrapped, {"scorer." + param: x}, ())

    assert f(theta).abs().sum() > 0
    assert torch.autograd.gradcheck(f, (theta,))


# -- the relaxed hinge ----------------------------------------------------------------------------
@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 1e4])
def test_hinge_is_nonnegative(normalisation, alpha):
    for seed in range(3):
        scorer, batch = tiny_tagger(seed, normalisation), tiny_batch(seed, B=4, T=5)
        with torch.no_grad():
            loss = BeamHinge(BeamObjectiveConfig(k=2, alpha=AlphaSchedule(init=alpha, max=max(alpha, 1000.0))),
                             o_id=0).loss(scorer, batch)
        assert loss.shape == (4,)
        assert (loss >= 0).all()


def _favouring(label: int, normalisation: str) -> Seq2SeqTagger:
    scorer = tiny_tagger(3, normalisation, scale=1.0)
    with torch.no_grad():
        scorer.out.bias[label] += 50.0
    return scorer


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k,alpha", [(1, 1.0), (2, 1.0), (3, 0.5), (2, 1e4)])
def test_hinge_is_zero_when_gold_wins_by_the_cost(normalisation, k, alpha):
    batch = tiny_batch(3, B=3, T=4, lengths=[4, 1, 3])
    batch.tags[:] = 1
    batch.tags *= batch.mask
    obj = BeamHinge(BeamObjectiveConfig(k=k, alpha=AlphaSchedule(init=alpha, max=max(alpha, 1000.0)), o_cost=2.0),
                    o_id=0)
    with torch.no_grad():
        good = obj.loss(_favouring(1, normalisation), batch)
        bad = obj.loss(_favouring(2, normalisation), batch)
    assert torch.equal(good, torch.zeros(3))
    assert (bad > 40.0).all()                # the wrong label wins by ~50 per step


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("margin,o_cost", [(1.5, 2.0), (2.5, 2.0), (2.5, 3.0), (3.5, 3.0)])
def test_hinge_is_the_cost_augmented_margin(normalisation, k, margin, o_cost):
    """Step scores that ignore the history (output weights 0, bias [0, margin, 0]; gold all 1, O = 0):
    the cost-augmented max is n * max(0, o_cost - margin) above the gold score (alpha = 1e4)."""
    lengths = [4, 1, 3]
    batch = tiny_batch(4, B=3, T=4, lengths=lengths)
    batch.tags = batch.mask.long()
    scorer = tiny_tagger(4, normalisation, scale=1.0)
    with torch.no_grad():
        scorer.out.weight.zero_()
        scorer.out.bias.copy_(torch.tensor([0.0, margin, 0.0]))
        loss = BeamHinge(BeamObjectiveConfig(k=k, alpha=BIG, o_cost=o_cost), o_id=0).loss(scorer, batch)
    want = torch.tensor([n * max(0.0, o_cost - margin) for n in lengths])
    torch.testing.assert_close(loss, want, rtol=0, atol=1e-6)


# -- bad input ------------------------------------------------------------------------------------
OBJECTIVE_MAKERS = {
    "seq_ce": lambda: SeqCE(),
    "scheduled_sampling": lambda: ScheduledSampling(ScheduledSamplingConfig(), soft=False),
    "soft_scheduled_sampling": lambda: ScheduledSampling(SoftScheduledSamplingConfig(), soft=True),
    "beam_dl": lambda: BeamDirectLoss(BeamObjectiveConfig(k=2)),
    "beam_hinge": lambda: BeamHinge(BeamObjectiveConfig(k=2)),
}


@pytest.mark.parametrize("name", sorted(OBJECTIVE_MAKERS))
@pytest.mark.parametrize("bad", [3, -1])
def test_gold_label_out_of_range_is_a_value_error(name, bad):
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 2, 3])
    batch.tags[2, 1] = bad
    with pytest.raises(ValueError, match=rf"gold labels: label id {bad} is out of range \[0, 3\)"):
        OBJECTIVE_MAKERS[name]()(scorer, batch)


@pytest.mark.parametrize("name", sorted(OBJECTIVE_MAKERS))
def test_empty_sentence_is_a_value_error(name):
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 2, 3])
    batch.mask[1] = False
    batch.words[1] = 0
    batch.tags[1] = 0
    with pytest.raises(ValueError, match=r"empty sentence in the batch \(rows \[1\]\)"):
        OBJECTIVE_MAKERS[name]()(scorer, batch)


@pytest.mark.parametrize("k", [0, -2])
def test_beam_size_below_one_is_a_value_error(k):
    with pytest.raises(ValueError, match=r"beam size k must be an integer >= 1"):
        BeamObjectiveConfig(k=k)
    with pytest.raises(ValueError, match=r"beam size k must be an integer >= 1"):
        OBJECTIVES.build("beam_hinge", {"k": k})


@pytest.mark.parametrize("alpha", [0.0, -0.5, math.nan, math.inf])
def test_alpha_not_positive_is_a_value_error(alpha):
    with pytest.raises(ValueError, match=r"alpha \(the peaked-softmax temperature\) must be a finite number > 0"):
        AlphaSchedule(init=alpha)
    with pytest.raises(ValueError, match=r"alpha \(the peaked-softmax temperature\)"):
        OBJECTIVES.build("beam_dl", {"alpha": {"init": alpha, "max": 1e9}})


def test_schedule_and_config_checks():
    with pytest.raises(ValueError, match=r"alpha.anneal must be >= 1"):
        AlphaSchedule(anneal=0.5)
    with pytest.raises(ValueError, match=r"alpha.max must be >= alpha.init"):
        AlphaSchedule(init=1e4)                         # max defaults to 1000
    with pytest.raises(ValueError, match=r"o_cost must be > 0"):
        BeamObjectiveConfig(o_cost=0.0)
    with pytest.raises(ValueError, match=r"decay_k must be >= 0"):
        ScheduledSamplingConfig(decay_k=-1.0)
    with pytest.raises(ValueError, match=r"feed must be greedy or sample"):
        ScheduledSamplingConfig(feed="beam")


@pytest.mark.parametrize("name, cfg, alpha3, described", [
    ("seq_ce", None, None, {"alpha": "none", "decay_k": None, "feed": "gold"}),
    ("self_normalised_ce", {"lam": 0.5}, None, {"alpha": "none", "decay_k": None, "feed": "gold"}),
    ("scheduled_sampling", {"feed": "sample", "decay_k": 0}, None, {"alpha": "none", "decay_k": 0.0, "feed": "sample"}),
    ("soft_scheduled_sampling", {"feed": "greedy", "alpha": {"init": 1.0, "anneal": 2.0}}, 4.0,
     {"alpha": "annealed", "decay_k": 10.0, "feed": "greedy"}),
    ("beam_dl", {"alpha": {"init": 3.0}}, 3.0, {"alpha": "fixed", "decay_k": None, "feed": "gold"}),
    ("beam_hinge", {"alpha": {"init": 1.0, "anneal": 4.0, "max": 10.0}}, 10.0,
     {"alpha": "annealed", "decay_k": None, "feed": "gold"}),
])
def test_objectives_say_their_alpha_and_report_columns(name, cfg, alpha3, described):
    obj = OBJECTIVES.build(name, cfg, updates_per_epoch=2, seed=0, o_id=0)
    assert obj.alpha_at(3) == alpha3 and obj.describe() == described


def test_the_task_beam_size_sets_a_relaxed_beam_objectives_k():
    assert OBJECTIVES.build("beam_dl", {"k": 3}, k=5).cfg.k == 5
    assert OBJECTIVES.build("beam_hinge", {"k": 3}).cfg.k == 3


def test_label_smoothing_is_the_mixture_with_the_uniform_target():
    """eps-smoothed CE = (1 - eps) CE + eps * mean over V of -log p, per real step; eps 0 is CE."""
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, lengths=[4, 1, 2])
    eps = 0.2
    with torch.no_grad():
        smooth = SeqCE(SeqCEConfig(label_smoothing=eps)).loss(scorer, batch)
        torch.testing.assert_close(SeqCE(SeqCEConfig(label_smoothing=0.0)).loss(scorer, batch), SeqCE().loss(scorer, batch))
        gold = batch.tags
        logp = torch.log_softmax(unroll(scorer, batch, lambda t, _: scorer.embed_ids(gold[:, t]), steps=gold.shape[1]), -1)
        nll = -logp.gather(-1, gold[..., None])[..., 0]
        expected = (((1 - eps) * nll - eps * logp.mean(-1)) * batch.mask).sum(1)
        torch.testing.assert_close(smooth, expected)
        assert (smooth - SeqCE().loss(scorer, batch)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="label_smoothing"):
        SeqCEConfig(label_smoothing=1.0)


def test_an_annealed_run_never_keeps_a_model_from_before_its_alpha_moved():
    """Goyal 2018's "annealed alpha beats fixed" compares models trained with an annealed alpha: the
    kept model must come from an epoch whose alpha has left its start (issue 27). Epoch 1 has the best
    dev score here, yet the annealed objective's fit keeps epoch 2's model; the fixed one keeps epoch 1."""
    from components.training.loop import TrainConfig, fit
    annealed = OBJECTIVES.build("soft_scheduled_sampling", {"decay_k": 0, "alpha": {"init": 1.0, "anneal": 2.0}},
                                updates_per_epoch=1, seed=0)
    fixed = OBJECTIVES.build("soft_scheduled_sampling", {"decay_k": 0, "alpha": {"init": 1.0}}, updates_per_epoch=1, seed=0)
    assert [annealed.selectable(e) for e in (1, 2, 3)] == [False, True, True]
    assert all(fixed.selectable(e) for e in (1, 2, 3))
    assert OBJECTIVES.build("seq_ce", None, updates_per_epoch=1).selectable(1)
    for objective, kept in ((annealed, 2), (fixed, 1)):
        scorer, batch = tiny_tagger(0), tiny_batch(0)
        scores = iter([0.9, 0.5, 0.4])                 # epoch 1 is the best on dev
        state = fit(scorer, objective, lambda e: [batch], 1, lambda m: {"score": next(scores)},
                    TrainConfig(lr=0.01, epochs=3, patience=3), selectable=objective.selectable)
        assert state.best_epoch == kept and len(state.history) == 3
    scorer, batch = tiny_tagger(0), tiny_batch(0)      # no epoch selectable: nothing kept, said so
    state = fit(scorer, annealed, lambda e: [batch], 1, lambda m: {"score": 0.9}, TrainConfig(lr=0.01, epochs=1),
                selectable=annealed.selectable)
    assert state.best_score == float("-inf") and state.best_model_state is None
