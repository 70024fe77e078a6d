"""``infnets`` stage: inference networks and local baselines against frozen CRF energies
(Tu & Gimpel 2019, Sec. 4-5 and 7).

For each task and each (energy, architecture, mode) variant — energies from ``train_energy``
(BLSTM-CRF and BLSTM-CRF+; networks for the "+" energy get the "+" improvements), architectures
CNN ({1,3}-gram), BLSTM and seq2seq, modes ``infnet`` (E(x, A(x)) + lambda * token CE, the energy
frozen) and ``local`` (token CE only, the local baseline) — one sweep through the spine over the
learning rate and lambda (Optuna over the paper's sets at paper scale; a ``local`` network's sweep
of several trials leaves lambda, which has no effect on it, out of its space). Early stopping on dev;
the best network goes to ``models/infnet/<task>/<variant>/`` with the recipe that rebuilds it; the
dev evaluations its epochs' records keep leave out their timings (:mod:`components.metrics.run_facts`).

Replicates (``infnets.seeds``, replicate indices; :mod:`flows.task_sweeps`): replicate k > 0 of each
network (inference network or local baseline) is trained against replicate k of its energy
(``models/energy/<task>/<energy>/replicate<k>/``) with the learning rate and lambda replicate 0's sweep
chose, into ``models/infnet/<task>/<variant>/replicate<k>/``. Every replicate of ``infnets.seeds``
must be one of ``train_energy.seeds``: the stage checks, before any work, that each replicate's
energies exist, and names the missing folder otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components import checkpoints
from components.config import ConfigError, check_range
from components.recipes import recipe
from components.inference.registry import INFERENCE
from components.inference.evaluate import evaluate_inference
from components.metrics.run_facts import results_only
from components.inference.inference_net import InfNetObjective, InfNetTrainConfig
from components.models.encoders import BLSTMConfig
from components.models.infnets import InfNetConfig, build_infnet
from components.training.infnet import MODES, NetUnderEnergy, net_config, parse_variant, variant_name
from components.training.loop import TrainConfig
from flows.stages.common import StageContext, main
from flows.sweeps import SweepConfig
from flows.task_sweeps import ModelSpec, ReplicatedSweepConfig, replicate_folder, replicates, run_task_sweeps


@dataclass(frozen=True)
class InfNetStageConfig(ReplicatedSweepConfig):
    """The ``infnets`` section; its defaults are the default scale."""
    tasks: tuple[str, ...] = ("pos", "ner", "greek_morph")
    energies: tuple[str, ...] = ("blstm_crf", "blstm_crf_plus")
    archs: tuple[str, ...] = ("cnn", "blstm", "seq2seq")
    modes: tuple[str, ...] = MODES
    infnet: InfNetConfig = InfNetConfig(hidden=50)
    model: BLSTMConfig = BLSTMConfig()      # inherited, unused: the networks are built from ``infnet``
    lam: float = 1.0
    anneal_lambda: bool = False
    energy_dir: str = "models/energy"
    # energy -> task -> the archs trained under that energy for that task (absent: ``archs``). Tables
    # 4 and 6 use one arch per task under BLSTM-CRF+ (``approx.arch``), so only those are trained.
    energy_archs: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=lambda: {
        "blstm_crf_plus": {"pos": ("cnn",), "ner": ("seq2seq",), "greek_morph": ("blstm",)}})
    # min_epochs 8: NER's networks score 0 F1 for their first 5 epochs
    optim: TrainConfig = TrainConfig(lr=0.01, epochs=12, patience=3, min_epochs=8, batch_size=16)
    # a seeded subsample: the energies' 800 (NER's networks need that many to learn)
    max_train_sentences: int | dict[str, int] = 800
    sweep: SweepConfig = field(default_factory=lambda: SweepConfig(num_samples=1))
    models_dir: str = "models/infnet"
    plots_dir: str = "plots/infnets"

    def __post_init__(self):
        super().__post_init__()                       # ReplicatedSweepConfig's checks
        check_range(self, nonnegative=("lam",))
        for energy, per_task in self.energy_archs.items():
            if energy not in self.energies:
                raise ConfigError(f"infnets.energy_archs: {energy!r} is not one of infnets.energies {list(self.energies)}")
            for task, archs in per_task.items():
                if not archs:
                    raise ConfigError(f"infnets.energy_archs.{energy}.{task}: give at least one arch")


def _variants(cfg: InfNetStageConfig, task: str) -> tuple[str, ...]:
    bad = [m for m in cfg.modes if m not in MODES]
    if bad:
        raise ValueError(f"infnets.modes: unknown {bad}; expected some of {MODES}")
    return tuple(variant_name(e, a, m) for e in cfg.energies
                 for a in cfg.energy_archs.get(e, {}).get(task, cfg.archs) for m in cfg.modes)


def _build(cfg: InfNetStageConfig, variant: str, task, seed: int, root, replicate: int = 0) -> NetUnderEnergy:
    energy_name, arch, _ = parse_variant(variant)
    # replicate k's network against replicate k's energy
    energy = checkpoints.load(replicate_folder(root / cfg.energy_dir / task.name / energy_name, replicate),
                              expect="energy")
    net = build_infnet(net_config(cfg.infnet, energy_name, arch), **task.sizes, glove_ids=task.glove_ids,
                       glove_vectors=task.glove_vectors, seed=seed)
    return NetUnderEnergy(net, energy)


def _loss(cfg: InfNetStageConfig, variant: str, model: NetUnderEnergy):
    _, _, mode = parse_variant(variant)
    objective = InfNetObjective(model.energy, InfNetTrainConfig(lam=cfg.lam, anneal_lambda=cfg.anneal_lambda,
                                                                local_only=mode == "local"))
    return objective.on(lambda m: m.net)


def _evaluate(model: NetUnderEnergy, cfg: InfNetStageConfig, variant: str, task, ds, split: str, device: str):
    m = evaluate_inference(model.energy, INFERENCE.build("infnet", net=model.net), ds, task.vocabs["label"],
                           task.metric, batch_size=cfg.eval_batch_size, device=device)
    # dev: every epoch's record, saved in the model folder; test: its decoding speed goes to MLflow
    return results_only(m) if split == "dev" else m


def _recipe(cfg: InfNetStageConfig, variant: str, task) -> dict:
    energy_name, arch, _ = parse_variant(variant)
    return recipe("infnet", arch, net_config(cfg.infnet, energy_name, arch), task.sizes, prefix="net.")


#: the settings that act through lambda alone: without effect on a network trained in ``local`` mode
LAMBDA_KEYS = ("infnets.lam", "infnets.anneal_lambda")


def _sweep_space(cfg: InfNetStageConfig, variant: str) -> dict[str, dict[str, Any]]:
    """The space a variant's sweep of ``num_samples > 1`` searches: ``local`` mode trains on token
    cross-entropy alone (``local_only``), so lambda is left out of its space — its trials would
    train the same network for each lambda — and stays at ``infnets.lam``; ``infnet`` mode searches
    ``sweep.space`` whole."""
    if parse_variant(variant)[2] == "local":
        return {k: v for k, v in cfg.sweep.space.items() if k not in LAMBDA_KEYS}
    return cfg.sweep.space


def _check(cfg: InfNetStageConfig, ctx: StageContext) -> None:
    """Before any work: the energy of every replicate after 0 exists (``infnets.seeds`` must be a subset
    of ``train_energy.seeds``); replicate 0's is the stage's dependency as before."""
    for task in cfg.tasks:
        for k in replicates(cfg)[1:]:
            for energy in dict.fromkeys(parse_variant(v)[0] for v in _variants(cfg, task)):
                folder = replicate_folder(ctx.path(cfg.energy_dir) / task / energy, k)
                if not (folder / "model.pt").exists():
                    raise ConfigError(f"infnets.seeds: replicate {k} trains against the energy in {folder}, which does "
                                      f"not exist: infnets.seeds {list(cfg.seeds)} must be a subset of "
                                      f"train_energy.seeds (run train_energy with replicate {k})")


SPEC = ModelSpec(section="infnets", config=InfNetStageConfig, variants=_variants, build=_build, loss=_loss,
                 evaluate=_evaluate, recipe=_recipe, check=_check, sweep_space=_sweep_space)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    return run_task_sweeps("flows.stages.infnets:SPEC", params, ctx)


if __name__ == "__main__":
    main("infnets")
