"""MLflow models of trained taggers: the one place that logs, registers and downloads them.

A tagging model is logged as an MLflow ``python_function`` model whose one artifact, ``model``, is
a *self-contained model folder*: the trained folder's ``model.json`` and ``model.pt``
(:mod:`components.checkpoints`) plus ``task/meta.json`` and ``task/vocab.parquet``, the
vocabularies of the prepared task it was trained on (``components.inference.predict`` looks for
them there first). Its signature:

- input: one column ``tokens``, each row a list of strings (one sentence);
- output: one column ``labels``, each row a list of strings (one label per token);
- params: ``method`` (string), the inference method (``viterbi``, ``gd``, ``argmax``, ...;
  empty: the folder's default).

So ``mlflow.pyfunc.load_model("models:/approxinfer-train_energy-ner-blstm_crf/1").predict(
pd.DataFrame({"tokens": [["John", "lives", "in", "Paris"]]}), params={"method": "viterbi"})``
tags sentences, and :func:`fetch_model` gives the self-contained folder back for
``approxinfer predict`` (which loads it without MLflow's pyfunc machinery).

The wrapper (:class:`TaggingPyfunc`) is pickled by reference to this module, and it builds its
predictor from a ``module:attribute`` it is given (``loader``: for taggers
``components.inference.predict:PYFUNC_LOADER``), imported when the model is loaded: tracking sits
at the side of the components' floors and imports no inference code, so loading a logged model
needs the ``approxinfer`` package importable (it is listed with torch, numpy, pandas, pyarrow and
mlflow in the model's requirements only as a note: it is not on a package index).

The MLflow store is named by the caller (``tracking_uri``, as the tracker holds it); the global
MLflow URIs are set for the duration of a call and restored after it (and the environment
variables MLflow sets with them).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")    # no progress bars in stage logs

import mlflow  # noqa: E402
import pandas as pd  # noqa: E402
import mlflow.pyfunc  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.models import Model, ModelSignature  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from mlflow.types import DataType, ParamSchema, ParamSpec  # noqa: E402
from mlflow.types.schema import Array, ColSpec, Schema  # noqa: E402

from components.config import ConfigError  # noqa: E402
from components.io import sqlite_lock  # noqa: E402

ARTIFACT = "model"                       # the pyfunc artifact: the self-contained model folder
TASK_SUBDIR = "task"                     # inside it: the task's vocabularies
MODEL_FILES = ("model.json", "model.pt")
TASK_FILES = ("meta.json", "vocab.parquet")
INPUT_COLUMN, OUTPUT_COLUMN = "tokens", "labels"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_REQUIREMENTS = ("mlflow", "torch", "numpy", "pandas", "pyarrow")
_FALLBACK_EXAMPLE = (("John", "lives", "in", "Paris", "."),)


def signature(default_method: str = "") -> ModelSignature:
    """tokens: list of strings per row -> labels: list of strings per row; param ``method``."""
    return ModelSignature(inputs=Schema([ColSpec(Array(DataType.string), INPUT_COLUMN)]),
                          outputs=Schema([ColSpec(Array(DataType.string), OUTPUT_COLUMN)]),
                          params=ParamSchema([ParamSpec("method", DataType.string, default_method)]))


def _token_lists(model_input: Any) -> list[list[str]]:
    """Rows of the ``tokens`` column (a DataFrame, a mapping or a list of token lists) as lists of str."""
    if isinstance(model_input, pd.DataFrame):
        if INPUT_COLUMN in model_input.columns:
            rows = model_input[INPUT_COLUMN].tolist()
        elif len(model_input.columns) == 1:
            rows = model_input.iloc[:, 0].tolist()
        else:
            raise ValueError(f"expected a column {INPUT_COLUMN!r} of token lists, got columns {list(model_input.columns)}")
    elif isinstance(model_input, Mapping):
        if INPUT_COLUMN not in model_input:
            raise ValueError(f"expected the key {INPUT_COLUMN!r} (a list of token lists), got {sorted(model_input)}")
        rows = list(model_input[INPUT_COLUMN])
    else:
        rows = list(model_input)
    out = []
    for i, r in enumerate(rows):
        if isinstance(r, str):
            raise ValueError(f"row {i}: a string {r[:40]!r}; expected a list of tokens (split the sentence first)")
        out.append([str(t) for t in r])
    return out


class TaggingPyfunc(mlflow.pyfunc.PythonModel):
    """An MLflow pyfunc model around a self-contained tagging model folder (artifact ``model``).

    ``loader`` is ``"module:attribute"`` of ``predictor(folder, method=...) -> predict(token_lists,
    method)`` (``components.inference.predict:predictor``), imported when the model is loaded;
    ``method`` is the default inference method (``None``: the folder's own default)."""

    # the signature given to log_model is the schema: MLflow neither reads predict's type hints
    # (it would warn that there are none) nor wraps predict to validate by them
    _skip_type_hint_validation = True

    def __init__(self, loader: str, method: str | None = None):
        module, sep, attr = loader.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"loader: expected 'package.module:attribute', got {loader!r}")
        self.loader, self.method = loader, method
        self._predict = None

    def load_context(self, context: Any) -> None:
        module, _, attr = self.loader.partition(":")
        make = getattr(importlib.import_module(module), attr)
        self._predict = make(context.artifacts[ARTIFACT], method=self.method)

    def predict(self, context, model_input, params=None):
        if self._predict is None:
            self.load_context(context)
        method = (params or {}).get("method") or None
        return pd.DataFrame({OUTPUT_COLUMN: self._predict(_token_lists(model_input), method)})


@dataclass(frozen=True)
class LoggedTagger:
    """What :func:`log_model` registered: ``uri`` is ``models:/<name>/<version>``."""
    name: str
    version: str
    model_id: str
    run_id: str

    @property
    def uri(self) -> str:
        return f"models:/{self.name}/{self.version}"


@contextlib.contextmanager
def using_store(tracking_uri: str) -> Iterator[None]:
    """MLflow's global tracking and registry URIs set to ``tracking_uri`` for the block, then
    restored, with the environment variables MLflow sets alongside them."""
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils
    keys = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")
    env = {k: os.environ.get(k) for k in keys}
    old = tracking_utils._tracking_uri, registry_utils._registry_uri
    try:
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_registry_uri(tracking_uri)
        yield
    finally:
        tracking_utils._tracking_uri, registry_utils._registry_uri = old
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_name(name: str) -> str:
    """A registered model name: letters, digits, ``_ . -``, starting with a letter or digit."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"registered model name {name!r}: use letters, digits, '_', '.' and '-' "
                          f"(e.g. approxinfer-train_energy-ner-blstm_crf)")
    return name


def _read_model_json(model_dir: Path) -> dict[str, Any]:
    missing = [f for f in MODEL_FILES if not (model_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{model_dir}: not a trained model folder (no {', '.join(missing)})")
    try:
        info = json.loads((model_dir / "model.json").read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{model_dir / 'model.json'}:{e.lineno}: not valid JSON ({e.msg})") from None
    kind = (info.get("recipe") or {}).get("kind")
    if kind is None:
        raise ConfigError(f"{model_dir / 'model.json'}: no 'recipe' with a 'kind' (saved by an older version)")
    if kind == "translator":
        raise ConfigError(f"{model_dir}: a translator model; logging translators as MLflow models is not "
                          f"supported yet (taggers, energies, inference networks and seq2seq taggers are)")
    return info


def _example(task_dir: Path, n: int = 2) -> list[list[str]]:
    """The ``n`` shortest of the first 20 dev (else test) sentences of the prepared task, else a
    fixed one: the logged input example."""
    import pyarrow.parquet as pq
    for split in ("dev", "test", "train"):
        path = task_dir / f"{split}.parquet"
        if path.is_file():
            try:
                words = pq.read_table(path, columns=["words"]).slice(0, 20).column("words").to_pylist()
            except (KeyError, ValueError, OSError):
                continue
            words = [w for w in words if w]
            if words:
                return [list(w) for w in sorted(words, key=len)[:n]]
    return [list(s) for s in _FALLBACK_EXAMPLE]


def _requirements() -> list[str]:
    out = []
    for pkg in _REQUIREMENTS:
        try:
            out.append(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(pkg)
    return out


def bundle(model_dir: str | Path, task_dir: str | Path, dest: str | Path) -> Path:
    """Write the self-contained model folder ``dest`` (which must not exist): ``model.json``,
    ``model.pt`` and ``task/{meta.json, vocab.parquet}``."""
    model_dir, task_dir, dest = Path(model_dir), Path(task_dir), Path(dest)
    _read_model_json(model_dir)
    missing = [f for f in TASK_FILES if not (task_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{task_dir}: not a prepared tagging task folder (no {', '.join(missing)})")
    (dest / TASK_SUBDIR).mkdir(parents=True)
    for f in MODEL_FILES:
        shutil.copy2(model_dir / f, dest / f)
    for f in TASK_FILES:
        shutil.copy2(task_dir / f, dest / TASK_SUBDIR / f)
    return dest


def log_model(tracking_uri: str, run_id: str, model_dir: str | Path, task_dir: str | Path, registered_name: str, *,
              loader: str, method: str | None = None, input_example: Sequence[Sequence[str]] | None = None,
              tags: Mapping[str, Any] | None = None, await_registration_for: int = 300) -> LoggedTagger:
    """Log a trained tagging model folder as an MLflow pyfunc model of run ``run_id`` and register it.

    - ``tracking_uri``: the MLflow store, as the tracker holds it (``tracker.tracking_uri``);
    - ``run_id``: the run the model comes from (the sweep's best trial, or its parent run); the
      model is logged in that run's experiment and shows among the run's logged models (the run
      is not reopened: its status and end time stay as they are);
    - ``model_dir``: the trained folder (``model.json`` + ``model.pt``), e.g. ``models/energy/ner/blstm_crf``;
    - ``task_dir``: the prepared task folder whose ``meta.json`` and ``vocab.parquet`` travel with
      the model (``data/prepared/<task>``);
    - ``registered_name``: a stable name, ``approxinfer-<stage>-<task>[-<variant>]``; each call adds a version;
    - ``loader``: ``components.inference.predict.PYFUNC_LOADER`` (how the pyfunc model builds its
      predictor when loaded);
    - ``method``: the default inference method (``None``: viterbi for an energy, argmax for a tagger, ...);
    - ``input_example``: token lists to log as the example (default: two short dev sentences of the task);
    - ``tags``: extra tags for the logged model and the registered version (``task``, ``variant``,
      ``section`` and ``kind`` from ``model.json`` are always set).

    The model has a signature (input: a ``tokens`` column of token lists; output: a ``labels``
    column of label lists; param ``method``) and the input example; MLflow checks the example
    through the loaded model before it is registered. -> :class:`LoggedTagger` (``.uri`` is
    ``models:/<name>/<version>``). A translator folder is refused (not supported yet).
    """
    check_name(registered_name)
    model_dir, task_dir = Path(model_dir), Path(task_dir)
    info = _read_model_json(model_dir)
    example = [list(map(str, s)) for s in input_example] if input_example is not None else _example(task_dir)
    if not example or any(not s for s in example):
        raise ConfigError("input_example: expected one or more non-empty token lists")
    all_tags = {"task": info.get("task", ""), "variant": info.get("variant", ""),
                "section": info.get("section", ""), "kind": info["recipe"]["kind"],
                **({"method": method} if method else {}), **{k: str(v) for k, v in (tags or {}).items()}}
    all_tags = {k: str(v) for k, v in all_tags.items() if v not in (None, "")}
    wrapper = TaggingPyfunc(loader, method)
    with tempfile.TemporaryDirectory(prefix="approxinfer-model-") as tmp, using_store(tracking_uri), \
            sqlite_lock(tracking_uri):
        folder = bundle(model_dir, task_dir, Path(tmp) / ARTIFACT)
        client = MlflowClient(tracking_uri)
        try:
            run = client.get_run(run_id)
        except MlflowException as e:
            raise ConfigError(f"run {run_id!r}: not found in {tracking_uri} ({e.message})") from None
        params = {k: v for k, v in run.data.params.items()}
        logged = client.create_logged_model(run.info.experiment_id, name=registered_name, source_run_id=run_id,
                                            tags=all_tags, params=params or None, model_type="tagger")
        mi = Model.log(artifact_path=None, name=registered_name, flavor=mlflow.pyfunc, python_model=wrapper,
                       artifacts={ARTIFACT: str(folder)}, signature=signature(method or ""),
                       input_example=pd.DataFrame({INPUT_COLUMN: example}), registered_model_name=registered_name,
                       await_registration_for=await_registration_for, pip_requirements=_requirements(),
                       metadata={"approxinfer_loader": loader, **all_tags}, run_id=run_id, model_id=logged.model_id,
                       tags=all_tags)
        version = getattr(mi, "registered_model_version", None)
        if version is None:
            raise RuntimeError(f"{registered_name}: MLflow logged the model ({mi.model_uri}) but did not register it")
    return LoggedTagger(registered_name, str(version), logged.model_id, run_id)


def fetch_model(uri: str, dest: str | Path, *, tracking_uri: str | None = None) -> Path:
    """Download the registered model ``uri`` (``models:/<name>/<version>`` or ``models:/<name>@<alias>``)
    from the store ``tracking_uri`` (default: MLflow's own resolution, ``MLFLOW_TRACKING_URI``) into
    ``dest`` (a new or empty folder; the download is moved there whole) -> the self-contained model
    folder inside it (``dest/artifacts/model``), which ``components.inference.predict`` loads."""
    if not isinstance(uri, str) or not re.fullmatch(r"models:/[^/@]+(/[^/]+|@[^/]+)", uri):
        raise ConfigError(f"{uri!r}: expected models:/<name>/<version> or models:/<name>@<alias>")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"{dest}: exists and is not an empty folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    store = tracking_uri or mlflow.get_tracking_uri()
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
        with using_store(store):
            try:
                local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(Path(tmp) / "dl")))
            except MlflowException as e:
                raise ConfigError(f"{uri}: cannot fetch it from {store} ({e.message})") from None
        mlmodel = local / "MLmodel"
        if not mlmodel.is_file():
            raise ConfigError(f"{uri}: not an MLflow model (no MLmodel file)")
        conf = Model.load(str(mlmodel)).flavors.get("python_function", {})
        rel = ((conf.get("artifacts") or {}).get(ARTIFACT) or {}).get("path")
        if not rel or not (local / rel / "model.json").is_file():
            raise ConfigError(f"{uri}: not an approxinfer tagging model (no '{ARTIFACT}' artifact with a model.json)")
        if dest.exists():
            dest.rmdir()
        os.replace(local, dest)
    return dest / rel
