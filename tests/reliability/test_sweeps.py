"""Sweeps under interrupts, failures and bad settings (issue 14).

Slow (a real stage in a subprocess, local Ray): Ctrl-C during a two-trial sweep exits 130 with no
DVC output written and the runs KILLED; the re-run resumes the sweep, keeping the finished trial and
continuing the other from its checkpoint; a sweep with a failed trial fails the stage naming it; the
same stage run twice gives the same metrics. Fast (no Ray starts): every bad sweep setting is an
error that names its key before Ray or a model starts.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from components.config import ConfigError
from components.tracking.base import NullTracker
from components.tracking.mlflow_tracker import MlflowTracker
from flows.stages import prepare, train, train_energy
from flows.stages.common import run_stage

REPO = Path(__file__).resolve().parents[2]


def _trials(exp: Path) -> dict[str, list[dict]]:
    """trial folder -> its reported results (one JSON line each)."""
    out = {}
    for d in sorted(exp.glob("task_trial_*")):
        f = d / "result.json"
        out[d.name] = [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []
    return out


def _optuna_states(root: Path) -> list[str]:
    """The states of the trials of the project's one Optuna study, in order."""
    import optuna
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{root / 'optuna.db'}")
    return [t.state.name for t in study.get_trials(deepcopy=False)]


def _stage(root: Path, params: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "flows.stages.train", "--task", "pos", "--params", str(params),
                             "--root", str(root)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_ctrl_c_records_nothing_and_the_rerun_resumes_keeping_finished_trials(tiny_root):
    root, params = tiny_root
    run_stage("prepare", prepare.run, params, root)
    params["train"]["tasks"] = ["pos"]
    params["train"]["optim"].update(epochs=60, patience=60)
    params["train"]["sweep"].update(num_samples=2, max_concurrent=1)      # trial 1 finishes before trial 2 starts
    params["train"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 0.001, "high": 0.01}}
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    exp = root / ".ray_results" / "train@pos" / "train-pos"

    stage = _stage(root, path)
    deadline = time.time() + 240
    while True:                       # wait until one trial has finished and the other has a checkpoint
        trials = _trials(exp) if exp.exists() else {}
        done = [t for t, rs in trials.items() if rs and "epochs_run" in rs[-1]]
        # a result line is written once the driver has taken the result and its checkpoint
        going = [t for t, rs in trials.items() if t not in done and len(rs) >= 2]
        if done and going:
            break
        assert stage.poll() is None, stage.communicate()
        assert time.time() < deadline, "the sweep did not get going"
        time.sleep(0.05)
    stage.send_signal(signal.SIGINT)
    _, err = stage.communicate(timeout=60)
    assert stage.returncode == 130, err
    assert "interrupted by SIGINT; nothing was recorded as finished" in err
    assert not (root / "models" / "tagger" / "pos").exists()            # no DVC output written
    assert not (root / "metrics" / "train").exists() and not (root / "plots" / "train").exists()
    tracker = MlflowTracker("approxinfer/tu_gimpel", tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    status = {r.data.tags.get("trial_name", r.info.run_name): r.info.status
              for r in tracker.search_runs("tags.stage = 'train'")}
    finished, stopped = done[0].split("_")[2], going[0].split("_")[2]     # task_trial_<id>_<n>_...
    assert status == {"train@pos": "KILLED", "sweep/pos": "KILLED", f"task_trial_{finished}": "FINISHED",
                      f"task_trial_{stopped}": "KILLED"}
    kept = _trials(exp)[done[0]]
    assert _optuna_states(root) == ["COMPLETE", "FAIL"]       # Tune stopped the second: no trial left RUNNING

    stage = _stage(root, path)                                          # the re-run
    _, err = stage.communicate(timeout=300)
    assert stage.returncode == 0, err
    assert "sweep train-pos: resuming the earlier run" in err
    m = json.loads((root / "metrics" / "train" / "pos.json").read_text())["pos"]
    assert m["n_trials"] == 2 and m["n_failed"] == 0 and (root / "models" / "tagger" / "pos" / "model.pt").exists()
    assert not (root / ".ray_results" / "train@pos").exists()           # finished: nothing left to resume
    runs = tracker.search_runs("tags.stage = 'train'")
    by_trial: dict[str, list] = {}
    for r in runs:
        by_trial.setdefault(r.data.tags.get("trial_name", r.info.run_name), []).append(r)
    assert [r.info.status for r in by_trial[f"task_trial_{finished}"]] == ["FINISHED"]     # kept, not re-run
    resumed = [r for r in by_trial[f"task_trial_{stopped}"] if r.info.status == "FINISHED"]
    assert len(resumed) == 1
    first = min(x.value for x in tracker.client.get_metric_history(resumed[0].info.run_id, "training_iteration"))
    assert first > 1                                                     # continued from its checkpoint
    assert kept[-1]["epochs_run"] == 60
    # the resumed trial's outcome is a new trial of the same study, with its parameters
    assert _optuna_states(root) == ["COMPLETE", "FAIL", "COMPLETE"]
    import optuna
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{root / 'optuna.db'}")
    failed, redone = study.trials[1], study.trials[2]
    assert redone.params == failed.params and redone.user_attrs["resumes_trial"] == failed.number


@pytest.mark.slow
def test_a_sweep_with_a_failed_trial_fails_naming_it(tmp_path):
    """Before: one failed trial of two was dropped silently and the other became the result."""
    from components.config import ResourcesConfig
    from flows.sweeps import SweepConfig, run_sweep

    def flaky(config):
        from ray import tune
        if config["run"]["fail"]:
            raise ValueError("this trial breaks")
        tune.report({"best_dev_score": 1.0})

    cfg = SweepConfig(num_samples=1, max_concurrent=2, resources=ResourcesConfig(cpu=1, gpu=0), max_failures=0)
    kw = dict(name="flaky", cfg=cfg, params={}, seed=0, tracker=NullTracker(), parent_run_id="p",
              grid=[{"fail": False}, {"fail": True}])
    import ray
    try:
        with pytest.raises(RuntimeError, match=r"sweep flaky: 1 of 2 trial\(s\) did not finish: \w+ \(ERROR\) "
                                               r"\{'run': \{'fail': True\}\}"):
            run_sweep(flaky, storage=tmp_path / "a", **kw)
        res = run_sweep(flaky, storage=tmp_path / "b", allow_errors=(ValueError,), **kw)    # an allowed error is a result
        assert sorted(bool(t["error"]) for t in res.trials) == [False, True]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_a_sweep_that_finished_before_the_interrupt_is_not_run_again(tmp_path):
    """A stage with two grids stopped in the second: the re-run takes the first grid's results as
    they were, and a sweep of other settings starts afresh."""
    from components.config import ResourcesConfig
    from flows.sweeps import SweepConfig, run_sweep
    counter = tmp_path / "count"

    def trial(config):
        from ray import tune
        with open(counter, "a") as f:
            f.write("x")
        tune.report({"best_dev_score": float(config["run"]["v"])})

    cfg = SweepConfig(num_samples=1, max_concurrent=2, resources=ResourcesConfig(cpu=1, gpu=0), max_failures=0)
    kw = dict(name="first", cfg=cfg, seed=0, tracker=NullTracker(), parent_run_id="p", storage=tmp_path / "s")
    import ray
    try:
        a = run_sweep(trial, params={}, grid=[{"v": 1}, {"v": 2}], **kw)
        b = run_sweep(trial, params={}, grid=[{"v": 1}, {"v": 2}], **kw)
        assert counter.read_text() == "xx" and a.best_metrics["best_dev_score"] == b.best_metrics["best_dev_score"] == 2
        c = run_sweep(trial, params={"changed": 1}, grid=[{"v": 1}, {"v": 3}], **kw)
        assert counter.read_text() == "xxxx" and c.best_metrics["best_dev_score"] == 3
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_the_same_stage_twice_gives_the_same_metrics(tiny_root):
    root, params = tiny_root
    run_stage("prepare", prepare.run, params, root)
    params["train"]["tasks"] = ["pos"]
    import ray
    try:
        a = run_stage("train", train.run, params, root)
        b = run_stage("train", train.run, params, root)
    finally:
        ray.shutdown()
    a.pop("stage_seconds"), b.pop("stage_seconds")
    assert a == b


# -- bad settings: errors naming the key, before Ray starts --------------------------------------

def _ray_started() -> bool:
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


@pytest.mark.parametrize("edit, match", [
    (lambda p: p["train"]["sweep"]["space"].update({"train_energy.optim.lr": {"type": "loguniform", "low": 0.001, "high": 0.1}}),
     r"train.sweep.space: key 'train_energy.optim.lr' is not a setting of the 'train' section"),
    (lambda p: p["train"]["sweep"]["space"].update({"train.model": {"type": "choice", "values": [1, 2]}}),
     r"train.sweep.space: key 'train.model' is a section, not a setting"),
    (lambda p: p["train"]["sweep"]["space"].update({"train.optim.lrr": {"type": "loguniform", "low": 0.001, "high": 0.1}}),
     r"train.sweep.space.train.optim.lrr: .*unknown key\(s\) \['lrr'\]"),
    (lambda p: p["train"]["sweep"]["space"].update({"train.optim.batch_size": {"type": "choice", "values": [8, 0]}}),
     r"train.sweep.space.train.optim.batch_size: the value 0 is not valid: .*batch_size"),
    (lambda p: p["train"]["sweep"]["space"].update({"train.model.hidden": {"type": "choice", "values": [8, "big"]}}),
     r"train.sweep.space.train.model.hidden: the value 'big' is not valid"),
    (lambda p: p["train"]["sweep"]["space"].update({"train.optim.lr": {"type": "loguniform", "low": 0.1, "high": 0.01}}),
     r"train.sweep.space.train.optim.lr: need 0 < low < high"),
    (lambda p: p["train"]["sweep"].update(metric="best_dev_scor"),
     r"train.sweep.metric: 'best_dev_scor' is not reported by this stage's trials"),
    (lambda p: p["train"]["optim"].update(batch_size=0), r"train.optim.batch_size"),
    (lambda p: p["train"]["optim"].update(epochs=0), r"train.optim.epochs"),
    (lambda p: p["base"].update(device="gpu"), r"base.device"),
    (lambda p: p["train"]["sweep"].update(num_samples=0), r"train.sweep.num_samples"),
], ids=["other-section", "a-section", "typo", "choice-value", "choice-type", "bounds", "metric", "batch-size",
        "epochs", "device", "num-samples"])
def test_a_bad_sweep_setting_names_its_key_before_ray_starts(tiny_root, edit, match):
    root, params = tiny_root
    edit(params)
    with pytest.raises(ConfigError, match=match):
        run_stage("train", train.run, params, root, tracker=NullTracker(), task="pos")
    assert not _ray_started()


def test_train_energy_space_is_checked_against_its_own_section(tiny_root):
    root, params = tiny_root
    params["train_energy"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 0.001, "high": 0.1}}
    with pytest.raises(ConfigError, match=r"key 'train.optim.lr' is not a setting of the 'train_energy' section"):
        run_stage("train_energy", train_energy.run, params, root, tracker=NullTracker(), task="pos")
    assert not _ray_started()
