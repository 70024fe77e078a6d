"""``train_energy`` stage: BLSTM-CRF and BLSTM-CRF+ chain energies on every default tagging task.

For each (task, energy) in ``train_energy.tasks`` x ``train_energy.energies``: a sweep through the
spine (:mod:`flows.task_sweeps`) training the energy with ``train_energy.objective`` (the CRF
negative log-likelihood by default), early stopping on dev with Viterbi decoding. The best trial's
test metrics — accuracy or span F1, the mean test energy of gold and of Viterbi outputs, and
decoding speed — go to MLflow and ``metrics/train_energy/<task>.json``; its weights to
``models/energy/<task>/<energy>/`` for the approximate-inference studies. The dev evaluations that
every epoch's record keeps (``history.json``, ``state.pt``) leave out their timings
(:mod:`components.metrics.run_facts`): a model folder is the same for the same code and data.

Replicates (``train_energy.seeds``, replicate indices; :mod:`flows.task_sweeps`): replicate k > 0 of
each energy retrains the learning rate (and every other value) replicate 0's sweep chose, from other
initial weights and batch orders on the same training sentences, into
``models/energy/<task>/<energy>/replicate<k>/``; its test metrics go under ``replicates.<k>`` of the
energy's metrics. ``infnets`` trains replicate k's networks against it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.models.encoders import BLSTMConfig
from components.recipes import recipe
from components.energies.registry import ENERGIES
from components.inference.registry import INFERENCE
from components.inference.evaluate import evaluate_inference
from components.metrics.run_facts import results_only
from components.config import ConfigError
from components.training.loop import TrainConfig
from components.training.registry import OBJECTIVES, objectives_for
from flows.stages.common import StageContext, main
from flows.sweeps import SweepConfig
from flows.task_sweeps import ModelSpec, ReplicatedSweepConfig, run_task_sweeps


@dataclass(frozen=True)
class EnergyStageConfig(ReplicatedSweepConfig):
    """The ``train_energy`` section; its defaults are the default scale."""
    tasks: tuple[str, ...] = ("pos", "ner", "greek_morph")
    energies: tuple[str, ...] = ("blstm_crf", "blstm_crf_plus")
    objective: str = "nll"                  # an OBJECTIVES entry for chain energies
    # the BLSTM-CRF; the '+' energy overrides: fine-tuned embeddings, 30 char filters
    model: BLSTMConfig = BLSTMConfig(hidden=64)
    # patience 5: NER's dev F1 is noisy (a few hundred sentences): patience 3 stopped it at epoch 8
    optim: TrainConfig = TrainConfig(lr=0.005, epochs=20, patience=5, batch_size=16)
    max_train_sentences: int | dict[str, int] = 800     # a seeded subsample of each training split
    sweep: SweepConfig = field(default_factory=lambda: SweepConfig(num_samples=1))
    models_dir: str = "models/energy"
    plots_dir: str = "plots/train_energy"


def _variants(cfg: EnergyStageConfig, task: str) -> tuple[str, ...]:
    unknown = [e for e in cfg.energies if e not in ENERGIES]
    if unknown:
        raise ValueError(f"train_energy: unknown energies {unknown} (known {sorted(ENERGIES)})")
    OBJECTIVES.check(cfg.objective, "train_energy.objective")
    if cfg.objective not in objectives_for("chain"):
        raise ConfigError(f"train_energy.objective: {cfg.objective!r} does not train chain energies; "
                          f"expected one of {list(objectives_for('chain'))}")
    return cfg.energies


def _build(cfg: EnergyStageConfig, variant: str, task, seed: int, root, replicate: int = 0):
    # an energy builds on no trained model: a replicate differs by its seed alone
    return ENERGIES.build(variant, cfg.model, **task.sizes, glove_ids=task.glove_ids,
                          glove_vectors=task.glove_vectors, seed=seed)


def _loss(cfg: EnergyStageConfig, variant: str, model):
    objective = OBJECTIVES.build(cfg.objective)

    def loss(energy, batch):
        return objective.loss(energy.potentials(batch), batch.tags).mean()
    return loss


def _evaluate(energy, cfg: EnergyStageConfig, variant: str, task, ds, split: str, device: str) -> dict[str, float]:
    m = evaluate_inference(energy, INFERENCE.build("viterbi"), ds, task.vocabs["label"], task.metric,
                           batch_size=cfg.eval_batch_size, device=device)
    # dev: every epoch's record, saved in the model folder; test: its decoding speed goes to MLflow
    return results_only(m) if split == "dev" else m


def _recipe(cfg: EnergyStageConfig, variant: str, task) -> dict:
    return recipe("energy", variant, cfg.model, task.sizes)


SPEC = ModelSpec(section="train_energy", config=EnergyStageConfig, variants=_variants, build=_build,
                 loss=_loss, evaluate=_evaluate, recipe=_recipe, register=True)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    return run_task_sweeps("flows.stages.train_energy:SPEC", params, ctx)


if __name__ == "__main__":
    main("train_energy")
