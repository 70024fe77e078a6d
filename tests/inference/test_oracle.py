"""Instance-level oracle tuning (components.inference.oracle) against brute force: explicit Python
loops over every candidate with exact rational qualities, and corpus metrics recomputed with
components.metrics.tagging on the selected predictions."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest
import torch

from components.inference.gd_config import GDConfig
from components.inference.gradient_descent import gradient_descent
from components.inference.oracle import (corpus_score, instance_counts, instance_quality, oracle_select,
                                         oracle_tune)
from components.metrics.tagging import accuracy, span_f1, spans
from components.structures import linear_chain as lc

SPAN_LABELS = ["O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B"]
ACC_LABELS = ["N", "V", "D", "*"]


def _quality(pred: list[str], gold: list[str], metric: str) -> Fraction:
    if metric == "accuracy":
        return Fraction(sum(p == g and g != "*" for p, g in zip(pred, gold)), len(gold))
    gs, ps = spans(gold), spans(pred)
    if not gs and not ps:
        return Fraction(1)
    return Fraction(2 * len(gs & ps), len(gs) + len(ps))


def _grid(seed: int, labels: list[str], C=3, R=2, K=3, B=5, N=5):
    rng = random.Random(seed)
    L = len(labels)
    lengths = [rng.randint(1, N) for _ in range(B)]
    mask = torch.tensor([[t < n for t in range(N)] for n in lengths])
    gold = torch.tensor([[rng.randrange(L) if t < n else 0 for t in range(N)] for n in lengths])
    pred = torch.zeros(C, R, K, B, N, dtype=torch.long)
    for idx in range(C * R * K * B):
        c, r, k, b = (idx // (R * K * B), idx // (K * B) % R, idx // B % K, idx % B)
        for t in range(lengths[b]):
            # mostly gold with noise, so qualities collide and ties need the tie-breaks
            pred[c, r, k, b, t] = gold[b, t] if rng.random() < 0.6 else rng.randrange(L)
    energy = torch.tensor([float(rng.randint(-2, 0)) for _ in range(C * R * K * B)],
                          dtype=torch.float64).view(C, R, K, B)
    relaxed = energy + torch.rand(C, R, K, B, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    vit = torch.full((B,), -3.0, dtype=torch.float64)
    return pred, gold, mask, lengths, energy, relaxed, vit


def _tags(ids, n, labels):
    return [labels[i] for i in ids[:n].tolist()]


@pytest.mark.parametrize("metric,labels", [("accuracy", ACC_LABELS), ("span_f1", SPAN_LABELS)])
@pytest.mark.parametrize("seed", range(6))
def test_oracle_select_matches_brute_force(metric, labels, seed):
    C, R, K, B = 3, 2, 3, 5
    lrs = (10.0, 1.0, 5.0)                  # not sorted: ties must go to the smaller *value*
    checkpoints = (5, 10, 20)
    pred, gold, mask, lengths, energy, relaxed, vit = _grid(seed, labels, C, R, K, B)
    counts = instance_counts(pred, gold, mask, labels, metric)
    assert counts.shape == (C, R, K, B, 3)
    sel = oracle_select(counts, energy, lrs=lrs, checkpoints=checkpoints, relaxed_energy=relaxed,
                        viterbi_energy=vit)
    gold_tags = [_tags(gold[b], lengths[b], labels) for b in range(B)]

    def q(c, r, k, b):
        return _quality(_tags(pred[c, r, k, b], lengths[b], labels), gold_tags[b], metric)

    def corpus(choice):          # choice: list of (c, r, k) per instance
        preds = [_tags(pred[c, r, k, b], lengths[b], labels) for b, (c, r, k) in enumerate(choice)]
        if metric == "span_f1":
            return span_f1(gold_tags, preds)["f1"]
        ok = sum(p == g and g != "*" for ps, gs in zip(preds, gold_tags) for p, g in zip(ps, gs))
        return 100 * ok / sum(lengths)

    # per N: best (r, k) per instance and checkpoint
    for c in range(C):
        choice = []
        for b in range(B):
            best = min(((r, k) for r in range(R) for k in range(K)),
                       key=lambda rk: (-q(c, rk[0], rk[1], b), float(energy[c, rk[0], rk[1], b]), lrs[rk[1]], rk[0]))
            choice.append((c, *best))
            assert int(sel.per_n.checkpoint[c, b]) == c
            assert (int(sel.per_n.restart[c, b]), int(sel.per_n.lr[c, b])) == best
            assert sel.per_n.energy[c, b] == energy[c, best[0], best[1], b]
            assert sel.per_n.relaxed_energy[c, b] == relaxed[c, best[0], best[1], b]
            assert sel.per_n.search_error[c, b] == energy[c, best[0], best[1], b] - vit[b]
        assert float(sel.per_n.score[c]) == pytest.approx(corpus(choice), abs=1e-9)
    # full oracle: best (N, r, k) per instance
    choice = []
    for b in range(B):
        best = min(((c, r, k) for c in range(C) for r in range(R) for k in range(K)),
                   key=lambda crk: (-q(*crk, b), float(energy[crk + (b,)]), checkpoints[crk[0]], lrs[crk[2]], crk[1]))
        choice.append(best)
        assert (int(sel.full.checkpoint[b]), int(sel.full.restart[b]), int(sel.full.lr[b])) == best
        assert sel.full.energy[b] == energy[best + (b,)]
    assert float(sel.full.score) == pytest.approx(corpus(choice), abs=1e-9)
    rows = sel.rows()
    assert [r["N"] for r in rows] == [5.0, 10.0, 20.0, "oracle"]
    assert rows[-1]["energy"] == pytest.approx(float(sel.full.energy.mean()))
    assert rows[0]["search_error"] == pytest.approx(float((sel.per_n.energy[0] - vit).mean()))


@pytest.mark.parametrize("seed", range(4))
def test_counts_agree_with_corpus_metrics(seed):
    pred, gold, mask, lengths, *_ = _grid(seed, SPAN_LABELS, C=1, R=1, K=1, B=8, N=7)
    counts = instance_counts(pred, gold, mask, SPAN_LABELS, "span_f1")[0, 0, 0]
    gold_tags = [_tags(gold[b], lengths[b], SPAN_LABELS) for b in range(8)]
    pred_tags = [_tags(pred[0, 0, 0, b], lengths[b], SPAN_LABELS) for b in range(8)]
    ref = span_f1(gold_tags, pred_tags)
    assert float(corpus_score(counts)) == pytest.approx(ref["f1"], abs=1e-9)
    assert int(counts[:, 1].sum()) == ref["n_pred_spans"] and int(counts[:, 2].sum()) == ref["n_gold_spans"]
    labels = ["N", "V", "D"]                     # no '*': plain token accuracy
    pred, gold, mask, lengths, *_ = _grid(seed, labels, C=1, R=1, K=1, B=8, N=7)
    counts = instance_counts(pred, gold, mask, labels, "accuracy")[0, 0, 0]
    ref = accuracy([_tags(gold[b], lengths[b], labels) for b in range(8)],
                   [_tags(pred[0, 0, 0, b], lengths[b], labels) for b in range(8)])
    assert float(corpus_score(counts)) == pytest.approx(ref["accuracy"], abs=1e-9)


def test_gold_other_label_is_never_correct_and_empty_instances_are_perfect():
    labels = ["N", "*"]
    gold = torch.tensor([[1, 0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    counts = instance_counts(torch.tensor([[1, 0]]), gold, mask, labels, "accuracy")
    assert counts.tolist() == [[1, 2, 2]]
    gold = torch.tensor([[0, 0]])                # all O: no gold spans
    counts = instance_counts(torch.tensor([[[0, 0]], [[1, 0]]]), gold, mask, ["O", "S-X"], "span_f1")
    assert counts.tolist() == [[[0, 0, 0]], [[0, 1, 0]]]
    assert instance_quality(counts).flatten().tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="out of range"):
        instance_counts(torch.tensor([[2, 0]]), gold, mask, ["O", "S-X"], "span_f1")
    with pytest.raises(ValueError, match="unknown metric"):
        instance_counts(gold, gold, mask, ["O", "S-X"], "bleu")


def test_oracle_tune_on_gradient_descent_outputs():
    g = torch.Generator().manual_seed(0)
    B, N, L = 6, 8, 4
    unary = torch.randn(B, N, L, generator=g, dtype=torch.float64) * 2
    trans = torch.randn(L, L, generator=g, dtype=torch.float64)
    mask = torch.arange(N)[None] < torch.tensor([8, 3, 5, 1, 8, 6])[:, None]
    vit, score = lc.viterbi(unary, trans, mask)
    labels = ["N", "V", "D", "A"]
    res = gradient_descent(unary, trans, mask, GDConfig(lrs=(100.0, 10.0, 1.0), checkpoints=(0, 5, 20), restarts=2),
                           generator=torch.Generator().manual_seed(1))
    sel = oracle_tune(res, vit, mask, labels, "accuracy", viterbi_energy=-score)
    assert torch.all(sel.per_n.search_error >= -1e-9) and torch.all(sel.full.search_error >= -1e-9)
    # the full oracle chooses among a superset: per instance and (for accuracy) in corpus
    qn = instance_quality(sel.per_n.counts)
    qf = instance_quality(sel.full.counts)
    assert torch.all(qf[None] >= qn)
    assert float(sel.full.score) >= float(sel.per_n.score.max())
    # gold = Viterbi: a candidate that reaches the optimum scores 100% on its instance
    hit = (res.labels == vit).all(-1)                    # [C, R, K, B]
    assert torch.all(qf[hit.flatten(0, 2).any(0)] == 1.0)
