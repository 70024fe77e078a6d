r"""Masked language models read as energies (thesis ch. 6, Sec. 6.2).

For a sequence y of T tokens and an MLM (``components.models.mlm.MaskedLM``) whose logits at a
masked position t are ``log phi_t(y) = f(y_t, h(y_{\t}))``:

    E_raw(y)  = - sum_t log phi_t(y)                    (raw scoring: a fully connected MRF)
    E_norm(y) = - sum_t log p_mlm(y_t | y_{\t})        (locally normalised scoring; Salazar et
                = - sum_t log softmax(log phi_t)[y_t]    al.'s pseudo-log-likelihood score)

:func:`sequence_energy` is the pure reading of the T conditionals' logits. :class:`MLMEnergy`
computes them from a model:

- a ``single_site`` model (its logits at t never read y_t) gives all T conditionals in ONE pass
  over y itself;
- any other model needs the T copies of y with one position masked each; :meth:`MLMEnergy.score`
  builds the copies of every row (only the valid (row, position) pairs: ``M = sum_r n_r`` copies
  for R rows of lengths n_r) and scores them in ONE batched ``conditionals`` call of M rows
  (``max_rows`` > 0 cuts it into ceil(M / max_rows) calls to bound memory: M x N x V logits).

Batched API (what the samplers of ``components.inference.mcmc`` call; ``rows`` long [R] maps each
row to its instance of the context, so C chains x B instances share B encodings):

    context(batch)                                   -> model.encode(batch)
    score(context, y [R, N], mask [R, N], rows [R])  -> E [R]
    proposal_logits(context, y, mask, rows, positions bool [R, N]) -> logits [R, N, V]
        y with ``positions`` replaced by [MASK], one pass: the MLM conditionals of the masked
        block given the rest (thesis Sec. 6.4.1, block proposals)

and the Energy contract ``energy(batch, y [B, N]) -> [B]`` over ``batch.mask`` (bool [B, N], the
target positions). MLM energies are defined on token ids only: a relaxed y is a ``ValueError``, and
so is an id outside [0, V); an id the model does not allow (``model.allowed`` False, -inf logits)
has energy +inf.

Cost of ``score``: single-site O(1) passes over R rows; otherwise O(1) passes over ``sum_r n_r``
rows (the thesis' O(T) decoder passes per sequence, batched).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from components.config import check_range

__all__ = ["ENERGY_KINDS", "EnergyKind", "sequence_energy", "MLMEnergyConfig", "MLMEnergy", "MLMScorer"]

ENERGY_KINDS = ("raw", "norm")
EnergyKind = Literal["raw", "norm"]


def sequence_energy(logits: Tensor, y: Tensor, mask: Tensor, kind: EnergyKind) -> Tensor:
    """E [R] from the conditionals' logits [R, N, V] (row r, position t: the logits with t masked),
    tokens y long [R, N] and valid positions mask bool [R, N]: ``raw`` sums -logit[y_t],
    ``norm`` sums -log_softmax(logits)[y_t], over the valid positions."""
    if kind not in ENERGY_KINDS:
        raise ValueError(f"MLM energy kind must be one of {ENERGY_KINDS}, got {kind!r}")
    if logits.dim() != 3 or logits.shape[:2] != y.shape or mask.shape != y.shape:
        raise ValueError(f"sequence_energy: logits [R, N, V], y [R, N] and mask [R, N] must agree, got "
                         f"{list(logits.shape)}, {list(y.shape)}, {list(mask.shape)}")
    scores = logits if kind == "raw" else torch.log_softmax(logits, -1)
    picked = scores.gather(2, y.masked_fill(~mask, 0).clamp_min(0)[..., None])[..., 0]
    return -torch.where(mask, picked, torch.zeros_like(picked)).sum(1)


def _site_scores(logits: Tensor, tokens: Tensor, kind: EnergyKind) -> Tensor:
    """log phi (raw) or log p_mlm (norm) of ``tokens`` [M] under per-site logits [M, V] -> [M]."""
    scores = logits if kind == "raw" else torch.log_softmax(logits, -1)
    return scores.gather(1, tokens[:, None])[:, 0]


@runtime_checkable
class MLMScorer(Protocol):
    """What the MLM samplers need from an energy (implemented by :class:`MLMEnergy`)."""

    kind: str
    vocab_size: int
    mask_id: int
    allowed: Tensor

    def energy(self, batch: Any, y: Tensor) -> Tensor: ...

    def context(self, batch: Any) -> Any: ...

    def score(self, context: Any, y: Tensor, mask: Tensor, rows: Tensor) -> Tensor: ...

    def proposal_logits(self, context: Any, y: Tensor, mask: Tensor, rows: Tensor, positions: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class MLMEnergyConfig:
    max_rows: int = 0              # rows per conditionals call (0: all in one call)

    def __post_init__(self):
        check_range(self, nonnegative=("max_rows",))


class MLMEnergy(nn.Module):
    """``E_raw`` or ``E_norm`` (module doc) of a :class:`~components.models.mlm.MaskedLM`.

    ``model`` is kept as a submodule when it is an ``nn.Module`` (so ``.to``/``.double``/``.eval``
    reach it). ``n_labels`` = V (so label-agnostic samplers such as ``mh_uniform`` can run on it)."""

    structure = "mlm"

    def __init__(self, model: Any, kind: EnergyKind = "raw", cfg: MLMEnergyConfig = MLMEnergyConfig()):
        super().__init__()
        if kind not in ENERGY_KINDS:
            raise ValueError(f"MLMEnergy: kind must be one of {ENERGY_KINDS}, got {kind!r}")
        for attr in ("vocab_size", "mask_id", "allowed", "single_site", "encode", "conditionals"):
            if not hasattr(model, attr):
                raise TypeError(f"MLMEnergy needs a MaskedLM; {type(model).__name__} has no {attr}")
        self.model = model
        self.kind = kind
        self.cfg = cfg

    # -- the model's vocabulary ------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(self.model.vocab_size)

    @property
    def n_labels(self) -> int:
        return self.vocab_size

    @property
    def mask_id(self) -> int:
        return int(self.model.mask_id)

    @property
    def allowed(self) -> Tensor:
        return self.model.allowed

    @property
    def single_site(self) -> bool:
        return bool(self.model.single_site)

    # -- batched API -------------------------------------------------------------------------------
    def context(self, batch: Any) -> Any:
        return self.model.encode(batch)

    def _check(self, y: Tensor, mask: Tensor, rows: Tensor, who: str) -> None:
        if not isinstance(y, Tensor) or y.dim() != 2 or y.dtype != torch.long:
            raise ValueError(f"{who}: y must hold token ids, long [R, N]; got "
                             f"{getattr(y, 'dtype', type(y).__name__)} {list(getattr(y, 'shape', []))}"
                             " (a relaxed y is not defined for an MLM energy)")
        if mask.shape != y.shape or mask.dtype != torch.bool:
            raise ValueError(f"{who}: mask must be bool {list(y.shape)}, got {mask.dtype} {list(mask.shape)}")
        if rows.shape != (y.shape[0],):
            raise ValueError(f"{who}: rows must be long [{y.shape[0]}], got {list(rows.shape)}")
        if y.shape[1] == 0 or not bool(mask[:, 0].all()):
            raise ValueError(f"{who}: empty sequence in mask {list(mask.shape)} (every row needs a token)")
        V = self.vocab_size
        bad = mask & ((y < 0) | (y >= V))
        if bool(bad.any()):
            r, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"{who}: unknown token id {int(y[r, t])} in y at row {r}, position {t} "
                             f"(ids are 0..{V - 1})")

    def _calls(self, tokens: Tensor, mask: Tensor, context: Any, rows: Tensor) -> list[tuple[int, Tensor]]:
        """conditionals over ``max_rows``-row chunks: [(start, logits [m, N, V])]."""
        M = tokens.shape[0]
        step = self.cfg.max_rows or M
        return [(s, self.model.conditionals(tokens[s:s + step], mask[s:s + step], context, rows[s:s + step]))
                for s in range(0, M, step)]

    def site_scores(self, context: Any, y: Tensor, mask: Tensor, rows: Tensor) -> Tensor:
        """[R, N]: log phi_t(y) (raw) or log p_mlm(y_t | y_{\\t}) (norm) at valid positions, 0 elsewhere."""
        self._check(y, mask, rows, f"MLMEnergy({self.kind}).score")
        y0 = y.masked_fill(~mask, 0)
        if self.single_site:
            out = torch.cat([_site_scores(lg.flatten(0, 1), y0[s:s + lg.shape[0]].flatten(), self.kind)
                             .view(lg.shape[0], -1)
                             for s, lg in self._calls(y0, mask, context, rows)])
            return torch.where(mask, out, torch.zeros_like(out))
        r_idx, t_idx = mask.nonzero(as_tuple=True)                      # the M valid (row, position) pairs
        copies = y0[r_idx].clone()
        copies[torch.arange(len(r_idx), device=y.device), t_idx] = self.mask_id
        parts = []
        for s, lg in self._calls(copies, mask[r_idx], context, rows[r_idx]):
            m = lg.shape[0]
            site = lg[torch.arange(m, device=y.device), t_idx[s:s + m]]   # [m, V]: logits at the masked site
            parts.append(_site_scores(site, y0[r_idx[s:s + m], t_idx[s:s + m]], self.kind))
        flat = torch.cat(parts)
        out = torch.zeros(y.shape, dtype=flat.dtype, device=y.device)
        return out.index_put((r_idx, t_idx), flat)

    def score(self, context: Any, y: Tensor, mask: Tensor, rows: Tensor) -> Tensor:
        """E [R] of token rows ``y`` long [R, N] over ``mask`` bool [R, N] (left-aligned, each row
        non-empty); row r belongs to instance ``rows[r]`` of ``context``. Ids must be allowed."""
        return -self.site_scores(context, y, mask, rows).sum(1)

    def proposal_logits(self, context: Any, y: Tensor, mask: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
        """logits [R, N, V] of the MLM with ``positions`` (bool [R, N], inside ``mask``) replaced
        by [MASK]; the rest of y is kept. One pass (``max_rows`` chunks)."""
        who = f"MLMEnergy({self.kind}).proposal_logits"
        if positions.shape != y.shape or positions.dtype != torch.bool:
            raise ValueError(f"{who}: positions must be bool {list(y.shape)}, got {positions.dtype} "
                             f"{list(positions.shape)}")
        if bool((positions & ~mask).any()):
            raise ValueError(f"{who}: positions outside the valid mask")
        tokens = y.masked_fill(~mask, 0).masked_fill(positions, self.mask_id)
        return torch.cat([lg for _, lg in self._calls(tokens, mask, context, rows)])

    # -- the Energy contract -----------------------------------------------------------------------
    def energy(self, batch: Any, y: Tensor) -> Tensor:
        """E [B] of token sequences y long [B, N] over ``batch.mask`` bool [B, N]."""
        mask = getattr(batch, "mask", None)
        if mask is None and isinstance(batch, dict):
            mask = batch.get("mask")
        if not isinstance(mask, Tensor):
            raise ValueError(f"MLMEnergy.energy: the batch ({type(batch).__name__}) has no .mask tensor "
                             "(bool [B, N], the target positions)")
        if not isinstance(y, Tensor) or y.shape[:2] != mask.shape or y.dim() != 2:
            raise ValueError(f"MLMEnergy.energy: y must hold token ids, long {list(mask.shape)} like batch.mask; "
                             f"got {getattr(y, 'dtype', type(y).__name__)} {list(getattr(y, 'shape', []))} "
                             "(a relaxed y is not defined for an MLM energy)")
        rows = torch.arange(mask.shape[0], device=mask.device)
        return self.score(self.context(batch), y, mask, rows)

    def forward(self, batch: Any, y: Tensor) -> Tensor:
        return self.energy(batch, y)


def mlm_raw(cfg: MLMEnergyConfig, model: Any) -> MLMEnergy:
    """E_raw(y) = -sum_t log phi_t(y): an MLM's raw masked logits (thesis 6.2.1)."""
    return MLMEnergy(model, "raw", cfg)


def mlm_norm(cfg: MLMEnergyConfig, model: Any) -> MLMEnergy:
    """E_norm(y) = -sum_t log p_mlm(y_t | y_\\t): locally normalised (thesis 6.2.4)."""
    return MLMEnergy(model, "norm", cfg)
