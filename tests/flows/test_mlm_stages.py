"""Smoke tests of the thesis ch. 6 stages at tiny sizes: ``mlm_exact`` (Table 6.1 cells and the
Figure 6.1 projection as one Ray grid, on a synthetic source and a tiny CMU phoneme file),
``cmlm`` then ``mcmc`` (a tiny conditional MLM on the tiny Greek -> English corpus, every sampler
configuration traced, the report), the ``cmlm`` learning gate, and ``bench_mcmc`` (no timing
assertions). Configuration errors fail before Ray starts."""
import copy
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from dataclasses import dataclass

from components.config import ConfigError
from components.metrics.run_facts import results_only, run_fact_paths
from components.inference.mcmc.registry import SAMPLERS
from components.models.mlm import CMLMConfig
from components.metrics.timing import TimingConfig
from components.registry import Registry
from components.reports import goyal_mlm
from components.reports.curves import close
from flows.stages import bench, cmlm, mcmc, mlm_exact, report_goyal_mlm
from flows.stages.common import run_stage
from tests.flows.test_normalisation_stage import _parallel


@pytest.fixture(autouse=True)
def one_thread(tiny_root):
    """One torch thread in this process (and in the stages: base.threads): two threads on a shared
    2-core machine make these tiny models' forward passes an order of magnitude slower."""
    tiny_root[1]["base"]["threads"] = 1
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


PHONEMES = ["AH0", "B", "K", "T", "IY1", "S"]      # stress digits are stripped: 6 symbols


def _cmudict(root, n=(80, 20, 20)):
    rng = np.random.default_rng(2)
    out = root / "data" / "prepared" / "cmudict"
    out.mkdir(parents=True, exist_ok=True)
    for split, k in zip(("train", "dev", "test"), n):
        # lengths 1..3: the 3-phoneme words are dropped at phoneme_max_len 2
        rows = [[PHONEMES[i] for i in rng.integers(len(PHONEMES), size=rng.integers(1, 4))] for _ in range(k)]
        if split == "train":
            rows[:len(PHONEMES)] = [[p] for p in PHONEMES]             # every symbol in the train vocabulary
        pq.write_table(pa.table({"word": [f"{split}{i}" for i in range(k)], "variant": pa.array([1] * k, pa.int8()),
                                 "phonemes": rows}), out / f"{split}.parquet")


def _tiny_exact(params):
    m = params["mlm_exact"]
    m.update(sources=["palindrome"], train_sizes=[50], objectives=["mlm", "pll"], seeds=[0])
    c = m["cell"]
    c["model"] = {"embedding_dim": 4, "hidden": 8, "layers": 1}
    c.setdefault("train", {}).update(epochs=2, batch_size=16, patience=1)
    c.update(dev_size=20, test_size=20, phoneme_max_len=2)
    m["phonemes"] = {"enabled": True, "train_size": 40, "objectives": ["pll", "mlm"]}
    m["projection"] = {"sources": ["hmm_low"], "pretrain_size": 100, "train_sizes": [10, 20],
                       "objectives": ["pll", "kl", "kl_pl"]}
    m["sweep"] = {"num_samples": 1, "max_concurrent": 2, "metric": "nll", "mode": "min", "max_failures": 0,
                  "resources": {"cpu": 1, "gpu": 0}}
    return params


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_mlm_exact_stage_writes_the_table_and_the_figure(tiny_root):
    root, params = tiny_root
    params = _tiny_exact(params)
    _cmudict(root)
    import ray
    try:
        m = run_stage("mlm_exact", mlm_exact.run, params, root)
    finally:
        ray.shutdown()
    assert m["runs"] == len(mlm_exact.design(mlm_exact.load_config(params))) == 5
    rows = {r["row"]: r for r in m["table"]}
    assert set(rows) == {"p-50", "phoneme"}
    assert rows["p-50"]["train_size"] == 50 and _finite(rows["p-50"]["true"])
    assert rows["phoneme"]["true"] is None and rows["phoneme"]["train_size"] == 40
    for row in rows.values():
        assert set(row["by_objective"]) == {"mlm", "pll"}
        for e in row["by_objective"].values():
            assert e["seeds"] == 1 and not e["failed"]
            assert all(_finite(e[k]) for k in ("nll", "neg_pll", "neg_mlm"))
    fig = m["figure"]
    assert fig["data"] == "hmm_low" and fig["sizes"] == [10, 20] and fig["seeds"] == 1
    assert set(fig["nll"]) == {"pll", "kl", "kl_pl"}
    assert all(len(v) == 2 and all(_finite(x) for x in v) for v in fig["nll"].values())
    assert _finite(fig["true"]) and _finite(fig["dpll"]["nll"]) and fig["dpll"]["pretrain_size"] == 100
    assert m["settings"]["phoneme_max_len"] == 2
    # the file: the table without its run facts (train_seconds: metrics/timings/mlm_exact.json)
    saved = json.loads((root / "metrics/mlm_exact.json").read_text())["table"]
    assert saved == results_only(m["table"]) and run_fact_paths(saved) == []
    assert json.loads((root / "metrics/timings/mlm_exact.json").read_text())["table"]["0"]["by_objective"]


@pytest.mark.parametrize("edit, error, match", [
    (lambda m: m.update(objectives=["mlm", "nce"]), ConfigError, r"mlm_exact.objectives: \['nce'\]"),
    (lambda m: m.update(objectives=["pll", "kl"]), ConfigError, "need a pretrained teacher"),
    (lambda m: m["phonemes"].update(objectives=["kl_pl"]), ConfigError, "need a pretrained teacher"),
    (lambda m: m.update(sources=["palindrome", "zipf"]), ConfigError, "mlm_exact.sources"),
    # ProjectionConfig's own check: a plain ValueError (ConfigError's base), still before any work
    (lambda m: m["projection"].update(objectives=["mlm"]), ValueError, "ProjectionConfig.objectives"),
])
def test_mlm_exact_bad_configuration_is_rejected(tiny_root, edit, error, match):
    root, params = tiny_root
    params = _tiny_exact(params)
    edit(params["mlm_exact"])
    with pytest.raises(error, match=match):
        mlm_exact.load_config(params)


def test_mlm_exact_stage_fails_before_ray_on_a_bad_config_or_missing_phonemes(tiny_root, monkeypatch):
    root, params = tiny_root
    params = _tiny_exact(params)
    monkeypatch.setattr(mlm_exact, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    params["mlm_exact"]["objectives"] = ["mlm", "kl"]
    with pytest.raises(ConfigError, match="need a pretrained teacher"):
        run_stage("mlm_exact", mlm_exact.run, params, root)
    params["mlm_exact"]["objectives"] = ["mlm", "pll"]
    with pytest.raises(FileNotFoundError, match="cmudict/train.parquet is missing"):
        run_stage("mlm_exact", mlm_exact.run, params, root)
    assert not (root / "metrics/mlm_exact.json").exists()


def _tiny_cmlm(params):
    c = params["cmlm"]
    c["data"].update(src_vocab_size=40, tgt_vocab_size=30)
    c["model"] = {"d_model": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "ff": 32, "dropout": 0.0,
                  "max_source_len": 64, "max_target_len": 64, "tie_embeddings": True}
    # ~0.1 s an epoch: 10 epochs take the tiny model about 0.4 nats below the unigram baseline (2 do not reach it)
    c.setdefault("train", {}).update(lr=0.01, epochs=10, batch_size=8, warmup_steps=5, patience=10)
    # the human targets (the distilled corpus is the translation chain's: tests/flows/test_translation_chain.py);
    # min_bleu 0: a tiny model's BLEU on 4 verses is noise (the gate is tested below)
    c.update(min_gain=0.0, min_bleu=0.0, max_decode_pairs=4, decode={"iterations": 2, "length_candidates": 1},
             corpus="data/prepared/greek_english")
    c["sweep"] = {"num_samples": 1, "max_concurrent": 1, "metric": "best_dev_loss", "mode": "min",
                  "max_failures": 0, "resources": {"cpu": 1, "gpu": 0}}
    m = params["mcmc"]
    m.update(chains=2, burn_in=1, sweeps=4, shard_sentences=2, resources={"cpu": 1, "gpu": 0},
             mask_predict={"iterations": 2, "length_candidates": 1})
    m["data"] = {"max_source_words": 100, "sentences": 2, "full_sentences": 2}
    g = m["groups"]
    g["temperature"]["values"], g["nucleus"]["values"], g["anneal"]["values"] = [1.0, 0.5], [1.0, 0.9], [0.05]
    g["block"]["config"].update(block_size=2, block_anneal_sweeps=1)
    return params


TRACE_COLUMNS = {"run", "sweep", "chain", "sentence", "energy", "e_norm", "accepted", "novel", "hamming",
                 "temperature", "text", "bleu"}


def test_cmlm_then_mcmc_write_the_model_traces_and_report_and_cmlm_fails_when_it_cannot_learn(tiny_root):
    root, params = tiny_root
    params = _tiny_cmlm(params)
    _parallel(root)
    import ray
    try:
        c = run_stage("cmlm", cmlm.run, params, root)
        model_dir = root / "models/cmlm"
        for f in ("model.pt", "model.json", "vocab/src.model", "vocab/tgt.model"):
            assert (model_dir / f).exists(), f
        assert c["learned_gain_nats"] > 0 and c["epochs"] >= 1
        assert _finite(c["dev_bleu_mask_predict"]["bleu"]) and len(c["dev_examples"]) == 4
        assert _finite(c["test_bleu_mask_predict"]["bleu"])
        scales = cmlm.load_config(params).length_scales                     # the length scale: the dev-best
        assert list(c["dev_bleu_by_length_scale"]) == [f"{s:g}" for s in scales]
        assert c["dev_bleu_mask_predict"]["bleu"] == max(c["dev_bleu_by_length_scale"].values())
        assert json.loads((model_dir / "decoding.json").read_text())["length_scale"] == c["length_scale"] in scales
        assert [r["epoch"] for r in c["curve"]] == list(range(1, c["epochs"] + 1))   # the learning curve

        m = run_stage("mcmc", mcmc.run, params, root)
        cfg = mcmc.load_config(params)
        runs = mcmc.design(cfg)
        assert [r["name"] for r in m["runs"]] == [r["name"] for r in runs]
        steps = cfg.burn_in + cfg.sweeps
        for r in m["runs"]:
            assert _finite(r["e_norm"]), r["name"]
            assert 0.0 <= r["accept"] <= 1.0, r["name"]
            assert r["chains"] == 2 and r["sentences"] == 2 and r["sweeps"] == steps
            assert all(len(v) == steps + 1 for v in r["curve"].values()), r["name"]
        distinct = len({mcmc._key(r) for r in runs})
        assert m["settings"]["distinct_runs"] == distinct < len(runs)      # temperature / nucleus 1 = main
        frame = pd.read_parquet(root / "data/mcmc/traces.parquet")
        assert set(frame.columns) == TRACE_COLUMNS
        assert len(frame) == distinct * cfg.chains * 2 * (steps + 1)
        assert frame["run"].nunique() == distinct
        assert set(m["baselines"]) == {"mask_predict", "warm_start"}
        assert m["labels"] == mcmc.labels(cfg) and not {"findings", "verdicts"} & set(m)
        assert not (root / "reports/goyal_mlm").exists()     # the report is its own stage's
        r = run_stage("report_goyal_mlm", report_goyal_mlm.run, params, root)   # no mlm_exact run: Table 6.1 empty
        readme = (root / "reports/goyal_mlm/README.md").read_text()
        assert "## Findings" in readme and "| claim |" in readme and cfg.schemes["deg"].label in readme
        assert (root / "reports/goyal_mlm/figure_6_2.png").exists()
        assert json.loads((root / "metrics/report_goyal_mlm.json").read_text())["findings"] == r["findings"]
        words = [w.replace(" ", "_") for w in goyal_mlm.kit.VERDICTS]
        assert 0 < sum(r["findings"][w] for w in words) <= len(r["verdicts"])

        # a model that cannot clear the learning gate fails the trial, and so the stage
        params["cmlm"]["min_gain"] = 100.0
        params["cmlm"]["train"].update(epochs=1)
        with pytest.raises(RuntimeError, match="sweep cmlm"):
            run_stage("cmlm", cmlm.run, params, root)
        errors = [p.read_text() for p in (root / ".ray_results/cmlm").rglob("error.txt")]
        assert errors and any("did not learn" in e for e in errors)

        # a model under its dev BLEU bar fails the stage (after training: the bar is on mask-predict's BLEU)
        params["cmlm"].update(min_gain=0.0, min_bleu=99.0)
        params["cmlm"]["train"].update(epochs=10)          # as above: a model that learned, under a BLEU bar of 99
        with pytest.raises(RuntimeError, match=r"did not learn to translate: dev BLEU .* under cmlm.min_bleu = 99"):
            run_stage("cmlm", cmlm.run, params, root)
    finally:
        ray.shutdown()


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(sweeps=3), "mcmc.sweeps: must be >= 4"),
    (lambda m: m.update(chains=1), "mcmc.chains: must be >= 2"),
    (lambda m: m["groups"]["nucleus"].update(values=[1.2]), r"mcmc run nucleus/norm/1.2.*top_p"),
    (lambda m: m["schemes"]["norm"].update(sampler="mh_typo"), r"mcmc.schemes.norm.sampler: unknown sampler"),
    (lambda m: m["groups"]["main"].update(schemes=["raw", "nrom"]), r"mcmc.groups.main.schemes: unknown \['nrom'\]"),
    (lambda m: m["groups"]["anneal"]["config"].update(min_temprature=0.1), r"mcmc.groups.anneal: 'min_temprature'"),
    (lambda m: m["groups"]["main"].update(vary="top_p"), r"mcmc.groups.main.values"),
])
def test_mcmc_bad_configuration_is_rejected(tiny_root, edit, match):
    root, params = tiny_root
    params = _tiny_cmlm(params)
    edit(params["mcmc"])
    with pytest.raises(ConfigError, match=match):
        mcmc.load_config(params)


def test_bench_mcmc_counts_fewer_passes_than_the_naive_loop():
    cfg = bench.MCMCBenchConfig(chains=2, sentences=1, source_length=4, target_length=4)
    model = CMLMConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32, dropout=0.0,
                            max_source_len=8, max_target_len=8)
    out = bench.bench_mcmc(cfg, model, (20, 20), "cpu", TimingConfig(min_rounds=1, max_rounds=1, warmup=0))
    assert set(out) >= {"naive_s", "fast_s", "mh_ratio", "mh_ratio_q1", "mh_ratio_q3", "naive_proposals_per_s",
                        "fast_proposals_per_s", "naive_passes_per_proposal", "fast_passes_per_proposal",
                        "naive_rows_per_proposal", "fast_rows_per_proposal", "proposals", "chains", "instances",
                        "tokens", "mean_length", "law_gap", "law_tol", "rounds", "converged", "load_avg_start", "target", "target_met"}
    assert out["chains"] == 2 and out["instances"] == 1 and out["mean_length"] == 4
    assert out["proposals"] == 2 * 4                                    # chains x positions, one sweep
    assert out["naive_passes_per_proposal"] == 1 + 2 * 4
    assert out["naive_passes_per_proposal"] > out["fast_passes_per_proposal"]
    assert out["law_gap"] <= out["law_tol"] < 1e-4 and isinstance(out["target_met"], bool)
    md = bench.mcmc_markdown({"cpu": out, "cuda": "no GPU"}, cfg)
    assert "| cpu | 2 x 1 x 4 |" in md and "| cuda | no GPU |" in md


# ------------------------------------------------------------------------------------------------
# a new sampler: its module (here, this test's), one registry line and a params entry
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WalkConfig:
    """A test-only sampler's config: it has an init and a proposal temperature, no target temperature
    (and no seed: a sampler's seed is a build input, ``make(cfg, seed=...)``)."""
    init: str = "uniform"
    proposal_temperature: float = 1.0
    stride: int = 1


def make_walk(cfg: WalkConfig, *, seed: int = 0):
    return cfg


def _with_walk() -> Registry:
    """A throwaway ``SAMPLERS``: the real entries (lazy, as registered) plus ``walk``."""
    reg = Registry("sampler")
    for name, e in SAMPLERS.items():
        reg.register(name, e.config_ref, e.make_ref, doc=e.doc, **e.meta)
    reg.register("walk", WalkConfig, make_walk, needs="MLMScorer", doc="a test-only sampler")
    return reg


def test_a_new_sampler_is_run_by_the_design_and_listed_by_the_report(tiny_root, tmp_path):
    root, params = tiny_root
    params = _tiny_cmlm(params)
    plain = copy.deepcopy(params)
    reg = _with_walk()
    m = params["mcmc"]
    m["schemes"]["walk"] = {"sampler": "walk", "energy": "norm", "label": "toy walk", "config": {"stride": 2}}
    for g in ("main", "temperature", "full"):
        m["groups"][g]["schemes"].append("walk")
    with pytest.raises(ConfigError, match="unknown sampler"):       # the real registry does not know it
        mcmc.load_config(params)
    cfg = mcmc.load_config(params, reg)
    runs = mcmc.design(cfg, reg)
    walk = [r for r in runs if r["scheme"] == "walk"]
    assert [r["name"] for r in walk] == ["main/walk", "temperature/walk/1.0", "temperature/walk/0.5", "full/walk"]
    assert all(r["sampler"] == "walk" and r["energy"] == "norm" for r in walk)
    # every setting the sampler has, none it lacks (the full group's target annealing; mcmc.start_noise)
    assert walk[0]["config"] == {"init": "warm", "stride": 2}
    assert walk[2]["config"] == {"init": "warm", "stride": 2, "proposal_temperature": 0.5}
    assert walk[3]["config"] == {"init": "warm", "stride": 2, "proposal_temperature": 0.8}
    assert reg.build("walk", walk[3]["config"]) == WalkConfig(init="warm", proposal_temperature=0.8, stride=2)
    # the thesis's runs keep their names, order and configs
    assert [r for r in runs if r["scheme"] != "walk"] == mcmc.design(mcmc.load_config(plain))
    # temperature 1 = main: three distinct walk runs
    assert len({mcmc._key(r, reg) for r in runs}) == len({mcmc._key(r) for r in runs if r["scheme"] != "walk"}) + 3

    # the report lists it (labels from the stage, a colour from the default cycle), with no edit
    summary = {"e_norm": 40.0, "accept": 0.5, "novel": 0.1, "bleu": 20.0, "bleu_best": 21.0, "bleu_final": 20.0,
               "curve": {k: [0.5] * (cfg.burn_in + cfg.sweeps + 1) for k in ("e_norm", "bleu", "accept", "novel")},
               "rhat": {"median": 1.0, "max": 1.1, "frac_below_1_1": 1.0}, "ess_bulk": {"median": 9.0, "min": 5.0}}
    metrics = {"settings": {"chains": cfg.chains, "burn_in": cfg.burn_in, "sweeps": cfg.sweeps},
               "runs": [{k: r[k] for k in ("name", "group", "value", "scheme", "block", "sampler", "set")} | summary
                        for r in runs]}
    labels = mcmc.labels(cfg)
    assert labels["walk"] == "toy walk" and labels["deg"] == "degenerate Gibbs (deg)"
    files = goyal_mlm.write_report(None, metrics, tmp_path / "report", labels=labels)
    text = files["README.md"].read_text()
    fig62 = text.split("## Figure 6.2")[1].split("## Table 6.2")[0]
    assert "| toy walk |" in fig62 and "| degenerate Gibbs (deg) |" in fig62
    assert "walk E_norm ↓" in text.split("## Table 6.2")[1].split("## Table 6.3")[0]
    assert "| toy walk |" in text.split("## Table 6.6")[1].split("## Mixing")[0]
    assert "| main | – | walk |" in text.split("## Mixing")[1]
    colors = goyal_mlm._colors(metrics)
    assert colors["walk"] not in {colors[s] for s in ("raw", "norm", "deg")}
    fig = goyal_mlm.figure_6_2(metrics, labels)
    try:
        assert "toy walk" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    finally:
        close(fig)


def test_the_block_size_anneals_over_the_whole_chain():
    """Thesis Sec. 6.7.3 anneals the block "with epochs" over the chain: a block group without its own
    block_anneal_sweeps reaches block_size_final at the chain's last sweep (issue 27: before, it was
    single-site from sweep 10 of 16, so half the "block" sweeps were not block proposals)."""
    from components.inference.mcmc.mlm_kernels import block_size_at
    cfg = mcmc.load_config({"mcmc": {}})
    steps = cfg.burn_in + cfg.sweeps
    block = [r for r in mcmc.design(cfg) if r["group"] == "block"]
    assert block and all(r["config"]["block_anneal_sweeps"] == steps - 1 for r in block)
    for r in block:
        c = SAMPLERS.config(r["sampler"], r["config"])
        sizes = [block_size_at(c, s) for s in range(steps)]
        assert sizes[0] == 4 and sizes[-1] == 1 and sizes.count(1) <= steps // 4 + 1
    own = mcmc.load_config({"mcmc": {"groups": {"block": {"schemes": ["norm"], "block": "annealed", "config": {
        "block_size": 4, "block_size_final": 1, "block_anneal_sweeps": 5}}}}})
    assert [r["config"]["block_anneal_sweeps"] for r in mcmc.design(own)] == [5]      # a value of one's own stays
