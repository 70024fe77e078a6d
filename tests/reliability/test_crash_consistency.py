"""Kills of every kind during a real sweep (issue 30). Slow: each runs the ``train`` stage of a tiny
project (``crash_harness.make_project``) in a subprocess with local Ray and a two-trial Optuna sweep.

- SIGTERM inside ``Tuner.fit`` (what ``timeout``, SLURM and a killed ``dvc`` send) stops the sweep
  as SIGINT does: exit 143, every run KILLED, no Optuna trial RUNNING. Before: ``ray.init``'s own
  SIGTERM handler aborted the stage (signal 6, runs FAILED, a trial RUNNING).
- A trial whose worker is killed past its retries fails the stage, naming the trial. Before: the
  crash was taken for "did not learn" and the weakest trial became the result.
- SIGKILL of the stage: within seconds no run or trial is RUNNING and no process it started is
  alive (its reaper), and the re-run finishes. Before: 4 runs and 2 trials RUNNING, Ray agents alive.
- Interrupt + resume and worker crash + Tune's retry give the metrics and the model files of an
  uninterrupted run. Before: other numbers (no random state in the checkpoint).
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability.crash_harness import (REPO, descendants, make_project, running_left, stage_cmd, stage_env,
                                             still_alive)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("template")
    make_project(root, epochs=25)
    return root


@pytest.fixture(scope="module")
def reference(template, tmp_path_factory):
    """The uninterrupted run of ``train@pos``: its metrics (no timings) and model file hashes."""
    root = tmp_path_factory.mktemp("reference") / "p"
    shutil.copytree(template, root)
    p = subprocess.run(stage_cmd(root, "pos"), cwd=REPO, env=stage_env(root), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return _outputs(root)


def _outputs(root: Path) -> dict:
    import hashlib
    m = json.loads((root / "metrics" / "train" / "pos.json").read_text())
    m.pop("stage_seconds", None)          # metrics/timings/train/pos.json holds it (flows.stages.common)
    model = root / "models" / "tagger" / "pos"
    return {"metrics": m, "files": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(model.iterdir())}}


def _copy(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "p"
    shutil.copytree(template, root)
    return root


def _start(root: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(stage_cmd(root, "pos"), cwd=REPO, env=stage_env(root), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kw)


def _wait_for_epochs(root: Path, proc: subprocess.Popen, n: int, timeout_s: float = 240) -> dict[int, float]:
    """Wait until some trial has reported ``n`` epochs -> the stage's descendants seen meanwhile."""
    exp = root / ".ray_results" / "train@pos" / "train-pos"
    seen: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    while True:
        seen.update(descendants(proc.pid))
        lines = [len(f.read_text().splitlines()) for f in exp.glob("task_trial_*/result.json")] if exp.exists() else []
        if lines and max(lines) >= n:
            return seen
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the sweep did not get going"
        time.sleep(0.05)


def _workers(pid: int) -> list:
    import psutil
    out = []
    for c in psutil.Process(pid).children(recursive=True):
        try:
            if c.name().startswith("ray::ImplicitFunc"):
                out.append(c)
        except psutil.Error:
            pass
    return out


def _rerun_resumes(root: Path, reference: dict) -> None:
    """Run the stage again: it resumes its sweep and ends with the uninterrupted run's outputs."""
    p = subprocess.run(stage_cmd(root, "pos"), cwd=REPO, env=stage_env(root), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "resuming the earlier run" in p.stderr
    assert _outputs(root) == reference


def _statuses(root: Path) -> dict[str, str]:
    from mlflow.tracking import MlflowClient
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exps = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id: r.info.status for r in client.search_runs(exps)}


def test_sigterm_inside_tuner_fit_stops_the_sweep(template, tmp_path):
    root = _copy(template, tmp_path)
    proc = _start(root)
    _wait_for_epochs(root, proc, 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert "interrupted by SIGTERM; nothing was recorded as finished" in err
    statuses = _statuses(root)
    assert statuses and "RUNNING" not in statuses.values() and "FAILED" not in statuses.values()
    assert "KILLED" in statuses.values()
    assert running_left(root) == {"runs": [], "trials": []}
    assert not (root / "models" / "tagger" / "pos").exists()


def test_a_trial_worker_killed_past_its_retries_fails_the_stage_naming_it(template, tmp_path):
    root = _copy(template, tmp_path)
    proc = _start(root)
    kills, deadline = 0, time.monotonic() + 300
    # max_failures is 1: the first kill is retried from the checkpoint, the second is final. Kill the
    # workers of the first trial that runs (the other trial may finish; the stage must fail anyway)
    while proc.poll() is None and time.monotonic() < deadline:
        workers = _workers(proc.pid)
        if workers and kills < 4:
            time.sleep(1.5)                      # let it train (and checkpoint) for a while
            for w in _workers(proc.pid):
                w.kill()
                kills += 1
        time.sleep(0.1)
    _, err = proc.communicate(timeout=120)
    assert kills >= 2
    assert proc.returncode == 1, err[-3000:]
    assert "train: error: sweep train-pos:" in err and "did not finish (after 1 retry from its checkpoint)" in err
    assert "(ERROR)" in err
    assert not (root / "models" / "tagger" / "pos").exists() and not (root / "metrics" / "train" / "pos.json").exists()
    assert running_left(root) == {"runs": [], "trials": []}


def test_sigkill_leaves_nothing_running_and_the_rerun_finishes(template, tmp_path, reference):
    root = _copy(template, tmp_path)
    proc = _start(root)
    seen = _wait_for_epochs(root, proc, 3)
    seen.update(descendants(proc.pid))
    assert _workers(proc.pid)                    # Ray and the trials were there to be left behind
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while (still_alive(seen) or any(running_left(root).values())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert still_alive(seen) == []
    assert running_left(root) == {"runs": [], "trials": []}
    _rerun_resumes(root, reference)
    assert running_left(root) == {"runs": [], "trials": []}


def test_interrupt_and_resume_equals_an_uninterrupted_run(template, tmp_path, reference):
    root = _copy(template, tmp_path)
    proc = _start(root)
    _wait_for_epochs(root, proc, 8)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    _rerun_resumes(root, reference)


def test_a_worker_crash_and_the_retry_equal_an_uninterrupted_run(template, tmp_path, reference):
    root = _copy(template, tmp_path)
    proc = _start(root)
    _wait_for_epochs(root, proc, 6)
    workers = _workers(proc.pid)
    assert workers
    workers[0].kill()                            # one crash: Tune retries that trial from its checkpoint
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert _outputs(root) == reference
