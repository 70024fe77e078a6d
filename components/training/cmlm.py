r"""Mask-predict training of a conditional MLM (Ghazvininejad et al. 2019, Sec. 3; thesis Sec. 6.5).

For a pair (x, y) with target y = y_1 .. y_T (subword ids without eos):

    n ~ Uniform{1, .., T};  M = n positions of y drawn uniformly without replacement
    y_obs = y with [MASK] at M
    L(x, y) = - 1/|M| sum_{t in M} log p(y_t | y_obs, x)  -  w log p_len(T | x)

averaged over a batch as Mask-Predict does: the token term is the mean over all masked tokens
of the batch, the length term (``length_weight`` w, 0.1 by default) the mean over its pairs.
Optional label smoothing eps spreads eps of the token target mass uniformly over the *allowed*
ids (the disallowed ones have -inf logits, so smoothing over all V would be infinite).

Batches (:func:`cmlm_batch`): a :class:`components.data.translation.TranslationBatch` with its
eos stripped: ``targets`` long [B, T] (0 at padding), ``mask`` bool [B, T], ``lengths`` long [B]
(= T_b, no eos). A target that does not end in eos, is empty after it, or holds a disallowed id
(eos inside, pad inside, unk, or an id >= V) is a ``ValueError`` naming the row and position.

Training (:func:`train_cmlm`): AdamW with a linear warm-up to ``lr`` over ``warmup_steps`` and a
constant, linear or inverse-square-root rate after it (``decay``, :func:`lr_factor`), gradient clipping, batches bucketed by source length and reshuffled each
epoch, masks drawn from a seeded generator; early stopping on a dev metric (``select_on``: the
masked-token loss by default, or the objective without label smoothing; on masks drawn ONCE from a
fixed seed so the epochs are comparable), ``patience`` epochs without a gain, then the best epoch's
weights are restored. Every stream comes
from the ``seed`` argument (a flow derives it from ``base.seed``; the config has no seed) by
:func:`components.seeds.seed_for`: the training subsample ``(seed, "subsample")``, the dev masks
``(seed, "dev_masks")``, dropout ``(seed, "dropout")``, and per epoch e its batch order
``(seed, "batches", "epoch", e)`` and masks ``(seed, "masks", "epoch", e)``.

Dev metrics (:func:`evaluate_cmlm`, all means over masked tokens or pairs):

* ``loss`` (the stopping criterion) = ``token_loss`` + w ``length_nll`` under the objective's
  masks; ``token_acc`` (argmax = reference) and ``unigram_loss``: the NLL of the same masked
  tokens under the training unigram distribution (add-``unigram_alpha`` over the allowed ids) —
  a model that learned anything has ``token_loss`` well below it;
* for each ratio r of ``dev_ratios`` (masking max(1, round(r T)) positions; r = 1 is the first
  step of mask-predict decoding): ``token_loss_r<100 r>``, ``token_acc_r<100 r>``,
  ``unigram_loss_r<100 r>`` — of the best epoch only (``CMLMTrainResult.best``; the per-epoch
  records skip them: four more decoder passes over dev each epoch);
* ``length_nll`` and ``length_acc`` (argmax of ``predict_length`` = T).

Dev pairs the model cannot score (target or source longer than its ``max_target_len`` /
``max_source_len``, a disallowed id in the target) are left out of the dev metrics and counted in
:attr:`CMLMTrainResult.stats`; training pairs it cannot score are an error (the data and model
configs disagree).
"""
from __future__ import annotations

import copy
import time
from functools import partial
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np
import torch
from torch import Tensor

from components.config import check_range, field_error
from components.data.sampling import subsample_indices
from components.inference.mask_predict import MaskPredictConfig, mask_predict
from components.metrics.bleu import corpus_bleu
from components.seeds import seed_for

__all__ = ["CMLMBatch", "CMLMTrainConfig", "CMLMTrainResult", "CMLMEvalSet", "cmlm_batch", "uniform_masking",
           "ratio_masking", "mask_predict_loss", "unigram_log_probs", "make_eval_set", "evaluate_cmlm", "train_cmlm"]


@dataclass
class CMLMBatch:
    """A translation batch for the conditional MLM: the source as in the ``TranslationBatch``,
    the targets without eos."""
    words: Tensor        # long [B, S] source ids
    src_mask: Tensor     # bool [B, S]
    targets: Tensor      # long [B, T] target ids without eos (0 at padding)
    mask: Tensor         # bool [B, T] left-aligned
    lengths: Tensor      # long [B] target lengths T_b >= 1

    def to(self, device: torch.device | str) -> "CMLMBatch":
        return CMLMBatch(*(t.to(device) for t in (self.words, self.src_mask, self.targets, self.mask, self.lengths)))

    def __len__(self) -> int:
        return int(self.targets.shape[0])


def cmlm_batch(batch: Any, *, allowed: Tensor, eos: int) -> CMLMBatch:
    """``TranslationBatch`` (tags [B, T+1] ending in eos, mask [B, T+1]) -> :class:`CMLMBatch`
    with the eos stripped; ``allowed`` bool [V] the model's allowed output ids."""
    who = "cmlm_batch"
    tags, mask = batch.tags, batch.mask.bool()
    if tags.dim() != 2 or mask.shape != tags.shape:
        raise ValueError(f"{who}: tags and mask must both be [B, T], got {list(tags.shape)} and {list(mask.shape)}")
    n = mask.sum(1)
    ar = torch.arange(tags.shape[1], device=tags.device)
    if not bool((mask == (ar[None] < n[:, None])).all()):
        raise ValueError(f"{who}: the target mask must be left-aligned")
    if bool((n == 0).any()):
        raise ValueError(f"{who}: target row(s) {(n == 0).nonzero().flatten().tolist()[:10]} are empty")
    last = tags.gather(1, (n - 1)[:, None])[:, 0]
    if bool((last != eos).any()):
        r = int((last != eos).nonzero()[0])
        raise ValueError(f"{who}: target row {r} does not end in eos ({eos}): last id {int(last[r])}")
    lengths = n - 1
    if bool((lengths == 0).any()):
        raise ValueError(f"{who}: target row(s) {(lengths == 0).nonzero().flatten().tolist()[:10]} hold only eos "
                         "(empty target)")
    T = int(lengths.max())
    tmask = ar[None, :T] < lengths[:, None]
    targets = tags[:, :T].masked_fill(~tmask, 0)
    V = allowed.shape[0]
    ok = (targets >= 0) & (targets < V)
    ok = ok & allowed.to(targets.device)[targets.clamp(0, V - 1)]
    bad = tmask & ~ok
    if bool(bad.any()):
        r, t = (int(i) for i in bad.nonzero()[0])
        tok = int(targets[r, t])
        what = " (eos)" if tok == eos else "" if 0 <= tok < V else f" (outside 0..{V - 1})"
        raise ValueError(f"{who}: target row {r}, position {t} holds the disallowed id {tok}{what}; targets may "
                         "hold only allowed ids before their eos")
    return CMLMBatch(batch.words, batch.src_mask.bool(), targets, tmask, lengths)


def uniform_masking(mask: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Mask-Predict's training masks: per row n ~ Uniform{1..T_b}, then n of its T_b valid
    positions uniformly. mask bool [B, T] -> masked bool [B, T] (a subset of mask). Drawn on the
    CPU from ``generator`` (reproducible whatever the device)."""
    m = mask.cpu()
    T = m.sum(1)
    u = torch.rand(m.shape[0], generator=generator)
    n = (u * T).long().clamp(max=T - 1) + 1
    return _mask_n(m, n, generator).to(mask.device)


def ratio_masking(mask: Tensor, ratio: float, generator: torch.Generator | None = None) -> Tensor:
    """Per row max(1, round(ratio T_b)) of its valid positions, uniformly. -> bool [B, T]."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio_masking: ratio must be in (0, 1], got {ratio}")
    m = mask.cpu()
    n = torch.round(m.sum(1).double() * ratio).long().clamp(min=1)
    return _mask_n(m, n, generator).to(mask.device)


def _mask_n(m: Tensor, n: Tensor, generator: torch.Generator | None) -> Tensor:
    u = torch.rand(m.shape, generator=generator).masked_fill(~m, 2.0)    # padding ranks last
    rank = u.argsort(1).argsort(1)
    return (rank < n[:, None]) & m


def _token_terms(model: Any, cb: CMLMBatch, ctx: Any, masked: Tensor, label_smoothing: float
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """(per masked token NLL [M], smoothed loss [M], correct [M]) for masks ``masked`` [B, T]."""
    B = len(cb)
    inp = cb.targets.masked_fill(masked, model.mask_id)
    logits = model.conditionals(inp, cb.mask, ctx, torch.arange(B, device=cb.targets.device))
    lp = torch.log_softmax(logits[masked], -1)                             # [M, V]
    gold = cb.targets[masked]
    nll = -lp.gather(1, gold[:, None])[:, 0]
    loss = nll
    if label_smoothing > 0:
        smooth = -lp[:, model.allowed].mean(-1)
        loss = (1 - label_smoothing) * nll + label_smoothing * smooth
    return nll, loss, lp.argmax(-1) == gold


def mask_predict_loss(model: Any, cb: CMLMBatch, masked: Tensor, *, length_weight: float = 0.1,
                      label_smoothing: float = 0.0) -> tuple[Tensor, dict[str, float]]:
    """The objective (module doc) for masks ``masked`` bool [B, T] (a subset of ``cb.mask``,
    >= 1 per row) -> (scalar loss, {"token_loss", "length_nll"} as floats, unsmoothed)."""
    if masked.shape != cb.mask.shape or masked.dtype != torch.bool:
        raise ValueError(f"mask_predict_loss: masked must be bool {list(cb.mask.shape)}, got "
                         f"{masked.dtype} {list(masked.shape)}")
    if bool((masked & ~cb.mask).any()):
        raise ValueError("mask_predict_loss: masked marks padding positions (it must be a subset of the target mask)")
    if not bool(masked.any(1).all()):
        raise ValueError("mask_predict_loss: every row needs >= 1 masked position")
    if bool((cb.lengths > model.max_target_len).any()):
        raise ValueError(f"mask_predict_loss: target length {int(cb.lengths.max())} > the model's max_target_len "
                         f"{model.max_target_len}")
    ctx = model.encode(cb)
    nll, tok_loss, _ = _token_terms(model, cb, ctx, masked, label_smoothing)
    len_nll = -model.predict_length(ctx).gather(1, cb.lengths[:, None])[:, 0]
    loss = tok_loss.mean() + length_weight * len_nll.mean()
    return loss, {"token_loss": float(nll.detach().mean()), "length_nll": float(len_nll.detach().mean())}


def unigram_log_probs(tgt_ids: Sequence[Sequence[int]], allowed: Tensor, *, eos: int, alpha: float = 1.0) -> Tensor:
    """log q [V]: add-``alpha`` unigram distribution of the target ids (a trailing eos dropped)
    over the allowed ids, -inf at the others."""
    if alpha <= 0:
        raise ValueError(f"unigram_log_probs: alpha must be > 0, got {alpha}")
    V = allowed.shape[0]
    ids = np.concatenate([np.asarray(t[:-1] if len(t) and t[-1] == eos else t, dtype=np.int64) for t in tgt_ids])
    counts = torch.as_tensor(np.bincount(ids[(ids >= 0) & (ids < V)], minlength=V), dtype=torch.float64)
    al = allowed.cpu()
    counts = torch.where(al, counts + alpha, torch.zeros_like(counts))
    return torch.log(counts / counts.sum()).float().masked_fill(~al, float("-inf"))


@dataclass(frozen=True)
class CMLMTrainConfig:
    lr: float = 2e-3                   # peak rate (5e-4 at batch 64 was still at the unigram loss after 3 epochs)
    epochs: int = 30
    batch_size: int = 32
    warmup_steps: int = 100            # linear warm-up to lr over these updates, then ``decay``
    # the rate after warm-up: "constant"; "linear" to 0 at the last planned update (epochs x batches per
    # epoch); "inverse_sqrt" lr * sqrt(warmup_steps / step) (Mask-Predict's fairseq schedule)
    decay: Literal["constant", "linear", "inverse_sqrt"] = "constant"
    grad_clip: float = 1.0             # max gradient norm; 0 = off
    weight_decay: float = 0.01         # AdamW
    patience: int = 3                  # epochs without a dev gain above min_delta (on select_on) before stopping
    # the dev metric that early stopping and the kept epoch follow: "token_loss" (the masked-token
    # loss: what the MLM energy, its proposals and the did-not-learn guard read) or "loss" (tokens +
    # length_weight x length NLL). On this small corpus the length head overfits first: at default
    # scale the dev loss stopped improving at epoch 6 while the token loss kept falling through
    # epoch 9 (5.66 -> 5.56 nats, 2026-11-26), so selecting on the sum kept an under-trained token model
    select_on: Literal["token_loss", "loss"] = "token_loss"
    min_delta: float = 0.0
    label_smoothing: float = 0.1       # Mask-Predict's 0.1; 0 = plain cross-entropy
    length_weight: float = 0.1         # weight w of the length NLL
    max_train_pairs: int = 0           # 0 = all; else a seeded subsample of the training pairs
    dev_ratios: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)   # extra dev masking ratios (metrics only)
    unigram_alpha: float = 1.0         # add-alpha smoothing of the unigram baseline
    # the learning curve's BLEU: after every epoch, mask-predict (MaskPredictConfig's defaults) decodes the
    # first ``curve_bleu_pairs`` dev pairs (0: no per-epoch BLEU); a record's ``dev_bleu``. Metrics only
    curve_bleu_pairs: int = 0

    def __post_init__(self):
        check_range(self, positive=("lr", "epochs", "batch_size", "patience", "unigram_alpha"),
                    nonnegative=("warmup_steps", "grad_clip", "weight_decay", "min_delta", "length_weight",
                                 "max_train_pairs", "curve_bleu_pairs"),
                    within={"label_smoothing": "[0, 1)", "dev_ratios": "(0, 1]"})
        keys = [_ratio_key(r) for r in self.dev_ratios]
        if len(set(keys)) != len(keys):
            raise field_error(self, "dev_ratios", f"must differ in percent (keys {keys}), got {self.dev_ratios!r}")


def _ratio_key(r: float) -> str:
    return f"r{int(round(r * 100))}"


@dataclass
class CMLMEvalSet:
    """Dev batches with masks drawn once: ``items[i] = (batch, {"obj": masked, "r50": masked, ...})``."""
    items: list[tuple[CMLMBatch, dict[str, Tensor]]]
    n_pairs: int
    skipped: dict[str, int] = field(default_factory=dict)


def make_eval_set(model: Any, dataset: Any, *, batch_size: int = 64, ratios: Sequence[float] = (),
                  seed: int = 0) -> CMLMEvalSet:
    """The pairs of a ``ParallelDataset`` the model can score, batched by source length, with
    the objective's masks and one mask per ratio drawn from ``seed`` (module doc)."""
    allowed = model.allowed.cpu()
    ok = allowed.numpy()
    V = allowed.shape[0]
    keep, skipped = [], {"too_long": 0, "disallowed": 0}
    for i, (s, t) in enumerate(zip(dataset.src_ids, dataset.tgt_ids)):
        body = np.asarray(t[:-1] if t and t[-1] == model.eos else t, dtype=np.int64)
        if len(s) > model.cfg.max_source_len or len(body) > model.max_target_len:
            skipped["too_long"] += 1
        elif len(body) == 0 or ((body < 0) | (body >= V)).any() or not ok[body].all():
            skipped["disallowed"] += 1
        else:
            keep.append(i)
    if not keep:
        raise ValueError(f"make_eval_set: no pair of {getattr(dataset, 'name', 'the dataset')} can be scored "
                         f"by the model ({skipped})")
    data = dataset.subset(keep) if len(keep) < len(dataset) else dataset
    gen = torch.Generator().manual_seed(seed)
    items = []
    for b in data.batches(batch_size, shuffle=False):
        cb = cmlm_batch(b, allowed=allowed, eos=model.eos)
        masks = {"obj": uniform_masking(cb.mask, gen)}
        for r in ratios:
            masks[_ratio_key(r)] = ratio_masking(cb.mask, r, gen)
        items.append((cb, masks))
    return CMLMEvalSet(items, len(keep), skipped)


@torch.no_grad()
def evaluate_cmlm(model: Any, eval_set: CMLMEvalSet, unigram: Tensor, *,
                  length_weight: float = 0.1, ratios: bool = True) -> dict[str, float]:
    """Dev metrics (module doc) of ``model`` (put in eval mode, restored after) on ``eval_set``;
    ``unigram`` log q [V] the baseline. ``ratios=False``: the objective's masks only (no ``*_r<k>``
    metrics; what training needs each epoch)."""
    was = model.training
    model.eval()
    device = model.allowed.device
    uni = unigram.to(device)
    acc: dict[str, list[float]] = {}

    def add(key: str, total: float, count: int) -> None:
        a = acc.setdefault(key, [0.0, 0])
        a[0] += total
        a[1] += count

    try:
        for cb, masks in eval_set.items:
            cb = cb.to(device)
            ctx = model.encode(cb)
            for key, masked in masks.items():
                if key != "obj" and not ratios:
                    continue
                masked = masked.to(device)
                nll, _, correct = _token_terms(model, cb, ctx, masked, 0.0)
                sfx = "" if key == "obj" else f"_{key}"
                M = int(masked.sum())
                add(f"token_loss{sfx}", float(nll.sum()), M)
                add(f"token_acc{sfx}", float(correct.sum()), M)
                add(f"unigram_loss{sfx}", float(-uni[cb.targets[masked]].sum()), M)
            lp = model.predict_length(ctx)
            add("length_nll", float(-lp.gather(1, cb.lengths[:, None]).sum()), len(cb))
            add("length_acc", float((lp.argmax(1) == cb.lengths).sum()), len(cb))
    finally:
        model.train(was)
    out = {k: s / max(c, 1) for k, (s, c) in acc.items()}
    out["loss"] = out["token_loss"] + length_weight * out["length_nll"]
    return {"loss": out.pop("loss"), **out}


@dataclass
class CMLMTrainResult:
    # one record per epoch: epoch, train_loss, lr, dev_* — what it measured, not how long it took: the
    # history is saved with the model (train.json), which must be the same for the same code and data
    history: list[dict[str, float]]
    best_epoch: int
    best: dict[str, float]             # the dev metrics of the best epoch
    stats: dict[str, int]              # train_pairs, dev_pairs, dev_skipped_too_long, dev_skipped_disallowed, updates
    seconds: list[float] = field(default_factory=list)   # each epoch's training wall time (also in on_epoch's record)


def lr_factor(step: int, *, cfg: CMLMTrainConfig, total: int) -> float:
    """The multiplier of ``cfg.lr`` for update ``step + 1`` (0-based ``step``) of ``total`` planned
    updates: linear warm-up over ``cfg.warmup_steps``, then ``cfg.decay``."""
    n = step + 1
    w = cfg.warmup_steps
    if w and n < w:
        return n / w
    if cfg.decay == "linear":
        return max(0.0, (total - n + 1) / max(1, total - w + 1))
    if cfg.decay == "inverse_sqrt":
        return (max(w, 1) / n) ** 0.5
    return 1.0


def train_cmlm(model: Any, task: Any, cfg: CMLMTrainConfig = CMLMTrainConfig(), *, seed: int = 0,
               on_epoch: Callable[[dict[str, float]], None] | None = None,
               on_batch: Callable[[int, int, float], None] | None = None,
               tgt_vocab: Any = None) -> CMLMTrainResult:
    """Train a :class:`components.models.mlm.ConditionalMLM` in place on ``task.train`` with
    early stopping on ``task.dev`` (module doc); on return the model holds the best epoch's
    weights, in eval mode. ``seed``: the base of every random stream (module doc). ``on_epoch(record)``
    after each epoch (the history's record plus the epoch's ``train_seconds``), ``on_batch(i, n, loss)``
    after each update (1-based i). ``tgt_vocab`` (the task's target vocabulary) is needed for
    ``cfg.curve_bleu_pairs``."""
    if not isinstance(cfg, CMLMTrainConfig):
        raise TypeError(f"train_cmlm: cfg must be a CMLMTrainConfig, got {type(cfg).__name__}")
    device = model.allowed.device
    train = task.train
    if cfg.max_train_pairs:
        train = train.subset(subsample_indices(len(train), cfg.max_train_pairs, seed_for(seed, "subsample")))
    too_long_t = int((train.tgt_len - 1 > model.max_target_len).sum())
    too_long_s = int((train.src_len > model.cfg.max_source_len).sum())
    if too_long_t or too_long_s:
        raise ValueError(f"train_cmlm: {too_long_t} training target(s) longer than the model's max_target_len "
                         f"{model.max_target_len} (without eos) and {too_long_s} source(s) longer than its "
                         f"max_source_len {model.cfg.max_source_len}: align the data and model configs")
    allowed = model.allowed.cpu()
    unigram = unigram_log_probs(train.tgt_ids, allowed, eos=model.eos, alpha=cfg.unigram_alpha)
    dev = make_eval_set(model, task.dev, batch_size=cfg.batch_size, ratios=cfg.dev_ratios,
                        seed=seed_for(seed, "dev_masks"))
    stats = {"train_pairs": len(train), "dev_pairs": dev.n_pairs, "dev_skipped_too_long": dev.skipped["too_long"],
             "dev_skipped_disallowed": dev.skipped["disallowed"]}
    curve_dev = None
    if cfg.curve_bleu_pairs:
        if tgt_vocab is None:
            raise ValueError("train_cmlm: curve_bleu_pairs > 0 needs the target vocabulary (tgt_vocab=)")
        curve_dev = task.dev.subset(range(min(cfg.curve_bleu_pairs, len(task.dev))))
        curve_decode = MaskPredictConfig()

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay)
    n_batches = -(-len(train) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, partial(lr_factor, cfg=cfg, total=cfg.epochs * n_batches))
    history: list[dict[str, float]] = []
    seconds: list[float] = []
    best_loss, best_epoch, best_state, best, bad = float("inf"), 0, None, {}, 0
    updates = 0
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):          # dropout seeded without touching the caller's generator
        torch.manual_seed(seed_for(seed, "dropout"))
        for epoch in range(1, cfg.epochs + 1):
            model.train()
            gen = torch.Generator().manual_seed(seed_for(seed, "masks", "epoch", epoch))
            t0 = time.perf_counter()
            total = 0.0
            count = 0
            for i, b in enumerate(train.batches(cfg.batch_size, shuffle=True,
                                                seed=seed_for(seed, "batches", "epoch", epoch))):
                cb = cmlm_batch(b, allowed=allowed, eos=model.eos).to(device)
                masked = uniform_masking(cb.mask, gen)
                loss, _ = mask_predict_loss(model, cb, masked, length_weight=cfg.length_weight,
                                            label_smoothing=cfg.label_smoothing)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"train_cmlm: epoch {epoch}, batch {i}: the training loss is "
                                             f"{loss.item()}")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                opt.step()
                sched.step()
                updates += 1
                total += loss.item()
                count += 1
                if on_batch:
                    on_batch(i + 1, n_batches, loss.item())
            train_s = time.perf_counter() - t0
            # the extra masking ratios are metrics of the best epoch only (computed once, below)
            metrics = evaluate_cmlm(model, dev, unigram, length_weight=cfg.length_weight, ratios=False)
            if curve_dev is not None:
                model.eval()
                metrics["bleu"] = float(decode_bleu(model, curve_dev, tgt_vocab, curve_decode,
                                                    batch_size=cfg.batch_size)["bleu"])
            record = {"epoch": float(epoch), "train_loss": total / max(count, 1),
                      "lr": float(opt.param_groups[0]["lr"]), **{f"dev_{k}": v for k, v in metrics.items()}}
            history.append(record)
            seconds.append(train_s)
            if metrics[cfg.select_on] < best_loss - cfg.min_delta or best_state is None:
                best_loss, best_epoch, best, bad = metrics[cfg.select_on], epoch, metrics, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                bad += 1
            if on_epoch:
                on_epoch({**record, "train_seconds": train_s})      # for Tune and MLflow
            if bad >= cfg.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    if cfg.dev_ratios:           # the same masks and weights: the epoch's metrics, with the ratios added
        best = {**evaluate_cmlm(model, dev, unigram, length_weight=cfg.length_weight), **best}
    stats["updates"] = updates
    return CMLMTrainResult(history, best_epoch, best, stats, seconds)


# ------------------------------------------------------------------------------------------------
# What the stages read from a trained model (its folder: components.models.mlm.save_cmlm / load_cmlm)
# ------------------------------------------------------------------------------------------------

def _chunks(n: int, size: int):
    for s in range(0, n, size):
        yield list(range(s, min(s + size, n)))


@torch.no_grad()
def predict_lengths(model: Any, dataset: Any, *, batch_size: int = 64) -> list[int]:
    """The most probable target length (argmax of ``predict_length``) of each pair of ``dataset``
    (a :class:`components.data.translation.ParallelDataset`), in its order."""
    device = model.allowed.device
    out: list[int] = []
    for idx in _chunks(len(dataset), batch_size):
        b = dataset.collate(idx).to(device)
        out.extend(model.predict_length(model.encode(b)).argmax(1).tolist())
    return out


@torch.no_grad()
def decode_bleu(model: Any, dataset: Any, vocab: Any, cfg: Any, *, batch_size: int = 64) -> dict[str, Any]:
    """Mask-predict (``cfg``: :class:`components.inference.mask_predict.MaskPredictConfig`) every
    pair of ``dataset`` in order, detokenise with the target ``vocab`` and score corpus BLEU against
    the references: ``{"bleu", "hypotheses", "mean_length", "signature"...}`` (see
    :func:`components.metrics.bleu.corpus_bleu`)."""
    device = model.allowed.device
    hyps: list[str] = []
    lengths: list[int] = []
    for idx in _chunks(len(dataset), batch_size):
        b = dataset.collate(idx).to(device)
        res = mask_predict(model, b, cfg)
        for row, n in zip(res.tokens.tolist(), res.lengths.tolist()):
            hyps.append(vocab.decode(row[:n]))
            lengths.append(n)
    score = corpus_bleu(hyps, dataset.references)
    return {"bleu": score.score, **score.as_dict(), "mean_length": float(np.mean(lengths)), "hypotheses": hyps}
