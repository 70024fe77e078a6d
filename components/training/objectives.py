"""Training objectives (Shevchenko & Osokin, Sec. 2 and 4.2; Tu & Gimpel 2019).

Each objective is an object built from its registry entry (``components.training.OBJECTIVES``):

    loss(p, gold) -> [B]      per-example loss; callers average over the batch
    predict(p)    -> labels   the paper's prediction rule for a model trained with this loss
    per_position: bool        the paper averages the loss over positions (eq. 5: the CE losses)
                              rather than taking it per sequence (eqs 4, 7: LL, SSVM)

Chain objectives (potentials ``ChainPotentials``: unary [B, N, L], transition [L, L] or
[B, N-1, L, L], mask [B, N]; gold labels long [B, N]; predictions long [B, N], 0 where masked):

- ``nll``: the CRF negative log-likelihood, log Z - s(y*); predicts MAP (Viterbi). >= 0.
- ``marginal_ce``: cross-entropy of the gold labels under the exact marginals,
  -sum_t log p(y_t = y*_t | x) (marginals from autograd of log Z, so the loss is differentiable);
  predicts the per-position argmax of the marginals. >= 0.
- ``ssvm``: the structured SVM (margin-rescaled hinge) with a normalised Hamming margin,
  max_y [s(y) + Delta(y, y*)] - s(y*), Delta = (1/n) sum_t [y_t != y*_t]; the max is a
  loss-augmented Viterbi (the margin is added to the unaries); predicts MAP. Always >= 0
  (y = y* is a candidate).
- ``mean_field_ce``: cross-entropy under mean-field marginals (Shevchenko & Osokin eq. 6),
  back-propagated through ``n_iters`` unrolled mean-field iterations; predicts the argmax of the
  mean-field marginals (``predict_iters`` iterations). >= 0.

Costs: O(B N L^2) per evaluation (forward-backward / Viterbi); mean field O(n_iters B N L^2).

The Gaussian CRF's objective ``gcrf_ce`` (``GCRFObjective``) is its own model's loss and rule:
``GaussianCRF.loss(p, y)`` (per-pixel CE of softmax(s*), already averaged over valid pixels) and
``GaussianCRF.predict(p)`` (argmax of s*); it is built with the energy as an input.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Protocol

import torch
import torch.nn.functional as F

from components.config import check_range
from components.energies.chain import ChainPotentials
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


# -- prediction rules: labels [B, N], 0 at masked positions ------------------------------------
def map_labels(p: ChainPotentials) -> torch.Tensor:
    """The MAP labelling (Viterbi)."""
    return linear_chain.viterbi(p.unary, p.transition, p.mask)[0]


def marginal_labels(p: ChainPotentials) -> torch.Tensor:
    """The per-position argmax of the exact marginals."""
    return linear_chain.marginals(p.unary, p.transition, p.mask).argmax(-1) * p.mask


def mean_field_labels(p: ChainPotentials, n_iters: int = 50) -> torch.Tensor:
    """The per-position argmax of the mean-field marginals."""
    return mean_field.mean_field(p.unary, p.transition, p.mask, n_iters=n_iters).marginals.argmax(-1) * p.mask


class Objective(Protocol):
    per_position: bool

    def loss(self, p: Any, gold: torch.Tensor) -> torch.Tensor: ...    # [B]
    def predict(self, p: Any) -> torch.Tensor: ...                     # labels, no gradient


@dataclass(frozen=True)
class ChainObjective:
    """A chain objective: its loss, its prediction rule and its normalisation (see the module doc)."""
    loss_fn: Callable[[ChainPotentials, torch.Tensor], torch.Tensor]
    predict_fn: Callable[[ChainPotentials], torch.Tensor]
    per_position: bool

    def loss(self, p: ChainPotentials, gold: torch.Tensor) -> torch.Tensor:
        """[B] per-sequence loss (a sum over positions for the CE objectives)."""
        return self.loss_fn(p, gold)

    @torch.no_grad()
    def predict(self, p: ChainPotentials) -> torch.Tensor:
        """long [B, N]: the labels the paper predicts with (0 at masked positions)."""
        return self.predict_fn(p)


@dataclass(frozen=True)
class MeanFieldCEConfig:
    n_iters: int = 10          # unrolled mean-field iterations in the loss (back-propagated)
    predict_iters: int = 50    # iterations at prediction (mean_field's default)

    def __post_init__(self):
        check_range(self, positive=("n_iters", "predict_iters"))


def make_nll(cfg: Any) -> ChainObjective:
    return ChainObjective(nll, map_labels, per_position=False)


def make_marginal_ce(cfg: Any) -> ChainObjective:
    return ChainObjective(marginal_ce, marginal_labels, per_position=True)


def make_ssvm(cfg: Any) -> ChainObjective:
    return ChainObjective(ssvm, map_labels, per_position=False)


def make_mean_field_ce(cfg: MeanFieldCEConfig) -> ChainObjective:
    return ChainObjective(partial(mean_field_ce, n_iters=cfg.n_iters),
                          partial(mean_field_labels, n_iters=cfg.predict_iters), per_position=True)


@dataclass(frozen=True)
class GCRFObjective:
    """``gcrf_ce``: the Gaussian CRF's per-pixel CE of softmax(s*) (S&O eq. 14), averaged over the
    valid pixels by ``GaussianCRF.loss`` itself; prediction argmax_k s* (eq. 13), long [B, H, W]."""
    energy: Any                # a components.energies.gcrf.GaussianCRF (its solver settings)
    per_position: bool = True

    def loss(self, p: Any, gold: torch.Tensor) -> torch.Tensor:
        return self.energy.loss(p, gold)

    def predict(self, p: Any) -> torch.Tensor:
        return self.energy.predict(p)


def make_gcrf_ce(cfg: Any, *, energy: Any) -> GCRFObjective:
    return GCRFObjective(energy)
