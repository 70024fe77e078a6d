"""A stage's life as a process: one run of a stage at a time, interrupts that abort cleanly, and
Ray Tune's per-stage results folder that lets an interrupted stage resume.

- :func:`stage_lock` — an exclusive ``flock`` on ``.locks/<name>.lock`` (``<name>`` is the stage, or
  ``<stage>@<task>`` for one task of a ``foreach`` stage); a second concurrent run of the same stage
  is refused at once, naming the process that holds it. The kernel releases the lock when the
  holder dies, however it dies.
- :func:`install_signal_handlers` — SIGINT and SIGTERM abort the stage: outside a sweep they raise
  :class:`StageInterrupted` at once; during a Tune run the first signal asks Tune to stop (its
  SIGUSR1 handler: it ends the trials and saves the experiment state for a resume) and the sweep
  raises :class:`StageInterrupted` as soon as ``fit`` returns; a second signal raises at once.
  ``StageInterrupted`` is a ``KeyboardInterrupt``, so the tracker ends the open runs as KILLED.
- :func:`watch_parent` — when the process that started the stage (``dvc repro``) dies, the stage
  gets SIGTERM instead of running on as an orphan nobody tracks.
- :func:`ray_storage` — ``.ray_results/<name>/``: a sweep's trial folders live there until the stage
  succeeds (then it is removed); an interrupted or failed stage leaves it for the re-run to resume.
  :func:`clean_runs` (``make clean-runs``) removes the folders of stages that are not running, and
  ends the MLflow runs and Optuna trials killed stages left RUNNING (``flows.reaper``).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

LOCK_DIR = ".locks"
RAY_DIR = ".ray_results"


class StageInterrupted(KeyboardInterrupt):
    """The stage was stopped by a signal; nothing it was producing is recorded."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StageBusy(RuntimeError):
    """Another process is running the same stage."""


_state: dict[str, object] = {"signal": None, "tune": False, "installed": False, "defer": ""}


def interrupted() -> int | None:
    """The signal that asked this process to stop, if one did."""
    return _state["signal"]        # type: ignore[return-value]


def _on_signal(signum: int, frame) -> None:
    if _state["defer"]:                  # the stage is stopping its Ray processes: let it finish that
        if _state["signal"] is None:
            _state["signal"] = signum
        log.warning("%s while %s: the stage stops once that is done", signal.Signals(signum).name, _state["defer"])
        return
    first = _state["signal"] is None
    _state["signal"] = signum
    if first and _state["tune"]:
        tune_stop = signal.getsignal(signal.SIGUSR1)    # Ray Tune's "stop gracefully" handler
        if callable(tune_stop):
            log.warning("%s: stopping the sweep (its state is saved; re-running the stage resumes it). "
                        "Send the signal again to stop at once.", signal.Signals(signum).name)
            tune_stop(signum, frame)
            return
    raise StageInterrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT / SIGTERM -> abort the stage (see the module docstring). Main thread only."""
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"     # SIGINT is ours; we forward it to Tune ourselves
    _state["signal"] = None
    _state["installed"] = True
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def handlers_installed() -> bool:
    """Whether this process is a stage's (:func:`install_signal_handlers` ran), not a test or a notebook."""
    return bool(_state["installed"])


@contextlib.contextmanager
def signals_deferred(what: str = "Ray shuts down") -> Iterator[None]:
    """A block a signal must not cut short (the start or the shutdown of the local Ray processes: cut,
    it leaves Ray's agents running): a SIGINT / SIGTERM during it is recorded (:func:`interrupted`),
    not raised. ``what``: the block, for the log line."""
    before = _state["defer"]
    _state["defer"] = what
    try:
        yield
    finally:
        _state["defer"] = before


def reinstall_signal_handlers() -> None:
    """Put the stage's handlers back after a library replaced them: ``ray.init`` sets its own SIGTERM
    handler (``sys.exit``), which would abort a sweep instead of stopping it (runs FAILED, Optuna
    trials left RUNNING). Nothing if this process never installed them (a test, a notebook) or
    from another thread."""
    if not _state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        # always set, even when Python's table still names ours: a C++ library (Ray's core worker
        # installs absl's failure handler for SIGTERM) replaces the handler below Python's table,
        # where ``signal.getsignal`` cannot see it (found by the crash harness: exit -6)
        signal.signal(signum, _on_signal)


@contextlib.contextmanager
def tune_running() -> Iterator[None]:
    """Around ``Tuner.fit()``: a first signal stops Tune gracefully; when ``fit`` returns after a
    signal, :class:`StageInterrupted` is raised so no half-finished sweep is used."""
    reinstall_signal_handlers()         # Ray, started since, may have replaced them
    _state["tune"] = True
    try:
        yield
    finally:
        _state["tune"] = False
    if _state["signal"] is not None:
        raise StageInterrupted(_state["signal"])    # type: ignore[arg-type]


def watch_parent(interval_s: float = 1.0) -> None:
    """SIGTERM this process when its parent (e.g. ``dvc repro``) exits, so the stage does not run on
    as an orphan. Checked every ``interval_s`` by a daemon thread."""
    parent = os.getppid()
    if parent <= 1:
        return

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                log.warning("the parent process %d exited; stopping the stage", parent)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _lock_path(root: Path, name: str) -> Path:
    return Path(root) / LOCK_DIR / f"{name}.lock"


def _holders(root: Path, name: str) -> list[str]:
    """The runs that would write what a run ``name`` writes and hold their lock now: for one task
    (``train@pos``), the run of the whole stage (``train``); for the whole stage, any of its tasks."""
    if "@" in name:
        others = [name.split("@", 1)[0]]
    else:
        others = [p.stem for p in (root / LOCK_DIR).glob(f"{name}@*.lock")]
    return [o for o in others if is_locked(root, o)]


@contextlib.contextmanager
def stage_lock(root: str | Path, name: str) -> Iterator[Path]:
    """Hold the exclusive lock of stage ``name`` under ``root`` for the block; :class:`StageBusy`
    if another process holds it, or holds the lock of the whole stage (for one task's run) or of
    one of its tasks (for the whole stage's run)."""
    path = _lock_path(Path(root), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            try:
                info = json.loads(holder)
                who = f"pid {info['pid']} on {info['host']}, since {info['started']}"
            except (ValueError, KeyError):
                who = "another process"
            raise StageBusy(f"stage {name!r} is already running ({who}; lock {path}). Wait for it to "
                            f"finish, or stop it first (Ctrl-C in its terminal, or kill -INT <pid>)") from None
        busy = _holders(Path(root), name)
        if busy:
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise StageBusy(f"stage {name!r} overlaps {', '.join(repr(b) for b in busy)}, which is running now "
                            f"(locks in {path.parent}); wait for it to finish, or stop it first")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def is_locked(root: str | Path, name: str) -> bool:
    """Whether a process holds stage ``name``'s lock now."""
    path = _lock_path(Path(root), name)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def ray_storage(root: str | Path, name: str) -> Path:
    """Where stage ``name``'s sweeps keep their trial folders: ``<root>/.ray_results/<name>``."""
    return Path(root) / RAY_DIR / name


def work_dir(root: str | Path, name: str) -> Path:
    """Stage ``name``'s private working folder (intermediate models its later trials start from),
    inside its Ray folder: kept for a resume, removed when the stage succeeds. The stage copies what
    belongs in its DVC outputs there only at its end."""
    return ray_storage(root, name) / "work"


def clean_runs(root: str | Path) -> list[Path]:
    """Remove the ``.ray_results`` folders of stages that are not running now (abandoned or
    interrupted runs; an interrupted stage then restarts from scratch) -> the folders removed."""
    base = Path(root) / RAY_DIR
    removed = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        if entry.is_dir() and is_locked(root, entry.name):
            log.info("kept %s: stage %s is running", entry, entry.name)
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        removed.append(entry)
    return removed


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.lifecycle clean [--root .]`` (``make clean-runs``)."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m flows.lifecycle")
    ap.add_argument("command", choices=["clean"])
    ap.add_argument("--root", default=".")
    args = ap.parse_args(argv)
    removed = clean_runs(args.root)
    print(f"removed {len(removed)} abandoned run folder(s) under {Path(args.root) / RAY_DIR}"
          + "".join(f"\n  {p}" for p in removed))
    from components.tracking.base import default_tracking_uri
    from flows.reaper import close_orphans
    from flows.study_storage import study_storage_url
    runs, trials = close_orphans(default_tracking_uri(args.root), study_storage_url(args.root))
    print(f"ended {len(runs)} MLflow run(s) and {len(trials)} Optuna trial(s) left RUNNING by killed stages")


if __name__ == "__main__":
    main()
