"""The paired bootstrap's interval covers the true difference at its nominal rate (issue 27).

Synthetic paired data with a known population difference: per-sentence accuracies of two systems
that share a sentence difficulty (so the pairing matters), many independent test sets, and the
fraction of 95% intervals that contain the true difference. With 400 test sets the standard error
of a coverage of 0.95 is 0.011, so the measured coverage must lie within 0.95 ± 0.035 (3 SE).
Measured (these tests' seeds, 2026-11-27): token accuracy 0.9575 (400 sets of n = 200 sentences),
span F1 0.955 (400 sets; true difference 5.14 points), 3 seeds per system with seed effects of
their own (two-level bootstrap) 0.950 (200 sets).
"""
from __future__ import annotations

import numpy as np
import pytest

from components.metrics.significance import Interval, f1_score, paired_bootstrap, ratio_score, seed_interval

TRIALS, N = 400, 200


def _accuracy_sets(rng, n: int, delta: float, seeds: int = 1, seed_sd: float = 0.0):
    """[seeds, n, 2] statistics ``[correct, tokens]`` for systems a and b; a's accuracy exceeds b's
    by ``delta`` in the population (per seed, a run effect of sd ``seed_sd`` each)."""
    tokens = rng.integers(5, 30, size=n).astype(float)
    difficulty = rng.normal(0.0, 1.0, size=n)                       # shared: the pairing matters
    out = []
    for p_shift in (delta / 2, -delta / 2):
        runs = []
        for _ in range(seeds):
            p = np.clip(0.7 + 0.1 * difficulty + p_shift + rng.normal(0, seed_sd), 0.01, 0.99)
            runs.append(np.stack([rng.binomial(tokens.astype(int), p).astype(float), tokens], -1))
        out.append(np.stack(runs))
    return out


def _true_delta_accuracy(delta: float) -> float:
    """The population difference of token accuracy, in points, by a large sample (the clip at 0.01
    and 0.99 makes it differ slightly from delta)."""
    rng = np.random.default_rng(12345)
    d = rng.normal(0.0, 1.0, size=2_000_000)
    w = rng.integers(5, 30, size=d.size).astype(float)
    pa = np.clip(0.7 + 0.1 * d + delta / 2, 0.01, 0.99)
    pb = np.clip(0.7 + 0.1 * d - delta / 2, 0.01, 0.99)
    return 100 * float((w * (pa - pb)).sum() / w.sum())


def test_the_interval_covers_the_true_difference_at_its_nominal_rate():
    rng = np.random.default_rng(0)
    true = _true_delta_accuracy(0.02)
    hits = 0
    for t in range(TRIALS):
        a, b = _accuracy_sets(rng, N, 0.02)
        iv = paired_bootstrap(a, b, ratio_score(), resamples=1000, seed=t)
        hits += iv.low <= true <= iv.high
    assert abs(hits / TRIALS - 0.95) <= 0.035, hits / TRIALS


def test_f1_intervals_cover_at_their_nominal_rate():
    """Span F1 is not a mean of per-sentence scores: the bootstrap resamples [tp, predicted, gold]."""
    rng = np.random.default_rng(1)
    # population: gold spans per sentence ~ Poisson(1); a finds each with prob .62, b with .55;
    # false positives Poisson(.3) for both. Its F1 difference, by a large sample:
    def draw(n, r):
        gold = r.poisson(1.0, size=n).astype(float)
        easy = r.uniform(0.4, 0.8, size=n)                          # shared per-sentence ease
        rows = []
        for p in (0.62, 0.55):
            tp = r.binomial(gold.astype(int), np.clip(easy + p - 0.6, 0, 1)).astype(float)
            fp = r.poisson(0.3, size=n).astype(float)
            rows.append(np.stack([tp, tp + fp, gold], -1))
        return rows
    big_a, big_b = draw(3_000_000, np.random.default_rng(99))
    f1 = f1_score()
    true = float(f1(big_a.sum(0)) - f1(big_b.sum(0)))
    hits = 0
    for t in range(TRIALS):
        a, b = draw(N, rng)
        iv = paired_bootstrap(a, b, f1, resamples=1000, seed=t)
        hits += iv.low <= true <= iv.high
    assert abs(hits / TRIALS - 0.95) <= 0.035, hits / TRIALS


def test_with_several_seeds_the_interval_also_covers_the_seed_variation():
    """Each run (seed) has an effect of its own; the two-level bootstrap (seeds, then sentences)
    covers the population difference; a sentence-only bootstrap of the seed mean would not."""
    rng = np.random.default_rng(2)
    true = _true_delta_accuracy(0.02)
    hits = 0
    for t in range(200):
        a, b = _accuracy_sets(rng, N, 0.02, seeds=3, seed_sd=0.01)
        iv = paired_bootstrap(a, b, ratio_score(), resamples=600, seed=t)
        assert iv.seeds == 3 and iv.n == N
        hits += iv.low <= true <= iv.high
    # 200 sets: SE .015; three seeds make the percentile interval of the seed level rough: >= .90
    assert 0.90 <= hits / 200 <= 0.995, hits / 200


def test_the_bootstrap_is_paired_and_seeded():
    rng = np.random.default_rng(3)
    a, b = _accuracy_sets(rng, 300, 0.0)
    assert paired_bootstrap(a, b, ratio_score(), seed=5) == paired_bootstrap(a, b, ratio_score(), seed=5)
    same = paired_bootstrap(a, a, ratio_score(), seed=5)
    assert same.estimate == same.low == same.high == 0.0             # a system against itself: no spread
    # pairing: b = a plus a constant shift on every sentence has a much narrower interval than two
    # independent systems of the same accuracies
    shifted = a.copy()
    shifted[..., 0] = np.minimum(shifted[..., 0] + 1, shifted[..., 1])
    paired = paired_bootstrap(shifted, a, ratio_score(), seed=0)
    _, other = _accuracy_sets(np.random.default_rng(4), 300, 0.0)
    unpaired = paired_bootstrap(shifted, other, ratio_score(), seed=0)
    assert paired.high - paired.low < 0.5 * (unpaired.high - unpaired.low)


def test_bad_inputs_are_errors():
    a = np.ones((10, 2))
    with pytest.raises(ValueError, match="same seeds and sentences"):
        paired_bootstrap(a, np.ones((9, 2)), ratio_score())
    with pytest.raises(ValueError, match="non-finite"):
        paired_bootstrap(a * np.nan, a, ratio_score())
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap(a, a, ratio_score(), confidence=1.5)


def test_seed_interval_is_a_t_interval():
    iv = seed_interval(np.array([1.0, 2.0, 3.0]))
    assert iv.estimate == 2.0 and iv.n == 3
    assert iv.high - 2.0 == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))
    assert isinstance(iv, Interval) and "n = 3" in str(iv)


def test_bleu_from_summed_sentence_statistics_is_sacrebleus_corpus_bleu():
    from components.metrics.bleu import corpus_bleu, sentence_stats
    from components.metrics.significance import bleu_score
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
    from components.metrics.significance import load_stats, save_stats
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
    from components.metrics.significance import pearson_score, rank_stats
    rng = np.random.default_rng(5)
    x = rng.normal(size=80)
    y = x + rng.normal(size=80)
    y[:10] = y[0]                                        # ties: average ranks, as scipy
    rho = float(pearson_score(rank_stats(x, y).sum(0)))
    assert rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert float(pearson_score(rank_stats(x, np.ones(80)).sum(0))) == 0.0     # no variance: 0, not NaN
