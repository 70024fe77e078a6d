r"""The arithmetic of the ``bench`` stage's cost curves and of its Ray overhead table (no timing,
no I/O, no Ray): what a measured time becomes on a curve, the matmul "ceiling" lines, and where a
sharded map's overhead falls under a threshold.

- Throughput: :func:`rate` (items / seconds).
- Matmul ceiling (:func:`matmul_ceiling`): the best case of a method whose dominant cost is one
  matmul shape, timed alone on the same machine in the same run. If one call of that matmul takes
  ``matmul_s`` and processes ``items_per_call`` items' worth of rows, and the method needs
  ``calls_per_item`` such calls per item (measured on the method, e.g. forward passes per
  proposal), the ceiling is ``items_per_call / (matmul_s * calls_per_item * items_per_call) *
  items_per_call``, i.e. ``1 / (matmul_s * calls_per_item / items_per_call)``: items per second if
  the machine did nothing but that matmul.
- MH (:func:`mh_ceiling`): ``mh_mlm`` sends ``rows_per_proposal`` sequences through the network per
  proposal (counted), each of ``length`` tokens, and every token gets the output projection
  ``[d_model] x [d_model, vocab]``; with ``matmul_s`` the time of that projection for ``rows``
  sequences (``[rows * length, d_model] x [d_model, vocab]``), the ceiling is
  ``rows / (rows_per_proposal * matmul_s)`` proposals/s.
- GD (:func:`gd_ceiling`): each of ``steps`` updates of the grid (``grid`` = restarts x learning
  rates runs per instance) costs at least ``matmuls_per_step`` transition matmuls
  ``[grid * B * (N-1), L] x [L, L]`` (forward and backward of the pairwise term); with
  ``matmul_s`` the time of one for ``B`` instances, the ceiling is
  ``B / (steps * matmuls_per_step * matmul_s)`` instances/s.
- Ray (:func:`ray_overhead`, :func:`overhead_threshold`): ``n`` shards of ``work_s`` seconds each on
  ``parallelism`` workers ideally take ``n * work_s / parallelism``; the rest of the wall time is
  overhead; per task (the workers paying it in parallel) ``overhead * parallelism / n``; its share
  of the wall time is ``overhead / wall``. With a per-task overhead ``o``, the share at shard
  work ``s`` is ``o / (s + o)``, under ``f`` once ``s > o (1 - f) / f``.
- :func:`spin`: the benchmark's unit of work, a busy loop of a given wall time (a picklable
  top-level function, so a Ray task can run it).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["rate", "matmul_ceiling", "mh_ceiling", "gd_ceiling", "split_total", "ray_overhead",
           "overhead_threshold", "first_under", "median", "spin", "check_sizes"]


def _pos(name: str, x: float) -> float:
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return x


def rate(items: float, seconds: float) -> float:
    """items / seconds (both > 0)."""
    return _pos("items", items) / _pos("seconds", seconds)


def matmul_ceiling(items_per_call: float, matmul_s: float, calls_per_item: float) -> float:
    """Items per second if the machine only ran the dominant matmul: one call of ``matmul_s``
    seconds serves ``items_per_call`` items' rows, each item needs ``calls_per_item`` of them
    (per-item fractions of a call allowed)."""
    return _pos("items_per_call", items_per_call) / (_pos("matmul_s", matmul_s) * _pos("calls_per_item", calls_per_item))


def mh_ceiling(rows: int, matmul_s: float, rows_per_proposal: float) -> float:
    """Proposals/s bound of ``mh_mlm`` on ``rows`` chains x sentences: ``matmul_s`` is the output
    projection of ``rows`` sequences; each proposal sends ``rows_per_proposal`` sequences through."""
    return matmul_ceiling(rows, matmul_s, rows_per_proposal)


def gd_ceiling(instances: int, matmul_s: float, steps: int, matmuls_per_step: int = 3) -> float:
    """Instances/s bound of the GD grid: ``matmul_s`` is one transition matmul of all ``instances``'
    grid rows; ``steps`` updates of ``matmuls_per_step`` each."""
    return matmul_ceiling(instances, matmul_s, _pos("steps", steps) * _pos("matmuls_per_step", matmuls_per_step))


def split_total(total: int, max_sentences: int) -> tuple[int, int]:
    """(chains, sentences) for ``total`` chains x sentences: ``min(total, max_sentences)`` sentences,
    the rest as chains (``total`` must be a multiple of the sentences)."""
    if total < 1 or max_sentences < 1:
        raise ValueError(f"split_total: total and max_sentences must be >= 1, got {total}, {max_sentences}")
    s = min(total, max_sentences)
    if total % s:
        raise ValueError(f"split_total: total {total} is not a multiple of {s} sentences")
    return total // s, s


def check_sizes(sizes: Sequence[int], name: str = "sizes") -> list[int]:
    """``sizes`` as a list, strictly increasing and >= 1 (else ``ValueError``)."""
    xs = [int(x) for x in sizes]
    if not xs or xs[0] < 1 or any(b <= a for a, b in zip(xs, xs[1:])):
        raise ValueError(f"{name} must be non-empty, >= 1 and strictly increasing, got {list(sizes)}")
    return xs


def ray_overhead(wall_s: float, n: int, work_s: float, parallelism: int) -> dict[str, float]:
    """One sharded map's overhead: ``ideal_s = n * work_s / parallelism``, ``overhead_s = wall_s -
    ideal_s``, ``overhead_per_task_s = overhead_s * parallelism / n``, ``overhead_frac =
    overhead_s / wall_s``, ``efficiency = ideal_s / wall_s``."""
    if n < 1 or parallelism < 1:
        raise ValueError(f"ray_overhead: n and parallelism must be >= 1, got {n}, {parallelism}")
    wall = _pos("wall_s", wall_s)
    ideal = n * float(work_s) / parallelism
    over = wall - ideal
    return {"shards": float(n), "work_s": float(work_s), "wall_s": wall, "ideal_s": ideal, "overhead_s": over,
            "overhead_per_task_s": over * parallelism / n, "overhead_frac": over / wall, "efficiency": ideal / wall}


def overhead_threshold(overhead_per_task_s: float, frac: float = 0.10) -> float:
    """The shard work s (seconds) above which a per-task overhead o is under ``frac`` of the time:
    ``o / (s + o) < frac`` iff ``s > o (1 - frac) / frac`` (0 for o <= 0)."""
    if not 0 < frac < 1:
        raise ValueError(f"overhead_threshold: frac must be in (0, 1), got {frac}")
    return max(0.0, float(overhead_per_task_s)) * (1 - frac) / frac


def first_under(rows: Iterable[Mapping[str, Any]], frac: float = 0.10) -> float | None:
    """The smallest measured shard work (``work_s``) whose every measured row (all shard counts)
    has ``overhead_frac < frac`` and so has every larger work; None if none."""
    by_work: dict[float, list[float]] = {}
    for r in rows:
        by_work.setdefault(float(r["work_s"]), []).append(float(r["overhead_frac"]))
    best = None
    for w in sorted(by_work, reverse=True):
        if max(by_work[w]) < frac:
            best = w
        else:
            break
    return best


def median(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


def spin(seconds: float) -> float:
    """Busy-wait ``seconds`` of wall time (a CPU-bound unit of work); returns the time spun."""
    t0 = time.perf_counter()
    end = t0 + float(seconds)
    x = 0
    while time.perf_counter() < end:
        x += 1
    return time.perf_counter() - t0
