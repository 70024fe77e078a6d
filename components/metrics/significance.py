"""Confidence intervals for a difference of two systems' scores that keep their nominal rate under
the designs this project runs: one trained model, several training seeds, samplers' chains nested in
source sentences (issue 50).

A score on a test set is a function of per-item *sufficient statistics* summed over the set:
accuracy is ``correct / tokens`` (columns ``[correct, tokens]``), span F1 is
``2 tp / (predicted + gold)`` (``[tp, predicted, gold]``), a mean energy is ``energy / 1``, corpus
BLEU is sacrebleu's function of summed n-gram counts. Each system gives ``[seeds, n, d]`` statistics
on the same ``n`` items (``[n, d]`` for one run).

**The estimate** is the mean over seeds of the per-seed differences ``score(a_s) - score(b_s)``.

**Its variance** is that of a crossed random-effects design, seeds x items (the item effect shared
by every seed, the seed effect shared by every item, and their interaction; Bouthillier et al. 2021,
"Accounting for Variance in Machine Learning Benchmarks", treat training seeds as such a random
factor). Linearising the score, a per-seed difference is ``mu + u_s + v_i + w_si`` averaged over
items, so ``Var = s_u^2 / k + s_v^2 / n + s_w^2 / (n k)``. It is estimated without any resampling,
from two moments:

- ``V_all``: the delete-one-item jackknife variance (Quenouille 1956; Tukey 1958; Efron & Stein 1981)
  of the mean-over-seeds difference, every seed losing the same item — ``s_v^2/n + s_w^2/(nk)``.
  The jackknife handles scores that are not means of per-item scores (F1, BLEU, ratios) by
  re-scoring the summed statistics with one item left out.
- ``V_seed = S^2 / k``: the between-seed variance of the per-seed differences over ``k`` —
  ``s_u^2/k + s_w^2/(nk)``. It counts the interaction a second time (conservative where seeds x
  items interaction dominates; subtracting it, with a moment estimate from each seed's own
  jackknife, measured 9–12% false positives at 3 seeds).

The interval is ``estimate ± t_{df} sqrt(V_all + V_seed)`` with Welch–Satterthwaite degrees of
freedom (Satterthwaite 1946; ``k - 1`` for the seed part, ``n - 1`` for the item part), computed
with the seed part at its one-sided 80% upper confidence bound (:data:`DF_GUARD`): with 2–4 seed
degrees of freedom the plain estimate is small exactly when the interval is too narrow, and then
inflates df (7–8% false positives at 3 seeds, measured). With 3 seeds and seed-dominated variance
this is the t interval over seeds with 2 degrees of freedom, which a percentile bootstrap of 3 seeds
cannot imitate: resampling 3 values with replacement understates their variance by a third, and its
quantiles are those of at most 10 distinct means (:func:`percentile_bootstrap`, the procedure this
replaced, with 11–20% false positives at 3 seeds; ``tests/metrics/test_significance.py``).

Designs (``units``):

- ``"seeds"`` with ``k >= 2``: speaks for the *method* (training seeds are a random factor).
- ``"seeds"`` with ``k == 1``: no interval can hold training-seed variance; the interval is of
  *this trained model*'s expected difference over test items (item variance only, ``df = n - 1``).
  Callers (the report kit) say so and never count it as evidence about the method.
- ``"chains"``: the leading axis holds MCMC chains nested in the items (source sentences), not
  independent replicates of training: the item is the unit, the chains are averaged inside it
  (``V_all`` alone, ``df = n - 1``), as a cluster (sentence) bootstrap would.

Nothing is random: the interval is a deterministic function of the data (no resampler seed, so no
verdict can flip with one). The calibration — false-positive rate, coverage and power per design —
is measured by simulation in ``tests/metrics/test_significance.py`` (a small grid in the default
suite, the full grid under ``-m slow``), and :meth:`Interval.p_value` gives the p-values the report
kit's Holm adjustment uses, from the same t statistic as the interval.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as _stats

from components.metrics.sentence_stats import (BLEU_COLUMNS, Score, Stats, bleu_score, f1_score,  # noqa: F401
                                               load_stats, mean_score, pearson_score, rank_stats, ratio_score,
                                               save_stats)

@dataclass(frozen=True)
class Interval:
    """A difference ``a - b``, its confidence interval, and the t statistic's ingredients behind it
    (``se``, ``df``) from which :meth:`p_value` tests any stated size on the same footing."""
    estimate: float          # the difference on the data as they are (the mean over seeds with several)
    low: float
    high: float
    confidence: float
    n: int                   # test items (sentences)
    seeds: int = 1           # runs per system (chains per item when units == "chains")
    resamples: int = 0       # bootstrap resamples behind a percentile interval; 0 for the analytic ones
    se: float = math.nan     # standard error of ``estimate`` (nan: unknown, derived from the width)
    df: float = math.inf     # degrees of freedom of the t quantile
    units: str = "seeds"     # "seeds" (training runs) or "chains" (nested in the items)
    identical: bool = False  # a and b were the same numbers on every item and seed
    fingerprint: str = ""    # the evidence (the pair of arrays), for counting it once

    def __str__(self) -> str:
        runs = ""
        if self.units == "chains":
            runs = f", {self.seeds} chains per item"
        elif self.seeds > 1:
            runs = f", {self.seeds} seeds"
        return (f"Δ {self.estimate:+.2f} [{self.low:+.2f}, {self.high:+.2f}] "
                f"({100 * self.confidence:.0f}% CI, n = {self.n}{runs})")

    @property
    def one_model(self) -> bool:
        """True when the interval holds no training-seed variance (one seed): it speaks for this
        trained model only."""
        return self.units == "seeds" and self.seeds == 1

    def _se_df(self) -> tuple[float, float]:
        if math.isfinite(self.se):
            return self.se, self.df
        q = _stats.norm.ppf(0.5 + self.confidence / 2)
        return (self.high - self.low) / (2 * q), math.inf

    def p_value(self, value: float, side: Literal["greater", "less"]) -> float:
        """One-sided p-value of the hypothesis that the true difference is ``<= value`` (``side =
        "greater"``: evidence that it exceeds ``value``) or ``>= value`` (``"less"``), from the same
        t statistic as the interval: the interval lies above ``value`` exactly when
        ``p_value(value, "greater") < (1 - confidence) / 2``."""
        se, df = self._se_df()
        diff = self.estimate - value
        if side not in ("greater", "less"):
            raise ValueError(f"p_value: side must be 'greater' or 'less', got {side!r}")
        if side == "less":
            diff = -diff
        if se <= 0:
            return 0.0 if diff > 0 else 1.0
        return float(_stats.t.sf(diff / se, df)) if math.isfinite(df) else float(_stats.norm.sf(diff / se))

    def width_for(self, value: float) -> float:
        """How many times more data (seeds and test items alike) the interval would need to exclude
        ``value`` if the estimate held: ``(half-width / |estimate - value|)^2`` (inf when equal)."""
        gap = abs(self.estimate - value)
        half = (self.high - self.low) / 2
        return math.inf if gap == 0 else (half / gap) ** 2


def _as_runs(x: np.ndarray, name: str, fn: str = "paired_interval") -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3:
        raise ValueError(f"{fn}: {name} must be [n], [n, d] or [seeds, n, d], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{fn}: {name} holds non-finite statistics")
    return x


def _fingerprint(a: np.ndarray, b: np.ndarray) -> str:
    """The evidence a comparison rests on, independent of which side is ``a``: two comparisons with
    the same fingerprint are the same numbers, counted once by the report kit."""
    h = sorted(hashlib.sha1(np.ascontiguousarray(x).tobytes() + str(x.shape).encode()).hexdigest() for x in (a, b))
    return hashlib.sha1("".join(h).encode()).hexdigest()[:16]


DF_GUARD = 0.2       # the chi-square quantile of the seed component's upper bound in the df (nested_moments)


def nested_moments(a: np.ndarray, b: np.ndarray, score: Score, units: str = "seeds"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The estimate, its variance and the Satterthwaite degrees of freedom of the mean-over-seeds
    difference ``score(a_s) - score(b_s)`` (module doc), vectorised over leading axes:
    ``a``, ``b``: ``[..., k, n, d]`` -> three arrays of shape ``[...]``. Costs ``O(k n d)``."""
    k, n = a.shape[-3], a.shape[-2]
    A, B = a.sum(-2), b.sum(-2)                                           # [..., k, d]
    per_seed = score(A) - score(B)                                        # [..., k]
    est = per_seed.mean(-1)
    loo = score(A[..., None, :] - a) - score(B[..., None, :] - b)         # [..., k, n] leave item i out

    def jack(x: np.ndarray) -> np.ndarray:                                # [..., n] -> jackknife variance
        return (n - 1) / n * ((x - x.mean(-1, keepdims=True)) ** 2).sum(-1)

    v_all = jack(loo.mean(-2))
    if k == 1 or units == "chains":
        return est, v_all, np.full_like(est, float(n - 1))
    v_seed = per_seed.var(-1, ddof=1) / k
    var = v_all + v_seed
    # Satterthwaite's df with the seed part at its one-sided 80% upper confidence bound: with 2-4
    # seed degrees of freedom, the plain estimate is small exactly when the interval is too narrow
    # and then inflates df (7-8% false positives at 3 seeds, measured; 4-6% with the bound).
    up = v_seed * (k - 1) / _stats.chi2.ppf(DF_GUARD, k - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (v_all + up) ** 2 / (v_all ** 2 / (n - 1) + up ** 2 / (k - 1))
    df = np.where(np.isfinite(df) & (df > 0), df, float(n - 1))
    return est, var, df


def paired_interval(a: np.ndarray, b: np.ndarray, score: Score, *, confidence: float = 0.95,
                    units: Literal["seeds", "chains"] = "seeds") -> Interval:
    """The confidence interval of ``score(a) - score(b)`` under the design the data come from
    (module doc): ``a``, ``b`` are ``[n, d]`` (one run each), ``[seeds, n, d]`` (runs paired by
    seed index and item) or, with ``units="chains"``, ``[chains, n, d]`` (chains nested in the
    items). ``[n]`` is read as one statistic per item with ``score`` applied to its sum. The same
    inputs always give the same interval."""
    if not 0 < confidence < 1:
        raise ValueError(f"paired_interval: confidence must be in (0, 1), got {confidence}")
    if units not in ("seeds", "chains"):
        raise ValueError(f"paired_interval: units must be 'seeds' or 'chains', got {units!r}")
    a, b = _as_runs(a, "a"), _as_runs(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired_interval: a and b must hold the same seeds and sentences, got {a.shape} and {b.shape}")
    k, n, _ = a.shape
    if n < 2:
        raise ValueError(f"paired_interval: need at least 2 items, got {n}")
    est, var, df = (float(x) for x in nested_moments(a, b, score, units))
    se = math.sqrt(max(var, 0.0))
    half = float(_stats.t.ppf(0.5 + confidence / 2, df)) * se
    return Interval(est, est - half, est + half, confidence, n, k, 0, se, df, units,
                    bool(np.array_equal(a, b)), _fingerprint(a, b))


def percentile_bootstrap(a: np.ndarray, b: np.ndarray, score: Score, *, resamples: int = 2000,
                         confidence: float = 0.95, seed: int = 0, chunk: int = 250) -> Interval:
    """The two-level percentile bootstrap this project used before issue 50: seeds with
    replacement, then sentences, and the percentiles of the resampled mean difference. Kept so the
    calibration tests can show side by side why it was replaced (with 3 seeds and seed-dominated
    variance it excludes a null difference 11–20% of the time, nominal 5%; with 1 seed it holds no
    seed variance at all); reports use :func:`paired_interval`."""
    if not 0 < confidence < 1:
        raise ValueError(f"percentile_bootstrap: confidence must be in (0, 1), got {confidence}")
    if resamples < 100:
        raise ValueError(f"percentile_bootstrap: resamples must be >= 100, got {resamples}")
    a, b = _as_runs(a, "a", "percentile_bootstrap"), _as_runs(b, "b", "percentile_bootstrap")
    if a.shape != b.shape:
        raise ValueError(f"percentile_bootstrap: a and b must hold the same seeds and sentences, got {a.shape} and {b.shape}")
    k, n, _ = a.shape
    diff = lambda sa, sb: score(sa) - score(sb)          # noqa: E731  [...] summed stats -> differences
    estimate = float(np.mean(diff(a.sum(1), b.sum(1))))
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(m, n))                       # shared by both systems: paired
        if k > 1:
            runs = rng.integers(0, k, size=(m, k))                   # seeds with replacement
            sa = a[runs[:, :, None], idx[:, None, :]].sum(2)        # [m, k, d]
            sb = b[runs[:, :, None], idx[:, None, :]].sum(2)
            out[done:done + m] = diff(sa, sb).mean(1)
        else:
            out[done:done + m] = diff(a[0][idx].sum(1), b[0][idx].sum(1))
        done += m
    tail = (1 - confidence) / 2
    low, high = np.quantile(out, [tail, 1 - tail])
    return Interval(estimate, float(low), float(high), confidence, n, k, resamples)


def seed_interval(diffs: np.ndarray, confidence: float = 0.95) -> Interval:
    """A t interval of the mean of per-seed differences (no per-sentence statistics: e.g. a BLEU
    difference per seed); ``n`` is the number of seeds. Needs at least 2."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or len(d) < 2 or not np.isfinite(d).all():
        raise ValueError(f"seed_interval: need >= 2 finite per-seed differences, got {d!r}")
    se = float(d.std(ddof=1) / np.sqrt(len(d)))
    half = _stats.t.ppf(0.5 + confidence / 2, len(d) - 1) * se
    m = float(d.mean())
    return Interval(m, m - half, m + half, confidence, len(d), len(d), 0, se, float(len(d) - 1))
