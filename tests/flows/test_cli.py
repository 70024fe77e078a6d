"""``approxinfer`` (``flows.cli``): every command's ``--help``; ``predict`` with a local model folder
and with a registered MLflow model gives the stage's own labels; ``study`` accumulates trials in
one study and ``--apply`` writes the best values into params (comments and layout kept; ``dvc
params diff`` shows them); ``run``/``report``/``ui``/``dashboard`` print the commands they run.
Temporary project roots (``tiny_root``) and stores."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import optuna
import pytest
import torch
import yaml

from components.data.batching import decode_dataset
from components.data.types import FormatError
from components.energies.chain import FixedPotentials
from components.inference import predict as P
from components.inference.registry import INFERENCE
from components.metrics.tagging import tagging_scores
from components.tracking.base import NullTracker
from components.tracking.mlflow_tracker import MlflowTracker
from components.tracking.models import log_model
from components.training.tagger import predict_tags
from flows import cli
from flows.stages import prepare
from flows.stages.common import run_stage
from flows.study_storage import STUDY_STORAGE_ENV
from flows.task_sweeps import train_one
from tests.inference.test_predict import make_model

REPO = Path(__file__).resolve().parents[2]


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- help ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [[], ["run"], ["study"], ["predict"], ["report"], ["exp"], ["ui"], ["dashboard"]])
def test_every_help_exits_0_with_examples(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([*command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: approxinfer") and "example" in out


def test_the_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert '[project.scripts]\napproxinfer = "flows.cli:main"' in text


# --- predict -----------------------------------------------------------------------------------

@pytest.fixture
def trained(tiny_root, monkeypatch):
    """A tiny project with pos prepared by the prepare stage and a tagger trained by the train stage's
    own code (``train_one``: what a sweep trial runs), saved as the stage saves its model folder."""
    root, params = tiny_root
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root, tracker=NullTracker())
    params["train"]["tasks"] = ["pos"]
    params["train"]["optim"].update(epochs=3, lr=0.03)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    from flows.stages.train import SPEC
    model, _, _, task = train_one(SPEC, "pos", "", params, root)
    from components.config import load_section
    cfg = load_section(SPEC.config, "train", params)
    folder = root / "models" / "tagger" / "pos"
    folder.mkdir(parents=True)
    torch.save(model.state_dict(), folder / "model.pt")
    (folder / "model.json").write_text(json.dumps({"task": "pos", "variant": "", "section": "train",
                                                   "recipe": SPEC.recipe(cfg, "", task)}))
    conll = root / "dev.conll"       # the dev sentences as a user's file: token<TAB>gold tag
    conll.write_text("".join("".join(f"{w}\t{t}\n" for w, t in zip(s.words, s.tags)) + "\n"
                             for s in task.dev.sentences))
    return {"root": root, "params": params, "model": model, "task": task, "folder": folder, "conll": conll,
            "spec": SPEC, "cfg": cfg}


def _cmd(err: str) -> list[str]:
    """The words of the command line printed as ``$ ...   (in <root>)``."""
    return err.split("$ ", 1)[1].splitlines()[0].split("   (in ")[0].split()


def _labels(path: Path) -> list[list[str]]:
    return [list(s.tags) for s in P.read_sentences(path)]


def test_predict_gives_the_stage_labels_from_a_folder_and_from_the_registry(trained, capsys):
    root, task, model = trained["root"], trained["task"], trained["model"]
    stage_labels = predict_tags(model.eval(), task.dev, task.vocabs["label"])     # the train stage's prediction path
    stage_score = trained["spec"].evaluate(model, trained["cfg"], "", task, task.dev, "dev", "cpu")["score"]

    out = root / "out.conll"
    code, _, err = _run(capsys, "predict", trained["folder"], "--input", trained["conll"], "--output", out,
                        "--root", root, "--score")
    assert code == 0, err
    assert _labels(out) == stage_labels
    assert [s.words for s in P.read_sentences(out)] == [s.words for s in task.dev.sentences]
    assert f"tagged {len(task.dev)} sentence(s)" in err and "method argmax" in err
    assert f"accuracy against the file's last column: {stage_score:.2f}" in err
    assert tagging_scores("accuracy", [s.tags for s in task.dev.sentences], _labels(out))["score"] == pytest.approx(stage_score)

    # the same folder logged and registered in the project's MLflow store (MLFLOW_TRACKING_URI)
    uri = os.environ["MLFLOW_TRACKING_URI"]
    tracker = MlflowTracker("approxinfer", tracking_uri=uri, artifact_root=(root / "mlartifacts").as_uri())
    with tracker.start_run("trial/0") as run_id:
        pass
    logged = log_model(uri, run_id, trained["folder"], root / "data/prepared/pos", "approxinfer-train-pos",
                       loader=P.PYFUNC_LOADER)
    code, stdout, err = _run(capsys, "predict", logged.uri, "--input", trained["conll"], "--root", root)
    assert code == 0, err
    assert stdout == out.read_text() and "models:/approxinfer-train-pos/1" in err


def test_predict_with_an_energy_and_each_method(trained, capsys):
    root, task = trained["root"], trained["task"]
    folder = make_model(root / "models" / "energy" / "pos" / "blstm_crf", root / "data/prepared/pos", "energy")
    energy = P.load_tagging_model(folder, root / "data/prepared/pos").module
    for method, extra in (("viterbi", []), ("gd", ["--method", "gd", "--option", "iterations=5"])):
        out = root / f"{method}.conll"
        code, _, err = _run(capsys, "predict", folder, "-i", trained["conll"], "-o", out, "--root", root, *extra)
        assert code == 0, err
        inf = INFERENCE.build(method, {"iterations": 5}, seed=0) if method == "gd" else INFERENCE.build(method)
        want = decode_dataset(task.dev, lambda b: inf(FixedPotentials.of(energy, b), b).labels, task.vocabs["label"])
        assert _labels(out) == want, method


def test_predict_errors_are_one_line_and_exit_2(trained, capsys):
    root = trained["root"]
    bad = root / "bad.conll"
    bad.write_text("The\tDT\ndog\n")
    code, _, err = _run(capsys, "predict", trained["folder"], "--input", bad, "--root", root)
    assert code == 2 and err.strip() == f"approxinfer predict: error: {bad}:2: 1 columns; expected 2 like line 1"
    code, _, err = _run(capsys, "predict", trained["folder"], "--input", trained["conll"], "--method", "viterbi",
                        "--root", root)
    assert code == 2 and "a tagger model" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, "predict", root / "nope", "--input", trained["conll"], "--root", root)
    assert code == 2 and "no such model folder" in err
    code, _, err = _run(capsys, "predict", "models:/nothing/1", "--input", trained["conll"], "--root", root)
    assert code == 2 and "models:/nothing/1: cannot fetch it" in err
    code, _, err = _run(capsys, "predict", trained["folder"], "--input", trained["conll"], "--option", "k", "--root", root)
    assert code == 2 and "expected KEY=VALUE" in err
    with pytest.raises(FormatError):                      # --debug: the exception itself
        cli.main(["predict", str(trained["folder"]), "--input", str(bad), "--root", str(root), "--debug"])


def test_predict_reads_a_text_file(trained, capsys):
    root = trained["root"]
    text = root / "in.txt"
    text.write_text("the dog runs\njohn loves mary in paris\n")
    code, stdout, err = _run(capsys, "predict", trained["folder"], "--input", text, "--format", "text", "--root", root)
    assert code == 0, err
    blocks = stdout.strip("\n").split("\n\n")
    assert [[ln.split("\t")[0] for ln in b.splitlines()] for b in blocks] == [["the", "dog", "runs"],
                                                                             ["john", "loves", "mary", "in", "paris"]]


# --- study -------------------------------------------------------------------------------------

PARAMS_HEADER = "# my params: this comment stays\n"


@pytest.fixture
def study_root(tiny_root, monkeypatch):
    root, params = tiny_root
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root, tracker=NullTracker())
    params["train"]["tasks"] = ["pos"]
    params["train"]["optim"].update(epochs=2)
    params["train"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 0.02, "high": 0.05}}
    text = yaml.safe_dump(params, sort_keys=False).replace("train:\n", "train:  # the tagger\n", 1)
    (root / "params.yaml").write_text(PARAMS_HEADER + text)
    return root


def test_two_studies_of_one_trial_leave_one_study_of_two_and_apply_writes_the_best(study_root, capsys):
    root = study_root
    before = (root / "params.yaml").read_text()
    code, out, err = _run(capsys, "study", "train", "--trials", 1, "--task", "pos", "--root", root)
    assert code == 0, err
    assert "train-pos trial 0" in out and "1 trial(s)" in out
    code, out, err = _run(capsys, "study", "train", "--trials", 1, "--task", "pos", "--root", root, "--apply")
    assert code == 0, err
    assert "train-pos trial 1" in out and "2 trial(s)" in out
    study = optuna.load_study(study_name="train-pos", storage=f"sqlite:///{root / 'optuna.db'}")
    assert len(study.trials) == 2 and [t.number for t in study.trials] == [0, 1]
    best = study.best_params["train.optim.lr"]
    tracker = MlflowTracker("approxinfer/tu_gimpel", tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    runs = tracker.search_runs("tags.optuna_study = 'train-pos'")
    assert len(runs) == 4         # a parent and a trial per invocation
    assert {r.data.tags["mlflow.source.name"] for r in runs} == {"flows/study.py"}

    after = (root / "params.yaml").read_text()
    assert yaml.safe_load(after)["train"]["optim"]["lr"] == best
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines()) and len(changed) == 1, changed
    assert after.startswith(PARAMS_HEADER) and "train:  # the tagger\n" in after
    assert f"params.yaml: train.optim.lr: " in out and repr(best) in out

    # --apply alone: the best so far, no new trial
    (root / "params.yaml").write_text(before)
    code, out, err = _run(capsys, "study", "train", "--task", "pos", "--root", root, "--apply")
    assert code == 0, err
    assert len(optuna.load_study(study_name="train-pos", storage=f"sqlite:///{root / 'optuna.db'}").trials) == 2
    assert yaml.safe_load((root / "params.yaml").read_text())["train"]["optim"]["lr"] == best


def test_study_errors_are_one_line(study_root, capsys):
    root = study_root
    code, _, err = _run(capsys, "study", "train", "--task", "pos", "--root", root)
    assert code == 2 and "give --trials N" in err
    code, _, err = _run(capsys, "study", "train", "--task", "pos", "--root", root, "--apply")
    assert code == 2 and "no study 'train-pos'" in err
    code, _, err = _run(capsys, "study", "prepare", "--trials", 1, "--root", root)
    assert code == 2 and "stage 'prepare' has no Optuna-driven task sweep" in err


def test_apply_writes_where_the_value_takes_effect(tmp_path):
    params = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", params)
    shutil.copytree(REPO / "scales", tmp_path / "scales")
    original, study = params.read_text(), (tmp_path / "scales/study.yaml").read_text()
    changes = cli.apply_params(params, {"train.optim.lr": 0.0123, "train.model.hidden": 32, "train.optim.epochs": 7,
                                        "approx.speed_methods.gd.lr": 5.0})
    assert [c[0] for c in changes] == ["params.yaml: train.optim.lr", "params.yaml: train.model.hidden",
                                       "params.yaml: train.optim.epochs", "params.yaml: approx.speed_methods.gd.lr"]
    assert [c[1:] for c in changes][:2] == [(0.003, 0.0123), (64, 32)]
    text = params.read_text()
    assert "  model: {hidden: 32}\n  optim: {lr: 0.0123, epochs: 7}\n" in text
    assert "gd: {lr: 5.0, iterations: 20}}" in text
    assert len(text.splitlines()) == len(original.splitlines())
    assert sum(a != b for a, b in zip(original.splitlines(), text.splitlines())) == 3
    assert (tmp_path / "scales/study.yaml").read_text() == study
    # at the study scale a key the scale overrides goes to scales/study.yaml, where it takes effect
    params.write_text(original.replace("  scale: default ", "  scale: study   ", 1))
    changes = cli.apply_params(params, {"train.optim.lr": 0.01, "train_energy.optim.lr": 0.001})
    assert [c[0] for c in changes] == ["scales/study.yaml: train.optim.lr", "params.yaml: train_energy.optim.lr"]
    from components.config import load_params, resolve_scale
    p = resolve_scale(load_params(params))
    assert p["train"]["optim"]["lr"] == 0.01 and p["train_energy"]["optim"]["lr"] == 0.001
    after = (tmp_path / "scales/study.yaml").read_text()
    assert [(a, b) for a, b in zip(study.splitlines(), after.splitlines()) if a != b] == [
        ("  optim.lr: 0.005", "  optim.lr: 0.01")]
    # where the scale overrides a key with a mapping, a single value is refused (no file changed)
    text, after = params.read_text(), (tmp_path / "scales/study.yaml").read_text()
    with pytest.raises(cli.UsageError, match="train_energy.max_train_sentences holds a mapping"):
        cli.apply_params(params, {"train.optim.lr": 0.02, "train_energy.max_train_sentences": 500})
    assert params.read_text() == text and (tmp_path / "scales/study.yaml").read_text() == after
    # a key absent from a block section is added as its first entry
    params.write_text(original)
    cli.apply_params(params, {"train_energy.max_train_sentences": 500})
    assert load_params(params)["train_energy"]["max_train_sentences"] == 500
    assert "  max_train_sentences: 500\n" in params.read_text()


def test_apply_shows_in_dvc_params_diff(tmp_path):
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    dvc = cli._tool("dvc")

    def sh(*cmd):
        return subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True, text=True).stdout
    (tmp_path / "params.yaml").write_text("# tuned by hand\ntrain:\n  optim: {lr: 0.003}   # the step\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    cmd: echo\n    params: [train]\n")
    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    sh("git", "add", "params.yaml", "dvc.yaml", ".dvc")
    sh("git", "commit", "-q", "-m", "init")
    cli.apply_params(tmp_path / "params.yaml", {"train.optim.lr": 0.0123})
    assert (tmp_path / "params.yaml").read_text() == "# tuned by hand\ntrain:\n  optim: {lr: 0.0123}   # the step\n"
    diff = sh(dvc, "params", "diff", "--json")
    row = json.loads(diff)["params.yaml"]["train.optim.lr"]
    assert (row["old"], row["new"]) == (0.003, 0.0123)


# --- run, report, ui, dashboard ----------------------------------------------------------------

def test_run_prints_and_runs_dvc_repro(capsys):
    code, _, err = _run(capsys, "run", "--dry-run", "--root", REPO)
    assert code == 0 and _cmd(err)[0].endswith("dvc") and _cmd(err)[1:] == ["repro"]
    code, _, err = _run(capsys, "run", "train@pos", "train_energy", "--force", "--dry-run", "--root", REPO)
    assert code == 0 and _cmd(err)[1:] == ["repro", "--force", "train@pos", "train_energy"]
    code, _, err = _run(capsys, "run", "approx", "--scale", "study", "--dry-run", "--root", REPO)
    assert code == 0 and _cmd(err)[1:] == ["exp", "run", "-S", "base.scale=study", "approx"]
    code, _, err = _run(capsys, "run", "nope", "--dry-run", "--root", REPO)
    assert code == 2 and "stage 'nope': not a stage of" in err and "train[@item]" in err
    code, _, err = _run(capsys, "run", "report@x", "--dry-run", "--root", REPO)
    assert code == 2


def test_report_finds_the_stage_of_each_paper(capsys):
    code, out, _ = _run(capsys, "report", "--list", "--root", REPO)
    papers = dict(line.split("\t")[:2] for line in out.splitlines())
    assert papers["tu_gimpel"] == "report" and papers["goyal_mlm"] == "report_goyal_mlm"
    assert papers["shevchenko_osokin"] == "report_shevchenko_osokin" and papers["goyal_2019"] == "report_goyal_2019"
    assert papers["goyal_2018"] == "report_goyal_2018" and papers["stand_in_screen"] == "report_stand_in_screen"
    code, _, err = _run(capsys, "report", "tu_gimpel", "goyal_mlm", "--dry-run", "--root", REPO)
    assert code == 0 and _cmd(err)[1:] == ["repro", "report", "report_goyal_mlm"]
    code, _, err = _run(capsys, "report", "nope", "--dry-run", "--root", REPO)
    assert code == 2 and "no dvc.yaml stage writes reports/nope/" in err


def test_exp_shows_one_studys_headline_columns(capsys, tmp_path):
    (tmp_path / "metrics" / "headline").mkdir(parents=True)
    (tmp_path / "metrics" / "headline" / "tu_gimpel.json").write_text('{"pos.viterbi_acc": 95.1, "tu_gimpel.reproduced": 9}')
    code, _, err = _run(capsys, "exp", "tu_gimpel", "--dry-run", "--root", tmp_path)
    import re
    import shlex
    cmd = shlex.split(err.split("$ ", 1)[1].splitlines()[0].split("   (in ")[0])    # the printed line, unquoted
    assert code == 0 and cmd[1:5] == ["exp", "show", "--no-pager", "--drop"] and cmd[6] == "--keep"
    keep = re.compile(cmd[7])
    assert all(keep.fullmatch(c) for c in ("Experiment", "pos.viterbi_acc", "tu_gimpel.reproduced",
                                          "metrics/headline/tu_gimpel.json:tu_gimpel.reproduced"))
    assert not any(keep.fullmatch(c) for c in ("ner.viterbi_f1", "train.optim.lr", "goyal_2018.reproduced",
                                              "metrics/headline/goyal_2018.json:pos.viterbi_acc"))
    code, _, err = _run(capsys, "exp", "nope", "--dry-run", "--root", tmp_path)
    assert code == 2 and "no headline metrics for 'nope'; known: ['tu_gimpel']" in err


def test_ui_and_dashboard_run_what_make_runs(capsys, tmp_path, monkeypatch):
    code, _, err = _run(capsys, "ui", "--dry-run", "--root", tmp_path, "--port", 5001)
    assert code == 0
    assert "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in err
    assert _cmd(err)[2:] == ["server", "--host", "127.0.0.1", "--port", "5001", "--workers", "1",
                                              "--backend-store-uri", f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"]
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    code, _, err = _run(capsys, "dashboard", "--dry-run", "--root", tmp_path)
    assert code == 0
    words = _cmd(err)
    assert words[0].endswith("optuna-dashboard") and words[1:] == [
        f"sqlite:///{tmp_path.resolve() / 'optuna.db'}", "--host", "127.0.0.1", "--port", "8080"]


def test_ui_and_dashboard_warn_on_an_exposed_host(capsys, tmp_path, monkeypatch):
    """Neither server has authentication: a non-loopback --host prints the warning (before the command
    line), the default 127.0.0.1 does not. Nothing is started (--dry-run; subprocess.run refused)."""
    monkeypatch.setattr(cli.subprocess, "run", lambda *a, **k: pytest.fail("a server was started"))
    monkeypatch.delenv(STUDY_STORAGE_ENV, raising=False)
    code, _, err = _run(capsys, "ui", "--dry-run", "--root", tmp_path, "--host", "0.0.0.0")
    assert code == 0 and err.startswith("WARNING: the MLflow UI (mlflow server) will listen on 0.0.0.0:5000")
    assert "NO AUTHENTICATION" in err and "infra/README.md" in err
    assert _cmd(err)[2:6] == ["server", "--host", "0.0.0.0", "--port"]
    code, _, err = _run(capsys, "dashboard", "--dry-run", "--root", tmp_path, "--host", "192.168.1.20", "--port", 8081)
    assert code == 0 and "WARNING: optuna-dashboard will listen on 192.168.1.20:8081" in err
    for argv in (["ui"], ["dashboard"], ["ui", "--host", "::1"], ["dashboard", "--host", "localhost"]):
        code, _, err = _run(capsys, *argv, "--dry-run", "--root", tmp_path)
        assert code == 0 and "WARNING" not in err and err.startswith("$ ")
