"""Persistent Optuna studies of the sweeps (issue 15): the study in the RDB storage, its trials tagged on
MLflow, the storage chosen by ``APPROXINFER_OPTUNA_STORAGE``, a re-run giving the same suggestions,
and the searcher's study surviving Ray's pickling of it (what a resume restores)."""
from __future__ import annotations

import math
import multiprocessing
import pickle
import shutil

import optuna
import pytest

from components.config import ConfigError, ResourcesConfig
from components.tracking.mlflow_tracker import MlflowTracker
from flows.ray_runtime import init_ray
from flows.search_space import build_space
from flows.study_storage import (STUDY_STORAGE_ENV, open_study_storage, optuna_distributions, study_searcher,
                                 study_storage_url, trial_number)
from flows.sweeps import SweepConfig, run_sweep

PARAMS = {"toy": {"lr": 0.01, "hidden": 4}}
SPACE = {"toy.lr": {"type": "loguniform", "low": 0.001, "high": 0.1},
         "toy.hidden": {"type": "choice", "values": [4, 8, 16]}}


def _score(config):
    return -(math.log10(config["toy.lr"]) + 2.0) ** 2 + config["toy.hidden"] / 100.0


def _objective(config):
    from ray import tune
    tune.report({"best_dev_score": _score(config)})


@pytest.fixture(scope="module")
def ray_session():
    import ray
    init_ray(num_cpus=2)
    yield
    ray.shutdown()


def _open_fresh(url: str) -> str:
    try:
        open_study_storage(url)
        return "ok"
    except Exception as e:        # without the lock: "table studies already exists", alembic_version UNIQUE
        return repr(e)


def test_processes_opening_a_fresh_sqlite_storage_at_once_do_not_race(tmp_path):
    """Without the lock, six processes creating one fresh SQLite storage fail on CREATE TABLE nearly
    every time. (Runs before the module's Ray session starts: it forks.)"""
    urls = [f"sqlite:///{tmp_path / str(k) / 'optuna.db'}" for k in range(3)]
    with multiprocessing.get_context("fork").Pool(6) as pool:
        assert pool.map(_open_fresh, [u for u in urls for _ in range(6)]) == ["ok"] * 18
    for url in urls:
        assert optuna.get_all_study_summaries(url) == []


def _sweep(root, tracker, name="toy", num_samples=2, seed=7):
    cfg = SweepConfig(num_samples=num_samples, max_concurrent=2, space=SPACE,
                      resources=ResourcesConfig(cpu=1, gpu=0), max_failures=0)
    with tracker.start_run(f"sweep/{name}", tags={"stage": "toy"}) as parent:
        res = run_sweep(_objective, name=name, cfg=cfg, params=PARAMS, seed=seed, tracker=tracker,
                        parent_run_id=parent, storage=root / ".ray_results" / "toy", tags={"stage": "toy"})
    return res, parent


def _study(url, name):
    return optuna.load_study(study_name=name, storage=url)


def test_a_sweep_keeps_its_study_in_the_storage_and_tags_its_mlflow_runs(tmp_path, monkeypatch, ray_session):
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    tracker = MlflowTracker("optuna-test", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    res, parent = _sweep(tmp_path, tracker)

    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert study_storage_url(tmp_path) == url                         # beside the MLflow store
    assert res.study.startswith("toy-") and len(res.study) == len("toy-") + 8
    study = _study(url, res.study)
    trials = sorted(study.trials, key=lambda t: t.number)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    by_params = {(t.params["toy.lr"], t.params["toy.hidden"]): t for t in trials}
    for row in res.trials:                                             # the values Ray got, trial by trial
        t = by_params[(row["config"]["toy.lr"], row["config"]["toy.hidden"])]
        assert t.value == pytest.approx(row["metrics"]["best_dev_score"]) == pytest.approx(_score(row["config"]))
    assert study.best_value == pytest.approx(res.best_metrics["best_dev_score"])

    # the suggestions of an in-memory seeded searcher (what the sweeps drew before the storage)
    from ray.tune.search.optuna import OptunaSearch
    mem = OptunaSearch(metric="best_dev_score", mode="max", seed=7)
    mem.set_search_properties("best_dev_score", "max", build_space(SPACE, PARAMS))
    assert [mem.suggest(f"m{i}") for i in range(2)] == [t.params for t in trials]

    runs = {r.info.run_id: r for r in tracker.search_runs("tags.sweep = 'toy'")}
    assert len(runs) == 2
    for t in trials:                                   # Optuna trial <-> its MLflow run, both ways
        run = runs[t.user_attrs["mlflow_run_id"]]
        assert run.data.tags["optuna_study"] == res.study
        assert run.data.tags["optuna_trial_number"] == str(t.number)
        assert run.data.tags["mlflow.parentRunId"] == parent
        assert float(run.data.params["toy.lr"]) == pytest.approx(t.params["toy.lr"])
        assert run.data.tags["trial_name"].endswith("_" + t.user_attrs["ray_trial_id"])     # Ray: <trainable>_<id>
    assert tracker.client.get_run(parent).data.tags["optuna_study"] == res.study

    # a fresh re-run of the finished sweep (the stage removed its Ray folder): a study of its own
    # beside the first, which stays — the same suggestions and values, not the earlier trials plus two more
    shutil.rmtree(tmp_path / ".ray_results")
    again, _ = _sweep(tmp_path, tracker)
    assert again.study == res.study + "-run2"
    rerun = sorted(_study(url, again.study).trials, key=lambda t: t.number)
    assert [(t.params, t.value) for t in rerun] == [(t.params, t.value) for t in trials]
    assert again.best_config == res.best_config and again.best_metrics["best_dev_score"] == res.best_metrics["best_dev_score"]
    assert [(t.params, t.value) for t in sorted(_study(url, res.study).trials, key=lambda t: t.number)] == \
        [(t.params, t.value) for t in trials]                            # the first run's study, untouched

    # another seed is another setting: a third study, listed beside the two
    shutil.rmtree(tmp_path / ".ray_results")
    seeded, _ = _sweep(tmp_path, tracker, seed=8)
    assert seeded.study.startswith("toy-") and seeded.study not in (res.study, again.study)
    assert sorted(s.study_name for s in optuna.get_all_study_summaries(url)) == sorted(
        [res.study, again.study, seeded.study])

    # APPROXINFER_OPTUNA_STORAGE selects another storage; other settings (one sample), another study
    elsewhere = tmp_path / "elsewhere" / "studies.db"
    monkeypatch.setenv(STUDY_STORAGE_ENV, f"sqlite:///{elsewhere}")
    assert study_storage_url(tmp_path) == f"sqlite:///{elsewhere}"
    other, _ = _sweep(tmp_path, tracker, num_samples=1)
    assert other.study != res.study and other.study.startswith("toy-")
    assert [t.state for t in _study(f"sqlite:///{elsewhere}", other.study).trials] == [optuna.trial.TrialState.COMPLETE]
    assert len(optuna.get_all_study_summaries(url)) == 3                # the default storage: untouched


LRS = {"toy.lr": {"type": "choice", "values": [0.1, 0.01, 0.001]}}
DUPLICATE_SEED = 14       # OptunaSearch(seed=14)'s first three draws over LRS: 0.001, 0.001, 0.001


def _lr_objective(config):
    from ray import tune
    tune.report({"best_dev_score": -abs(math.log10(config["toy.lr"]) + 2.0)})


@pytest.mark.parametrize("num_samples", [3, 5])
def test_a_sweep_over_a_finite_space_trains_distinct_settings(tmp_path, monkeypatch, caplog, ray_session, num_samples):
    """A sweep of a few trials over a finite space trains distinct settings, and one asked for more
    trials than the space holds tries it in full, once each. Before, the sweep's seeded TPE drew at
    random with replacement: with seed 14 (DUPLICATE_SEED) its three trials over three learning
    rates were 0.001 three times, and five trials five draws (22 of the seeds 0-29 repeat a setting
    in three draws)."""
    from ray.tune.search.optuna import OptunaSearch

    from components.tracking import NullTracker
    old = OptunaSearch(metric="best_dev_score", mode="max", seed=DUPLICATE_SEED)     # what the sweep had
    old.set_search_properties("best_dev_score", "max", build_space(LRS, PARAMS))
    assert [old.suggest(f"o{i}")["toy.lr"] for i in range(3)] == [0.001] * 3

    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    tracker = NullTracker()
    cfg = SweepConfig(num_samples=num_samples, max_concurrent=2, space=LRS, resources=ResourcesConfig(cpu=1, gpu=0),
                      max_failures=0)
    with caplog.at_level("WARNING", logger="flows.sweeps"), tracker.start_run("sweep/lrs") as parent:
        res = run_sweep(_lr_objective, name="lrs", cfg=cfg, params=PARAMS, seed=DUPLICATE_SEED, tracker=tracker,
                        parent_run_id=parent, storage=tmp_path / ".ray_results" / "toy")
    assert sorted(t["config"]["toy.lr"] for t in res.trials) == [0.001, 0.01, 0.1]
    trials = _study(f"sqlite:///{tmp_path / 'optuna.db'}", res.study).trials
    assert sorted(t.params["toy.lr"] for t in trials) == [0.001, 0.01, 0.1]
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert res.best_config == {"toy.lr": 0.01}
    tried_in_full = [r.getMessage() for r in caplog.records if "the space holds" in r.getMessage()]
    assert tried_in_full == ([] if num_samples == 3 else ["sweep lrs: the space holds 3 settings: each is tried "
                                                          "once, 3 trials, not 5"])


def test_a_bad_storage_url_is_an_error_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(STUDY_STORAGE_ENV, "nosuchdb://user:secret@host/db")
    with pytest.raises(ConfigError, match=STUDY_STORAGE_ENV) as e:
        open_study_storage(study_storage_url(tmp_path))
    assert "secret" not in str(e.value)


def test_the_searcher_keeps_writing_to_its_study_after_rays_pickling(tmp_path):
    """What a resume does: Ray unpickles the Tuner (cloudpickle: the searcher, its RDBStorage, the
    study) and restores the searcher's saved state; the restored searcher tells the same study."""
    from ray import cloudpickle
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = open_study_storage(url)
    searcher = study_searcher(metric="best_dev_score", mode="max", seed=3, study="s-1", storage=storage)
    searcher.set_search_properties("best_dev_score", "max", build_space(SPACE, PARAMS))
    first = searcher.suggest("ray-a")
    searcher.save(tmp_path / "searcher.pkl")

    restored = cloudpickle.loads(cloudpickle.dumps(searcher))             # tuner.pkl
    restored.restore(tmp_path / "searcher.pkl")                            # searcher-state
    restored.on_trial_complete("ray-a", {"best_dev_score": 0.5})
    second = restored.suggest("ray-b")
    (a, b) = sorted(_study(url, "s-1").trials, key=lambda t: t.number)
    assert (a.params, a.value, a.user_attrs["ray_trial_id"]) == (first, 0.5, "ray-a")
    assert (b.params, b.state, b.user_attrs["ray_trial_id"]) == (second, optuna.trial.TrialState.RUNNING, "ray-b")
    assert trial_number(storage, "s-1", "ray-b") == 1 and trial_number(storage, "s-1", "x") is None
    assert pickle.loads(pickle.dumps(storage)).url == url


def test_a_distinct_searcher_keeps_drawing_untried_settings_after_rays_pickling(tmp_path, monkeypatch):
    """A resumed sweep's searcher, with the distinct sampler (searcher-state is a plain pickle of its
    attributes, the sampler among them): it goes on suggesting settings no trial of the study has, and
    the tell that exhausts the space is no error (OptunaSearch would log BruteForceSampler's
    ``Study.stop`` RuntimeError as a warning)."""
    from ray import cloudpickle
    from ray.tune.search.optuna import optuna_search

    from flows.search_space import DistinctSampler, sweep_sampler
    warned = []
    monkeypatch.setattr(optuna_search.logger, "warning", lambda msg, *a, **k: warned.append(str(msg)))
    storage = open_study_storage(f"sqlite:///{tmp_path / 'optuna.db'}")
    searcher = study_searcher(metric="best_dev_score", mode="max", seed=3, study="s-1", storage=storage,
                              sampler=sweep_sampler(LRS, 3, 3))
    searcher.set_search_properties("best_dev_score", "max", build_space(LRS, PARAMS))
    assert type(searcher._sampler) is DistinctSampler and searcher._seed is None
    drawn = [searcher.suggest("ray-a")["toy.lr"], searcher.suggest("ray-b")["toy.lr"]]     # two running
    searcher.save(tmp_path / "searcher.pkl")
    restored = cloudpickle.loads(cloudpickle.dumps(searcher))
    restored.restore(tmp_path / "searcher.pkl")
    restored.on_trial_complete("ray-a", {"best_dev_score": 0.5})
    drawn.append(restored.suggest("ray-c")["toy.lr"])
    restored.on_trial_complete("ray-b", {"best_dev_score": 0.1})
    restored.on_trial_complete("ray-c", {"best_dev_score": 0.2})         # the last tell: no Study.stop
    assert sorted(drawn) == [0.001, 0.01, 0.1] and warned == []
    assert [t.state for t in _study(f"sqlite:///{tmp_path / 'optuna.db'}", "s-1").trials] == \
        [optuna.trial.TrialState.COMPLETE] * 3


def test_optuna_distributions_match_what_optuna_search_converts():
    from ray.tune.search.optuna import OptunaSearch
    space = {**SPACE, "toy.depth": {"type": "randint", "low": 1, "high": 4},
             "toy.drop": {"type": "uniform", "low": 0.0, "high": 0.5}}
    params = {"toy": {**PARAMS["toy"], "depth": 2, "drop": 0.1}}
    assert optuna_distributions(space) == OptunaSearch.convert_search_space(build_space(space, params))
    with pytest.raises(ConfigError, match="toy.lr"):
        optuna_distributions({"toy.lr": {"type": "loguniform", "low": 0.0, "high": 1.0}})


def test_run_study_never_reuses_a_study_with_trials_and_a_resume_continues_the_latest(tmp_path):
    from flows.study_storage import run_study
    storage = open_study_storage(f"sqlite:///{tmp_path / 'optuna.db'}")
    assert run_study(storage, "s-abc", resume=False) == "s-abc"
    assert run_study(storage, "s-abc", resume=True) == "s-abc"          # nothing yet: the stem
    study = optuna.create_study(study_name="s-abc", storage=storage)
    assert run_study(storage, "s-abc", resume=False) == "s-abc"          # empty: reused
    study.add_trial(optuna.trial.create_trial(value=1.0))
    assert run_study(storage, "s-abc", resume=False) == "s-abc-run2"
    assert run_study(storage, "s-abc", resume=True) == "s-abc"
    optuna.create_study(study_name="s-abc-run2", storage=storage).add_trial(optuna.trial.create_trial(value=2.0))
    assert run_study(storage, "s-abc", resume=False) == "s-abc-run3"
    assert run_study(storage, "s-abc", resume=True) == "s-abc-run2"
    assert run_study(storage, "s-other", resume=False) == "s-other"
