"""Exact E_raw training/evaluation against brute-force enumeration on tiny spaces."""
import dataclasses
import itertools
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from components.data.synthetic import PalindromeConfig, PalindromeGenerator, SequenceSet
from components.models.mlm import BiLSTMMLM, BiLSTMMLMConfig
from components.training.mlm_exact import (EXACT_OBJECTIVES, CellConfig, ExactTrainConfig, ProjectionConfig,
                                           cell_data, dataset_objective, enumerate_sequences, evaluate_exact,
                                           kl_to_teacher, log_free_conditionals, log_partition, log_true_conditionals,
                                           neg_mlm, neg_pll, objective_loss, raw_energy, run_cell, run_projection,
                                           train_exact)

V = 3


def make_model(seed=0, scale=3.0):
    """A small BiLSTM MLM with weights scaled up so that energies differ clearly between sequences."""
    m = BiLSTMMLM(V, BiLSTMMLMConfig(embedding_dim=4, hidden=5), seed=seed).double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(scale)
    return m


def brute_energy(model, seq):
    """E_raw of one sequence (a list of ids) from its own conditionals call: -sum_t logit_t[y_t]."""
    y = torch.tensor([seq], dtype=torch.long)
    with torch.no_grad():
        logits = model.conditionals(y, torch.ones_like(y, dtype=torch.bool), None, torch.zeros(1, dtype=torch.long))
    return -sum(float(logits[0, t, w]) for t, w in enumerate(seq))


def brute_log_z(model, lengths):
    return float(torch.logsumexp(torch.tensor([-brute_energy(model, list(s)) for n in lengths
                                               for s in itertools.product(range(V), repeat=n)],
                                             dtype=torch.float64), 0))


def ragged_batch():
    """Three sequences of lengths 3, 1, 2 (padding holds junk ids)."""
    tokens = torch.tensor([[2, 0, 1], [1, 2, 2], [0, 2, 1]])
    mask = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    return tokens, mask


def brute_true_log_cond(model, seq, t):
    """log p(y_t = w | y_\\t) for every w by V separate energies: [V]."""
    e = torch.tensor([brute_energy(model, seq[:t] + [w] + seq[t + 1:]) for w in range(V)], dtype=torch.float64)
    return torch.log_softmax(-e, 0)


def brute_free_log_cond(model, seq, t):
    y = torch.tensor([seq])
    with torch.no_grad():
        logits = model.conditionals(y, torch.ones_like(y, dtype=torch.bool), None, torch.zeros(1, dtype=torch.long))
    return torch.log_softmax(logits[0, t], 0)


def rows(tokens, mask):
    return [tokens[b, : int(mask[b].sum())].tolist() for b in range(tokens.shape[0])]


class OracleTeacher:
    """An MLM whose free conditionals are, by construction, a model's true conditionals under E_raw
    (they do not read y_t either, so it is single-site)."""
    single_site = True

    def __init__(self, model):
        self.model, self.vocab_size, self.mask_id = model, model.vocab_size, model.mask_id

    def encode(self, batch):
        return None

    def eval(self):
        return self

    def conditionals(self, tokens, mask, context, rows):
        return log_true_conditionals(self.model, tokens, mask)


def test_enumerate_sequences_order_and_cap():
    assert enumerate_sequences(V, 3).tolist() == [list(s) for s in itertools.product(range(V), repeat=3)]
    with pytest.raises(ValueError, match="cap of 5000000"):
        enumerate_sequences(39, 6)


@pytest.mark.parametrize("lengths", [[3], [1, 2, 3], [2]])
def test_log_partition_equals_brute_force(lengths):
    model = make_model()
    with torch.no_grad():
        got = float(log_partition(model, V, lengths))
        assert math.isclose(got, brute_log_z(model, lengths), rel_tol=0, abs_tol=1e-10)
        assert math.isclose(float(log_partition(model, V, lengths, chunk=4)), got, rel_tol=0, abs_tol=1e-10)


def test_log_partition_chunked_gradient_equals_unchunked():
    model = make_model()
    grads = []
    for chunk in (1000, 5):                       # one block, and checkpointed blocks
        model.zero_grad()
        log_partition(model, V, [1, 2, 3], chunk=chunk).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=0, atol=1e-10)
    assert any(bool(g.abs().sum() > 0) for g in grads[0])


def test_log_partition_errors():
    model = make_model()
    with pytest.raises(ValueError, match="cap of 20"):
        log_partition(model, V, [1, 2, 3], max_sequences=20)
    with pytest.raises(ValueError, match="V = 4 but the model has vocab_size 3"):
        log_partition(model, 4, [2])
    with pytest.raises(ValueError, match="lengths must be distinct integers"):
        log_partition(model, V, [2, 2])


def test_raw_energy_and_ll_are_exact():
    model = make_model()
    tokens, mask = ragged_batch()
    with torch.no_grad():
        e = raw_energy(model, tokens, mask)
        ll = objective_loss("ll", model, tokens, mask, (1, 2, 3))
    log_z = brute_log_z(model, [1, 2, 3])
    for b, seq in enumerate(rows(tokens, mask)):
        assert math.isclose(float(e[b]), brute_energy(model, seq), rel_tol=0, abs_tol=1e-10)
        assert math.isclose(float(ll[b]), brute_energy(model, seq) + log_z, rel_tol=0, abs_tol=1e-10)
    # the model's distribution over all sequences of lengths 1..3 sums to one
    total = sum(math.exp(-brute_energy(model, list(s)) - log_z) for n in (1, 2, 3)
                for s in itertools.product(range(V), repeat=n))
    assert math.isclose(total, 1.0, abs_tol=1e-10)


def test_true_conditionals_and_pll_equal_a_loop_over_alternatives():
    model = make_model()
    tokens, mask = ragged_batch()
    with torch.no_grad():
        logc = log_true_conditionals(model, tokens, mask)
        pll = neg_pll(model, tokens, mask)
        pll_obj = objective_loss("pll", model, tokens, mask, (1, 2, 3))
    for b, seq in enumerate(rows(tokens, mask)):
        expected = 0.0
        for t in range(len(seq)):
            ref = brute_true_log_cond(model, seq, t)
            assert torch.allclose(logc[b, t], ref, rtol=0, atol=1e-10)
            expected -= float(ref[seq[t]])
        assert math.isclose(float(pll[b]), expected, rel_tol=0, abs_tol=1e-10)
    assert torch.equal(pll, pll_obj)
    # the true conditionals are the exact joint's: p(y_t = w | y_\t) = p(y^{t,w}) / sum_w' p(y^{t,w'})
    seq = rows(tokens, mask)[0]
    joint = torch.tensor([-brute_energy(model, [w] + seq[1:]) for w in range(V)], dtype=torch.float64)
    assert torch.allclose(logc[0, 0], joint - torch.logsumexp(joint, 0), atol=1e-10, rtol=0)


def test_mlm_equals_a_loop_over_free_conditionals():
    model = make_model()
    tokens, mask = ragged_batch()
    with torch.no_grad():
        mlm = neg_mlm(model, tokens, mask)
        free = log_free_conditionals(model, tokens, mask)
    for b, seq in enumerate(rows(tokens, mask)):
        refs = [brute_free_log_cond(model, seq, t) for t in range(len(seq))]
        for t, ref in enumerate(refs):
            assert torch.allclose(free[b, t], ref, rtol=0, atol=1e-10)
        assert math.isclose(float(mlm[b]), -sum(float(r[w]) for r, w in zip(refs, seq)), rel_tol=0, abs_tol=1e-10)
    # free and true conditionals differ for a network whose logits read the context
    assert not torch.allclose(free[mask], log_true_conditionals(model, tokens, mask)[mask], atol=1e-3)


def test_kl_is_zero_for_a_teacher_with_the_true_conditionals_and_positive_otherwise():
    model = make_model()
    tokens, mask = ragged_batch()
    with torch.no_grad():
        assert float(kl_to_teacher(model, OracleTeacher(model), tokens, mask).abs().max()) < 1e-12
        other = make_model(seed=1)
        kl = kl_to_teacher(model, other, tokens, mask)
        kl_pl = objective_loss("kl_pl", model, tokens, mask, (1, 2, 3), teacher=other)
        pll = neg_pll(model, tokens, mask)
    for b, seq in enumerate(rows(tokens, mask)):
        expected = 0.0
        for t in range(len(seq)):
            lt, lm = brute_free_log_cond(other, seq, t), brute_true_log_cond(model, seq, t)
            expected += float((lt.exp() * (lt - lm)).sum())
        assert math.isclose(float(kl[b]), expected, rel_tol=0, abs_tol=1e-10)
        assert float(kl[b]) > 1e-3
    assert torch.allclose(kl_pl, kl + pll, rtol=0, atol=1e-12)


def test_kl_gradient_reaches_the_model_only():
    model, teacher = make_model(), make_model(seed=1)
    tokens, mask = ragged_batch()
    objective_loss("kl", model, tokens, mask, (1, 2, 3), teacher=teacher).mean().backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())


def test_evaluate_exact_metrics_are_dataset_means():
    model = make_model()
    tokens, mask = ragged_batch()
    data = SequenceSet(tokens, mask, (1, 2, 3))
    m = evaluate_exact(model, data, rows=7)              # small passes: several batches
    log_z = brute_log_z(model, [1, 2, 3])
    seqs = rows(tokens, mask)
    nll = sum(brute_energy(model, s) + log_z for s in seqs) / 3
    pll = -sum(float(brute_true_log_cond(model, s, t)[s[t]]) for s in seqs for t in range(len(s))) / 3
    mlm = -sum(float(brute_free_log_cond(model, s, t)[s[t]]) for s in seqs for t in range(len(s))) / 3
    assert math.isclose(m["nll"], nll, abs_tol=1e-10)
    assert math.isclose(m["neg_pll"], pll, abs_tol=1e-10)
    assert math.isclose(m["neg_mlm"], mlm, abs_tol=1e-10)
    assert math.isclose(dataset_objective("kl", model, data, teacher=OracleTeacher(model)), 0.0, abs_tol=1e-12)


def test_objective_errors():
    model = make_model()
    tokens, mask = ragged_batch()
    assert set(EXACT_OBJECTIVES) == {"ll", "pll", "mlm", "kl", "kl_pl"}
    with pytest.raises(ValueError, match="objective must be one of"):
        objective_loss("nce", model, tokens, mask, (1, 2, 3))
    with pytest.raises(ValueError, match="'kl' needs a teacher"):
        objective_loss("kl", model, tokens, mask, (1, 2, 3))
    with pytest.raises(ValueError, match="'pll' takes no teacher"):
        objective_loss("pll", model, tokens, mask, (1, 2, 3), teacher=model)

    class NotSingleSite(OracleTeacher):
        single_site = False
    with pytest.raises(ValueError, match="single-site"):
        raw_energy(NotSingleSite(model), tokens, mask)
    with pytest.raises(ValueError, match="lr"):
        ExactTrainConfig(lr=0)
    with pytest.raises(ValueError, match="patience"):
        ExactTrainConfig(patience=0)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------

def tiny_palindromes(seed, n):
    gen = PalindromeGenerator(PalindromeConfig(vocab=V, length=3))
    return SequenceSet.full(gen.sample(n, torch.Generator().manual_seed(seed)))


def test_training_ll_reduces_held_out_nll_and_is_deterministic():
    train, dev, test = tiny_palindromes(0, 300), tiny_palindromes(1, 200), tiny_palindromes(2, 500)
    cfg = ExactTrainConfig(lr=2e-2, epochs=4, batch_size=50, ll_batch_size=None, patience=4)
    cfg_model = BiLSTMMLMConfig(embedding_dim=4, hidden=8)
    before = evaluate_exact(BiLSTMMLM(V, cfg_model, seed=0), test)["nll"]
    seen = []
    model, history = train_exact(BiLSTMMLM(V, cfg_model, seed=0), "ll", train, dev, cfg,
                                 on_epoch=lambda e, r: seen.append(e))
    after = evaluate_exact(model, test)["nll"]
    assert after < before - 0.2
    assert seen == [1, 2, 3, 4] and [r["epoch"] for r in history] == [1.0, 2.0, 3.0, 4.0]
    best = history[-1]["best_epoch"]
    assert dataset_objective("ll", model, dev) == history[best - 1]["dev_loss"]
    _, again = train_exact(BiLSTMMLM(V, cfg_model, seed=0), "ll", train, dev, cfg)
    assert [r["dev_loss"] for r in again] == [r["dev_loss"] for r in history]


def test_train_exact_rejects_bad_data():
    model = BiLSTMMLM(V, BiLSTMMLMConfig(embedding_dim=4, hidden=8), seed=0)
    good = tiny_palindromes(0, 10)
    with pytest.raises(ValueError, match="train_exact: train: tokens hold ids outside 0..2"):
        train_exact(model, "pll", SequenceSet.full(torch.full((2, 3), 3)), good)
    with pytest.raises(ValueError, match="support"):
        train_exact(model, "pll", good, SequenceSet(good.tokens, good.mask, (1, 2, 3)))
    with pytest.raises(ValueError, match="needs a teacher"):
        train_exact(model, "kl_pl", good, good)


SMALL = CellConfig(model=BiLSTMMLMConfig(embedding_dim=4, hidden=8), vocab=V, length=3, dev_size=60, test_size=100,
                   train=ExactTrainConfig(epochs=2, batch_size=32))


def test_run_cell_synthetic():
    out = run_cell("hmm_low", 64, "pll", seed=3, cfg=SMALL)
    assert set(out) == {"nll", "neg_pll", "neg_mlm", "true_nll", "epochs", "best_epoch", "best_dev_loss",
                        "train_seconds", "train_size", "per_sequence"}
    assert out["epochs"] == 2 and out["train_size"] == 64 and 1 <= out["best_epoch"] <= 2
    # the per-sequence statistics (the report's bootstrap units) average to the reported means
    per = out["per_sequence"]
    assert per.shape[0] == len(cell_data("hmm_low", 64, 3, SMALL).test.tokens)
    assert math.isclose(float(per[:, 0].mean()), out["nll"], rel_tol=1e-6)     # float32 sums
    data = cell_data("hmm_low", 64, 3, SMALL)
    assert math.isclose(out["true_nll"], float(-data.generator.log_prob(data.test.tokens).mean()), rel_tol=1e-12)
    # a seed's test set does not depend on the train size
    assert torch.equal(cell_data("hmm_low", 10, 3, SMALL).test.tokens, data.test.tokens)
    with pytest.raises(ValueError, match="run_projection"):
        run_cell("hmm_low", 64, "kl", seed=3, cfg=SMALL)


def test_run_cell_phonemes(tmp_path):
    for split, rows_ in {"train": [["K", "AE1", "T"], ["AH0"], ["T", "AE"], ["K", "AE", "T", "S"]] * 5,
                         "dev": [["K", "AE"], ["T"]], "test": [["T", "AE", "K"], ["AE"], ["K", "S", "T"]]}.items():
        pq.write_table(pa.table({"phonemes": pa.array(rows_, pa.list_(pa.string()))}), tmp_path / f"{split}.parquet")
    cfg = dataclasses.replace(SMALL, phoneme_dir=str(tmp_path), phoneme_max_len=3)
    data = cell_data("phonemes", 12, 0, cfg)
    assert data.vocab_size == 5 and data.train.support == (1, 2, 3) and len(data.train) == 12
    out = run_cell("phonemes", 12, "ll", seed=0, cfg=cfg)
    assert "true_nll" not in out and math.isfinite(out["nll"])
    with pytest.raises(ValueError, match="n_train = 100 but"):
        cell_data("phonemes", 100, 0, cfg)


def test_run_projection_protocol():
    seen = []
    cfg = ProjectionConfig(cell=SMALL, pretrain_size=200, train_sizes=(20, 40))
    out = run_projection("palindrome", 0, cfg, on_epoch=lambda e, r: seen.append((r["objective"], r["train_size"])))
    assert [(r["objective"], r["train_size"]) for r in out["runs"]] == [
        (o, n) for n in (20, 40) for o in ("pll", "kl", "kl_pl")]
    assert out["pretrain"]["train_size"] == 200 and math.isfinite(out["pretrain"]["nll"])
    assert out["true_nll"] == out["pretrain"]["true_nll"]
    assert ("mlm", 200) in seen and ("kl_pl", 40) in seen
    with pytest.raises(ValueError, match="objectives"):
        ProjectionConfig(objectives=("ll",))
