"""A stage's life as a process (issue 14): one run of a stage at a time, stale runs closed, runs
of an interrupted or failed stage ended KILLED / FAILED with nothing written, signals that abort,
no orphan when ``dvc repro`` dies, ``make clean-runs``. Fast: no Ray here (see test_sweeps.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from components.tracking.base import NullTracker
from components.tracking.mlflow_tracker import MlflowTracker
from flows import lifecycle
from flows.lifecycle import StageBusy, StageInterrupted, clean_runs, stage_lock
from flows.stages.common import run_stage

REPO = Path(__file__).resolve().parents[2]


def _params():
    return {"base": {"tracker": "null"}, "demo": {"tasks": ["pos", "ner"], "x": 1}}


def _tracker(tmp_path) -> MlflowTracker:
    return MlflowTracker("reliability", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")


def _status(tracker: MlflowTracker) -> dict[str, str]:
    return {r.info.run_name: r.info.status for r in tracker.search_runs()}


def test_a_second_run_of_the_same_stage_is_refused(tmp_path):
    ran = []
    with stage_lock(tmp_path, "demo@pos"):
        with pytest.raises(StageBusy, match=rf"stage 'demo@pos' is already running \(pid {os.getpid()} on "):
            run_stage("demo", lambda p, ctx: ran.append(1) or {}, _params(), tmp_path, tracker=NullTracker(), task="pos")
        # another task of the stage, or another stage, is not blocked
        run_stage("demo", lambda p, ctx: ran.append(2) or {}, _params(), tmp_path, tracker=NullTracker(), task="ner")
    assert ran == [2]
    run_stage("demo", lambda p, ctx: ran.append(3) or {}, _params(), tmp_path, tracker=NullTracker(), task="pos")
    assert ran == [2, 3]


def test_a_task_and_the_whole_stage_do_not_run_together(tmp_path):
    """``python -m flows.stages.train`` (every task) writes what ``train@pos`` writes."""
    with stage_lock(tmp_path, "demo@pos"):
        with pytest.raises(StageBusy, match=r"stage 'demo' overlaps 'demo@pos', which is running now"):
            run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=NullTracker())
    with stage_lock(tmp_path, "demo"):
        with pytest.raises(StageBusy, match=r"stage 'demo@ner' overlaps 'demo', which is running now"):
            run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=NullTracker(), task="ner")
    run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=NullTracker())      # both free again
    assert not lifecycle.is_locked(tmp_path, "demo") and not lifecycle.is_locked(tmp_path, "demo@pos")


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from flows.lifecycle import stage_lock
        with stage_lock({str(tmp_path)!r}, "demo"):
            print("locked", flush=True)
            time.sleep(60)
        """)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert lifecycle.is_locked(tmp_path, "demo")
        with pytest.raises(StageBusy, match=rf"pid {holder.pid} on"):
            run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=NullTracker())
    finally:
        holder.kill()
        holder.wait()
    assert not lifecycle.is_locked(tmp_path, "demo")
    run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=NullTracker())


def test_stale_running_runs_of_the_stage_are_closed_at_start(tmp_path):
    tracker = _tracker(tmp_path)
    stale = tracker.client.create_run(tracker.ensure_experiment(), run_name="stale-trial",
                                      tags={"stage": "demo", "task": "pos"})
    other_task = tracker.client.create_run(tracker.ensure_experiment(), run_name="other-task",
                                           tags={"stage": "demo", "task": "ner"})
    other_stage = tracker.client.create_run(tracker.ensure_experiment(), run_name="other-stage", tags={"stage": "x"})
    run_stage("demo", lambda p, ctx: {}, _params(), tmp_path, tracker=tracker, task="pos")
    status = {run.info.run_id: tracker.client.get_run(run.info.run_id).info.status
              for run in (stale, other_task, other_stage)}
    assert status == {stale.info.run_id: "KILLED", other_task.info.run_id: "RUNNING",
                      other_stage.info.run_id: "RUNNING"}
    assert _status(tracker)["demo@pos"] == "FINISHED"


@pytest.mark.parametrize("error, status", [(KeyboardInterrupt(), "KILLED"), (StageInterrupted(signal.SIGTERM), "KILLED"),
                                           (RuntimeError("boom"), "FAILED")])
def test_an_aborted_stage_ends_its_runs_and_writes_nothing(tmp_path, error, status):
    tracker = _tracker(tmp_path)

    def run(params, ctx):
        with ctx.tracker.start_run("sweep/pos", parent_run_id=ctx.run_id, tags={"stage": "demo"}):
            # a trial run the sweep's callback opened and never ended
            tracker.client.create_run(tracker.ensure_experiment(), run_name="trial", tags={"stage": "demo"})
            (ctx.ray_storage / "exp").mkdir(parents=True)
            raise error

    with pytest.raises(type(error)):
        run_stage("demo", run, _params(), tmp_path, tracker=tracker)
    assert _status(tracker) == {"demo": status, "sweep/pos": status, "trial": status}
    assert not (tmp_path / "metrics").exists()
    assert (tmp_path / ".ray_results" / "demo" / "exp").is_dir()     # kept for the re-run to resume


def test_a_finished_stage_removes_its_ray_folder(tmp_path):
    def run(params, ctx):
        (ctx.ray_storage / "exp").mkdir(parents=True)
        (ctx.work / "warm").mkdir(parents=True)
        assert ctx.work.is_relative_to(ctx.ray_storage)
        return {}

    run_stage("demo", run, _params(), tmp_path, tracker=NullTracker(), task="pos")
    assert not (tmp_path / ".ray_results" / "demo@pos").exists()
    assert (tmp_path / "metrics" / "demo" / "pos.json").exists()


@pytest.fixture
def stage_handlers():
    """This test process plays a stage's: its SIGINT / SIGTERM / SIGUSR1 handlers and the lifecycle's
    state are put back afterwards (pytest's process is no stage: a later ray.init must not put the
    stage's handlers back). Yields the handlers found before."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        yield old
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        lifecycle._state.update(signal=None, tune=False, installed=False, defer="")


def test_signals_abort_outside_a_sweep_and_stop_tune_inside_one(stage_handlers):
    stopped = []
    lifecycle.install_signal_handlers()
    assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "1"
    with pytest.raises(StageInterrupted) as e:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert e.value.exit_code == 143 and lifecycle.interrupted() == signal.SIGTERM

    lifecycle.install_signal_handlers()
    signal.signal(signal.SIGUSR1, lambda s, f: stopped.append(s))      # stands for Tune's stop handler
    with pytest.raises(StageInterrupted) as e:
        with lifecycle.tune_running():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            assert stopped == [signal.SIGINT]       # Tune was asked to stop; the sweep goes on to return
    assert e.value.exit_code == 130
    with pytest.raises(StageInterrupted):           # a second signal does not wait for Tune
        with lifecycle.tune_running():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)


def test_a_stage_whose_parent_dies_stops_instead_of_running_on_as_an_orphan(tmp_path):
    """``dvc repro`` killed with SIGKILL: the stage it started gets SIGTERM and ends its runs."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    stage = textwrap.dedent(f"""
        import time
        from components.tracking.mlflow_tracker import MlflowTracker
        from flows.lifecycle import install_signal_handlers, watch_parent
        from flows.stages.common import run_stage
        install_signal_handlers()
        watch_parent(0.2)
        def run(params, ctx):
            open({str(tmp_path / 'started')!r}, "w").close()
            time.sleep(120)
        try:
            run_stage("demo", run, {{"base": {{}}, "demo": {{}}}}, {str(tmp_path)!r},
                      tracker=MlflowTracker("reliability", tracking_uri={uri!r}))
        except KeyboardInterrupt as e:
            raise SystemExit(e.exit_code)
        """)
    # the "dvc" process: starts the stage, prints its pid, waits for it
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {stage!r}], cwd={str(REPO)!r})
        print(child.pid, flush=True)
        child.wait()
        """)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    deadline = time.time() + 60
    while not (tmp_path / "started").exists():
        assert time.time() < deadline and parent.poll() is None, "the stage did not start"
        time.sleep(0.1)
    parent.kill()
    parent.wait()
    deadline = time.time() + 30
    while _alive(child):
        assert time.time() < deadline, "the orphaned stage is still running"
        time.sleep(0.1)
    assert _status(_tracker(tmp_path)) == {"demo": "KILLED"}
    assert not lifecycle.is_locked(tmp_path, "demo")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_clean_runs_removes_folders_of_stages_that_are_not_running(tmp_path):
    for name in ("train@pos", "scaling", "train-pos"):          # the last: a pre-lock layout
        (tmp_path / ".ray_results" / name / "exp").mkdir(parents=True)
    with stage_lock(tmp_path, "scaling"):
        removed = clean_runs(tmp_path)
    assert sorted(p.name for p in removed) == ["train-pos", "train@pos"]
    assert [p.name for p in (tmp_path / ".ray_results").iterdir()] == ["scaling"]
    out = subprocess.run([sys.executable, "-m", "flows.lifecycle", "clean", "--root", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "removed 1 abandoned run folder(s)" in out and not (tmp_path / ".ray_results" / "scaling").exists()


def test_a_missing_section_is_an_error_outside_dvc_too(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"base": {"tracker": "null"}, "report": {}}))
    r = subprocess.run([sys.executable, "-m", "flows.stages.train", "--params", str(params), "--root", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1 and f"{params}: no 'train' section" in r.stderr


def test_a_duplicate_key_is_an_error_outside_dvc_too(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base:\n  tracker: 'null'\ntrain:\n  optim:\n    lr: 0.1\n    lr: 0.2\n")
    r = subprocess.run([sys.executable, "-m", "flows.stages.train", "--params", str(params), "--root", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1 and f"{params}:6: duplicate key 'lr'" in r.stderr, r.stderr


def test_handlers_replaced_by_a_library_are_put_back(stage_handlers):
    """``ray.init`` sets its own SIGTERM handler (``sys.exit``); ``init_ray`` and ``tune_running`` put
    the stage's back, so a SIGTERM during a sweep stops it instead of aborting the stage."""
    lifecycle.reinstall_signal_handlers()            # never installed in this process: nothing
    assert signal.getsignal(signal.SIGTERM) is stage_handlers[signal.SIGTERM]
    lifecycle.install_signal_handlers()
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(s))        # what ray.init does
    lifecycle.reinstall_signal_handlers()
    assert signal.getsignal(signal.SIGTERM) is lifecycle._on_signal
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(s))
    with pytest.raises(StageInterrupted) as e:
        with lifecycle.tune_running():
            assert signal.getsignal(signal.SIGTERM) is lifecycle._on_signal
            raise StageInterrupted(signal.SIGTERM)
    assert e.value.exit_code == 143


def test_a_signal_while_ray_shuts_down_is_deferred_not_raised(stage_handlers):
    """A SIGTERM in the middle of the stage's Ray shutdown used to cut it short and leave Ray's
    agents running (found by the crash harness): it is recorded, and raised once the block is done."""
    lifecycle.install_signal_handlers()
    assert lifecycle.handlers_installed()
    with lifecycle.signals_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)                                  # not raised here
        finished = True
    assert finished and lifecycle.interrupted() == signal.SIGTERM


def test_a_sigterm_while_ray_starts_keeps_the_stages_handler_and_stops_after_the_start(monkeypatch,
                                                                                         stage_handlers):
    """``ray.init`` installs its SIGTERM handler (``sys.exit``) at its start: a SIGTERM in that
    window exited 15 and left Ray's agents running (found by the crash harness). Now Ray's handler
    is never installed in a stage process, the signal is deferred until Ray has started, and the
    stage then stops as interrupted (exit 143 through its usual path)."""
    import ray
    import ray._private.utils as ray_utils
    from flows import ray_runtime

    def fake_init(**kwargs):                               # what ray.init does first, then a SIGTERM mid-start
        ray_utils.set_sigterm_handler(lambda signum, frame: sys.exit(signum))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)
        fake_init.finished = True

    monkeypatch.setattr(ray, "init", fake_init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    lifecycle.install_signal_handlers()
    with pytest.raises(StageInterrupted) as e:
        ray_runtime.init_ray()
    assert fake_init.finished and e.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is lifecycle._on_signal
    assert ray_utils.set_sigterm_handler.__name__ == "set_sigterm_handler"     # restored after the start


def test_after_a_real_ray_start_and_shutdown_a_sigterm_reaches_the_stages_handler(tmp_path):
    """Ray's core worker installs absl's failure handler for SIGTERM below Python's signal table
    (``signal.getsignal`` still names the stage's handler): a SIGTERM then logged "*** SIGTERM
    received" and the process aborted (exit -6); and Ray's shutdown resets SIGTERM to its default
    action there, so a SIGTERM while the stage wrote its outputs killed it (exit -15). Both found by
    the crash harness; ``init_ray`` and ``shutdown_ray`` put the stage's handler back."""
    script = textwrap.dedent("""
        import os, signal, time
        from flows import lifecycle, ray_runtime
        lifecycle.install_signal_handlers()
        ray_runtime.init_ray(num_cpus=1)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)
        except lifecycle.StageInterrupted as e:
            print("interrupted", e.exit_code, flush=True)
        with lifecycle.signals_deferred():
            ray_runtime.shutdown_ray()
        try:                              # Ray's shutdown reset SIGTERM to its default action: set again
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)
        except lifecycle.StageInterrupted as e:
            print("after shutdown", e.exit_code, flush=True)
        os._exit(0)
    """)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "interrupted 143" in p.stdout and "SIGTERM received" not in p.stderr, p.stderr[-3000:]
    assert "after shutdown 143" in p.stdout, (p.stdout, p.stderr[-3000:])
