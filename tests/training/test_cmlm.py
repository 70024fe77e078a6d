"""Mask-predict training (components.training.cmlm): batch conversion, masks, the objective's
masked positions, the unigram baseline, dev evaluation and a tiny copy task that must be learned."""
import math

import numpy as np
import pytest
import torch

from components.config import ConfigError
from components.data.translation import EOS, ParallelDataset, TranslationTask
from components.models.mlm import CMLMConfig, ConditionalMLM
from components.seeds import seed_for
from components.training.cmlm import (CMLMTrainConfig, cmlm_batch, evaluate_cmlm, make_eval_set,
                                      lr_factor, mask_predict_loss, ratio_masking, train_cmlm, uniform_masking,
                                      unigram_log_probs)

V = 12                                  # pad 0, unk 1, eos 2, tokens 3..11 (both sides)
TINY = CMLMConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32, dropout=0.0,
                  max_source_len=8, max_target_len=8)


def dataset(pairs, name="synthetic") -> ParallelDataset:
    n = len(pairs)
    return ParallelDataset([f"{name}-{i}" for i in range(n)], [""] * n, [""] * n, [len(s) for s, _ in pairs],
                           [s for s, _ in pairs], [t + [EOS] for _, t in pairs], max_target_len=20, len_a=1.0, len_b=1,
                           name=name)


def copy_pairs(n, seed, lo=2, hi=6):
    rng = np.random.default_rng(seed)
    src = [list(map(int, rng.integers(3, V, rng.integers(lo, hi + 1)))) for _ in range(n)]
    return [(s, list(s)) for s in src]


def copy_task(n_train=200, n_dev=60) -> TranslationTask:
    return TranslationTask(dataset(copy_pairs(n_train, 0), "train"), dataset(copy_pairs(n_dev, 1), "dev"),
                           dataset(copy_pairs(10, 2), "test"), None, None)


def model(seed=0, cfg=TINY) -> ConditionalMLM:
    return ConditionalMLM(V, V, cfg, seed=seed)


def batch_of(pairs):
    return dataset(pairs).collate(range(len(pairs)))


PAIRS = [([3, 4, 5], [6, 7, 8, 9]), ([5], [4]), ([9, 10, 11, 3], [11, 3])]


# ----------------------------------------------------------------------------- batches and masks

def test_cmlm_batch_strips_eos_and_keeps_the_valid_positions():
    cb = cmlm_batch(batch_of(PAIRS), allowed=model().allowed, eos=EOS)
    assert cb.lengths.tolist() == [4, 1, 2]
    assert cb.targets.tolist() == [[6, 7, 8, 9], [4, 0, 0, 0], [11, 3, 0, 0]]
    assert cb.mask.sum(1).tolist() == [4, 1, 2]
    assert cb.words.tolist() == [[3, 4, 5, 0], [5, 0, 0, 0], [9, 10, 11, 3]]


@pytest.mark.parametrize("bad, position, what", [(EOS, 1, "disallowed id 2 \\(eos\\)"), (1, 0, "disallowed id 1"),
                                                 (0, 2, "disallowed id 0"), (V, 1, "disallowed id 12 \\(outside 0..11\\)")])
def test_cmlm_batch_rejects_disallowed_target_ids(bad, position, what):
    b = batch_of(PAIRS)
    b.tags[0, position] = bad
    with pytest.raises(ValueError, match=f"target row 0, position {position} holds the {what}"):
        cmlm_batch(b, allowed=model().allowed, eos=EOS)


def test_cmlm_batch_rejects_a_target_without_eos_or_with_only_eos():
    b = batch_of(PAIRS)
    b.tags[1, 1] = 5
    with pytest.raises(ValueError, match="row 1 does not end in eos"):
        cmlm_batch(b, allowed=model().allowed, eos=EOS)
    b = batch_of(PAIRS)
    b.tags[1, 0], b.mask[1, 1] = EOS, False
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] hold only eos"):
        cmlm_batch(b, allowed=model().allowed, eos=EOS)


def test_uniform_masking_masks_between_one_and_all_valid_positions_only():
    mask = torch.arange(7)[None] < torch.tensor([1, 3, 7, 5])[:, None]
    gen = torch.Generator().manual_seed(0)
    counts = {r: set() for r in range(4)}
    for _ in range(300):
        m = uniform_masking(mask, gen)
        assert not (m & ~mask).any()
        for r, n in enumerate(m.sum(1).tolist()):
            counts[r].add(n)
    assert counts == {0: {1}, 1: {1, 2, 3}, 2: set(range(1, 8)), 3: set(range(1, 6))}


def test_ratio_masking_counts_and_seeding():
    mask = torch.arange(8)[None] < torch.tensor([1, 4, 8])[:, None]
    m = ratio_masking(mask, 0.5, torch.Generator().manual_seed(3))
    assert m.sum(1).tolist() == [1, 2, 4] and not (m & ~mask).any()
    assert torch.equal(m, ratio_masking(mask, 0.5, torch.Generator().manual_seed(3)))
    assert torch.equal(ratio_masking(mask, 1.0), mask)
    with pytest.raises(ValueError, match="ratio"):
        ratio_masking(mask, 0.0)


# ----------------------------------------------------------------------------- the objective

def test_loss_counts_only_the_masked_positions():
    m = model().eval()
    cb = cmlm_batch(batch_of(PAIRS), allowed=m.allowed, eos=EOS)
    masked = torch.zeros_like(cb.mask)
    masked[0, 1] = masked[0, 3] = masked[1, 0] = masked[2, 1] = True
    loss, parts = mask_predict_loss(m, cb, masked, length_weight=0.0)
    # by hand: the same inputs, NLL at the four masked positions only
    with torch.no_grad():
        ctx = m.encode(cb)
        lp = torch.log_softmax(m.conditionals(cb.targets.masked_fill(masked, m.mask_id), cb.mask, ctx), -1)
        want = -torch.stack([lp[0, 1, 7], lp[0, 3, 9], lp[1, 0, 4], lp[2, 1, 3]]).mean()
        len_nll = -m.predict_length(ctx)[torch.arange(3), torch.tensor([4, 1, 2])].mean()
    torch.testing.assert_close(loss.detach(), want)
    assert parts["token_loss"] == pytest.approx(float(want), abs=1e-6)
    # the unmasked targets are inputs, never scored: changing the target of a visible position
    # changes the loss only through the input
    loss_w, parts_w = mask_predict_loss(m, cb, masked, length_weight=0.5)
    assert float(loss_w.detach()) == pytest.approx(float(want) + 0.5 * float(len_nll), abs=1e-5)
    assert parts_w["length_nll"] == pytest.approx(float(len_nll), abs=1e-5)


def test_label_smoothing_spreads_over_allowed_ids_only():
    m = model().eval()
    cb = cmlm_batch(batch_of(PAIRS), allowed=m.allowed, eos=EOS)
    masked = cb.mask.clone()
    loss, parts = mask_predict_loss(m, cb, masked, length_weight=0.0, label_smoothing=0.2)
    assert math.isfinite(float(loss.detach()))
    with torch.no_grad():
        lp = torch.log_softmax(m.conditionals(cb.targets.masked_fill(masked, m.mask_id), cb.mask, m.encode(cb)), -1)
        lp = lp[masked]
        nll = -lp.gather(1, cb.targets[masked][:, None])[:, 0]
        smooth = -lp[:, 3:].mean(1)
    torch.testing.assert_close(loss.detach(), (0.8 * nll + 0.2 * smooth).mean())
    assert parts["token_loss"] == pytest.approx(float(nll.mean()), abs=1e-6)


def test_loss_rejects_bad_masks():
    m = model()
    cb = cmlm_batch(batch_of(PAIRS), allowed=m.allowed, eos=EOS)
    with pytest.raises(ValueError, match="padding"):
        mask_predict_loss(m, cb, torch.ones_like(cb.mask))
    none = cb.mask.clone()
    none[1] = False
    with pytest.raises(ValueError, match=">= 1 masked"):
        mask_predict_loss(m, cb, none)


def test_unigram_baseline():
    allowed = model().allowed
    lq = unigram_log_probs([[3, 3, 4, EOS], [3, EOS]], allowed, eos=EOS, alpha=1.0)
    assert torch.isneginf(lq[:3]).all()
    counts = torch.tensor([4.0, 2.0] + [1.0] * 7)                 # ids 3, 4, then 5..11 unseen (add-one)
    torch.testing.assert_close(lq[3:], torch.log(counts / counts.sum()))


# ----------------------------------------------------------------------------- training

def test_training_on_a_copy_task_beats_the_unigram_baseline():
    m = model(cfg=CMLMConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64, dropout=0.0,
                             max_source_len=8, max_target_len=8))
    records = []
    res = train_cmlm(m, copy_task(), CMLMTrainConfig(epochs=10, batch_size=16, lr=3e-3, warmup_steps=10,
                                                     label_smoothing=0.0, patience=10, dev_ratios=(0.5, 1.0)),
                     on_epoch=records.append)
    assert len(res.history) == len(records) == 10 and not m.training
    best = res.best
    assert best["unigram_loss"] > 2.0                               # ~log 9: the copied ids are uniform
    assert best["token_loss"] < 0.5 * best["unigram_loss"]
    assert best["token_loss_r50"] < 0.5 * best["unigram_loss_r50"]
    assert best["token_acc"] > 0.6
    # the kept epoch is the one with the least dev masked-token loss (select_on's default)
    assert best["token_loss"] == min(r["dev_token_loss"] for r in res.history)
    assert res.history[res.best_epoch - 1]["dev_loss"] == best["loss"]
    assert res.stats == {"train_pairs": 200, "dev_pairs": 60, "dev_skipped_too_long": 0, "dev_skipped_disallowed": 0,
                         "updates": 10 * 13}
    # the restored weights are the best epoch's: re-evaluating gives its dev loss
    dev = make_eval_set(m, copy_task().dev, batch_size=16, ratios=(0.5, 1.0), seed=seed_for(0, "dev_masks"))
    uni = unigram_log_probs(copy_task().train.tgt_ids, m.allowed, eos=EOS)
    full = evaluate_cmlm(m, dev, uni)
    assert full["loss"] == pytest.approx(best["loss"], abs=1e-5)
    # the ratio metrics are the best epoch's (the restored model's), not recorded per epoch
    assert best["token_loss_r50"] == pytest.approx(full["token_loss_r50"], abs=1e-5)
    assert not any(k.endswith(("_r50", "_r100")) for r in res.history for k in r)
    fast = evaluate_cmlm(m, dev, uni, ratios=False)
    assert set(fast) == {k for k in full if not k.endswith(("_r50", "_r100"))}
    assert all(fast[k] == full[k] for k in fast)


def test_dev_masks_are_fixed_so_evaluation_is_repeatable():
    m = model().eval()
    task = copy_task(20, 30)
    uni = unigram_log_probs(task.train.tgt_ids, m.allowed, eos=EOS)
    a = evaluate_cmlm(m, make_eval_set(m, task.dev, batch_size=8, ratios=(0.5,), seed=4), uni)
    b = evaluate_cmlm(m, make_eval_set(m, task.dev, batch_size=8, ratios=(0.5,), seed=4), uni)
    c = evaluate_cmlm(m, make_eval_set(m, task.dev, batch_size=8, ratios=(0.5,), seed=5), uni)
    assert a == b and a["token_loss"] != c["token_loss"]
    assert set(a) == {"loss", "token_loss", "token_acc", "unigram_loss", "token_loss_r50", "token_acc_r50",
                      "unigram_loss_r50", "length_nll", "length_acc"}


@pytest.mark.parametrize("select_on", ["token_loss", "loss"])
def test_the_kept_epoch_minimises_the_selected_dev_metric(select_on):
    res = train_cmlm(model(), copy_task(40, 20), CMLMTrainConfig(epochs=4, batch_size=8, lr=3e-3, warmup_steps=0,
                                                                 patience=4, select_on=select_on))
    values = [r[f"dev_{select_on}"] for r in res.history]
    assert res.best_epoch == 1 + values.index(min(values)) and res.best[select_on] == min(values)


def test_early_stopping_and_subsampling():
    m = model()
    res = train_cmlm(m, copy_task(40, 20), CMLMTrainConfig(epochs=30, batch_size=8, lr=1e-6, warmup_steps=0,
                                                           patience=1, min_delta=1.0, max_train_pairs=24))
    assert len(res.history) == 2 and res.best_epoch == 1          # no gain above min_delta: stop after 1 bad epoch
    assert res.stats["train_pairs"] == 24 and res.stats["updates"] == 2 * 3


def test_dev_pairs_the_model_cannot_score_are_counted_not_scored():
    pairs = copy_pairs(10, 3) + [([3] * 9, [4, 5]), ([3, 4], [5] * 9), ([3], [4, 1, 5])]
    task = TranslationTask(dataset(copy_pairs(16, 0)), dataset(pairs), dataset(pairs), None, None)
    res = train_cmlm(model(), task, CMLMTrainConfig(epochs=1, batch_size=8))
    assert (res.stats["dev_pairs"], res.stats["dev_skipped_too_long"], res.stats["dev_skipped_disallowed"]) == (10, 2, 1)


def test_training_targets_the_model_cannot_score_are_an_error():
    task = TranslationTask(dataset(copy_pairs(6, 0) + [([3, 4], [5] * 9)]), dataset(copy_pairs(4, 1)), None, None, None)
    with pytest.raises(ValueError, match="1 training target\\(s\\) longer than the model's max_target_len 8"):
        train_cmlm(model(), task, CMLMTrainConfig(epochs=1))
    task = TranslationTask(dataset(copy_pairs(6, 0) + [([3, 4], [5, 1])]), dataset(copy_pairs(4, 1)), None, None, None)
    with pytest.raises(ValueError, match="disallowed id 1"):
        train_cmlm(model(), task, CMLMTrainConfig(epochs=1))


def test_training_is_seeded_and_leaves_the_global_generator_alone():
    cfg = CMLMTrainConfig(epochs=2, batch_size=16, lr=3e-3, warmup_steps=5)
    task = copy_task(48, 16)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    a = train_cmlm(model(), task, cfg, seed=3)
    assert torch.equal(torch.rand(1), before)
    b = train_cmlm(model(), task, cfg, seed=3)
    assert a.history[-1]["dev_loss"] == b.history[-1]["dev_loss"]
    assert a.history[-1]["train_loss"] == b.history[-1]["train_loss"]
    c = train_cmlm(model(), task, cfg, seed=4)            # another seed: other batches and masks
    assert c.history[-1]["train_loss"] != a.history[-1]["train_loss"]
    assert not hasattr(cfg, "seed")                       # only base.seed sets a seed (through the flow)


def test_learning_rate_schedules():
    """Warm-up to lr over warmup_steps, then flat, linear to ~0 at the last planned update, or
    lr * sqrt(warmup / step); the rate recorded after each epoch is the optimiser's."""
    f = {d: [lr_factor(s, cfg=CMLMTrainConfig(warmup_steps=4, decay=d), total=20) for s in range(20)]
         for d in ("constant", "linear", "inverse_sqrt")}
    for d in f:
        assert f[d][:4] == [0.25, 0.5, 0.75, 1.0]
    assert f["constant"][4:] == [1.0] * 16
    assert f["linear"][3] == 1.0 and f["linear"][-1] == pytest.approx(1 / 17)
    assert all(a > b for a, b in zip(f["linear"][3:], f["linear"][4:]))
    assert f["inverse_sqrt"][15] == pytest.approx(math.sqrt(4 / 16))
    assert lr_factor(0, cfg=CMLMTrainConfig(warmup_steps=0, decay="inverse_sqrt"), total=5) == 1.0
    task = copy_task(48, 16)                                      # 3 batches of 16 per epoch
    res = train_cmlm(model(), task, CMLMTrainConfig(epochs=2, batch_size=16, lr=1e-3, warmup_steps=2, patience=5,
                                                    decay="linear"))
    assert [r["lr"] for r in res.history] == pytest.approx([1e-3 * 3 / 5, 1e-3 * 0 / 5])


@pytest.mark.parametrize("kw, field", [({"lr": 0}, "lr"), ({"epochs": 0}, "epochs"), ({"batch_size": 0}, "batch_size"),
                                       ({"warmup_steps": -1}, "warmup_steps"), ({"patience": 0}, "patience"),
                                       ({"label_smoothing": 1.0}, "label_smoothing"),
                                       ({"length_weight": -0.1}, "length_weight"),
                                       ({"max_train_pairs": -1}, "max_train_pairs"),
                                       ({"dev_ratios": (0.5, 0.0)}, r"dev_ratios\[1\]"),
                                       ({"dev_ratios": (0.5, 0.501)}, "dev_ratios"),
                                       ({"unigram_alpha": 0}, "unigram_alpha")])
def test_train_config_checks_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        CMLMTrainConfig(**kw)
