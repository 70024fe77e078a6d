"""Benchmarks of Goyal et al. (2018)'s search-aware training and of hard beam decoding.

Two measurements, each against a named baseline timed side by side on the same inputs:

- :func:`compare_train_epochs`: one pass over a fixed list of batches (an epoch, or its first n
  batches) of relaxed-beam training (``BeamDirectLoss`` at each beam size K) against teacher-forced
  cross-entropy (``SeqCE``) training of the same randomly initialised step scorer: forward,
  backward, gradient clipping and an Adam step per batch, as ``fit`` does. Every pass starts from
  the same weights with a fresh optimiser. The paper reports relaxed-beam training roughly K times
  slower than CE.
- :func:`compare_decoding`: :func:`components.inference.beam.beam_search` (batched over sentences
  and beam items) against :func:`naive_beam_search`, the faithful per-hypothesis loop (one
  sentence at a time; at each step, one scorer call per beam item on that single hypothesis,
  candidates collected, sorted, the top k kept). Both must find the same best sequences before
  anything is timed.

Both time their sides with the one harness, :func:`components.metrics.timing.compare`
(interleaved rounds until the ratios' IQR is within the target, or its time cap). No I/O: the
functions return dicts of figures (seconds, ratios, sentences/s). Used by the ``bench`` stage
only, never by timed tests.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from components.inference.beam import BeamState, SearchResult, StepScorer, beam_search, check_beam_size, check_mask
from components.metrics.timing import TimingConfig, compare, ratio_metrics
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
                         timing: TimingConfig = TimingConfig(), device: str = "cpu") -> dict[str, Any]:
    """Relaxed-beam (``BeamDirectLoss``, beam size K, fixed ``alpha``) vs ``SeqCE`` training passes
    over ``batches`` (already on ``device``), each pass from ``model``'s current weights (restored
    afterwards) with a fresh Adam, timed by :func:`components.metrics.timing.compare` (CE, K1, K2,
    CE, ... under ``timing``'s stopping rule; its warm-up calls are whole passes).

    Returns ``ce_s`` (median seconds per pass), per K ``beam_k{K}_s``, ``train_ratio_k{K}`` (median
    of the per-round ratios beam / CE) with ``_q1``/``_q3``/``_iqr_rel``/``_converged``,
    ``train_within_k{K}`` (median ratio <= K, the paper's "roughly K x"), and ``rounds``,
    ``converged``, ``load_avg_start``, ``batches``, ``sentences``, ``tokens``."""
    if not batches:
        raise ValueError("compare_train_epochs: no batches")
    for k in ks:
        check_beam_size(k)
    init = copy.deepcopy(model.state_dict())
    sched = AlphaSchedule(init=alpha, max=max(alpha, AlphaSchedule.max))
    objectives = {"ce": SeqCE(), **{f"k{k}": BeamDirectLoss(BeamObjectiveConfig(k=k, alpha=sched), o_id=o_id)
                                    for k in ks}}
    try:
        sides = {name: _train_pass(model, init, fn, batches, lr, grad_clip) for name, fn in objectives.items()}
        # the ratio is a slowdown: the beam side's time over CE's
        res = compare(sides, baseline=[f"k{k}" for k in ks], ours="ce", timing=timing, device=device)
    finally:
        model.load_state_dict(init)
    out: dict[str, Any] = {"ce_s": res["sides"]["ce"]["median_s"]}
    for k in ks:
        out[f"beam_k{k}_s"] = res["sides"][f"k{k}"]["median_s"]
        out.update(ratio_metrics(res, f"k{k}/ce", f"train_ratio_k{k}"))
        out[f"train_within_k{k}"] = out[f"train_ratio_k{k}"] <= k
    out.update(rounds=float(res["rounds"]), converged=res["converged"], load_avg_start=res["load_avg_start"],
               batches=float(len(batches)), sentences=float(sum(int(b.mask.shape[0]) for b in batches)),
               tokens=float(sum(int(b.mask.sum()) for b in batches)))
    return out


# -- (b) batched vs naive hard beam decoding -------------------------------------------------------
def decode_all(search: Callable[[Any], SearchResult], batches: Sequence[Any]) -> list[SearchResult]:
    with torch.no_grad():
        return [search(b) for b in batches]


def compare_decoding(scorer: StepScorer, batches: Sequence[Any], k: int = 5, *, target: float = 20.0,
                     timing: TimingConfig = TimingConfig(), device: str = "cpu") -> dict[str, Any]:
    """``beam_search`` vs :func:`naive_beam_search` at beam size ``k`` over ``batches`` (on
    ``device``; the scorer is put in eval mode), under ``torch.no_grad``. The best sequences must
    be equal and their scores agree (else ``RuntimeError``) before the timed rounds of
    :func:`components.metrics.timing.compare` (naive, batched, naive, ...; a batched turn runs back
    to back up to ``timing.min_turn_s``, ``batched_calls`` times, and its time per call is what is
    compared).

    Returns ``batched_s``/``naive_s`` (median seconds for all sentences),
    ``batched_sents_per_s``/``naive_sents_per_s``, ``decode_ratio_k{k}`` (median of per-round naive
    / batched) with ``_q1``/``_q3``/``_iqr_rel``/``_converged``, ``decode_target_met`` (ratio >=
    ``target``), ``rounds``, ``converged``, ``load_avg_start``, ``sentences``, ``max_abs_score_diff``,
    ``batched_calls``."""
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
        res = compare(sides, baseline="naive", ours="batched", timing=timing, device=device)
    finally:
        if was_training and hasattr(scorer, "train"):
            scorer.train()
    n = float(sum(int(b.mask.shape[0]) for b in batches))
    out: dict[str, Any] = {"batched_s": res["sides"]["batched"]["median_s"], "naive_s": res["sides"]["naive"]["median_s"]}
    out["batched_sents_per_s"] = n / out["batched_s"]
    out["naive_sents_per_s"] = n / out["naive_s"]
    out.update(ratio_metrics(res, "naive/batched", f"decode_ratio_k{k}"))
    out["decode_target_met"] = out[f"decode_ratio_k{k}"] >= target
    out.update(rounds=float(res["rounds"]), converged=res["converged"], load_avg_start=res["load_avg_start"],
               sentences=n, max_abs_score_diff=diff, batched_calls=float(res["sides"]["batched"]["calls"]))
    return out
