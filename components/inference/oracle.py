r"""Instance-level oracle tuning of GD inference (Tu & Gimpel 2019, Sec. 5.2, 7.1 and appendix; Table 6).

The paper tunes GD's iteration count N and learning rate *per test instance* to maximise that
instance's accuracy or F1 ("to provide as strong performance as possible for gradient descent").
Table 6 reports, for each N, the corpus metric and the mean energy when only the learning rate is
chosen per instance ("per-N rows"); choosing both N and lr per instance is the "full oracle".

Per-instance counts (:func:`instance_counts`), ``long [..., B, 3]`` = (correct, predicted, gold):

- ``accuracy``: (correct tokens, tokens, tokens). A gold ``*`` (the "other" label of a truncated
  label vocabulary, CCG) is never correct, as in the paper and as in
  ``components.inference.evaluate`` (which compares against the original tags).
- ``span_f1``: (correct spans, predicted spans, gold spans) with conlleval chunk semantics
  (``components.metrics.tagging.spans``; ``*`` reads as ``O``).

One formula then serves both metrics. Per instance, ``quality = 2c / (p + g)`` (token accuracy, or
the instance's F1 = 2PR/(P+R); defined as 1 when p + g = 0: no gold and no predicted spans is a
perfect answer). Corpus metric = ``100 * 2 sum(c) / (sum(p) + sum(g))`` over the selected
candidates: micro accuracy, or micro F1 exactly as ``components.metrics.tagging.span_f1``
(0 when there is nothing to count).

Selection (:func:`oracle_select`) over candidates ``[C, R, K, B]`` (checkpoints N x restarts x
learning rates x instances, the :class:`~components.inference.gradient_descent.GDResult` layout):

- per-N: for every checkpoint c and instance b, the (restart, lr) maximising quality; ties go to the
  lower discretised energy, then the smaller learning rate (value), then the lower restart index;
- full oracle: for every instance, the (N, restart, lr) maximising quality; ties go to the lower
  discretised energy, then the smaller N, then the smaller learning rate, then the lower restart.

Reported per selection: the corpus metric, the selected discretised and relaxed energies per
instance (and their means), and the search error ``E(y_selected) - E(y_viterbi)`` per instance when
Viterbi energies are given (>= 0 up to rounding for exact Viterbi).

Pure functions, no I/O. Cost: counts for span F1 run ``spans`` once per distinct predicted
sequence of an instance (candidates that agree share the work); selection is a few stable sorts
over ``[C R K, B]``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from components.metrics.tagging import spans

__all__ = ["COUNT_FIELDS", "METRICS", "instance_counts", "instance_quality", "corpus_score", "Selection",
           "OracleSelection", "oracle_select", "oracle_tune"]

COUNT_FIELDS = ("correct", "predicted", "gold")
METRICS = ("accuracy", "span_f1")
OTHER_LABEL = "*"


def _check_inputs(pred: Tensor, gold: Tensor, mask: Tensor, labels: Sequence[str], metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"instance_counts: unknown metric {metric!r}: expected one of {METRICS}")
    if gold.dim() != 2:
        raise ValueError(f"instance_counts: gold must have shape [B, N], got {list(gold.shape)}")
    if tuple(mask.shape) != tuple(gold.shape) or mask.dtype != torch.bool:
        raise ValueError(f"instance_counts: mask must be bool [B, N] = {list(gold.shape)}, "
                         f"got {mask.dtype} {list(mask.shape)}")
    if pred.dim() < 2 or tuple(pred.shape[-2:]) != tuple(gold.shape):
        raise ValueError(f"instance_counts: pred must have shape [..., B, N] with [B, N] = {list(gold.shape)}, "
                         f"got {list(pred.shape)}")
    for name, x in (("pred", pred), ("gold", gold)):
        if x.dtype.is_floating_point or x.dtype == torch.bool:
            raise ValueError(f"instance_counts: {name} must hold integer label ids, got {x.dtype}")
        L = len(labels)
        bad = mask.expand_as(x) & ((x < 0) | (x >= L))
        if bool(bad.any()):
            idx = bad.nonzero()[0].tolist()
            raise ValueError(f"instance_counts: {name} label id {int(x[tuple(idx)])} at {idx} is out of "
                             f"range [0, {L}) (len(labels))")


def instance_counts(pred: Tensor, gold: Tensor, mask: Tensor, labels: Sequence[str], metric: str) -> Tensor:
    """Per-candidate, per-instance counts ``long [..., B, 3]`` = (correct, predicted, gold).

    ``pred`` long [..., B, N] (any leading candidate axes, e.g. ``GDResult.labels`` [C, R, K, B, N]),
    ``gold`` long [B, N], ``mask`` bool [B, N], ``labels`` the label strings by id, ``metric``
    ``accuracy`` or ``span_f1`` (see the module docstring). Returned on the CPU.
    """
    pred, gold, mask = pred.detach().cpu(), gold.detach().cpu(), mask.detach().cpu()
    _check_inputs(pred, gold, mask, labels, metric)
    lead = pred.shape[:-2]
    B, N = gold.shape
    if metric == "accuracy":
        ok = mask.clone()
        if OTHER_LABEL in labels:
            ok &= gold != labels.index(OTHER_LABEL)
        correct = ((pred == gold) & ok).sum(-1)
        n = mask.sum(-1).expand(*lead, B)
        return torch.stack([correct, n, n], -1).long()
    flat = pred.reshape(-1, B, N)
    M = flat.shape[0]
    lengths = mask.sum(1).tolist()
    gold_l = gold.tolist()
    pred_l = flat.permute(1, 0, 2).tolist()                  # [B][M][N]
    out = torch.zeros((B, M, 3), dtype=torch.long)
    for b in range(B):
        n = lengths[b]
        gs = spans([labels[i] for i in gold_l[b][:n]])
        cache: dict[tuple[int, ...], tuple[int, int, int]] = {}
        rows = []
        for m in range(M):
            key = tuple(pred_l[b][m][:n])
            hit = cache.get(key)
            if hit is None:
                ps = spans([labels[i] for i in key])
                hit = cache[key] = (len(gs & ps), len(ps), len(gs))
            rows.append(hit)
        out[b] = torch.tensor(rows, dtype=torch.long)
    return out.permute(1, 0, 2).reshape(*lead, B, 3)


def instance_quality(counts: Tensor) -> Tensor:
    """``2c / (p + g)`` per instance (float64, in [0, 1]; 1 when p + g = 0) from counts [..., 3]."""
    c, p, g = counts.double().unbind(-1)
    den = p + g
    return torch.where(den > 0, 2 * c / den.clamp_min(1), torch.ones_like(den))


def corpus_score(counts: Tensor) -> Tensor:
    """Corpus metric in percent ``100 * 2 sum c / (sum p + sum g)`` over the instance axis of
    counts [..., B, 3] -> [...] (micro accuracy or micro span F1; 0 when nothing is counted)."""
    c, p, g = counts.double().sum(-2).unbind(-1)
    den = p + g
    return torch.where(den > 0, 200 * c / den.clamp_min(1), torch.zeros_like(den))


@dataclass
class Selection:
    """Chosen candidates and their scores. Leading axes ``[...]``: ``[C]`` for per-N rows, none for
    the full oracle; indices point into ``checkpoints``, restarts and ``lrs``."""

    checkpoint: Tensor            # long [..., B]
    restart: Tensor               # long [..., B]
    lr: Tensor                    # long [..., B]
    counts: Tensor                # long [..., B, 3]
    score: Tensor                 # float64 [...]: corpus metric (percent)
    energy: Tensor                # [..., B]: discretised energy of the selected output
    relaxed_energy: Tensor | None = None   # [..., B]
    search_error: Tensor | None = None     # [..., B]: energy - viterbi energy

    def summary(self) -> dict[str, float] | list[dict[str, float]]:
        """Means over instances: ``score``, ``energy``, ``relaxed_energy``, ``search_error`` (a list
        of such dicts for per-N selections)."""
        def one(i: tuple) -> dict[str, float]:
            d = {"score": float(self.score[i]), "energy": float(self.energy[i].double().mean())}
            if self.relaxed_energy is not None:
                d["relaxed_energy"] = float(self.relaxed_energy[i].double().mean())
            if self.search_error is not None:
                d["search_error"] = float(self.search_error[i].double().mean())
            return d
        if self.score.dim() == 0:
            return one(())
        return [one((c,)) for c in range(self.score.shape[0])]


@dataclass
class OracleSelection:
    checkpoints: tuple[int, ...]
    lrs: tuple[float, ...]
    per_n: Selection              # leading axis [C]
    full: Selection               # no leading axis

    def rows(self) -> list[dict[str, float | str]]:
        """Table 6 rows: one per N (learning rate chosen per instance), then ``N = "oracle"``
        (N and learning rate chosen per instance)."""
        per = self.per_n.summary()
        assert isinstance(per, list)
        out: list[dict[str, float | str]] = [{"N": float(n), **d} for n, d in zip(self.checkpoints, per)]
        full = self.full.summary()
        assert isinstance(full, dict)
        out.append({"N": "oracle", **full})
        return out


def lexmin(keys: Sequence[Tensor]) -> Tensor:
    """Index along axis 0 of the lexicographically smallest key tuple per column: keys [M, ...],
    most significant first. Successive stable sorts, least significant key first."""
    order = torch.arange(keys[0].shape[0]).view(-1, *([1] * (keys[0].dim() - 1))).expand_as(keys[0])
    for k in reversed(keys):
        idx = torch.sort(k.gather(0, order), dim=0, stable=True).indices
        order = order.gather(0, idx)
    return order[0]


def oracle_select(counts: Tensor, energy: Tensor, *, lrs: Sequence[float], checkpoints: Sequence[int],
                  relaxed_energy: Tensor | None = None, viterbi_energy: Tensor | None = None) -> OracleSelection:
    """Per-N and full instance-level oracle selection (module docstring for the protocol).

    ``counts`` long [C, R, K, B, 3] (:func:`instance_counts` of ``GDResult.labels``), ``energy``
    [C, R, K, B] discretised energies, ``relaxed_energy`` [C, R, K, B] optional, ``viterbi_energy``
    [B] optional (for search errors); ``lrs`` (K values) and ``checkpoints`` (C values) for the
    tie-breaks and the report. Everything is computed on the CPU.
    """
    if counts.dim() != 5 or counts.shape[-1] != 3:
        raise ValueError(f"oracle_select: counts must have shape [C, R, K, B, 3], got {list(counts.shape)}")
    C, R, K, B, _ = counts.shape
    if tuple(energy.shape) != (C, R, K, B):
        raise ValueError(f"oracle_select: energy must have shape [C, R, K, B] = {[C, R, K, B]}, got {list(energy.shape)}")
    if relaxed_energy is not None and tuple(relaxed_energy.shape) != (C, R, K, B):
        raise ValueError(f"oracle_select: relaxed_energy must have shape {[C, R, K, B]}, got {list(relaxed_energy.shape)}")
    if viterbi_energy is not None and tuple(viterbi_energy.shape) != (B,):
        raise ValueError(f"oracle_select: viterbi_energy must have shape [B] = {[B]}, got {list(viterbi_energy.shape)}")
    if len(lrs) != K:
        raise ValueError(f"oracle_select: {len(lrs)} lrs given for K = {K} learning-rate candidates")
    if len(checkpoints) != C:
        raise ValueError(f"oracle_select: {len(checkpoints)} checkpoints given for C = {C}")
    counts = counts.detach().cpu().long()
    energy = energy.detach().cpu()
    relaxed = relaxed_energy.detach().cpu() if relaxed_energy is not None else None
    vit = viterbi_energy.detach().cpu() if viterbi_energy is not None else None
    if bool(torch.isnan(energy).any()):
        raise ValueError("oracle_select: energy contains NaN")

    neg_quality = -instance_quality(counts)                                  # [C, R, K, B]
    shape = (C, R, K, B)
    n_key = torch.tensor([float(n) for n in checkpoints], dtype=torch.float64).view(C, 1, 1, 1).expand(shape)
    lr_key = torch.tensor([float(x) for x in lrs], dtype=torch.float64).view(1, 1, K, 1).expand(shape)
    r_key = torch.arange(R, dtype=torch.float64).view(1, R, 1, 1).expand(shape)
    c_idx = torch.arange(C).view(C, 1, 1, 1).expand(shape)
    r_idx = torch.arange(R).view(1, R, 1, 1).expand(shape)
    k_idx = torch.arange(K).view(1, 1, K, 1).expand(shape)

    def pack(best: Tensor, lead: tuple[int, ...], M: int) -> Selection:
        # best [*lead, B] indexes a flattened candidate axis of size M placed after ``lead``.
        def pick(x: Tensor | None) -> Tensor | None:
            if x is None:
                return None
            rest = x.shape[4:]
            xf = x.reshape(*lead, M, B, *rest)
            g = best.view(*lead, 1, B, *([1] * len(rest))).expand(*lead, 1, B, *rest)
            return xf.gather(len(lead), g).squeeze(len(lead))
        sel_counts = pick(counts)
        sel_energy = pick(energy)
        assert sel_counts is not None and sel_energy is not None
        return Selection(checkpoint=pick(c_idx.contiguous()), restart=pick(r_idx.contiguous()),
                         lr=pick(k_idx.contiguous()), counts=sel_counts, score=corpus_score(sel_counts),
                         energy=sel_energy, relaxed_energy=pick(relaxed),
                         search_error=None if vit is None else sel_energy - vit.to(sel_energy.dtype))

    # per N: candidates (r, k) within each checkpoint -> keys [R*K, C, B]
    def per_n_keys(x: Tensor) -> Tensor:
        return x.reshape(C, R * K, B).transpose(0, 1)
    keys = [per_n_keys(k) for k in (neg_quality, energy.double(), lr_key, r_key)]
    best_n = lexmin(keys)                                                   # [C, B]
    per_n = pack(best_n, (C,), R * K)

    # full oracle: candidates (c, r, k) -> keys [C*R*K, B]
    keys = [k.reshape(C * R * K, B) for k in (neg_quality, energy.double(), n_key, lr_key, r_key)]
    best = lexmin(keys)                                                     # [B]
    full = pack(best, (), C * R * K)
    return OracleSelection(checkpoints=tuple(int(n) for n in checkpoints), lrs=tuple(float(x) for x in lrs),
                           per_n=per_n, full=full)


def oracle_tune(result, gold: Tensor, mask: Tensor, labels: Sequence[str], metric: str, *,
                viterbi_energy: Tensor | None = None) -> OracleSelection:
    """Counts and oracle selection for a ``GDResult`` against gold label ids [B, N]."""
    counts = instance_counts(result.labels, gold, mask, labels, metric)
    return oracle_select(counts, result.energy, lrs=result.lrs, checkpoints=result.checkpoints,
                         relaxed_energy=result.relaxed_energy, viterbi_energy=viterbi_energy)
