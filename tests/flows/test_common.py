"""``run_stage`` with ``task``: one task of a per-task stage (the dvc.yaml ``foreach`` grids)."""
import json

import pytest

from components.config import ConfigError
from components.tracking.base import NullTracker
from flows.stages.common import run_stage


def _params():
    return {"base": {"tracker": "null"}, "demo": {"tasks": ["pos", "ner"], "x": 1}}


def test_a_task_narrows_the_section_and_writes_its_own_metrics(tmp_path):
    seen = {}

    def run(params, ctx):
        seen["tasks"] = params["demo"]["tasks"]
        return {t: {"score": 1.0} for t in params["demo"]["tasks"]}

    tracker = NullTracker()
    m = run_stage("demo", run, _params(), tmp_path, tracker=tracker, task="ner")
    assert seen["tasks"] == ["ner"] and set(m) == {"ner", "stage_seconds"}
    assert json.loads((tmp_path / "metrics/demo/ner.json").read_text())["ner"] == {"score": 1.0}
    assert not (tmp_path / "metrics/demo.json").exists()
    assert tracker.runs[0]["name"] == "demo@ner" and tracker.runs[0]["tags"]["task"] == "ner"
    run_stage("demo", run, _params(), tmp_path, tracker=NullTracker())
    assert seen["tasks"] == ["pos", "ner"] and (tmp_path / "metrics/demo.json").exists()


def test_an_unknown_task_is_an_error_before_work(tmp_path):
    def run(params, ctx):
        raise AssertionError("must not run")

    with pytest.raises(ConfigError, match=r"--task 'chunk': not one of demo.tasks \['pos', 'ner'\]"):
        run_stage("demo", run, _params(), tmp_path, tracker=NullTracker(), task="chunk")
