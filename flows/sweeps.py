"""Sweeps: Ray Tune ``Tuner`` + seeded ``OptunaSearch`` behind a concurrency limit.

A search space names dotted ``params.yaml`` keys (``train.optim.lr``), so a trial's config and
``dvc exp run -S train.optim.lr=...`` speak the same names; each trial applies its values onto
the full params dict and loads its sections strictly. Trials are logged by Ray's
``MLflowLoggerCallback`` as child runs of the sweep's parent run (tag ``mlflow.parentRunId``),
with the trial folder (learning curve, checkpoint) saved as artifacts. Per-trial resources come
from params (``gpu: auto`` gives each trial one GPU when the driver sees CUDA), failed trials are
retried from their last checkpoint (``FailureConfig``), and the best trial's checkpoint is copied
to a DVC-tracked folder by the caller.

A sweep is used only when every trial finished with its final report: an interrupted sweep
raises ``StageInterrupted`` (``flows.lifecycle``), one with unfinished or failed trials raises
naming them. Its experiment folder is kept with a fingerprint of the sweep's settings; running the
same sweep again resumes it (``Tuner.restore``: finished trials are kept, unfinished and failed ones
continue from their last checkpoint), while a folder left by other settings is removed.

Optuna studies are persistent. An Optuna-driven sweep (a params space, not a ``grid``) keeps its
study in an RDB storage: the SQLite file ``optuna.db`` beside the MLflow store (``store_root`` of
the project root: the main repository also for DVC's temporary experiment workspaces), or the
storage URL in ``APPROXINFER_OPTUNA_STORAGE`` (e.g. ``postgresql://...`` on a cluster). The study is
``<sweep name>-<settings>`` (e.g. ``train-pos-3fa1b2c4``): the sweep's name (stage, task, variant)
and the first 8 hex digits of the fingerprint of its settings (sweep config, params, seed), so
sweeps of other settings — e.g. queued DVC experiments running at once — never share a study.
Determinism: a sweep that starts fresh deletes a study of its name left by an earlier run (that
run's trials stay in MLflow) and starts it anew, so a seeded sampler sees no trials of an earlier
run and a re-run gives the same suggestions; a resumed sweep (``Tuner.restore``) continues its
study — the searcher restored from Ray's state holds the same storage (``RDBStorage`` pickles as
its URL) and study. Each Optuna trial records its Ray trial id (user attribute ``ray_trial_id``)
and its MLflow run id (``mlflow_run_id``); the trial's MLflow run is tagged ``optuna_study`` and
``optuna_trial_number``, and the sweep's parent run ``optuna_study``. Only the driver writes the
storage; a SQLite file is created (schema included) under an exclusive lock ``optuna.db.lock``, so
stages starting together in several processes do not race, and waits up to a minute for a writer.
``make dashboard`` serves the storage with optuna-dashboard; ``python -m flows.study`` drives a
study of a task sweep stage without Ray.

Ray starts locally (token auth off, no dashboard) unless ``RAY_ADDRESS`` names a cluster.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from components.config import ConfigError, ResourcesConfig, check_range, get_dotted, set_dotted
from components.tracking import Tracker
from components.tracking.base import store_root
from flows import progress
from flows.lifecycle import RAY_DIR, tune_running

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


def init_ray(num_cpus: int | None = None) -> None:
    import ray
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    progress.export_mode()           # the workers draw per-epoch bars only if the driver does
    # per-epoch checkpoints of small models are cheap; the snapshot-frequency warning is noise here
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    address = os.environ.get("RAY_ADDRESS")
    env = {"worker_process_setup_hook": "flows.sweeps.quiet_worker"}
    if address:
        ray.init(address=address, log_to_driver=True, runtime_env=env)
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True,
                 configure_logging=True, logging_level="WARNING", runtime_env=env)


def quiet_worker() -> None:
    """Ray worker setup: no INFO line per saved checkpoint (one per epoch of every trial)."""
    for name in ("ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)


def trial_lines(name: str, total: int) -> Any:
    """A Ray Tune callback printing one line per finished or failed trial (``flows.progress``),
    for logs, where Tune's status tables and per-epoch bars are switched off."""
    from ray import tune

    class _TrialLines(tune.Callback):
        def __init__(self):
            self.done = 0

        def _line(self, trials: list[Any], trial: Any, what: str) -> None:
            self.done += 1
            r = trial.last_result or {}
            shown = {k: r[k] for k in ("best_dev_score", "nll", "loss") if isinstance(r.get(k), (int, float))}
            note = ", ".join(f"{k}={v:.4g}" for k, v in shown.items())
            progress.line(f"sweep {name}: {self.done}/{total} trials done, {trial.trial_id} {what}"
                          f" after {r.get('time_total_s', 0.0):.0f} s" + (f" ({note})" if note else ""))

        def on_trial_complete(self, iteration, trials, trial, **info):
            self._line(trials, trial, "finished")

        def on_trial_error(self, iteration, trials, trial, **info):
            self._line(trials, trial, "FAILED")

    return _TrialLines()


def build_space(space: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """params-declared space -> Ray Tune distributions. Every key must exist in params."""
    from ray import tune
    out = {}
    for key, spec in space.items():
        get_dotted(params, key)     # a typo in a sweep key is an error, not a no-op
        kind = spec.get("type")
        try:
            if kind == "loguniform":
                out[key] = tune.loguniform(float(spec["low"]), float(spec["high"]))
            elif kind == "uniform":
                out[key] = tune.uniform(float(spec["low"]), float(spec["high"]))
            elif kind == "randint":
                out[key] = tune.randint(int(spec["low"]), int(spec["high"]))
            elif kind == "choice":
                out[key] = tune.choice(list(spec["values"]))
            else:
                raise ConfigError(f"sweep space {key!r}: type {kind!r} is not one of loguniform, uniform, randint, choice")
        except KeyError as e:
            raise ConfigError(f"sweep space {key!r}: missing {e.args[0]!r} for type {kind!r}") from e
    return out


SPACE_TYPES = ("choice", "loguniform", "uniform", "randint")


def space_values(spec: Any, where: str, types: tuple[str, ...] = SPACE_TYPES) -> list[Any]:
    """The values of one space entry to check: a choice's values, a range's two bounds (a
    ``randint``'s upper bound is exclusive, so its largest value is ``high - 1``)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in types:
        raise ConfigError(f"{where}: type {kind!r} is not one of {', '.join(types)}")
    if kind == "choice":
        if not spec.get("values"):
            raise ConfigError(f"{where}: choice needs a non-empty 'values'")
        return list(spec["values"])
    cast = int if kind == "randint" else float
    try:
        low, high = cast(spec["low"]), cast(spec["high"])
    except KeyError as e:
        raise ConfigError(f"{where}: {kind} needs {e.args[0]!r}") from None
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {kind} bounds must be numbers, got {spec}") from None
    if not low < high or (kind == "loguniform" and low <= 0):
        raise ConfigError(f"{where}: need 0 < low < high for loguniform, low < high otherwise; got {spec}")
    return [low, high - 1] if kind == "randint" else [low, high]


def check_sweep_space(space: dict[str, Any], params: dict[str, Any], section: str,
                      load: Callable[[dict[str, Any]], Any]) -> None:
    """Before Ray starts: every key of ``<section>.sweep.space`` is a setting (a leaf) of the
    stage's own section, and every value the sweep can give it (a choice's values, a range's
    bounds) passes the section's strict config, ``load(params with that value)``."""
    where = f"{section}.sweep.space"
    for key, spec in space.items():
        if not key.startswith(f"{section}."):
            raise ConfigError(f"{where}: key {key!r} is not a setting of the '{section}' section; "
                              f"a sweep varies only its own stage's settings")
        current = get_dotted(params, key)
        if isinstance(current, dict):
            raise ConfigError(f"{where}: key {key!r} is a section, not a setting")
        for value in space_values(spec, f"{where}.{key}"):
            try:
                load(set_dotted(params, key, value))
            except ConfigError as e:
                raise ConfigError(f"{where}.{key}: the value {value!r} is not valid: {e}") from None


def check_metric(cfg: SweepConfig, reported: tuple[str, ...], where: str) -> None:
    """``cfg.metric`` must be one the trainable reports."""
    if cfg.metric not in reported:
        raise ConfigError(f"{where}.metric: {cfg.metric!r} is not reported by this stage's trials; "
                          f"choose one of {list(reported)}")


def trial_resources(res: ResourcesConfig) -> dict[str, float]:
    gpu = res.gpu
    if gpu == "auto":
        import torch
        gpu = 1.0 if torch.cuda.is_available() else 0.0
    elif isinstance(gpu, str):
        raise ConfigError(f"sweep.resources.gpu: expected a number or 'auto', got {gpu!r}")
    return {"cpu": float(res.cpu), "gpu": float(gpu)}


@dataclass
class SweepResult:
    best_config: dict[str, Any]
    best_metrics: dict[str, Any]
    best_checkpoint: Path | None
    trials: list[dict[str, Any]]          # one row per trial: config, final metrics, error, path, checkpoint
    study: str | None = None              # the Optuna study's name (an Optuna-driven sweep)


# --- persistent Optuna studies (see the module docstring) ---------------------------------------

STUDY_STORAGE_ENV = "APPROXINFER_OPTUNA_STORAGE"
STUDY_DB = "optuna.db"
RAY_TRIAL_ATTR = "ray_trial_id"            # Optuna trial user attribute: the Ray trial it ran as
MLFLOW_RUN_ATTR = "mlflow_run_id"          # Optuna trial user attribute: the trial's MLflow run
STUDY_TAG = "optuna_study"                 # MLflow tag: the study of a trial run / a sweep's parent run
TRIAL_NUMBER_TAG = "optuna_trial_number"   # MLflow tag: the trial's number in its study


def study_storage_url(root: str | Path = ".") -> str:
    """``APPROXINFER_OPTUNA_STORAGE`` if set, else ``sqlite:///<store_root(root)>/optuna.db``
    (beside the embedded MLflow store)."""
    env = os.environ.get(STUDY_STORAGE_ENV, "").strip()
    return env or f"sqlite:///{store_root(root) / STUDY_DB}"


def shown_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        import sqlalchemy
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


@contextlib.contextmanager
def _sqlite_lock(url: str) -> Iterator[None]:
    """An exclusive lock ``<db>.lock`` beside a ``sqlite:///`` file for the block; nothing for a server."""
    if not url.startswith("sqlite:///"):
        yield
        return
    db = Path(url[len("sqlite:///"):])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def open_study_storage(url: str) -> Any:
    """An ``optuna.storages.RDBStorage`` at ``url`` (schema created if new, under the SQLite lock)."""
    import optuna
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {}   # wait for a writer
    source = STUDY_STORAGE_ENV if os.environ.get(STUDY_STORAGE_ENV, "").strip() else "the default"
    try:
        with _sqlite_lock(url):
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as e:
        raise ConfigError(f"Optuna storage {shown_url(url)!r} ({source}; set {STUDY_STORAGE_ENV} to another "
                          f"database URL): cannot open it: {type(e).__name__}: {e}") from e


def study_name(name: str, settings: str) -> str:
    """A pipeline sweep's study: ``<sweep name>-<first 8 hex digits of its settings' fingerprint>``."""
    return f"{name}-{settings[:8]}"


def restart_study(storage: Any, name: str) -> None:
    """Delete the study ``name`` if ``storage`` holds one (a fresh sweep starts it anew)."""
    try:
        storage.delete_study(storage.get_study_id_from_name(name))
    except KeyError:                 # no such study
        return
    log.info("study %s: deleted the earlier run's study of that name (its trials stay in MLflow)", name)


def optuna_distributions(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A params-declared space -> Optuna distributions, as ``OptunaSearch`` converts
    ``build_space``'s (a ``randint``'s ``high`` is exclusive), for a driver without Ray."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    out: dict[str, Any] = {}
    for key, spec in space.items():
        values = space_values(spec, f"sweep space {key!r}")
        kind = spec["type"]
        if kind == "choice":
            out[key] = CategoricalDistribution(values)
        elif kind == "randint":
            out[key] = IntDistribution(values[0], values[1])
        else:
            out[key] = FloatDistribution(values[0], values[1], log=kind == "loguniform")
    return out


def trial_number(storage: Any, study: str, ray_trial_id: str) -> int | None:
    """The number, in ``study``, of the Optuna trial suggested for Ray trial ``ray_trial_id``."""
    study_id = storage.get_study_id_from_name(study)
    for t in storage.get_all_trials(study_id, deepcopy=False):
        if t.user_attrs.get(RAY_TRIAL_ATTR) == ray_trial_id:
            return t.number
    return None


def set_trial_attr(storage: Any, study: str, number: int, key: str, value: Any) -> None:
    """Set user attribute ``key`` of trial ``number`` of ``study``."""
    study_id = storage.get_study_id_from_name(study)
    storage.set_trial_user_attr(storage.get_trial_id_from_study_id_trial_number(study_id, number), key, value)


def _study_searcher(*, metric: str, mode: str, seed: int, study: str, storage: Any) -> Any:
    """A seeded ``OptunaSearch`` over the RDB ``storage``'s study ``study`` that records each Ray
    trial id on its Optuna trial (user attribute ``ray_trial_id``), so the trial's MLflow run can be
    tagged with its trial number — also after a resume, when the mapping lives only in the storage.
    (Ray pickles the searcher with cloudpickle, which carries this class by value.)"""
    from ray.tune.search.optuna import OptunaSearch

    class StudySearch(OptunaSearch):
        def suggest(self, trial_id: str) -> dict | None:
            config = super().suggest(trial_id)
            ot_trial = self._ot_trials.get(trial_id)     # OptunaSearch's Ray trial id -> Optuna trial
            if config is not None and ot_trial is not None:
                ot_trial.set_user_attr(RAY_TRIAL_ATTR, trial_id)
            return config

    return StudySearch(metric=metric, mode=mode, seed=seed, study_name=study, storage=storage)


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


def _resumable(exp: Path, fingerprint: str, name: str) -> bool:
    """Whether ``exp`` holds an interrupted run of the same sweep that Tune can restore; a folder
    left by other settings (or one that cannot be restored) is removed."""
    from ray import tune
    stamp = exp.with_name(exp.name + ".fingerprint")
    if exp.exists():
        same = stamp.exists() and stamp.read_text() == fingerprint
        if same and tune.Tuner.can_restore(str(exp)):
            return True
        log.warning("sweep %s: removing %s, left by an earlier run %s", name, exp,
                    "with other settings" if not same else "that cannot be resumed")
        shutil.rmtree(exp)
    return False


def _tuner(trainable: Any, *, exp: Path, fingerprint: str, resume: bool, space: dict[str, Any],
           tune_config: Callable[[], Any], run_config: Any, name: str) -> Any:
    """A new ``Tuner`` (``tune_config()`` called only then), or the restored one of an interrupted run
    of the same sweep in ``exp`` (``resume``, from :func:`_resumable`)."""
    from ray import tune
    if resume:
        log.warning("sweep %s: resuming the earlier run in %s (finished trials are kept, unfinished ones "
                    "continue from their checkpoints)", name, exp)
        tuner = tune.Tuner.restore(str(exp), trainable=trainable, resume_unfinished=True, resume_errored=True)
        # the pickled callbacks would log to the interrupted run's (closed) parent runs: use this run's
        tuner._local_tuner.get_run_config().callbacks = run_config.callbacks
        return tuner
    stamp = exp.with_name(exp.name + ".fingerprint")
    exp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(fingerprint)
    os.replace(tmp, stamp)
    return tune.Tuner(trainable, param_space=space, tune_config=tune_config(), run_config=run_config)


def run_sweep(trainable: Callable[[dict[str, Any]], None], *, name: str, cfg: SweepConfig,
              params: dict[str, Any], seed: int, tracker: Tracker, parent_run_id: str,
              storage: Path, tags: dict[str, str] | None = None,
              grid: list[dict[str, Any]] | None = None,
              trial_tags: Callable[[dict[str, Any]], dict[str, str]] | None = None,
              allow_errors: bool = False, reuse_actors: bool = True) -> SweepResult:
    """Run ``trainable`` (a Tune function trainable taking the dotted-key config) over the space.

    ``grid``: instead of the params space, one trial per element (a dict, seen by the trial as
    ``config["run"]`` and logged to MLflow as ``run/<key>`` params) — a design such as
    task x objective x procedure x fold x seed, run exhaustively (Tune's ``grid_search``).
    ``trial_tags(config)``: MLflow tags of one trial, over ``tags`` — e.g. a grid element's own
    ``mlflow.parentRunId`` when one grid runs the trials of several parent runs.
    ``storage``: the stage's Ray results folder; the sweep's experiment is ``storage/name``.
    A params space (no ``grid``) is searched by Optuna in the persistent study
    ``study_name(name, <settings>)`` (module docstring), returned as ``SweepResult.study``; the
    tracker's innermost open run — the sweep's parent run, inside which every caller runs its
    sweep — is tagged with it.
    Every trial must finish (``StageInterrupted`` after a signal; ``RuntimeError`` naming the trials
    otherwise), except that with ``allow_errors`` trials that raised are returned with their error
    for the caller to report.
    """
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.tune.search import ConcurrencyLimiter

    if cfg.num_samples < 1:
        raise ConfigError(f"sweep.num_samples must be >= 1, got {cfg.num_samples}")
    init_ray()
    tracker.ensure_experiment()      # create the experiment before parallel trials race on SQLite
    exp = Path(storage).resolve() / name
    fingerprint = _fingerprint(name=name, cfg=cfg, grid=grid, params=params, seed=seed)
    study = study_storage = None
    if grid is not None:
        if not grid:
            raise ConfigError(f"sweep {name}: the grid is empty")
        space = {"run": tune.grid_search(list(grid))}
    else:
        space = build_space(cfg.space, params)
        if space:                    # Optuna-driven: a persistent study
            url = study_storage_url(_stage_root(storage))
            study_storage, study = open_study_storage(url), study_name(name, fingerprint)
            # another storage is another sweep: a resume must not continue a study elsewhere
            fingerprint = _fingerprint(settings=fingerprint, study_storage=url)
    resume = _resumable(exp, fingerprint, name)
    if study is not None:
        if not resume:               # fresh: no trial of an earlier run may steer the seeded sampler
            restart_study(study_storage, study)
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

    callbacks: list[Any] = [] if progress.interactive() else [trial_lines(name, cfg.num_samples if grid is None
                                                                             else len(grid))]
    if tracker.tracking_uri:         # the null tracker logs nowhere
        from components.tracking.mlflow_tracker import RunMetrics
        batch = RunMetrics(tracker.tracking_uri)
        callbacks.append(_TrialLogger(
            tracking_uri=tracker.tracking_uri, experiment_name=tracker.experiment_name,
            tags={"mlflow.parentRunId": parent_run_id, "sweep": name, **tracker.run_tags(), **(tags or {})},
            save_artifact=True))

    def tune_config() -> Any:      # a fresh run's only: its searcher creates the study
        searcher = None if study is None else ConcurrencyLimiter(
            _study_searcher(metric=cfg.metric, mode=cfg.mode, seed=seed, study=study, storage=study_storage),
            max_concurrent=cfg.max_concurrent)
        return tune.TuneConfig(search_alg=searcher, num_samples=cfg.num_samples if searcher else 1,
                               metric=cfg.metric, mode=cfg.mode,
                               # a searcher has its own ConcurrencyLimiter
                               max_concurrent_trials=None if searcher else cfg.max_concurrent,
                               # a finished trial's process (imports, caches) runs the next one; such a trial
                               # must leave its files in its checkpoint (report_final), not its trial folder
                               reuse_actors=reuse_actors)

    tuner = _tuner(
        tune.with_resources(trainable, trial_resources(cfg.resources)),
        exp=exp, name=name, space=space, fingerprint=fingerprint, resume=resume, tune_config=tune_config,
        run_config=tune.RunConfig(
            name=name, storage_path=str(Path(storage).resolve()), callbacks=callbacks,
            verbose=1 if progress.interactive() else 0,    # a log gets one line per trial (_TrialLines)
            failure_config=tune.FailureConfig(max_failures=cfg.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1)))
    with tune_running():             # a signal during fit stops Tune, then raises StageInterrupted here
        grid = tuner.fit()
    unfinished = [t for t in _unfinished(grid) if not (allow_errors and t.status == "ERROR")]
    if unfinished:
        raise RuntimeError(f"sweep {name}: {len(unfinished)} of {len(grid)} trial(s) did not finish: "
                           + "; ".join(f"{t.trial_id} ({t.status}) {t.config}" for t in unfinished))
    trials = []
    for r in grid:
        trials.append({"config": dict(r.config or {}), "metrics": dict(r.metrics or {}),
                       "error": repr(r.error) if r.error else "", "path": r.path,
                       "checkpoint": r.checkpoint.path if r.checkpoint is not None else None})
    no_report = [t for t in trials if not t["error"] and cfg.metric not in t["metrics"]]
    if no_report:
        raise RuntimeError(f"sweep {name}: {len(no_report)} trial(s) ended without reporting {cfg.metric!r}: "
                           + "; ".join(f"{t['path']} {t['config']}" for t in no_report))
    ok = [r for r in grid if not r.error and r.metrics and cfg.metric in r.metrics]
    if not ok:
        errors = "; ".join(t["error"] for t in trials if t["error"]) or "no trial reported the metric"
        raise RuntimeError(f"sweep {name}: every trial failed ({errors})")
    best = grid.get_best_result(metric=cfg.metric, mode=cfg.mode, filter_nan_and_inf=True)
    ckpt = Path(best.checkpoint.path) if best.checkpoint is not None else None
    return SweepResult(best_config=dict(best.config), best_metrics=dict(best.metrics), best_checkpoint=ckpt,
                       trials=trials, study=study)


def shutdown_ray() -> None:
    """End the local Ray session (its workers) if this process started one."""
    import sys
    if "ray" in sys.modules:
        import ray
        if ray.is_initialized():
            ray.shutdown()


def first_suggestion(cfg: SweepConfig, params: dict[str, Any], seed: int) -> dict[str, Any]:
    """The config of the one trial of ``run_sweep(cfg=cfg, seed=seed)`` with ``cfg.num_samples == 1``.

    That trial gets the first suggestion of a fresh ``OptunaSearch(seed=seed)`` (a seeded
    ``TPESampler``; its first draw is a seeded random one) over ``build_space(cfg.space)``; the
    same searcher is asked here, in the driver, so that many such one-trial sweeps can run as one
    grid with the values they had. An empty space gives ``{}`` (no searcher, as in ``run_sweep``).
    """
    import optuna
    from ray.tune.search.optuna import OptunaSearch
    space = build_space(cfg.space, params)
    if not space:
        return {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)     # no "new study created in memory" line per call
    searcher = OptunaSearch(metric=cfg.metric, mode=cfg.mode, seed=seed)
    searcher.set_search_properties(cfg.metric, cfg.mode, space)     # as the Tuner does with param_space
    return searcher.suggest("first")


def report_final(metrics: dict[str, Any], files: dict[str, str]) -> None:
    """A trial's last ``tune.report``, with ``files`` (name -> text) in its checkpoint: a stage reads
    them back from ``SweepResult.trials[i]["checkpoint"]``, never from the trial folder (a file a
    reused actor writes there does not survive)."""
    import tempfile
    from ray import tune
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            (Path(d) / name).write_text(text)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def epoch_bar(label: str) -> Callable[[int, int, float], None]:
    """An ``on_batch(i, n, loss)`` callback drawing one ``tqdm_ray`` bar per epoch (in a trial) on
    a terminal; nothing when the driver's output is a log (``flows.progress``: the sweep prints one
    line per finished trial instead)."""
    from ray.experimental.tqdm_ray import tqdm
    bar: dict[str, Any] = {}
    if not progress.interactive():
        return lambda i, n, loss: None

    def on_batch(i: int, n: int, loss: float) -> None:
        if i == 1:
            bar["tqdm"] = tqdm(total=n, desc=f"{label} epoch")
        bar["tqdm"].update(1)
        if i == n:
            bar["tqdm"].close()
    return on_batch


def copy_checkpoint(src: Path, dest: Path) -> None:
    """Replace ``dest`` by a copy of the checkpoint folder ``src`` (copy, then rename)."""
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
