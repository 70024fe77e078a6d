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

Ray starts locally (token auth off, no dashboard) unless ``RAY_ADDRESS`` names a cluster.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from components.config import ConfigError, ResourcesConfig, check_range, get_dotted, set_dotted
from components.tracking import Tracker
from flows.lifecycle import tune_running

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
    # per-epoch checkpoints of small models are cheap; the snapshot-frequency warning is noise here
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True,
                 configure_logging=True, logging_level="WARNING")


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


def _fingerprint(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _unfinished(grid: Any) -> list[Any]:
    """The trials of a ``ResultGrid`` that did not end TERMINATED (errored, stopped, never started)."""
    return [t for t in grid._experiment_analysis.trials if t.status != "TERMINATED"]    # Ray keeps the Trial list here


def _tuner(trainable: Any, *, exp: Path, fingerprint: str, space: dict[str, Any], tune_config: Any,
           run_config: Any, name: str) -> Any:
    """A new ``Tuner``, or the restored one of an interrupted run of the same sweep in ``exp``."""
    from ray import tune
    stamp = exp.with_name(exp.name + ".fingerprint")
    if exp.exists():
        same = stamp.exists() and stamp.read_text() == fingerprint
        if same and tune.Tuner.can_restore(str(exp)):
            log.warning("sweep %s: resuming the earlier run in %s (finished trials are kept, unfinished ones "
                        "continue from their checkpoints)", name, exp)
            tuner = tune.Tuner.restore(str(exp), trainable=trainable, resume_unfinished=True, resume_errored=True)
            # the pickled callbacks would log to the interrupted run's (closed) parent runs: use this run's
            tuner._local_tuner.get_run_config().callbacks = run_config.callbacks
            return tuner
        log.warning("sweep %s: removing %s, left by an earlier run %s", name, exp,
                    "with other settings" if not same else "that cannot be resumed")
        shutil.rmtree(exp)
    exp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(fingerprint)
    os.replace(tmp, stamp)
    return tune.Tuner(trainable, param_space=space, tune_config=tune_config, run_config=run_config)


def run_sweep(trainable: Callable[[dict[str, Any]], None], *, name: str, cfg: SweepConfig,
              params: dict[str, Any], seed: int, tracker: Tracker, parent_run_id: str,
              storage: Path, tags: dict[str, str] | None = None,
              grid: list[dict[str, Any]] | None = None,
              trial_tags: Callable[[dict[str, Any]], dict[str, str]] | None = None,
              allow_errors: bool = False) -> SweepResult:
    """Run ``trainable`` (a Tune function trainable taking the dotted-key config) over the space.

    ``grid``: instead of the params space, one trial per element (a dict, seen by the trial as
    ``config["run"]`` and logged to MLflow as ``run/<key>`` params) — a design such as
    task x objective x procedure x fold x seed, run exhaustively (Tune's ``grid_search``).
    ``trial_tags(config)``: MLflow tags of one trial, over ``tags`` — e.g. a grid element's own
    ``mlflow.parentRunId`` when one grid runs the trials of several parent runs.
    ``storage``: the stage's Ray results folder; the sweep's experiment is ``storage/name``.
    Every trial must finish (``StageInterrupted`` after a signal; ``RuntimeError`` naming the trials
    otherwise), except that with ``allow_errors`` trials that raised are returned with their error
    for the caller to report.
    """
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    if cfg.num_samples < 1:
        raise ConfigError(f"sweep.num_samples must be >= 1, got {cfg.num_samples}")
    init_ray()
    tracker.ensure_experiment()      # create the experiment before parallel trials race on SQLite
    if grid is not None:
        if not grid:
            raise ConfigError(f"sweep {name}: the grid is empty")
        space = {"run": tune.grid_search(list(grid))}
        searcher = None
    else:
        space = build_space(cfg.space, params)
        searcher = ConcurrencyLimiter(OptunaSearch(metric=cfg.metric, mode=cfg.mode, seed=seed),
                                      max_concurrent=cfg.max_concurrent) if space else None
    class _TrialTagged(MLflowLoggerCallback):
        def log_trial_start(self, trial):    # the callback reads self.tags when it creates a trial's run
            shared = self.tags
            self.tags = {**shared, **trial_tags(trial.config)}
            try:
                super().log_trial_start(trial)
            finally:
                self.tags = shared

    callbacks = []
    if tracker.tracking_uri:         # the null tracker logs nowhere
        callbacks.append((MLflowLoggerCallback if trial_tags is None else _TrialTagged)(
            tracking_uri=tracker.tracking_uri, experiment_name=tracker.experiment_name,
            tags={"mlflow.parentRunId": parent_run_id, "sweep": name, **(tags or {})}, save_artifact=True))
    tuner = _tuner(
        tune.with_resources(trainable, trial_resources(cfg.resources)),
        exp=Path(storage).resolve() / name, name=name, space=space,
        fingerprint=_fingerprint(name=name, cfg=cfg, grid=grid, params=params, seed=seed),
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=cfg.num_samples if searcher else 1,
                                    metric=cfg.metric, mode=cfg.mode,
                                    max_concurrent_trials=cfg.max_concurrent),
        run_config=tune.RunConfig(
            name=name, storage_path=str(Path(storage).resolve()), callbacks=callbacks, verbose=1,
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
    return SweepResult(best_config=dict(best.config), best_metrics=dict(best.metrics), best_checkpoint=ckpt, trials=trials)


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
    from ray.tune.search.optuna import OptunaSearch
    space = build_space(cfg.space, params)
    if not space:
        return {}
    searcher = OptunaSearch(metric=cfg.metric, mode=cfg.mode, seed=seed)
    searcher.set_search_properties(cfg.metric, cfg.mode, space)     # as the Tuner does with param_space
    return searcher.suggest("first")


def epoch_bar(label: str) -> Callable[[int, int, float], None]:
    """An ``on_batch(i, n, loss)`` callback drawing one ``tqdm_ray`` bar per epoch (in a trial)."""
    from ray.experimental.tqdm_ray import tqdm
    bar: dict[str, Any] = {}

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
