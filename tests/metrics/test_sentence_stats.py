"""Per-item sufficient statistics: corpus BLEU from summed sentence statistics is sacrebleu's, the
statistics files round-trip and refuse bad shapes, rank statistics give Spearman's rho."""
from __future__ import annotations

import numpy as np
import pytest

from components.metrics.sentence_stats import bleu_score, load_stats, pearson_score, rank_stats, save_stats


def test_bleu_from_summed_sentence_statistics_is_sacrebleus_corpus_bleu():
    from components.metrics.bleu import corpus_bleu, sentence_stats
    rng = np.random.default_rng(3)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away"]
    refs = [" ".join(rng.choice(words, size=rng.integers(3, 12))) for _ in range(60)]
    for noise in (0.0, 0.3, 0.7, 0.97):                 # down to corpora with no 4-gram match (smoothing)
        hyps = [" ".join(w if rng.random() > noise else str(rng.choice(words)) + "x" for w in r.split()[: rng.integers(1, 14)])
                for r in refs]
        stats = sentence_stats(hyps, refs)
        assert stats.shape == (60, 10)
        assert float(bleu_score()(stats.sum(0))) == pytest.approx(corpus_bleu(hyps, refs).score, abs=1e-9)
        # vectorised over leading axes: each row of a batch is scored alone
        batch = np.stack([stats[:30].sum(0), stats[30:].sum(0)])
        assert bleu_score()(batch)[1] == pytest.approx(corpus_bleu(hyps[30:], refs[30:]).score, abs=1e-9)


def test_statistics_files_round_trip_and_refuse_bad_shapes(tmp_path):
    a, b = np.ones((5, 2)), np.zeros((3, 5, 2))
    save_stats(tmp_path / "s.npz", {"greedy": a, "beam": b}, ("correct", "tokens"))
    got = load_stats(tmp_path / "s.npz")
    assert got.columns == ("correct", "tokens") and np.array_equal(got["beam"], b)
    with pytest.raises(KeyError, match="soft"):
        got["soft"]
    with pytest.raises(ValueError, match="'bad'"):
        save_stats(tmp_path / "t.npz", {"bad": np.ones((5, 3))}, ("correct", "tokens"))
    with pytest.raises(ValueError, match="sentences"):
        save_stats(tmp_path / "t.npz", {"x": np.ones((5, 2)), "y": np.ones((4, 2))}, ("correct", "tokens"))
    with pytest.raises(FileNotFoundError, match="t.npz"):
        load_stats(tmp_path / "t.npz")


def test_rank_statistics_give_spearmans_rho():
    from scipy import stats
    rng = np.random.default_rng(5)
    x = rng.normal(size=80)
    y = x + rng.normal(size=80)
    y[:10] = y[0]                                        # ties: average ranks, as scipy
    rho = float(pearson_score(rank_stats(x, y).sum(0)))
    assert rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert float(pearson_score(rank_stats(x, np.ones(80)).sum(0))) == 0.0     # no variance: 0, not NaN
