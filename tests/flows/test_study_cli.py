"""``python -m flows.study``: an Optuna study of a task sweep stage without Ray, in the project's storage
and MLflow store; stages without an Optuna space are refused, naming them."""
from __future__ import annotations

import copy
import os

import optuna
import pytest
import yaml

from components.config import BaseConfig, ConfigError, load_params, load_section
from components.tracking.base import NullTracker
from components.tracking.mlflow_tracker import MlflowTracker
from flows import study as study_cli
from flows.search_space import first_suggestion
from flows.stages import prepare
from flows.stages.common import run_stage
from flows.study_storage import STUDY_STORAGE_ENV
from flows.task_sweeps import TaskSweepConfig, searcher_seed


@pytest.fixture
def prepared(tiny_root, monkeypatch):
    root, params = tiny_root
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root, tracker=NullTracker())
    params["train"]["tasks"] = ["pos"]
    # a few epochs at a learning rate a tiny tagger learns with: a trial that does not learn fails (the guard)
    params["train"]["optim"].update(epochs=3)
    params["train"]["sweep"]["space"]["train.optim.lr"] = {"type": "loguniform", "low": 0.02, "high": 0.05}
    return root, params


def test_the_study_gets_n_trials_in_the_storage_and_mlflow_runs(prepared, capsys):
    root, params = prepared
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    study_cli.main(["train", "--trials", "2", "--params", str(path), "--root", str(root)])
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines if " trial " in ln and "->" in ln] == ["train-pos trial 0", "train-pos trial 1"]

    url = f"sqlite:///{root / 'optuna.db'}"                 # beside the MLflow store (the root here)
    study = optuna.load_study(study_name="train-pos", storage=url)
    trials = sorted(study.trials, key=lambda t: t.number)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    written = load_params(path)          # as the CLI read it (the space's key order steers the sampler)
    seed = searcher_seed(load_section(BaseConfig, "base", written).seed, "train", "pos")   # the pipeline's
    assert trials[0].params == first_suggestion(load_section(TaskSweepConfig, "train", written).sweep, written, seed)

    tracker = MlflowTracker("approxinfer/tu_gimpel", tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    runs = {r.info.run_id: r for r in tracker.search_runs("tags.optuna_study = 'train-pos'")}
    parents = [r for r in runs.values() if r.info.run_name == "study/train-pos"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    for t in trials:
        run = runs[t.user_attrs["mlflow_run_id"]]
        assert run.info.run_name == f"trial/{t.number}" and run.info.status == "FINISHED"
        assert run.data.tags["optuna_trial_number"] == str(t.number)
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.metrics["best_dev_score"] == pytest.approx(t.value)
        assert "test_score" in run.data.metrics and "dev_score" in run.data.metrics
        assert float(run.data.params["train.optim.lr"]) == pytest.approx(t.params["train.optim.lr"])
    assert parents[0].data.metrics["best_best_dev_score"] == pytest.approx(study.best_value)

    # the user's study resumes: one more trial, numbered on, not a repeat of the first suggestions
    summary = study_cli.run_study("train", params, root, trials=1, tracker=NullTracker(), out=lambda s: None)
    again = sorted(optuna.load_study(study_name="train-pos", storage=url).trials, key=lambda t: t.number)
    assert summary["n_trials"] == 3 and [t.number for t in again] == [0, 1, 2]
    assert again[2].params not in [t.params for t in trials]


def test_stages_without_an_optuna_space_are_refused_naming_them(tiny_root, capsys):
    root, params = tiny_root
    with pytest.raises(ConfigError, match=r"stage 'cmlm' has no Optuna-driven task sweep .*infnets, train, train_energy"):
        study_cli.run_study("cmlm", params, root, trials=1)
    with pytest.raises(SystemExit) as e:
        study_cli.main(["prepare", "--trials", "1", "--root", str(root)])
    assert e.value.code == 2 and "stage 'prepare' has no Optuna-driven task sweep" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="stage 'nope': no such stage"):
        study_cli.run_study("nope", params, root, trials=1)
    empty = copy.deepcopy(params)
    empty["train"]["sweep"]["space"] = {}
    with pytest.raises(ConfigError, match=r"train.sweep.space is empty: stage 'train'"):
        study_cli.run_study("train", empty, root, trials=1)
    with pytest.raises(ConfigError, match=r"pick one run with --task, one of \['pos', 'ner'\]"):
        study_cli.run_study("train", params, root, trials=1)
    with pytest.raises(ConfigError, match=r"--task 'chunk': 'chunk' is not one of train.tasks"):
        study_cli.run_study("train", params, root, trials=1, task="chunk")
    with pytest.raises(FileNotFoundError, match="'pos' has not been prepared"):
        study_cli.run_study("train", params, root, trials=1, task="pos")
    with pytest.raises(ConfigError, match="--trials must be >= 1"):
        study_cli.run_study("train", params, root, trials=0, task="pos")
