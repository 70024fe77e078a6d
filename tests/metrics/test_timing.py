"""The benchmark harness (components.metrics.timing.compare) on a fake clock: deterministic, no
real time is measured or asserted."""
from __future__ import annotations

import itertools

import pytest

from components.config import ConfigError, load_params, load_section
from components.metrics.timing import MAX_CALLS, TimingConfig, compare, quartiles, ratio_metrics


class Clock:
    """A fake ``perf_counter``: time moves only when a fake side is called."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def sides(clock: Clock, log: list[str], **durations) -> dict:
    """name -> a callable that logs its name and advances the clock by its next duration
    (a number: always that; a list: cycled)."""
    def make(name, d):
        it = itertools.cycle(d if isinstance(d, (list, tuple)) else [d])

        def call():
            log.append(name)
            clock.now += next(it)
        return call
    return {name: make(name, d) for name, d in durations.items()}


def test_sides_are_interleaved_call_by_call_in_order():
    clock, log = Clock(), []
    fns = sides(clock, log, slow=3.0, ours=1.0, other=2.0)
    res = compare(fns, baseline="slow", clock=clock, warmup=2, min_rounds=4, max_rounds=4)
    assert log[:6] == ["slow", "slow", "ours", "ours", "other", "other"]     # warm-up, side by side
    assert log[6:] == ["slow", "ours", "other"] * 4                            # then A B C A B C ...
    assert res["rounds"] == 4 and res["times"]["ours"] == [1.0] * 4


def test_a_side_can_skip_the_warm_up():
    clock, log = Clock(), []
    fns = sides(clock, log, naive=60.0, fast=0.25)
    res = compare(fns, baseline="naive", clock=clock, warmup=2, no_warmup=["naive"], min_rounds=1, min_turn_s=1.0)
    assert log == ["fast", "fast", "naive"] + ["fast"] * 4
    assert res["sides"]["naive"]["calls"] == 1 and res["ratios"]["naive/fast"]["median"] == 240.0
    with pytest.raises(ValueError, match="no_warmup"):
        compare(fns, baseline="naive", clock=clock, no_warmup=["slow"])


def test_ratios_are_baseline_over_ours_per_round_from_adjacent_calls():
    clock, log = Clock(), []
    # the machine slows down round by round: per-round ratios stay 2 although the times spread
    fns = sides(clock, log, naive=[2.0, 4.0, 8.0, 16.0], fast=[1.0, 2.0, 4.0, 8.0])
    res = compare(fns, baseline="naive", ours="fast", clock=clock, warmup=0, min_rounds=4)
    r = res["ratios"]["naive/fast"]
    assert (r["median"], r["q1"], r["q3"], r["iqr_rel"]) == (2.0, 2.0, 2.0, 0.0)
    assert r["baseline"] == "naive" and r["ours"] == "fast" and r["rounds"] == 4 and r["converged"]
    assert res["rounds"] == 4 and res["converged"]                   # stable at once: stops at min_rounds
    assert res["sides"]["fast"]["median_s"] == 3.0 and res["sides"]["naive"]["median_s"] == 6.0
    # several baselines and several of ours: every pair, time(baseline) / time(ours)
    clock, log = Clock(), []
    res = compare(sides(clock, log, ours=1.0, ours2=4.0, a=2.0, b=8.0), baseline=["a", "b"], clock=clock,
                  warmup=0, min_rounds=1)
    assert {k: v["median"] for k, v in res["ratios"].items()} == {"a/ours": 2.0, "a/ours2": 0.5, "b/ours": 8.0,
                                                                  "b/ours2": 2.0}


def test_it_stops_once_the_iqr_is_within_the_target():
    clock, log = Clock(), []
    # ratios 1, 0.5, 1, 1, 1, ...: the IQR is within +-10% of the median from round 5 on
    fns = sides(clock, log, base=1.0, ours=[1.0, 2.0] + [1.0] * 20)
    res = compare(fns, baseline="base", clock=clock, warmup=0, min_rounds=3, rel_iqr=0.10, max_seconds=1e9)
    assert res["rounds"] == 5 and res["converged"]
    r = res["ratios"]["base/ours"]
    assert r["median"] == 1.0 and r["q1"] == 1.0 and r["q3"] == 1.0 and r["converged"]
    # after 4 rounds the IQR was 0.875-1 (12.5%): a 15% target stops there
    clock, log = Clock(), []
    fns = sides(clock, log, base=1.0, ours=[1.0, 2.0] + [1.0] * 20)
    res = compare(fns, baseline="base", clock=clock, warmup=0, min_rounds=3, rel_iqr=0.15, max_seconds=1e9)
    assert res["rounds"] == 4 and res["ratios"]["base/ours"]["q1"] == 0.875


def test_it_stops_at_the_time_cap_and_says_not_converged():
    clock, log = Clock(), []
    fns = sides(clock, log, base=1.0, ours=[1.0, 2.0])        # ratios 1, 0.5, 1, 0.5, ...: never stable
    res = compare(fns, baseline="base", clock=clock, warmup=1, min_rounds=2, max_seconds=10.0)
    # warm-up (2 s) is not counted; rounds take 3, 2, 3, 2 s: the cap is reached after round 4
    assert res["rounds"] == 4 and res["elapsed_s"] == 10.0
    assert not res["converged"] and not res["ratios"]["base/ours"]["converged"]
    assert res["ratios"]["base/ours"]["iqr_rel"] > 0.10
    # the cap never cuts below min_rounds; max_rounds stops whatever the cap
    clock, log = Clock(), []
    res = compare(sides(clock, log, base=1.0, ours=[1.0, 2.0]), baseline="base", clock=clock, warmup=0,
                  min_rounds=6, max_seconds=1.0)
    assert res["rounds"] == 6 and not res["converged"]
    clock, log = Clock(), []
    res = compare(sides(clock, log, base=1.0, ours=[1.0, 2.0]), baseline="base", clock=clock, warmup=0,
                  min_rounds=2, max_rounds=3, max_seconds=1e9)
    assert res["rounds"] == 3 and not res["converged"]


def test_a_short_side_runs_back_to_back_within_its_turn():
    clock, log = Clock(), []
    fns = sides(clock, log, naive=2.0, fast=0.25)
    res = compare(fns, baseline="naive", clock=clock, warmup=1, min_rounds=2, min_turn_s=1.0)
    assert res["sides"]["fast"]["calls"] == 4 and res["sides"]["naive"]["calls"] == 1
    assert log[2:] == (["naive"] + ["fast"] * 4) * 2
    assert res["sides"]["fast"]["median_s"] == 0.25                          # per call
    assert res["ratios"]["naive/fast"]["median"] == 8.0
    clock, log = Clock(), []                                                  # capped at MAX_CALLS
    res = compare(sides(clock, log, naive=1.0, fast=1e-7), baseline="naive", clock=clock, min_rounds=1,
                  min_turn_s=1.0)
    assert res["sides"]["fast"]["calls"] == MAX_CALLS


def test_the_result_carries_the_load_and_the_rule():
    clock, log = Clock(), []
    cfg = TimingConfig(rel_iqr=0.05, max_seconds=7.0, min_rounds=1, warmup=0)
    res = compare(sides(clock, log, b=2.0, o=1.0), baseline="b", timing=cfg, clock=clock)
    assert res["rel_iqr"] == 0.05 and res["max_seconds"] == 7.0
    load = res["load_avg_start"]
    assert load is None or (set(load) == {"1m", "5m", "15m"} and all(v >= 0 for v in load.values()))
    assert ratio_metrics(res, "b/o", "speedup") == {"speedup": 2.0, "speedup_q1": 2.0, "speedup_q3": 2.0,
                                                    "speedup_iqr_rel": 0.0, "speedup_converged": True}


def test_bad_arguments_are_rejected():
    clock, log = Clock(), []
    fns = sides(clock, log, a=1.0, b=1.0)
    with pytest.raises(ValueError, match="baseline"):
        compare(fns, baseline="c", clock=clock)
    with pytest.raises(ValueError, match="ours"):
        compare(fns, baseline="a", ours=["x"], clock=clock)
    with pytest.raises(ValueError, match="two sides"):
        compare({"a": fns["a"]}, baseline="a", clock=clock)
    with pytest.raises(ValueError, match="no \\(baseline, ours\\) pair"):
        compare(fns, baseline="a", ours="a", clock=clock)
    with pytest.raises(TypeError):
        compare(fns, baseline="a", clock=clock, repeats=3)                    # not a TimingConfig field
    for bad, match in [({"min_rounds": 0}, "min_rounds"), ({"rel_iqr": 0.0}, "rel_iqr"),
                       ({"min_rounds": 5, "max_rounds": 4}, "must be <= max_rounds"), ({"warmup": -1}, "warmup"),
                       ({"max_seconds": 0}, "max_seconds")]:
        with pytest.raises(ConfigError, match=match):
            TimingConfig(**bad)
    assert log == []                                                         # nothing was called


def test_quartiles_use_the_inclusive_method():
    assert quartiles([3.0]) == (3.0, 3.0, 3.0)
    assert quartiles([1.0, 2.0, 3.0]) == (1.5, 2.0, 2.5)
    assert quartiles([0.5, 1.0, 1.0, 1.0]) == (0.875, 1.0, 1.0)
    with pytest.raises(ValueError):
        quartiles([])


def test_bench_timing_params_load_strictly():
    from flows.stages.bench import BenchConfig
    params = load_params("params.yaml")
    cfg = load_section(BenchConfig, "bench", params)
    assert cfg.timing.rel_iqr == 0.1 and cfg.timing.max_seconds > 0 and cfg.timing.max_rounds is None
    params["bench"].setdefault("timing", {})["tol"] = 0.1         # params.yaml leaves timing at its defaults
    with pytest.raises(ConfigError, match="bench.timing: unknown key"):
        load_section(BenchConfig, "bench", params)
    del params["bench"]["timing"]["tol"]
    params["bench"]["timing"]["min_rounds"] = 0
    with pytest.raises(ConfigError, match="bench.timing.min_rounds: must be > 0"):
        load_section(BenchConfig, "bench", params)


def test_the_bench_report_shows_median_ratios_with_their_iqr_and_the_load():
    from flows.stages.bench import KernelBenchConfig, markdown
    load = {"1m": 1.5, "5m": 0.5, "15m": 0.25}
    res = {}
    for op in ("log_partition", "marginals", "viterbi"):
        res.update({f"L17.{op}.ours_ms": 1.0, f"L17.{op}.pytorch_crf_ms": 3.0, f"L17.{op}.speedup_vs_pytorch_crf": 3.0,
                    f"L17.{op}.speedup_vs_pytorch_crf_q1": 2.9, f"L17.{op}.speedup_vs_pytorch_crf_q3": 3.2,
                    f"L17.{op}.rounds": 5.0, f"L17.{op}.converged": True, f"L17.{op}.load_avg_start": load})
    res["oracle_grid"] = {"instances": 4.0, "lrs": 9.0, "max_N": 1000.0, "batched_s": 0.5, "naive_s": 60.0,
                           "speedup": 120.0, "speedup_q1": 110.0, "speedup_q3": 125.0, "rounds": 3.0,
                           "converged": False, "load_avg_start": load, "target_100x": True, "label_agreement": 1.0}
    md = markdown({"cpu": res}, KernelBenchConfig(labels=(17,)))
    assert "| 17 | log_partition | 1.00 | 3.00 | 3.0× (2.9–3.2) | – | – | 5 | True | 1.50 0.50 0.25 |" in md
    assert "targets (on the median ratios): never_slower_at_L17: met" in md
    assert "ratio 120× (110–125) over 3 rounds (converged: False; load at start 1.50 0.50 0.25)" in md
