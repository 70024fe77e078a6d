"""Multi-GPU scheduling without GPUs: a local Ray instance declared with 2 logical GPUs.

Sweep trials (``flows.sweeps.run_sweep``) and sharded-map tasks (``flows.parallel.sharded_map``)
that ask for ``gpu: 1`` must each see exactly one GPU id (``ray.get_gpu_ids()`` and
``CUDA_VISIBLE_DEVICES``), distinct among jobs that run at the same time, and never more than 2
at once. Each job logs its GPU ids and a [start, end) interval read from the system-wide
monotonic clock while it holds its GPU; the assertions hold whatever the jobs' speed (the short
sleep only makes overlaps likely, nothing asserts that they happen). ``gpu: auto`` follows the
cluster's GPUs, not the driver's CUDA (the two-node version, a CPU head and a GPU worker, is
``tests/integration/test_ray_cluster.py``).

The module owns its Ray instance: it shuts down any session left running, starts its own with
``num_gpus=2, num_cpus=4`` (``init_ray`` then leaves it alone) and shuts it down at the end, so
later tests start Ray afresh with their own resources.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from components.config import ResourcesConfig
from components.tracking.base import NullTracker
from flows.parallel import sharded_map
from flows.ray_runtime import trial_resources
from flows.sweeps import SweepConfig, run_sweep

N_GPUS, N_JOBS = 2, 4


@pytest.fixture(scope="module")
def two_gpu_ray():
    import ray
    if ray.is_initialized():                 # a session left by an earlier test: not ours to share
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=N_GPUS, include_dashboard=False, log_to_driver=False,
             configure_logging=True, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def _record(log_dir: str, job: str, hold_s: float = 0.3) -> dict:
    """Run inside a trial or task: note the GPU ids Ray gave it and the interval it held them."""
    import ray
    start = time.monotonic()
    ids = [str(i) for i in ray.get_gpu_ids()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    time.sleep(hold_s)
    rec = {"job": job, "ids": ids, "visible": visible, "start": start, "end": time.monotonic(), "pid": os.getpid()}
    Path(log_dir, f"{job}.json").write_text(json.dumps(rec))
    return rec


def _shard(args: tuple) -> dict:
    """A sharded-map job: ``args`` = (log folder, job name[, hold seconds])."""
    return _record(*args)


def _load(log_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(log_dir.glob("*.json"))]


def _check_one_gpu_each_and_no_oversubscription(recs: list[dict]) -> None:
    assert len(recs) == N_JOBS, recs
    for r in recs:
        assert len(r["ids"]) == 1, r                                     # exactly one GPU per job
        assert r["ids"][0] in {str(i) for i in range(N_GPUS)}, r
        assert r["visible"] is not None and r["visible"].split(",") == r["ids"], r
        assert r["start"] <= r["end"], r
    # at any job's start, the jobs running then (itself included) hold distinct GPUs, at most N_GPUS
    for r in recs:
        running = [o for o in recs if o["start"] <= r["start"] < o["end"]]
        assert len(running) <= N_GPUS, running
        held = [o["ids"][0] for o in running]
        assert len(set(held)) == len(held), running


def test_a_sweep_gives_each_trial_its_own_gpu(two_gpu_ray, tmp_path):
    log_dir = tmp_path / "log"
    log_dir.mkdir()

    def trial(config):
        from ray import tune
        _record(str(log_dir), f"trial{config['run']['i']}")
        tune.report({"best_dev_score": float(config["run"]["i"])})

    cfg = SweepConfig(num_samples=1, max_concurrent=N_JOBS, resources=ResourcesConfig(cpu=1, gpu=1), max_failures=0)
    res = run_sweep(trial, name="gpus", cfg=cfg, params={}, seed=0, tracker=NullTracker(), parent_run_id="p",
                    storage=tmp_path / "ray", grid=[{"i": i} for i in range(N_JOBS)])
    assert len(res.trials) == N_JOBS and not any(t["error"] for t in res.trials)
    _check_one_gpu_each_and_no_oversubscription(_load(log_dir))


def test_sharded_map_gives_each_shard_its_own_gpu(two_gpu_ray, tmp_path):
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    out = sharded_map(_shard, [(str(log_dir), f"shard{i}") for i in range(N_JOBS)],
                      resources=ResourcesConfig(cpu=1, gpu=1), desc="gpu test")
    assert [r["job"] for r in out] == [f"shard{i}" for i in range(N_JOBS)]      # shard order kept
    _check_one_gpu_each_and_no_oversubscription(_load(log_dir))


def test_gpu_auto_follows_the_clusters_gpus_not_the_drivers_cuda(monkeypatch):
    """``auto`` is decided on what the Ray cluster offers: a driver without CUDA (a CPU head) still
    gives GPU workers their GPUs, and a driver with CUDA asks for none where the cluster has none."""
    import torch
    for cuda in (False, True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        assert trial_resources(ResourcesConfig(cpu=2, gpu="auto"), cluster_gpus=0.0) == {"cpu": 2.0, "gpu": 0.0}
        assert trial_resources(ResourcesConfig(cpu=1, gpu="auto"), cluster_gpus=2.0) == {"cpu": 1.0, "gpu": 1.0}
        assert trial_resources(ResourcesConfig(cpu=1, gpu=0), cluster_gpus=2.0) == {"cpu": 1.0, "gpu": 0.0}
        assert trial_resources(ResourcesConfig(cpu=1, gpu=0.5), cluster_gpus=0.0) == {"cpu": 1.0, "gpu": 0.5}


def test_sharded_map_with_gpu_auto_takes_the_clusters_gpus_without_cuda(two_gpu_ray, tmp_path, monkeypatch):
    """A driver without CUDA on a Ray instance with (logical) GPUs: ``auto`` gives each shard one."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert trial_resources(ResourcesConfig(cpu=1, gpu="auto")) == {"cpu": 1.0, "gpu": 1.0}
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    out = sharded_map(_shard, [(str(log_dir), f"shard{i}", 0.0) for i in range(2)],
                      resources=ResourcesConfig(cpu=1, gpu="auto"), desc="auto test")
    assert all(len(r["ids"]) == 1 and r["visible"] == r["ids"][0] for r in out), out
