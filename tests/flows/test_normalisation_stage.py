"""Smoke test of the `normalisation` stage (two Ray grids over tagging and translation, Optuna inside
trials, subword vocabularies, BLEU) and of the `report_goyal_2019` stage on its outputs, and the
configuration checks, which fail before Ray or any model starts."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.config import ConfigError
from flows.stages import normalisation, prepare, report_goyal_2019, translator
from flows.stages.common import run_stage

GREEK = ["λόγος", "θεός", "ἦν", "ἐν", "ἀρχῇ", "καὶ", "ὁ", "πρὸς", "τὸν", "οὗτος"]
ENGLISH = {"λόγος": "word", "θεός": "God", "ἦν": "was", "ἐν": "in", "ἀρχῇ": "beginning", "καὶ": "and",
           "ὁ": "the", "πρὸς": "with", "τὸν": "the", "οὗτος": "he"}


def _parallel(root):
    rng = np.random.default_rng(1)
    out = root / "data" / "prepared" / "greek_english"
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 80), ("dev", 12), ("test", 12)):
        src = [[GREEK[i] for i in rng.integers(len(GREEK), size=rng.integers(2, 7))] for _ in range(n)]
        tgt = [[ENGLISH[w] for w in s] + ["."] for s in src]
        pq.write_table(pa.table({"verse_id": [f"{split}{i:03d}" for i in range(n)], "source": src, "target": tgt}),
                       out / f"{split}.parquet")


def _tiny(params):
    n = params["normalisation"]
    n.update(seeds=[0], trials=1, eval_batch_size=16, resources={"cpu": 1, "gpu": 0})
    # keys on top of the section's defaults (params.yaml states only what differs)
    t = n.setdefault("tagging", {})
    t.update(task="ner", beam_size=2, max_train_sentences=0, max_dev_sentences=0, space={},
             search_space={"normalisation.search.config.alpha.anneal": {"type": "choice", "values": [4.0]}},
             model={"hidden": 6, "label_dim": 3}, optim={"epochs": 1, "batch_size": 8},
             finetune={"epochs": 1, "batch_size": 8})
    m = n.setdefault("translation", {})
    m.update(beam_size=2, space={}, examples=2, max_train_pairs=0, max_dev_pairs=0, optim={"epochs": 1, "batch_size": 8},
             finetune={"epochs": 1, "batch_size": 8})
    from tests.flows.test_translation_chain import tiny_translator     # the model every translation row starts from
    tiny_translator(params, min_bleu=0.0)
    params["translator"]["train"]["optim"].update(epochs=3)
    m["ss"] = {"ss_greedy": {"objective": "scheduled_sampling", "config": {"feed": "greedy", "decay_k": 10}},
               "dss_annealed_sample": {"objective": "soft_scheduled_sampling",
                                       "config": {"feed": "sample", "decay_k": 10, "alpha": {"init": 1.0, "anneal": 2.0}}}}
    return params


def test_normalisation_stage_runs_both_grids_and_writes_the_report(tiny_root):
    root, params = tiny_root
    params = _tiny(params)
    run_stage("prepare", prepare.run, params, root)
    _parallel(root)
    import ray
    try:
        run_stage("translator", translator.run, params, root)
        m = run_stage("normalisation", normalisation.run, params, root)
    finally:
        ray.shutdown()
    tag = m["tagging"]
    assert set(tag["rows"]) == {"lstm", "blstm"}
    for enc in ("lstm", "blstm"):
        assert set(tag["rows"][enc]) == {"regular", "self_normalised"}
        for init, rows in tag["rows"][enc].items():
            assert set(rows) == {"pretrain_greedy", "pretrain_beam", "local", "global"}
            assert all(0.0 <= r["test"] <= 100.0 for r in rows.values())
            assert set(tag["log_z"][enc][init]) == {"train_mean", "train_var", "dev_mean", "dev_var", "dev_score", "failed"}
            assert (root / "models/normalisation/tagging" / enc / init / "global" / "model.json").exists()
    mt = m["translation"]
    assert set(mt["rows"]["self_normalised"]) == {"pretrain_greedy", "pretrain_beam", "local", "global"}
    assert set(mt["ss"]) == {"ce", "ss_greedy", "dss_annealed_sample"}
    assert mt["signature"].startswith("nrefs:1") and mt["src_vocab"] > 0 and mt["tgt_vocab"] > 0
    assert len(mt["breakdown"]["global"]["precisions"]) == 4
    assert len(mt["examples"]) == 2 and set(mt["examples"][0]["systems"]) == {
        f"{i}/{r}" for i in ("regular", "self_normalised") for r in ("pretrain_greedy", "pretrain_beam", "local", "global")}
    assert (root / "models/normalisation/translation/vocab/tgt.model").exists()
    # self-normalisation starts from the translator with log Z centred (the CE initialiser does not)
    mt_models = root / "models/normalisation/translation/bilstm_attention"
    sn = json.loads((mt_models / "self_normalised/pretrain/model.json").read_text())
    assert sn["centred_log_z"]["shift"] == pytest.approx(-sn["centred_log_z"]["mean_before"])
    assert abs(sn["log_z"]["train_mean"]) < abs(sn["centred_log_z"]["mean_before"])
    assert json.loads((mt_models / "regular/pretrain/model.json").read_text())["centred_log_z"] is None
    decoded = json.loads((root / "models/normalisation/translation/bilstm_attention/regular/local/decoded.json").read_text())
    assert len(decoded["test"]["soft_beam"]) == 12
    saved = json.loads((root / "metrics/normalisation.json").read_text())
    assert saved["tagging"]["rows"] == tag["rows"] and not {"findings", "verdicts"} & set(saved)
    assert not (root / "reports/goyal_2019").exists()        # the report is its own stage's
    r = run_stage("report_goyal_2019", report_goyal_2019.run, params, root)
    for f in ("README.md", "tables_2_3.png", "table_6.png", "translator_curve.png"):
        assert (root / "reports/goyal_2019" / f).exists(), f
    # every scored system's per-sentence statistics, and the findings judged from them
    from components.metrics.significance import load_stats
    from components.reports import kit
    stats = root / "metrics/stats/normalisation"
    tag_stats = load_stats(stats / "tagging.npz")
    assert set(tag_stats.systems) == {f"{e}/{i}/{r}" for e in ("lstm", "blstm") for i in ("regular", "self_normalised")
                                      for r in ("pretrain_greedy", "pretrain_beam", "local", "global")}
    assert tag_stats.columns == ("tp", "predicted", "gold")                   # ner: span F1's statistics
    mt_stats = load_stats(stats / "translation.npz")
    assert {"ss/ss_greedy", "self_normalised/global"} <= set(mt_stats.systems)
    assert mt_stats["self_normalised/global"].shape == (12, 10)
    assert load_stats(stats / "translation_dev.npz")["regular/local"].shape == (12, 10)
    assert load_stats(stats / "tagging_log_z.npz")["lstm/regular"].shape[-1] == 3
    assert set(load_stats(stats / "translation_log_z.npz").systems) == {"regular", "self_normalised"}
    assert load_stats(stats / "translation_dev_source_length.npz")["source"].shape == (12, 1)
    report = json.loads((root / "metrics/report_goyal_2019.json").read_text())
    assert report["findings"] == r["findings"]
    assert 0 < sum(r["findings"][w.replace(" ", "_")] for w in kit.VERDICTS) <= len(report["verdicts"])
    assert {v["verdict"] for v in report["verdicts"]} <= set(kit.VERDICTS)
    assert set(json.loads((root / "plots/normalisation/tagging.json").read_text())) >= {"lstm/regular/global"}


@pytest.mark.parametrize("edit, match", [
    (lambda n: n.setdefault("search", {}).update(objective="seq_ce"), "not a relaxed-beam objective"),
    (lambda n: n["tagging"].update(search_space={"train.optim.lr": {"type": "choice", "values": [1]}}),
     "not a setting of the 'normalisation' section"),
    (lambda n: n["tagging"].update(
        search_space={"normalisation.search.config.alpha.anneal": {"type": "choice", "values": [0.5]}}),
     "alpha.anneal must be >= 1"),
    (lambda n: n["translation"].update(space={"normalisation.translation.lam": {"type": "choice", "values": [-1.0]}}),
     "translation.space.normalisation.translation.lam: the value -1.0 is not valid"),
    (lambda n: n["tagging"].update(space={"normalisation.tagging.optim.lrr": {"type": "choice", "values": [1]}}),
     "unknown key"),
    (lambda n: n["tagging"].update(encoders=["gru"]), "encoders"),
    (lambda n: n["tagging"].update(lam=-1.0), "lam"),
    (lambda n: n["translation"].update(beam_size=0), "beam_size"),
    (lambda n: n["translation"]["ss"].update(bad={"objective": "beam_dl"}), "ss.bad.objective"),
    (lambda n: n["translation"]["ss"]["ss_greedy"].update(config={"feed": "argmax"}), "ss_greedy.config.feed"),
    (lambda n: n["translation"].update(max_train_pairs=-1), "max_train_pairs"),
    (lambda n: n.update(trials=0), "trials must be >= 1"),
    (lambda n: n.update(seeds=[]), "at least one seed"),
])
def test_bad_configuration_is_rejected_before_work(tiny_root, edit, match):
    root, params = tiny_root
    params = _tiny(params)
    edit(params["normalisation"])
    with pytest.raises((ConfigError, ValueError), match=match):
        normalisation.check_config(params)


def test_normalisation_without_a_translator_is_a_clear_error(tiny_root):
    root, params = tiny_root
    params = _tiny(params)
    run_stage("prepare", prepare.run, params, root)
    _parallel(root)
    import ray
    try:
        with pytest.raises(FileNotFoundError, match="models/translator"):
            run_stage("normalisation", normalisation.run, params, root)
    finally:
        ray.shutdown()


def test_unprepared_task_is_a_clear_error(tiny_root):
    root, params = tiny_root
    with pytest.raises(FileNotFoundError, match="task 'ner' has not been prepared"):
        run_stage("normalisation", normalisation.run, _tiny(params), root)
