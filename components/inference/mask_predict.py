r"""Mask-predict decoding of a conditional masked LM (Ghazvininejad et al. 2019, Sec. 3).

A non-probabilistic iterative refinement; the thesis (Sec. 6.5, Table 6.6) compares the MH
samplers with it, and its degenerate block Gibbs sampler at proposal temperature 0 becomes it.

Given a source x, the model's length predictor ``predict_length(context) -> log p(L | x)``
[B, max_len + 1] and its conditionals ``p_mlm(y_t | y_obs, x)``:

1. Lengths: the ``length_candidates`` most probable lengths L >= 1 (``l`` candidates per source),
   each times ``length_scale`` (rounded, within 1 .. max_len; 1 = Mask-Predict's). A model trained on
   a teacher's short translations predicts short lengths; the scale, tried on dev like a beam's length
   penalty, corrects that without retraining.
2. For each candidate, iteration 0: all L positions are [MASK]; predict every position,
   ``y_t = argmax_v p(v | ...)``, ``p_t = max_v p(v | ...)``.
3. Iterations i = 1 .. I-1: re-mask the ``n_i = floor(L (I - i) / I)`` positions of lowest ``p_t``
   (ties: the earlier position first), predict them again from the rest, and update their tokens
   and probabilities (the others keep theirs).
4. Pick the candidate with the highest average log-probability ``(1 / L) sum_t log p_t``.

Every candidate of every source is refined in one batch of ``B * l`` rows (``rows`` maps each to
its source, so the source is encoded once): ``I`` conditionals calls in all, O(I B l L) tokens.
Only ids the model allows are predicted (its logits are -inf elsewhere).

This is a plain function API (:func:`mask_predict`), not an ``INFERENCE`` entry: it needs a
conditional MLM rather than an energy, and it chooses the output length itself, so its outputs do
not live on the batch's target mask as the ``Inference`` contract's labels do.

Reference: M. Ghazvininejad, O. Levy, Y. Liu, L. Zettlemoyer (2019), Mask-Predict: Parallel
Decoding of Conditional Masked Language Models. EMNLP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from components.config import check_range

__all__ = ["MaskPredictConfig", "MaskPredictResult", "mask_predict"]


@dataclass(frozen=True)
class MaskPredictConfig:
    iterations: int = 10            # I (the thesis' Table 6.6: It = 10)
    length_candidates: int = 1      # l (Table 6.6: beam = 1; the paper's default is 5)
    length_scale: float = 1.0       # each candidate length times this (rounded): 1 = the model's own lengths

    def __post_init__(self):
        check_range(self, positive=("iterations", "length_candidates", "length_scale"))


@dataclass
class MaskPredictResult:
    tokens: Tensor                  # long [B, L_max]: the chosen candidate (0 past its length)
    mask: Tensor                    # bool [B, L_max]: left-aligned, its length
    lengths: Tensor                 # long [B]
    log_prob: Tensor                # [B]: the chosen candidate's average token log-probability
    candidate_lengths: Tensor       # long [B, l], most probable first
    candidate_log_prob: Tensor      # [B, l]
    candidate_tokens: Tensor        # long [B, l, L_max]
    candidate_length_log_prob: Tensor   # [B, l]: log p(L | x) of each candidate length


@torch.no_grad()
def mask_predict(model: Any, batch: Any, cfg: MaskPredictConfig = MaskPredictConfig()) -> MaskPredictResult:
    """Mask-predict (module doc) with a conditional MLM: ``model.encode(batch)`` (reads
    ``batch.words`` long [B, S] / ``batch.src_mask`` bool [B, S]), ``model.predict_length(context)``
    -> log-probs [B, max_len + 1], ``model.conditionals(tokens, mask, context, rows)``."""
    for attr in ("encode", "conditionals", "predict_length", "mask_id", "vocab_size"):
        if not hasattr(model, attr):
            raise TypeError(f"mask_predict needs a conditional MLM with {attr}; got {type(model).__name__}")
    src_mask = getattr(batch, "src_mask", None)
    if not isinstance(src_mask, Tensor) or src_mask.dim() != 2:
        raise ValueError(f"mask_predict: the batch ({type(batch).__name__}) needs src_mask bool [B, S]")
    if src_mask.shape[0] == 0 or src_mask.shape[1] == 0 or not bool(src_mask.any(1).all()):
        empty = [] if src_mask.shape[1] == 0 else (~src_mask.any(1)).nonzero()[:, 0].tolist()
        raise ValueError(f"mask_predict: empty source in src_mask {list(src_mask.shape)} (rows {empty or 'all'})")
    context = model.encode(batch)
    log_len = model.predict_length(context)
    B = src_mask.shape[0]
    if log_len.dim() != 2 or log_len.shape[0] != B or log_len.shape[1] < 2:
        raise ValueError(f"mask_predict: predict_length must give log-probs [B, max_len + 1] = [{B}, >= 2], "
                         f"got {list(log_len.shape)}")
    max_len = log_len.shape[1] - 1
    k = cfg.length_candidates
    if k > max_len:
        raise ValueError(f"mask_predict: length_candidates {k} > the {max_len} lengths the model predicts")
    scores = log_len.clone()
    scores[:, 0] = float("-inf")                                  # a target has at least one token
    cand_lp, cand_len = scores.topk(k, dim=1)                     # [B, l]
    if cfg.length_scale != 1.0:
        cand_len = (cand_len.double() * cfg.length_scale).round().long().clamp(1, max_len)
    dev = src_mask.device
    lengths = cand_len.reshape(-1)                                # [B l], row b * l + j
    rows = torch.arange(B, device=dev).repeat_interleave(k)
    Lm = int(lengths.max())
    mask = torch.arange(Lm, device=dev)[None] < lengths[:, None]
    R = B * k
    tokens = torch.zeros(R, Lm, dtype=torch.long, device=dev)
    probs = torch.zeros(R, Lm, dtype=torch.float64, device=dev)
    remask = mask.clone()                                         # iteration 0: everything
    I = cfg.iterations
    for i in range(I):
        if i > 0:
            n_mask = (lengths * (I - i)) // I                     # floor(L (I - i) / I)
            if not bool((n_mask > 0).any()):
                break
            key = probs.masked_fill(~mask, float("inf"))
            order = key.sort(dim=1, stable=True).indices          # lowest probability first, ties by position
            rank = torch.empty_like(order).scatter_(1, order, torch.arange(Lm, device=dev).expand(R, Lm))
            remask = mask & (rank < n_mask[:, None])
        inp = tokens.masked_fill(remask, model.mask_id)
        logits = model.conditionals(inp, mask, context, rows)
        p, v = torch.softmax(logits.double(), -1).max(-1)
        tokens = torch.where(remask, v, tokens)
        probs = torch.where(remask, p, probs)
    avg = torch.where(mask, probs.log(), torch.zeros_like(probs)).sum(1) / lengths
    avg = avg.view(B, k)
    best = avg.argmax(1)
    cand_tokens = tokens.masked_fill(~mask, 0).view(B, k, Lm)
    ar = torch.arange(B, device=dev)
    chosen_len = cand_len[ar, best]
    out_mask = torch.arange(Lm, device=dev)[None] < chosen_len[:, None]
    return MaskPredictResult(tokens=cand_tokens[ar, best], mask=out_mask, lengths=chosen_len, log_prob=avg[ar, best],
                             candidate_lengths=cand_len, candidate_log_prob=avg, candidate_tokens=cand_tokens,
                             candidate_length_log_prob=cand_lp)
