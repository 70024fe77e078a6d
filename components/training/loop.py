"""A generic epoch loop with early stopping on a dev score.

``fit`` knows nothing of tagging: it takes a ``loss_fn(model, batch) -> scalar`` and an
``evaluate(model) -> dict`` whose ``"score"`` is maximised. It never prints; long loops report
through callbacks (``on_batch`` for a progress bar, ``on_epoch`` for logging and checkpoints), so a
flow can attach tqdm, Ray Tune reporting or MLflow. It can resume from a saved state
(``FitState``), which is how a failed Ray trial is retried from its last checkpoint.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from components.config import check_range


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 1e-3
    epochs: int = 10
    patience: int = 3          # epochs without dev improvement before stopping
    batch_size: int = 32
    grad_clip: float = 5.0
    weight_decay: float = 0.0
    min_delta: float = 0.0     # a dev score must beat the best by more than this to count as progress
    lr_patience: int = 0       # > 0: ReduceLROnPlateau (mode max, threshold min_delta absolute)
    lr_factor: float = 0.1
    # early stopping may not stop before this many epochs: a tagger of rare spans (NER) scores 0 F1
    # for its first epochs while it still only predicts O, and patience alone would stop it there
    min_epochs: int = 0

    def __post_init__(self):
        # patience 0 would stop before the first epoch (an empty history)
        check_range(self, positive=("lr", "epochs", "patience", "batch_size"),
                    nonnegative=("grad_clip", "weight_decay", "min_delta", "lr_patience", "min_epochs"),
                    within={"lr_factor": "(0, 1)"})


@dataclass
class FitState:
    """Everything needed to continue training after epoch ``epoch``."""
    epoch: int = 0
    best_score: float = -math.inf
    best_epoch: int = 0
    bad_epochs: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    model_state: dict[str, Any] | None = None
    best_model_state: dict[str, Any] | None = None
    optim_state: dict[str, Any] | None = None
    sched_state: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FitState":
        return cls(**d)


def fit(model: torch.nn.Module, loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
        train_batches: Callable[[int], Iterable[Any]], n_batches: int,
        evaluate: Callable[[torch.nn.Module], dict[str, float]], cfg: TrainConfig, *,
        state: FitState | None = None,
        on_batch: Callable[[int, int, float], None] | None = None,
        on_epoch: Callable[[FitState, dict[str, float]], None] | None = None,
        before_eval: Callable[[int], dict[str, float]] | None = None) -> FitState:
    """Train ``model`` in place; on return it holds the best-on-dev weights.

    train_batches(epoch) yields the epoch's batches (the caller seeds the shuffle by epoch).
    Only parameters with ``requires_grad`` are optimised (freeze a part to train the rest).
    A ``loss_fn`` with an ``epoch`` attribute is told the (1-based) epoch before its batches.
    ``before_eval(epoch)`` runs after an epoch's updates and before the dev evaluation (online
    scaling re-selects its alpha there); what it returns joins the epoch's record. Stopping:
    ``patience`` epochs in a row without a dev gain above ``min_delta``, but never before
    ``min_epochs``; with ``lr_patience`` the
    learning rate is cut by ``lr_factor`` after that many such epochs (S&O App. B).
    """
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                           weight_decay=cfg.weight_decay)
    sched = (torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="max", factor=cfg.lr_factor, patience=cfg.lr_patience - 1, threshold=cfg.min_delta,
        threshold_mode="abs") if cfg.lr_patience > 0 else None)
    state = state or FitState()
    if state.model_state is not None:
        model.load_state_dict(state.model_state)
    if state.optim_state is not None:
        opt.load_state_dict(state.optim_state)
    if sched is not None and state.sched_state is not None:
        sched.load_state_dict(state.sched_state)
    while state.epoch < cfg.epochs and (state.bad_epochs < cfg.patience or state.epoch < cfg.min_epochs):
        epoch = state.epoch + 1
        if hasattr(loss_fn, "epoch"):
            loss_fn.epoch = epoch          # schedules inside the loss (e.g. lambda annealing) follow the epoch
        model.train()
        t0 = time.perf_counter()
        total, count = 0.0, 0
        for i, batch in enumerate(train_batches(epoch)):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"epoch {epoch}, batch {i}: the training loss is {loss.item()}")
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            total += loss.item()
            count += 1
            if on_batch:
                on_batch(i + 1, n_batches, loss.item())
        train_s = time.perf_counter() - t0
        extra = before_eval(epoch) if before_eval else {}
        model.eval()
        with torch.no_grad():
            dev = evaluate(model)
        record = {"epoch": float(epoch), "train_loss": total / max(count, 1), "train_seconds": train_s,
                  "lr": float(opt.param_groups[0]["lr"]), **extra, **{f"dev_{k}": v for k, v in dev.items()}}
        state.history.append(record)
        state.epoch = epoch
        if sched is not None:
            sched.step(dev["score"])
            state.sched_state = sched.state_dict()
        if dev["score"] > state.best_score + cfg.min_delta or state.best_model_state is None:
            state.best_score, state.best_epoch, state.bad_epochs = dev["score"], epoch, 0
            state.best_model_state = copy.deepcopy(model.state_dict())
        else:
            state.bad_epochs += 1
        state.model_state = model.state_dict()
        state.optim_state = opt.state_dict()
        if on_epoch:
            on_epoch(state, record)
    if state.best_model_state is not None:
        model.load_state_dict(state.best_model_state)
    return state
