"""Benchmarks of Goyal et al. (2018)'s search-aware training and of hard beam decoding.

Two measurements, each against a named baseline timed side by side on the same inputs:

- :func:`compare_train_epochs`: one pass over a fixed list of batches (an epoch, or its first n
  batches) of relaxed-beam training (``BeamDirectLoss`` at each beam size K) against teacher-forced
  cross-entropy (``SeqCE``) training of the same randomly initialised step scorer: forward,
  backward, gradient clipping and an Adam step per batch, as ``fit`` does. Every pass starts from
  the same weights with a fresh optimiser. The sides are interleaved (CE, K1, K2, CE, K1, K2, ...)
  and the round is repeated until the per-round ratios are stable (see :func:`_stable`). The paper
  reports relaxed-beam training roughly K times slower than CE.
- :func:`compare_decoding`: :func:`components.inference.beam.beam_search` (batched over sentences
  and beam items) against :func:`naive_beam_search`, the faithful per-hypothesis loop (one
  sentence at a time; at each step, one scorer call per beam item on that single hypothesis,
  candidates collected, sorted, the top k kept). Both must find the same best sequences before
  anything is timed.

No I/O: the functions return dicts of figures (seconds, ratios, sentences/s). CUDA work is
synchronised before the clock is read. Used by the ``bench`` stage only, never by timed tests.
"""
from __future__ import annotations

import copy
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from components.inference.beam import BeamState, SearchResult, StepScorer, beam_search, check_beam_size, check_mask
from components.training.search_aware import AlphaSchedule, BeamDirectLoss, BeamObjectiveConfig, SeqCE

__all__ = ["naive_beam_search", "decode_all", "compare_train_epochs", "compare_decoding"]


# -- the naive baseline ---------------------------------------------------------------------------
@dataclass
class _Hyp:
    score: torch.Tensor            # 0-dim: s(y_<=t), same dtype as the scorer's scores
    labels: list[int]
    state: BeamState | None        # the decoder state after this hypothesis' last step ([1, 1, ...])
    last: int                      # its last label (-1: none yet, the start symbol is fed)


def naive_beam_search(scorer: StepScorer, batch: Any, k: int) -> SearchResult:
    """Hard beam search of size ``k`` the unbatched way: one sentence at a time (trimmed to its
    length and encoded alone) and, at each step, a Python loop over the beam items, each scored by
    its own ``scorer.step`` call on a one-hypothesis state; the k x V candidates s_i + f(h_i, v)
    are collected, sorted (descending, stable) and cut to the top k.

    Same result layout as :func:`beam_search` (labels 0 past each sentence's end); it finds the
    same beam when no candidate scores tie. ``batch`` needs ``words``/``mask`` and the row slicing
    the scorer's ``start`` reads (a ``TaggingBatch``)."""
    check_beam_size(k)
    check_mask(batch.mask)
    B, T = batch.mask.shape
    lengths = batch.mask.sum(1).tolist()
    dev = batch.mask.device
    labels = torch.zeros(B, T, dtype=torch.long, device=dev)
    beam_labels = torch.zeros(B, k, T, dtype=torch.long, device=dev)
    best_scores, beam_scores = [], []
    for b in range(B):
        n = int(lengths[b])
        one = _row(batch, b, n)
        state, _ = scorer.start(one, 1)
        beam = [_Hyp(torch.zeros((), device=dev), [], state, -1)]
        for _t in range(n):
            cands: list[torch.Tensor] = []
            parents: list[tuple[_Hyp, BeamState]] = []
            for hyp in beam:
                prev = None if hyp.last < 0 else scorer.embed_ids(torch.tensor([[hyp.last]], device=dev))
                scores, nxt = scorer.step(hyp.state, prev)          # [1, 1, V]
                cands.append(hyp.score.to(scores.dtype) + scores[0, 0])
                parents.append((hyp, nxt))
            flat = torch.cat(cands)
            V = cands[0].shape[0]
            vals, order = flat.sort(descending=True, stable=True)
            beam = []
            for val, j in zip(vals[:k], order[:k].tolist()):
                parent, nxt = parents[j // V]
                beam.append(_Hyp(val, parent.labels + [j % V], nxt, j % V))
        top = max(range(len(beam)), key=lambda i: float(beam[i].score))
        labels[b, :n] = torch.tensor(beam[top].labels, device=dev)
        for i, hyp in enumerate(beam):
            beam_labels[b, i, :n] = torch.tensor(hyp.labels, device=dev)
        best_scores.append(beam[top].score)
        row = torch.full((k,), float("-inf"), dtype=beam[0].score.dtype, device=dev)
        row[:len(beam)] = torch.stack([h.score for h in beam])
        beam_scores.append(row)
    return SearchResult(labels, torch.stack(best_scores), beam_labels, torch.stack(beam_scores))


def _row(batch: Any, b: int, n: int) -> Any:
    """Sentence ``b`` of a batch alone, trimmed to its ``n`` tokens (a batch of one)."""
    fields = {}
    for name, x in vars(batch).items():
        if torch.is_tensor(x) and x.dim() >= 1 and x.shape[0] == batch.mask.shape[0]:
            x = x[b:b + 1]
            if x.dim() >= 2 and x.shape[1] == batch.mask.shape[1]:
                x = x[:, :n]
        fields[name] = x
    return type(batch)(**fields)


# -- helpers ----------------------------------------------------------------------------------------
def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)


def _quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _stable(ratios: Sequence[float], tol: float) -> bool:
    """The inter-quartile range of the per-round ratios lies within median * (1 +- tol)."""
    q1, med, q3 = _quartiles(ratios)
    return q1 >= med * (1 - tol) and q3 <= med * (1 + tol)


def _summary(prefix: str, ratios: Sequence[float]) -> dict[str, float]:
    q1, med, q3 = _quartiles(ratios)
    return {f"{prefix}": med, f"{prefix}_q1": q1, f"{prefix}_q3": q3,
            f"{prefix}_iqr_rel": (q3 - q1) / med if med else float("nan")}


def _rounds(sides: dict[str, Callable[[], None]], device: str, *, min_repeats: int, max_repeats: int, tol: float,
            time_cap_s: float, baseline: str, calls: dict[str, int] | None = None) -> tuple[dict[str, list[float]], bool]:
    """Time each side once per round, interleaved in the dict's order, until every side's ratio to
    ``baseline`` is stable (after ``min_repeats`` rounds), or ``max_repeats`` rounds, or the time
    cap (checked between rounds). A side named in ``calls`` is called that many times back to back
    per round and its time divided by it (a short side measured above the clock's noise).
    -> (seconds per call per side per round, stable?)."""
    if min_repeats < 1 or max_repeats < min_repeats:
        raise ValueError(f"repeats: need 1 <= min_repeats <= max_repeats, got {min_repeats}, {max_repeats}")
    sync = _sync(device)
    times: dict[str, list[float]] = {name: [] for name in sides}
    t_start = time.perf_counter()
    stable = False
    while True:
        for name, fn in sides.items():
            n = (calls or {}).get(name, 1)
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            times[name].append((time.perf_counter() - t0) / n)
        r = len(times[baseline])
        stable = all(_stable([a / c for a, c in zip(times[n], times[baseline])], tol)
                     for n in sides if n != baseline)
        if r >= max_repeats or (r >= min_repeats and (stable or time.perf_counter() - t_start > time_cap_s)):
            return times, stable


# -- (a) relaxed-beam training vs CE training ------------------------------------------------------
def _train_pass(model: torch.nn.Module, init: dict[str, torch.Tensor], loss_fn: Callable, batches: Sequence[Any],
                lr: float, grad_clip: float) -> Callable[[], None]:
    def run() -> None:
        model.load_state_dict(init)
        model.train()
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
        for batch in batches:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model, batch)
            loss.backward()
            if grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            loss.item()
    return run


def compare_train_epochs(model: torch.nn.Module, batches: Sequence[Any], ks: Sequence[int] = (3, 5), *,
                         o_id: int = -1, alpha: float = 1.0, lr: float = 1e-3, grad_clip: float = 5.0,
                         min_repeats: int = 3, max_repeats: int = 10, tol: float = 0.10, time_cap_s: float = 30.0,
                         device: str = "cpu") -> dict[str, Any]:
    """Relaxed-beam (``BeamDirectLoss``, beam size K, fixed ``alpha``) vs ``SeqCE`` training passes
    over ``batches`` (already on ``device``), each pass from ``model``'s current weights (restored
    afterwards) with a fresh Adam. One untimed warm-up pass on the first batch per side.

    Returns ``ce_s`` (median seconds per pass), per K ``beam_k{K}_s``, ``train_ratio_k{K}`` (median
    of the per-round ratios beam / CE) with ``_q1``/``_q3``/``_iqr_rel`` ((q3 - q1) / median),
    ``train_within_k{K}`` (median ratio <= K, the paper's "roughly K x"), and ``repeats``,
    ``stable``, ``batches``, ``sentences``, ``tokens``."""
    if not batches:
        raise ValueError("compare_train_epochs: no batches")
    for k in ks:
        check_beam_size(k)
    init = copy.deepcopy(model.state_dict())
    sched = AlphaSchedule(init=alpha, max=max(alpha, AlphaSchedule.max))
    objectives = {"ce": SeqCE(), **{f"k{k}": BeamDirectLoss(BeamObjectiveConfig(k=k, alpha=sched), o_id=o_id)
                                    for k in ks}}
    try:
        for fn in objectives.values():
            _train_pass(model, init, fn, batches[:1], lr, grad_clip)()
        sides = {name: _train_pass(model, init, fn, batches, lr, grad_clip) for name, fn in objectives.items()}
        times, stable = _rounds(sides, device, min_repeats=min_repeats, max_repeats=max_repeats, tol=tol,
                                time_cap_s=time_cap_s, baseline="ce")
    finally:
        model.load_state_dict(init)
    out: dict[str, Any] = {"ce_s": statistics.median(times["ce"])}
    for k in ks:
        out[f"beam_k{k}_s"] = statistics.median(times[f"k{k}"])
        out.update(_summary(f"train_ratio_k{k}", [a / c for a, c in zip(times[f"k{k}"], times["ce"])]))
        out[f"train_within_k{k}"] = out[f"train_ratio_k{k}"] <= k
    out.update(repeats=float(len(times["ce"])), stable=stable, batches=float(len(batches)),
               sentences=float(sum(int(b.mask.shape[0]) for b in batches)),
               tokens=float(sum(int(b.mask.sum()) for b in batches)))
    return out


# -- (b) batched vs naive hard beam decoding -------------------------------------------------------
def decode_all(search: Callable[[Any], SearchResult], batches: Sequence[Any]) -> list[SearchResult]:
    with torch.no_grad():
        return [search(b) for b in batches]


def compare_decoding(scorer: StepScorer, batches: Sequence[Any], k: int = 5, *, min_repeats: int = 3,
                     max_repeats: int = 10, tol: float = 0.10, time_cap_s: float = 30.0, target: float = 20.0,
                     min_side_s: float = 0.25, device: str = "cpu") -> dict[str, Any]:
    """``beam_search`` vs :func:`naive_beam_search` at beam size ``k`` over ``batches`` (on
    ``device``; the scorer is put in eval mode), under ``torch.no_grad``. The best sequences must
    be equal and their scores agree (else ``RuntimeError``) before the timed rounds (interleaved
    naive, batched, ...; the same stopping rule as :func:`compare_train_epochs`); the batched side
    runs back to back enough times per round (``batched_calls``, at most 100) to take about
    ``min_side_s`` seconds, and its time per call is what is compared.

    Returns ``batched_s``/``naive_s`` (median seconds for all sentences),
    ``batched_sents_per_s``/``naive_sents_per_s``, ``decode_ratio_k{k}`` (median of per-round naive
    / batched) with ``_q1``/``_q3``/``_iqr_rel``, ``decode_target_met`` (ratio >= ``target``),
    ``repeats``, ``stable``, ``sentences``, ``max_abs_score_diff``."""
    if not batches:
        raise ValueError("compare_decoding: no batches")
    check_beam_size(k)
    was_training = getattr(scorer, "training", False)
    if hasattr(scorer, "eval"):
        scorer.eval()
    try:
        fast = decode_all(lambda b: beam_search(scorer, b, k), batches)
        slow = decode_all(lambda b: naive_beam_search(scorer, b, k), batches)
        diff = 0.0
        for i, (f, s, b) in enumerate(zip(fast, slow, batches)):
            if not torch.equal(f.labels * b.mask, s.labels * b.mask):
                bad = (f.labels * b.mask != s.labels * b.mask).any(1).nonzero().flatten().tolist()
                raise RuntimeError(f"compare_decoding: batched and naive beam search disagree (batch {i}, rows {bad})")
            diff = max(diff, float((f.score - s.score).abs().max()))
        if diff > 1e-3 * max(1.0, float(torch.cat([f.score for f in fast]).abs().max())):
            raise RuntimeError(f"compare_decoding: best-sequence scores differ by up to {diff:.3g}")
        sides = {"naive": lambda: decode_all(lambda b: naive_beam_search(scorer, b, k), batches),
                 "batched": lambda: decode_all(lambda b: beam_search(scorer, b, k), batches)}
        sync = _sync(device)
        sync()
        t0 = time.perf_counter()
        sides["batched"]()
        sync()
        n_batched = max(1, min(100, math.ceil(min_side_s / max(time.perf_counter() - t0, 1e-9))))
        times, stable = _rounds(sides, device, min_repeats=min_repeats, max_repeats=max_repeats, tol=tol,
                                time_cap_s=time_cap_s, baseline="batched", calls={"batched": n_batched})
    finally:
        if was_training and hasattr(scorer, "train"):
            scorer.train()
    n = float(sum(int(b.mask.shape[0]) for b in batches))
    out: dict[str, Any] = {"batched_s": statistics.median(times["batched"]), "naive_s": statistics.median(times["naive"])}
    out["batched_sents_per_s"] = n / out["batched_s"]
    out["naive_sents_per_s"] = n / out["naive_s"]
    out.update(_summary(f"decode_ratio_k{k}", [a / c for a, c in zip(times["naive"], times["batched"])]))
    out["decode_target_met"] = out[f"decode_ratio_k{k}"] >= target
    out.update(repeats=float(len(times["batched"])), stable=stable, sentences=n, max_abs_score_diff=diff,
               batched_calls=float(n_batched))
    return out
