"""PostgreSQL + the MLflow tracking server on loopback, with a real sweep through them.

A two-trial Optuna sweep through the project's spine (``flows.sweeps.run_sweep``: Ray Tune,
``OptunaSearch``, Ray's ``MLflowLoggerCallback``) logs to ``infra/mlflow-server.sh`` (PostgreSQL
backend store, artifacts proxied to a local folder) through the project's ``MlflowTracker``, with
``APPROXINFER_OPTUNA_STORAGE`` naming the Optuna database on the same PostgreSQL server. Read back:
through ``MlflowClient``, the parent run and its two nested trial runs with their params, metric
histories and artifacts (downloaded through the server, stored under its artifact folder, rows in
PostgreSQL); through Optuna, the sweep's study in PostgreSQL with two complete trials that match
the MLflow runs; and in a second process, the study loaded by name, and a study written by that
process read here.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, MlflowServer, Postgres

pytestmark = pytest.mark.integration

EXPERIMENT = "integration-postgres"
SWEEP = "pg-sweep"
LR = "train.optim.lr"


def score(lr: float) -> float:
    """The tiny trainable's final dev score: a smooth function of the learning rate."""
    return 1.0 - (math.log10(lr) + 2.5) ** 2


def libpq_url(sqlalchemy_url: str) -> str:
    """``postgresql+psycopg2://...`` -> ``postgresql://...`` (what psycopg2.connect takes)."""
    return sqlalchemy_url.replace("postgresql+psycopg2://", "postgresql://", 1)


@dataclass(frozen=True)
class Sweep:
    result: object           # flows.sweeps.SweepResult
    parent_run_id: str
    experiment_id: str
    server: MlflowServer
    postgres: Postgres


@pytest.fixture(scope="module")
def sweep(postgres: Postgres, mlflow_server: MlflowServer, tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    from components.config import ResourcesConfig
    from components.tracking.mlflow_tracker import MlflowTracker
    from flows.ray_runtime import shutdown_ray
    from flows.sweeps import SweepConfig, run_sweep

    work = tmp_path_factory.mktemp("pg-sweep")

    def trainable(config):
        from ray import tune
        lr = float(config[LR])
        # a file in the trial folder: Ray's MLflow callback uploads the folder as the run's artifacts
        Path(tune.get_context().get_trial_dir(), "lr.txt").write_text(repr(lr))
        tune.report({"best_dev_score": score(lr) - 0.5, "loss": 2.0})
        tune.report({"best_dev_score": score(lr), "loss": 1.0})

    cfg = SweepConfig(num_samples=2, max_concurrent=2, resources=ResourcesConfig(cpu=1, gpu=0), max_failures=0,
                      space={LR: {"type": "loguniform", "low": 1e-4, "high": 1e-1}})
    tracker = MlflowTracker(EXPERIMENT, tracking_uri=mlflow_server.url)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("APPROXINFER_OPTUNA_STORAGE", postgres.optuna_url)
        mp.setenv("RAY_AUTH_MODE", "disabled")
        mp.delenv("RAY_ADDRESS", raising=False)            # a local Ray instance, not a cluster
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        try:
            with tracker.start_run("sweep/pg", tags={"stage": "integration"}) as parent:
                # a fresh process per trial: a reused one (Ray's reset) writes its trial folder
                # elsewhere, so the second trial's lr.txt would not be uploaded (CI, 2026-11-27)
                result = run_sweep(trainable, name=SWEEP, cfg=cfg, params={"train": {"optim": {"lr": 0.01}}},
                                   seed=0, tracker=tracker, parent_run_id=parent, storage=work / "ray",
                                   reuse_actors=False)
                summary = work / "summary.json"
                summary.write_text(json.dumps({"best_config": result.best_config}, sort_keys=True))
                tracker.log_artifact(summary)
        finally:
            shutdown_ray()
    return Sweep(result=result, parent_run_id=parent, experiment_id=tracker.ensure_experiment(),
                 server=mlflow_server, postgres=postgres)


def _children(client, sweep: Sweep) -> list:
    return client.search_runs([sweep.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{sweep.parent_run_id}'")


def test_the_sweep_is_logged_through_the_server_into_postgres(sweep: Sweep, tmp_path):
    from mlflow.artifacts import download_artifacts
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=sweep.server.url)

    exp = client.get_experiment(sweep.experiment_id)
    assert exp.name == EXPERIMENT
    assert exp.artifact_location.startswith("mlflow-artifacts:")      # artifacts go through the server

    parent = client.get_run(sweep.parent_run_id)
    assert parent.info.status == "FINISHED" and parent.info.run_name == "sweep/pg"
    assert parent.data.tags["stage"] == "integration"
    got = download_artifacts(run_id=parent.info.run_id, artifact_path="summary.json", dst_path=str(tmp_path / "p"),
                             tracking_uri=sweep.server.url)
    assert json.loads(Path(got).read_text()) == {"best_config": sweep.result.best_config}

    children = _children(client, sweep)
    assert len(children) == 2
    lrs = []
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.tags["sweep"] == SWEEP
        lr = float(run.data.params[LR])
        lrs.append(lr)
        assert 1e-4 <= lr <= 1e-1
        assert run.data.metrics["best_dev_score"] == pytest.approx(score(lr))
        history = client.get_metric_history(run.info.run_id, "loss")
        assert [m.value for m in sorted(history, key=lambda m: m.step)] == [2.0, 1.0]
        # the trial folder's file, uploaded through the server's artifact proxy ...
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "lr.txt" in names, names
        got = client.download_artifacts(run.info.run_id, "lr.txt", str(tmp_path / run.info.run_id))
        assert float(Path(got).read_text()) == lr
        # ... served over HTTP by the proxy endpoint, and stored in its --artifacts-destination
        rel = f"{sweep.experiment_id}/{run.info.run_id}/artifacts/lr.txt"
        assert run.info.artifact_uri == f"mlflow-artifacts:/{sweep.experiment_id}/{run.info.run_id}/artifacts"
        with urllib.request.urlopen(f"{sweep.server.url}/api/2.0/mlflow-artifacts/artifacts/{rel}", timeout=30) as r:
            assert float(r.read().decode()) == lr
        assert float((sweep.server.artifacts / rel).read_text()) == lr
    assert len(set(lrs)) == 2                                          # two different suggestions
    best = max(children, key=lambda r: r.data.metrics["best_dev_score"])
    assert float(best.data.params[LR]) == pytest.approx(sweep.result.best_config[LR])

    # the server's backend store is the PostgreSQL database: the three runs are rows there
    import psycopg2
    with psycopg2.connect(libpq_url(sweep.postgres.mlflow_url)) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_uuid, status FROM runs WHERE experiment_id = %s", (int(sweep.experiment_id),))
        rows = dict(cur.fetchall())
        cur.execute("SELECT count(*) FROM metrics WHERE key = 'loss' AND run_uuid = ANY(%s)",
                    ([r.info.run_id for r in children],))
        n_loss = cur.fetchone()[0]
    conn.close()
    assert rows == {sweep.parent_run_id: "FINISHED", **{r.info.run_id: "FINISHED" for r in children}}
    assert n_loss == 4


def test_the_sweeps_optuna_study_is_in_postgres(sweep: Sweep):
    import optuna
    from mlflow.tracking import MlflowClient
    from flows.study_storage import MLFLOW_RUN_ATTR, STUDY_TAG

    name = sweep.result.study
    assert name and name.startswith(f"{SWEEP}-")
    storage = sweep.postgres.optuna_url
    assert name in optuna.study.get_all_study_names(storage=storage)
    study = optuna.load_study(study_name=name, storage=storage)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2

    client = MlflowClient(tracking_uri=sweep.server.url)
    assert client.get_run(sweep.parent_run_id).data.tags[STUDY_TAG] == name
    runs = {r.info.run_id: r for r in _children(client, sweep)}
    for t in trials:       # each Optuna trial is one MLflow trial run: same suggestion, same final score
        run = runs[t.user_attrs[MLFLOW_RUN_ATTR]]
        assert run.data.tags[STUDY_TAG] == name
        assert t.params[LR] == pytest.approx(float(run.data.params[LR]))
        assert t.value == pytest.approx(run.data.metrics["best_dev_score"])
    assert study.best_value == pytest.approx(max(t.value for t in trials))

    # and the study really lives in the PostgreSQL database named by APPROXINFER_OPTUNA_STORAGE
    import psycopg2
    with psycopg2.connect(libpq_url(storage)) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM trials JOIN studies USING (study_id) "
                    "WHERE studies.study_name = %s AND trials.state = 'COMPLETE'", (name,))
        n = cur.fetchone()[0]
    conn.close()
    assert n == 2


SECOND_PROCESS = textwrap.dedent('''
    """Reads the sweep's study by name; writes a study of its own; prints what it saw as JSON."""
    import json, sys
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage, sweep_study, own_study = sys.argv[1:4]
    seen = optuna.load_study(study_name=sweep_study, storage=storage)
    own = optuna.create_study(study_name=own_study, storage=storage, direction="minimize")
    own.optimize(lambda t: (t.suggest_float("x", -1.0, 1.0) - 0.25) ** 2, n_trials=3)
    print(json.dumps({"trials": [[t.number, t.state.name, t.params, t.value] for t in seen.trials],
                      "own_best": own.best_value}))
''')


def test_the_optuna_storage_on_postgres_is_shared_with_a_second_process(sweep: Sweep):
    import optuna
    storage, name = sweep.postgres.optuna_url, sweep.result.study
    own = "second-process"
    proc = subprocess.run([sys.executable, "-c", SECOND_PROCESS, storage, name, own], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    here = optuna.load_study(study_name=name, storage=storage).trials
    assert seen["trials"] == [[t.number, t.state.name, t.params, t.value] for t in here]
    assert [s for _, s, _, _ in seen["trials"]] == ["COMPLETE", "COMPLETE"]
    written = optuna.load_study(study_name=own, storage=storage)     # the other process has exited
    assert [t.state for t in written.trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert written.best_value == pytest.approx(seen["own_best"])
