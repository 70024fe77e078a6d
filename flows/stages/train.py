"""``train`` stage: the BLSTM softmax tagger (Tu & Gimpel's local baseline) through the sweep spine.

For each task in ``train.tasks``: a Ray Tune / Optuna sweep over ``train.sweep.space`` (learning
rate and hidden size by default), early stopping on dev, test accuracy (POS) or conlleval span F1
(NER) of the best trial by dev score; see :mod:`flows.task_sweeps` for the shared machinery.
"""
from __future__ import annotations

from typing import Any

from components.recipes import recipe
from components.models.encoders import BLSTMTagger
from components.training.tagger import evaluate_tagger, token_ce_loss
from flows.stages.common import StageContext, main
from flows.task_sweeps import ModelSpec, TaskSweepConfig, run_task_sweeps


def _build(cfg: TaskSweepConfig, variant: str, task, seed: int, root) -> BLSTMTagger:
    return BLSTMTagger(cfg.model, len(task.vocabs["word"]), len(task.vocabs["label"]),
                       n_chars=len(task.vocabs["char"]), pretrained_ids=task.glove_ids,
                       pretrained=task.glove_vectors, seed=seed)


def _evaluate(model, cfg: TaskSweepConfig, variant: str, task, ds, split: str, device: str) -> dict[str, float]:
    return evaluate_tagger(model, ds, task.vocabs["label"], task.metric, batch_size=cfg.eval_batch_size, device=device)


def _recipe(cfg: TaskSweepConfig, variant: str, task) -> dict:
    return recipe("tagger", "blstm", cfg.model, task.sizes)


SPEC = ModelSpec(section="train", config=TaskSweepConfig, variants=lambda cfg, task: ("",), build=_build,
                 loss=lambda cfg, variant, model: token_ce_loss, evaluate=_evaluate, recipe=_recipe, register=True)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    return run_task_sweeps("flows.stages.train:SPEC", params, ctx)


if __name__ == "__main__":
    main("train")
