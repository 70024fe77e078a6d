"""A generic epoch loop with early stopping on a dev score.

``fit`` knows nothing of tagging: it takes a ``loss_fn(model, batch) -> scalar`` and an
``evaluate(model) -> dict`` whose ``"score"`` is maximised. It never prints; long loops report
through callbacks (``on_batch`` for a progress bar, ``on_epoch`` for logging and checkpoints), so a
flow can attach tqdm, Ray Tune reporting or MLflow. It can resume from a saved state
(``FitState``), which is how a failed Ray trial is retried from its last checkpoint.

A ``FitState`` holds everything the next epoch depends on: the weights, the optimiser's and the
scheduler's states, the early-stopping counters and every random number generator the training
draws from (:func:`rng_state`: Python's ``random``, NumPy's global generator, torch's CPU generator
and each CUDA device's), captured after the epoch's dev evaluation. A resumed fit restores them
before its first epoch, so interrupt + resume (or a crash + Tune's retry) trains exactly as an
uninterrupted run. The batch order needs no state: the caller seeds each epoch's shuffle by the
epoch's number (``train_batches(epoch)``).

An epoch's record (``history``) holds what it measured, not how long it took: its wall time goes to
``on_epoch``'s record (``train_seconds``, for Tune and MLflow) and to ``FitState.seconds``, which a
checkpoint does not save, so a saved state or history is the same on every machine and every run.
"""
from __future__ import annotations

import copy
import math
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
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
    rng_state: dict[str, Any] | None = None      # rng_state() after the last epoch (None: not started)
    # each epoch's training wall time, in this process only: not saved (to_dict), so a checkpoint's
    # content depends on the code and data alone; a resumed fit lists the epochs it ran itself
    seconds: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """What a checkpoint saves: everything but the timings, in a canonical form (:func:`canonical`)
        so that the same state always pickles to the same bytes."""
        return canonical({k: v for k, v in self.__dict__.items() if k != "seconds"})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FitState":
        return cls(**d)


def canonical(x: Any) -> Any:
    """``x`` with fresh containers and every string interned. Pickle (and so ``torch.save``) writes a
    string once and refers back to it when the same *object* recurs, so a state whose equal strings
    are one object in one run (a history key and a field name, both literals) and separate objects in
    another (read back from a checkpoint) pickles to other bytes; interned, they never differ."""
    if isinstance(x, str):
        return sys.intern(x)
    if isinstance(x, dict):
        return {canonical(k): canonical(v) for k, v in x.items()}
    if isinstance(x, list):
        return [canonical(v) for v in x]
    if isinstance(x, tuple):
        return tuple(canonical(v) for v in x)
    return x


def rng_state() -> dict[str, Any]:
    """Every global generator a training step may draw from, in a form ``torch.load(...,
    weights_only=True)`` reads back (tensors, ints, strings, lists): Python's ``random``, NumPy's
    legacy global generator, torch's CPU generator and, when CUDA is initialised, each device's."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the generators saved by :func:`rng_state`. A CUDA state saved on a machine with other
    devices than this one is an error: the run would continue with other random numbers."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda is not None:
        if not torch.cuda.is_available() or torch.cuda.device_count() != len(cuda):
            raise RuntimeError(f"the checkpoint holds the random state of {len(cuda)} CUDA device(s), this process "
                               f"sees {torch.cuda.device_count() if torch.cuda.is_available() else 0}: resuming here "
                               f"would not continue the same run")
        torch.cuda.set_rng_state_all(cuda)


def fit(model: torch.nn.Module, loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
        train_batches: Callable[[int], Iterable[Any]], n_batches: int,
        evaluate: Callable[[torch.nn.Module], dict[str, float]], cfg: TrainConfig, *,
        state: FitState | None = None,
        on_batch: Callable[[int, int, float], None] | None = None,
        on_epoch: Callable[[FitState, dict[str, float]], None] | None = None,
        before_eval: Callable[[int], dict[str, float]] | None = None,
        selectable: Callable[[int], bool] | None = None) -> FitState:
    """Train ``model`` in place; on return it holds the best-on-dev weights.

    train_batches(epoch) yields the epoch's batches (the caller seeds the shuffle by epoch).
    Only parameters with ``requires_grad`` are optimised (freeze a part to train the rest).
    A ``loss_fn`` with an ``epoch`` attribute is told the (1-based) epoch before its batches.
    ``before_eval(epoch)`` runs after an epoch's updates and before the dev evaluation (online
    scaling re-selects its alpha there); what it returns joins the epoch's record. Stopping:
    ``patience`` epochs in a row without a dev gain above ``min_delta``, but never before
    ``min_epochs``; with ``lr_patience`` the
    learning rate is cut by ``lr_factor`` after that many such epochs (S&O App. B).
    ``selectable(epoch)`` False: the epoch's model may not be the one kept (an annealed-alpha run's
    epochs whose alpha has not left its start: the model is then not the annealed one); such an epoch
    is recorded, counts toward neither the best nor patience, and if no epoch is selectable the fit
    returns ``best_score`` -inf with the last weights.
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
    if state.rng_state is not None:
        set_rng_state(state.rng_state)
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
        record = {"epoch": float(epoch), "train_loss": total / max(count, 1),
                  "lr": float(opt.param_groups[0]["lr"]), **extra, **{f"dev_{k}": v for k, v in dev.items()}}
        state.history.append(record)
        state.seconds.append(train_s)
        state.epoch = epoch
        if sched is not None:
            sched.step(dev["score"])
            state.sched_state = sched.state_dict()
        if selectable is not None and not selectable(epoch):
            pass                           # neither kept nor a bad epoch (see the docstring)
        elif dev["score"] > state.best_score + cfg.min_delta or state.best_model_state is None:
            state.best_score, state.best_epoch, state.bad_epochs = dev["score"], epoch, 0
            state.best_model_state = copy.deepcopy(model.state_dict())
        else:
            state.bad_epochs += 1
        # snapshots, not the live tensors: the state must stay "after epoch `epoch`" when the model
        # is reset to its best weights below or trained on (a resumed run saves what it loaded)
        state.model_state = copy.deepcopy(model.state_dict())
        state.optim_state = copy.deepcopy(opt.state_dict())
        state.rng_state = rng_state()
        if on_epoch:
            on_epoch(state, {**record, "train_seconds": train_s})
    if state.best_model_state is not None:
        model.load_state_dict(state.best_model_state)
    return state
