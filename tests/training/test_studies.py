"""The Shevchenko & Osokin study's components: the task registry, the design, the methods' configs
read by SCALINGS name, and one run trained and scored end to end on a tiny OCR set (no Ray)."""
import dataclasses
import math

import numpy as np
import pytest

from components.config import ConfigError, from_dict, load_params, resolve_scale
from components.data import store
from components.training.scaling import SCALINGS
from components.training.guard import DidNotLearn
from components.training.scaling import OfflineConfig, OfflineRegConfig, OnlineConfig
from components.training.structured import TrainConfig
from components.training.studies import (PROCEDURES, STUDY_TASKS, ScalingStudyConfig, design, missing_inputs,
                                         scaling_for, train_and_evaluate)


def _study(**section):
    return from_dict(ScalingStudyConfig, section, where="scaling")


def _params_study(scale="default"):
    params = load_params("params.yaml")          # with the scale files (scales/<scale>.yaml)
    params["base"]["scale"] = scale
    section = dict(resolve_scale(params)["scaling"])
    section.pop("sweep", None)           # the flow's part of the section
    section.pop("tune", None)
    return _study(**section)


def test_every_study_task_is_a_config_field_of_its_own_type():
    fields = {f.name: f.type for f in dataclasses.fields(ScalingStudyConfig)}
    for name, entry in STUDY_TASKS.items():
        assert isinstance(getattr(ScalingStudyConfig(), name), entry.config), name
        assert entry.meta["structure"] in ("chain", "grid") and name in fields
    assert set(ScalingStudyConfig().tasks) == set(STUDY_TASKS)


def test_procedures_reach_every_scaling_method():
    assert {m for _, m in PROCEDURES.values()} == set(SCALINGS)
    assert {p for p, _ in PROCEDURES.values()} == {"unary", "stage", "joint"}
    assert PROCEDURES["fixed_alpha"] == ("joint", "fixed") and PROCEDURES["online"] == ("joint", "online")


@pytest.mark.parametrize("scale", ["default", "paper"])
def test_params_design(scale):
    cfg = _params_study(scale)
    rows = design(cfg)
    assert rows and len({tuple(sorted(r.items())) for r in rows}) == len(rows)       # no duplicate run
    for r in rows:
        assert r["procedure"] in PROCEDURES and r["kind"] in STUDY_TASKS
        assert r["alpha"] == 1.0 or r["procedure"] == "fixed_alpha"
    ocr = [r for r in rows if r["kind"] == "ocr"]
    n_variants = sum(len(p) for p in cfg.ocr.runs.values()) + len(cfg.ocr.fixed_alphas) + len(cfg.ocr.sigmoid)
    assert len(ocr) == n_variants * len(cfg.ocr.test_folds) * len(cfg.seeds)
    assert {r["task"] for r in rows if r["kind"] == "tagging"} == {cfg.tagging.task}
    assert {r["last_activation"] for r in rows if r["kind"] == "snakes"} == {"none"}
    # the params' method settings (same values as before the registries)
    assert cfg.ocr.scaling("offline") == OfflineConfig(alpha=8.0)
    assert cfg.snakes.scaling("offline") == OfflineConfig(alpha=64.0)
    assert cfg.tagging.scaling("offline_reg") == OfflineRegConfig(alpha=8.0, reg_lambda=0.01)
    assert cfg.ocr.scaling("temperature").alpha == 2.0 and cfg.ocr.scaling("online") == OnlineConfig()


def test_scaling_for_reads_the_methods_by_name():
    cfg = _study(ocr={"methods": {"offline": {"alpha": 4.0}, "online": {"grid_lo": -1, "grid_hi": 1, "alpha": 0.5}}})
    run = {"procedure": "offline", "alpha": 1.0}
    assert scaling_for(run, cfg.ocr) == ("offline", OfflineConfig(alpha=4.0))
    assert scaling_for({"procedure": "online", "alpha": 1.0}, cfg.ocr) == (
        "online", OnlineConfig(alpha=0.5, grid_lo=-1, grid_hi=1))
    assert scaling_for({"procedure": "fixed_alpha", "alpha": 0.25}, cfg.ocr)[1].alpha == 0.25
    assert scaling_for({"procedure": "stage", "alpha": 1.0}, cfg.ocr)[0] == "none"
    assert scaling_for({"procedure": "offline_reg", "alpha": 1.0}, cfg.tagging)[1] == OfflineRegConfig()


@pytest.mark.parametrize("section, match", [
    ({"tasks": ["ocr", "nope"]}, "nope"),
    ({"ocr": {"runs": {"marginal_ce": ["stagee"]}}}, "stagee"),
    ({"ocr": {"runs": {"marginal_ce": ["fixed_alpha"]}}}, "fixed_alphas"),
    ({"ocr": {"runs": {"hinge": ["stage"]}}}, "hinge"),
    ({"ocr": {"runs": {"gcrf_ce": ["stage"]}}}, "marginal_ce"),             # a grid objective on a chain task
    ({"snakes": {"runs": {"nll": ["joint"]}}}, "gcrf_ce"),
    ({"snakes": {"runs": {"gcrf_ce": ["joint"]}, "sigmoid": ["joint"]}}, "last-activation"),
    ({"ocr": {"runs": {}}}, "empty"),
    ({"ocr": {"methods": {"offline_alpha": {"alpha": 8.0}}}}, "offline_alpha"),
    ({"ocr": {"methods": {"offline": {"alpha": 8.0, "reg_lambda": 0.1}}}}, r"scaling\.ocr\.methods\.offline"),
])
def test_design_rejects_bad_names_before_any_work(section, match):
    with pytest.raises(ConfigError, match=match):
        design(_study(**section))


def _tiny_ocr(path, n=24):
    rng = np.random.default_rng(0)
    labels, pixels, folds = [], [], []
    for i in range(n):
        k = int(rng.integers(2, 5))
        labels.append(rng.integers(0, 26, size=k).astype(np.int8).tolist())
        pixels.append((rng.random((k, 16, 8)) < 0.3).astype(np.uint8).reshape(-1).tolist())
        folds.append(i % 3)
    store.write_table(path, {"word_id": list(range(n)), "fold": folds, "labels": labels, "pixels": pixels}, store.OCR)


def test_train_and_evaluate_one_run_returns_its_record(tmp_path):
    one = dataclasses.asdict(TrainConfig(lr=0.01, epochs=1, patience=3, batch_size=8))
    cfg = _study(tasks=["ocr"], eval_batch_size=16,
                 ocr={"test_folds": [1], "runs": {"marginal_ce": ["online"]},
                      "methods": {"online": {"grid_lo": -2, "grid_hi": 2, "subset_fraction": 0.5}},
                      "model": {"conv1": 2, "conv2": 2, "hidden": 8},
                      "procedure": {k: one for k in ("unary", "pairwise", "finetune", "joint")}})
    assert missing_inputs(cfg, tmp_path) and "ocr_letters/letters.parquet" in missing_inputs(cfg, tmp_path)[0]
    _tiny_ocr(tmp_path / "ocr_letters/letters.parquet")
    assert missing_inputs(cfg, tmp_path) == []
    (run,) = design(cfg)
    # one epoch on random letters does not beat the untrained network on dev: the guard fails the run
    with pytest.raises(DidNotLearn, match="scaling ocr marginal_ce online"):
        train_and_evaluate(run, cfg, tmp_path, "cpu", base_seed=13)
    cfg = dataclasses.replace(cfg, guard=False)            # the record's plumbing, on random data
    seen = []
    rec = train_and_evaluate(run, cfg, tmp_path, "cpu", base_seed=13, on_epoch=seen.append)
    assert {k: rec[k] for k in ("task", "objective", "procedure", "fold", "seed")} == {
        "task": "ocr", "objective": "marginal_ce", "procedure": "online", "fold": 1, "seed": 0}
    assert rec["alpha"] in (0.25, 0.5, 1.0, 2.0, 4.0) and rec["history"] == seen and len(seen) == 1
    assert 0 <= rec["test_score"] <= 100 and 0 <= rec["train_score"] <= 100 and rec["epochs"] == 1
    assert rec["n_train"] == 8 and rec["n_test"] == 8 and rec["device"] == "cpu"   # folds 1 and 2 of 0..2
    assert math.isfinite(rec["history"][0]["subset_loss"])
    # per-item statistics: one row per test word / word of D; their sums are the scores
    st = rec["item_stats"]
    test, train, logr = (np.asarray(st[k]) for k in ("test", "train", "log_ratio"))
    assert st["columns"] == ["item_accuracy", "scored"] and test.shape == (8, 2) and train.shape[1] == 2
    assert rec["test_score"] == pytest.approx(100 * test[:, 0].sum() / test[:, 1].sum())
    assert rec["train_score"] == pytest.approx(100 * train[:, 0].sum() / train[:, 1].sum())
    assert ((test[:, 0] >= 0) & (test[:, 0] <= 1)).all() and (test[:, 1] == 1).all()     # every word scored
    assert logr.shape == train.shape and np.isfinite(logr).all() and set(logr[:, 1]) <= {0.0, 1.0}
    again = train_and_evaluate(run, cfg, tmp_path, "cpu", base_seed=13)          # seeded: the same numbers
    assert again["test_score"] == rec["test_score"] and again["alpha"] == rec["alpha"]
    other = train_and_evaluate(run, cfg, tmp_path, "cpu", base_seed=14)          # base.seed reseeds the run
    assert other["history"] != rec["history"]



class _Fake:
    """The parts of a model, potentials and task that item_stats and evaluate read: batch ``b``'s
    counts are ``ok[b], n[b]``; its potentials' norms ``u[b], w[b]``."""
    def __init__(self, metric, ok, n, u=None, w=None):
        import torch
        self.metric, self.training = metric, True
        self.ok, self.n = [torch.tensor(x) for x in ok], [torch.tensor(x) for x in n]
        self.u = [torch.tensor(x, dtype=torch.float64) for x in (u or [])]
        self.w = [torch.tensor(x, dtype=torch.float64) for x in (w or [])]

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def potentials(self, b):
        import types
        return types.SimpleNamespace(b=b, unary_norm=lambda: self.u[b], pairwise_norm=lambda: self.w[b])

    def predict(self, p):
        return p.b

    unary_predict = predict

    def counts(self, pred, b):
        return self.ok[pred], self.n[pred]


@pytest.mark.parametrize("metric", ["per_example", "pooled", "span_f1"])
def test_item_stats_sum_to_the_evaluated_score(metric):
    """item_stats' rows sum to evaluate()'s score for every metric; an item with nothing scored
    (a snake grid of background only) is a [0, 0] row, left out as evaluate leaves it out."""
    from components.training.structured import evaluate
    from components.training.studies import ITEM_COLUMNS, item_stats, stats_score
    f = _Fake(metric, ok=[[3, 0, 2], [1, 0]], n=[[4, 2, 2], [1, 0]])
    rows = item_stats(f, f, [0, 1])
    assert rows.shape == (5, 2) and len(ITEM_COLUMNS[metric]) == 2 and f.training
    assert stats_score(rows) == pytest.approx(100 * evaluate(f, f, [0, 1]))
    if metric == "per_example":
        assert rows.tolist() == [[0.75, 1], [0, 1], [1, 1], [1, 1], [0, 0]]
    else:
        assert rows.tolist() == [[3, 4], [0, 2], [2, 2], [1, 1], [0, 0]]


def test_item_log_ratios_skip_items_without_a_pairwise_term():
    from components.training.studies import item_log_ratios
    f = _Fake("pooled", ok=[], n=[], u=[[10.0, 1.0, 5.0]], w=[[1.0, 10.0, 0.0]])
    rows = item_log_ratios(f, [0])
    assert np.allclose(rows, [[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])


def test_the_guard_asks_for_a_clear_gain():
    """A scaling run must beat its untrained model by guard_min_gain points (5 by default): a snakes
    GCRF whose scaling collapsed to 10.1 against its untrained 10 is not a table cell."""
    assert _study().guard_min_gain == 5.0
    with pytest.raises(ConfigError, match="guard_min_gain"):
        _study(guard_min_gain=-1.0)
