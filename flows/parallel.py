"""Sharded map over Ray tasks, with a progress bar: many small independent jobs (oracle-tuned
gradient-descent shards, MCMC chain shards), each vectorised inside, spread over the workers.

Each shard is a plain picklable argument; the function should load what it needs itself (from
files the caller names) rather than receive large tensors. Resources per shard come from params
(``gpu: auto`` asks for one GPU per shard when the Ray cluster has GPUs). Results come back in shard
order; a failed shard raises with its index. Progress: a bar on a terminal, one line per finished
shard in a log (``flows.progress``). Shards are spread over the nodes of a cluster (Ray's ``SPREAD``
strategy: the default one left a node idle while another queued shards, BENCHMARKS.md).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Sequence

from components.config import ResourcesConfig, check_range
from flows.progress import Progress
from flows.ray_runtime import init_ray, trial_resources


@dataclass(frozen=True)
class ShardConfig:
    shard_size: int = 64                 # instances per shard
    resources: ResourcesConfig = ResourcesConfig()

    def __post_init__(self):
        check_range(self, positive=("shard_size",))


def shards(n: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) ranges covering range(n) in chunks of ``size``."""
    if size < 1:
        raise ValueError(f"shard_size must be >= 1, got {size}")
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def sharded_map(fn: Callable[[Any], Any], args: Sequence[Any], *, resources: ResourcesConfig = ResourcesConfig(),
                desc: str = "shards", progress: bool = True) -> list[Any]:
    """``fn`` over ``args``, one Ray task per argument; results in argument order. ``progress=False``:
    no bar or lines (a caller timing many tiny maps, as the bench's Ray section)."""
    import ray
    init_ray()
    res = trial_resources(resources)
    # SPREAD: on a cluster Ray's default strategy packs queued shards onto one node while another
    # idles (8 shards of 0.32 s on two 1-CPU nodes: 1.9-2.6 s, all 8 on one node at worst; SPREAD:
    # 1.29 s against the ideal 1.28, 2026-11-27, BENCHMARKS.md); on one node the two are the same
    remote = ray.remote(num_cpus=res["cpu"], num_gpus=res["gpu"], scheduling_strategy="SPREAD")(fn)
    refs = {remote.remote(a): i for i, a in enumerate(args)}
    out: list[Any] = [None] * len(args)
    with (Progress(len(args), desc, unit="shard") if progress
          else contextlib.nullcontext(SimpleNamespace(update=lambda n=1: None))) as bar:
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = refs[ref]
                try:
                    out[i] = ray.get(ref)
                except Exception as e:
                    raise RuntimeError(f"{desc}: shard {i} failed: {e}") from e
                bar.update(1)
    return out
