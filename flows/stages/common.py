"""What every stage shares: argument parsing, params, the tracker run, metrics/<stage>.json.

``python -m flows.stages.<name> [--params params.yaml ...] [--root .]`` loads ``params.yaml``
(an overlay on top of it for each further ``--params``; resolving ``base.scale``), opens one tracker run named after the stage, logs the stage's params
section, calls ``run(params, ctx)``, logs the returned metrics and writes them atomically to
``metrics/<stage>.json`` for ``dvc metrics`` — without their run facts (wall times, throughputs,
the host: ``components.metrics.run_facts``), which go with ``stage_seconds`` to
``metrics/timings/<stage>.json``, a file no stage reads: the same code and data give the same
``metrics/<stage>.json``. A stage whose timings are its results, read by another stage (``approx``:
the report's speed table; ``bench``: the headline's speed-ups), says so with a module-level
``TIMINGS_ARE_RESULTS = True``: its metrics are written whole.

Provenance (``components.tracking.provenance``): the stage's run — and every run opened under it
(sweep parents; trials, through ``tracker.run_tags()``) — carries the git commit
(``mlflow.source.git.commit``, ``git.dirty``) and ``dvc.stage`` (``train@pos``); the stage's run
logs its ``dvc.yaml`` deps under ``data/`` as dataset inputs whose digest is DVC's hash.

Around that (``flows.lifecycle``): the stage holds its lock (a second concurrent run is refused),
closes the RUNNING runs and Optuna trials that killed stages left behind (any stage's: a run served
from DVC's run cache never starts the killed stage again; ``flows.reaper``), starts a reaper that
cleans up after it should it be killed with SIGKILL, and aborts on SIGINT/SIGTERM or when
``dvc repro`` dies — its runs end KILLED, the Ray workers stop, nothing is written, and the exit
status is 128 + the signal. Its sweeps keep their trial folders in ``.ray_results/<stage>``
until it succeeds, so a re-run after an interrupt resumes them.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import math
import os
import sys
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from components.config import (BaseConfig, ConfigError, check_contained, flatten, get_dotted, load_params_files, load_section,
                               project_root, resolve_device, resolve_scale, set_dotted)
from components.io import write_json
from components.metrics.run_facts import split_run_facts
from components.tracking import Tracker, make_tracker, stage_provenance
from flows.lifecycle import (StageInterrupted, handlers_installed, install_signal_handlers, interrupted, ray_storage,
                             signals_deferred, stage_lock, watch_parent, work_dir)
from flows.ray_runtime import shutdown_ray
from flows.reaper import DRIVER_TAG, close_orphans, driver_id, start_reaper, stop_reaper
from flows.studies import apply_study_tasks, experiment_name
from flows.study_storage import study_storage_url

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


@dataclass
class StageContext:
    root: Path
    base: BaseConfig
    tracker: Tracker
    run_id: str
    stage: str
    task: str | None = None             # the one task of a foreach stage's run

    def path(self, p: str | Path) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.root / p

    @property
    def name(self) -> str:
        """``<stage>`` or ``<stage>@<task>``: the lock, the MLflow run and the Ray folder's name."""
        return stage_name(self.stage, self.task)

    @property
    def ray_storage(self) -> Path:
        """Where this stage's sweeps keep their trial folders (removed when the stage succeeds)."""
        return ray_storage(self.root, self.name)

    @property
    def work(self) -> Path:
        """The stage's private working folder (``flows.lifecycle.work_dir``), not a DVC output."""
        return work_dir(self.root, self.name)


def stage_name(stage: str, task: str | None) -> str:
    return stage if task is None else f"{stage}@{task}"


def numeric(d: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in flatten(d).items():
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = float(v)
    return out


def metrics_path(root: Path, stage: str, task: str | None = None) -> Path:
    """``metrics/<stage>.json``, or ``metrics/<stage>/<task>.json`` for one task of a per-task stage."""
    return root / "metrics" / (f"{stage}.json" if task is None else f"{stage}/{task}.json")


def timings_path(root: Path, stage: str, task: str | None = None) -> Path:
    """``metrics/timings/<stage>.json`` (``.../<stage>/<task>.json``): the run facts of the stage's
    metrics (:func:`metrics_path`) and its ``stage_seconds``; not a DVC output, no stage reads it."""
    return root / "metrics" / "timings" / (f"{stage}.json" if task is None else f"{stage}/{task}.json")


def timings_are_results(run: Callable[..., Any]) -> bool:
    """Whether the stage module of ``run`` keeps its timings in its metrics (``TIMINGS_ARE_RESULTS``)."""
    return bool(getattr(sys.modules.get(getattr(run, "__module__", "")), "TIMINGS_ARE_RESULTS", False))


def for_task(params: dict[str, Any], stage: str, task: str) -> dict[str, Any]:
    """``params`` with ``<stage>.tasks`` narrowed to ``[task]`` (which must be one of them)."""
    tasks = get_dotted(params, f"{stage}.tasks")
    if task not in tasks:
        raise ConfigError(f"--task {task!r}: not one of {stage}.tasks {list(tasks)}")
    return set_dotted(params, f"{stage}.tasks", [task])


def stage_params(params: dict[str, Any]) -> dict[str, Any]:
    """The params a stage runs with: ``base.scale``'s overrides applied, then each study's task
    list (``studies.<study>``, :func:`flows.studies.apply_study_tasks`) copied into its stages."""
    return apply_study_tasks(resolve_scale(params))


def use_plugin_dir(root: Path, base: BaseConfig) -> Path | None:
    """Put ``base.plugin_dir`` (relative to ``root``, or absolute) first on ``sys.path`` and on
    ``PYTHONPATH`` (which the local Ray workers inherit), so that params can name the user's
    ``module:attribute`` plug-ins. A folder set in params that does not exist is an error naming
    the key; the default's absence (a root without ``plugins/``) is not."""
    d = Path(base.plugin_dir)
    d = (d if d.is_absolute() else root / d).resolve()
    if not d.is_dir():
        if base.plugin_dir == BaseConfig.plugin_dir:
            return None
        raise ConfigError(f"base.plugin_dir: {base.plugin_dir!r} is not a folder ({d}); it should hold your "
                          f"plug-in modules")
    if str(d) not in sys.path:
        sys.path.insert(0, str(d))
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(d) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(d), *parts])
    return d


def run_stage(stage: str, run: Callable[[dict[str, Any], StageContext], dict[str, Any]],
              params: dict[str, Any], root: str | Path = ".", tracker: Tracker | None = None,
              task: str | None = None) -> dict[str, Any]:
    """Run a stage; with ``task``, only that task of a per-task stage (``dvc.yaml`` ``foreach``):
    its MLflow run is ``<stage>@<task>`` and its metrics ``metrics/<stage>/<task>.json``."""
    root = Path(root).resolve()
    dvc_params = params                  # what dvc.yaml's ${...} references resolve against
    params = stage_params(params)
    if task is not None:
        params = for_task(params, stage, task)
    base = load_section(BaseConfig, "base", params)
    check_contained(params, root, project_root(root))   # every path inside the repository (or base.external_paths),
    #                                                     task names plain; root: the products' folder, in it
    resolve_device(base.device)          # an unusable device fails here, before any work
    use_plugin_dir(root, base)
    if base.threads > 0:
        import torch
        torch.set_num_threads(base.threads)
    name = stage_name(stage, task)
    tags = {"stage": stage} if task is None else {"stage": stage, "task": task}
    with stage_lock(root, name):
        tracker = tracker or make_tracker(base.tracker, experiment_name(base.experiment, stage), root)
        tracker.ensure_experiment()
        stale = tracker.close_running(tags, status="KILLED")
        study_url = study_storage_url(root)
        orphans, trials = close_orphans(tracker.tracking_uri or None, study_url)
        if stale or orphans or trials:
            logging.getLogger(__name__).warning(
                "%s: closed %d run(s) and %d Optuna trial(s) that killed stage runs left RUNNING", name,
                len(set(stale) | set(orphans)), len(trials))
        provenance, inputs = stage_provenance(root, name, dvc_params)
        outer = tracker.run_tags()
        tracker.set_provenance({**outer, **provenance, DRIVER_TAG: driver_id()})
        reaper = start_reaper(tracker.tracking_uri or None, study_url)
        finished = False
        t0 = time.perf_counter()
        try:
            with tracker.start_run(name, tags=tags) as run_id:
                tracker.log_params(flatten({"base": params.get("base") or {}, stage: params.get(stage) or {}}))
                tracker.log_inputs(inputs)
                ctx = StageContext(root=root, base=base, tracker=tracker, run_id=run_id, stage=stage, task=task)
                metrics = run(params, ctx)
                if interrupted() is not None:    # a signal some library caught and swallowed: still not finished
                    raise StageInterrupted(interrupted())
                seconds = round(time.perf_counter() - t0, 3)
                results, timings = (dict(metrics), {}) if timings_are_results(run) else split_run_facts(metrics)
                metrics["stage_seconds"] = timings["stage_seconds"] = seconds
                tracker.log_metrics(numeric(metrics))
            finished = True
        except BaseException as e:       # the trials' and sweeps' runs this stage left open end with it
            with signals_deferred():      # stop the trials still running before closing their runs
                shutdown_ray()
            tracker.close_running(tags, status="KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
            raise
        finally:
            tracker.set_provenance(outer)
            if finished:
                # the outputs before Ray's shutdown: for a moment during it Ray leaves SIGTERM at its
                # default action below Python's table, where no handler of ours can be (found by the
                # crash harness); a SIGTERM then ends a stage that has written all it produced
                write_json(metrics_path(root, stage, task), results)
                write_json(timings_path(root, stage, task), timings)
            if handlers_installed():      # a stage process: its Ray processes end before its reaper does,
                with signals_deferred():  # and not at interpreter exit, where a signal would cut it short
                    shutdown_ray()
            if finished or not handlers_installed():
                stop_reaper(reaper)
            # else a stage process that failed or was stopped: its reaper stays, and once this process
            # is gone it stops whatever it left (a Ray start or shutdown cut short) and closes its records
        shutil.rmtree(ray_storage(root, name), ignore_errors=True)    # finished: nothing left to resume
    return metrics


def main(stage: str, argv: list[str] | None = None) -> None:
    """Entry point of ``python -m flows.stages.<stage>``.

    The stage's ``run`` is imported from ``flows.stages.<stage>`` (not taken from ``__main__``), so
    that Ray pickles the stage's functions and dataclasses by reference to an importable module.
    """
    run = importlib.import_module(f"flows.stages.{stage}").run
    ap = argparse.ArgumentParser(prog=f"python -m flows.stages.{stage}")
    ap.add_argument("--params", action="append", default=None,
                    help="params file (default: params.yaml); given again, each file on top of the ones before "
                         "(study/dvc.yaml: --params ../params.yaml --params params.yaml)")
    ap.add_argument("--root", default=".", help="the folder the stage's products go under (metrics/, models/, "
                                                "reports/, ...; default: .); paths in params are relative to it")
    ap.add_argument("--task", default=None, help="run one task of <stage>.tasks (dvc.yaml foreach); "
                                                 "metrics go to metrics/<stage>/<task>.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_signal_handlers()
    watch_parent()
    try:
        files = args.params or ["params.yaml"]
        params = load_params_files(files)
        if stage not in params:
            raise ConfigError(f"{', '.join(files)}: no '{stage}' section (the settings of the stage being run)")
        run_stage(stage, run, params, args.root, task=args.task)
        if interrupted() is not None:    # a signal some library swallowed after the work: exit as interrupted
            raise StageInterrupted(interrupted())
    except StageInterrupted as e:
        print(f"{stage}: {e}; nothing was recorded as finished. Running the stage again resumes its "
              f"sweeps from .ray_results/ (`make clean-runs` discards them).", file=sys.stderr)
        _exit(e.exit_code)
    except KeyboardInterrupt:
        print(f"{stage}: interrupted; nothing was recorded as finished.", file=sys.stderr)
        _exit(130)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        _exit(1, e)
    except SystemExit as e:
        if e.code in (signal.SIGTERM, signal.SIGINT) and interrupted() == e.code:
            # a library's handler turned our signal into sys.exit(signum): still 128 + signal
            print(f"{stage}: interrupted by {signal.Signals(e.code).name}; nothing was recorded as finished.",
                  file=sys.stderr)
            _exit(128 + e.code)
        raise


def _exit(code: int, cause: BaseException | None = None) -> None:
    """End a stage process that failed or was stopped with ``code``. When it ran Ray, its Ray is
    already shut down (:func:`run_stage`), and the interpreter's own teardown is skipped: Ray's
    libraries crashed there with a segfault (status -11 instead of 130; found by the crash harness)."""
    if "ray" not in sys.modules:
        raise SystemExit(code) from cause
    if cause is not None:
        import traceback
        traceback.print_exception(cause, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
