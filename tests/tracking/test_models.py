"""``components.tracking.models``: a trained tagging folder logged as an MLflow pyfunc model of a run,
with a signature and an input example, registered under a stable name; loadable by
``models:/name/version`` (MLflow's pyfunc and :func:`fetch_model`) with the same labels as the local
folder. And the Source tags of the runs the MLflow tracker creates. A temporary SQLite store."""
from __future__ import annotations

import os
import sys

import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from components.config import ConfigError
from components.data.tasks import load_tagging_task
from components.inference import predict as P
from components.tracking import mlflow_tracker as T
from components.tracking.mlflow_tracker import MlflowTracker
from components.tracking.models import (INPUT_COLUMN, OUTPUT_COLUMN, fetch_model, log_model, using_store)
from components.tracking.provenance import GIT_COMMIT
from tests.inference.test_predict import make_model, make_task

NAME = "approxinfer-train_energy-toy-blstm_crf"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    tracker = MlflowTracker("models-test", tracking_uri=uri, artifact_root=(root / "mlartifacts").as_uri())
    task_dir = make_task(root / "prepared" / "toy")
    energy = make_model(root / "models" / "energy", task_dir, "energy")
    with tracker.start_run("sweep") as parent:
        with tracker.start_run("trial/0", parent_run_id=parent) as run_id:
            tracker.log_params({"train_energy.optim.lr": 0.01})
    logged = log_model(uri, run_id, energy, task_dir, NAME, loader=P.PYFUNC_LOADER)
    return {"uri": uri, "root": root, "task_dir": task_dir, "energy": energy, "run_id": run_id,
            "logged": logged, "tracker": tracker}


def _words(task_dir):
    return [list(s.words) for s in load_tagging_task(task_dir).dev.sentences]


def test_the_model_is_registered_with_a_signature_and_an_input_example(store):
    logged = store["logged"]
    assert (logged.name, logged.version, logged.uri) == (NAME, "1", f"models:/{NAME}/1")
    with using_store(store["uri"]):
        info = mlflow.models.get_model_info(logged.uri)
        assert info.signature.inputs.input_names() == [INPUT_COLUMN]
        assert info.signature.outputs.input_names() == [OUTPUT_COLUMN]
        assert [p.name for p in info.signature.params] == ["method"]
        assert info.saved_input_example_info["type"] == "dataframe"
        example = mlflow.models.Model.load(logged.uri).load_input_example()
        assert list(example.columns) == [INPUT_COLUMN] and all(len(t) > 0 for t in example[INPUT_COLUMN])
        client = MlflowClient()
        version = client.get_model_version(NAME, "1")
        assert version.run_id == store["run_id"]
        assert version.tags["task"] == "toy" and version.tags["kind"] == "energy"
        lm = client.get_logged_model(logged.model_id)
        assert str(lm.status) == str(mlflow.entities.LoggedModelStatus.READY)
        run = client.get_run(store["run_id"])
        assert run.info.status == "FINISHED"                  # the trial's run is not reopened
        assert [o.model_id for o in run.outputs.model_outputs] == [logged.model_id]
        assert lm.experiment_id == run.info.experiment_id


def test_the_registered_model_predicts_as_the_local_folder(store, tmp_path):
    words = _words(store["task_dir"])
    local = P.load_tagging_model(store["energy"], store["task_dir"])
    with using_store(store["uri"]):
        pyfunc = mlflow.pyfunc.load_model(store["logged"].uri)
    got = pyfunc.predict(pd.DataFrame({INPUT_COLUMN: words}))
    assert [list(x) for x in got[OUTPUT_COLUMN]] == P.tag(local, words)
    got = pyfunc.predict(pd.DataFrame({INPUT_COLUMN: words}), params={"method": "gd"})
    assert [list(x) for x in got[OUTPUT_COLUMN]] == P.tag(local, words, "gd")

    folder = fetch_model(store["logged"].uri, tmp_path / "fetched", tracking_uri=store["uri"])
    assert folder == tmp_path / "fetched" / "artifacts" / "model"
    fetched = P.load_tagging_model(folder, prepared_dir=tmp_path / "nowhere")     # its own task/ vocabularies
    assert fetched.task_dir == folder / P.TASK_SUBDIR
    assert P.tag(fetched, words) == P.tag(local, words)


def test_a_second_log_adds_a_version_and_aliases_resolve(store, tmp_path):
    logged = log_model(store["uri"], store["run_id"], store["energy"], store["task_dir"], NAME,
                       loader=P.PYFUNC_LOADER, method="gd", input_example=[["the", "dog"]], tags={"trial": 0})
    assert logged.version == "2"
    MlflowClient(store["uri"]).set_registered_model_alias(NAME, "best", "2")
    folder = fetch_model(f"models:/{NAME}@best", tmp_path / "best", tracking_uri=store["uri"])
    assert (folder / "model.pt").read_bytes() == (store["energy"] / "model.pt").read_bytes()


def test_the_global_mlflow_uris_are_restored(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/mlflow.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    before = mlflow.get_tracking_uri()          # whatever an earlier test left set
    with using_store(store["uri"]):
        assert mlflow.get_tracking_uri() == store["uri"] == mlflow.get_registry_uri()
    assert mlflow.get_tracking_uri() == before and os.environ["MLFLOW_TRACKING_URI"] == "sqlite:////elsewhere/mlflow.db"
    assert "MLFLOW_REGISTRY_URI" not in os.environ


def test_bad_requests_are_clear_errors(store, tmp_path):
    with pytest.raises(ConfigError, match="registered model name 'has space'"):
        log_model(store["uri"], store["run_id"], store["energy"], store["task_dir"], "has space", loader=P.PYFUNC_LOADER)
    with pytest.raises(FileNotFoundError, match="not a trained model folder"):
        log_model(store["uri"], store["run_id"], tmp_path, store["task_dir"], NAME, loader=P.PYFUNC_LOADER)
    with pytest.raises(FileNotFoundError, match="not a prepared tagging task folder"):
        log_model(store["uri"], store["run_id"], store["energy"], tmp_path, NAME, loader=P.PYFUNC_LOADER)
    with pytest.raises(ConfigError, match="run 'nope': not found"):
        log_model(store["uri"], "nope", store["energy"], store["task_dir"], NAME, loader=P.PYFUNC_LOADER)
    tr = tmp_path / "translator"
    tr.mkdir()
    (tr / "model.json").write_text('{"recipe": {"kind": "translator"}}')
    (tr / "model.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match="translator .* not supported yet"):
        log_model(store["uri"], store["run_id"], tr, store["task_dir"], NAME, loader=P.PYFUNC_LOADER)
    with pytest.raises(ConfigError, match="expected models:/<name>/<version>"):
        fetch_model("runs:/abc/model", tmp_path / "x", tracking_uri=store["uri"])
    with pytest.raises(ConfigError, match=f"models:/{NAME}/99: cannot fetch it"):
        fetch_model(f"models:/{NAME}/99", tmp_path / "y", tracking_uri=store["uri"])
    assert not (tmp_path / "y").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(FileExistsError):
        fetch_model(store["logged"].uri, tmp_path / "full", tracking_uri=store["uri"])


# --- Source tags of the tracker's runs -----------------------------------------------------------

def test_runs_carry_the_source_tags(store, monkeypatch):
    tracker = store["tracker"]
    client = MlflowClient(store["uri"])
    tracker.set_provenance({GIT_COMMIT: "a" * 40, "dvc.stage": "train_energy@ner"})
    try:
        with tracker.start_run("train_energy@ner", tags={"stage": "train_energy"}) as rid:
            with tracker.start_run("sweep/ner", parent_run_id=rid) as child:
                pass
    finally:
        tracker.set_provenance({})
    for r in (rid, child):
        tags = client.get_run(r).data.tags
        assert tags["mlflow.source.name"] == "flows/stages/train_energy.py"
        assert tags["mlflow.source.type"] == "LOCAL" and tags[GIT_COMMIT] == "a" * 40
    with tracker.start_run("loose") as loose:
        pass
    tags = client.get_run(loose).data.tags
    assert tags["mlflow.source.name"] == os.path.basename(sys.argv[0]) and GIT_COMMIT not in tags
    with tracker.start_run("mine", tags={"mlflow.source.name": "scripts/x.py"}) as mine:
        pass
    assert client.get_run(mine).data.tags["mlflow.source.name"] == "scripts/x.py"


def test_the_entry_module_names_the_source(monkeypatch):
    import types
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="flows.study")
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert T.source_name({"stage": "train"}) == "flows/study.py"
    main.__spec__ = types.SimpleNamespace(name="flows.stages.train")
    assert T.source_tags({}) == {"mlflow.source.type": "LOCAL", "mlflow.source.name": "flows/stages/train.py"}
