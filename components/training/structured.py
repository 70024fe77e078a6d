"""Stage vs joint training of deep structured models (Shevchenko & Osokin, Sec. 2 and App. B).

Procedures (``train_procedure``):

- ``unary``: the unary network alone, trained as a per-position classifier (softmax of U); it
  predicts the per-position argmax of U (the "Unary" baseline of S&O Sec. 6.2).
- ``stage``: (1) ``unary`` as above; (2) the pairwise part alone, minimising the objective with
  the unary network frozen; (3) everything jointly (fine-tuning) — three optimisation runs, each
  with its own learning rate and stopping rule.
- ``joint``: one run of the objective over all parameters from the start, under the model's
  scaling method (``components.training.scaling.SCALINGS``): plain (``none``), fixed alpha,
  online, offline, offline with the regulariser, or temperature.

Stopping (S&O App. B). Every phase is Adam with ``ReduceLROnPlateau`` (the learning rate cut by 10
after ``lr_patience`` epochs in a row whose dev score does not beat the best by more than
``min_delta`` = 1e-3) and stops after ``patience`` such epochs (App. B: 3 and 7 epochs for OCR, 1
and 3 for chunking, 5 and 13 for segmentation); each phase ends on its best-on-dev weights (online
scaling's alpha is part of the state). Budgets: a phase never runs more than its ``epochs``, and
``ProcedureConfig.budget`` (> 0) caps the epochs of a whole procedure, so stage and joint training
get the same maximum: joint runs at most ``budget`` epochs; the stage's three phases share
``budget`` in order, each capped at what is left less one epoch per phase still to come (every
phase runs at least one epoch; ``budget`` must be >= the number of phases). The last history
record of every phase says why it ended (``stopped_by``): ``patience`` (the App. B rule fired),
``budget`` (the shared cap) or ``epochs`` (the phase's own cap). After every epoch the history records the
phase, dev score, learning rate, alpha and the unary/pairwise ratio ||U|| / ||W|| of the
potentials the model uses, averaged over a fixed training subset (S&O Fig. 1b/1c).

A :class:`StructuredTask` says how a model family is trained and scored: the objective, the unary
classifier loss, prediction, and the per-example metric; ``ChainTask`` serves the chain CRFs and
``GridTask`` the Gaussian CRF, each with an objective built from ``OBJECTIVES`` (its loss and the
paper's prediction rule).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Protocol

import torch
import torch.nn.functional as F

from components.config import ConfigError, check_range
from components.inference.oracle import instance_counts
from components.seeds import seed_for
from components.training.registry import OBJECTIVES, objectives_for
from components.training.loop import FitState, TrainConfig, fit
from components.training.scaling import ScaledModel

PROCEDURES = ("unary", "stage", "joint")
PHASES = ("unary", "pairwise", "joint")        # the optimisation runs a procedure is made of


class StructuredTask(Protocol):
    def loss(self, p: Any, batch: Any) -> torch.Tensor: ...            # [B] the objective
    def unary_loss(self, p: Any, batch: Any) -> torch.Tensor: ...      # [B] classifier loss on U alone
    def predict(self, p: Any) -> torch.Tensor: ...                    # labels
    def unary_predict(self, p: Any) -> torch.Tensor: ...
    def counts(self, pred: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]: ...
    # counts -> (correct [B], total [B]) per example, for the metric below
    metric: str                                                        # "per_example" | "pooled" | "span_f1"


@dataclass(frozen=True)
class ChainTask:
    """Chain CRFs. ``metric``: ``per_example`` = accuracy averaged over sequences (the OCR metric,
    S&O Sec. 6.1); ``pooled`` = token accuracy over the corpus; ``span_f1`` = conlleval span F1 over
    the corpus (the paper's chunking metric; ``labels`` gives the BIO/BIOES label strings by id).
    Objectives marked ``per_position`` (the CE objectives) are averaged over positions (eq. 5); LL
    and SSVM are per sequence (eqs 4, 7). ``objective_cfg``: the objective's config (None: its defaults)."""
    objective: str = "marginal_ce"
    metric: Literal["per_example", "pooled", "span_f1"] = "per_example"
    objective_cfg: Any = None
    labels: tuple[str, ...] = ()
    _objective: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.metric == "span_f1" and not self.labels:
            raise ConfigError("ChainTask: metric 'span_f1' needs the label strings (labels)")
        chain = objectives_for("chain")
        if self.objective not in chain:
            raise ConfigError(f"ChainTask: objective {self.objective!r} is not a chain objective; expected one of {list(chain)}")
        object.__setattr__(self, "_objective", OBJECTIVES.build(self.objective, self.objective_cfg))

    def loss(self, p, batch):
        out = self._objective.loss(p, batch.tags)
        if self._objective.per_position:
            out = out / p.mask.sum(1).clamp_min(1).to(out.dtype)
        return out

    def unary_loss(self, p, batch):
        ce = F.cross_entropy(p.unary.transpose(1, 2), batch.tags, reduction="none") * p.mask
        return ce.sum(1) / p.mask.sum(1).clamp_min(1)

    def predict(self, p):
        return self._objective.predict(p)

    def unary_predict(self, p):
        return p.unary.argmax(-1) * p.mask

    def counts(self, pred, batch):
        if self.metric == "span_f1":          # (2 c, p + g) per sentence: pooled, 2 sum c / sum (p + g) = F1
            c, p, g = instance_counts(pred, batch.tags, batch.mask, self.labels, "span_f1").unbind(-1)
            return 2 * c, p + g
        ok = ((pred == batch.tags) & batch.mask).sum(1)
        return ok, batch.mask.sum(1)


@dataclass
class GridTask:
    """Dense labelling with the Gaussian CRF (``components.energies.gcrf.GaussianCRF``) and a grid
    objective of ``OBJECTIVES`` (``gcrf_ce``: the per-pixel CE of softmax(s*), S&O eq. 14, already
    averaged over pixels; prediction argmax of s*, eq. 13). ``ignore_label`` is left out of the
    metric (the snakes background: scoring only the snake cells keeps the all-background answer
    from looking good)."""
    energy: Any
    ignore_label: int | None = 0
    metric: str = "per_example"
    objective: str = "gcrf_ce"
    objective_cfg: Any = None

    def __post_init__(self):
        grid = objectives_for("grid")
        if self.objective not in grid:
            raise ConfigError(f"GridTask: objective {self.objective!r} is not a grid objective; expected one of {list(grid)}")
        self._objective = OBJECTIVES.build(self.objective, self.objective_cfg, energy=self.energy)

    def loss(self, p, batch):
        return self._objective.loss(p, batch.y)

    def unary_loss(self, p, batch):
        return self.energy.unary_loss(p, batch.y)

    def predict(self, p):
        return self._objective.predict(p)

    def unary_predict(self, p):
        return p.unary.argmax(1)

    def counts(self, pred, batch):
        keep = batch.mask if self.ignore_label is None else batch.mask & (batch.y != self.ignore_label)
        return ((pred == batch.y) & keep).flatten(1).sum(1), keep.flatten(1).sum(1)


@torch.no_grad()
def evaluate(model: ScaledModel, task: StructuredTask, batches: Iterable[Any], *, unary_only: bool = False) -> float:
    """The task's metric as a fraction in [0, 1]."""
    was = model.training
    model.eval()
    correct, total, per_example = 0.0, 0.0, []
    for b in batches:
        p = model.potentials(b)
        pred = task.unary_predict(p) if unary_only else task.predict(p)
        ok, n = task.counts(pred, b)
        correct += float(ok.sum())
        total += float(n.sum())
        per_example.extend((ok.double() / n.double())[n > 0].tolist())
    model.train(was)
    if task.metric == "per_example":
        return sum(per_example) / max(len(per_example), 1)
    return correct / max(total, 1.0)


@torch.no_grad()
def mean_ratio(model: ScaledModel, batches: Iterable[Any], *, raw: bool = False) -> float:
    """Mean over examples of ||U|| / ||W|| for the potentials the model uses (or its raw ones).

    Examples without a pairwise term (||W|| = 0: a length-1 sequence once a shared transition has
    been expanded per position, as offline scaling does) have no ratio and are skipped; otherwise
    ``ratio``'s clamp would turn them into ~1e12 and swamp the mean. NaN if no example has one."""
    was = model.training
    model.eval()
    vals = []
    for b in batches:
        r = model.raw_potentials(b)
        p = r if raw else model.potentials(b, raw=r)
        pn = p.pairwise_norm()
        keep = pn > 0
        vals.append(p.unary_norm()[keep] / pn[keep])
    model.train(was)
    v = torch.cat(vals)
    return float(v.mean()) if v.numel() else float("nan")


@dataclass(frozen=True)
class ProcedureConfig:
    unary: TrainConfig = TrainConfig(lr=1e-3, epochs=20, patience=7, batch_size=32, min_delta=1e-3, lr_patience=3)
    pairwise: TrainConfig = TrainConfig(lr=1e-2, epochs=10, patience=7, batch_size=32, min_delta=1e-3, lr_patience=3)
    finetune: TrainConfig = TrainConfig(lr=1e-4, epochs=10, patience=7, batch_size=32, min_delta=1e-3, lr_patience=3)
    joint: TrainConfig = TrainConfig(lr=1e-3, epochs=20, patience=7, batch_size=32, min_delta=1e-3, lr_patience=3)
    budget: int = 0           # > 0: the most epochs of a whole procedure (stage's phases together = joint's)

    def __post_init__(self):
        check_range(self, nonnegative=("budget",))
        if 0 < self.budget < 3:
            raise ConfigError(f"procedure.budget: {self.budget} cannot give the stage procedure's three phases "
                              "one epoch each (0 = no shared cap, else >= 3)")

    def caps(self, procedure: str) -> list[tuple[str, TrainConfig]]:
        """The phases of ``procedure`` with their configs (phase name, config); ``epochs`` of each is
        its own cap, the shared ``budget`` is applied as the phases run (:func:`phase_cap`)."""
        return {"unary": [("unary", self.unary)],
                "stage": [("unary", self.unary), ("pairwise", self.pairwise), ("joint", self.finetune)],
                "joint": [("joint", self.joint)]}[procedure]


def phase_cap(tc: TrainConfig, budget: int, used: int, phases_after: int) -> int:
    """The epoch cap of a phase: its own ``epochs``, and with a ``budget`` (> 0) what is left of it
    after ``used`` epochs, less one epoch for each of the ``phases_after`` phases still to come."""
    if budget <= 0:
        return tc.epochs
    return max(1, min(tc.epochs, budget - used - phases_after))


@dataclass
class ProcedureResult:
    history: list[dict[str, float | str]] = field(default_factory=list)
    minutes: float = 0.0
    epochs: int = 0
    alpha: float = 1.0
    stopped_by: list[tuple[str, str]] = field(default_factory=list)   # (phase, patience | budget | epochs)


def _set_trainable(model: ScaledModel, part: str) -> None:
    e = model.energy
    for q in model.parameters():
        q.requires_grad_(part == "all")
    if part == "unary":
        for q in e.unary_parameters():
            q.requires_grad_(True)
    elif part == "pairwise":
        for q in e.pairwise_parameters():
            q.requires_grad_(True)


def train_procedure(model: ScaledModel, task: StructuredTask, procedure: str, cfg: ProcedureConfig, *,
                    train_batches: Callable[[int, int], Iterable[Any]], n_train: int,
                    dev_batches: Callable[[], Iterable[Any]], subset_batches: Callable[[], Iterable[Any]],
                    seed: int = 0, on_epoch: Callable[[dict[str, float | str]], None] | None = None,
                    on_batch: Callable[[int, int, float], None] | None = None) -> ProcedureResult:
    """Train ``model`` in place by ``procedure``; the model ends on its best-on-dev weights.

    train_batches(epoch_seed, batch_size) yields training batches shuffled by ``epoch_seed =
    seed_for(seed, "epoch", n)`` for the n-th epoch counted across phases (a phase's shuffles differ
    from the previous phase's; ``seed`` is the base, from the caller's seed policy); dev_batches()
    the dev set; subset_batches() the fixed training subset D (online scaling's alpha selection and
    the ratio curves). ``n_train`` is the number of training examples.
    """
    if procedure not in PROCEDURES:
        raise ValueError(f"procedure {procedure!r}: expected one of {PROCEDURES}")
    if procedure != "joint" and model.method_name != "none":
        raise ValueError(f"procedure {procedure!r} trains with scaling method 'none', got {model.method_name!r}")
    result = ProcedureResult()
    t0 = time.perf_counter()
    phases = cfg.caps(procedure)
    for k, (phase, tc) in enumerate(phases):
        cap = phase_cap(tc, cfg.budget, result.epochs, len(phases) - k - 1)
        own_cap = cap == tc.epochs
        tc = dataclasses.replace(tc, epochs=cap)
        _set_trainable(model, {"unary": "unary", "pairwise": "pairwise", "joint": "all"}[phase])
        unary_only = phase == "unary"

        def loss_fn(m, b, unary_only=unary_only):
            raw = m.raw_potentials(b)
            if unary_only:
                return task.unary_loss(raw, b).mean()
            return (task.loss(m.potentials(b, raw=raw), b) + m.regulariser(raw)).mean()

        def before_eval(epoch, phase=phase):
            extra: dict[str, float] = {}
            if phase == "joint" and model.method.selects_alpha:
                alpha, losses = model.select_online_alpha(subset_batches(), lambda b: b, task.loss)
                i = model.method.grid().index(alpha)
                extra["subset_loss"] = losses[i]
                # the loss one grid step either side: how sharply the subset prefers this alpha
                extra["subset_loss_down"] = losses[i - 1] if i > 0 else float("nan")
                extra["subset_loss_up"] = losses[i + 1] if i + 1 < len(losses) else float("nan")
            extra["alpha"] = float(model.alpha)
            extra["ratio"] = mean_ratio(model, subset_batches())
            return extra

        def epoch_hook(state: FitState, record: dict[str, float], phase=phase):
            rec = {**record, "phase": phase, "epoch": float(result.epochs + state.epoch),
                   "dev_score": record["dev_score"]}
            result.history.append(rec)
            if on_epoch:
                on_epoch(rec)

        n_batches = -(-n_train // tc.batch_size)
        offset = result.epochs      # epochs are numbered across phases; so are the shuffles
        state = fit(model, loss_fn,
                    lambda ep, tc=tc, offset=offset: train_batches(seed_for(seed, "epoch", offset + ep), tc.batch_size),
                    n_batches, lambda m, u=unary_only: {"score": evaluate(m, task, dev_batches(), unary_only=u)},
                    tc, on_epoch=epoch_hook, on_batch=on_batch, before_eval=before_eval)
        result.epochs += state.epoch
        why = ("patience" if state.bad_epochs >= tc.patience else "epochs" if own_cap else "budget")
        result.stopped_by.append((phase, why))
        result.history[-1]["stopped_by"] = why
    _set_trainable(model, "all")
    result.minutes = (time.perf_counter() - t0) / 60.0
    result.alpha = float(model.alpha)
    return result
