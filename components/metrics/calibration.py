"""How often an interval procedure is wrong under a design like ours: simulated seeds x items data
with a known difference, for the calibration tests of :mod:`components.metrics.significance` and
for a researcher asking what a design of their own can show.

The model (per-item difference of two systems, one seed's item standard error ``SE = 1/sqrt(n)``):

    d[s, i] = mu + u_s + v_i + w_si,   u_s ~ N(0, (r SE)^2),  v_i ~ N(0, share),  w_si ~ N(0, 1 - share)

``r`` is the training-seed sd in units of the sentence SE, ``share`` the part of the per-item
variation shared by every seed (an item that favours ``a`` for every trained model); the two
systems' statistics are ``[base + d, 1]`` and ``[base, 1]`` with a per-item base shared by both
(pairing matters). With ``units="chains"`` the leading axis holds chains nested in the items (no
seed effect). With one seed the target is *this model's* difference ``mu + u_1``. Everything is
vectorised over replications and seeded: the same arguments give the same rates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats as _stats

from components.metrics.sentence_stats import mean_score
from components.metrics.significance import nested_moments, percentile_bootstrap


@dataclass(frozen=True)
class Design:
    seeds: int                 # k (chains per item when units == "chains")
    n: int                     # test items
    seed_sd: float = 0.0       # r: the seed sd in units of one seed's sentence SE
    share: float = 0.5         # the part of the per-item variance shared by every seed
    units: str = "seeds"


@dataclass(frozen=True)
class Rates:
    design: Design
    false_positive: float      # the null (mu = 0): intervals that exclude 0
    coverage: float            # mu = effect: intervals that contain the true difference
    power: float               # mu = effect: intervals wholly above 0
    effect_se: float           # the effect in sentence SEs
    replications: int


def simulate(design: Design, mu_se: float, replications: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, target)``: ``[R, k, n, 2]`` statistics of two systems and each replication's true
    difference (``mu``, or this model's ``mu + u_1`` with one seed), for ``mu = mu_se`` sentence SEs."""
    rng = np.random.default_rng(seed)
    R, k, n = replications, design.seeds, design.n
    se = 1 / np.sqrt(n)
    mu = mu_se * se
    u = np.zeros((R, k, 1)) if design.units == "chains" else rng.normal(0, design.seed_sd * se, size=(R, k, 1))
    v = rng.normal(0, np.sqrt(design.share), size=(R, 1, n))
    w = rng.normal(0, np.sqrt(1 - design.share), size=(R, k, n))
    base = rng.normal(0, 1, size=(R, 1, n)) + rng.normal(0, 0.3, size=(R, k, n))
    ones = np.ones_like(base)
    a = np.stack([base + mu + u + v + w, ones], -1)
    b = np.stack([base, ones], -1)
    target = mu + (u[:, 0, 0] if (k == 1 and design.units == "seeds") else 0.0)
    return a, b, np.broadcast_to(target, (R,)).copy()


Procedure = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]   # [R,k,n,2] x2 -> (low, high) [R]


def nested_t(confidence: float = 0.95, units: str = "seeds") -> Procedure:
    """The procedure of :func:`components.metrics.significance.paired_interval`, vectorised."""
    def run(a, b):
        est, var, df = nested_moments(a, b, mean_score, units)
        half = _stats.t.ppf(0.5 + confidence / 2, df) * np.sqrt(var)
        return est - half, est + half
    return run


def rates(design: Design, procedure: Procedure | None = None, *, effect_se: float = 3.0, replications: int = 1000,
          seed: int = 0, chunk: int = 250) -> Rates:
    """The false-positive rate (null), coverage and power (a true effect of ``effect_se`` SEs) of
    ``procedure`` (default: the nested t interval for the design's units) over ``replications``."""
    if procedure is None:
        procedure = nested_t(units=design.units)
    out = []
    for mu_se, s in ((0.0, seed), (effect_se, seed + 1)):
        hits = []
        for start in range(0, replications, chunk):
            m = min(chunk, replications - start)
            a, b, target = simulate(design, mu_se, m, s * 100_003 + start)
            low, high = procedure(a, b)
            hits.append(np.stack([(low > 0) | (high < 0), (low <= target) & (target <= high), low > 0], -1))
        out.append(np.concatenate(hits).mean(0))
    null, alt = out
    if design.seeds == 1 and design.units == "seeds":
        # one seed: the null is "this model's difference is 0": mu + u_1 = 0 needs its own draw
        fp = []
        for start in range(0, replications, chunk):
            m = min(chunk, replications - start)
            a, b, target = simulate(design, 0.0, m, seed * 100_003 + start)
            a = a.copy()
            a[..., 0] -= target[:, None, None]                  # centre: this model's true difference is 0
            low, high = procedure(a, b)
            fp.append((low > 0) | (high < 0))
        null = np.array([np.concatenate(fp).mean(), 0, 0])
    return Rates(design, float(null[0]), float(alt[1]), float(alt[2]), effect_se, replications)


def method_false_positive(design: Design, procedure: Procedure | None = None, *, replications: int = 1000,
                          seed: int = 0, chunk: int = 250) -> float:
    """With one seed: how often the interval excludes 0 when the *method* has no effect (mu = 0)
    but the trained model has its seed's own (the rate a one-seed verdict would have as evidence
    about the method)."""
    procedure = procedure or nested_t()
    fp = []
    for start in range(0, replications, chunk):
        m = min(chunk, replications - start)
        a, b, _ = simulate(design, 0.0, m, seed * 100_003 + start)
        low, high = procedure(a, b)
        fp.append((low > 0) | (high < 0))
    return float(np.concatenate(fp).mean())


def percentile(resamples: int = 1000, seed: int = 0) -> Procedure:
    """The superseded two-level percentile bootstrap (:func:`~components.metrics.significance.percentile_bootstrap`),
    one replication at a time (for the side-by-side comparison)."""
    def run(a, b):
        ivs = [percentile_bootstrap(x, y, mean_score, resamples=resamples, seed=seed + i) for i, (x, y) in enumerate(zip(a, b))]
        return np.array([iv.low for iv in ivs]), np.array([iv.high for iv in ivs])
    return run
