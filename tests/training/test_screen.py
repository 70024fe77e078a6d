"""The CE screen of stand-in tasks (components.training.screen, flows/stages/screen.py): the
majority-tag baseline against its definition, the gaps against the per-sentence statistics they are
computed from, and the stage end to end on the tiny project (a non-tagging folder skipped with its
reason)."""
from __future__ import annotations

import json

import pytest

from components.data.batching import TaggingDataset
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab
from components.metrics.sentence_stats import load_stats
from components.metrics.tagging import stats_score
from components.training.screen import majority_tag, majority_tag_stats
from tests.flows.conftest import tiny_root  # noqa: F401 (fixture)


def _ds(sents):
    words = [w for s in sents for w in s.words]
    vocabs = {"word": build_vocab(words), "char": build_vocab(c for w in words for c in w),
              "label": build_label_vocab(sents)}
    return TaggingDataset(sents, vocabs)


def _s(tags, sid=""):
    return TaggedSentence(tuple(f"w{i}" for i in range(len(tags))), tuple(tags), sid)


def test_majority_tag_and_its_statistics():
    train = _ds([_s(["O", "O", "B-PER"]), _s(["O", "S-LOC"]), _s(["B-PER", "E-PER"])])
    assert majority_tag(train) == "O"
    test = _ds([_s(["O", "O"]), _s(["B-PER", "E-PER", "O"])])
    acc = majority_tag_stats(train, test, "accuracy")
    assert acc.tolist() == [[2, 2], [1, 3]]
    f1 = majority_tag_stats(train, test, "span_f1")          # all O: no predicted span, one gold span
    assert f1.tolist() == [[0, 0, 0], [0, 0, 1]] and stats_score("span_f1")(f1.sum(0)) == 0.0
    tie = _ds([_s(["B", "A"])])
    assert majority_tag(tie) == "A"                          # a tie: the first in sorted order


def test_screen_stage_end_to_end(tiny_root, monkeypatch):  # noqa: F811
    from flows import studies
    from flows.stages import prepare, screen
    from flows.stages.common import run_stage
    if "screen" not in studies.STUDIES["goyal_2018"]:      # until flows/studies.py lists the stage
        monkeypatch.setitem(studies.STUDIES, "goyal_2018", ("screen",) + studies.STUDIES["goyal_2018"])
    root, params = tiny_root
    run_stage("prepare", prepare.run, params, root)
    (root / "data/prepared/cmudict").mkdir()                   # a folder that is no tagging task
    (root / "data/prepared/cmudict/train.parquet").write_bytes(b"")
    params["screen"].update(tasks=["pos", "ner", "cmudict", "nope"], max_train_sentences=30, max_dev_sentences=10,
                            resamples=200, optim={"epochs": 1, "batch_size": 8}, model={"hidden": 6, "label_dim": 3})
    m = run_stage("screen", screen.run, params, root)
    assert set(m["tasks"]) == {"pos", "ner"}
    assert "not a tagging task" in m["skipped"]["cmudict"] and "not prepared" in m["skipped"]["nope"]
    for task, r in m["tasks"].items():
        st = load_stats(root / "metrics/stats/screen" / f"{task}.npz")
        assert set(st.systems) == {"uni/greedy", "uni/beam", "bi/greedy", "bi/beam", "majority/constant"}
        score = stats_score(r["metric"])
        for enc in ("uni", "bi"):
            assert r["models"][enc]["greedy"] == pytest.approx(float(score(st[f"{enc}/greedy"].sum(0))))
        g = r["gaps"]
        assert g["beam_minus_greedy"]["estimate"] == pytest.approx(r["models"]["uni"]["beam"] - r["models"]["uni"]["greedy"])
        assert g["bi_minus_uni"]["estimate"] == pytest.approx(r["models"]["bi"]["greedy"] - r["models"]["uni"]["greedy"])
        assert all(x["low"] <= x["estimate"] <= x["high"] and x["n"] == r["n_test"] for x in g.values())
        assert r["models"]["uni"]["encoder"] == "lstm" and r["models"]["bi"]["encoder"] == "blstm"
    assert json.loads((root / "metrics/screen.json").read_text())["tasks"].keys() == m["tasks"].keys()
    assert not (root / "reports/stand_in_screen").exists()     # the table is the report stage's
    from flows.stages import report_stand_in_screen
    r = run_stage("report_stand_in_screen", report_stand_in_screen.run, params, root)
    md = (root / "reports/stand_in_screen/README.md").read_text()
    assert "| pos |" in md and "| ner |" in md and "cmudict" in md
    from components.reports import kit
    premises = [v for v in r["verdicts"] if v["claim"] == "screen_premise"]
    assert len(premises) == 2 and sum(r["findings"][w.replace(" ", "_")] for w in kit.VERDICTS) == 2   # one a task
