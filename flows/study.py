"""An Optuna study of a per-task sweep stage, driven by Optuna itself (no Ray):

    python -m flows.study <stage> --trials N [--task TASK[/VARIANT]] [--params params.yaml] [--root .]

For users who work in Optuna directly (``study.ask`` / ``study.tell``, optuna-dashboard). The
stages it drives are those whose module defines a task-sweep ``SPEC``
(:class:`flows.task_sweeps.ModelSpec`: ``train``, ``train_energy``, ``infnets``) and whose
``<stage>.sweep.space`` is not empty; each trial trains one (task, variant) on the prepared data
with the trial's values of that space, exactly as a pipeline trial does
(:func:`flows.task_sweeps.train_one`: early stopping on dev, test metrics of the best-on-dev
weights), and tells the study its ``sweep.metric``. A stage whose sweep runs only through Ray
(``cmlm``) or that has no sweep is refused, naming it.

Logged where the pipeline logs: the study in the same storage (``optuna.db`` beside the MLflow
store, or ``APPROXINFER_OPTUNA_STORAGE``; see :mod:`flows.study_storage`), named after the stage and task
``<stage>-<task>[-<variant>]`` — the pipeline's sweeps add their settings' fingerprint to that stem
and start a study of their own on every fresh run (``-run2``, ... beside the earlier ones), while
this one is the user's: ``--trials N`` adds N
trials to it, resuming it if it exists (its sampler seeded with
:func:`flows.task_sweeps.searcher_seed` of ``base.seed``, the stage, the task and the number of
trials already in the study, so a fresh study's first suggestions are the pipeline's and a resumed
one does not repeat them). MLflow (the project's tracker): a parent run ``study/<study>`` with the
stage's params, and a child run ``trial/<number>`` per trial with its values, per-epoch and final
metrics, tagged ``optuna_study`` / ``optuna_trial_number``; each Optuna trial records its run id
(user attribute ``mlflow_run_id``). One line per trial on stdout. Trained models are not kept (the
pipeline's sweeps produce the DVC outputs).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import pkgutil
import sys
from pathlib import Path
from typing import Any, Callable

from components.config import BaseConfig, ConfigError, flatten, load_params, load_section, set_dotted
from components.tracking import Tracker, make_tracker
from components.training.guard import DidNotLearn
from flows.search_space import check_metric, check_sweep_space
from flows.stages.common import numeric, stage_params, use_plugin_dir
from flows.studies import experiment_name
from flows.study_storage import (MLFLOW_RUN_ATTR, STUDY_TAG, TRIAL_NUMBER_TAG, open_study_storage, optuna_distributions,
                                 shown_url, study_storage_url)
from flows.task_sweeps import REPORTED, ModelSpec, searcher_seed, sweep_name, train_one

log = logging.getLogger(__name__)


def _stage_module(stage: str) -> Any:
    if not stage.isidentifier() or importlib.util.find_spec(f"flows.stages.{stage}") is None:
        raise ConfigError(f"stage {stage!r}: no such stage (flows/stages/{stage}.py)")
    return importlib.import_module(f"flows.stages.{stage}")


def study_stages() -> list[str]:
    """The stages ``flows.study`` drives: those whose module defines a task-sweep ``SPEC``."""
    import flows.stages
    out = []
    for info in pkgutil.iter_modules(flows.stages.__path__):
        if info.name != "common" and isinstance(getattr(_stage_module(info.name), "SPEC", None), ModelSpec):
            out.append(info.name)
    return sorted(out)


def stage_spec(stage: str) -> ModelSpec:
    """``flows.stages.<stage>.SPEC``, or a ConfigError naming the stage."""
    spec = getattr(_stage_module(stage), "SPEC", None)
    if not isinstance(spec, ModelSpec):
        raise ConfigError(f"stage {stage!r} has no Optuna-driven task sweep that flows.study can run without Ray "
                          f"(it drives {', '.join(study_stages())}); run it with `python -m flows.stages.{stage}` "
                          f"or `dvc repro`")
    return spec


def pick_run(spec: ModelSpec, cfg: Any, task: str | None) -> tuple[str, str]:
    """``--task TASK[/VARIANT]`` -> (task, variant) of the stage; may be left out when there is one."""
    runs = [(t, v) for t in cfg.tasks for v in spec.variants(cfg, t)]
    shown = [f"{t}/{v}" if v else t for t, v in runs]
    if task is None:
        if len(runs) == 1:
            return runs[0]
        raise ConfigError(f"{spec.section}: pick one run with --task, one of {shown}")
    name, _, variant = task.partition("/")
    if name not in cfg.tasks:
        raise ConfigError(f"--task {task!r}: {name!r} is not one of {spec.section}.tasks {list(cfg.tasks)}")
    if not variant and len([v for t, v in runs if t == name]) == 1:
        return next(r for r in runs if r[0] == name)
    if (name, variant) not in runs:
        raise ConfigError(f"--task {task!r}: not a run of {spec.section}; one of {shown}")
    return name, variant


def run_study(stage: str, params: dict[str, Any], root: str | Path = ".", *, trials: int, task: str | None = None,
              tracker: Tracker | None = None, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Add ``trials`` trials to the study of ``stage`` (one (task, variant)) -> a summary."""
    if trials < 1:
        raise ConfigError(f"--trials must be >= 1, got {trials}")
    import optuna
    root = Path(root).resolve()
    params = stage_params(params)
    spec = stage_spec(stage)
    if spec.section not in params:
        raise ConfigError(f"params: no '{spec.section}' section (the settings of stage {stage!r})")
    base = load_section(BaseConfig, "base", params)
    use_plugin_dir(root, base)
    cfg = load_section(spec.config, spec.section, params)
    space = cfg.sweep.space
    if not space:
        raise ConfigError(f"{spec.section}.sweep.space is empty: stage {stage!r} has nothing for Optuna to tune")
    check_sweep_space(space, params, spec.section, lambda p: load_section(spec.config, spec.section, p))
    check_metric(cfg.sweep, REPORTED, f"{spec.section}.sweep")
    task_name, variant = pick_run(spec, cfg, task)
    if not (root / base.prepared_dir / task_name / "meta.json").exists():
        raise FileNotFoundError(f"{spec.section}.tasks: task {task_name!r} has not been prepared "
                                f"(run the prepare stage first)")
    if base.threads > 0:
        import torch
        torch.set_num_threads(base.threads)
    distributions = optuna_distributions(space)
    direction = "maximize" if cfg.sweep.mode == "max" else "minimize"

    url = study_storage_url(root)
    storage = open_study_storage(url)
    name = sweep_name(stage, task_name, variant)
    try:
        done = len(storage.get_all_trials(storage.get_study_id_from_name(name), deepcopy=False))
    except KeyError:                 # a new study
        done = 0
    sampler = optuna.samplers.TPESampler(seed=searcher_seed(base.seed, stage, task_name, done))
    study = optuna.create_study(study_name=name, storage=storage, direction=direction, load_if_exists=True,
                                sampler=sampler)
    if study.direction.name.lower() != direction:
        raise ConfigError(f"{spec.section}.sweep.mode: {cfg.sweep.mode!r}, but the study {name!r} in "
                          f"{shown_url(url)} is {study.direction.name.lower()}d; delete it or change the mode")

    tracker = tracker or make_tracker(base.tracker, experiment_name(base.experiment, stage), root)
    tracker.ensure_experiment()
    metric = cfg.sweep.metric
    tags = {STUDY_TAG: name, "study_stage": stage, "study_task": task_name, "study_variant": variant}
    out(f"study {name} in {shown_url(url)}: {done} trial(s) so far, adding {trials}")
    with tracker.start_run(f"study/{name}", tags=tags) as parent:
        tracker.log_params(flatten({"base": params.get("base") or {}, spec.section: params.get(spec.section) or {}}))
        for _ in range(trials):
            trial = study.ask(distributions)
            values = dict(trial.params)
            trial_params = params
            for key, value in values.items():
                trial_params = set_dotted(trial_params, key, value)
            try:
                with tracker.start_run(f"trial/{trial.number}", parent_run_id=parent,
                                       tags={**tags, TRIAL_NUMBER_TAG: str(trial.number)}) as run_id:
                    trial.set_user_attr(MLFLOW_RUN_ATTR, run_id)
                    tracker.log_params(values)
                    _, state, test, _ = train_one(
                        spec, task_name, variant, trial_params, root,
                        on_epoch=lambda st, record: tracker.log_metrics(numeric(record), step=int(record["epoch"])))
                    final = {"best_dev_score": state.best_score, "best_epoch": float(state.best_epoch),
                             "epochs_run": float(state.epoch), **{f"test_{k}": v for k, v in test.items()}}
                    tracker.log_metrics(numeric(final))
            except DidNotLearn as e:          # a failed trial, recorded as one; the study goes on
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                out(f"{name} trial {trial.number}: {_short(values)} -> failed: {e}")
                continue
            except BaseException:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                out(f"{name} trial {trial.number}: {_short(values)} -> failed")
                raise
            study.tell(trial, final[metric])
            best = study.best_trial
            out(f"{name} trial {trial.number}: {_short(values)} -> {metric} {final[metric]:.4g} "
                f"(best {best.value:.4g}, trial {best.number})")
        if not any(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials):
            raise RuntimeError(f"study {name}: no trial has learned yet ({len(study.trials)} failed; see the lines above)")
        best = study.best_trial
        tracker.log_metrics({f"best_{metric}": best.value, "n_trials": float(len(study.trials))})
        tracker.log_params({f"best.{k}": v for k, v in best.params.items()})
    return {"study": name, "storage": shown_url(url), "n_trials": len(study.trials), "best_value": best.value,
            "best_params": dict(best.params), "best_trial": best.number}


def _short(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
                     for k, v in values.items())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m flows.study",
                                 description="Add trials to the Optuna study of a per-task sweep stage, without Ray.")
    ap.add_argument("stage", help="a stage with an Optuna sweep space: train, train_energy, infnets")
    ap.add_argument("--trials", type=int, required=True, help="trials to add to the study")
    ap.add_argument("--task", default=None, help="TASK or TASK/VARIANT of <stage>.tasks (needed when there are several)")
    ap.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    ap.add_argument("--root", default=".", help="project root holding data/ and the stores (default: .)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        summary = run_study(args.stage, load_params(args.params), args.root, trials=args.trials, task=args.task,
                            out=lambda line: print(line, flush=True))
    except ConfigError as e:
        ap.error(str(e))
    except KeyboardInterrupt:
        print(f"{args.stage}: interrupted; the trial that was running is marked FAIL in its study", file=sys.stderr)
        raise SystemExit(130) from None
    print(f"study {summary['study']}: {summary['n_trials']} trial(s); best trial {summary['best_trial']}: "
          f"{summary['best_value']:.4g} with {summary['best_params']}")


if __name__ == "__main__":
    main()
