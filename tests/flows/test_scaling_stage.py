"""Smoke test of the `scaling` stage (a tiny grid over all three task kinds through Ray + MLflow) and of
the `report_shevchenko_osokin` stage, which renders the report from the scaling stage's outputs only."""
import json

import numpy as np
import pytest

from components.data import store
from components.data.grids import write_grids
from components.data.types import GridExample
from components.metrics.significance import load_stats
from components.reports import kit
from components.tracking.mlflow_tracker import MlflowTracker
from flows.stages import prepare, report_shevchenko_osokin, scaling
from flows.stages.common import run_stage


def _tiny_ocr(path, rng):
    labels, pixels, folds = [], [], []
    for i in range(40):
        n = int(rng.integers(2, 5))
        y = rng.integers(0, 26, size=n)
        labels.append(y.astype(np.int8).tolist())
        pixels.append((rng.random((n, 16, 8)) < 0.3).astype(np.uint8).reshape(-1).tolist())
        folds.append(i % 4)
    store.write_table(path, {"word_id": list(range(40)), "fold": folds, "labels": labels, "pixels": pixels}, store.OCR)


def _tiny_snakes(folder, rng):
    for part, n in (("train", 10), ("test", 4)):
        ex = []
        for _ in range(n):
            h, w = (int(v) for v in rng.integers(4, 7, size=2))
            ex.append(GridExample(rng.integers(0, 256, size=(h, w, 3)).astype(np.uint8),
                                  rng.integers(0, 3, size=(h, w)).astype(np.int64)))
        write_grids(folder / f"{part}.parquet", ex)


ONE_EPOCH = {"lr": 0.01, "epochs": 1, "patience": 3, "batch_size": 8, "min_delta": 0.001, "lr_patience": 1}


def _tiny_study(tiny_root, kinds):
    """The tiny root with prepared data, tiny OCR and snakes written, and every phase of ``kinds``
    trained for one epoch, one CPU a trial; -> (root, params, the scaling section)."""
    root, params = tiny_root
    rng = np.random.default_rng(0)
    run_stage("prepare", prepare.run, params, root)
    _tiny_ocr(root / "data/prepared/ocr_letters/letters.parquet", rng)
    _tiny_snakes(root / "data/prepared/snakes", rng)
    sc = params["scaling"]
    sc["sweep"] = {"resources": {"cpu": 1, "gpu": 0}}
    for kind in kinds:
        sc.setdefault(kind, {})["procedure"] = {k: dict(ONE_EPOCH) for k in ("unary", "pairwise", "finetune", "joint")}
    return root, params, sc


def test_scaling_stage_runs_the_grid_and_writes_the_report(tiny_root):
    root, params, sc = _tiny_study(tiny_root, ("ocr", "tagging", "snakes"))
    sc["guard"] = False                      # one-epoch runs on random data: the plumbing, not learning
    sc["ocr"].update(test_folds=[1], max_train_words=0, max_dev_words=0, fixed_alphas=[0.5], sigmoid=[],
                     runs={"marginal_ce": ["stage", "online", "offline"]})
    sc["ocr"]["procedure"]["budget"] = 3
    # validation-fold tuning of offline alpha: two Optuna trials inside one Ray trial
    sc["tune"] = {"trials": 2, "space": {"scaling.ocr.methods.offline.alpha": {"type": "choice", "values": [0.5, 32.0]}}}
    sc["ocr"]["methods"]["online"] = {"grid_lo": -2, "grid_hi": 2}
    sc["tagging"].update(task="pos", max_train_sentences=0, runs={"nll": ["joint"]})
    sc["snakes"]["model"] = {"embedding_dim": 2, "unary": {"depth": 1, "width": 4}, "pairwise": {"depth": 1, "width": 4}}
    sc["snakes"]["runs"] = {"gcrf_ce": ["offline"]}
    import ray
    try:
        m = run_stage("scaling", scaling.run, params, root)
    finally:
        ray.shutdown()
    assert m["runs"] == 6 and m["n_failed"] == 0 and m["failed"] == []
    # the compute stage writes the report's inputs, never the report
    assert not (root / "reports/shevchenko_osokin").exists()
    assert not {"findings", "verdicts", "results"} & set(m)
    records = json.loads((root / "metrics/stats/scaling/records.json").read_text())
    got = {(r["task"], r["objective"], r["procedure"]) for r in records}
    assert got == {("ocr", "marginal_ce", "stage"), ("ocr", "marginal_ce", "online"), ("ocr", "marginal_ce", "offline"),
                   ("ocr", "marginal_ce", "fixed_alpha"), ("pos", "nll", "joint"), ("snakes", "gcrf_ce", "offline")}
    # the tuned alpha is the one the test-fold run used, and it is on record
    tuned = m["tuned"]["ocr/offline"]
    assert set(m["tuned"]) == {"ocr/offline"} and tuned["trials"] == 2 and tuned["values"]["alpha"] in (0.5, 32.0)
    off = next(r for r in records if r["task"] == "ocr" and r["procedure"] == "offline")
    assert off["tuned"] == tuned["values"] and off["alpha"] == tuned["values"]["alpha"]
    assert "tuned" not in next(r for r in records if r["task"] == "snakes")       # snakes was not tuned
    for r in records:
        assert 0 <= r["test_score"] <= 100 and r["train_minutes"] > 0 and r["history"]
        if r["procedure"] == "stage":
            assert [h["phase"] for h in r["history"]] == ["unary", "pairwise", "joint"]
        if r["task"] == "ocr":                    # budget 3: stage's three phases one epoch each = joint's 3 at most
            assert r["epochs"] <= 3 and len(r["stopped_by"]) == (3 if r["procedure"] == "stage" else 1)
        if r["procedure"] == "online":
            assert r["alpha"] in {0.25, 0.5, 1.0, 2.0, 4.0}
        if r["procedure"] == "fixed_alpha":
            assert r["alpha"] == 0.5
    metrics = json.loads((root / "metrics/scaling.json").read_text())
    assert metrics["n_failed"] == 0 and metrics["design"]["tasks"] == ["ocr", "tagging", "snakes"]
    # the report stage: README, figures and the verdicts from the records, the failed runs and the statistics
    rep = run_stage("report_shevchenko_osokin", report_shevchenko_osokin.run, params, root)
    readme = (root / "reports/shevchenko_osokin/README.md").read_text()
    assert "97.2" in readme and "## Failed runs" not in readme     # the paper's numbers sit beside ours
    assert (root / "reports/shevchenko_osokin/figure1c.png").exists()
    saved = json.loads((root / "metrics/report_shevchenko_osokin.json").read_text())
    # the verdicts of the report kit, at the top level and (for the headline) under results
    assert saved["findings"] == rep["findings"] == saved["results"]["findings"]
    assert 0 < sum(saved["findings"][w.replace(" ", "_")] for w in kit.VERDICTS) <= len(saved["verdicts"])
    assert {v["claim"] for v in saved["verdicts"]} >= {"joint_lt_stage", "fix_gt_joint/online", "stage_slower"}
    assert saved["results"]["ocr/marginal_ce/stage"]["n"] == 1
    # every run's per-item statistics, one file set per task; the records keep none of them
    stats = load_stats(root / "metrics/stats/scaling/ocr.npz")
    assert set(stats.systems) == {"marginal_ce/stage", "marginal_ce/online", "marginal_ce/offline",
                                  "marginal_ce/fixed_alpha/alpha=0.5"}
    assert stats.columns == ("item_accuracy", "scored") and all(x.shape == (10, 2) for x in stats.systems.values())
    ocr_stage = next(r for r in records if r["task"] == "ocr" and r["procedure"] == "stage")
    assert ocr_stage["test_score"] == pytest.approx(10 * stats["marginal_ce/stage"][:, 0].sum())   # 10 words of fold 1
    for t in ("ocr", "pos", "snakes"):
        for suffix in ("", "_train", "_log_ratio"):
            assert (root / f"metrics/stats/scaling/{t}{suffix}.npz").is_file(), (t, suffix)
    assert load_stats(root / "metrics/stats/scaling/pos.npz").columns == ("correct", "tokens")
    assert all("item_stats" not in r for r in records)

    t = MlflowTracker("approxinfer/shevchenko_osokin", tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    runs = t.search_runs()
    sweep = [r for r in runs if r.info.run_name == "sweep/scaling"]
    assert len(sweep) == 1
    assert float(sweep[0].data.params["tuned.ocr.offline.alpha"]) == tuned["values"]["alpha"]
    assert sweep[0].data.metrics["tuned_dev.ocr.offline"] == pytest.approx(tuned["dev_score"])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == sweep[0].info.run_id]
    assert len(children) == 6
    assert {c.data.params["run/procedure"] for c in children} == {"stage", "online", "fixed_alpha", "joint", "offline"}
    assert len([r for r in runs if r.info.run_name == "sweep/tune"]) == 1
    assert all({"test_score", "dev_score", "ratio"} <= set(c.data.metrics) for c in children)


def test_scaling_design_rejects_bad_runs(tiny_root):
    from components.config import load_section
    _, params = tiny_root
    params["scaling"]["ocr"]["runs"] = {"marginal_ce": ["stagee"]}
    with pytest.raises(ValueError, match="stagee"):
        scaling.design(load_section(scaling.ScalingStageConfig, "scaling", params))
    params["scaling"]["ocr"]["runs"] = {"marginal_ce": ["stage"]}
    params["scaling"]["snakes"]["runs"] = {"nll": ["joint"]}
    with pytest.raises(ValueError, match="gcrf_ce"):
        scaling.design(load_section(scaling.ScalingStageConfig, "scaling", params))
    params["scaling"]["snakes"]["runs"] = {"gcrf_ce": ["joint"]}
    params["scaling"]["ocr"]["methods"] = {"offline": {"alpha": 8.0, "eps": 0.0, "lam": 1.0}}
    with pytest.raises(ValueError, match=r"scaling\.ocr\.methods\.offline.*lam"):
        scaling.design(load_section(scaling.ScalingStageConfig, "scaling", params))


@pytest.mark.parametrize("key, values, match", [
    ("scaling.ocr.offline.alpha", [1.0], "is not scaling.<task>.methods.<method>.<key>"),
    ("scaling.ocr.methods.joint.alpha", [1.0], "'joint' .* is not a tuned method"),
    ("scaling.ocr.methods.offline.alpha", [-1.0], r"tune.space.scaling.ocr.methods.offline.alpha: the value -1.0"),
    ("scaling.ocr.methods.offline.alphaa", [1.0], "unknown key"),
    ("scaling.pos.methods.offline.alpha", [1.0], r"scaling: unknown key\(s\) \['pos'\]"),
    ("train.optim.lr", [1.0], "is not scaling.<task>.methods.<method>.<key>"),
])
def test_tune_space_is_checked_before_ray(tiny_root, key, values, match):
    from components.config import ConfigError
    _, params = tiny_root
    params["scaling"]["tune"] = {"space": {key: {"type": "choice", "values": values}}}
    with pytest.raises(ConfigError, match=match):
        scaling.tune_grid(scaling.load_config(params), params)


def test_scaling_stage_fails_before_ray_without_prepared_data(tiny_root):
    root, params = tiny_root
    with pytest.raises(FileNotFoundError, match="scaling.ocr: .*letters.parquet not found"):
        run_stage("scaling", scaling.run, params, root)


def test_flow_is_thin():
    import inspect
    import re
    src = inspect.getsource(scaling)
    assert not re.search(r"for .* in .*batches", src) and "np.random" not in src and "OBJECTIVES[" not in src


def test_a_method_no_tuned_setting_learned_is_a_finding_not_a_crash(tiny_root):
    """Tuning that finds no setting which learns (every Optuna trial fails the did-not-learn guard)
    does not fail the stage: the method's grid runs are failed runs naming the tuning, and its
    claims are not testable with that reason, while the other runs go on."""
    root, params, sc = _tiny_study(tiny_root, ("ocr", "snakes"))
    sc["tasks"] = ["ocr", "snakes"]
    for phase in sc["snakes"]["procedure"].values():
        phase["lr"] = 1e-12                  # snakes cannot move off its untrained model: it does not learn
    sc["ocr"].update(test_folds=[1], max_train_words=0, max_dev_words=0, fixed_alphas=[], sigmoid=[],
                     runs={"marginal_ce": ["joint"]})
    sc["snakes"]["model"] = {"embedding_dim": 2, "unary": {"depth": 1, "width": 4}, "pairwise": {"depth": 1, "width": 4}}
    sc["snakes"]["runs"] = {"gcrf_ce": ["offline"]}
    sc["tune"] = {"trials": 2, "space": {"scaling.snakes.methods.offline.alpha": {"type": "choice", "values": [0.5, 32.0]}}}
    import ray
    try:
        m = run_stage("scaling", scaling.run, params, root)
    finally:
        ray.shutdown()
    assert m["runs"] == 2 and m["n_failed"] == 1          # OCR's joint run learned (the guard's 5 points)
    assert "none of the 2 settings tuned on dev learned" in m["tuned"]["snakes/offline"]["did_not_learn"]
    assert m["tuned"]["snakes/offline"]["dev_score"] is None
    assert [f["run"]["task"] for f in m["failed"]] == ["snakes"]        # on record for the report stage
    rep = run_stage("report_shevchenko_osokin", report_shevchenko_osokin.run, params, root)
    readme = (root / "reports/shevchenko_osokin/README.md").read_text()
    assert "## Failed runs" in readme and "not run: tuning found no setting that learned" in readme
    testable = [v for v in rep["verdicts"] if "snakes" in json.dumps(v) and v["verdict"] != "not_testable"]
    assert not testable


def test_the_report_stage_reads_only_what_the_scaling_stage_wrote(tmp_path):
    """Its inputs missing: an error naming the file and the stage to run; a bad objective: a config error."""
    from components.config import ConfigError, load_section
    from components.tracking import NullTracker
    params = {"base": {}, "report_shevchenko_osokin": {}}
    with pytest.raises(FileNotFoundError, match=r"metrics/scaling\.json.*dvc repro scaling"):
        run_stage("report_shevchenko_osokin", report_shevchenko_osokin.run, params, tmp_path, tracker=NullTracker())
    assert not (tmp_path / "reports").exists()
    with pytest.raises(ConfigError, match="objective.*'ce'"):
        load_section(report_shevchenko_osokin.ShevchenkoOsokinReportConfig, "report_shevchenko_osokin",
                     {"report_shevchenko_osokin": {"objective": "ce"}})
