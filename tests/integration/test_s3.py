"""Object storage: an S3 server on loopback (moto in server mode: the S3 API over HTTP) as

(a) the DVC remote: in a ``git clone`` of this repository, a file ``dvc add``ed, ``dvc push``ed to
    ``s3://BUCKET/dvc`` (endpoint in ``.dvc/config.local``, credentials from the environment only), its
    objects listed with boto3, then the file and the DVC cache removed and ``dvc pull``ed back equal;
(b) Ray Tune's storage (``APPROXINFER_TUNE_STORAGE=s3://BUCKET/tune``): a two-trial sweep through
    ``flows.sweeps.run_sweep`` in a driver subprocess gets SIGINT once the first trial has finished and
    the second has a checkpoint, and a second driver resumes it from the bucket: the finished trial is
    not run again, the other continues from its checkpoint, and Tune's experiment state is in the bucket;
    once the stage's local folder (with the sweep's marker) is gone, a third run replaces the experiment;
(c) MLflow's artifact store: ``infra/mlflow-server.sh`` with ``MLFLOW_ARTIFACTS_DESTINATION=s3://BUCKET/mlflow``
    proxies an artifact logged by a client that has no S3 credentials (``mlflow-artifacts:`` URIs) to
    the bucket, where boto3 finds it, and serves it back equal.

The moto server's process group is ended at the end of the module. Without moto (``pip install
'moto[server]' boto3 dvc-s3``) the tests are skipped, or fail with ``APPROXINFER_REQUIRE_SERVICES=1``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import MLFLOW_SH, REPO, _end_group, _unavailable, free_port, wait_healthy

pytestmark = pytest.mark.integration

BUCKET = "approxinfer-it"


@dataclass(frozen=True)
class S3Server:
    url: str                     # http://127.0.0.1:<port>
    env: dict[str, str]          # what a client of the bucket needs (credentials, endpoint, region)

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.url, region_name=self.env["AWS_DEFAULT_REGION"],
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"])

    def keys(self, prefix: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION",
            "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "MLFLOW_S3_ENDPOINT_URL",
            "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> S3Server:
    """``python -m moto.server`` on a free loopback port, a bucket in it, and the AWS variables of this
    process pointing at it (throwaway credentials: moto accepts any)."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        _unavailable(f"no moto server or boto3 ({e}; pip install 'moto[server]' boto3 dvc-s3)")
    base = tmp_path_factory.mktemp("s3")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "it-access-key", "AWS_SECRET_ACCESS_KEY": "it-secret-key",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": url,
           # no ~/.aws of whoever runs the tests
           "AWS_CONFIG_FILE": str(base / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(base / "no-aws-creds")}
    log = base / "moto.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                cwd=base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    mp = pytest.MonkeyPatch()
    try:
        # moto's management endpoint answers /moto-api/ ... but not /health: wait on the S3 API itself
        server = S3Server(url=url, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                server.client().create_bucket(Bucket=BUCKET)
                break
            except Exception as e:           # connection refused until it listens
                if proc.poll() is not None:
                    pytest.fail(f"moto server exited {proc.returncode}:\n{log.read_text()[-4000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"moto server did not answer in 60 s ({e}):\n{log.read_text()[-4000:]}")
                time.sleep(0.3)
        for var in AWS_VARS:
            mp.delenv(var, raising=False)
        for var, value in env.items():
            mp.setenv(var, value)
        yield server
    finally:
        mp.undo()
        _end_group(proc)
        assert proc.poll() is not None


# --- (a) the DVC remote -------------------------------------------------------------------------

def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}")
    return proc


def test_dvc_push_and_pull_through_the_s3_remote(s3: S3Server, tmp_path):
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "GIT_AUTHOR_NAME": "it", "GIT_AUTHOR_EMAIL": "it@localhost", "GIT_COMMITTER_NAME": "it",
           "GIT_COMMITTER_EMAIL": "it@localhost"}
    env.pop("DVC_EXP_NAME", None)
    env["DVC_SITE_CACHE_DIR"] = str(tmp_path / "dvc-site-cache")      # not /var/tmp/dvc: the index stays here
    dvc = [sys.executable, "-m", "dvc"]
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(REPO), str(clone)], cwd=tmp_path, env=env)    # this repo's DVC setup
    data = clone / "data" / "s3-it"
    data.mkdir(parents=True)
    (data / "blob.bin").write_bytes(os.urandom(300_000))
    (data / "notes.txt").write_text("pushed to S3\n")
    want = {p.name: _sha(p) for p in data.iterdir()}

    _run([*dvc, "remote", "add", "-d", "s3r", f"s3://{BUCKET}/dvc"], cwd=clone, env=env)
    _run([*dvc, "remote", "modify", "--local", "s3r", "endpointurl", s3.url], cwd=clone, env=env)
    _run([*dvc, "add", "data/s3-it"], cwd=clone, env=env)
    pushed = _run([*dvc, "push", "data/s3-it.dvc"], cwd=clone, env=env)
    assert "3 files pushed" in pushed.stdout, pushed.stdout                    # 2 files + the folder's listing

    config = (clone / ".dvc" / "config").read_text()
    assert f"s3://{BUCKET}/dvc" in config
    for secret in (s3.env["AWS_ACCESS_KEY_ID"], s3.env["AWS_SECRET_ACCESS_KEY"], s3.url, "access_key"):
        assert secret not in config, f".dvc/config holds {secret!r}"
    assert s3.url in (clone / ".dvc" / "config.local").read_text()          # git-ignored

    # the objects are in the bucket, content-addressed (files/md5/<2>/<30>), the file's bytes among them
    keys = s3.keys("dvc/")
    assert len(keys) == 3 and all(k.startswith("dvc/files/md5/") for k in keys), keys
    bodies = {hashlib.sha256(s3.client().get_object(Bucket=BUCKET, Key=k)["Body"].read()).hexdigest() for k in keys}
    assert set(want.values()) <= bodies

    # forget the local copies (workspace and cache), then pull them back from the bucket
    for p in data.iterdir():
        p.unlink()
    data.rmdir()
    shutil.rmtree(clone / ".dvc" / "cache")
    pulled = _run([*dvc, "pull", "data/s3-it.dvc"], cwd=clone, env=env)
    assert {p.name: _sha(p) for p in data.iterdir()} == want, pulled.stdout
    status = _run([*dvc, "status", "data/s3-it.dvc", "--json"], cwd=clone, env=env)
    assert json.loads(status.stdout or "{}") == {}


# --- (b) Ray Tune's storage ---------------------------------------------------------------------

STEPS = 4
DRIVER = textwrap.dedent('''
    """A two-trial Optuna sweep (one trial at a time) of a trainable that reports STEPS times with a
    checkpoint each, logging its starts and reports to EVENTS; writes the SweepResult to OUT."""
    import json, os, sys, tempfile, time
    from pathlib import Path
    from components.config import ResourcesConfig
    from components.tracking.base import NullTracker
    from flows.lifecycle import StageInterrupted, install_signal_handlers
    from flows.ray_runtime import shutdown_ray
    from flows.sweeps import SweepConfig, run_sweep

    storage, events, out, steps = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])

    def note(*words):
        with open(events, "a") as f:
            f.write(" ".join(map(str, words)) + "\\n")

    def trainable(config):
        from ray import tune
        trial = tune.get_context().get_trial_id()
        step, ckpt = 0, tune.get_checkpoint()
        if ckpt is not None:
            with ckpt.as_directory() as d:
                step = json.loads(Path(d, "state.json").read_text())["step"]
        note(trial, "start", step)
        lr = float(config["train.optim.lr"])
        while step < steps:
            time.sleep(0.5)
            step += 1
            with tempfile.TemporaryDirectory() as d:
                Path(d, "state.json").write_text(json.dumps({"step": step}))
                tune.report({"best_dev_score": lr * step, "step": step},
                            checkpoint=tune.Checkpoint.from_directory(d))
            note(trial, "report", step)

    install_signal_handlers()
    cfg = SweepConfig(num_samples=2, max_concurrent=1, resources=ResourcesConfig(cpu=1, gpu=0), max_failures=0,
                      space={"train.optim.lr": {"type": "loguniform", "low": 1e-3, "high": 1e-1}})
    try:
        res = run_sweep(trainable, name="s3-sweep", cfg=cfg, params={"train": {"optim": {"lr": 0.01}}}, seed=0,
                        tracker=NullTracker(), parent_run_id="p", storage=storage)
    except StageInterrupted as e:
        print("interrupted", file=sys.stderr)
        sys.exit(e.exit_code)
    finally:
        shutdown_ray()
    out.write_text(json.dumps({"trials": res.trials, "best_checkpoint": str(res.best_checkpoint),
                               "study": res.study}, default=str))
''')


def _events(path: Path) -> list[tuple[str, str, int]]:
    if not path.exists():
        return []
    return [(t, what, int(n)) for t, what, n in (line.split() for line in path.read_text().splitlines() if line)]


def test_a_sweep_on_s3_storage_is_interrupted_and_resumed_from_the_bucket(s3: S3Server, tmp_path):
    work = tmp_path / "tune"
    storage = work / ".ray_results" / "train@s3"               # the stage's local folder (markers, copies)
    events, out = tmp_path / "events.txt", tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "APPROXINFER_TUNE_STORAGE": f"s3://{BUCKET}/tune",
           "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    for var in ("RAY_ADDRESS", "APPROXINFER_OPTUNA_STORAGE", "MLFLOW_TRACKING_URI"):
        env.pop(var, None)                                      # local Ray; the study in work/optuna.db
    args = [sys.executable, "-c", DRIVER, str(storage), str(events), str(out), str(STEPS)]
    prefix = "tune/train@s3/s3-sweep/"

    driver = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while True:                    # the first trial finished, the second has reported (a checkpoint)
            ev = _events(events)
            done = {t for t, what, n in ev if what == "report" and n == STEPS}
            going = {t for t, what, n in ev if what == "report" and t not in done}
            if done and going:
                break
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, f"the sweep did not get going: {ev}"
            time.sleep(0.05)
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=90)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert driver.returncode == 130, err[-4000:]
    assert not out.exists()
    (finished,), (stopped,) = done, going
    keys = s3.keys(prefix)
    # Tune's experiment state and the trials' checkpoints are in the bucket; the marker stays local
    assert any(k.startswith(prefix + "experiment_state-") and k.endswith(".json") for k in keys), keys
    assert any(k.startswith(prefix + "tuner.pkl") for k in keys), keys
    assert any(f"_{finished}_" in k and "/checkpoint_" in k for k in keys), keys
    assert any(f"_{stopped}_" in k and "/checkpoint_" in k for k in keys), keys
    marker = json.loads((storage / "s3-sweep.fingerprint").read_text())
    assert marker["experiment"] == f"s3://{BUCKET}/tune"
    assert not (storage / "s3-sweep").exists()                # nothing of the experiment itself is local
    before = _events(events)

    resumed = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=150)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"resuming the earlier run in s3://{BUCKET}/tune/train@s3/s3-sweep" in resumed.stderr
    after = _events(events)[len(before):]
    assert not [e for e in after if e[0] == finished], after                # kept, not run again
    starts = [n for t, what, n in after if t == stopped and what == "start"]
    assert len(starts) == 1 and starts[0] >= 1, after                       # continued from its checkpoint
    assert [n for t, what, n in after if t == stopped and what == "report"] == list(range(starts[0] + 1, STEPS + 1))

    res = json.loads(out.read_text())
    assert len(res["trials"]) == 2 and all(not t["error"] for t in res["trials"])
    assert sorted(t["metrics"]["step"] for t in res["trials"]) == [STEPS, STEPS]
    # the callers get local copies of the trials' folders and checkpoints
    best = Path(res["best_checkpoint"])
    assert best.is_relative_to(storage / "s3-sweep") and json.loads((best / "state.json").read_text()) == {"step": STEPS}
    for t in res["trials"]:
        assert Path(t["path"]).is_dir() and Path(t["checkpoint"], "state.json").is_file()
    keys = s3.keys(prefix)
    assert sum(1 for k in keys if k.startswith(prefix + "experiment_state-")) >= 1
    assert all(any(f"_{t}_" in k and "/checkpoint_" in k for k in keys) for t in (finished, stopped)), keys

    # a finished stage removes its local folder (flows.stages.common), and with it the marker: the next
    # run of the sweep removes the experiment from the bucket and starts afresh, as with a local folder
    shutil.rmtree(storage)
    before = _events(events)
    again = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=150)
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"removing s3://{BUCKET}/tune/train@s3/s3-sweep, left by an earlier run" in again.stderr
    after = _events(events)[len(before):]
    assert sorted(n for _, what, n in after if what == "start") == [0, 0]
    assert not {finished, stopped} & {t for t, _, _ in after}
    assert not any(f"_{t}_" in k for k in s3.keys(prefix) for t in (finished, stopped))


# --- (c) MLflow's artifact store ----------------------------------------------------------------

def test_mlflow_server_proxies_artifacts_to_s3(s3: S3Server, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    env = {**os.environ, "MLFLOW_ARTIFACTS_DESTINATION": f"s3://{BUCKET}/mlflow", "MLFLOW_DISABLE_TELEMETRY": "true",
           "DO_NOT_TRACK": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "w") as o:   # the artifact root from MLFLOW_ARTIFACTS_DESTINATION, the endpoint from AWS_ENDPOINT_URL
        proc = subprocess.Popen([str(MLFLOW_SH), f"sqlite:///{tmp_path / 'mlflow.db'}", "", str(port)], cwd=tmp_path,
                                env=env, stdout=o, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(url, proc, log, "the MLflow server", timeout_s=120)
        # the client knows the server only: no S3 credentials, endpoint or AWS config
        for var in AWS_VARS:
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        client = MlflowClient(tracking_uri=url)
        exp = client.create_experiment("s3-artifacts")
        run = client.create_run(exp)
        src = tmp_path / "report.bin"
        src.write_bytes(os.urandom(50_000))
        client.log_artifact(run.info.run_id, str(src), artifact_path="out")
        client.set_terminated(run.info.run_id)
        assert run.info.artifact_uri == f"mlflow-artifacts:/{exp}/{run.info.run_id}/artifacts"
        assert [a.path for a in client.list_artifacts(run.info.run_id, "out")] == ["out/report.bin"]
        got = Path(client.download_artifacts(run.info.run_id, "out/report.bin", str(tmp_path / "down")))
        assert got.read_bytes() == src.read_bytes()
    finally:
        _end_group(proc)
    key = f"mlflow/{exp}/{run.info.run_id}/artifacts/out/report.bin"
    assert s3.keys("mlflow/") == [key]
    body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body == src.read_bytes()
