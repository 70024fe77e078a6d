"""Training objectives for chain energies (Shevchenko & Osokin, Sec. 2; Tu & Gimpel 2019).

Each objective maps (potentials, gold labels [B, N]) to per-sequence losses [B]; callers average.

- ``nll``: the CRF negative log-likelihood, log Z - s(y*).
- ``marginal_ce``: cross-entropy of the gold labels under the exact marginals,
  -sum_t log p(y_t = y*_t | x) (marginals from autograd of log Z, so the loss is differentiable).
- ``ssvm``: the structured SVM (margin-rescaled hinge) with a normalised Hamming margin,
  max_y [s(y) + Delta(y, y*)] - s(y*), Delta = (1/n) sum_t [y_t != y*_t]; the max is a
  loss-augmented Viterbi (the margin is added to the unaries). Always >= 0 (y = y* is a candidate).
- ``mean_field_ce``: cross-entropy under mean-field marginals (Shevchenko & Osokin eq. 6),
  back-propagated through the unrolled mean-field iterations.

Prediction follows the objective: MAP (Viterbi) for ``nll`` and ``ssvm``; the per-position argmax
of the (exact or mean-field) marginals for the CE objectives — see ``PREDICTION``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from components.energies.base import ChainPotentials
from components.structures import linear_chain, mean_field

_EPS = 1e-12


def _lengths(mask: torch.Tensor) -> torch.Tensor:
    return mask.sum(1).to(torch.get_default_dtype())


def nll(p: ChainPotentials, gold: torch.Tensor) -> torch.Tensor:
    return linear_chain.log_partition(p.unary, p.transition, p.mask) - linear_chain.score(p.unary, p.transition, p.mask, gold)


def _marginal_ce(q: torch.Tensor, gold: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    logq = torch.log(q.gather(-1, gold.unsqueeze(-1)).squeeze(-1).clamp_min(_EPS))
    return -(logq * mask).sum(1)


def marginal_ce(p: ChainPotentials, gold: torch.Tensor) -> torch.Tensor:
    return _marginal_ce(linear_chain.marginals(p.unary, p.transition, p.mask), gold, p.mask)


def hamming_augmented_unary(p: ChainPotentials, gold: torch.Tensor) -> torch.Tensor:
    """U + (1/n_b) * (1 - onehot(y*)) at unmasked positions: the loss-augmented unaries."""
    margin = (1.0 - F.one_hot(gold, p.n_labels).to(p.unary.dtype)) / _lengths(p.mask).to(p.unary.dtype)[:, None, None]
    return p.unary + margin * p.mask[..., None]


def ssvm(p: ChainPotentials, gold: torch.Tensor) -> torch.Tensor:
    aug = hamming_augmented_unary(p, gold)
    with torch.no_grad():
        y_hat, _ = linear_chain.viterbi(aug.detach(), p.transition.detach(), p.mask)
    return linear_chain.score(aug, p.transition, p.mask, y_hat) - linear_chain.score(p.unary, p.transition, p.mask, gold)


def mean_field_ce(p: ChainPotentials, gold: torch.Tensor, n_iters: int = 10) -> torch.Tensor:
    q = mean_field.mean_field(p.unary, p.transition, p.mask, n_iters=n_iters).marginals
    return _marginal_ce(q, gold, p.mask)


PREDICTION = {"nll": "map", "ssvm": "map", "marginal_ce": "marginals", "mean_field_ce": "mean_field"}


@torch.no_grad()
def predict(objective: str, p: ChainPotentials) -> torch.Tensor:
    """Labels [B, N] as the paper predicts for ``objective`` (masked positions 0)."""
    how = PREDICTION[objective]
    if how == "map":
        return linear_chain.viterbi(p.unary, p.transition, p.mask)[0]
    if how == "marginals":
        q = linear_chain.marginals(p.unary, p.transition, p.mask)
    else:
        q = mean_field.mean_field(p.unary, p.transition, p.mask).marginals
    return q.argmax(-1) * p.mask
