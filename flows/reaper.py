"""What a killed stage leaves behind, closed whatever DVC decides next.

A stage that dies by SIGKILL (the OOM killer, ``kill -9``, a lost node's scheduler) cannot end its
MLflow runs, its Optuna trials or its local Ray processes itself, and the documented re-run may
never start it again: ``dvc repro`` may restore the stage's outputs from DVC's run cache (an earlier
run with the same deps) without running it. So the clean-up does not wait for a re-run:

- every stage run has a *driver id* ``<host>:<pid>:<start time>`` (:func:`driver_id`), recorded on
  its MLflow runs (tag ``approxinfer.driver``, which the sweep trials' runs inherit through the
  tracker's run tags) and on its Optuna studies (``flows.study_storage.DRIVER_ATTR``);
- :func:`start_reaper` starts a small watchdog process beside the stage (in a session of its own,
  so a kill of the stage's process group does not take it along) that keeps a list of the stage's
  descendant processes (the local Ray head: GCS, raylet, agents, workers) and, when the stage
  process is gone, terminates those still alive and runs :func:`close_orphans`; a stage that ends
  normally (or by an exception it handles) stops its reaper, which then does nothing;
- :func:`close_orphans` ends as KILLED every RUNNING MLflow run and marks FAIL every RUNNING Optuna
  trial whose driver on this host is no longer alive (another host's driver cannot be judged from
  here and is left alone). It also runs at the start of every stage, and in ``make clean-runs``,
  in case a reaper was killed too.

``.ray_results/<stage>`` is kept on purpose: it is what lets the next real run of the stage resume
its sweeps (``flows.lifecycle``); ``make clean-runs`` removes the folders of stages not running.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DRIVER_TAG = "approxinfer.driver"


def driver_id(pid: int | None = None) -> str:
    """``<host>:<pid>:<start time>`` of process ``pid`` (default: this one); the start time tells a
    reused pid from the process that had it."""
    import psutil
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{psutil.Process(pid).create_time():.2f}"


def alive(driver: str) -> bool:
    """Whether the process of ``driver`` (:func:`driver_id`) still runs; a driver of another host, or
    a malformed id, counts as alive (it cannot be judged from here)."""
    import psutil
    try:
        host, pid, started = driver.rsplit(":", 2)
        pid_i, started_f = int(pid), float(started)
    except ValueError:
        return True
    if host != socket.gethostname():
        return True
    try:
        p = psutil.Process(pid_i)
        return abs(p.create_time() - started_f) < 0.02 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def close_orphans(tracking_uri: str | None, study_url: str | None) -> tuple[list[str], list[tuple[str, int]]]:
    """End the RUNNING MLflow runs (KILLED) and Optuna trials (FAIL) whose driver is gone ->
    (run ids, (study, trial number) pairs). A store or storage that does not exist yet is skipped."""
    runs: list[str] = []
    trials: list[tuple[str, int]] = []
    if tracking_uri and _exists(tracking_uri):
        from components.tracking.mlflow_tracker import close_orphan_runs
        runs = close_orphan_runs(tracking_uri, DRIVER_TAG, alive)
    if study_url and _exists(study_url):
        from flows.study_storage import fail_orphan_trials, open_study_storage
        trials = fail_orphan_trials(open_study_storage(study_url), alive)
    return runs, trials


def _exists(url: str) -> bool:
    """Whether the database at ``url`` may hold something (a SQLite file that exists; any server)."""
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):]).exists()
    return True


def start_reaper(tracking_uri: str | None, study_url: str | None, pid: int | None = None) -> subprocess.Popen:
    """Start the watchdog of process ``pid`` (default: this one) -> its ``Popen`` (pass it to
    :func:`stop_reaper` when the stage ends on its own)."""
    pid = os.getpid() if pid is None else pid
    cmd = [sys.executable, "-m", "flows.reaper", "--pid", str(pid), "--driver", driver_id(pid)]
    if tracking_uri:
        cmd += ["--tracking-uri", tracking_uri]
    if study_url:
        cmd += ["--study-url", study_url]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None,
                            start_new_session=True, env=env, cwd=root)


def stop_reaper(proc: subprocess.Popen | None) -> None:
    """The stage ended on its own: its reaper exits without touching anything."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGUSR1)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _descendants(pid: int) -> dict[int, float]:
    """The processes below ``pid`` (pid -> start time), this reaper (one of them) left out."""
    import psutil
    try:
        return {c.pid: c.create_time() for c in psutil.Process(pid).children(recursive=True) if c.pid != os.getpid()}
    except psutil.Error:
        return {}


def _terminate(procs: dict[int, float], grace_s: float = 3.0) -> list[int]:
    """SIGTERM, then after ``grace_s`` SIGKILL, each process of ``procs`` (pid -> start time) that is
    still the same process -> the pids signalled."""
    import psutil
    live = []
    for pid, started in procs.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 0.02:
                live.append(p)
        except psutil.Error:
            pass
    for p in live:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, rest = psutil.wait_procs(live, timeout=grace_s)
    for p in rest:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(rest, timeout=grace_s)
    return [p.pid for p in live]


def watch(pid: int, driver: str, tracking_uri: str | None, study_url: str | None, interval_s: float = 0.5) -> int:
    """The reaper's loop (see the module docstring) -> its exit status."""
    stop = {"asked": False}
    signal.signal(signal.SIGUSR1, lambda s, f: stop.update(asked=True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # a Ctrl-C is the stage's to handle
    known: dict[int, float] = {}
    while not stop["asked"]:
        if not alive(driver):
            break
        known.update(_descendants(pid))
        time.sleep(interval_s)
    if stop["asked"]:
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s reaper: %(message)s")
    killed = _terminate(known)
    runs, trials = close_orphans(tracking_uri, study_url)
    log.warning("stage process %d is gone without ending its work: stopped %d process(es) it left, ended %d "
                "MLflow run(s) KILLED, marked %d Optuna trial(s) FAIL", pid, len(killed), len(runs), len(trials))
    return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m flows.reaper")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--tracking-uri")
    ap.add_argument("--study-url")
    args = ap.parse_args(argv)
    raise SystemExit(watch(args.pid, args.driver, args.tracking_uri, args.study_url))


if __name__ == "__main__":
    main()
