"""The Ray overhead benchmark across a real two-node cluster on this machine
(``infra/ray-local-cluster.sh``, the cluster of ``test_ray_cluster.py``): ``python -m
flows.bench_cluster`` joins it with ``RAY_ADDRESS`` and writes its table. Checked: both nodes and
their 2 CPUs are the parallelism, every (shards, work) cell was measured with its arithmetic
(``components.bench.curves.ray_overhead``) consistent, and the files are written. No timing is
asserted (the numbers go to BENCHMARKS.md)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_ray_cluster import REPO, cluster  # noqa: F401  (the module's cluster fixture)

pytestmark = pytest.mark.integration


def test_sharded_map_overhead_is_measured_across_both_nodes(cluster, tmp_path):  # noqa: F811
    out = tmp_path / "ray_cluster.md"
    env = dict(cluster["env"], RAY_ADDRESS=cluster["address"])
    proc = subprocess.run([sys.executable, "-m", "flows.bench_cluster", "--out", str(out), "--shards", "2,4",
                           "--work-s", "0.01,0.05", "--repeats", "2"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    res = json.loads(out.with_suffix(".json").read_text())
    assert res["nodes"] == 2.0 and res["parallelism"] == 2.0 and res["address"] == cluster["address"]
    assert [(r["shards"], r["work_s"]) for r in res["rows"]] == [(2.0, 0.01), (2.0, 0.05), (4.0, 0.01), (4.0, 0.05)]
    for r in res["rows"]:
        assert r["wall_s"] > 0 and r["ideal_s"] == pytest.approx(r["shards"] * r["work_s"] / 2)
        assert r["overhead_s"] == pytest.approx(r["wall_s"] - r["ideal_s"])
        assert r["efficiency"] == pytest.approx(r["ideal_s"] / r["wall_s"])
    assert res["model_threshold_work_s"] == pytest.approx(max(0.0, res["overhead_per_task_s"]) * 9)
    assert out.read_text().startswith("### Ray sharded_map overhead (2 node(s)")


def test_without_ray_address_it_says_what_to_set(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "flows.bench_cluster", "--out", str(tmp_path / "x.md")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "set RAY_ADDRESS" in proc.stderr
    assert not (tmp_path / "x.md").exists()
