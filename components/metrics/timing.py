r"""Side-by-side timing of methods that compute the same thing: the one benchmark harness.

:func:`compare` times several callables ("sides") on the same inputs, interleaved turn by turn
(A B A B ... : one round is one turn of every side, in the mapping's order), and forms per round
the ratio ``time(baseline) / time(ours)`` of each named (baseline, ours) pair from the turns of
that round, so slow drift of the machine (another process, thermal or frequency changes) hits
both sides of a ratio alike. Rounds repeat until, for every ratio, the inter-quartile range of
its per-round values lies within ``median * (1 +- rel_iqr)`` (after at least ``min_rounds``), or
the time cap ``max_seconds`` has passed (then the result says ``converged: False``), or
``max_rounds`` rounds. A ratio > 1 means "ours" is that many times faster than the baseline.

A turn is one call, or, for a side much shorter than ``min_turn_s``, that many back-to-back
calls (counted from the side's last warm-up call, at most ``MAX_CALLS``) with the turn's time
divided by their number: a millisecond call timed alone measures the clock and the scheduler.
CUDA work is synchronised before the clock is read. The clock is injectable (tests use a fake
one); the machine's load average (``os.getloadavg``) is recorded when the comparison starts.

Used by benchmarks (the ``bench`` stage) only, never by timed tests.
"""
from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from components.config import check_range, field_error

__all__ = ["TimingConfig", "compare", "quartiles", "ratio_metrics", "load_average", "MAX_CALLS"]

MAX_CALLS = 1000                # back-to-back calls per turn, at most


@dataclass(frozen=True)
class TimingConfig:
    """The stopping rule and warm-up of :func:`compare` (params: ``bench.timing``)."""
    rel_iqr: float = 0.10           # stop once every ratio's IQR lies within median * (1 +- rel_iqr)
    max_seconds: float = 30.0       # ... or once this much time has gone into the timed rounds
    min_rounds: int = 3             # rounds before either rule may stop (an IQR needs a few)
    max_rounds: int | None = None   # ... or after this many rounds (None: the time cap only)
    warmup: int = 1                 # untimed calls per side first
    min_turn_s: float = 0.0         # a side shorter than this runs back to back to fill its turn

    def __post_init__(self):
        check_range(self, positive=("rel_iqr", "max_seconds", "min_rounds", "max_rounds"),
                    nonnegative=("warmup", "min_turn_s"))
        if self.max_rounds is not None and self.max_rounds < self.min_rounds:
            raise field_error(self, "min_rounds", f"must be <= max_rounds ({self.max_rounds!r}), got {self.min_rounds!r}")


def quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    """(q1, median, q3) of ``xs`` (inclusive method: the quartiles of 3 values are the midpoints)."""
    if not xs:
        raise ValueError("quartiles: no values")
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, med, q3


def _iqr_rel(q1: float, med: float, q3: float) -> float:
    """The smallest r with [q1, q3] inside [med (1 - r), med (1 + r)]."""
    if med <= 0:
        return math.inf
    return max(med - q1, q3 - med) / med


def load_average() -> dict[str, float] | None:
    """The machine's 1, 5 and 15 minute load averages, ``{"1m", "5m", "15m"}`` (None where the OS
    has none)."""
    try:
        return dict(zip(("1m", "5m", "15m"), (float(x) for x in os.getloadavg())))
    except (AttributeError, OSError):
        return None


def _names(x: str | Sequence[str] | None, what: str, sides: Sequence[str]) -> list[str]:
    names = [x] if isinstance(x, str) else list(x or ())
    unknown = [n for n in names if n not in sides]
    if unknown:
        raise ValueError(f"compare: {what} {unknown} not among the sides {list(sides)}")
    return names


def compare(fns: Mapping[str, Callable[[], Any]], *, baseline: str | Sequence[str],
            ours: str | Sequence[str] | None = None, timing: TimingConfig | None = None,
            no_warmup: Sequence[str] = (), device: str = "cpu", clock: Callable[[], float] = time.perf_counter,
            **overrides: Any) -> dict[str, Any]:
    """Time the sides ``fns`` (name -> zero-argument callable) interleaved, in the mapping's order,
    round after round until every ratio is stable (see the module doc).

    Ratios: ``time(b) / time(o)`` per round for every ``b`` in ``baseline`` and ``o`` in ``ours``
    (default: every side that is not a baseline), named ``"b/o"``. ``timing`` (a
    :class:`TimingConfig`, with ``overrides`` of its fields as keywords, e.g. ``rel_iqr=0.05``)
    sets the stopping rule. ``no_warmup``: sides called without warm-up (a baseline so slow that
    its first call costs no more than any other; such a side is never run back to back).
    ``clock``: seconds, monotonic (``time.perf_counter``).

    Returns ``{"sides": {name: {"median_s", "q1_s", "q3_s", "calls"}}, "ratios": {"b/o": {"baseline",
    "ours", "median", "q1", "q3", "iqr_rel", "rounds", "converged"}}, "rounds", "converged", "elapsed_s",
    "load_avg_start", "rel_iqr", "max_seconds", "times": {name: [seconds per call, one per round]}}``:
    ``iqr_rel`` is the smallest r with the IQR inside median * (1 +- r); ``converged`` is
    ``iqr_rel <= rel_iqr`` (per ratio, and for all of them); ``elapsed_s`` is the time spent in
    the timed rounds (not the warm-up).
    """
    cfg = dataclasses.replace(timing or TimingConfig(), **overrides)
    if len(fns) < 2:
        raise ValueError(f"compare: need at least two sides, got {list(fns)}")
    names = list(fns)
    bases = _names(baseline, "baseline", names)
    if not bases:
        raise ValueError("compare: no baseline named")
    mine = _names(ours, "ours", names) if ours is not None else [n for n in names if n not in bases]
    cold = set(_names(no_warmup, "no_warmup", names))
    pairs = [(b, o) for b in bases for o in mine if b != o]
    if not pairs:
        raise ValueError(f"compare: no (baseline, ours) pair among baseline={bases}, ours={mine}")
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    load = load_average()

    def turn(fn: Callable[[], Any], n: int) -> float:
        sync()
        t0 = clock()
        for _ in range(n):
            fn()
        sync()
        return (clock() - t0) / n

    calls = {}
    for name, fn in fns.items():
        last = None
        for _ in range(0 if name in cold else cfg.warmup):
            last = turn(fn, 1)
        n = 1
        if cfg.min_turn_s > 0 and last is not None and last < cfg.min_turn_s:
            n = min(MAX_CALLS, math.ceil(cfg.min_turn_s / max(last, 1e-9)))
        calls[name] = n

    times: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {f"{b}/{o}": [] for b, o in pairs}
    t_start = clock()
    while True:
        for name, fn in fns.items():
            times[name].append(turn(fn, calls[name]))
        for b, o in pairs:
            ratios[f"{b}/{o}"].append(times[b][-1] / times[o][-1] if times[o][-1] > 0 else math.inf)
        rounds = len(times[names[0]])
        stats = {k: (*quartiles(v), _iqr_rel(*quartiles(v))) for k, v in ratios.items()}
        converged = all(s[3] <= cfg.rel_iqr for s in stats.values())
        elapsed = clock() - t_start
        if rounds >= cfg.min_rounds and (converged or elapsed >= cfg.max_seconds):
            break
        if cfg.max_rounds is not None and rounds >= cfg.max_rounds:
            break
    sides = {}
    for name in names:
        q1, med, q3 = quartiles(times[name])
        sides[name] = {"median_s": med, "q1_s": q1, "q3_s": q3, "calls": calls[name]}
    out_ratios = {}
    for b, o in pairs:
        q1, med, q3, rel = stats[f"{b}/{o}"]
        out_ratios[f"{b}/{o}"] = {"baseline": b, "ours": o, "median": med, "q1": q1, "q3": q3, "iqr_rel": rel,
                                  "rounds": rounds, "converged": rel <= cfg.rel_iqr}
    return {"sides": sides, "ratios": out_ratios, "rounds": rounds, "converged": converged, "elapsed_s": elapsed,
            "load_avg_start": load, "rel_iqr": cfg.rel_iqr, "max_seconds": cfg.max_seconds, "times": times}


def ratio_metrics(res: Mapping[str, Any], ratio: str, prefix: str) -> dict[str, Any]:
    """One ratio of a :func:`compare` result as flat metrics: ``prefix`` (the median), ``prefix_q1``,
    ``prefix_q3``, ``prefix_iqr_rel`` and ``prefix_converged``."""
    r = res["ratios"][ratio]
    return {prefix: r["median"], f"{prefix}_q1": r["q1"], f"{prefix}_q3": r["q3"], f"{prefix}_iqr_rel": r["iqr_rel"],
            f"{prefix}_converged": r["converged"]}
