"""``train`` stage: the BLSTM softmax tagger (Tu & Gimpel's local baseline) through the sweep spine.

For each task in ``train.tasks``: a Ray Tune / Optuna sweep over the dotted keys of
``train.sweep.space`` (learning rate and hidden size by default). Each trial trains with early
stopping on dev (a progress bar per epoch), reports every epoch to Tune with a checkpoint (so a
failed trial resumes), saves its learning-curve plot, and finally evaluates its best-on-dev weights
on test (accuracy for POS, conlleval span F1 for NER). The best trial by dev score is copied to
``models/tagger/<task>/`` (DVC-tracked) and its test metrics are the stage's metrics.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from components.config import load_section, resolve_device, set_dotted
from components.data.tasks import load_tagging_task
from components.io import write_json
from components.models.encoders import BLSTMConfig, BLSTMTagger
from components.reports.curves import close, learning_curve, sweep_curves
from components.training.loop import FitState, TrainConfig, fit
from components.training.tagger import evaluate_tagger, token_ce_loss
from flows.stages.common import StageContext, main, numeric
from flows.sweeps import SweepConfig, copy_checkpoint, run_sweep


@dataclass(frozen=True)
class TaggerStageConfig:
    tasks: tuple[str, ...] = ("pos", "ner")
    model: BLSTMConfig = BLSTMConfig()
    optim: TrainConfig = TrainConfig()
    max_train_sentences: int = 0         # 0 = the whole training split
    eval_batch_size: int = 128
    sweep: SweepConfig = field(default_factory=SweepConfig)
    models_dir: str = "models/tagger"
    plots_dir: str = "plots/train"


def train_one(task_name: str, params: dict[str, Any], root: Path, *, resume: FitState | None = None,
              on_epoch=None, on_batch=None) -> tuple[BLSTMTagger, FitState, dict[str, Any], Any]:
    """Train one configuration; returns (model with best-on-dev weights, fit state, test metrics, task)."""
    from components.config import BaseConfig
    base = load_section(BaseConfig, "base", params)
    cfg = load_section(TaggerStageConfig, "train", params)
    torch.manual_seed(base.seed)
    device = resolve_device(base.device)
    task = load_tagging_task(root / base.prepared_dir / task_name,
                             max_train_sentences=cfg.max_train_sentences, seed=base.seed)
    model = BLSTMTagger(cfg.model, len(task.vocabs["word"]), len(task.vocabs["label"]),
                        pretrained_ids=task.glove_ids, pretrained=task.glove_vectors, seed=base.seed).to(device)
    labels = task.vocabs["label"]
    n_batches = -(-len(task.train) // cfg.optim.batch_size)

    def batches(epoch: int):
        for b in task.train.batches(cfg.optim.batch_size, shuffle=True, seed=base.seed * 1000 + epoch):
            yield b.to(device)

    def evaluate(m):
        return evaluate_tagger(m, task.dev, labels, task.metric, batch_size=cfg.eval_batch_size, device=device)

    state = fit(model, token_ce_loss, batches, n_batches, evaluate, cfg.optim, state=resume,
                on_batch=on_batch, on_epoch=on_epoch)
    test = evaluate_tagger(model, task.test, labels, task.metric, batch_size=cfg.eval_batch_size, device=device)
    return model, state, test, task


def _save_checkpoint(folder: Path, state: FitState, model_meta: dict[str, Any]) -> None:
    torch.save(state.to_dict(), folder / "state.pt")
    if state.best_model_state is not None:
        torch.save(state.best_model_state, folder / "model.pt")
    (folder / "model.json").write_text(json.dumps(model_meta, indent=2))


def tagger_trial(config: dict[str, Any], *, params: dict[str, Any], task: str, root: str) -> None:
    """Ray Tune function trainable: ``config`` maps dotted params keys to this trial's values."""
    from ray import tune
    from ray.experimental.tqdm_ray import tqdm

    for key, value in config.items():
        params = set_dotted(params, key, value)
    cfg = load_section(TaggerStageConfig, "train", params)
    resume = None
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            resume = FitState.from_dict(torch.load(Path(d) / "state.pt", weights_only=True))
    meta = {"task": task, "model": asdict(cfg.model), "config": config}
    bar: dict[str, Any] = {}

    def on_batch(i: int, n: int, loss: float) -> None:
        if i == 1:
            bar["tqdm"] = tqdm(total=n, desc=f"{task} epoch", position=0)
        bar["tqdm"].update(1)
        if i == n:
            bar["tqdm"].close()

    def on_epoch(state: FitState, record: dict[str, float]) -> None:
        with tempfile.TemporaryDirectory() as d:
            _save_checkpoint(Path(d), state, meta)
            tune.report({**record, "dev_score": record["dev_score"], "best_dev_score": state.best_score,
                         "best_epoch": float(state.best_epoch)},
                        checkpoint=tune.Checkpoint.from_directory(d))

    model, state, test, t = train_one(task, params, Path(root), resume=resume, on_epoch=on_epoch, on_batch=on_batch)
    trial_dir = Path(tune.get_context().get_trial_dir())
    fig = learning_curve(state.history, score_name=f"dev {t.metric}", title=f"{task}: {config}")
    fig.savefig(trial_dir / "learning_curve.png")
    close(fig)
    (trial_dir / "history.json").write_text(json.dumps(state.history, indent=2))
    with tempfile.TemporaryDirectory() as d:
        _save_checkpoint(Path(d), state, {**meta, "test": test})
        tune.report({"best_dev_score": state.best_score, "best_epoch": float(state.best_epoch),
                     "epochs_run": float(state.epoch), **{f"test_{k}": v for k, v in test.items()}},
                    checkpoint=tune.Checkpoint.from_directory(d))


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_section(TaggerStageConfig, "train", params)
    metrics: dict[str, Any] = {}
    for task in cfg.tasks:
        if not (ctx.path(ctx.base.prepared_dir) / task / "meta.json").exists():
            raise FileNotFoundError(f"train.tasks: task {task!r} has not been prepared "
                                    f"(is it under prepare.tasks in params.yaml?)")
        with ctx.tracker.start_run(f"sweep/{task}", parent_run_id=ctx.run_id, tags={"task": task}) as parent:
            ctx.tracker.log_params({"task": task, **{f"space.{k}": str(v) for k, v in cfg.sweep.space.items()}})
            trainable = tune.with_parameters(tagger_trial, params=params, task=task, root=str(ctx.root))
            res = run_sweep(trainable, name=f"train-{task}", cfg=cfg.sweep, params=params, seed=ctx.base.seed,
                            tracker=ctx.tracker, parent_run_id=parent, storage=ctx.path(".ray_results"),
                            tags={"task": task, "stage": ctx.stage})
            if res.best_checkpoint is None:
                raise RuntimeError(f"sweep train-{task}: the best trial left no checkpoint")
            dest = ctx.path(cfg.models_dir) / task
            copy_checkpoint(res.best_checkpoint, dest)
            best = {k: v for k, v in res.best_metrics.items() if k.startswith(("test_", "best_", "epochs_run"))}
            best.update({f"config.{k}": v for k, v in res.best_config.items()})
            histories = {}
            for i, t in enumerate(res.trials):
                h = Path(t["path"]) / "history.json"
                if h.exists():
                    histories[f"trial {i}: " + ", ".join(f"{k.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float)
                                                         else f"{k.rsplit('.', 1)[-1]}={v}" for k, v in t["config"].items())] = json.loads(h.read_text())
            fig = sweep_curves(histories, title=f"{task}: dev score per trial")
            ctx.tracker.log_figure(fig, f"{task}_sweep_curves.png")
            close(fig)
            best_hist = json.loads((Path(res.best_checkpoint).parent / "history.json").read_text()) \
                if (Path(res.best_checkpoint).parent / "history.json").exists() else []
            write_json(ctx.path(cfg.plots_dir) / f"{task}.json",
                       [{"epoch": r["epoch"], "train_loss": r["train_loss"], "dev_score": r["dev_score"]} for r in best_hist])
            ctx.tracker.log_metrics(numeric(best))
            ctx.tracker.log_params({f"best.{k}": v for k, v in res.best_config.items()})
            ctx.tracker.log_artifact(dest / "model.json", "best_model")
        metrics[task] = {**best, "n_trials": len(res.trials),
                         "n_failed": sum(1 for t in res.trials if t["error"])}
    return metrics


if __name__ == "__main__":
    main("train")
