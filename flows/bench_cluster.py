"""Ray ``sharded_map`` overhead on a running Ray cluster (issue 29): the bench stage's Ray section
(:func:`flows.stages.bench.bench_ray`) joined to the cluster at ``RAY_ADDRESS`` instead of a local
instance, written as Markdown (and JSON beside it) for BENCHMARKS.md.

    infra/ray-local-cluster.sh start /tmp/ai-ray          # or any cluster
    RAY_ADDRESS=$(cat /tmp/ai-ray/address) python -m flows.bench_cluster --out plots/bench/ray_cluster.md

The bench stage measures one node (a local Ray instance); this is the same measurement across the
nodes of a cluster, run by hand or by ``tests/integration/test_bench_cluster.py`` (a two-node
cluster on loopback). Settings: ``--shards``, ``--work-s``, ``--repeats`` (the stage's
``bench.ray`` keys).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from components.config import ConfigError
from components.io import write_text
from flows.stages.bench import RayBenchConfig, bench_ray, ray_markdown


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.bench_cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the Markdown table to write (JSON beside it: .json)")
    ap.add_argument("--shards", default="2,8", help="shards per map, comma-separated (default 2,8)")
    ap.add_argument("--work-s", default="0.02,0.08,0.32",
                    help="seconds of work per shard, comma-separated and increasing (default 0.02,0.08,0.32)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if not os.environ.get("RAY_ADDRESS"):
        raise ConfigError("flows.bench_cluster: set RAY_ADDRESS to the cluster's address (e.g. 127.0.0.1:6379); "
                          "the bench stage measures a local instance")
    try:
        shards = tuple(int(x) for x in args.shards.split(","))
        work = tuple(float(x) for x in args.work_s.split(","))
    except ValueError as e:
        raise ConfigError(f"flows.bench_cluster: --shards / --work-s must be comma-separated numbers ({e})") from e
    cfg = RayBenchConfig(shards=shards, work_s=work, repeats=args.repeats)
    res = bench_ray(cfg, progress=lambda m: print(m, flush=True))
    out = Path(args.out)
    write_text(out, ray_markdown(res))
    write_text(out.with_suffix(".json"), json.dumps(res, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
