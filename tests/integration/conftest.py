"""Real services on loopback for the integration tests (``-m integration``).

``postgres``: a throwaway PostgreSQL server (``infra/postgres.sh``) in a fresh temporary folder,
with a database and login role for MLflow and one for Optuna; stopped and removed at the end of
the session. ``mlflow_server``: ``infra/mlflow-server.sh`` on that PostgreSQL (one worker, artifacts
proxied to a temporary folder, job execution off); its process group is ended at the end of the
session. Without PostgreSQL's server binaries the tests that need them are skipped, or fail when
``APPROXINFER_REQUIRE_SERVICES=1`` (CI installs them, so a missing server is an error there).
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SH = REPO / "infra" / "postgres.sh"
MLFLOW_SH = REPO / "infra" / "mlflow-server.sh"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unavailable(reason: str) -> None:
    if os.environ.get("APPROXINFER_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (APPROXINFER_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


def _have_postgres() -> bool:
    return bool(os.environ.get("PG_BINDIR") or shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))


@dataclass(frozen=True)
class Postgres:
    dir: Path
    port: int
    mlflow_url: str          # SQLAlchemy URLs (postgresql+psycopg2://user:password@127.0.0.1:port/db)
    optuna_url: str


@dataclass(frozen=True)
class MlflowServer:
    url: str                 # http://127.0.0.1:<port>
    artifacts: Path          # --artifacts-destination
    log: Path


def _parse_env(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export "):].split("=", 1)
            out[key] = value
    return out


@pytest.fixture(scope="session")
def postgres() -> Postgres:
    if not _have_postgres():
        _unavailable("no PostgreSQL server binaries (apt-get install -y postgresql)")
    # not under pytest's tmp folders: as root the server runs as the OS user postgres, which cannot
    # enter those (mode 0700, root's); the script gives this folder to that user
    folder = Path(tempfile.mkdtemp(prefix="approxinfer-pg-"))
    port = free_port()
    env = {**os.environ, "PG_THROWAWAY": "1"}
    try:
        proc = subprocess.run([str(POSTGRES_SH), "start", str(folder), str(port)], env=env,
                              capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            pytest.fail(f"infra/postgres.sh start exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        urls = _parse_env(proc.stdout)
        yield Postgres(dir=folder, port=port, mlflow_url=urls["MLFLOW_BACKEND_STORE_URI"],
                       optuna_url=urls["APPROXINFER_OPTUNA_STORAGE"])
    finally:
        subprocess.run([str(POSTGRES_SH), "stop", str(folder)], capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, what: str, timeout_s: float) -> None:
    """Until ``url``/health answers; fails with the tail of ``log`` if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not _healthy(url):
        if proc.poll() is not None:
            pytest.fail(f"{what} exited {proc.returncode}:\n{log.read_text()[-6000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not answer /health in {timeout_s:.0f} s:\n{log.read_text()[-6000:]}")
        time.sleep(0.5)


def _end_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to the server's process group (mlflow and its uvicorn worker), SIGKILL if it lingers."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass
    try:                              # a worker left behind by a leader that exited first
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(scope="session")
def mlflow_server(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> MlflowServer:
    """``infra/mlflow-server.sh`` on 127.0.0.1 with the PostgreSQL backend store, one worker."""
    base = tmp_path_factory.mktemp("mlflow-server")
    artifacts, log = base / "mlartifacts", base / "server.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "w") as out:
        proc = subprocess.Popen([str(MLFLOW_SH), postgres.mlflow_url, str(artifacts), str(port), "1", "127.0.0.1"],
                                cwd=base, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the first start creates the schema (alembic migrations)
        wait_healthy(url, proc, log, "the MLflow server", timeout_s=240)
        yield MlflowServer(url=url, artifacts=artifacts, log=log)
    finally:
        _end_group(proc)
