"""Where runs are recorded (issue 14): the embedded store is the main repository's, also from DVC's
temporary experiment workspaces, and processes starting together on a fresh store lose no run."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from components.tracking.base import default_artifact_root, default_tracking_uri, store_root
from components.tracking.mlflow_tracker import MlflowTracker

REPO = Path(__file__).resolve().parents[2]


def test_a_dvc_temp_workspace_logs_to_the_main_repository(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    main = tmp_path / "repo"
    (main / ".dvc").mkdir(parents=True)
    work = main / ".dvc" / "tmp" / "exps" / "tmpab12cd"            # `dvc exp run --temp`, queued runs
    work.mkdir(parents=True)
    assert store_root(work) == main.resolve() and store_root(main) == main.resolve()
    assert default_tracking_uri(work) == f"sqlite:///{main.resolve() / 'mlflow.db'}"
    assert default_artifact_root(work) == (main.resolve() / "mlartifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert default_tracking_uri(work) == "http://127.0.0.1:5000"


def test_a_temp_workspace_outside_a_repository_asks_for_a_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    odd = tmp_path / "plain" / ".dvc" / "tmp" / "exps" / "tmp2"      # the path of one, but <plain>/.dvc is no folder
    with pytest.raises(RuntimeError, match="is not a DVC repository: set MLFLOW_TRACKING_URI"):
        store_root(odd)


def test_processes_starting_together_on_a_fresh_store_lose_no_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    go = tmp_path / "go"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from components.tracking.mlflow_tracker import MlflowTracker
        while not Path({str(go)!r}).exists():
            time.sleep(0.01)
        t = MlflowTracker("fresh", tracking_uri={uri!r})
        with t.start_run(f"run-{{sys.argv[1]}}"):
            t.log_metrics({{"x": float(sys.argv[1])}})
        """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], cwd=REPO, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    go.touch()                 # all four are imported and waiting: they open the fresh store together
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    runs = MlflowTracker("fresh", tracking_uri=uri).search_runs()
    assert sorted(r.info.run_name for r in runs) == [f"run-{i}" for i in range(4)]
    assert all(r.info.status == "FINISHED" for r in runs)


@pytest.mark.slow
def test_dvc_exp_run_temp_records_its_runs_in_the_main_store(tmp_path):
    """A real ``dvc exp run --temp``: the stage runs in ``.dvc/tmp/exps/<tmp>``, deleted afterwards;
    its MLflow run must be in the main repository's ``mlflow.db``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    dvc = str(Path(sys.executable).with_name("dvc"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "DVC_NO_ANALYTICS": "1",
           "PYTHONPATH": str(REPO), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "MLFLOW_DISABLE_TELEMETRY": "true"}

    def sh(*cmd):
        r = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
        return r.stdout

    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    sh(dvc, "config", "core.autostage", "false")
    (repo / ".gitignore").write_text("/mlflow.db*\n/mlartifacts/\n")
    (repo / "params.yaml").write_text("x: 1\n")
    (repo / "log_run.py").write_text(textwrap.dedent("""
        import json, os, pathlib
        from components.tracking import make_tracker
        t = make_tracker("mlflow", "temp", ".")
        with t.start_run("exp"):
            t.log_metrics({"x": 1.0})
        pathlib.Path("out.json").write_text(json.dumps({"cwd": os.getcwd()}))
        """))
    (repo / "dvc.yaml").write_text("stages:\n  log:\n    cmd: python log_run.py\n    params: [x]\n"
                                   "    deps: [log_run.py]\n    metrics: [{out.json: {cache: false}}]\n")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "init")
    sh(dvc, "exp", "run", "--temp", "-S", "x=2")
    runs = MlflowTracker("temp", tracking_uri=f"sqlite:///{repo / 'mlflow.db'}").search_runs()
    assert [r.info.run_name for r in runs] == ["exp"] and runs[0].info.status == "FINISHED"
    assert not list((repo / ".dvc" / "tmp" / "exps").glob("tmp*"))     # the workspace itself is gone
