"""Provenance of MLflow runs: the experiment's kind, and what each stage run records — the git
commit (and whether the tree was dirty), its DVC stage, and its data deps as dataset inputs whose
digest is DVC's hash. A temporary project (a git repository with ``dvc.yaml``, ``params`` and a
Parquet-sized data folder) and a temporary SQLite store; the stage is a tiny ``run`` through the
real ``run_stage``."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from components.tracking.base import NullTracker
from components.tracking.mlflow_tracker import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, MlflowTracker, runs_url
from components.tracking.provenance import (DVC_STAGE, GIT_COMMIT, GIT_DIRTY, GIT_DIRTY_FILES, dvc_hash,
                                            pipeline_outputs, resolved_stages, stage_deps)
from flows.stages.common import run_stage

DVC_YAML = """\
stages:
  demo:
    foreach: ${demo.tasks}
    do:
      cmd: python -m flows.stages.demo --task ${item}
      deps:
        - data/prepared/${item}
        - data/prepared/${demo.shared}/vocab.parquet
        - models/energy/${item}
        - flows/stages/demo.py
      params:
        - demo
      metrics:
        - metrics/demo/${item}.json:
            cache: false
  other:
    cmd: python -m flows.stages.other
    outs:
      - reports/other
"""


def _params():
    return {"base": {"tracker": "null"}, "demo": {"tasks": ["pos", "ner"], "shared": "common"}}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    root = tmp_path / "project"
    (root / "data/prepared/pos").mkdir(parents=True)
    (root / "data/prepared/common").mkdir(parents=True)
    (root / "data/prepared/pos/train.parquet").write_bytes(b"PAR1 train rows PAR1")
    (root / "data/prepared/pos/dev.parquet").write_bytes(b"PAR1 dev rows PAR1")
    (root / "data/prepared/pos/sub").mkdir()
    (root / "data/prepared/pos/sub/meta.json").write_text('{"n": 2}')
    (root / "data/prepared/common/vocab.parquet").write_bytes(b"PAR1 vocab PAR1")
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "code.py").write_text("x = 1\n")
    (root / "metrics/demo").mkdir(parents=True)
    (root / "metrics/demo/pos.json").write_text("{}\n")
    (root / ".gitignore").write_text("/data\n/mlflow.db*\n/.locks\n/.ray_results\n/.work\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "init")
    return root


def _tracker(tmp_path: Path, name: str = "prov") -> MlflowTracker:
    return MlflowTracker(name, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                         artifact_root=(tmp_path / "mlartifacts").as_uri())


def _dvc_dir_hash(files: dict[str, bytes]) -> str:
    """DVC's folder hash written out independently: md5 of the sorted JSON listing, plus .dir."""
    entries = sorted(({"md5": hashlib.md5(b).hexdigest(), "relpath": p} for p, b in files.items()),
                     key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


# --- the experiment's kind -----------------------------------------------------------------------

def test_a_new_experiment_is_a_model_training_experiment(tmp_path):
    tracker = _tracker(tmp_path)
    exp = MlflowClient(tracker.tracking_uri).get_experiment(tracker.ensure_experiment())
    assert exp.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    assert runs_url("http://127.0.0.1:5000/", exp.experiment_id) == \
        f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning"


def test_an_existing_experiment_without_a_kind_gets_it_and_a_chosen_kind_is_kept(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowTracker("bootstrap", tracking_uri=uri)           # creates the schema
    client = MlflowClient(uri)
    old = client.create_experiment("old")
    chosen = client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(old).tags
    assert MlflowTracker("old", tracking_uri=uri).ensure_experiment() == old
    assert client.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    MlflowTracker("chosen", tracking_uri=uri).ensure_experiment()
    assert client.get_experiment(chosen).tags[EXPERIMENT_KIND_TAG] == "genai_development"


# --- dvc.yaml and DVC hashes --------------------------------------------------------------------

def test_dvc_yaml_foreach_and_references_resolve_from_params(project):
    stages = resolved_stages(project, _params())
    assert [n for n, _ in stages] == ["demo@pos", "demo@ner", "other"]
    assert stage_deps(stages, "demo@ner") == ["data/prepared/ner", "data/prepared/common/vocab.parquet",
                                              "models/energy/ner", "flows/stages/demo.py"]
    assert stage_deps(stages, "nope") is None
    outs = pipeline_outputs(stages)
    assert {"dvc.lock", "metrics/demo/pos.json", "metrics/demo/ner.json", "reports/other"} <= set(outs)


def test_dvc_hash_is_dvcs_md5_of_a_file_and_dir_hash_of_a_folder(project):
    f = project / "data/prepared/common/vocab.parquet"
    assert dvc_hash(f) == (hashlib.md5(f.read_bytes()).hexdigest(), 1, f.stat().st_size)
    folder = project / "data/prepared/pos"
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    digest, nfiles, size = dvc_hash(folder)
    assert (digest, nfiles, size) == (_dvc_dir_hash(files), 3, sum(map(len, files.values())))
    assert len(digest) <= 36          # MLflow's datasets.digest column


def test_dvc_dir_hash_matches_dvc_data(project):
    """The folder hash against DVC's own implementation (dvc_data's Tree), not only the formula."""
    tree_mod = pytest.importorskip("dvc_data.hashfile.tree")
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.meta import Meta
    folder = project / "data/prepared/pos"
    tree = tree_mod.Tree()
    for p in folder.rglob("*"):
        if p.is_file():
            tree.add(tuple(p.relative_to(folder).parts), Meta(size=p.stat().st_size),
                     HashInfo("md5", hashlib.md5(p.read_bytes()).hexdigest()))
    tree.digest()
    assert dvc_hash(folder)[0] == tree.hash_info.value


# --- a stage run --------------------------------------------------------------------------------

def test_a_stage_run_records_commit_stage_and_data_inputs(project, tmp_path):
    tracker = _tracker(tmp_path)
    seen = {}

    def run(params, ctx):
        seen["run_tags"] = ctx.tracker.run_tags()           # what a sweep hands to its trials' callback
        with ctx.tracker.start_run("sweep/pos", parent_run_id=ctx.run_id) as sweep:
            seen["sweep"] = sweep
        return {"score": 1.0}

    run_stage("demo", run, _params(), project, tracker=tracker, task="pos")
    head = _git(project, "rev-parse", "HEAD")
    client = MlflowClient(tracker.tracking_uri)
    (stage_run,) = tracker.search_runs("tags.`mlflow.runName` = 'demo@pos'")
    tags = stage_run.data.tags
    assert tags[DVC_STAGE] == "demo@pos" and tags[GIT_COMMIT] == head
    assert tags[GIT_DIRTY] == "false", tags.get(GIT_DIRTY_FILES)    # metrics/demo/pos.json: a pipeline output
    assert seen["run_tags"][DVC_STAGE] == "demo@pos" and seen["run_tags"][GIT_COMMIT] == head
    sweep_tags = client.get_run(seen["sweep"]).data.tags
    assert sweep_tags[DVC_STAGE] == "demo@pos" and sweep_tags[GIT_COMMIT] == head
    assert tracker.run_tags() == {}                          # cleared when the stage ends

    inputs = {d.dataset.name: d for d in client.get_run(stage_run.info.run_id).inputs.dataset_inputs}
    # models/energy/pos is not data; data/prepared/common/vocab.parquet is a file dep
    assert set(inputs) == {"data/prepared/pos", "data/prepared/common/vocab.parquet"}
    pos = project / "data/prepared/pos"
    files = {p.relative_to(pos).as_posix(): p.read_bytes() for p in pos.rglob("*") if p.is_file()}
    assert inputs["data/prepared/pos"].dataset.digest == _dvc_dir_hash(files)
    vocab = (project / "data/prepared/common/vocab.parquet").read_bytes()
    assert inputs["data/prepared/common/vocab.parquet"].dataset.digest == hashlib.md5(vocab).hexdigest()
    assert json.loads(inputs["data/prepared/pos"].dataset.profile)["num_files"] == 3
    assert {t.key: t.value for t in inputs["data/prepared/pos"].tags}["mlflow.data.context"] == "input"


def test_uncommitted_source_changes_mark_the_run_dirty(project, tmp_path):
    (project / "code.py").write_text("x = 2\n")
    tracker = NullTracker()
    run_stage("demo", lambda p, ctx: {}, _params(), project, tracker=tracker, task="pos")
    tags = tracker.runs[0]["tags"]
    assert tags[GIT_DIRTY] == "true" and tags[GIT_DIRTY_FILES] == "code.py"
    assert [i.path for i in tracker.runs[0]["inputs"]] == ["data/prepared/pos", "data/prepared/common/vocab.parquet"]


def test_outside_git_and_dvc_the_stage_records_its_name_only(tmp_path):
    tracker = NullTracker()
    run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=tracker, task="ner")
    run = tracker.runs[0]
    assert run["tags"][DVC_STAGE] == "demo@ner" and GIT_COMMIT not in run["tags"] and run["inputs"] == []
