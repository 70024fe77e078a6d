"""The cost curves' arithmetic (components.bench.curves, exact small cases) and the curve
measurements at tiny sizes (components.bench.cost, flows.stages.bench): structure, sizes and the
agreement of derived values with their inputs; no timing assertions."""
import math

import pytest
import torch

from components.bench import cost, curves
from components.config import ConfigError
from components.inference.gd_config import GDConfig
from components.metrics.timing import TimingConfig
from components.models.mlm import CMLMConfig, ConditionalMLM
from components.reports.curves import close
from flows.stages import bench

FAST = TimingConfig(min_rounds=1, max_rounds=1, warmup=0)
TINY = CMLMConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32, dropout=0.0,
                  max_source_len=8, max_target_len=8)


def test_ceilings_exact():
    assert curves.rate(10, 2) == 5.0
    assert curves.matmul_ceiling(4, 0.1, 0.5) == pytest.approx(80.0)
    # 8 rows per pass, 0.02 s per pass, 5 rows through the net per proposal: 8 / (5 * 0.02) = 80 proposals/s
    assert curves.mh_ceiling(8, 0.02, 5.0) == pytest.approx(80.0)
    # 4 instances, 1 ms per matmul, 1000 steps x 3 matmuls: 4 / 3 = 1.333 instances/s
    assert curves.gd_ceiling(4, 1e-3, 1000) == pytest.approx(4 / 3)
    assert curves.gd_ceiling(4, 1e-3, 1000, matmuls_per_step=1) == pytest.approx(4.0)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            curves.rate(1, bad)


def test_split_total_and_sizes():
    assert curves.split_total(1, 4) == (1, 1)
    assert curves.split_total(2, 4) == (1, 2)
    assert curves.split_total(64, 4) == (16, 4)
    with pytest.raises(ValueError):
        curves.split_total(6, 4)
    assert curves.check_sizes((1, 4, 16)) == [1, 4, 16]
    for bad in ((), (0, 1), (4, 4), (4, 1)):
        with pytest.raises(ValueError):
            curves.check_sizes(bad)


def test_ray_overhead_exact():
    # 8 shards of 0.1 s on 2 workers: ideal 0.4 s; wall 0.5 s -> overhead 0.1 s, 0.025 s per task
    r = curves.ray_overhead(0.5, 8, 0.1, 2)
    assert r["ideal_s"] == pytest.approx(0.4) and r["overhead_s"] == pytest.approx(0.1)
    assert r["overhead_per_task_s"] == pytest.approx(0.025)
    assert r["overhead_frac"] == pytest.approx(0.2) and r["efficiency"] == pytest.approx(0.8)
    assert r["overhead_frac"] + r["efficiency"] == pytest.approx(1.0)
    # o / (s + o) < 0.1  <=>  s > 9 o
    assert curves.overhead_threshold(0.01, 0.1) == pytest.approx(0.09)
    assert curves.overhead_threshold(0.01, 0.5) == pytest.approx(0.01)
    assert curves.overhead_threshold(-0.01) == 0.0
    o = 0.02
    s = curves.overhead_threshold(o, 0.1)
    assert o / (s + o) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        curves.overhead_threshold(0.01, 1.0)


def test_first_under():
    rows = [{"work_s": 0.01, "overhead_frac": 0.5}, {"work_s": 0.1, "overhead_frac": 0.05},
            {"work_s": 0.1, "overhead_frac": 0.12}, {"work_s": 1.0, "overhead_frac": 0.01},
            {"work_s": 1.0, "overhead_frac": 0.02}]
    assert curves.first_under(rows, 0.1) == 1.0            # at 0.1 s one shard count is still over
    assert curves.first_under(rows, 0.2) == 0.1
    assert curves.first_under(rows, 0.6) == 0.01
    assert curves.first_under(rows, 0.005) is None
    # a smaller work under the threshold does not count past a larger one over it
    assert curves.first_under([{"work_s": 0.01, "overhead_frac": 0.0}, {"work_s": 0.1, "overhead_frac": 0.5},
                               {"work_s": 1.0, "overhead_frac": 0.0}], 0.1) == 1.0


def test_spin_spins():
    assert curves.spin(0.01) >= 0.01


def test_mh_curve_tiny():
    model = ConditionalMLM(20, 20, TINY, seed=0).eval()
    pts = cost.mh_curve(model, "norm", (1, 2, 4), max_sentences=2, source_length=4, target_length=3, src_vocab=20,
                        naive_max=2, timing=FAST, seed=1)
    assert [p["total"] for p in pts] == [1, 2, 4]
    assert [(p["chains"], p["sentences"]) for p in pts] == [(1, 1), (1, 2), (2, 2)]
    for p in pts:
        assert p["proposals"] == p["total"] * 3                               # one sweep of 3 positions
        assert p["fast_proposals_per_s"] == pytest.approx(p["proposals"] / p["fast_s"])
        assert p["ceiling_proposals_per_s"] == pytest.approx(p["total"] / (p["rows_per_proposal"] * p["matmul_s"]))
        assert p["rows_per_proposal"] > 0
    assert all("naive_proposals_per_s" in p and p["law_gap"] <= p["law_tol"] < 1e-4 for p in pts[:2])
    assert "naive_proposals_per_s" not in pts[2]


def test_gd_curve_tiny():
    g = torch.Generator().manual_seed(0)
    unary, trans = torch.randn(2, 5, 4, generator=g), torch.randn(4, 4, generator=g)
    mask = torch.ones(2, 5, dtype=torch.bool)
    gd = GDConfig(lrs=(1.0, 0.1), checkpoints=(2, 5))
    pts = cost.gd_curve(unary, trans, mask, gd, (1, 3), timing=FAST, seed=2)
    assert [p["instances"] for p in pts] == [1, 3]                          # 3 > 2 rows: cycled
    for p in pts:
        assert p["steps"] == 5 and p["grid"] == 2
        assert p["instances_per_s"] == pytest.approx(p["instances"] / p["batched_s"])
        assert p["ceiling_instances_per_s"] == pytest.approx(p["instances"] / (5 * 3 * p["matmul_s"]))


def test_stage_curves_ray_and_figures_tiny(tmp_path):
    cfg = bench.CurvesConfig(mh_totals=(1, 2), mh_max_sentences=2, mh_source_length=4, mh_target_length=3,
                             mh_naive_max=1, gd_sizes=(1, 2), timing=FAST)
    g = torch.Generator().manual_seed(0)
    pots = (torch.randn(2, 5, 4, generator=g), torch.randn(4, 4, generator=g), torch.ones(2, 5, dtype=torch.bool))
    c = bench.bench_curves(cfg, bench.MCMCBenchConfig(), TINY, (20, 20), pots,
                           GDConfig(lrs=(1.0,), checkpoints=(3,)), "cpu", seed=3)
    assert [p["total"] for p in c["mh"]] == [1, 2] and [p["instances"] for p in c["gd"]] == [1, 2]
    figs = bench.curve_figures(c, {"instances": 2.0, "naive_s": 4.0}, "cpu")
    assert set(figs) == {"mh_curve.png", "gd_curve.png"}
    for name, fig in figs.items():
        fig.savefig(tmp_path / name)
        close(fig)
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    md = bench.curves_markdown({"cpu": c, "cuda": "no GPU"})
    assert "![MH proposals/s](mh_curve.png)" in md and "cuda: no GPU" in md
    assert md.count("\n| 1 |") == 2

    r = bench.bench_ray(bench.RayBenchConfig(shards=(2,), work_s=(0.001, 0.01), repeats=1, parallelism=2),
                        progress=lambda m: None)
    assert [(int(x["shards"]), x["work_s"]) for x in r["rows"]] == [(2, 0.001), (2, 0.01)]
    for x in r["rows"]:
        assert x["ideal_s"] == pytest.approx(x["shards"] * x["work_s"] / r["parallelism"])
        assert x["overhead_s"] == pytest.approx(x["wall_s"] - x["ideal_s"])
    assert r["model_threshold_work_s"] == pytest.approx(curves.overhead_threshold(r["overhead_per_task_s"], 0.1))
    assert r["measured_threshold_work_s"] in (None, 0.001, 0.01)
    md = bench.ray_markdown(r)
    assert md.count("\n| 2 |") == 2 and "per-task overhead" in md


@pytest.mark.parametrize("key,value", [("mh_totals", [4, 1]), ("gd_sizes", []), ("mh_totals", [6]),
                                       ("mh_target_length", 0), ("mh_naive_max", -1)])
def test_curves_config_errors(key, value):
    from components.config import from_dict
    with pytest.raises(ConfigError, match=key):
        from_dict(bench.CurvesConfig, {key: value}, where="bench.curves")


@pytest.mark.parametrize("key,value", [("work_s", [0.1, 0.01]), ("threshold", 1.0), ("repeats", 0), ("shards", [0])])
def test_ray_config_errors(key, value):
    from components.config import from_dict
    with pytest.raises(ConfigError, match=key):
        from_dict(bench.RayBenchConfig, {key: value}, where="bench.ray")
