"""The Tracker protocol and the null tracker used by tests.

A stage opens one run (``start_run``); a sweep opens a parent run and its trials become nested
child runs. Values are plain floats/strings; figures are matplotlib figures or files.

Provenance (``components.tracking.provenance``): the stage sets its tags once
(``set_provenance``: git commit, dirty flag, ``dvc.stage``); every run the tracker opens from then
on carries them, and ``run_tags()`` hands them to runs opened elsewhere (Ray's
``MLflowLoggerCallback`` trials). ``log_inputs`` records the stage's data deps as dataset inputs.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

from components.config import project_root
from components.tracking.provenance import DataInput


DVC_TEMP_WORKSPACES = (".dvc", "tmp", "exps")    # where ``dvc exp run --temp`` and queued experiments run


def store_root(root: str | Path = ".") -> Path:
    """The folder that holds the embedded MLflow store: the DVC project holding ``root``
    (:func:`components.config.project_root`: ``root`` itself, or the project above a scale's folder
    such as ``study/``, so every scale's runs are in one store), or — when that is one of DVC's
    temporary experiment workspaces (``<repo>/.dvc/tmp/exps/<tmp>/``, deleted after the run) — the
    main repository ``<repo>``, so those runs are not lost with the workspace."""
    path = project_root(root)
    parts = path.parts
    n = len(DVC_TEMP_WORKSPACES)
    for i in range(len(parts) - n):
        if parts[i:i + n] == DVC_TEMP_WORKSPACES:
            main = Path(*parts[:i])
            if not (main / ".dvc").is_dir():
                raise RuntimeError(f"{path} looks like a DVC temporary workspace, but {main} is not a DVC "
                                   f"repository: set MLFLOW_TRACKING_URI to say where runs are logged")
            return main
    return path


def default_tracking_uri(root: str | Path = ".") -> str:
    """``MLFLOW_TRACKING_URI`` if set, else the embedded store ``sqlite:///<store_root(root)>/mlflow.db``."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{store_root(root) / 'mlflow.db'}"


def default_artifact_root(root: str | Path = ".") -> str:
    return (store_root(root) / "mlartifacts").as_uri()


@runtime_checkable
class Tracker(Protocol):
    tracking_uri: str
    experiment_name: str

    def start_run(self, name: str, *, parent_run_id: str | None = None,
                  tags: dict[str, str] | None = None) -> contextlib.AbstractContextManager[str]: ...
    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def log_figure(self, figure: Any, name: str) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def ensure_experiment(self) -> str: ...
    def close_running(self, tags: dict[str, str], status: str = "KILLED") -> list[str]: ...
    # end every RUNNING run carrying all of ``tags`` with ``status`` -> their ids
    def set_provenance(self, tags: dict[str, str]) -> None: ...
    # tags every run opened from now on carries (under the caller's own tags); {} clears them
    def run_tags(self) -> dict[str, str]: ...
    # those tags, for runs opened outside the tracker (the sweep trials' MLflowLoggerCallback)
    def log_inputs(self, inputs: Sequence[DataInput]) -> None: ...
    # the current run's input datasets: name = path, digest = its DVC hash


class NullTracker:
    """Records calls in memory; for tests and for runs with tracking switched off."""

    def __init__(self, experiment_name: str = "null"):
        self.tracking_uri = ""
        self.experiment_name = experiment_name
        self.runs: list[dict[str, Any]] = []
        self._stack: list[dict[str, Any]] = []
        self._provenance: dict[str, str] = {}

    @contextlib.contextmanager
    def start_run(self, name, *, parent_run_id=None, tags=None) -> Iterator[str]:
        run = {"id": f"null-{len(self.runs)}", "name": name, "parent": parent_run_id, "status": "RUNNING",
               "params": {}, "metrics": {}, "artifacts": [], "inputs": [],
               "tags": {**self._provenance, **(tags or {})}}
        self.runs.append(run)
        self._stack.append(run)
        try:
            yield run["id"]
            run["status"] = "FINISHED"
        except KeyboardInterrupt:
            run["status"] = "KILLED"
            raise
        except BaseException:
            run["status"] = "FAILED"
            raise
        finally:
            self._stack.pop()

    def _cur(self) -> dict[str, Any]:
        if not self._stack:
            raise RuntimeError("NullTracker: no active run (call start_run first)")
        return self._stack[-1]

    def log_params(self, params):
        self._cur()["params"].update(params)

    def log_metrics(self, metrics, step=None):
        self._cur()["metrics"].update(metrics)

    def log_artifact(self, path, artifact_path=None):
        self._cur()["artifacts"].append(str(path))

    def log_figure(self, figure, name):
        self._cur()["artifacts"].append(name)

    def set_tags(self, tags):
        self._cur()["tags"].update(tags)

    def ensure_experiment(self) -> str:
        return "0"

    def set_provenance(self, tags):
        self._provenance = {k: str(v) for k, v in tags.items()}

    def run_tags(self):
        return dict(self._provenance)

    def log_inputs(self, inputs):
        self._cur()["inputs"].extend(inputs)

    def close_running(self, tags, status="KILLED"):
        ids = []
        for run in self.runs:
            if run["status"] == "RUNNING" and run not in self._stack and all(run["tags"].get(k) == v for k, v in tags.items()):
                run["status"] = status
                ids.append(run["id"])
        return ids


def make_tracker(kind: str, experiment_name: str, root: str | Path = ".") -> Tracker:
    """``kind`` is ``mlflow`` or ``null``."""
    if kind == "null":
        return NullTracker(experiment_name)
    if kind == "mlflow":
        from components.tracking.mlflow_tracker import MlflowTracker
        return MlflowTracker(experiment_name, tracking_uri=default_tracking_uri(root),
                             artifact_root=default_artifact_root(root))
    raise ValueError(f"tracker kind {kind!r}: expected 'mlflow' or 'null'")
