"""Training an inference network against a frozen energy (Tu & Gimpel 2019, Sec. 4).

Lives in ``training`` (not ``inference``) so that dependencies point one way:
``inference -> training``, never back.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

from torch import nn

from components.inference.inference_net import InfNetObjective, InfNetTrainConfig
from components.models.infnets import InfNetConfig, plus_config
from components.training.loop import FitState, TrainConfig, fit


def train_infnet(net: nn.Module, energy: Any, train_batches: Callable[[int], Iterable[Any]], n_batches: int,
                 evaluate: Callable[[nn.Module], dict[str, float]], cfg: InfNetTrainConfig,
                 train_cfg: TrainConfig = TrainConfig(), *, state: FitState | None = None,
                 on_batch: Callable[[int, int, float], None] | None = None,
                 on_epoch: Callable[[FitState, dict[str, float]], None] | None = None) -> FitState:
    """Train ``net`` against the frozen ``energy`` with :func:`components.training.loop.fit`
    (Adam, early stopping on ``evaluate(net)["score"]``); returns the FitState, ``net`` holds the
    best-on-dev weights. ``train_batches(epoch)`` yields the epoch's batches on the net's device."""
    objective = InfNetObjective(energy, cfg)          # fit tells it the epoch (lambda annealing)
    energy.eval()
    return fit(net, objective, train_batches, n_batches, evaluate, train_cfg, state=state, on_batch=on_batch,
               on_epoch=on_epoch)


class NetUnderEnergy(nn.Module):
    """An inference network with the frozen energy it is trained against (kept in eval mode).

    Its state dict holds ``net.*`` and ``energy.*``; a saved one is read back with the recipe
    prefix ``net.`` (``components.checkpoints``)."""

    def __init__(self, net: nn.Module, energy: nn.Module):
        super().__init__()
        self.net, self.energy = net, energy.requires_grad_(False)

    def train(self, mode: bool = True):
        self.net.train(mode)
        self.energy.eval()
        self.training = mode
        return self


MODES = ("local", "infnet")     # token CE only (the local baseline) | E(x, A(x)) + lambda * token CE


def variant_name(energy: str, arch: str, mode: str) -> str:
    return f"{energy}.{arch}.{mode}"


def parse_variant(variant: str) -> tuple[str, str, str]:
    """``"<energy>.<arch>.<mode>"`` -> (energy, arch, mode)."""
    parts = variant.split(".")
    if len(parts) != 3 or parts[2] not in MODES:
        raise ValueError(f"inference-network variant {variant!r}: expected '<energy>.<arch>.<mode>' with mode in {MODES}")
    return parts[0], parts[1], parts[2]


def net_config(cfg: InfNetConfig, energy: str, arch: str) -> InfNetConfig:
    """The network trained against ``energy``: ``cfg`` with ``arch``; networks for a "+" energy
    (``*_plus``) get the "+" improvements (Tu & Gimpel Sec. 7)."""
    c = dataclasses.replace(cfg, arch=arch)
    return plus_config(c) if energy.endswith("_plus") else c
