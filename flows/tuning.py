"""Studies whose variants run as one Ray Tune grid with a seeded Optuna study inside each trial
(the ``search_aware`` and ``normalisation`` stages): the space checks done before Ray starts, the
objective config a suggestion gives, the suggestion itself, and the grid run with its MLflow
parent run."""
from __future__ import annotations

import json
from typing import Any, Callable

from components.config import ConfigError, ResourcesConfig
from components.training.registry import OBJECTIVES
from flows.stages.common import StageContext
from flows.sweeps import SweepConfig, run_sweep, space_values

SPACE_TYPES = ("choice", "loguniform", "uniform")     # what ``suggest`` draws


def check_space(space: dict[str, Any], where: str,
                check_config: Callable[[dict[str, Any], str], Any] | None = None) -> None:
    """Keys are ``lr`` or, when ``check_config`` is given, ``config.<dotted key>`` of the objective's
    config; every value (a choice's values, a range's bounds) is checked: learning rates > 0, config
    values through ``check_config({key: value}, where)`` (the strict objective config)."""
    for key, spec in space.items():
        if key != "lr" and not (key.startswith("config.") and check_config is not None):
            raise ConfigError(f"{where}: key {key!r} must be 'lr'" + (" or 'config.<key>'" if check_config else ""))
        values = space_values(spec, f"{where}.{key}", SPACE_TYPES)
        if key == "lr":
            if any(float(v) <= 0 for v in values):
                raise ConfigError(f"{where}.lr: learning rates must be > 0, got {values}")
        else:
            for value in values:
                check_config({key: value}, f"{where}.{key}")


def objective_config(objective: str, base: dict[str, Any], values: dict[str, Any], where: str) -> Any:
    """``objective``'s config (strict): ``base`` with the ``config.``-prefixed ``values`` applied."""
    cfg = json.loads(json.dumps(base))
    for key, value in values.items():
        if not key.startswith("config."):
            continue
        cur = cfg
        parts = key.split(".")[1:]
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
    return OBJECTIVES.config(objective, cfg, where=where)


def suggest(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One Optuna suggestion over ``space`` (checked by :func:`check_space`)."""
    out = {}
    for key, spec in space.items():
        if spec["type"] == "choice":
            out[key] = trial.suggest_categorical(key, list(spec["values"]))
        else:
            out[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), log=spec["type"] == "loguniform")
    return out


def run_grid(ctx: StageContext, params: dict[str, Any], trial: Callable[..., None], name: str,
             grid: list[dict[str, Any]], *, max_concurrent: int, resources: ResourcesConfig) -> list[dict[str, Any]]:
    """Every element of ``grid`` one trial of ``trial(config, params=, root=)`` (reading
    ``config["run"]``), children of an MLflow run ``sweep/<name>`` -> [{run, metrics, checkpoint}];
    a trial that failed or left no final report fails the stage, naming it."""
    from ray import tune
    trainable = tune.with_parameters(trial, params=params, root=str(ctx.root))
    sweep_cfg = SweepConfig(num_samples=1, max_concurrent=max_concurrent, metric="best_dev_score", mode="max",
                            resources=resources, max_failures=0)
    with ctx.tracker.start_run(f"sweep/{name}", parent_run_id=ctx.run_id, tags={"stage": ctx.stage}) as parent:
        res = run_sweep(trainable, name=f"{ctx.stage}-{name}", cfg=sweep_cfg, params=params, seed=ctx.base.seed,
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.ray_storage,
                        tags={"stage": ctx.stage}, grid=grid)
    failed = [t for t in res.trials if t["error"] or "best_dev_score" not in t["metrics"]]
    if failed:
        raise RuntimeError(f"{ctx.stage} {name}: {len(failed)} trial(s) did not finish: "
                           + "; ".join(f"{t['config'].get('run')}: {t['error'] or 'no final report'}" for t in failed))
    return [{"run": t["config"]["run"], "metrics": t["metrics"], "checkpoint": t.get("checkpoint")} for t in res.trials]
