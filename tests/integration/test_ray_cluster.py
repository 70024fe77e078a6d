"""A real two-node Ray cluster on this machine (``infra/ray-local-cluster.sh``): a sweep through
``flows.sweeps.run_sweep`` and a ``flows.parallel.sharded_map`` joined to it with ``RAY_ADDRESS``
place their work on both nodes, and ``gpu: auto`` follows the cluster's GPUs: the head offers none
(as a CPU head node would) and the worker declares one logical GPU, so a driver without CUDA still
gives its ``auto`` shards that GPU, on the worker.

Each node offers one CPU and every trial / shard asks for one, so two that run at the same time must
be on different nodes; a barrier (a shared folder: both nodes are on this machine) holds each trial
and shard until its partner has started, so the two do run at the same time. The driver runs in a
subprocess, so this process's Ray state stays clean. The cluster is stopped by process id (never
``ray stop``, which would end every Ray instance on the machine).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "ray-local-cluster.sh"

DRIVER = r'''
"""Joins the cluster at RAY_ADDRESS; writes what ran where to argv[1]."""
import json, os, sys, time
from pathlib import Path

import ray
from ray import tune

from components.config import ResourcesConfig
from components.tracking import make_tracker
from flows.parallel import sharded_map
from flows.ray_runtime import init_ray, shutdown_ray, trial_resources
from flows.sweeps import SweepConfig, run_sweep

out, work = Path(sys.argv[1]), Path(sys.argv[2])
ONE_CPU = ResourcesConfig(cpu=1, gpu=0)


def meet(folder, n, timeout=120.0):
    """Wait until n trials/shards have arrived in folder (they then run at the same time)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{os.getpid()}-{time.time_ns()}").touch()
    deadline = time.time() + timeout
    while len(list(folder.iterdir())) < n and time.time() < deadline:
        time.sleep(0.1)


def trainable(config):
    meet(work / "barrier-sweep", 2)
    node = ray.get_runtime_context().get_node_id()
    tune.report({"best_dev_score": float(config["it.x"]), "node_id": node, "pid": os.getpid()})


def shard(i):
    meet(work / "barrier-shards", 2)
    return {"shard": i, "node_id": ray.get_runtime_context().get_node_id()}


def gpu_shard(i):
    return {"shard": i, "node_id": ray.get_runtime_context().get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


t0 = time.perf_counter()
init_ray()
nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
params = {"it": {"x": 0.5}}
cfg = SweepConfig(num_samples=2, max_concurrent=2, metric="best_dev_score", mode="max",
                  space={"it.x": {"type": "uniform", "low": 0.0, "high": 1.0}},
                  resources=ONE_CPU, max_failures=0)
tracker = make_tracker("mlflow", "ray-cluster-it", root=work)
with tracker.start_run("sweep", tags={"stage": "it"}) as run_id:
    result = run_sweep(trainable, name="it", cfg=cfg, params=params, seed=0, tracker=tracker,
                       parent_run_id=run_id, storage=work / "ray_results")
t_sweep = time.perf_counter() - t0
shards = sharded_map(shard, [0, 1], resources=ONE_CPU, desc="it-shards")
import torch
AUTO = ResourcesConfig(cpu=1, gpu="auto")
auto = {"driver_cuda": torch.cuda.is_available(), "resources": trial_resources(AUTO),
        "gpu_nodes": sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")),
        "shards": sharded_map(gpu_shard, [0, 1], resources=AUTO, desc="it-gpu-shards")}
out.write_text(json.dumps({
    "nodes": nodes,
    "trials": [{"config": t["config"], "metrics": {k: t["metrics"].get(k) for k in ("best_dev_score", "node_id")},
                "error": t["error"]} for t in result.trials],
    "best": result.best_metrics.get("best_dev_score"),
    "shards": shards,
    "auto": auto,
    "tracking_uri": tracker.tracking_uri,
    "parent_run_id": run_id,
    "seconds": {"sweep": round(t_sweep, 1), "total": round(time.perf_counter() - t0, 1)},
}, default=str))
shutdown_ray()
'''


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true", PYTHON=sys.executable,
               RAY=str(Path(sys.executable).with_name("ray")))
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _cluster_pids(folder: Path) -> list[int]:
    """Processes whose command line names the cluster's folder (what stop must end)."""
    import psutil
    root = str(folder) + "/"
    pids = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(root in a for a in p.info["cmdline"] or []) and p.pid != os.getpid():
                pids.append(p.pid)
        except psutil.Error:
            pass
    return pids


@pytest.fixture(scope="module")
def cluster():
    """Two nodes x one CPU, a CPU head and a worker with one logical GPU, in a short /tmp folder
    (Ray's Unix sockets live under it)."""
    if not Path(_env()["RAY"]).exists():
        reason = "the ray command is not installed next to this Python"
        if os.environ.get("APPROXINFER_REQUIRE_SERVICES") == "1":    # CI: a missing service is an error
            pytest.fail(f"{reason} (APPROXINFER_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="ai-ray-", dir="/tmp")).resolve()
    env = dict(_env(), RAY_LOCAL_NODES="2", RAY_LOCAL_NODE_GPUS="0 1")
    t0 = time.perf_counter()
    try:
        start = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], env=env, capture_output=True,
                               text=True, timeout=180)
        assert start.returncode == 0, f"cluster start failed:\n{start.stdout[-3000:]}\n{start.stderr[-3000:]}"
        address = (folder / "address").read_text().strip()
        print(f"cluster {address} started in {time.perf_counter() - t0:.1f} s")
        yield {"address": address, "folder": folder, "env": env}
    finally:
        stop = subprocess.run(["bash", str(SCRIPT), "clean", str(folder)], env=env, capture_output=True,
                              text=True, timeout=120)
        left = _cluster_pids(folder)
        shutil.rmtree(folder, ignore_errors=True)
        assert stop.returncode == 0, stop.stderr[-3000:]
        assert not left, f"processes of the cluster left after stop: {left}"


@pytest.fixture(scope="module")
def driver(cluster, tmp_path_factory):
    """One driver run on the cluster: the sweep, then the sharded map."""
    work = tmp_path_factory.mktemp("ray-driver")
    script = work / "driver.py"
    script.write_text(DRIVER)
    out = work / "out.json"
    env = dict(cluster["env"], RAY_ADDRESS=cluster["address"])
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), str(out), str(work)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, f"driver failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    res = json.loads(out.read_text())
    print(f"driver: {time.perf_counter() - t0:.1f} s wall, {res['seconds']}")
    return res


def test_cluster_has_two_nodes(cluster):
    """``status`` (``ray status``: the autoscaler's view, refreshed every few seconds) lists both nodes."""
    deadline = time.time() + 60
    while True:
        status = subprocess.run(["bash", str(SCRIPT), "status", str(cluster["folder"])], env=cluster["env"],
                                capture_output=True, text=True, timeout=120)
        assert status.returncode == 0, status.stderr[-3000:]
        # right after the start the autoscaler may have no report yet ("No cluster status")
        active = status.stdout.split("Active:")[1].split("Pending:")[0] if "Active:" in status.stdout else ""
        if active.count("node_") == 2 or time.time() > deadline:
            break
        time.sleep(2)
    assert active.count("node_") == 2, status.stdout
    assert "/2.0 CPU" in status.stdout, status.stdout


def test_sweep_trials_ran_on_both_nodes(driver):
    assert len(driver["nodes"]) == 2
    trials = driver["trials"]
    assert len(trials) == 2 and not any(t["error"] for t in trials), trials
    ran_on = {t["metrics"]["node_id"] for t in trials}
    assert ran_on == set(driver["nodes"]), (ran_on, driver["nodes"])
    assert driver["best"] == max(t["metrics"]["best_dev_score"] for t in trials)


def test_sweep_trials_logged_to_mlflow(driver):
    """``MLflowLoggerCallback`` (in the driver) logged both remote trials as child runs."""
    import mlflow
    client = mlflow.MlflowClient(driver["tracking_uri"])
    exp = client.get_experiment_by_name("ray-cluster-it")
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{driver['parent_run_id']}'")
    assert len(runs) == 2
    assert sorted(r.data.metrics["best_dev_score"] for r in runs) == \
        sorted(t["metrics"]["best_dev_score"] for t in driver["trials"])


def test_sharded_map_placed_shards_on_both_nodes(driver):
    shards = driver["shards"]
    assert [s["shard"] for s in shards] == [0, 1]          # results in shard order
    assert {s["node_id"] for s in shards} == set(driver["nodes"])


def test_gpu_auto_gives_the_workers_gpu_under_a_cpu_head(driver):
    auto = driver["auto"]
    assert auto["driver_cuda"] is False                  # this machine has no CUDA: the old rule gave 0 GPUs
    assert auto["resources"] == {"cpu": 1.0, "gpu": 1.0}
    assert len(auto["gpu_nodes"]) == 1 and auto["gpu_nodes"][0] in driver["nodes"]
    assert [s["shard"] for s in auto["shards"]] == [0, 1]
    for s in auto["shards"]:                             # on the worker, holding its one GPU
        assert s["node_id"] == auto["gpu_nodes"][0], s
        assert s["gpu_ids"] == ["0"] and s["visible"] == "0", s
