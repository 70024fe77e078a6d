"""Stage vs joint training (Shevchenko & Osokin Sec. 2, App. B): the epoch loop's plateau schedule,
``train_procedure`` on a tiny synthetic chain task, ``evaluate``'s two metrics by hand, and the OCR
data / LeNet unary pieces (in memory; no prepared data is read)."""
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from components.data.ocr import OcrBatch, OcrWords, cv_split, subsample
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.models.lenet import LeNetConfig, LeNetUnary
from components.seeds import seed_for
from components.training.loop import TrainConfig, fit
from components.training.scaling import ScaledModel
from components.training.structured import ChainTask, ProcedureConfig, evaluate, mean_ratio, train_procedure
from tests.training.toy import FeatUnary
from tests.training.toy import ToyBatch as _Batch


# --------------------------------------------------------------------------------------------
# fit: min_delta, ReduceLROnPlateau (lr_patience / lr_factor), before_eval
# --------------------------------------------------------------------------------------------

def _tiny_fit_setup():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 3, generator=g)
    y = (X[:, 0] > 0).long()
    batches = lambda epoch: [(X[:4], y[:4]), (X[4:], y[4:])]
    loss = lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1])
    return model, batches, loss


def test_fit_cuts_the_lr_on_a_plateau_and_stops_after_patience():
    model, batches, loss = _tiny_fit_setup()
    cfg = TrainConfig(lr=0.1, epochs=50, patience=5, lr_patience=2, lr_factor=0.1, min_delta=1e-3)
    # gains below min_delta do not count as progress, for the scheduler nor for early stopping
    scores = iter([0.5] + [0.5009, 0.5] * 25)
    state = fit(model, loss, batches, 2, lambda m: {"score": next(scores)}, cfg)
    lrs = [h["lr"] for h in state.history]
    # epoch 1 sets the best; epochs 2, 3 are bad -> cut; epochs 4, 5 bad -> cut; epoch 6 is the 5th bad
    assert state.epoch == 6 and state.best_epoch == 1 and state.bad_epochs == 5
    for got, want in zip(lrs, [0.1, 0.1, 0.1, 0.01, 0.01, 0.001]):
        assert math.isclose(got, want, rel_tol=1e-9)


def test_fit_a_real_gain_resets_both_counters():
    model, batches, loss = _tiny_fit_setup()
    cfg = TrainConfig(lr=0.1, epochs=7, patience=3, lr_patience=2, lr_factor=0.5, min_delta=0.01)
    scores = iter([0.5, 0.5, 0.52, 0.52, 0.52, 0.6, 0.6])
    state = fit(model, loss, batches, 2, lambda m: {"score": next(scores)}, cfg)
    lrs = [h["lr"] for h in state.history]
    # bad: 2 | good: 3 | bad: 4, 5 -> cut after 5 | good: 6 | bad: 7
    assert [round(x, 9) for x in lrs] == [0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]
    assert state.epoch == 7 and state.best_epoch == 6 and state.bad_epochs == 1


def test_fit_before_eval_runs_before_the_dev_evaluation_and_joins_the_record():
    model, batches, loss = _tiny_fit_setup()
    events, counter = [], {"n": 0}

    def before_eval(epoch):
        counter["n"] += 1
        events.append(("before", epoch))
        return {"k": float(counter["n"]), "epoch_seen": float(epoch)}

    def ev(m):
        events.append(("eval", counter["n"]))
        return {"score": float(counter["n"])}       # improving: never stops early

    recs = []
    state = fit(model, loss, batches, 2, ev, TrainConfig(lr=0.01, epochs=3, patience=2),
                before_eval=before_eval, on_epoch=lambda s, r: recs.append(dict(r)))
    assert events == [("before", 1), ("eval", 1), ("before", 2), ("eval", 2), ("before", 3), ("eval", 3)]
    assert [h["k"] for h in state.history] == [1.0, 2.0, 3.0]
    assert [h["epoch_seen"] for h in state.history] == [1.0, 2.0, 3.0]
    assert [h["dev_score"] for h in state.history] == [1.0, 2.0, 3.0]
    assert [r.pop("train_seconds") >= 0 for r in recs] == [True] * 3     # the wall time is reported ...
    assert recs == state.history                                         # ... and not kept in the history
    assert len(state.seconds) == 3 and "seconds" not in state.to_dict()


def test_fit_default_config_has_no_schedule():
    model, batches, loss = _tiny_fit_setup()
    cfg = TrainConfig(lr=0.05)
    assert cfg.lr_patience == 0 and cfg.min_delta == 0.0
    state = fit(model, loss, batches, 2, lambda m: {"score": 0.5}, cfg)
    assert state.epoch == cfg.patience + 1 and state.sched_state is None
    assert all(h["lr"] == 0.05 for h in state.history)
    # with min_delta = 0 any strict gain is progress: no early stop
    model, batches, loss = _tiny_fit_setup()
    scores = iter([0.5 + 1e-9 * k for k in range(10)])
    state = fit(model, loss, batches, 2, lambda m: {"score": next(scores)}, TrainConfig(lr=0.05, epochs=6))
    assert state.epoch == 6 and state.best_epoch == 6
    assert all(h["lr"] == 0.05 for h in state.history)


# --------------------------------------------------------------------------------------------
# A tiny synthetic chain task
# --------------------------------------------------------------------------------------------

L = 3


def _FeatUnary(n_feats=L, n_labels=L):
    return FeatUnary(n_feats, n_labels, seed=0)


def _collate(seqs):
    N = max(len(y) for _, y in seqs)
    feats = torch.zeros(len(seqs), N, L)
    tags = torch.zeros(len(seqs), N, dtype=torch.long)
    mask = torch.zeros(len(seqs), N, dtype=torch.bool)
    for b, (x, y) in enumerate(seqs):
        feats[b, :len(y)], tags[b, :len(y)], mask[b, :len(y)] = x, y, True
    return _Batch(feats, tags, mask)


def _chain_data(n, seed):
    """Labels follow y_{t+1} = y_t + 1 (mod 3) with prob 0.8 (the transitions matter); the feature
    is a noisy one-hot of the label (the unaries alone are imperfect). Lengths 2..5."""
    g = torch.Generator().manual_seed(seed)
    seqs = []
    for _ in range(n):
        k = int(torch.randint(2, 6, (1,), generator=g))
        y = [int(torch.randint(0, L, (1,), generator=g))]
        for _ in range(k - 1):
            stay = float(torch.rand(1, generator=g)) < 0.8
            y.append((y[-1] + 1) % L if stay else int(torch.randint(0, L, (1,), generator=g)))
        y = torch.tensor(y)
        x = nn.functional.one_hot(y, L).float() + 0.8 * torch.randn(k, L, generator=g)
        seqs.append((x, y))
    return seqs


TRAIN, DEV = _chain_data(60, 0), _chain_data(20, 1)
TC = TrainConfig(lr=0.05, epochs=2, patience=5, batch_size=16)
PCFG = ProcedureConfig(unary=TC, pairwise=TC, finetune=TC, joint=TC)
GRID = dict(grid_lo=-2, grid_hi=2)


def _params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


EPOCH_OF_SEED = {seed_for(0, "epoch", n): n for n in range(1, 1000)}     # train_procedure(seed=0)'s epoch seeds


def _run(procedure, method="none", objective="marginal_ce", cfg=PCFG):
    crf = UnaryPairwiseCRF(_FeatUnary(), L, init_std=0.1, seed=0)
    model = ScaledModel(crf, method, GRID if method == "online" else None)
    task = ChainTask(objective, metric="per_example")
    starts, ends = {}, {}

    def train_batches(epoch_seed, bs):
        # the epoch seed names the cumulative epoch n (seed_for(0, "epoch", n)); snapshot before the first step
        starts[EPOCH_OF_SEED[epoch_seed]] = _params(model)
        order = torch.randperm(len(TRAIN), generator=torch.Generator().manual_seed(epoch_seed)).tolist()
        for s in range(0, len(order), bs):
            yield _collate([TRAIN[i] for i in order[s:s + bs]])

    dev = lambda: [_collate(DEV[:10]), _collate(DEV[10:])]
    subset = lambda: [_collate(TRAIN[:12])]
    recs = []

    def on_epoch(rec):
        ends[int(rec["epoch"])] = _params(model)
        recs.append(rec)

    res = train_procedure(model, task, procedure, cfg, train_batches=train_batches, n_train=len(TRAIN),
                          dev_batches=dev, subset_batches=subset, seed=0, on_epoch=on_epoch)
    return model, task, res, recs, starts, ends, dev


def _same(a, b, keys):
    return all(torch.equal(a[k], b[k]) for k in keys)


UNARY_KEYS = ["energy.unary_net.lin.weight", "energy.unary_net.lin.bias"]
PAIR_KEYS = ["energy.transition"]


def test_stage_procedure_phases_and_frozen_parts():
    model, task, res, recs, starts, ends, dev = _run("stage")
    phases = [r["phase"] for r in res.history]
    assert phases == ["unary"] * 2 + ["pairwise"] * 2 + ["joint"] * 2
    assert [r["epoch"] for r in res.history] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert res.epochs == 6 and recs == res.history
    assert sorted(starts) == [1, 2, 3, 4, 5, 6]
    for r in res.history:
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0 and r["alpha"] == 1.0
        assert 0.0 <= r["dev_score"] <= 1.0 and math.isfinite(r["train_loss"])
    for e, ph in enumerate(phases, start=1):
        if ph == "unary":          # the transition is frozen, the unary net moves
            assert _same(starts[e], ends[e], PAIR_KEYS) and not _same(starts[e], ends[e], UNARY_KEYS)
        elif ph == "pairwise":     # the unary net is frozen, the transition moves
            assert _same(starts[e], ends[e], UNARY_KEYS) and not _same(starts[e], ends[e], PAIR_KEYS)
        else:                      # fine-tuning moves both
            assert not _same(starts[e], ends[e], UNARY_KEYS) and not _same(starts[e], ends[e], PAIR_KEYS)
    # every parameter is trainable again afterwards
    assert all(p.requires_grad for p in model.parameters())
    assert res.minutes >= 0 and res.alpha == 1.0


def test_unary_procedure_trains_the_unaries_only_and_scores_their_argmax():
    model, task, res, recs, starts, ends, dev = _run("unary")
    assert [r["phase"] for r in res.history] == ["unary", "unary"]
    assert [r["epoch"] for r in res.history] == [1.0, 2.0]
    for e in (1, 2):
        assert _same(starts[e], ends[e], PAIR_KEYS)
    best = max(r["dev_score"] for r in res.history)
    assert math.isclose(evaluate(model, task, dev(), unary_only=True), best, rel_tol=1e-12)
    assert best > 0.5                   # the noisy features alone are informative


@pytest.mark.parametrize("objective", ["marginal_ce", "nll"])
def test_joint_procedure(objective):
    model, task, res, recs, starts, ends, dev = _run("joint", objective=objective)
    assert [r["phase"] for r in res.history] == ["joint", "joint"]
    assert [r["epoch"] for r in res.history] == [1.0, 2.0]
    for r in res.history:
        assert math.isfinite(r["ratio"]) and r["alpha"] == 1.0 and "subset_loss" not in r
    for e in (1, 2):
        assert not _same(starts[e], ends[e], UNARY_KEYS) and not _same(starts[e], ends[e], PAIR_KEYS)
    # the model ends on its best-on-dev weights; the recorded ratio is the one of the model's potentials
    best = max(r["dev_score"] for r in res.history)
    assert math.isclose(evaluate(model, task, dev()), best, rel_tol=1e-12)
    assert math.isclose(mean_ratio(model, [_collate(TRAIN[:12])]),
                        next(r["ratio"] for r in res.history if r["dev_score"] == best), rel_tol=1e-6)


def test_joint_online_records_an_alpha_from_the_grid_every_epoch():
    model, task, res, recs, starts, ends, dev = _run("joint", method="online")
    grid = model.cfg.grid()
    assert len(res.history) == 2
    for r in res.history:
        assert r["phase"] == "joint" and r["alpha"] in grid
        assert math.isfinite(r["subset_loss"]) and math.isfinite(r["ratio"])
    # the alpha is part of the best-on-dev state: the model keeps the alpha of its best epoch
    best = next(r for r in res.history if r["dev_score"] == max(h["dev_score"] for h in res.history))
    assert res.alpha == float(model.alpha) == best["alpha"]
    # the ratio recorded is that of the scaled potentials alpha U: alpha times the raw one
    raw = mean_ratio(model, [_collate(TRAIN[:12])], raw=True)
    assert math.isclose(mean_ratio(model, [_collate(TRAIN[:12])]), res.alpha * raw, rel_tol=1e-6)


@pytest.mark.parametrize("method", ["fixed", "offline", "offline_reg", "temperature"])
def test_joint_with_other_scalings_runs(method):
    one = TrainConfig(lr=0.05, epochs=1, patience=5, batch_size=32)
    model, task, res, *_ = _run("joint", method=method, cfg=ProcedureConfig(joint=one))
    assert len(res.history) == 1 and math.isfinite(res.history[0]["ratio"])
    if method == "offline":           # ||alpha U / ||U|| || / ||W / ||W|| || = alpha
        assert math.isclose(res.history[0]["ratio"], model.cfg.alpha, rel_tol=1e-4)


def test_mean_ratio_skips_examples_without_a_pairwise_term():
    # offline scaling expands the shared transition per position; a length-1 sequence then has no
    # edge, ||W|| = 0, and no ratio (it used to count as ~1e12)
    model = ScaledModel(UnaryPairwiseCRF(_FeatUnary(), L, seed=0), "offline", {"alpha": 2.0})
    with_single = [_collate(TRAIN[:3] + [(TRAIN[3][0][:1], TRAIN[3][1][:1])])]
    assert math.isclose(mean_ratio(model, with_single), 2.0, rel_tol=1e-5)
    raw = mean_ratio(model, with_single, raw=True)       # the shared raw W has a norm for every example
    with torch.no_grad():
        p = model.raw_potentials(with_single[0])
        want = float((p.unary_norm() / p.pairwise_norm()).mean())
    assert math.isclose(raw, want, rel_tol=1e-6)
    assert math.isnan(mean_ratio(model, [_collate([(TRAIN[3][0][:1], TRAIN[3][1][:1])])]))


def test_procedure_arguments_are_checked():
    for procedure in ("stage", "unary"):
        with pytest.raises(ValueError, match="scaling method 'none'"):
            _run(procedure, method="online")
    with pytest.raises(ValueError, match="procedure"):
        _run("both")
    with pytest.raises(ValueError, match="objective"):
        ChainTask("nope")
    with pytest.raises(ValueError, match="not a chain objective"):
        ChainTask("gcrf_ce")


# --------------------------------------------------------------------------------------------
# evaluate: per-example vs pooled accuracy by hand
# --------------------------------------------------------------------------------------------

@dataclass
class _UBatch:
    unary: torch.Tensor
    tags: torch.Tensor
    mask: torch.Tensor


class _Given(nn.Module):
    def forward(self, batch):
        return batch.unary


def _fixed_model():
    crf = UnaryPairwiseCRF(_Given(), L)
    with torch.no_grad():
        crf.transition.zero_()          # every prediction rule is then the unary argmax
    return ScaledModel(crf)


def _ubatch(pred_rows, gold_rows):
    N = max(len(r) for r in pred_rows)
    unary = torch.zeros(len(pred_rows), N, L)
    tags = torch.zeros(len(pred_rows), N, dtype=torch.long)
    mask = torch.zeros(len(pred_rows), N, dtype=torch.bool)
    for b, (p, y) in enumerate(zip(pred_rows, gold_rows)):
        unary[b, torch.arange(len(p)), torch.tensor(p)] = 5.0
        tags[b, :len(y)], mask[b, :len(y)] = torch.tensor(y), True
    return _UBatch(unary, tags, mask)


@pytest.mark.parametrize("objective", ["marginal_ce", "nll", "ssvm", "mean_field_ce"])
def test_evaluate_per_example_and_pooled(objective):
    model = _fixed_model()
    # sequence 1: 1 of 2 right; sequence 2: 4 of 4 right (one batch, different lengths)
    b1 = _ubatch([[0, 1], [2, 2, 1, 0]], [[0, 2], [2, 2, 1, 0]])
    assert evaluate(model, ChainTask(objective, "per_example"), [b1]) == pytest.approx((0.5 + 1.0) / 2)
    assert evaluate(model, ChainTask(objective, "pooled"), [b1]) == pytest.approx(5 / 6)
    # plus a second batch with a wrong length-1 sequence
    b2 = _ubatch([[1]], [[0]])
    assert evaluate(model, ChainTask(objective, "per_example"), [b1, b2]) == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert evaluate(model, ChainTask(objective, "pooled"), [b1, b2]) == pytest.approx(5 / 7)
    assert evaluate(model, ChainTask(objective, "pooled"), [b1, b2], unary_only=True) == pytest.approx(5 / 7)
    assert model.training                # the mode is restored


def test_chain_task_losses_are_per_position_for_ce():
    model = _fixed_model()
    b = _ubatch([[0, 1], [2, 2, 1, 0]], [[0, 2], [2, 2, 1, 0]])
    p = model.potentials(b)
    from components.training.registry import OBJECTIVES, objectives_for
    n = b.mask.sum(1).float()
    assert set(objectives_for("chain")) == {"nll", "ssvm", "marginal_ce", "mean_field_ce"}
    for obj in objectives_for("chain"):
        want = OBJECTIVES.build(obj).loss(p, b.tags)
        per_position = obj in ("marginal_ce", "mean_field_ce")      # eq. 5; LL and SSVM per sequence
        assert OBJECTIVES.build(obj).per_position == per_position
        if per_position:
            want = want / n
        torch.testing.assert_close(ChainTask(obj).loss(p, b), want)
    ce = nn.functional.cross_entropy(p.unary[0, :2], b.tags[0, :2])
    torch.testing.assert_close(ChainTask().unary_loss(p, b)[0], ce)
    assert torch.equal(ChainTask().unary_predict(p), p.unary.argmax(-1) * b.mask)


# --------------------------------------------------------------------------------------------
# OCR words and the LeNet unary network (in memory)
# --------------------------------------------------------------------------------------------

def _ocr_words(n=20, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, n)
    images = [rng.integers(0, 2, (k, 16, 8)).astype(np.uint8) for k in lengths]
    labels = [rng.integers(0, 26, k).astype(np.int64) for k in lengths]
    return OcrWords(images, labels, np.arange(n) % 10)


def test_ocr_batch_pads_and_centres():
    w = _ocr_words()
    rows = [3, 0, 7]
    b = w.batch(rows)
    n = max(len(w.labels[i]) for i in rows)
    assert isinstance(b, OcrBatch) and len(b) == 3
    assert b.images.shape == (3, n, 1, 32, 32) and b.images.dtype == torch.float32
    assert b.tags.shape == (3, n) and b.tags.dtype == torch.long and b.mask.dtype == torch.bool
    assert b.index.tolist() == rows
    for r, i in enumerate(rows):
        k = len(w.labels[i])
        assert b.lengths[r] == k and b.mask[r].tolist() == [True] * k + [False] * (n - k)
        assert b.tags[r, :k].tolist() == w.labels[i].tolist() and bool((b.tags[r, k:] == 0).all())
        assert bool((b.images[r, k:] == 0).all())
        for t in range(k):
            img = b.images[r, t, 0]
            assert torch.equal(img[8:24, 12:20], torch.from_numpy(w.images[i][t].astype(np.float32)))
            outside = img.clone()
            outside[8:24, 12:20] = 0
            assert bool((outside == 0).all())
    all_b = list(w.batches(6))
    assert [len(x) for x in all_b] == [6, 6, 6, 2]
    assert torch.cat([x.index for x in all_b]).tolist() == list(range(20))
    shuf = torch.cat([x.index for x in w.batches(6, shuffle=True, seed=1)]).tolist()
    assert sorted(shuf) == list(range(20)) and shuf != list(range(20))
    assert shuf == torch.cat([x.index for x in w.batches(6, shuffle=True, seed=1)]).tolist()
    assert w.n_letters == sum(len(y) for y in w.labels)


def test_ocr_cv_split_holds_out_the_selection_fold():
    w = _ocr_words(30)
    for test_fold in range(1, 10):
        train, test = cv_split(w, test_fold)
        assert set(test.folds.tolist()) == {test_fold}
        assert set(train.folds.tolist()) == set(range(10)) - {0, test_fold}
        assert len(train) + len(test) == len(w) - int((w.folds == 0).sum())
    train, test = cv_split(w, 0)            # the selection round: train on 1..9, test on 0
    assert set(test.folds.tolist()) == {0} and set(train.folds.tolist()) == set(range(1, 10))
    with pytest.raises(ValueError, match="test fold"):
        cv_split(w, 10)
    s = subsample(w, 7, seed=0)
    assert len(s) == 7 and subsample(w, 0, seed=0) is w and subsample(w, 100, seed=0) is w


@pytest.mark.parametrize("act", ["relu", "sigmoid", "none"])
def test_lenet_unary_shapes_and_masked_zeros(act):
    w = _ocr_words(4, seed=1)
    b = w.batch([0, 1, 2, 3])
    net = LeNetUnary(LeNetConfig(last_activation=act), seed=0)
    out = net(b)
    assert out.shape == (4, b.mask.shape[1], 26)
    assert bool((out[~b.mask] == 0).all()) and bool((out[b.mask] != 0).any())
    torch.testing.assert_close(out[b.mask], net.classify(b.images[b.mask]))
    acts = [m for m in net.net if isinstance(m, (nn.ReLU, nn.Sigmoid, nn.Identity))]
    last = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "none": nn.Identity}[act]
    assert isinstance(net.net[-2], last) and isinstance(net.net[-1], nn.Linear) and len(acts) == 3
    # the seed fixes the weights without touching the global generator
    state = torch.get_rng_state()
    twin = LeNetUnary(LeNetConfig(last_activation=act), seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(twin(b), out)


def test_lenet_checks_its_input():
    with pytest.raises(ValueError, match="last_activation"):
        LeNetUnary(LeNetConfig(last_activation="tanh"))
    net = LeNetUnary()
    with pytest.raises(ValueError, match="images"):
        net.classify(torch.zeros(2, 1, 16, 8))
    b = _ocr_words(2).batch([0, 1])
    with pytest.raises(ValueError, match="batch.images"):
        net(OcrBatch(b.images[:, :, 0], b.tags, b.mask, b.lengths, b.index))
    # a chain CRF over LeNet on an OCR batch
    crf = UnaryPairwiseCRF(net, 26)
    p = crf.potentials(b)
    assert p.unary.shape == (2, b.mask.shape[1], 26) and p.transition.shape == (26, 26)


# --------------------------------------------------------------------------------------------
# Equal budgets and the App. B stopping rule (issue 13)
# --------------------------------------------------------------------------------------------

def test_budget_caps_stage_phases_together_and_joint_alike():
    long = TrainConfig(lr=0.05, epochs=10, patience=50, batch_size=16)
    cfg = ProcedureConfig(unary=long, pairwise=long, finetune=long, joint=long, budget=5)
    res_stage = _run("stage", cfg=cfg)[2]
    phases = [r["phase"] for r in res_stage.history]
    # the unary phase may use what is left after one epoch for each later phase: 5 - 2 = 3
    assert phases == ["unary"] * 3 + ["pairwise"] + ["joint"]
    assert res_stage.epochs == 5 and res_stage.stopped_by == [("unary", "budget"), ("pairwise", "budget"),
                                                              ("joint", "budget")]
    res_joint = _run("joint", cfg=cfg)[2]
    assert res_joint.epochs == 5 == res_stage.epochs and res_joint.stopped_by == [("joint", "budget")]
    assert res_joint.history[-1]["stopped_by"] == "budget" and "stopped_by" not in res_joint.history[0]
    # without a budget each phase runs to its own cap
    free = ProcedureConfig(unary=TC, pairwise=TC, finetune=TC, joint=TC, budget=0)
    res = _run("stage", cfg=free)[2]
    assert res.epochs == 6 and {w for _, w in res.stopped_by} == {"epochs"}


def test_app_b_rule_stops_a_phase_before_its_cap():
    # min_delta 1: no epoch can beat the first by more than 1 (scores are fractions), so the rule
    # fires after `patience` epochs, well before the budget of 20
    tc = TrainConfig(lr=0.05, epochs=20, patience=2, batch_size=16, min_delta=1.0, lr_patience=1)
    cfg = ProcedureConfig(unary=tc, pairwise=tc, finetune=tc, joint=tc, budget=20)
    res = _run("joint", cfg=cfg)[2]
    assert res.epochs == 3 and res.stopped_by == [("joint", "patience")]
    assert [h["lr"] for h in res.history] == pytest.approx([0.05, 0.05, 0.005])   # cut after 1 flat epoch
    res = _run("stage", cfg=cfg)[2]
    assert res.epochs == 9 and [w for _, w in res.stopped_by] == ["patience"] * 3


def test_budget_must_leave_every_stage_phase_an_epoch():
    from components.config import ConfigError
    with pytest.raises(ConfigError, match="budget"):
        ProcedureConfig(budget=2)
    with pytest.raises(ValueError, match="budget"):
        ProcedureConfig(budget=-1)


def test_chain_task_span_f1_equals_conlleval_span_f1():
    """The scaling study's span metric (NER, chunking): evaluate() pools (2c, p + g) per sentence into
    the corpus span F1 of components.metrics.tagging.span_f1, on random BIOES sequences."""
    from types import SimpleNamespace

    from components.metrics.tagging import span_f1
    from components.training.structured import ChainTask, evaluate
    labels = ("O", "B-PER", "I-PER", "E-PER", "S-PER", "S-LOC")
    g = torch.Generator().manual_seed(3)
    lengths = [5, 1, 7, 3]
    mask = torch.tensor([[t < n for t in range(7)] for n in lengths])
    gold = torch.randint(0, len(labels), (4, 7), generator=g) * mask
    pred = torch.where(torch.rand(4, 7, generator=g) < 0.6, gold, torch.randint(0, len(labels), (4, 7), generator=g)) * mask
    task = ChainTask("marginal_ce", metric="span_f1", labels=labels)

    class Fixed(nn.Module):                     # potentials -> the fixed prediction
        def potentials(self, b):
            return b

    task_predict = SimpleNamespace(metric=task.metric, predict=lambda p: pred, unary_predict=lambda p: pred,
                                   counts=task.counts)
    batch = SimpleNamespace(tags=gold, mask=mask)
    got = evaluate(Fixed(), task_predict, [batch])
    want = span_f1([[labels[i] for i in gold[b, :n].tolist()] for b, n in enumerate(lengths)],
                   [[labels[i] for i in pred[b, :n].tolist()] for b, n in enumerate(lengths)])["f1"]
    assert got * 100 == pytest.approx(want)
    with pytest.raises(Exception, match="labels"):
        ChainTask("marginal_ce", metric="span_f1")
