"""The tuning spine: one trial runner for every study that tunes a model inside a Ray trial
(``search_aware``, ``normalisation`` and ``scaling``'s tuning of its methods), and one grid launcher.

A study runs as Ray Tune grids (:func:`run_grid`: one trial per element, seen by the trial as
``config["run"]``, children of an MLflow run ``sweep/<name>``). Inside a trial,
:func:`tune_in_trial` runs a seeded Optuna study on dev: each Optuna trial suggests values for the
trial's space (dotted params keys, the dialect of every sweep: :mod:`flows.search_space`), the
caller's ``train`` trains with params carrying those values and returns its dev score and what to
keep; every epoch is reported to Ray Tune (``optuna_trial``, ``epoch``, ``dev_score``,
``train_loss``, ``best_dev_score`` over the trial so far). The best training is returned for the
caller to decode and record with ``flows.ray_runtime.report_final``. An empty space is one training
with the settings as written. A suggested setting whose training did not learn
(:class:`components.training.guard.DidNotLearn`) is a failed Optuna trial, kept in ``Tuned.trials``
with the guard's message; the study goes on, and fails only when no setting learned: tuning on dev
is where settings that do not learn are discarded, and the model kept has passed the guard.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from components.config import ResourcesConfig
from components.seeds import seed_for
from components.training.guard import DidNotLearn
from flows.ray_runtime import epoch_bar
from flows.search_space import distinct_trials, finite_settings, setting_key, space_size, suggest
from flows.stages.common import StageContext
from flows.sweeps import SweepConfig, run_sweep

EPOCH_KEYS = ("epoch", "dev_score", "train_loss")     # what an epoch record may carry to Ray Tune
MAX_REDRAWS = 50            # repeated suggestions in a row before the next untried setting is enqueued

Report = Callable[[dict[str, Any]], None]              # report(epoch record with epoch, dev_score[, train_loss])
OnBatch = Callable[[int, int, float], None]
Train = Callable[[dict[str, Any], Report, OnBatch], "tuple[float, Any]"]


@dataclass
class Tuned:
    """The best training of a trial's Optuna study."""
    score: float                        # its dev score (what Optuna maximised)
    values: dict[str, Any]              # the values it was trained with (dotted params key -> value)
    kept: Any                           # what ``train`` returned to keep (weights, fit state, objective ...)
    trials: list[dict[str, Any]] = field(default_factory=list)   # every training: {values, dev_score[, did_not_learn]}
    seconds: float = 0.0                # the whole study's wall time


def tune_in_trial(label: str, space: dict[str, dict[str, Any]], trials: int, seed: int, train: Train) -> Tuned:
    """Inside a Ray trial: ``trials`` trainings (one if ``space`` is empty) of distinct settings
    suggested by a ``TPESampler(seed=seed)``; ``train(values, report, on_batch) -> (dev score, kept)``.

    Distinct: a suggestion equal to a setting already trained is told the earlier outcome and
    drawn again (Optuna's samplers draw with replacement, and its first draws are random: two
    trials over three learning rates were the same training about a third of the time, so the
    study tuned nothing; a Ray-level sweep draws without replacement instead:
    :func:`flows.search_space.sweep_sampler`). A finite space with fewer settings than ``trials`` is
    tried in full (:func:`flows.search_space.distinct_trials`); after ``MAX_REDRAWS`` repeats in a
    row the next untried setting in the space's order (:func:`flows.search_space.finite_settings`)
    is enqueued."""
    import optuna
    from ray import tune

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    n = distinct_trials(space, trials)
    if n < trials and space:
        logging.getLogger(__name__).info("%s: the space holds %d settings: %d trainings, not %d", label, n, n, trials)
    best: Tuned | None = None
    history: list[dict[str, Any]] = []
    tried: dict[str, float | None] = {}          # setting -> its dev score (None: did not learn)
    t0 = time.perf_counter()
    for i in range(n):
        redraws = 0
        while True:
            ot = study.ask()
            values = suggest(ot, space)
            key = setting_key(values)
            if key not in tried:
                break
            if tried[key] is None:
                study.tell(ot, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(ot, tried[key])
            redraws += 1
            if redraws >= MAX_REDRAWS:
                if space_size(space) is None:      # a continuous draw repeated 50 times: not a sampler
                    raise RuntimeError(f"{label}: the sampler suggested settings already trained "
                                       f"{redraws} times in a row (space {space})")
                study.enqueue_trial(next(s for s in finite_settings(space) if setting_key(s) not in tried))
        before = best.score if best is not None else -math.inf
        seen = {"dev": -math.inf}

        def report(record: dict[str, Any], i: int = i, before: float = before) -> None:
            seen["dev"] = max(seen["dev"], float(record["dev_score"]))
            tune.report({"optuna_trial": float(i), **{k: float(record[k]) for k in EPOCH_KEYS if k in record},
                         "best_dev_score": max(before, seen["dev"])})

        try:
            score, kept = train(values, report, epoch_bar(f"{label} ({i + 1}/{n})"))
        except DidNotLearn as e:
            if n == 1:
                raise
            study.tell(ot, state=optuna.trial.TrialState.FAIL)
            tried[key] = None
            history.append({"values": values, "dev_score": None, "did_not_learn": str(e)})
            logging.getLogger(__name__).warning("%s: setting %d/%d %s discarded: %s", label, i + 1, n, values, e)
            continue
        study.tell(ot, score)
        tried[key] = score
        history.append({"values": values, "dev_score": score})
        if best is None or score > best.score:
            best = Tuned(score=score, values=values, kept=kept)
    if best is None:
        raise DidNotLearn(f"{label}: none of the {n} settings tuned on dev learned: "
                          + "; ".join(f"{h['values']}: {h['did_not_learn']}" for h in history))
    best.trials, best.seconds = history, time.perf_counter() - t0
    return best


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
        res = run_sweep(trainable, name=f"{ctx.stage}-{name}", cfg=sweep_cfg, params=params,
                        seed=seed_for(ctx.base.seed, ctx.stage, name, "grid"),
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.ray_storage,
                        tags={"stage": ctx.stage}, grid=grid)
    failed = [t for t in res.trials if t["error"] or "best_dev_score" not in t["metrics"]]
    if failed:
        raise RuntimeError(f"{ctx.stage} {name}: {len(failed)} trial(s) did not finish: "
                           + "; ".join(f"{t['config'].get('run')}: {t['error'] or 'no final report'}" for t in failed))
    return [{"run": t["config"]["run"], "metrics": t["metrics"], "checkpoint": t.get("checkpoint")} for t in res.trials]
