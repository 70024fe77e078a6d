r"""Markov kernels over token sequences for a masked-LM energy (thesis ch. 6): Metropolis–Hastings
with the MLM's own conditionals as proposal, and the degenerate Gibbs sampler.

- ``mh_mlm`` (thesis ch. 6, Algorithm 4, Sec. 6.4.1): Metropolis–Hastings over token sequences
  for a masked-LM energy (:class:`components.energies.mlm.MLMScorer`: ``E_raw`` or ``E_norm``),
  with the MLM's own conditionals as proposal. One ``step`` is one sweep (the thesis' "epoch"):
  per chain a uniform random order of its ``n`` valid positions (without replacement), cut into
  blocks S of size ``b`` (the last may be shorter). For each block, ONE proposal pass over all
  C x B rows with S replaced by [MASK] gives the conditionals ``p_t(. | y_{\S})``, t in S, turned
  into ``q_t = nucleus_p(softmax(logits_t / tau))`` (:func:`proposal_log_probs`); ``y'_S`` is drawn
  from ``q(y' | y) = prod_{t in S} q_t(y'_t)`` and, since ``y'_{\S} = y_{\S}``, the same pass gives
  ``q(y | y') = prod_{t in S} q_t(y_t)`` (:func:`block_log_q`). Then ONE batched energy pass of the
  proposals (the current energy is cached) and

      log alpha = min(0, (E(y) - E(y')) / T + log q(y | y') - log q(y' | y))   (:func:`mh_mlm_log_accept`)

  (a reverse move outside the nucleus has q = 0: rejected). For a fixed block S this kernel is
  reversible w.r.t. ``pi_T``, so a sweep (a product of block kernels in an order drawn
  independently of the state) leaves ``pi_T`` invariant, whatever the MLM's conditionals are.
  Schedules (:func:`block_size_at`, :func:`temperature_at`): the block size goes linearly from
  ``block_size`` to ``block_size_final`` over ``block_anneal_sweeps`` sweeps (Sec. 6.7.3); the
  target temperature drops by ``anneal_step`` per sweep down to ``min_temperature`` (Sec. 6.8,
  Table 6.5), so sweep s targets ``pi_{T_s}``; ``accept_first_sweeps`` accepts every proposal of
  the first sweeps (Table 6.6's variance trick; those sweeps are not MH). Cost per sweep:
  ``2 ceil(n_max / b)`` passes over ``C B`` rows (the energy pass of a non-single-site model over
  its ``C sum_b n_b`` masked copies), against Algorithm 4's ``n (1 + 2 n)`` single-row passes per
  chain (``components.bench.mcmc``).
- ``gibbs_mlm``: the degenerate (block) Gibbs sampler of Wang & Cho (2019): the same proposal,
  always accepted; one energy pass per sweep (for the cache and the stats). Its stationary law is
  that of the MLM's conditionals, in general NOT ``pi`` (the tests measure the gap exactly).

Init: ``"uniform"`` (i.i.d. uniform over the model's allowed ids), ``"warm"`` (greedy argmax
of the MLM's conditionals of the all-[MASK] sequence, Algorithm 4 line 3: mask-predict with one
iteration at the batch's lengths) or ``y0``; every chain of an instance starts from the same
sequence (the thesis) unless ``shared_start=False``. ``start_noise`` s in [0, 1): then each chain's
start (whichever way it was built, ``y0`` included) independently has each valid position
replaced, with probability s, by a uniform draw over the allowed ids (possibly the same id), from
the sampler's seeded generator: over-dispersed starts for R-hat (which assumes chains started
apart): warm start plus independent random perturbations. A start law with s > 0 gives every
sequence of allowed ids positive probability (at least ``(s / |allowed|)^n``); s = 0 draws
nothing, so the chains are exactly those without the setting. A block
larger than a sequence is an error unless ``clip_block``. State: :class:`MLMChainState` (adds the
model's ``context`` and ``rows``, the instance of each flattened row ``c * B + b``). Stats per
sweep [C, B]: ``accepted`` and ``novel`` (accepted AND different from the current state; the
thesis' novel transition rate), each a fraction of the sweep's proposals; ``changed``;
``energy`` (after the sweep).

References: K. Goyal (2021), thesis ch. 6 (MH with MLM proposals). A. Wang, K. Cho (2019), BERT
has a mouth, and it must speak. A. Holtzman et al. (2020), nucleus sampling.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from components.config import check_range, field_error
from components.energies.base import require
from components.energies.mlm import MLMScorer
from components.inference.mcmc.base import ChainState, _resolve_mask, check_seed, start_ids

__all__ = ["MLMChainState", "GibbsMLMConfig", "MHMLMConfig", "GibbsMLM", "MHMLM", "proposal_log_probs",
           "block_log_q", "mh_mlm_log_accept", "block_size_at", "temperature_at", "make_mh_mlm", "make_gibbs_mlm"]


_MLM_INITS = ("uniform", "warm")


def proposal_log_probs(logits: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """log q [..., V] of the tempered nucleus proposal from MLM logits [..., V].

    ``softmax(logits / temperature)``, then (``top_p < 1``) the nucleus: the smallest set of ids,
    taken in order of decreasing probability (ties by id), whose cumulative probability is
    ``>= top_p``, renormalised; ids outside it get ``-inf``. Disallowed ids (-inf logits) get -inf."""
    if not (0.0 < top_p <= 1.0):
        raise ValueError(f"proposal_log_probs: top_p (the nucleus) must be in (0, 1], got {top_p!r}")
    if not temperature > 0:
        raise ValueError(f"proposal_log_probs: temperature must be > 0, got {temperature!r}")
    scaled = logits / temperature
    if top_p >= 1.0:
        return torch.log_softmax(scaled, -1)
    probs = torch.softmax(scaled, -1)
    sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
    before = sorted_p.cumsum(-1) - sorted_p                        # mass of the ids ranked above
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < top_p)
    return torch.log_softmax(scaled.masked_fill(~keep, float("-inf")), -1)


def block_log_q(log_q: Tensor, y: Tensor, positions: Tensor) -> Tensor:
    """log prod_{t in S} q_t(y_t) [R] for per-site log q [R, N, V], tokens y long [R, N] and the
    block S = ``positions`` bool [R, N] (the product proposal of a block, thesis Sec. 6.4.1)."""
    picked = log_q.gather(2, y.clamp(0, log_q.shape[-1] - 1)[..., None])[..., 0]
    return torch.where(positions, picked, torch.zeros_like(picked)).sum(1)


def mh_mlm_log_accept(energy: Tensor, proposed_energy: Tensor, log_q_forward: Tensor, log_q_reverse: Tensor,
                      temperature: float = 1.0) -> Tensor:
    """log alpha(y -> y') = min(0, (E(y) - E(y')) / T + log q(y | y') - log q(y' | y)), elementwise.

    A reverse proposal of probability 0 (y_S outside the nucleus of y's block) gives -inf, and so
    does any nan (e.g. E(y) = E(y') = inf): the move is rejected."""
    log_a = ((energy - proposed_energy) / temperature + log_q_reverse - log_q_forward).clamp_max(0.0)
    return torch.where(torch.isnan(log_a), torch.full_like(log_a, float("-inf")), log_a)


def block_size_at(cfg: Any, sweep: int) -> int:
    """The block size of sweep ``sweep`` (0-based): linear from ``block_size`` at sweep 0 to
    ``block_size_final`` at sweep ``block_anneal_sweeps`` (and after), rounded half up."""
    b0, bf, S = cfg.block_size, cfg.block_size_final, cfg.block_anneal_sweeps
    if bf is None or S == 0:
        return b0
    frac = min(sweep / S, 1.0)
    return int(math.floor(b0 + (bf - b0) * frac + 0.5))


def temperature_at(cfg: Any, sweep: int) -> float:
    """The target temperature of sweep ``sweep``: ``temperature - anneal_step * sweep``, floored at
    ``min_temperature`` (linear annealing toward the modes, thesis Sec. 6.8); 1 for Gibbs."""
    if not hasattr(cfg, "temperature"):
        return 1.0
    if cfg.anneal_step == 0:
        return float(cfg.temperature)
    return max(float(cfg.min_temperature), float(cfg.temperature) - cfg.anneal_step * sweep)


@dataclass(frozen=True)
class GibbsMLMConfig:
    init: Literal["uniform", "warm"] = "uniform"   # random allowed ids | greedy MLM decode of all-[MASK]
    shared_start: bool = True               # every chain of an instance starts from the same sequence
    proposal_temperature: float = 1.0       # q = softmax(logits / proposal_temperature)
    top_p: float = 1.0                      # nucleus in (0, 1]; 1 = no pruning
    block_size: int = 1                     # positions masked and redrawn together
    block_size_final: int | None = None     # None: constant; else linear anneal to it ...
    block_anneal_sweeps: int = 0            # ... reached at this sweep
    clip_block: bool = False                # a block larger than a sequence is cut to its length
    start_noise: float = 0.0                # per chain and valid position: P(replaced by a uniform allowed id)

    def __post_init__(self):
        name = type(self).__name__
        if self.init not in _MLM_INITS:
            raise field_error(self, "init", f"must be one of {_MLM_INITS}, got {self.init!r}")
        check_range(self, positive=("proposal_temperature", "block_size"), nonnegative=("block_anneal_sweeps",),
                    within={"top_p": "(0, 1]", "block_size_final": "[1, inf)", "start_noise": "[0, 1)"})
        if self.block_size_final is not None and self.block_size_final != self.block_size \
                and self.block_anneal_sweeps == 0:
            raise field_error(self, "block_anneal_sweeps", f"must be >= 1 to anneal the block size from "
                              f"{self.block_size} to {self.block_size_final} ({name})")


@dataclass(frozen=True)
class MHMLMConfig(GibbsMLMConfig):
    temperature: float = 1.0                # target ∝ exp(-E / T) at sweep 0
    anneal_step: float = 0.0                # T decreases by this per sweep (thesis Table 6.5: 0.02-0.06) ...
    min_temperature: float = 0.05           # ... down to this floor
    accept_first_sweeps: int = 0            # accept every proposal in the first sweeps (Table 6.6 trick)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, positive=("temperature", "min_temperature"),
                    nonnegative=("anneal_step", "accept_first_sweeps"))


@dataclass
class MLMChainState(ChainState):
    """A :class:`ChainState` of token sequences (``n_labels`` = V) with the model's context."""

    context: Any = None                     # energy.context(batch), shared by the chains
    rows: Tensor | None = None              # long [C * B]: instance of flattened row c * B + b


class _MLMKernel:
    """Block MH with MLM proposals (``accept="mh"``) or the degenerate block Gibbs sampler that
    accepts every proposal (``accept="always"``); see the module docstring."""

    needs: type = MLMScorer
    name = ""
    accept = "mh"

    def __init__(self, cfg: Any, *, seed: int = 0):
        self.cfg = cfg
        self.seed = check_seed(seed, f"sampler {self.name!r}")

    # -- init ------------------------------------------------------------------------------------
    @torch.no_grad()
    def init(self, energy: Any, batch: Any, n_chains: int, *, mask: Tensor | None = None,
             y0: Tensor | None = None) -> MLMChainState:
        """``n_chains`` chains per instance. ``mask`` bool [B, N] (default ``batch.mask``): the
        positions to sample; ``y0`` long [B, N] | [C, B, N] (default: the config's ``init``)."""
        who = f"sampler {self.name!r}"
        require(energy, self.needs, who)
        if not (isinstance(n_chains, int) and n_chains >= 1):
            raise ValueError(f"{who}: n_chains must be an int >= 1, got {n_chains!r}")
        mask = _resolve_mask(energy, batch, None, mask, who)
        B, N = mask.shape
        C = n_chains
        lengths = mask.sum(1)
        cfg = self.cfg
        if not cfg.clip_block:
            b_max = max(cfg.block_size, cfg.block_size_final or 0)
            short = int(lengths.argmin())
            if b_max > int(lengths[short]):
                raise ValueError(f"{who}: block_size {b_max} > length {int(lengths[short])} of instance {short} "
                                 "(set clip_block to cut blocks to each sequence's length)")
        V = int(energy.vocab_size)
        allowed = energy.allowed.to(mask.device)
        if allowed.shape != (V,) or not bool(allowed.any()):
            raise ValueError(f"{who}: energy.allowed must be bool [{V}] with at least one allowed id")
        g = torch.Generator(device=mask.device)
        g.manual_seed(self.seed)
        ctx = energy.context(batch)
        if y0 is not None:
            y = self._check_y0(y0, C, mask, V, allowed, who)
        elif cfg.init == "uniform":
            ids = allowed.nonzero()[:, 0]
            lead = 1 if cfg.shared_start else C
            pick = torch.randint(0, len(ids), (lead, B, N), generator=g, device=mask.device)
            y = ids[pick].masked_fill(~mask, 0).expand(C, B, N).clone()
        else:                                                           # Algorithm 4, lines 2-3
            zeros = torch.zeros(B, N, dtype=torch.long, device=mask.device)
            logits = energy.proposal_logits(ctx, zeros, mask, torch.arange(B, device=mask.device), mask)
            y = logits.argmax(-1).masked_fill(~mask, 0).expand(C, B, N).clone()
        if cfg.start_noise > 0:                                         # over-dispersed starts (module doc)
            y = self._perturb(y, mask, allowed, cfg.start_noise, g)
        rows = torch.arange(B, device=mask.device).repeat(C)
        e = energy.score(ctx, y.reshape(C * B, N), mask.repeat(C, 1), rows).detach().view(C, B)
        return MLMChainState(y=y, energy=e, batch=batch, energy_fn=energy, mask=mask, n_labels=V,
                             temperature=temperature_at(cfg, 0), generator=g, context=ctx, rows=rows)

    @staticmethod
    def _perturb(y: Tensor, mask: Tensor, allowed: Tensor, noise: float, g: torch.Generator) -> Tensor:
        """``y`` long [C, B, N] with each valid position (``mask`` [B, N]) of each chain replaced, with
        probability ``noise`` and independently, by a uniform draw over the allowed ids (from ``g``)."""
        ids = allowed.nonzero()[:, 0]
        hit = torch.rand(y.shape, generator=g, device=y.device, dtype=torch.float64) < noise
        draw = ids[torch.randint(0, len(ids), y.shape, generator=g, device=y.device)]
        return torch.where(hit & mask, draw, y)

    @staticmethod
    def _check_y0(y0: Tensor, C: int, mask: Tensor, V: int, allowed: Tensor, who: str) -> Tensor:
        y = start_ids(y0, C, mask, who, "token ids")
        bad = mask & ((y < 0) | (y >= V))
        bad = bad | (mask & ~allowed[y.clamp(0, V - 1)])
        if bool(bad.any()):
            c, b, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"{who}: y0 has unknown token id {int(y[c, b, t])} at chain {c}, instance {b}, "
                             f"position {t} (ids must be allowed and outside [0, {V}) is unknown)")
        return y.clone()

    # -- one sweep ---------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, state: MLMChainState) -> tuple[MLMChainState, dict[str, Tensor]]:
        cfg, energy, g = self.cfg, state.energy_fn, state.generator
        C, B, N = state.y.shape
        R, dev = C * B, state.y.device
        sweep = state.step
        T = temperature_at(cfg, sweep)
        free = self.accept == "always" or sweep < getattr(cfg, "accept_first_sweeps", 0)
        y = state.y.reshape(R, N).clone()
        y_start = y.clone()
        mask = state.mask.repeat(C, 1)                                  # row c * B + b is instance b
        rows = state.rows
        cur = state.energy.reshape(R).clone()
        n = mask.sum(1)
        b = torch.full_like(n, block_size_at(cfg, sweep))
        b = torch.minimum(b, n) if cfg.clip_block else b
        # a uniform random order of each row's valid positions (without replacement), cut into blocks
        keys = torch.rand((R, N), generator=g, device=dev, dtype=torch.float64).masked_fill(~mask, 2.0)
        order = keys.argsort(1)
        slot = torch.arange(N, device=dev)[None]
        block_of_slot = slot // b[:, None]
        n_blocks = (n + b - 1) // b
        accepted = torch.zeros(R, device=dev)
        novel = torch.zeros(R, device=dev)
        for k in range(int(n_blocks.max())):
            idx = (n_blocks > k).nonzero()[:, 0]                        # rows with a k-th block
            in_block = (block_of_slot[idx] == k) & (slot < n[idx, None])
            pos = torch.zeros(len(idx), N, dtype=torch.bool, device=dev).scatter(1, order[idx], in_block)
            y_a, m_a, r_a = y[idx], mask[idx], rows[idx]
            log_q = proposal_log_probs(energy.proposal_logits(state.context, y_a, m_a, r_a, pos).double(),
                                       cfg.proposal_temperature, cfg.top_p)
            u = torch.rand(log_q.shape, generator=g, device=dev, dtype=torch.float64)
            draw = (log_q - torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float64).tiny)))).argmax(-1)
            y_prop = torch.where(pos, draw, y_a)
            if self.accept == "always":
                acc = torch.ones(len(idx), dtype=torch.bool, device=dev)
            else:
                e_prop = energy.score(state.context, y_prop, m_a, r_a).detach()
                log_a = mh_mlm_log_accept(cur[idx].double(), e_prop.double(), block_log_q(log_q, y_prop, pos),
                                          block_log_q(log_q, y_a, pos), T)
                v = torch.rand(len(idx), generator=g, device=dev, dtype=torch.float64)
                acc = torch.ones_like(v, dtype=torch.bool) if free else v < log_a.exp()
                cur[idx] = torch.where(acc, e_prop.to(cur.dtype), cur[idx])
            differs = (y_prop != y_a).any(1)
            y[idx] = torch.where(acc[:, None], y_prop, y_a)
            accepted[idx] += acc.float()
            novel[idx] += (acc & differs).float()
        if self.accept == "always":                                     # one energy pass per sweep
            cur = energy.score(state.context, y, mask, rows).detach()
        nb = n_blocks.float()
        stats = {"accepted": (accepted / nb).view(C, B), "novel": (novel / nb).view(C, B),
                 "changed": (y != y_start).any(1).float().view(C, B), "energy": cur.view(C, B).clone()}
        new = dataclasses.replace(state, y=y.view(C, B, N), energy=cur.view(C, B), step=sweep + 1,
                                  temperature=temperature_at(cfg, sweep + 1))
        return new, stats


class MHMLM(_MLMKernel):
    """Metropolis-Hastings with (block, tempered, nucleus) masked-LM proposals (thesis Alg. 4)."""

    name = "mh_mlm"
    accept = "mh"

    def __init__(self, cfg: MHMLMConfig = MHMLMConfig(), *, seed: int = 0):
        super().__init__(cfg, seed=seed)


class GibbsMLM(_MLMKernel):
    """Degenerate (block) Gibbs: the MLM proposal of :class:`MHMLM`, always accepted (Wang & Cho
    2019). Its stationary law is generally NOT the energy's Boltzmann distribution."""

    name = "gibbs_mlm"
    accept = "always"

    def __init__(self, cfg: GibbsMLMConfig = GibbsMLMConfig(), *, seed: int = 0):
        super().__init__(cfg, seed=seed)



def make_mh_mlm(cfg: MHMLMConfig, *, seed: int = 0) -> MHMLM:
    """``SAMPLERS`` builder of ``mh_mlm`` (``seed``: its generator)."""
    return MHMLM(cfg, seed=seed)


def make_gibbs_mlm(cfg: GibbsMLMConfig, *, seed: int = 0) -> GibbsMLM:
    """``SAMPLERS`` builder of ``gibbs_mlm`` (``seed``: its generator)."""
    return GibbsMLM(cfg, seed=seed)
