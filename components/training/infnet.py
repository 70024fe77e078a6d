"""Training an inference network against a frozen energy (Tu & Gimpel 2019, Sec. 4).

Lives in ``training`` (not ``inference``) so that dependencies point one way:
``inference -> training``, never back.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from torch import nn

from components.inference.inference_net import InfNetObjective, InfNetTrainConfig
from components.training.loop import FitState, TrainConfig, fit


def train_infnet(net: nn.Module, energy: Any, train_batches: Callable[[int], Iterable[Any]], n_batches: int,
                 evaluate: Callable[[nn.Module], dict[str, float]], cfg: InfNetTrainConfig,
                 train_cfg: TrainConfig = TrainConfig(), *, state: FitState | None = None,
                 on_batch: Callable[[int, int, float], None] | None = None,
                 on_epoch: Callable[[FitState, dict[str, float]], None] | None = None) -> FitState:
    """Train ``net`` against the frozen ``energy`` with :func:`components.training.loop.fit`
    (Adam, early stopping on ``evaluate(net)["score"]``); returns the FitState, ``net`` holds the
    best-on-dev weights. ``train_batches(epoch)`` yields the epoch's batches on the net's device."""
    objective = InfNetObjective(energy, cfg)

    def batches(epoch: int) -> Iterable[Any]:
        objective.epoch = epoch
        return train_batches(epoch)

    energy.eval()
    return fit(net, objective, batches, n_batches, evaluate, train_cfg, state=state, on_batch=on_batch,
               on_epoch=on_epoch)
