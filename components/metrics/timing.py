"""Wall-clock timing of a callable: warm-up calls, then the median and min of repeated calls.

Used by benchmarks only (never by tests): ratios are taken between methods timed side by side in
one run on the same inputs. CUDA work is synchronised before the clock is read.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch


def time_call(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1, min_seconds: float = 0.0,
              device: str = "cpu") -> dict[str, float]:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    t_start = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - t_start < min_seconds:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "repeats": float(len(times))}
