"""Sweeps: Ray Tune ``Tuner`` + seeded ``OptunaSearch`` behind a concurrency limit.

A sweep searches a params space (:mod:`flows.search_space`: dotted ``params.yaml`` keys) or runs
a ``grid``. Trials are logged by Ray's ``MLflowLoggerCallback`` as child runs of the sweep's parent
run (tag ``mlflow.parentRunId``), with the trial folder (learning curve, checkpoint) saved as
artifacts. Per-trial resources come from params (:func:`flows.ray_runtime.trial_resources`), failed
trials are retried from their last checkpoint (``FailureConfig``), and the best trial's checkpoint
is copied to a DVC-tracked folder by the caller (:func:`flows.ray_runtime.copy_checkpoint`).

A sweep is used only when every trial finished with its final report: an interrupted sweep
raises ``StageInterrupted`` (``flows.lifecycle``; its Optuna trials still RUNNING are marked FAIL
first, and a resumed trial's outcome is recorded as a new trial of the study), one with unfinished
or crashed trials raises naming them. A trial that ran and judged its own model (``allow_errors``:
e.g. ``DidNotLearn``, raised by the did-not-learn guard) is a result the caller reports; any other
error — an exception, a worker killed, a node lost — is a crash, retried from the trial's last
checkpoint up to ``max_failures`` times and then fatal to the sweep. Its experiment folder is kept with a fingerprint of the sweep's settings; running the
same sweep again resumes it (``Tuner.restore``: finished trials are kept, unfinished and failed ones
continue from their last checkpoint), while a folder left by other settings is removed. Where the
experiment lives: :mod:`flows.tune_storage` (the stage's local folder, or ``APPROXINFER_TUNE_STORAGE``).

An Optuna-driven sweep (a params space, not a ``grid``) keeps its study in a persistent storage
(:mod:`flows.study_storage`: where, the study's name, the tags and attributes linking it to MLflow).
Determinism: a sweep that starts fresh runs in a study of its own (``<study>-run2``, ... when an
earlier run's study of its name holds trials; none is deleted, so the dashboard lists every run),
so a seeded sampler sees no trials of an earlier run and a re-run gives the same suggestions; a
resumed sweep (``Tuner.restore``) continues its
study — the searcher restored from Ray's state holds the same storage (``RDBStorage`` pickles as
its URL) and study.

Distinct settings: over a finite space (``choice`` and ``randint`` entries only) an Optuna-driven
sweep runs ``distinct_trials(space, num_samples)`` trials — a space with fewer settings than
``num_samples`` is tried in full, with a warning — and, where the seeded TPE's draws would be
random ones with replacement (2 to 10 trials) or every setting is tried, its searcher draws
without replacement (:func:`flows.search_space.sweep_sampler`), so no setting is trained twice. A
one-trial sweep, a continuous space, or more than 10 trials of a larger space keep the seeded TPE.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from components.config import ConfigError, ResourcesConfig, check_range
from components.tracking import Tracker
from flows import progress
from flows.lifecycle import RAY_DIR, StageInterrupted, tune_running
from flows.ray_runtime import init_ray, trial_lines, trial_resources
from flows.reaper import driver_id
from flows.search_space import build_space, distinct_trials, sweep_sampler
from flows.study_storage import (MLFLOW_RUN_ATTR, STUDY_TAG, TRIAL_NUMBER_TAG, fail_running_trials, open_study_storage,
                                 run_study, set_trial_attr, study_name, study_searcher, study_storage_url, trial_number)
from flows.tune_storage import LocalTuneStorage, tune_storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepConfig:
    num_samples: int = 2
    max_concurrent: int = 2
    metric: str = "best_dev_score"
    mode: Literal["max", "min"] = "max"
    space: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: ResourcesConfig = ResourcesConfig()
    max_failures: int = 1

    def __post_init__(self):
        check_range(self, positive=("num_samples", "max_concurrent"), nonnegative=("max_failures",))


@dataclass
class SweepResult:
    best_config: dict[str, Any]
    best_metrics: dict[str, Any]
    best_checkpoint: Path | None
    trials: list[dict[str, Any]]          # one row per trial: config, final metrics, error, path, checkpoint
    study: str | None = None              # the Optuna study's name (an Optuna-driven sweep)


def _stage_root(storage: Path) -> Path:
    """The project root of a stage's Ray folder ``<root>/.ray_results/<stage>``; any other folder
    is taken as the root itself."""
    storage = Path(storage).resolve()
    return storage.parent.parent if storage.parent.name == RAY_DIR else storage


def _fingerprint(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _unfinished(grid: Any) -> list[Any]:
    """The trials of a ``ResultGrid`` that did not end TERMINATED (errored, stopped, never started)."""
    return [t for t in grid._experiment_analysis.trials if t.status != "TERMINATED"]    # Ray keeps the Trial list here


def _reason(trial: Any) -> str:
    """``": <the last line of the trial's error>"`` (the exception a trial raised, e.g. a did-not-learn
    guard's message), or ``""`` when it has none."""
    path = getattr(trial, "error_file", None)
    try:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()] if path else []
    except OSError:
        return ""
    return f": {lines[-1]}" if lines else ""


def _allowed(trial: Any, error: Any, allowed: tuple[type[BaseException], ...]) -> bool:
    """Whether an errored trial raised one of ``allowed`` (a result, not a crash): its exception (Ray's
    ``RayTaskError`` is also an instance of the cause's class), or — for a trial restored from an
    earlier run, whose exception is only text — the class's name in its error."""
    if not allowed:
        return False
    if error is not None and isinstance(error, allowed):
        return True
    path = getattr(trial, "error_file", None)
    try:
        text = Path(path).read_text() if path else ""
    except OSError:
        text = ""
    text += repr(error) if error is not None else ""
    return any(re.search(rf"\b{re.escape(cls.__name__)}\b", text) for cls in allowed)


def _has_experiment_state(store: LocalTuneStorage, name: str) -> bool:
    """Whether the experiment holds Tune's ``experiment_state-*.json``: a run killed between creating
    its Tuner and Tune's first state save leaves ``tuner.pkl`` alone, which ``can_restore`` accepts
    but ``fit`` then refuses ("no experiment state file")."""
    import pyarrow.fs as pafs
    fs = store.filesystem or pafs.LocalFileSystem()
    infos = fs.get_file_info(pafs.FileSelector(store.experiment(name), allow_not_found=True))
    return any(Path(i.path).name.startswith("experiment_state-") and i.path.endswith(".json") for i in infos)


def _resumable(store: LocalTuneStorage, fingerprint: str, name: str) -> bool:
    """Whether ``store`` holds an interrupted run of the same sweep (experiment ``name``) that Tune can
    restore; an experiment left by other settings (or one that cannot be restored) is removed."""
    from ray import tune
    if store.exists(name):
        same = store.marked(name, fingerprint)
        if same and tune.Tuner.can_restore(store.experiment(name), storage_filesystem=store.filesystem) \
                and _has_experiment_state(store, name):
            return True
        log.warning("sweep %s: removing %s, left by an earlier run %s", name, store.describe(name),
                    "with other settings" if not same else "that cannot be resumed")
        store.remove(name)
    return False


def _tuner(trainable: Any, *, store: LocalTuneStorage, fingerprint: str, resume: bool, space: dict[str, Any],
           tune_config: Callable[[], Any], run_config: Any, name: str) -> Any:
    """A new ``Tuner`` (``tune_config()`` called only then), or the restored one of an interrupted run
    of the same sweep in ``store`` (``resume``, from :func:`_resumable`)."""
    from ray import tune
    if resume:
        log.warning("sweep %s: resuming the earlier run in %s (finished trials are kept, unfinished ones "
                    "continue from their checkpoints)", name, store.describe(name))
        tuner = tune.Tuner.restore(store.experiment(name), trainable=trainable, resume_unfinished=True,
                                   resume_errored=True, storage_filesystem=store.filesystem)
        # the pickled callbacks would log to the interrupted run's (closed) parent runs: use this run's
        tuner._local_tuner.get_run_config().callbacks = run_config.callbacks
        return tuner
    store.mark(name, fingerprint)
    return tune.Tuner(trainable, param_space=space, tune_config=tune_config(), run_config=run_config)


def run_sweep(trainable: Callable[[dict[str, Any]], None], *, name: str, cfg: SweepConfig,
              params: dict[str, Any], seed: int, tracker: Tracker, parent_run_id: str,
              storage: Path, tags: dict[str, str] | None = None,
              grid: list[dict[str, Any]] | None = None,
              trial_tags: Callable[[dict[str, Any]], dict[str, str]] | None = None,
              allow_errors: tuple[type[BaseException], ...] = (), reuse_actors: bool = True) -> SweepResult:
    """Run ``trainable`` (a Tune function trainable taking the dotted-key config) over the space.

    ``grid``: instead of the params space, one trial per element (a dict, seen by the trial as
    ``config["run"]`` and logged to MLflow as ``run/<key>`` params) — a design such as
    task x objective x procedure x fold x seed, run exhaustively (Tune's ``grid_search``).
    ``trial_tags(config)``: MLflow tags of one trial, over ``tags`` — e.g. a grid element's own
    ``mlflow.parentRunId`` when one grid runs the trials of several parent runs.
    ``storage``: the stage's Ray results folder; the sweep's experiment is ``storage/name``, or
    ``$APPROXINFER_TUNE_STORAGE/<storage's name>/name`` when that is set (:mod:`flows.tune_storage`; the
    trials' paths and checkpoints returned are then their copies in ``storage/name``).
    A params space (no ``grid``) is searched by Optuna in the persistent study
    ``study_name(name, <settings>)`` (:mod:`flows.study_storage`), returned as ``SweepResult.study``; the
    tracker's innermost open run — the sweep's parent run, inside which every caller runs its
    sweep — is tagged with it; a finite space's settings are not repeated (module doc: "Distinct
    settings").
    Every trial must finish (``StageInterrupted`` after a signal; ``RuntimeError`` naming the trials
    and their errors otherwise), except that trials that raised one of ``allow_errors`` (a model that
    did not learn: the trial ran, and judged it) are returned with their error for the caller to
    report. A crash — any other exception, a worker killed — fails the sweep once Tune's retries
    (``max_failures``, each from the trial's last checkpoint) are spent.
    """
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.tune.search import ConcurrencyLimiter

    if cfg.num_samples < 1:
        raise ConfigError(f"sweep.num_samples must be >= 1, got {cfg.num_samples}")
    store = tune_storage(storage)    # a bad APPROXINFER_TUNE_STORAGE fails here, before Ray starts
    init_ray()
    tracker.ensure_experiment()      # create the experiment before parallel trials race on SQLite
    fingerprint = _fingerprint(name=name, cfg=cfg, grid=grid, params=params, seed=seed)
    study = study_storage = None
    trials = len(grid) if grid is not None else 1       # an empty space: one trial, the settings as written
    if grid is not None:
        if not grid:
            raise ConfigError(f"sweep {name}: the grid is empty")
        space = {"run": tune.grid_search(list(grid))}
    else:
        space = build_space(cfg.space, params)
        if space:                    # Optuna-driven: a persistent study
            trials = distinct_trials(cfg.space, cfg.num_samples)
            if trials < cfg.num_samples:
                log.warning("sweep %s: the space holds %d settings: each is tried once, %d trials, not %d",
                            name, trials, trials, cfg.num_samples)
            url = study_storage_url(_stage_root(storage))
            study_storage, study = open_study_storage(url), study_name(name, fingerprint)
            # another storage is another sweep: a resume must not continue a study elsewhere
            fingerprint = _fingerprint(settings=fingerprint, study_storage=url)
    resume = _resumable(store, fingerprint, name)
    if study is not None:
        # fresh: a study of its own, so no trial of an earlier run steers the seeded sampler, and
        # the earlier runs' studies stay (flows.study_storage.run_study)
        study = run_study(study_storage, study, resume, driver=driver_id(), mode=cfg.mode)
        try:
            tracker.set_tags({STUDY_TAG: study})     # the innermost open run: the sweep's parent run
        except RuntimeError:                         # no run open: no parent run to tag
            log.warning("sweep %s: no open tracker run to tag with its study %s", name, study)

    def extra_tags(trial: Any) -> dict[str, str]:
        tags = dict(trial_tags(trial.config)) if trial_tags is not None else {}
        if study is not None:
            tags[STUDY_TAG] = study
            number = trial_number(study_storage, study, trial.trial_id)
            if number is None:
                log.warning("sweep %s: trial %s has no Optuna trial in study %s", name, trial.trial_id, study)
            else:
                tags[TRIAL_NUMBER_TAG] = str(number)
        return tags

    class _TrialLogger(MLflowLoggerCallback):
        """Ray's MLflow callback with per-trial tags, and each result logged in one batch."""

        def log_trial_start(self, trial):    # the callback reads self.tags when it creates a trial's run
            shared, extra = self.tags, extra_tags(trial)
            self.tags = {**shared, **extra}
            try:
                super().log_trial_start(trial)
            finally:
                self.tags = shared
            run_id = getattr(self, "_trial_runs", {}).get(trial)       # Ray's trial -> MLflow run id
            if TRIAL_NUMBER_TAG in extra and run_id:
                set_trial_attr(study_storage, study, int(extra[TRIAL_NUMBER_TAG]), MLFLOW_RUN_ATTR, run_id)

        def log_trial_result(self, iteration, trial, result):
            step = result.get("timesteps_total") or result["training_iteration"]
            # the trial's config is its run's params already, not a metric per step
            batch.log(self._trial_runs[trial], result, step, skip=("config",))

    callbacks: list[Any] = [] if progress.interactive() else [trial_lines(name, trials)]
    if tracker.tracking_uri:         # the null tracker logs nowhere
        from components.tracking.mlflow_tracker import RunMetrics, source_tags
        batch = RunMetrics(tracker.tracking_uri)
        shared = {"mlflow.parentRunId": parent_run_id, "sweep": name, **tracker.run_tags(), **(tags or {})}
        callbacks.append(_TrialLogger(           # the trials' runs show their Source as the stage's runs do
            tracking_uri=tracker.tracking_uri, experiment_name=tracker.experiment_name,
            tags={**shared, **source_tags(shared)}, save_artifact=True))

    def tune_config() -> Any:      # a fresh run's only: its searcher creates the study
        searcher = None if study is None else ConcurrencyLimiter(
            study_searcher(metric=cfg.metric, mode=cfg.mode, seed=seed, study=study, storage=study_storage,
                           sampler=sweep_sampler(cfg.space, trials, seed)),
            max_concurrent=cfg.max_concurrent)
        return tune.TuneConfig(search_alg=searcher, num_samples=trials if searcher else 1,
                               metric=cfg.metric, mode=cfg.mode,
                               # a searcher has its own ConcurrencyLimiter
                               max_concurrent_trials=None if searcher else cfg.max_concurrent,
                               # a finished trial's process (imports, caches) runs the next one; such a trial
                               # must leave its files in its checkpoint (report_final), not its trial folder
                               reuse_actors=reuse_actors)

    tuner = _tuner(
        tune.with_resources(trainable, trial_resources(cfg.resources)),
        store=store, name=name, space=space, fingerprint=fingerprint, resume=resume, tune_config=tune_config,
        run_config=tune.RunConfig(
            name=name, storage_path=store.storage_path, storage_filesystem=store.filesystem, callbacks=callbacks,
            verbose=1 if progress.interactive() else 0,    # a log gets one line per trial (_TrialLines)
            failure_config=tune.FailureConfig(max_failures=cfg.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1)))
    try:
        with tune_running():         # a signal during fit stops Tune, then raises StageInterrupted here
            grid = tuner.fit()
    except StageInterrupted:
        if study is not None:        # Tune stopped them: no trial of the study may stay RUNNING
            n = fail_running_trials(study_storage, study)
            if n:
                log.warning("sweep %s: marked %d RUNNING trial(s) of study %s FAIL; re-running the stage resumes "
                            "them and records their outcome as new trials", name, n, study)
        raise
    store.localize(name)             # a remote experiment's files, copied to storage/name for the callers
    errors = {r.path: r.error for r in grid}
    unfinished = [t for t in _unfinished(grid)
                  if not (t.status == "ERROR" and _allowed(t, errors.get(t.path), allow_errors))]
    if unfinished:
        retries = f" (after {cfg.max_failures} retr{'y' if cfg.max_failures == 1 else 'ies'} from its checkpoint)"
        raise RuntimeError(f"sweep {name}: {len(unfinished)} of {len(grid)} trial(s) did not finish"
                           + (retries if cfg.max_failures and any(t.status == "ERROR" for t in unfinished) else "")
                           + ": " + "; ".join(f"{t.trial_id} ({t.status}) {t.config}{_reason(t)}" for t in unfinished))
    trials = []
    for r in grid:
        trials.append({"config": dict(r.config or {}), "metrics": dict(r.metrics or {}),
                       "error": repr(r.error) if r.error else "", "path": store.local_path(name, r.path),
                       "checkpoint": store.local_path(name, r.checkpoint.path) if r.checkpoint is not None
                       else None})
    no_report = [t for t in trials if not t["error"] and cfg.metric not in t["metrics"]]
    if no_report:
        raise RuntimeError(f"sweep {name}: {len(no_report)} trial(s) ended without reporting {cfg.metric!r}: "
                           + "; ".join(f"{t['path']} {t['config']}" for t in no_report))
    ok = [r for r in grid if not r.error and r.metrics and cfg.metric in r.metrics]
    if not ok:
        errors = "; ".join(t["error"] for t in trials if t["error"]) or "no trial reported the metric"
        raise RuntimeError(f"sweep {name}: every trial failed ({errors})")
    best = grid.get_best_result(metric=cfg.metric, mode=cfg.mode, filter_nan_and_inf=True)
    ckpt = Path(store.local_path(name, best.checkpoint.path)) if best.checkpoint is not None else None
    return SweepResult(best_config=dict(best.config), best_metrics=dict(best.metrics), best_checkpoint=ckpt,
                       trials=trials, study=study)
