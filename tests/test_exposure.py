"""Exposure of the project's servers (issue 30, item 8).

``flows.cli.is_loopback`` / ``exposure_warning``: loopback addresses give no warning, every other
address does (``0.0.0.0``, ``::``, a LAN address, a host name); ``make ui`` and ``make dashboard``
run that check before their server (``make -n``, nothing started). ``infra/mlflow-server.sh`` refuses
a non-loopback HOST without authentication and names what auth needs, before it starts anything.
The ``integration`` test starts the script with MLflow's basic-auth app on loopback and checks
401 without credentials, 200 with them."""
from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from flows import cli

REPO = Path(__file__).resolve().parents[1]
MLFLOW_SH = REPO / "infra" / "mlflow-server.sh"

LOOPBACK = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost", "LOCALHOST", " 127.0.0.1 ",
            "::ffff:127.0.0.1"]
EXPOSED = ["0.0.0.0", "::", "[::]", "192.168.1.20", "10.0.0.5", "172.16.3.4", "8.8.8.8", "fe80::1", "2001:db8::1",
           "mlflow.example.org", "my-laptop", ""]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_hosts_give_no_warning(host, capsys):
    assert cli.is_loopback(host)
    assert cli.exposure_warning(host, 5000, "ui") is None
    assert cli.exposure_warning(host, 8080, "dashboard") is None
    assert cli.warn_if_exposed(host, 5000) is False
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("host", EXPOSED)
def test_every_other_host_warns(host, capsys):
    assert not cli.is_loopback(host)
    assert cli.warn_if_exposed(host, 5001, "ui") is True
    msg = capsys.readouterr().err
    assert msg.startswith("WARNING: the MLflow UI") and "NO AUTHENTICATION" in msg
    assert ":5001" in msg and "read, change and delete every run" in msg
    assert "127.0.0.1" in msg and "ssh -N -L 5001:127.0.0.1:5001" in msg
    assert "basic-auth" in msg and "TLS" in msg and "infra/README.md" in msg


def test_the_warning_names_the_address_and_the_server():
    msg = cli.exposure_warning("0.0.0.0", 5000, "ui")
    assert "0.0.0.0:5000 (every network interface of this machine)" in msg
    assert "anyone who can reach 0.0.0.0:5000" in msg
    assert "[2001:db8::1]:5000" in cli.exposure_warning("2001:db8::1", 5000, "ui")
    dash = cli.exposure_warning("192.168.1.20", 8080, "dashboard")
    assert dash.startswith("WARNING: optuna-dashboard will listen on 192.168.1.20:8080") and "studies" in dash
    assert "reverse proxy with authentication and TLS" in dash and "infra/README.md" in dash
    assert "every network interface" not in dash


def test_check_exposure_is_a_warning_not_a_refusal(capsys):
    assert cli.check_exposure(["ui", "0.0.0.0", "5000"]) == 0
    assert "NO AUTHENTICATION" in capsys.readouterr().err
    assert cli.check_exposure(["dashboard", "127.0.0.1", "8080"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit, match="ui|dashboard HOST PORT"):
        cli.check_exposure(["mlflow", "0.0.0.0"])


# --- the Makefile ------------------------------------------------------------------------------

def _make_n(target: str, *assignments: str) -> list[str]:
    if not shutil.which("make"):
        pytest.skip("no make on PATH")
    out = subprocess.run(["make", "-s", "-n", "-o", ".venv/.installed", target, *assignments], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return out.replace("\\\n", " ").splitlines()


@pytest.mark.parametrize("target,server,port", [("ui", "mlflow server", "5055"), ("dashboard", "optuna-dashboard", "8089")])
def test_make_runs_the_check_before_the_server(target, server, port):
    lines = _make_n(target, "UI_HOST=0.0.0.0", f"PORT={port}")
    check = [i for i, ln in enumerate(lines) if "check_exposure" in ln]
    start = [i for i, ln in enumerate(lines) if server in ln]
    assert len(check) == 1 and len(start) == 1 and check[0] < start[0], lines
    assert "--host '0.0.0.0'" in lines[start[0]] and f"--port '{port}'" in lines[start[0]]
    # the check line itself, run as make would (it only prints)
    words = shlex.split(lines[check[0]])
    assert words[-3:] == [target, "0.0.0.0", port]
    got = subprocess.run(words, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and got.stdout == ""
    assert "NO AUTHENTICATION" in got.stderr and f"0.0.0.0:{port}" in got.stderr
    quiet = subprocess.run(shlex.split(_make_n(target)[check[0]]), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == ""                  # the default 127.0.0.1


# --- infra/mlflow-server.sh, refusals (nothing is started) ------------------------------------

def _script(tmp_path: Path, host: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("MLFLOW_AUTH", "APPROXINFER_MLFLOW", "MLFLOW_FLASK"))}
    return subprocess.run([str(MLFLOW_SH), f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "art"), "5999", "1", host],
                          cwd=tmp_path, env={**base, **env}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "mlflow.example.org"])
def test_the_server_script_refuses_an_exposed_host_without_auth(tmp_path, host):
    got = _script(tmp_path, host)
    assert got.returncode == 2
    assert f"WITHOUT AUTHENTICATION on {host}:5999" in got.stderr and "APPROXINFER_MLFLOW_AUTH_DIR" in got.stderr
    assert "APPROXINFER_MLFLOW_ALLOW_UNAUTHENTICATED=1" in got.stderr and "infra/README.md" in got.stderr
    assert not (tmp_path / "mlflow.db").exists()


def test_the_server_script_names_what_auth_needs(tmp_path):
    got = _script(tmp_path, "127.0.0.1", MLFLOW_AUTH_CONFIG_PATH=str(tmp_path / "missing.ini"))
    assert got.returncode == 2 and f"MLFLOW_AUTH_CONFIG_PATH={tmp_path / 'missing.ini'}: no such readable file" in got.stderr
    ini = tmp_path / "basic_auth.ini"
    ini.write_text("[other]\n")
    got = _script(tmp_path, "127.0.0.1", MLFLOW_AUTH_CONFIG_PATH=str(ini))
    assert got.returncode == 2 and "no [mlflow] section" in got.stderr
    ini.write_text("[mlflow]\ndefault_permission = READ\n")
    got = _script(tmp_path, "127.0.0.1", MLFLOW_AUTH_CONFIG_PATH=str(ini))
    assert got.returncode == 2 and "MLFLOW_FLASK_SERVER_SECRET_KEY (or APPROXINFER_MLFLOW_SECRET_KEY_FILE)" in got.stderr
    got = _script(tmp_path, "127.0.0.1", MLFLOW_AUTH_CONFIG_PATH=str(ini),
                  APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE=str(tmp_path / "nope"))
    assert got.returncode == 2 and "APPROXINFER_MLFLOW_ADMIN_PASSWORD_FILE" in got.stderr
    assert not (tmp_path / "mlflow.db").exists()


# --- a real server with MLflow's basic-auth app, on loopback ------------------------------------

def _status(url: str, user: str | None = None, password: str | None = None) -> int:
    req = urllib.request.Request(url)
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.integration
def test_basic_auth_server_on_loopback(tmp_path):
    """``APPROXINFER_MLFLOW_AUTH_DIR``: the script makes the auth folder (mode 700, secrets 600) and
    MLflow's basic-auth app answers 401 without or with wrong credentials, 200 with the admin's;
    a client with MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD logs a run."""
    from tests.integration.conftest import _end_group, free_port, wait_healthy
    py = REPO / ".venv" / "bin" / "python"
    if subprocess.run([str(py), "-c", "import flask_wtf"], capture_output=True).returncode != 0:
        reason = "Flask-WTF is not installed in .venv (pyproject's `integration` extra installs it)"
        if os.environ.get("APPROXINFER_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason} (APPROXINFER_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    auth, log = tmp_path / "auth", tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_AUTH", "MLFLOW_TRACKING", "MLFLOW_FLASK"))}
    env.update(APPROXINFER_MLFLOW_AUTH_DIR=str(auth), MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")
    with open(log, "w") as out:
        proc = subprocess.Popen([str(MLFLOW_SH), f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "art"), str(port)],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(url, proc, log, "infra/mlflow-server.sh with basic auth", timeout_s=180)
        assert oct(auth.stat().st_mode & 0o777) == "0o700"
        assert {p.name: oct(p.stat().st_mode & 0o777) for p in auth.iterdir() if p.suffix != ".db"} == {
            "admin_password": "0o600", "secret_key": "0o600", "basic_auth.ini": "0o600"}
        password = (auth / "admin_password").read_text().strip()
        api = f"{url}/api/2.0/mlflow/experiments/search?max_results=1"
        assert _status(api) == 401 and _status(f"{url}/") == 401
        assert _status(api, "admin", "not-the-password") == 401
        assert _status(api, "admin", password) == 200
        client = {**env, "MLFLOW_TRACKING_URI": url, "MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": password}
        code = ("from mlflow import MlflowClient; c = MlflowClient(); e = c.create_experiment('auth-check'); "
                "r = c.create_run(e); c.log_metric(r.info.run_id, 'm', 1.0); print(c.get_run(r.info.run_id).data.metrics)")
        got = subprocess.run([str(py), "-c", code], env=client, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0 and "{'m': 1.0}" in got.stdout, got.stderr[-3000:]
        anon = subprocess.run([str(py), "-c", code], env={**client, "MLFLOW_TRACKING_PASSWORD": ""},
                              capture_output=True, text=True, timeout=120)
        assert anon.returncode != 0 and "401" in anon.stderr
    finally:
        _end_group(proc)
