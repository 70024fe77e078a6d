"""``infnets`` stage: inference networks and local baselines against frozen CRF energies
(Tu & Gimpel 2019, Sec. 4-5 and 7).

For each task and each (energy, architecture, mode) variant — energies from ``train_energy``
(BLSTM-CRF and BLSTM-CRF+; networks for the "+" energy get the "+" improvements), architectures
CNN ({1,3}-gram), BLSTM and seq2seq, modes ``infnet`` (E(x, A(x)) + lambda * token CE, the energy
frozen) and ``local`` (token CE only, the local baseline) — one sweep through the spine over the
learning rate and lambda (Optuna over the paper's sets at paper scale). Early stopping on dev;
the best network goes to ``models/infnet/<task>/<variant>/`` for the ``approx`` stage.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from components.inference.evaluate import evaluate_inference
from components.inference.inference_net import InferenceNetwork, InfNetObjective, InfNetTrainConfig
from components.models.infnets import InfNetConfig, build_infnet, plus_config
from flows.energy_io import load_energy
from flows.stages.common import StageContext, main
from flows.task_sweeps import ModelSpec, TaskSweepConfig, run_task_sweeps


@dataclass(frozen=True)
class InfNetStageConfig(TaskSweepConfig):
    energies: tuple[str, ...] = ("blstm_crf", "blstm_crf_plus")
    archs: tuple[str, ...] = ("cnn", "blstm", "seq2seq")
    modes: tuple[str, ...] = ("local", "infnet")
    infnet: InfNetConfig = InfNetConfig()
    lam: float = 1.0
    anneal_lambda: bool = False
    energy_dir: str = "models/energy"


class NetUnderEnergy(nn.Module):
    """An inference network with the frozen energy it is trained against (kept in eval mode)."""

    def __init__(self, net: nn.Module, energy: nn.Module):
        super().__init__()
        self.net, self.energy = net, energy.requires_grad_(False)

    def train(self, mode: bool = True):
        self.net.train(mode)
        self.energy.eval()
        self.training = mode
        return self


def parse_variant(variant: str) -> tuple[str, str, str]:
    energy, arch, mode = variant.split(".")
    return energy, arch, mode


def net_config(cfg: InfNetStageConfig, energy: str, arch: str) -> InfNetConfig:
    c = dataclasses.replace(cfg.infnet, arch=arch)
    return plus_config(c) if energy.endswith("_plus") else c


def _variants(cfg: InfNetStageConfig) -> tuple[str, ...]:
    bad = [m for m in cfg.modes if m not in ("local", "infnet")]
    if bad:
        raise ValueError(f"infnets.modes: unknown {bad}; expected 'local' and/or 'infnet'")
    return tuple(f"{e}.{a}.{m}" for e in cfg.energies for a in cfg.archs for m in cfg.modes)


def _build(cfg: InfNetStageConfig, variant: str, task, seed: int, root: Path) -> NetUnderEnergy:
    energy_name, arch, _ = parse_variant(variant)
    energy = load_energy(root / cfg.energy_dir / task.name / energy_name, energy_name, task)
    net = build_infnet(net_config(cfg, energy_name, arch), len(task.vocabs["word"]), len(task.vocabs["char"]),
                       len(task.vocabs["label"]), task.glove_ids, task.glove_vectors, seed)
    return NetUnderEnergy(net, energy)


def _loss(cfg: InfNetStageConfig, variant: str, model: NetUnderEnergy):
    _, _, mode = parse_variant(variant)
    objective = InfNetObjective(model.energy, InfNetTrainConfig(lam=cfg.lam, anneal_lambda=cfg.anneal_lambda,
                                                                local_only=mode == "local"))

    class Loss:
        epoch = 1

        def __call__(self, m: NetUnderEnergy, batch) -> torch.Tensor:
            objective.epoch = self.epoch
            return objective(m.net, batch)
    return Loss()


def _evaluate(model: NetUnderEnergy, cfg: InfNetStageConfig, variant: str, task, ds, split: str, device: str):
    return evaluate_inference(model.energy, InferenceNetwork(model.net), ds, task.vocabs["label"], task.metric,
                              batch_size=cfg.eval_batch_size, device=device)


SPEC = ModelSpec(section="infnets", config=InfNetStageConfig, variants=_variants, build=_build, loss=_loss,
                 evaluate=_evaluate)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    return run_task_sweeps("flows.stages.infnets:SPEC", params, ctx)


if __name__ == "__main__":
    main("infnets")
