"""``run_task_sweeps`` with ``sweep.num_samples: 1``: every (task, variant) as one element of one grid.

The grid must not change results: each element's hyperparameters are the first suggestion of the
seeded searcher its own one-trial sweep used to get — checked against the committed metrics, which
record each sweep's chosen values as ``config.<dotted key>``."""
import json
from pathlib import Path

import pytest

from components.config import BaseConfig, ResourcesConfig, load_params, load_section, resolve_scale
from components.tracking import NullTracker
from flows import task_sweeps
from flows.search_space import first_suggestion
from flows.stages.common import StageContext, stage_params
from flows.sweeps import SweepConfig, SweepResult, run_sweep

SECTIONS = {"train_energy": "flows.stages.train_energy:SPEC", "infnets": "flows.stages.infnets:SPEC"}


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_first_suggestions_equal_the_committed_sweeps(section):
    params = stage_params(load_params("params.yaml"))          # the study's task list applied, as a stage runs
    spec = task_sweeps._spec(SECTIONS[section])
    cfg = load_section(spec.config, section, params)
    assert cfg.sweep.num_samples == 1 and cfg.sweep.space      # the grid path, with something drawn
    base_seed = load_section(BaseConfig, "base", params).seed
    for task in cfg.tasks:
        committed = json.loads(Path(f"metrics/{section}/{task}.json").read_text())
        keys = [task_sweeps._names(task, v)[1] for v in spec.variants(cfg, task)]
        assert set(committed) - {"stage_seconds"} == set(keys)
        for key in keys:
            # a fresh searcher per (task, variant), seeded per task (the variants' suggestions are paired)
            drawn = first_suggestion(cfg.sweep, params, task_sweeps.searcher_seed(base_seed, section, task))
            recorded = {k[len("config."):]: v for k, v in committed[key].items() if k.startswith("config.")}
            assert drawn == recorded, key                         # exact, floats included


def _fake_root(tmp_path, tasks):
    params = resolve_scale(load_params("params.yaml"))
    params["train_energy"]["tasks"] = list(tasks)
    for t in tasks:
        (tmp_path / "data/prepared" / t).mkdir(parents=True)
        (tmp_path / "data/prepared" / t / "meta.json").write_text("{}")
    return params


def _fake_run_sweep(tmp_path, calls, failing=()):
    """A stand-in for ``run_sweep`` over a grid: one finished trial per element, no Ray."""
    def fake(trainable, *, name, cfg, params, seed, tracker, parent_run_id, storage, tags, grid, trial_tags,
             allow_errors=False):
        # failed trials (a model that did not learn) come back for _element_result to judge
        assert allow_errors and cfg.num_samples == 1 and cfg.max_concurrent == 2 and name == "train_energy-a+b"
        rows = []
        for i, el in enumerate(grid):
            calls.append((el, trial_tags({"run": el})))
            trial = tmp_path / "ray" / str(i)
            (trial / "ckpt").mkdir(parents=True)
            (trial / "ckpt" / "model.json").write_text(json.dumps({"element": i}))
            (trial / "ckpt" / "history.json").write_text(json.dumps([{"epoch": 1, "train_loss": 1.0, "dev_score": 50.0 + i}]))
            failed = (el["task"], el["variant"]) in failing
            rows.append({"config": {"run": el}, "error": "RuntimeError('boom')" if failed else "",
                         "metrics": {} if failed else {"best_dev_score": 50.0 + i, "test_score": 60.0 + i,
                                                       "epochs_run": 1.0, "training_iteration": 2},
                         "path": str(trial), "checkpoint": None if failed else str(trial / "ckpt")})
        return SweepResult(best_config={}, best_metrics={}, best_checkpoint=None, trials=rows)
    return fake


def _ctx(tmp_path, params, tracker, run_id):
    return StageContext(root=tmp_path, base=load_section(BaseConfig, "base", params), tracker=tracker,
                        run_id=run_id, stage="train_energy")


def test_grid_records_each_task_variant_under_its_own_parent(tmp_path, monkeypatch):
    from ray import tune
    params = _fake_root(tmp_path, ["a", "b"])
    calls = []
    monkeypatch.setattr(task_sweeps, "run_sweep", _fake_run_sweep(tmp_path, calls))
    monkeypatch.setattr(tune, "with_parameters", lambda f, **kw: f)     # no object store
    tracker = NullTracker()
    with tracker.start_run("train_energy") as stage_id:
        m = task_sweeps.run_task_sweeps(SECTIONS["train_energy"], params, _ctx(tmp_path, params, tracker, stage_id))

    keys = ["a-blstm_crf", "a-blstm_crf_plus", "b-blstm_crf", "b-blstm_crf_plus"]
    assert list(m) == keys
    cfg = load_section(task_sweeps._spec(SECTIONS["train_energy"]).config, "train_energy", params)
    base_seed = load_section(BaseConfig, "base", params).seed
    runs = {r["name"]: r for r in tracker.runs}
    for i, key in enumerate(keys):
        task, variant = key.split("-", 1)
        lr = first_suggestion(cfg.sweep, params, task_sweeps.searcher_seed(base_seed, "train_energy", task))
        el, tags = calls[i]
        assert el == {"task": task, "variant": variant, "config": lr}
        assert m[key] == {"best_dev_score": 50.0 + i, "test_score": 60.0 + i, "epochs_run": 1.0,
                          **{f"config.{k}": v for k, v in lr.items()}, "n_trials": 1, "n_failed": 0}
        parent = runs[f"sweep/{task}/{variant}"]
        assert parent["parent"] == stage_id and parent["tags"] == {"stage": "train_energy", "task": task, "variant": variant}
        assert tags == {"mlflow.parentRunId": parent["id"], "sweep": f"train_energy-{key}", "task": task}
        assert parent["params"]["task"] == task and parent["params"]["variant"] == variant
        assert {f"best.{k}" for k in lr} <= set(parent["params"]) and "space.train_energy.optim.lr" in parent["params"]
        assert parent["metrics"] == {"best_dev_score": 50.0 + i, "test_score": 60.0 + i, "epochs_run": 1.0,
                                     **{f"config.{k}": v for k, v in lr.items()}}
        dest = tmp_path / "models/energy" / task / variant
        assert parent["artifacts"] == [f"{key}_sweep_curves.png", str(dest / "model.json")]
        assert json.loads((dest / "model.json").read_text()) == {"element": i}
        curve = json.loads((tmp_path / "plots/train_energy" / task / f"{variant}.json").read_text())
        assert curve == [{"epoch": 1, "train_loss": 1.0, "dev_score": 50.0 + i}]
    assert tracker.runs[0]["metrics"] == {}                               # nothing leaked onto the stage run


def test_grid_element_whose_every_trial_failed_is_an_error(tmp_path, monkeypatch):
    from ray import tune
    params = _fake_root(tmp_path, ["a", "b"])
    monkeypatch.setattr(task_sweeps, "run_sweep", _fake_run_sweep(tmp_path, [], failing={("b", "blstm_crf")}))
    monkeypatch.setattr(tune, "with_parameters", lambda f, **kw: f)
    tracker = NullTracker()
    with tracker.start_run("train_energy") as stage_id:
        with pytest.raises(RuntimeError, match=r"sweep train_energy-b-blstm_crf: every trial failed \(RuntimeError"):
            task_sweeps.run_task_sweeps(SECTIONS["train_energy"], params, _ctx(tmp_path, params, tracker, stage_id))
    assert not (tmp_path / "models/energy").exists()                    # nothing recorded as finished


def test_a_per_task_training_cap_must_name_a_prepared_task(tmp_path, monkeypatch):
    from components.config import ConfigError
    params = _fake_root(tmp_path, ["a", "b"])
    params["train_energy"]["max_train_sentences"] = {"a": 5, "greek": 100}     # a typo of a task name
    monkeypatch.setattr(task_sweeps, "run_sweep", lambda *a, **k: pytest.fail("no sweep may start"))
    tracker = NullTracker()
    with tracker.start_run("train_energy") as stage_id:
        with pytest.raises(ConfigError, match=r"train_energy.max_train_sentences: 'greek' is not a prepared task"):
            task_sweeps.run_task_sweeps(SECTIONS["train_energy"], params, _ctx(tmp_path, params, tracker, stage_id))
    # one task of the stage (dvc.yaml's foreach narrows tasks to it): a cap of another task is no error
    params["train_energy"]["max_train_sentences"] = {"b": 5}
    params["train_energy"]["tasks"] = ["a"]
    assert load_section(task_sweeps._spec(SECTIONS["train_energy"]).config, "train_energy", params).train_cap("a") == 0


def _report(config):
    from ray import tune
    tune.report({"best_dev_score": float(len(config["run"]["variant"]))})


def test_trial_tags_attach_each_grid_trial_to_its_parent_run(tmp_path):
    """The real callback: one grid, each trial's MLflow run under the parent its element names."""
    import ray
    from components.tracking.mlflow_tracker import MlflowTracker
    tracker = MlflowTracker("grid", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    parents = {}
    with tracker.start_run("stage") as stage_id:
        with tracker.start_run("p/x", parent_run_id=stage_id) as parents["x"], \
                tracker.start_run("p/yy", parent_run_id=stage_id) as parents["yy"]:
            try:
                run_sweep(_report, name="grid", cfg=SweepConfig(num_samples=1, resources=ResourcesConfig(cpu=1, gpu=0)),
                          params={}, seed=0, tracker=tracker, parent_run_id=stage_id, storage=tmp_path / "ray",
                          tags={"stage": "s"}, grid=[{"variant": "x"}, {"variant": "yy"}],
                          trial_tags=lambda c: {"mlflow.parentRunId": parents[c["run"]["variant"]],
                                                "sweep": f"s-{c['run']['variant']}"})
            finally:
                ray.shutdown()
    trials = [r for r in tracker.search_runs() if r.info.run_name not in ("stage", "p/x", "p/yy")]
    assert len(trials) == 2
    for r in trials:
        v = r.data.params["run/variant"]
        assert r.data.tags["mlflow.parentRunId"] == parents[v] and r.data.tags["sweep"] == f"s-{v}"
        assert r.data.tags["stage"] == "s" and r.data.metrics["best_dev_score"] == len(v)
