"""The library on one screen: exact and approximate inference on your own linear-chain potentials,
on your own chain energy, or on a pytorch-crf model, with the methods the pipeline benchmarks.
With ``chain``, ``decode``, ``log_partition`` and ``marginals`` imported from this module:

    unary = torch.randn(2, 5, 4)                  # [B, N, L] scores of label l at position t
    transition = torch.randn(4, 4)                # [L, L] score of label i followed by label j
    p = chain(unary, transition, lengths=[5, 3])  # a ChainPotentials (mask from the lengths)
    best = decode(p)                              # exact MAP by Viterbi: .labels [B, N], .energy [B]
    gd = decode(p, "gd", {"lr": 1.0, "iterations": 50})   # any INFERENCE method that needs a ChainEnergy
    log_z, probs = log_partition(p), marginals(p)

Scores, not energies: E(y) = -(sum_t unary[t, y_t] + sum_t transition[y_t, y_t+1]), so the MAP has
the lowest energy. ``decode(model, method, config, batch=...)`` takes any ``ChainEnergy``
(:mod:`components.energies.base`: ``structure = "chain"`` and ``potentials(batch)``) or, for the
step decoders (``greedy``, ``beam``, ``soft_beam``), any ``StepScorer``; ``sample(energy, sampler,
config, batch=..., n_chains=..., n_steps=...)`` runs a ``SAMPLERS`` entry on any ``Energy``; and
:class:`PytorchCRFEnergy` is one made of a pytorch-crf ``CRF`` and your emission network (its start
and end transitions folded into the first and last positions' unary scores, which leaves every
sequence's score unchanged). The methods and their configs are ``INFERENCE``'s
(``components.inference.registry``: ``viterbi``, ``gd``, ``gd_adam``, ...;
``INFERENCE.names(needs="ChainEnergy")`` lists those for chain energies, ``INFERENCE[name].doc`` says
what each does); methods that need a trained inference network (``infnet``, ``tailored_infnet``,
``gd_warm_start``) take it as ``net=``. ``examples/`` shows the paths end to end.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch

from components.energies.chain import ChainPotentials, FixedPotentials
from components.inference.base import InferenceResult
from components.inference.mcmc.base import run_chains
from components.inference.mcmc.registry import SAMPLERS
from components.inference.registry import INFERENCE
from components.structures import linear_chain

__all__ = ["chain", "decode", "sample", "log_partition", "marginals", "PytorchCRFEnergy"]


def chain(unary: torch.Tensor, transition: torch.Tensor, mask: torch.Tensor | None = None, *,
          lengths: Sequence[int] | torch.Tensor | None = None) -> ChainPotentials:
    """Your potentials as a :class:`ChainPotentials`, checked (shapes, finite values, a left-aligned
    mask): ``unary`` [B, N, L], ``transition`` [L, L] or per position [B, N-1, L, L]; the mask [B, N]
    is given, built from ``lengths``, or all True."""
    if mask is not None and lengths is not None:
        raise ValueError("chain: give mask or lengths, not both")
    if lengths is not None:
        n = torch.as_tensor(lengths, device=unary.device)
        if n.shape != unary.shape[:1]:
            raise ValueError(f"chain: lengths has shape {tuple(n.shape)}, unary has batch size {unary.shape[0]}")
        mask = torch.arange(unary.shape[1], device=unary.device)[None] < n[:, None]
    ch = linear_chain.validate(unary, transition, mask, caller="chain")
    return ChainPotentials(ch.unary, ch.transition, ch.mask)


def decode(model: ChainPotentials | Any, method: str = "viterbi", config: Mapping[str, Any] | Any = None, *,
           batch: Any = None, seed: int = 0, **inputs: Any) -> InferenceResult:
    """Run the ``INFERENCE`` method ``method`` (its config from ``config``, a mapping read strictly or
    the method's own config object) on ``model`` with the ``batch`` it scores: a
    :class:`ChainPotentials` (from :func:`chain`; no batch), a ``ChainEnergy`` for the chain methods
    (``viterbi``, ``gd``, ...), a ``StepScorer`` (:mod:`components.models.step_scorer`) for ``greedy``,
    ``beam`` and ``soft_beam``. The method checks the model (a ``TypeError`` naming the method and
    what is missing). ``seed``: the random starts of a seeded method (``gd``, ``gd_adam``, ...).
    ``inputs``: what the method needs besides its config (``net=`` for the inference-network methods).
    Returns labels, the relaxed output where the method has one, their energy / score, and the
    method's stats."""
    if isinstance(model, ChainPotentials):
        if batch is not None:
            raise ValueError("decode: a ChainPotentials is its own batch; pass batch= only with a model")
        model = FixedPotentials(model)
    if INFERENCE[method].meta.get("seeded"):
        inputs = {"seed": seed, **inputs}
    return INFERENCE.build(method, config, **inputs)(model, batch)


def sample(energy: Any, sampler: str = "mh_uniform", config: Mapping[str, Any] | Any = None, *, batch: Any,
           n_chains: int, n_steps: int, seed: int = 0, **init: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """Run ``n_chains`` chains per instance of ``batch`` for ``n_steps`` steps of the ``SAMPLERS`` entry
    ``sampler`` on ``energy`` (``mh_uniform``: any ``Energy`` with ``n_labels``; ``gibbs_chain``: a
    ``ChainEnergy``; ``mh_mlm`` / ``gibbs_mlm``: a masked-LM scorer). Returns the final state (its
    ``y`` [C, B, N], ``energy`` [C, B]) and each step statistic's mean (e.g. ``accepted``). ``init``:
    the sampler's ``init`` options (``mask``, ``n_labels``, ``y0``)."""
    s = SAMPLERS.build(sampler, config, seed=seed)
    return run_chains(s, energy, batch, n_chains=n_chains, n_steps=n_steps, **init)


def log_partition(p: ChainPotentials) -> torch.Tensor:
    """log Z [B] of the chain CRF exp(-E(y)) / Z: the log-sum-exp of every sequence's score."""
    return linear_chain.log_partition(p.unary, p.transition, p.mask)


def marginals(p: ChainPotentials) -> torch.Tensor:
    """P(y_t = l) [B, N, L] under the chain CRF (zero rows at masked positions)."""
    return linear_chain.marginals(p.unary, p.transition, p.mask)


class PytorchCRFEnergy:
    """A pytorch-crf model as a ``ChainEnergy``: ``crf`` a ``torchcrf.CRF(num_tags, batch_first=True)``,
    ``emissions(batch)`` your network's [B, N, L] emission scores and ``mask(batch)`` its bool [B, N]
    mask (left-aligned, first position on). ``potentials(batch)``: unary = emissions, with
    ``crf.start_transitions`` added at the first position and ``crf.end_transitions`` at each
    sequence's last one, and transition = ``crf.transitions``: every sequence then scores exactly as
    ``crf`` scores it, so Viterbi here returns ``crf.decode``'s paths and ``log_partition`` is its
    normaliser (``examples/pytorch_crf_energy.py`` checks both)."""

    structure = "chain"

    def __init__(self, crf: Any, emissions: Callable[[Any], torch.Tensor], mask: Callable[[Any], torch.Tensor]):
        if not getattr(crf, "batch_first", False):
            raise ValueError("PytorchCRFEnergy: build the CRF with batch_first=True (emissions are [B, N, L])")
        self.crf, self.emissions, self.mask = crf, emissions, mask

    def potentials(self, batch: Any) -> ChainPotentials:
        u = self.emissions(batch)
        m = self.mask(batch).bool()
        if u.dim() != 3 or u.shape[:2] != m.shape or u.shape[-1] != self.crf.num_tags:
            raise ValueError(f"PytorchCRFEnergy: emissions {tuple(u.shape)} and mask {tuple(m.shape)} do not match "
                             f"[B, N, num_tags={self.crf.num_tags}]")
        last = m.sum(1) - 1                                      # each sequence's last position
        if (last < 0).any():
            raise ValueError("PytorchCRFEnergy: every sequence needs at least one position (mask[:, 0] True)")
        u = u.clone()
        u[:, 0] = u[:, 0] + self.crf.start_transitions
        rows = torch.arange(u.shape[0], device=u.device)
        u[rows, last] = u[rows, last] + self.crf.end_transitions
        return ChainPotentials(u, self.crf.transitions, m)

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor:
        return self.potentials(batch).energy(y)

    def eval(self) -> "PytorchCRFEnergy":
        self.crf.eval()
        return self
