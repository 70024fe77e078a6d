"""MLflow implementation of :class:`~components.tracking.base.Tracker` (the one mlflow import).

Default store: a SQLite file ``mlflow.db`` and an artifact folder ``mlartifacts/`` in the main
repository (both git-ignored; see ``base.store_root``); ``MLFLOW_TRACKING_URI`` points it at a
server instead. A SQLite store is opened (its schema created or migrated on first use) under an
exclusive file lock ``mlflow.db.lock``, so processes starting together on a fresh store do not race
on ``CREATE TABLE``. The experiment is created here, in the driver, before any parallel trial
starts (parallel creation against a fresh SQLite file races).

The experiment carries ``mlflow.experimentKind = custom_model_development`` (set on creation, and
added to an existing experiment that lacks it): MLflow 3's record that an experiment holds model
training runs, not GenAI traces — its UI's experiment-kind selector reads and writes this tag
(``mlflow/server/js/build/static/js``: ``setExperimentTag({key: "mlflow.experimentKind", ...})``;
values ``genai_development``, ``custom_model_development``, ...). The 3.17.2 UI itself, though,
picks its pages from the browser's workflow switch ("GenAI" / "Model training": URL parameter
``workflowType``, else the browser's saved choice, else GenAI) and not from the tag (its feature
flag for workflow-based navigation is on, so ``useExperimentKind`` returns the switch's kind):
:func:`runs_url` is a link that opens the runs table; one click on "Model training" makes a
browser keep that view.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

from mlflow.tracking import MlflowClient  # noqa: E402

from components.io import sqlite_lock  # noqa: E402
from components.tracking.provenance import DataInput  # noqa: E402

logging.getLogger("alembic").setLevel(logging.WARNING)

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"     # the UI's "Machine learning" kind
DATASET_SOURCE_TYPE = "local"
DATASET_CONTEXT = "input"                          # mlflow.data.context of a stage's data deps
# the runs table's "Source" column: what ran (a module path, as MLflow records a script) and how
SOURCE_NAME_TAG = "mlflow.source.name"
SOURCE_TYPE_TAG = "mlflow.source.type"
SOURCE_TYPE = "LOCAL"


def runs_url(server: str, experiment_id: str) -> str:
    """The UI page of an experiment's runs table, in the "Model training" view, on ``server``
    (``http://127.0.0.1:5000``)."""
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def source_name(tags: dict[str, str]) -> str | None:
    """What ran a run, as a path relative to the project root: the entry module when it is one of
    the project's (``python -m flows.stages.train`` -> ``flows/stages/train.py``, ``python -m
    flows.study`` -> ``flows/study.py``), else the module of the stage the run's tags name
    (``stage`` or ``dvc.stage`` ``train@pos`` -> ``flows/stages/train.py``: a stage run in-process),
    else the program's name (``approxinfer``, ``pytest``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None) or ""
    if name.split(".")[0] in ("flows", "components"):
        return name.replace(".", "/") + ".py"
    stage = tags.get("stage") or tags.get("dvc.stage", "").split("@")[0]
    if stage and stage.isidentifier():
        return f"flows/stages/{stage}.py"
    return Path(sys.argv[0]).name if sys.argv and sys.argv[0] else None


def source_tags(tags: dict[str, str]) -> dict[str, str]:
    """The Source tags of a run with ``tags`` (``mlflow.source.type`` LOCAL and ``mlflow.source.name``,
    see :func:`source_name`), those already in ``tags`` kept; the git commit
    (``mlflow.source.git.commit``) comes with the provenance tags when it is known."""
    out = {SOURCE_TYPE_TAG: tags.get(SOURCE_TYPE_TAG, SOURCE_TYPE)}
    name = tags.get(SOURCE_NAME_TAG) or source_name(tags)
    if name:
        out[SOURCE_NAME_TAG] = name
    return out


def _flat_value(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 6000 else s[:5997] + "..."


class MlflowTracker:
    def __init__(self, experiment_name: str, *, tracking_uri: str, artifact_root: str | None = None):
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.artifact_root = artifact_root
        with sqlite_lock(tracking_uri):      # opening the store creates or migrates its schema
            self.client = MlflowClient(tracking_uri=tracking_uri)
            self.client.search_experiments(max_results=1)
        self._runs: list[str] = []
        self._experiment_id: str | None = None
        self._provenance: dict[str, str] = {}
        self.source: str | None = None     # mlflow.source.name of its runs; None: source_name(tags)

    def ensure_experiment(self) -> str:
        if self._experiment_id is None:
            with sqlite_lock(self.tracking_uri):         # two processes creating the experiment at once
                self._experiment_id = self._get_or_create_experiment()
        return self._experiment_id

    def _get_or_create_experiment(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment_name)
        if exp is not None:
            if EXPERIMENT_KIND_TAG not in exp.tags:       # one made before the tag, or by other code
                self.client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            return exp.experiment_id
        kwargs = {}
        if self.artifact_root and not self.tracking_uri.startswith(("http://", "https://")):
            kwargs["artifact_location"] = f"{self.artifact_root}/{self.experiment_name}"
        return self.client.create_experiment(self.experiment_name, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                                             **kwargs)

    def set_provenance(self, tags: dict[str, str]) -> None:
        self._provenance = {k: _flat_value(v) for k, v in tags.items()}

    def run_tags(self) -> dict[str, str]:
        return dict(self._provenance)

    @contextlib.contextmanager
    def start_run(self, name: str, *, parent_run_id: str | None = None,
                  tags: dict[str, str] | None = None) -> Iterator[str]:
        all_tags = {**self._provenance, **(tags or {})}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        all_tags["mlflow.runName"] = name
        all_tags.update(source_tags({SOURCE_NAME_TAG: self.source, **all_tags} if self.source else all_tags))
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

    def log_inputs(self, inputs: Sequence[DataInput]) -> None:
        """The current run's input datasets: MLflow datasets named by path, digest = the DVC hash."""
        import json
        from mlflow.entities import Dataset, DatasetInput, InputTag
        datasets = [DatasetInput(
            Dataset(name=d.name, digest=d.digest, source_type=DATASET_SOURCE_TYPE,
                    source=json.dumps({"uri": d.path}),
                    profile=json.dumps({"dvc_hash": d.digest, "num_files": d.nfiles, "num_bytes": d.size})),
            tags=[InputTag("mlflow.data.context", DATASET_CONTEXT)]) for d in inputs]
        if not datasets:
            return
        # MLflow checks whether a dataset exists, then inserts it: two stages logging the same new
        # dataset at once (``dvc queue start -j 2``) race on the UNIQUE key. The file lock orders
        # them on a SQLite store; against a server, the loser retries and finds the row.
        from mlflow.exceptions import MlflowException
        for attempt in range(3):
            try:
                with sqlite_lock(self.tracking_uri):
                    self.client.log_inputs(self._cur(), datasets=datasets)
                return
            except MlflowException as e:
                if attempt == 2 or not any(m in str(e) for m in ("UNIQUE constraint", "duplicate key")):
                    raise

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


def close_orphan_runs(tracking_uri: str, tag: str, alive: Callable[[str], bool], status: str = "KILLED") -> list[str]:
    """End with ``status`` every RUNNING run, in every experiment of the store, whose tag ``tag`` (the
    process that opened it) names a process that ``alive`` says is gone -> their ids. Runs without
    the tag are left alone."""
    with sqlite_lock(tracking_uri):
        client = MlflowClient(tracking_uri=tracking_uri)
        experiments = [e.experiment_id for e in client.search_experiments(max_results=50000)]
    ids = []
    if not experiments:
        return ids
    flt = f"attributes.status = 'RUNNING' and tags.`{tag}` != ''"
    for run in client.search_runs(experiments, filter_string=flt, max_results=50000):
        owner = run.data.tags.get(tag)
        if owner and not alive(owner):
            client.set_terminated(run.info.run_id, status=status)
            ids.append(run.info.run_id)
    return ids


def ui_links(tracking_uri: str, server: str) -> list[tuple[str, str]]:
    """``(experiment name, runs-table URL on server)`` for each active experiment of the store."""
    with sqlite_lock(tracking_uri):
        client = MlflowClient(tracking_uri=tracking_uri)
        experiments = client.search_experiments(max_results=1000)
    return [(e.name, runs_url(server, e.experiment_id)) for e in experiments]


def main(argv: list[str] | None = None) -> None:
    """``python -m components.tracking.mlflow_tracker links --store URI --server URL`` (``make ui``):
    print the link to each experiment's runs table."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m components.tracking.mlflow_tracker")
    ap.add_argument("command", choices=["links"])
    ap.add_argument("--store", required=True, help="backend store URI (sqlite:///.../mlflow.db)")
    ap.add_argument("--server", required=True, help="the UI's address (http://127.0.0.1:5000)")
    args = ap.parse_args(argv)
    links = ui_links(args.store, args.server)
    print(f"MLflow UI at {args.server}; each experiment's runs table:")
    for name, url in links:
        print(f"  {name}: {url}")
    print('If a page shows the GenAI menu (Overview, Traces, Evaluation runs, ...), click "Model training" '
          "at the top left once: this browser then keeps that view.")


if __name__ == "__main__":
    main()


class RunMetrics:
    """Metrics for runs opened elsewhere (Ray Tune's trial runs): one ``log_batch`` per result.

    Ray's ``MLflowLoggerCallback`` logs a result with one ``log_metric`` call (one SQLite
    transaction) per key, plus a run lookup: ~20 keys x ~4 ms per epoch of every trial on the
    driver. This logs the same numbers in one call. Picklable (Ray Tune saves its callbacks with
    the experiment): the client is opened on first use."""

    def __init__(self, tracking_uri: str):
        self.tracking_uri = tracking_uri
        self._client: MlflowClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"tracking_uri": self.tracking_uri, "_client": None}

    def log(self, run_id: str, values: dict[str, Any], step: int, skip: tuple[str, ...] = ()) -> int:
        """Every finite number in ``values`` (nested dicts flattened with ``/``, bools as 0/1; the
        top-level keys in ``skip`` left out) at ``step`` -> how many were logged."""
        from mlflow.entities import Metric
        import math
        import time
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        flat: dict[str, float] = {}

        def walk(d: dict[str, Any], prefix: str) -> None:
            for k, v in d.items():
                if not prefix and k in skip:
                    continue
                if isinstance(v, dict):
                    walk(v, f"{prefix}{k}/")
                elif isinstance(v, (bool, int, float)) and math.isfinite(float(v)):
                    flat[f"{prefix}{k}"] = float(v)
        walk(values, "")
        ts = int(time.time() * 1000)
        items = [Metric(k, v, ts, int(step)) for k, v in flat.items()]
        for i in range(0, len(items), 500):
            self._client.log_batch(run_id, metrics=items[i:i + 500])
        return len(items)
