r"""Markov kernels for label sequences under a :class:`ChainEnergy` (or any :class:`Energy`):
single-site Gibbs and Metropolis–Hastings with a uniform single-site proposal.

- ``gibbs_chain`` (Geman & Geman 1984): single-site Gibbs for a :class:`ChainEnergy`. With
  potentials ``U`` [B, N, L] and ``W`` ([L, L] or per position [B, N-1, L, L]) the conditional of
  site ``t`` given the rest depends on its neighbours only:

      p(y_t = l | y_{-t}) ∝ exp((U_t[l] + W_{t-1}[y_{t-1}, l] + W_t[l, y_{t+1}]) / T)

  (terms past either end of the sequence omitted), computed by :func:`site_logits` for all chains
  and instances at once and drawn with the Gumbel-max trick. One ``step`` is one sweep: either a
  *systematic* scan ``t = 0, ..., n_b - 1`` (``K = K_0 K_1 ... K_{n_b-1}``, each ``K_t`` a Gibbs
  site kernel, so ``pi_T`` is invariant though the sweep is not reversible), or a *random* scan of
  ``n_b`` updates, each at a position drawn uniformly from ``{0, ..., n_b - 1}`` independently per
  chain (``K = (1/n_b sum_t K_t)^{n_b}``, reversible). Extra stat: ``site_changes`` (the fraction of
  the sweep's site updates that changed a label).
- ``mh_uniform`` (Metropolis et al. 1953; Hastings 1970): Metropolis–Hastings for ANY
  :class:`Energy`. Proposal: one valid position ``t ~ U{0, ..., n_b - 1}`` and a new label drawn
  uniformly from the ``L - 1`` labels other than ``y_t`` (for ``L = 1`` the proposal is ``y``), so
  ``q(y -> y') = 1 / (n_b (L - 1)) = q(y' -> y)`` for ``y, y'`` at Hamming distance 1 — symmetric,
  and the Hastings ratio is the Metropolis one (:func:`components.inference.mcmc.base.mh_log_accept`).

  The current energy is cached in the state; each step evaluates the energy once, on all ``C x B``
  proposals in one batch. A :class:`ChainEnergy` is evaluated from its potentials, computed once in
  ``init`` (``E = -score(potentials, y)`` is the ChainEnergy contract), by :func:`chain_energy`,
  which scores ``[C, B, N]`` labels without copying the potentials C times; any other energy (or
  ``use_potentials=False``) is called as ``energy.energy(repeat_batch(batch, C), y.view(C*B, N))``,
  the batch tiled once per ``init``.

Both kernels are irreducible and aperiodic on the ``L^{n_b}`` labelings whenever every energy is
finite, so a chain's law converges to ``pi_T`` from any start.

Cost per step (``C`` chains, ``B`` instances, length ``N``, ``L`` labels): Gibbs ``O(C B N L)``
time (one sweep = N vectorised site updates plus one energy evaluation); memory ``O(C B (N + L))``
beyond the potentials. MH: one energy evaluation of ``C*B`` sequences (``O(C B N)`` for a chain
energy) plus ``O(C B)``; the repeated batch costs ``C`` times the batch's memory (non-chain
energies only). Python loops run over sequence positions and steps, never over chains or the batch.

References: S. Geman, D. Geman (1984), Stochastic relaxation, Gibbs distributions, and the Bayesian
restoration of images. G. Roberts, J. Rosenthal (2004), General state space Markov chains and MCMC
algorithms (systematic vs random scan). N. Metropolis et al. (1953); W. K. Hastings (1970).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from components.config import check_range
from components.energies.base import Energy, conforms, require
from components.energies.chain import ChainEnergy, ChainPotentials
from components.inference.mcmc.base import (ChainState, _check_common, check_seed, _gumbel_argmax, _initial_labels,
                                            _resolve_labels, _resolve_mask, _uniform_position, mh_log_accept,
                                            repeat_batch)

__all__ = ["GibbsChainConfig", "GibbsChain", "MHUniformConfig", "MHUniform", "site_logits", "chain_energy",
           "make_gibbs_chain", "make_mh_uniform"]


def site_logits(p: ChainPotentials, y: Tensor, t: Tensor, temperature: float = 1.0) -> Tensor:
    """Logits [C, B, L] of the Gibbs conditional ``p(y_t | y_{-t})`` at position ``t[c, b]``.

    ``(U_t[l] + W_{t-1}[y_{t-1}, l] + W_t[l, y_{t+1}]) / T`` with the neighbour terms dropped past
    either end of sequence b (its valid length). ``y`` long [C, B, N]; ``t`` long [C, B] (or an int)
    with ``0 <= t < n_b`` where the result is used (rows with ``t`` past the end are meaningless).
    """
    U, W, mask = p.unary, p.transition, p.mask
    C, B, N = y.shape
    t = torch.as_tensor(t, dtype=torch.long, device=y.device).expand(C, B)
    b = torch.arange(B, device=y.device).expand(C, B)
    logits = U[b, t]                                                    # [C, B, L]
    if N > 1:
        tl = (t - 1).clamp_min(0)
        tr = (t + 1).clamp_max(N - 1)
        y_prev = y.gather(2, tl[..., None])[..., 0]                     # [C, B]
        y_next = y.gather(2, tr[..., None])[..., 0]
        if W.dim() == 2:
            left = W[y_prev]                                            # W[y_{t-1}, :]
            right = W.t()[y_next]                                       # W[:, y_{t+1}]
        else:
            left = W[b, tl, y_prev]                                     # [C, B, L]
            right = W[b, t.clamp_max(N - 2), :, y_next]                 # edge t -> t+1; [C, B, L]
        has_left = (t >= 1)[..., None]
        has_right = ((t + 1 < N) & mask[b, tr])[..., None]
        # where, not multiplication: a -inf potential (a forbidden transition) times 0 is nan.
        logits = logits + torch.where(has_left, left, torch.zeros_like(left))
        logits = logits + torch.where(has_right, right, torch.zeros_like(right))
    return logits / temperature



def chain_energy(p: ChainPotentials, y: Tensor) -> Tensor:
    """``E(y) = -score(p, y)`` [C, B] for labels ``y`` long [C, B, N] (C label sequences per instance).

    Equal to ``p.energy(y[c])`` for each ``c`` (``linear_chain.score``), but gathers from the
    potentials directly so per-position transitions [B, N-1, L, L] are not copied C times.
    """
    U, W, mask = p.unary, p.transition, p.mask
    C, B, N = y.shape
    y = y.masked_fill(~mask, 0)
    u = U.expand(C, *U.shape).gather(3, y[..., None])[..., 0]            # [C, B, N]
    s = torch.where(mask, u, torch.zeros_like(u)).sum(2)
    if N > 1:
        if W.dim() == 2:
            w = W[y[..., :-1], y[..., 1:]]                               # [C, B, N-1]
        else:
            b = torch.arange(B, device=y.device)[None, :, None]
            t = torch.arange(N - 1, device=y.device)[None, None, :]
            w = W[b, t, y[..., :-1], y[..., 1:]]
        edge = mask[:, 1:]
        s = s + torch.where(edge, w, torch.zeros_like(w)).sum(2)
    return -s



class _Base:
    needs: type = Energy
    name = ""

    def __init__(self, cfg: Any, *, seed: int = 0):
        self.cfg = cfg
        self.seed = check_seed(seed, f"sampler {self.name!r}")

    @torch.no_grad()
    def init(self, energy: Any, batch: Any, n_chains: int, *, mask: Tensor | None = None,
             n_labels: int | None = None, y0: Tensor | None = None) -> ChainState:
        """``n_chains`` chains per instance of ``batch``. ``mask`` bool [B, N] (default: the
        potentials' or ``batch.mask``), ``n_labels`` (default: config, potentials or
        ``energy.n_labels``) and ``y0`` [B, N] | [C, B, N] (default: the config's ``init``)."""
        who = f"sampler {self.name!r}"
        require(energy, self.needs, who)
        if not (isinstance(n_chains, int) and n_chains >= 1):
            raise ValueError(f"{who}: n_chains must be an int >= 1, got {n_chains!r}")
        p = None
        if conforms(energy, ChainEnergy) and self._use_potentials():
            p = energy.potentials(batch).detach()
        mask = _resolve_mask(energy, batch, p, mask, who)
        L = _resolve_labels(energy, p, n_labels, getattr(self.cfg, "n_labels", 0), who)
        g = torch.Generator(device=mask.device)
        g.manual_seed(self.seed)
        y = _initial_labels(self.cfg.init, y0, n_chains, mask, L, g, who)
        tiled = None if p is not None else repeat_batch(batch, n_chains, mask.shape[0])
        state = ChainState(y=y, energy=y.new_zeros(()), batch=batch, energy_fn=energy, mask=mask, n_labels=L,
                           temperature=float(self.cfg.temperature), generator=g, potentials=p, tiled_batch=tiled)
        state.energy = _evaluate(state, y)
        return state

    def _use_potentials(self) -> bool:
        return True


def _evaluate(state: ChainState, y: Tensor) -> Tensor:
    """E [C, B] of labels y [C, B, N]: from the potentials, or one call on the tiled batch."""
    if state.potentials is not None:
        return chain_energy(state.potentials, y)
    C, B, N = y.shape
    e = state.energy_fn.energy(state.tiled_batch, y.reshape(C * B, N))
    if not isinstance(e, Tensor) or e.shape != (C * B,):
        raise ValueError(f"{type(state.energy_fn).__name__}.energy on a batch repeated {C} times returned "
                         f"{getattr(e, 'shape', type(e).__name__)}; expected [{C * B}] (does the batch "
                         "repeat along dim 0? see mcmc.base.repeat_batch)")
    return e.detach().view(C, B)



# ------------------------------------------------------------------------------------------------
# Samplers
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GibbsChainConfig:
    init: Literal["uniform", "zeros"] = "uniform"
    temperature: float = 1.0                    # target ∝ exp(-E / T)
    scan: Literal["systematic", "random"] = "systematic"

    def __post_init__(self):
        _check_common(self)
        if self.scan not in ("systematic", "random"):
            raise ValueError(f"GibbsChainConfig.scan must be 'systematic' or 'random', got {self.scan!r}")


class GibbsChain(_Base):
    """Single-site Gibbs sweeps for a ChainEnergy (systematic or random scan)."""

    needs = ChainEnergy
    name = "gibbs_chain"

    def __init__(self, cfg: GibbsChainConfig = GibbsChainConfig(), *, seed: int = 0):
        super().__init__(cfg, seed=seed)

    @torch.no_grad()
    def step(self, state: ChainState) -> tuple[ChainState, dict[str, Tensor]]:
        p, mask, g = state.potentials, state.mask, state.generator
        y0 = state.y
        y = y0.clone()
        C, B, N = y.shape
        lengths = state.lengths
        flips = torch.zeros(C, B, device=y.device)
        for r in range(N):
            if self.cfg.scan == "systematic":
                t = torch.full((C, B), r, dtype=torch.long, device=y.device)
            else:
                t = _uniform_position(lengths, C, g)
            active = (r < lengths).expand(C, B)
            new = _gumbel_argmax(site_logits(p, y, t, state.temperature), g)
            old = y.gather(2, t[..., None])[..., 0]
            new = torch.where(active, new, old)
            flips += (new != old).float()
            y.scatter_(2, t[..., None], new[..., None])
        energy = chain_energy(p, y)
        changed = (y != y0).any(2).float()
        stats = {"accepted": torch.ones(C, B, device=y.device), "changed": changed,
                 "site_changes": flips / lengths.float()}
        return dataclasses.replace(state, y=y, energy=energy, step=state.step + 1), stats


@dataclass(frozen=True)
class MHUniformConfig:
    init: Literal["uniform", "zeros"] = "uniform"
    temperature: float = 1.0                    # target ∝ exp(-E / T)
    n_labels: int = 0                           # 0: from the potentials or energy.n_labels
    use_potentials: bool = True                 # ChainEnergy: evaluate E from potentials computed once

    def __post_init__(self):
        _check_common(self)
        check_range(self, nonnegative=("n_labels",))        # n_labels 0: from the potentials / energy


class MHUniform(_Base):
    """Metropolis–Hastings with a uniform single-site proposal, for any Energy."""

    needs = Energy
    name = "mh_uniform"

    def __init__(self, cfg: MHUniformConfig = MHUniformConfig(), *, seed: int = 0):
        super().__init__(cfg, seed=seed)

    def _use_potentials(self) -> bool:
        return self.cfg.use_potentials

    @torch.no_grad()
    def step(self, state: ChainState) -> tuple[ChainState, dict[str, Tensor]]:
        g, L = state.generator, state.n_labels
        y = state.y
        C, B, N = y.shape
        t = _uniform_position(state.lengths, C, g)
        old = y.gather(2, t[..., None])[..., 0]
        if L > 1:
            shift = 1 + torch.randint(0, L - 1, (C, B), generator=g, device=y.device)
            new = (old + shift) % L                     # uniform over the L - 1 other labels
        else:
            new = old
        proposal = y.scatter(2, t[..., None], new[..., None])
        e_prop = _evaluate(state, proposal)
        log_a = mh_log_accept(state.energy, e_prop, state.temperature)
        u = torch.rand((C, B), generator=g, device=y.device, dtype=torch.float64)
        accept = u < log_a.double().exp()               # P(accept) = min(1, exp(-dE / T)); nan -> reject
        y_next = torch.where(accept[..., None], proposal, y)
        e_next = torch.where(accept, e_prop, state.energy)
        stats = {"accepted": accept.float(), "changed": (accept & (new != old)).float()}
        return dataclasses.replace(state, y=y_next, energy=e_next, step=state.step + 1), stats



def make_gibbs_chain(cfg: GibbsChainConfig, *, seed: int = 0) -> GibbsChain:
    """``SAMPLERS`` builder of ``gibbs_chain`` (``seed``: its generator)."""
    return GibbsChain(cfg, seed=seed)


def make_mh_uniform(cfg: MHUniformConfig, *, seed: int = 0) -> MHUniform:
    """``SAMPLERS`` builder of ``mh_uniform`` (``seed``: its generator)."""
    return MHUniform(cfg, seed=seed)
