"""MLflow implementation of :class:`~components.tracking.base.Tracker` (the one mlflow import).

Default store: a SQLite file ``mlflow.db`` and an artifact folder ``mlartifacts/`` in the main
repository (both git-ignored; see ``base.store_root``); ``MLFLOW_TRACKING_URI`` points it at a
server instead. A SQLite store is opened (its schema created or migrated on first use) under an
exclusive file lock ``mlflow.db.lock``, so processes starting together on a fresh store do not race
on ``CREATE TABLE``. The experiment is created here, in the driver, before any parallel trial
starts (parallel creation against a fresh SQLite file races).
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

from mlflow.tracking import MlflowClient  # noqa: E402

logging.getLogger("alembic").setLevel(logging.WARNING)


def _flat_value(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 6000 else s[:5997] + "..."


@contextlib.contextmanager
def _store_lock(tracking_uri: str):
    """An exclusive lock beside a ``sqlite:///`` store file for the block; nothing for a server."""
    if not tracking_uri.startswith("sqlite:///"):
        yield
        return
    db = Path(tracking_uri[len("sqlite:///"):])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class MlflowTracker:
    def __init__(self, experiment_name: str, *, tracking_uri: str, artifact_root: str | None = None):
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.artifact_root = artifact_root
        with _store_lock(tracking_uri):      # opening the store creates or migrates its schema
            self.client = MlflowClient(tracking_uri=tracking_uri)
            self.client.search_experiments(max_results=1)
        self._runs: list[str] = []
        self._experiment_id: str | None = None

    def ensure_experiment(self) -> str:
        if self._experiment_id is None:
            with _store_lock(self.tracking_uri):         # two processes creating the experiment at once
                self._experiment_id = self._get_or_create_experiment()
        return self._experiment_id

    def _get_or_create_experiment(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment_name)
        if exp is not None:
            return exp.experiment_id
        kwargs = {}
        if self.artifact_root and not self.tracking_uri.startswith(("http://", "https://")):
            kwargs["artifact_location"] = f"{self.artifact_root}/{self.experiment_name}"
        return self.client.create_experiment(self.experiment_name, **kwargs)

    @contextlib.contextmanager
    def start_run(self, name: str, *, parent_run_id: str | None = None,
                  tags: dict[str, str] | None = None) -> Iterator[str]:
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        all_tags["mlflow.runName"] = name
        run = self.client.create_run(self.ensure_experiment(), tags=all_tags, run_name=name)
        run_id = run.info.run_id
        self._runs.append(run_id)
        status = "FAILED"
        try:
            yield run_id
            status = "FINISHED"
        except KeyboardInterrupt:          # Ctrl-C, or a stage stopped by a signal (flows.lifecycle)
            status = "KILLED"
            raise
        finally:
            self._runs.pop()
            self.client.set_terminated(run_id, status=status)

    def _cur(self) -> str:
        if not self._runs:
            raise RuntimeError("MlflowTracker: no active run (call start_run first)")
        return self._runs[-1]

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param
        items = [Param(k, _flat_value(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self._cur(), params=items[i:i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric
        import time
        ts = int(time.time() * 1000)
        items = [Metric(k, float(v), ts, step or 0) for k, v in metrics.items()]
        for i in range(0, len(items), 500):
            self.client.log_batch(self._cur(), metrics=items[i:i + 500])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self._cur(), str(path), artifact_path)
        else:
            self.client.log_artifact(self._cur(), str(path), artifact_path)

    def log_figure(self, figure: Any, name: str) -> None:
        self.client.log_figure(self._cur(), figure, name)

    def set_tags(self, tags: dict[str, str]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self._cur(), k, _flat_value(v))

    def close_running(self, tags: dict[str, str], status: str = "KILLED") -> list[str]:
        """End every RUNNING run of the experiment that carries all of ``tags`` (runs of a stage that
        was killed before it could end them, or the trials of a sweep that was interrupted)."""
        flt = " and ".join([f"tags.`{k}` = '{v}'" for k, v in tags.items()] + ["attributes.status = 'RUNNING'"])
        ids = []
        for run in self.client.search_runs([self.ensure_experiment()], filter_string=flt, max_results=50000):
            if run.info.run_id not in self._runs:
                self.client.set_terminated(run.info.run_id, status=status)
                ids.append(run.info.run_id)
        return ids

    # read side, for tests and reports
    def search_runs(self, filter_string: str = "") -> list[Any]:
        return self.client.search_runs([self.ensure_experiment()], filter_string=filter_string)
