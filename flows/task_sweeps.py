"""Per-task model sweeps: the machinery shared by ``train`` (local tagger) and ``train_energy``.

A :class:`ModelSpec` says what differs between stages — how to build the model for a prepared
task, its training loss, and how to evaluate it — and everything else is here, once: each
(task, variant) gets a Ray Tune / Optuna sweep over the dotted keys of ``<section>.sweep.space``;
each trial trains with early stopping on dev (a tqdm_ray progress bar per epoch), reports every
epoch with a checkpoint (a failed trial resumes from it), saves its learning curve, and finally
evaluates its best-on-dev weights on test. A trial whose model did not learn (best dev score 0, or
not above the untrained network's; ``components.training.guard``) fails loudly instead of reaching a
table: the sweep keeps its best trial among those that learned. The best trial by dev score is copied to
``<models_dir>/<task>[/<variant>]`` (DVC-tracked), its learning curve to ``<plots_dir>``, and its
test metrics become the stage's metrics.

With ``sweep.num_samples: 1`` each sweep is one trial with the searcher's first suggestion; then the
suggestions are drawn in the driver (:func:`~flows.search_space.first_suggestion`, the values the
one-trial sweeps had) and every (task, variant) runs as one element of ONE Tune grid, up to
``sweep.max_concurrent`` at a time, each trial logged under its own (task, variant) parent run.
A sweep of ``num_samples > 1`` searches its variant's space (:func:`variant_space`: the spec may
leave out keys that have no effect on a variant, e.g. ``infnets``' lambda in local mode, so that no
two trials train the same model); over a finite space it trains distinct settings
(:mod:`flows.sweeps`). A one-trial sweep keeps ``sweep.space`` whole (its first suggestion, and so
the committed results, stay as they were).

Seeds (:func:`components.seeds.seed_for` of ``base.seed`` and a name): a task's training subsample
``("data", task, "train_subsample")`` (one name for every stage, so ``train_energy`` and ``infnets``
train on the same sentences under the same cap); the initial weights ``(stage, task, "model")``, the
global torch generator (dropout) ``(stage, task, "torch")`` and the batch order of epoch e
``(stage, task, "batches", "epoch", e)``; the Optuna searcher ``(stage, task, "tpe", "after", n)``
(:func:`searcher_seed`). None names the variant or the trial: the variants of a task (energies,
architectures, modes) and the trials of its sweep start from the same weights, see the same batches
and get the same suggestions (those whose spaces are the same) — common random numbers, so that
their comparison is paired.

Replicates (``seeds: [0, 1, 2]`` in a section whose config is a :class:`ReplicatedSweepConfig`:
``train_energy``, ``infnets``; replicate indices that :mod:`components.seeds` names, not seeds):
replicate 0 is the sweep above, unchanged. Once every sweep of the stage has finished, each
(task, variant) is trained again for every further replicate k with the values its sweep chose (its
best trial's; no new search), in one Tune grid; every seed of that training — the initial weights,
the global torch generator, the batch order — is named with the part ``replicate<k>`` after the task
(``(stage, task, "replicate1", "model")``, ...: the seed policy's spelling of a replicate, as
``search_aware`` names its own), while the training subsample stays the task's one
(every replicate trains on the same sentences: replicates differ by initialisation and order only).
The did-not-learn guard judges every replicate; one that did not learn fails the stage, naming it.
Replicate k's model goes to ``<models_dir>/<task>[/<variant>]/replicate<k>/``
(:func:`replicate_folder`: beside replicate 0's files, inside its DVC-tracked folder) and its test
metrics under ``replicates.<k>`` of the (task, variant)'s metrics; with ``seeds: [0]`` (the default)
nothing of this runs and every output is what it was. A spec builds replicate k's model on the
models of that replicate (``infnets``: the energy of replicate k): its ``build`` takes
``replicate=k`` for k > 0, and its ``check`` makes sure, before any work, that they exist.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import math
import random
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from components.config import (BaseConfig, ConfigError, check_range, field_error, load_section, resolve_device,
                               set_dotted)
from components.data.tasks import TaggingTask, load_tagging_task
from components.io import write_json
from components.metrics.run_facts import results_only
from components.models.encoders import BLSTMConfig
from components.reports.curves import close, learning_curve, sweep_curves
from components.seeds import seed_for
from components.training.guard import DidNotLearn, check_learned
from components.training.loop import FitState, TrainConfig, canonical, fit
from flows.ray_runtime import copy_checkpoint, epoch_bar
from flows.search_space import check_metric, check_sweep_space, first_suggestion
from flows.stages.common import StageContext, numeric
from flows.sweeps import SweepConfig, SweepResult, run_sweep


REPORTED = ("best_dev_score", "best_epoch", "epochs_run")     # what a trial's final report carries (and test_*)


@dataclass(frozen=True)
class TaskSweepConfig:
    """Keys every per-task sweep stage shares (a stage's section may add its own). The defaults are the
    ``train`` stage's (the local BLSTM tagger) at the default scale; a stage's subclass sets its own."""
    tasks: tuple[str, ...] = ("pos", "ner")
    model: BLSTMConfig = BLSTMConfig(hidden=64)
    optim: TrainConfig = TrainConfig(lr=0.003, epochs=25, patience=4, batch_size=16)
    # a seeded subsample of each training split: one cap for every task, or task -> cap (0 / absent =
    # the whole split), e.g. {greek_morph: 1600} to cap only the 1,025-label task
    max_train_sentences: int | dict[str, int] = 0
    eval_batch_size: int = 128
    sweep: SweepConfig = field(default_factory=lambda: SweepConfig(num_samples=3))
    models_dir: str = "models/tagger"
    plots_dir: str = "plots/train"
    # a trial fails unless its best dev score beats 0 and the untrained network's by more than this
    min_dev_gain: float = 0.0

    def __post_init__(self):
        check_range(self, nonempty=("tasks",), nonnegative=("max_train_sentences", "min_dev_gain"),
                    positive=("eval_batch_size",))

    def train_cap(self, task: str) -> int:
        """The training-sentence cap of ``task`` (0 = all)."""
        caps = self.max_train_sentences
        return caps.get(task, 0) if isinstance(caps, dict) else caps


@dataclass(frozen=True)
class ReplicatedSweepConfig(TaskSweepConfig):
    """A per-task sweep stage that trains replicates (module doc): ``seeds`` lists replicate indices,
    replicate 0 (the sweep) first."""
    seeds: tuple[int, ...] = (0,)         # replicate indices (components.seeds names them), not seeds

    def __post_init__(self):
        super().__post_init__()
        check_replicates(self)


def check_replicates(cfg: Any, key: str = "seeds") -> None:
    """``cfg.<key>`` lists distinct replicate indices, replicate 0 first (a :func:`field_error`)."""
    check_range(cfg, nonempty=(key,), nonnegative=(key,))
    seeds = tuple(getattr(cfg, key))
    if seeds[0] != 0:
        raise field_error(cfg, key, f"must list replicate 0 first (the sweep, whose choice the others retrain), "
                                    f"got {list(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise field_error(cfg, key, f"lists a replicate twice: {list(seeds)}")


def replicates(cfg: Any) -> tuple[int, ...]:
    """The replicate indices a stage's config asks for: its ``seeds``, or ``(0,)`` for a config that
    trains no replicates (``train``)."""
    return tuple(cfg.seeds) if isinstance(cfg, ReplicatedSweepConfig) else (0,)


def replicate_folder(folder: Path, replicate: int) -> Path:
    """Where replicate ``replicate`` of the model in ``folder`` lives: ``folder`` itself for replicate 0,
    ``folder/replicate<k>`` for k > 0 (``components.inference.study_config.replicate_folder``, which the
    ``approx`` stage reads them with, is the same layout)."""
    return Path(folder) if replicate == 0 else Path(folder) / f"replicate{replicate}"


def _seed_name(section: str, task: str, replicate: int, *purpose: str | int) -> tuple[str | int, ...]:
    """The name of one of a training's seeds: ``(section, task, *purpose)`` for replicate 0 (the names
    it has always had), ``(section, task, f"replicate{k}", *purpose)`` for replicate k > 0."""
    return (section, task, *((f"replicate{replicate}",) if replicate else ()), *purpose)


@dataclass(frozen=True)
class ModelSpec:
    section: str                                                            # params section
    config: type                                                            # its dataclass
    variants: Callable[[Any, str], tuple[str, ...]]                         # (cfg, task) -> variant names ("" = one)
    build: Callable[..., torch.nn.Module]    # (cfg, variant, task, seed, root[, replicate=k]): replicate=k for k > 0
    loss: Callable[[Any, str, torch.nn.Module], Callable[[torch.nn.Module, Any], torch.Tensor]]
    # loss(cfg, variant, model) -> loss_fn(model, batch); ``fit`` tells a loss_fn with an ``epoch``
    # attribute the epoch before each epoch's batches (for schedules such as lambda annealing)
    evaluate: Callable[[torch.nn.Module, Any, str, TaggingTask, Any, str, str], dict[str, float]]
    # evaluate(model, cfg, variant, task, dataset, split name, device) -> metrics with "score"
    recipe: Callable[[Any, str, TaggingTask], dict[str, Any]]
    # recipe(cfg, variant, task) -> components.checkpoints.recipe(...): how to rebuild the saved model
    register: bool = False
    # log each sweep's best model as an MLflow model and register it as approxinfer-<stage>-<task>[-<variant>]
    # (the models users tag text with: `approxinfer predict models:/...`)
    check: Callable[[Any, StageContext], None] | None = None
    # check(cfg, ctx): the stage's own checks before any work (infnets: each replicate's energies exist)
    sweep_space: Callable[[Any, str], dict[str, dict[str, Any]]] | None = None
    # sweep_space(cfg, variant) -> the variant's space, a part of ``cfg.sweep.space`` without the keys
    # that have no effect on it (infnets: lambda in local mode); None: ``cfg.sweep.space`` for every
    # variant. Used by sweeps of num_samples > 1 only (:func:`variant_space`)


def variant_space(spec: ModelSpec, cfg: Any, variant: str) -> dict[str, dict[str, Any]]:
    """The space a (task, variant)'s sweep of ``num_samples > 1`` searches: ``spec.sweep_space(cfg,
    variant)``, or ``cfg.sweep.space``."""
    return spec.sweep_space(cfg, variant) if spec.sweep_space is not None else cfg.sweep.space


def searcher_seed(base_seed: int, stage: str, task: str, done: int = 0) -> int:
    """The seed of the Optuna searcher of ``stage``'s sweeps of ``task`` that starts after ``done``
    trials (a pipeline sweep starts fresh: 0; ``flows.study`` continues a user's study). One seed for
    every variant of the task: their sweeps draw the same values (common random numbers)."""
    return seed_for(base_seed, stage, task, "tpe", "after", done)


def _spec(ref: str) -> ModelSpec:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def train_one(spec: ModelSpec, task_name: str, variant: str, params: dict[str, Any], root: Path, *,
              resume: FitState | None = None, initial_score: float | None = None, on_epoch=None, on_batch=None,
              on_task=None, on_initial=None, replicate: int = 0):
    """Train one configuration -> (model with best-on-dev weights, fit state, test metrics, task).
    ``on_task(task)`` sees the loaded task before training starts; ``on_initial(score)`` the untrained
    network's dev score (measured unless ``initial_score`` gives it, as a resumed trial does);
    ``replicate``: the replicate index that names the training's seeds (module doc; 0: the sweep's). Raises
    :class:`~components.training.guard.DidNotLearn` when the model did not learn."""
    base = load_section(BaseConfig, "base", params)
    cfg = load_section(spec.config, spec.section, params)
    # no variant in these names: every variant of a task starts from the same weights and sees the
    # same batches (common random numbers; module doc); a replicate k > 0 adds "replicate<k>"
    seed = seed_for(base.seed, *_seed_name(spec.section, task_name, replicate, "torch"))
    # every global generator, also those this training does not draw from: a checkpoint saves their
    # state (components.training.loop.rng_state), which must not depend on the process
    torch.manual_seed(seed), random.seed(seed), np.random.seed(seed)
    device = resolve_device(base.device)
    task = load_tagging_task(root / base.prepared_dir / task_name, max_train_sentences=cfg.train_cap(task_name),
                             seed=seed_for(base.seed, "data", task_name, "train_subsample"))
    if on_task is not None:
        on_task(task)
    # the training subsample above has no replicate in its name: every replicate trains on the same sentences
    on_replicate = {"replicate": replicate} if replicate else {}
    model = spec.build(cfg, variant, task, seed_for(base.seed, *_seed_name(spec.section, task_name, replicate, "model")),
                       root, **on_replicate).to(device)
    if initial_score is None:
        model.eval()
        with torch.no_grad():
            initial_score = float(spec.evaluate(model, cfg, variant, task, task.dev, "dev", device)["score"])
    if on_initial is not None:
        on_initial(initial_score)
    loss_fn = spec.loss(cfg, variant, model)
    n_batches = -(-len(task.train) // cfg.optim.batch_size)

    state = fit(model, loss_fn,
                lambda epoch: task.train.batches(
                    cfg.optim.batch_size, shuffle=True, device=device,
                    seed=seed_for(base.seed, *_seed_name(spec.section, task_name, replicate, "batches", "epoch", epoch))),
                n_batches, lambda m: spec.evaluate(m, cfg, variant, task, task.dev, "dev", device), cfg.optim,
                state=resume, on_batch=on_batch, on_epoch=on_epoch)
    label = f"{spec.section} {task_name}/{variant}" if variant else f"{spec.section} {task_name}"
    label += f" replicate {replicate}" if replicate else ""
    check_learned(initial_score, state.best_score, what=label, min_gain=cfg.min_dev_gain)
    model.eval()
    with torch.no_grad():
        test = spec.evaluate(model, cfg, variant, task, task.test, "test", device)
    return model, state, test, task


def _save_checkpoint(folder: Path, state: FitState, meta: dict[str, Any]) -> None:
    torch.save(state.to_dict(), folder / "state.pt")
    if state.best_model_state is not None:       # canonical: the same bytes whether it was trained or resumed
        torch.save(canonical(state.best_model_state), folder / "model.pt")
    (folder / "model.json").write_text(json.dumps(meta, indent=2, default=str))


def task_trial(config: dict[str, Any], *, spec_ref: str, params: dict[str, Any], root: str,
               task: str | None = None, variant: str | None = None) -> None:
    """Ray Tune function trainable: ``config`` maps dotted params keys to this trial's values; in a
    grid, ``config["run"]`` is ``{"task", "variant", "config": <that mapping>}`` and, for a replicate
    k > 0 (module doc), ``"replicate": k``."""
    from ray import tune
    replicate = 0
    if "run" in config:
        replicate = int(config["run"].get("replicate", 0))
        task, variant, config = config["run"]["task"], config["run"]["variant"], config["run"]["config"]
    spec = _spec(spec_ref)
    for key, value in config.items():
        params = set_dotted(params, key, value)
    cfg = load_section(spec.config, spec.section, params)
    resume, initial = None, None
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            resume = FitState.from_dict(torch.load(Path(d) / "state.pt", weights_only=True))
            initial = json.loads((Path(d) / "model.json").read_text()).get("initial_dev_score")
    meta = {"task": task, "variant": variant, "section": spec.section, "config": config}
    if replicate:                                  # replicate 0's model.json stays as it was
        meta["replicate"] = replicate
    label = f"{task}/{variant}" if variant else task
    label += f" replicate {replicate}" if replicate else ""
    on_batch = epoch_bar(label)

    def on_epoch(state: FitState, record: dict[str, float]) -> None:
        with tempfile.TemporaryDirectory() as d:
            _save_checkpoint(Path(d), state, meta)
            tune.report({**record, "best_dev_score": state.best_score, "best_epoch": float(state.best_epoch)},
                        checkpoint=tune.Checkpoint.from_directory(d))

    model, state, test, t = train_one(spec, task, variant, params, Path(root), resume=resume, initial_score=initial,
                                      on_epoch=on_epoch, on_batch=on_batch,
                                      on_task=lambda tk: meta.update(recipe=spec.recipe(cfg, variant, tk)),
                                      on_initial=lambda score: meta.update(initial_dev_score=score),
                                      replicate=replicate)
    with tempfile.TemporaryDirectory() as d:       # the checkpoint, not the trial folder (reused actors)
        _save_checkpoint(Path(d), state, {**meta, "test": results_only(test)})   # its timings: tune.report only
        fig = learning_curve(state.history, score_name=f"dev {t.metric}", title=f"{label}: {config}")
        fig.savefig(Path(d) / "learning_curve.png")
        close(fig)
        (Path(d) / "history.json").write_text(json.dumps(state.history, indent=2))
        tune.report({"best_dev_score": state.best_score, "best_epoch": float(state.best_epoch),
                     "epochs_run": float(state.epoch), "initial_dev_score": meta["initial_dev_score"],
                     **{f"test_{k}": v for k, v in test.items()}},
                    checkpoint=tune.Checkpoint.from_directory(d))


def _trial_label(i: int, config: dict[str, Any]) -> str:
    short = (f"{k.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
             for k, v in config.items())
    return f"trial {i}: " + ", ".join(short)


def _names(task: str, variant: str) -> tuple[str, str]:
    """-> (label ``task/variant``, metrics key ``task-variant``)."""
    return (f"{task}/{variant}", f"{task}-{variant}") if variant else (task, task)


def sweep_name(stage: str, task: str, variant: str) -> str:
    """The (task, variant) sweep's name ``<stage>-<task>[-<variant>]``: its Ray experiment folder and
    the stem of its Optuna study (``flows.study`` names its study so)."""
    return f"{stage}-{_names(task, variant)[1]}"


@contextlib.contextmanager
def _parent_run(ctx: StageContext, cfg: TaskSweepConfig, task: str, variant: str,
                space: dict[str, dict[str, Any]] | None = None):
    """The (task, variant) sweep's parent run, with its params (``space``: the space it searches,
    default ``cfg.sweep.space``) logged -> its id."""
    space = cfg.sweep.space if space is None else space
    with ctx.tracker.start_run(f"sweep/{_names(task, variant)[0]}", parent_run_id=ctx.run_id,
                               tags={"stage": ctx.stage, "task": task, "variant": variant}) as parent:
        ctx.tracker.log_params({"task": task, "variant": variant,
                                **{f"space.{k}": str(v) for k, v in space.items()}})
        yield parent


def registered_name(stage: str, task: str, variant: str) -> str:
    """The MLflow registered model of a sweep's best model: ``approxinfer-<stage>-<task>[-<variant>]``."""
    return f"approxinfer-{stage}-{task}" + (f"-{variant}" if variant else "")


def _register(ctx: StageContext, task: str, variant: str, dest: Path, parent_run_id: str) -> dict[str, Any]:
    """Log the best model folder ``dest`` (with its task's vocabularies) as an MLflow model of the
    sweep's parent run and register it -> its ``models:/`` URI and version (nothing without an
    MLflow tracker)."""
    uri = getattr(ctx.tracker, "tracking_uri", "")
    if not uri:
        return {}
    from components.inference.predict import PYFUNC_LOADER
    from components.tracking.models import log_model
    logged = log_model(uri, parent_run_id, dest, ctx.path(ctx.base.prepared_dir) / task,
                       registered_name(ctx.stage, task, variant), loader=PYFUNC_LOADER)
    return {"registered_model": logged.uri}


#: the final metrics of a trial that the stage's metrics keep (replicate 0's best, each replicate's own)
KEPT_METRICS = ("test_", "best_", "epochs_run", "initial_")


def _record(ctx: StageContext, cfg: TaskSweepConfig, task: str, variant: str, res: SweepResult,
            parent_run_id: str, register: bool = False,
            replicate_trials: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Copy the best checkpoint, write the plots, log to the (open, innermost) parent run, register
    the best model when the stage's spec says so; then copy each further replicate's checkpoint
    (``replicate_trials``: k -> its trial) into its :func:`replicate_folder` -> metrics, with the
    replicates' under ``replicates`` (absent without replicates)."""
    label, key = _names(task, variant)
    if res.best_checkpoint is None:
        raise RuntimeError(f"sweep {ctx.stage}-{key}: the best trial left no checkpoint")
    dest = ctx.path(cfg.models_dir) / task / variant if variant else ctx.path(cfg.models_dir) / task
    copy_checkpoint(res.best_checkpoint, dest)
    best = {k: v for k, v in res.best_metrics.items() if k.startswith(KEPT_METRICS)}
    best.update({f"config.{k}": v for k, v in res.best_config.items()})
    histories = {}
    for i, t in enumerate(res.trials):
        h = Path(t["checkpoint"]) / "history.json" if t.get("checkpoint") else None
        if h is not None and h.exists():
            histories[_trial_label(i, t["config"])] = json.loads(h.read_text())
    fig = sweep_curves(histories, title=f"{label}: dev score per trial")
    ctx.tracker.log_figure(fig, f"{key}_sweep_curves.png")
    close(fig)
    best_hist = Path(res.best_checkpoint) / "history.json"
    rows = json.loads(best_hist.read_text()) if best_hist.exists() else []
    plots = ctx.path(cfg.plots_dir)
    write_json(plots / task / f"{variant}.json" if variant else plots / f"{task}.json",
               [{"epoch": r["epoch"], "train_loss": r["train_loss"], "dev_score": r["dev_score"]} for r in rows])
    ctx.tracker.log_metrics(numeric(best))
    ctx.tracker.log_params({f"best.{k}": v for k, v in res.best_config.items()})
    ctx.tracker.log_artifact(dest / "model.json", "best_model")
    if register:
        ctx.tracker.set_tags(_register(ctx, task, variant, dest, parent_run_id))
    # after the registration, which logs the folder: the registered model is replicate 0's alone
    reps: dict[str, dict[str, Any]] = {}
    for k, trial in sorted((replicate_trials or {}).items()):
        copy_checkpoint(Path(trial["checkpoint"]), replicate_folder(dest, k))
        reps[str(k)] = {m: v for m, v in trial["metrics"].items() if m.startswith(KEPT_METRICS)}
    if reps:
        ctx.tracker.log_metrics(numeric({"replicates": reps}))
    return {**best, "n_trials": len(res.trials), "n_failed": sum(1 for t in res.trials if t["error"]),
            **({"replicates": reps} if reps else {})}


def _run_replicates(spec_ref: str, params: dict[str, Any], ctx: StageContext, cfg: TaskSweepConfig,
                    runs: list[tuple[str, str]], results: dict[str, SweepResult],
                    parents: dict[str, str]) -> dict[str, dict[int, dict[str, Any]]]:
    """Every further replicate (``seeds`` after 0) of every (task, variant), trained with the values its
    sweep chose (``results[key].best_config``), as one Tune grid; each trial's MLflow run under its
    (task, variant)'s parent run (``parents``) -> key -> replicate -> its trial. Any replicate that
    did not learn (or left no checkpoint) fails the stage, naming every such replicate."""
    from ray import tune
    extra = replicates(cfg)[1:]
    if not extra:
        return {}
    stage = ctx.stage
    grid = [{"task": t, "variant": v, "config": results[_names(t, v)[1]].best_config, "replicate": k}
            for t, v in runs for k in extra]

    def trial_tags(config: dict[str, Any]) -> dict[str, str]:
        run = config["run"]
        key = _names(run["task"], run["variant"])[1]
        return {"mlflow.parentRunId": parents[key], "sweep": f"{stage}-{key}-replicate{run['replicate']}",
                "task": run["task"], "replicate": str(run["replicate"])}

    trainable = tune.with_parameters(task_trial, spec_ref=spec_ref, params=params, root=str(ctx.root))
    res = run_sweep(trainable, name=f"{stage}-{'+'.join(cfg.tasks)}-replicates", cfg=cfg.sweep, params=params,
                    seed=seed_for(ctx.base.seed, stage, "replicates"), tracker=ctx.tracker, parent_run_id=ctx.run_id,
                    storage=ctx.ray_storage, tags={"stage": stage}, grid=grid, trial_tags=trial_tags,
                    allow_errors=(DidNotLearn,))     # judged below: every replicate must learn
    out: dict[str, dict[int, dict[str, Any]]] = {}
    failed = []
    for t in res.trials:
        run = t["config"]["run"]
        label = f"{_names(run['task'], run['variant'])[0]} replicate {run['replicate']}"
        if t["error"] or not t.get("checkpoint"):
            failed.append(f"{label}: {t['error'] or 'no checkpoint'}")
            continue
        out.setdefault(_names(run["task"], run["variant"])[1], {})[int(run["replicate"])] = t
    if failed:
        raise RuntimeError(f"{stage}: {len(failed)} replicate(s) failed (each replicate retrains its sweep's "
                           f"chosen values and must learn): " + "; ".join(failed))
    return out


def _element_result(name: str, cfg: SweepConfig, trials: list[dict[str, Any]]) -> SweepResult:
    """The trials of one grid element as the result of its own sweep (``run_sweep``'s rules)."""
    ok = [t for t in trials if not t["error"] and math.isfinite(t["metrics"].get(cfg.metric, math.nan))]
    if not ok:
        errors = "; ".join(t["error"] for t in trials if t["error"]) or "no trial reported the metric"
        raise RuntimeError(f"sweep {name}: every trial failed ({errors})")
    best = (max if cfg.mode == "max" else min)(ok, key=lambda t: t["metrics"][cfg.metric])
    return SweepResult(best_config=best["config"], best_metrics=best["metrics"],
                       best_checkpoint=Path(best["checkpoint"]) if best["checkpoint"] else None, trials=trials)


def _run_grid(spec_ref: str, params: dict[str, Any], ctx: StageContext, cfg: TaskSweepConfig,
              runs: list[tuple[str, str]]) -> dict[str, Any]:
    """Every (task, variant) one-trial sweep as one element of one Tune grid.

    The parent runs are opened first (the trials need their ids) and stay open, nested, on the
    tracker's stack during the grid; each trial's MLflow run gets its own parent's id as
    ``mlflow.parentRunId`` (``run_sweep(trial_tags=...)``). Afterwards the parents are recorded and
    closed innermost first, since the tracker logs to its innermost open run.
    """
    from ray import tune
    stage, keys = ctx.stage, [_names(t, v)[1] for t, v in runs]
    # each element: the first suggestion of the searcher its own one-trial sweep would have had, over
    # the whole sweep.space also where the spec's variant_space leaves keys out: one trial trains one
    # setting either way, and a smaller space would change the values drawn and recorded (the seeded
    # TPE draws the keys in turn) and so the committed results
    grid = [{"task": t, "variant": v,
             "config": first_suggestion(cfg.sweep, params, searcher_seed(ctx.base.seed, stage, t))} for t, v in runs]
    parents: dict[str, str] = {}

    def trial_tags(config: dict[str, Any]) -> dict[str, str]:
        key = _names(config["run"]["task"], config["run"]["variant"])[1]
        return {"mlflow.parentRunId": parents[key], "sweep": f"{stage}-{key}", "task": config["run"]["task"]}

    metrics: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:       # on an error, every parent still open ends FAILED
        opened = []
        for (task, variant), key in zip(runs, keys):
            opened.append(stack.enter_context(contextlib.ExitStack()))     # closes one parent on its own
            parents[key] = opened[-1].enter_context(_parent_run(ctx, cfg, task, variant))
        trainable = tune.with_parameters(task_trial, spec_ref=spec_ref, params=params, root=str(ctx.root))
        res = run_sweep(trainable, name=f"{stage}-{'+'.join(cfg.tasks)}", cfg=cfg.sweep, params=params,
                        seed=seed_for(ctx.base.seed, stage, "grid"), tracker=ctx.tracker, parent_run_id=ctx.run_id,
                        storage=ctx.ray_storage, tags={"stage": stage}, grid=grid, trial_tags=trial_tags,
                        allow_errors=(DidNotLearn,))    # a trial that did not learn fails; _element_result judges
        by_key: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
        for t in res.trials:
            run = t["config"]["run"]
            by_key[_names(run["task"], run["variant"])[1]].append({**t, "config": run["config"]})
        results = {k: _element_result(f"{stage}-{k}", cfg.sweep, by_key[k]) for k in keys}
        reps = _run_replicates(spec_ref, params, ctx, cfg, runs, results, parents)
        register = _spec(spec_ref).register
        for (task, variant), key, parent in reversed(list(zip(runs, keys, opened))):
            metrics[key] = _record(ctx, cfg, task, variant, results[key], parents[key], register, reps.get(key))
            parent.close()
    return {k: metrics[k] for k in keys}


def run_task_sweeps(spec_ref: str, params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    """Every (task, variant) sweep of the stage, then its further replicates (module doc); the DVC
    outputs (models, plots) are written only after every sweep and replicate has finished, so an
    interrupted or failed stage writes none of them."""
    from ray import tune
    spec = _spec(spec_ref)
    cfg = load_section(spec.config, spec.section, params)
    check_sweep_space(cfg.sweep.space, params, spec.section, lambda p: load_section(spec.config, spec.section, p))
    check_metric(cfg.sweep, REPORTED, f"{spec.section}.sweep")
    for task in cfg.tasks:
        if not (ctx.path(ctx.base.prepared_dir) / task / "meta.json").exists():
            raise FileNotFoundError(f"{spec.section}.tasks: task {task!r} has not been prepared "
                                    f"(is it under prepare.tasks in params.yaml?)")
    caps = cfg.max_train_sentences       # per task: its keys must be tasks (a stage may run one task of them)
    for task in sorted(caps) if isinstance(caps, dict) else ():
        if not (ctx.path(ctx.base.prepared_dir) / task / "meta.json").exists():
            raise ConfigError(f"{spec.section}.max_train_sentences: {task!r} is not a prepared task")
    runs = [(task, variant) for task in cfg.tasks for variant in spec.variants(cfg, task)]
    if spec.check is not None:
        spec.check(cfg, ctx)
    if cfg.sweep.num_samples == 1:
        return _run_grid(spec_ref, params, ctx, cfg, runs)
    metrics: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:       # on an error, every parent still open ends FAILED
        opened, results, parents = [], {}, {}
        for task, variant in runs:
            key = _names(task, variant)[1]
            # the variant's own space (keys without effect on it left out: no identical trainings)
            sweep = replace(cfg.sweep, space=variant_space(spec, cfg, variant))
            opened.append(stack.enter_context(contextlib.ExitStack()))
            parent = parents[key] = opened[-1].enter_context(_parent_run(ctx, cfg, task, variant, sweep.space))
            trainable = tune.with_parameters(task_trial, spec_ref=spec_ref, params=params, task=task,
                                             variant=variant, root=str(ctx.root))
            results[key] = run_sweep(trainable, name=sweep_name(ctx.stage, task, variant), cfg=sweep, params=params,
                                     seed=searcher_seed(ctx.base.seed, ctx.stage, task), tracker=ctx.tracker,
                                     parent_run_id=parent,
                                     storage=ctx.ray_storage, tags={"task": task, "stage": ctx.stage},
                                     allow_errors=(DidNotLearn,))    # trials that did not learn are recorded
            results[key] = _element_result(sweep_name(ctx.stage, task, variant), cfg.sweep, results[key].trials)
        reps = _run_replicates(spec_ref, params, ctx, cfg, runs, results, parents)
        for (task, variant), parent in reversed(list(zip(runs, opened))):
            key = _names(task, variant)[1]
            metrics[key] = _record(ctx, cfg, task, variant, results[key], parents[key], spec.register, reps.get(key))
            parent.close()
    return {k: metrics[k] for k in (_names(t, v)[1] for t, v in runs)}
