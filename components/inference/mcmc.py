r"""MCMC over discrete label sequences: Markov kernels that run many chains at once.

Target. For an energy ``E(x, y)`` (``components.energies.base``) over label sequences ``y`` of a
sequence's ``n_b`` valid positions, each with ``L`` labels, and a temperature ``T > 0``,

    pi_T(y | x) = exp(-E(x, y) / T) / Z_T(x)          (T = 1: the model's Boltzmann distribution)

A kernel ``K`` leaves ``pi_T`` invariant (``pi_T K = pi_T``); the two kernels here are irreducible
and aperiodic on the ``L^{n_b}`` labelings whenever every energy is finite, so a chain's law
converges to ``pi_T`` from any start.

Kernels (the registry :data:`SAMPLERS`; each declares ``needs`` and checks it in ``init``):

- ``gibbs_chain`` (Geman & Geman 1984): single-site Gibbs for a :class:`ChainEnergy`. With
  potentials ``U`` [B, N, L] and ``W`` ([L, L] or per position [B, N-1, L, L]) the conditional of
  site ``t`` given the rest depends on its neighbours only:

      p(y_t = l | y_{-t}) ∝ exp((U_t[l] + W_{t-1}[y_{t-1}, l] + W_t[l, y_{t+1}]) / T)

  (terms past either end of the sequence omitted), computed by :func:`site_logits` for all chains
  and instances at once and drawn with the Gumbel-max trick. One ``step`` is one sweep: either a
  *systematic* scan ``t = 0, ..., n_b - 1`` (``K = K_0 K_1 ... K_{n_b-1}``, each ``K_t`` a Gibbs
  site kernel, so ``pi_T`` is invariant though the sweep is not reversible), or a *random* scan of
  ``n_b`` updates, each at a position drawn uniformly from ``{0, ..., n_b - 1}`` independently per
  chain (``K = (1/n_b sum_t K_t)^{n_b}``, reversible).
- ``mh_uniform`` (Metropolis et al. 1953; Hastings 1970): Metropolis–Hastings for ANY
  :class:`Energy`. Proposal: one valid position ``t ~ U{0, ..., n_b - 1}`` and a new label drawn
  uniformly from the ``L - 1`` labels other than ``y_t`` (for ``L = 1`` the proposal is ``y``), so
  ``q(y -> y') = 1 / (n_b (L - 1)) = q(y' -> y)`` for ``y, y'`` at Hamming distance 1 — symmetric,
  and the Hastings ratio is the Metropolis one:

      alpha(y -> y') = min(1, exp((E(y) - E(y')) / T))                 (:func:`mh_log_accept`)

  The current energy is cached in the state; each step evaluates the energy once, on all ``C x B``
  proposals in one batch. A :class:`ChainEnergy` is evaluated from its potentials, computed once in
  ``init`` (``E = -score(potentials, y)`` is the ChainEnergy contract), by :func:`chain_energy`,
  which scores ``[C, B, N]`` labels without copying the potentials C times; any other energy (or
  ``use_potentials=False``) is called as ``energy.energy(repeat_batch(batch, C), y.view(C*B, N))``:
  :func:`repeat_batch` tiles every per-instance tensor of the batch along dim 0 (row ``c*B + b`` is
  instance ``b``), once per ``init``.

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
  chain (``components.inference.mcmc_bench``).
- ``gibbs_mlm``: the degenerate (block) Gibbs sampler of Wang & Cho (2019): the same proposal,
  always accepted; one energy pass per sweep (for the cache and the stats). Its stationary law is
  that of the MLM's conditionals, in general NOT ``pi`` (the tests measure the gap exactly).

  MLM init: ``"uniform"`` (i.i.d. uniform over the model's allowed ids), ``"warm"`` (greedy argmax
  of the MLM's conditionals of the all-[MASK] sequence, Algorithm 4 line 3) or ``y0``; every chain
  of an instance starts from the same sequence (the thesis) unless ``shared_start=False``. A block
  larger than a sequence is an error unless ``clip_block``. State: :class:`MLMChainState` (adds the
  model's ``context`` and ``rows``, the instance of each flattened row ``c * B + b``). Stats per
  sweep [C, B]: ``accepted`` and ``novel`` (accepted AND different from the current state; the
  thesis' novel transition rate), each a fraction of the sweep's proposals; ``changed``;
  ``energy`` (after the sweep).

State (:class:`ChainState`). ``C`` chains for each of ``B`` instances of padded length ``N``:

    y       long [C, B, N]   current labels; 0 at masked positions (they never move)
    energy  [C, B]           E(x_b, y[c, b]), cached (never stale: recomputed after each Gibbs sweep)
    mask    bool [B, N]      left-aligned, from the potentials, ``batch.mask`` or ``init(mask=...)``

``step(state) -> (state', stats)`` returns a new state (the old one is not modified; the
generator is shared and advances) and per-chain float stats [C, B]: ``accepted`` (1 if the MH
proposal was accepted; Gibbs always accepts), ``changed`` (1 if ``y`` differs from before the step)
and, for Gibbs, ``site_changes`` (the fraction of the sweep's site updates that changed a label).

Initial state (``init``): ``"uniform"`` (every valid label i.i.d. uniform, so the initial law is
uniform over labelings), ``"zeros"``, or an explicit ``y0`` [B, N] / [C, B, N] passed to ``init``.
Randomness comes from one ``torch.Generator`` seeded from the config (``seed``), on the labels'
device, so a run is reproducible.

Cost per step (``C`` chains, ``B`` instances, length ``N``, ``L`` labels): Gibbs ``O(C B N L)``
time (one sweep = N vectorised site updates plus one energy evaluation); memory ``O(C B (N + L))``
beyond the potentials. MH: one energy evaluation of ``C*B`` sequences (``O(C B N)`` for a chain
energy) plus ``O(C B)``; the repeated batch costs ``C`` times the batch's memory (non-chain
energies only). Python loops run over sequence positions and steps, never over chains or the batch.

References: K. Goyal (2021), thesis ch. 6 (MH with MLM proposals). A. Wang, K. Cho (2019), BERT
has a mouth, and it must speak. A. Holtzman et al. (2020), nucleus sampling.
N. Metropolis, A. Rosenbluth, M. Rosenbluth, A. Teller, E. Teller (1953), Equation of
state calculations by fast computing machines. W. K. Hastings (1970), Monte Carlo sampling methods
using Markov chains and their applications. S. Geman, D. Geman (1984), Stochastic relaxation,
Gibbs distributions, and the Bayesian restoration of images. G. Roberts, J. Rosenthal (2004),
General state space Markov chains and MCMC algorithms (systematic vs random scan).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from components.config import check_range, field_error
from components.energies.base import ChainEnergy, ChainPotentials, Energy, conforms, require
from components.energies.mlm import MLMScorer
from components.registry import Registry

__all__ = ["ChainState", "Sampler", "SAMPLERS", "GibbsChainConfig", "GibbsChain", "MHUniformConfig",
           "MHUniform", "site_logits", "mh_log_accept", "chain_energy", "repeat_batch", "run_chains",
           "MLMChainState", "GibbsMLMConfig", "MHMLMConfig", "GibbsMLM", "MHMLM", "proposal_log_probs", "block_log_q",
           "mh_mlm_log_accept", "block_size_at", "temperature_at"]


# ------------------------------------------------------------------------------------------------
# State and protocol
# ------------------------------------------------------------------------------------------------

@dataclass
class ChainState:
    """``C`` chains for each of ``B`` instances (see the module docstring for shapes)."""

    y: Tensor                              # long [C, B, N], 0 at masked positions
    energy: Tensor                         # [C, B], E of the current y
    batch: Any                             # the batch the energy is evaluated on
    energy_fn: Any                         # the Energy
    mask: Tensor                           # bool [B, N]
    n_labels: int
    temperature: float
    generator: torch.Generator
    step: int = 0
    potentials: ChainPotentials | None = None   # set when the energy is evaluated from potentials
    tiled_batch: Any = None                # repeat_batch(batch, C) for the general energy path

    @property
    def n_chains(self) -> int:
        return int(self.y.shape[0])

    @property
    def lengths(self) -> Tensor:
        """long [B] valid length of each instance."""
        return self.mask.sum(1)


class Sampler(Protocol):
    """A Markov kernel over label sequences, run on many chains at once."""

    needs: type

    def init(self, energy: Any, batch: Any, n_chains: int) -> ChainState: ...

    def step(self, state: ChainState) -> tuple[ChainState, dict[str, Tensor]]: ...


# ------------------------------------------------------------------------------------------------
# Pure pieces (the tests build exact kernels from these)
# ------------------------------------------------------------------------------------------------

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


def mh_log_accept(energy: Tensor, proposed_energy: Tensor, temperature: float = 1.0) -> Tensor:
    """log of the Metropolis acceptance probability ``min(1, exp((E(y) - E(y')) / T))`` (elementwise)."""
    return ((energy - proposed_energy) / temperature).clamp_max(0.0)


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


def repeat_batch(batch: Any, times: int, batch_size: int) -> Any:
    """``batch`` with every per-instance tensor (leading dim ``batch_size``) repeated ``times``
    along dim 0, so row ``c * batch_size + b`` is instance ``b``.

    Works on ``None``, a tensor, a dataclass (``dataclasses.replace`` over its tensor fields), a
    mapping, or a tuple/list of those; other fields (and tensors whose leading dim is not
    ``batch_size``, e.g. shared parameters) are kept as they are. Anything else is a ``TypeError``.
    """
    def rep(v: Any) -> Any:
        if isinstance(v, Tensor):
            if v.dim() >= 1 and v.shape[0] == batch_size:
                return v.repeat(times, *([1] * (v.dim() - 1)))
            return v
        return v

    if batch is None:
        return None
    if isinstance(batch, Tensor):
        return rep(batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {f.name: rep(getattr(batch, f.name)) for f in dataclasses.fields(batch)
                   if f.init and isinstance(getattr(batch, f.name), Tensor)}
        return dataclasses.replace(batch, **changes)
    if isinstance(batch, Mapping):
        return type(batch)({k: rep(v) for k, v in batch.items()})
    if isinstance(batch, (tuple, list)):
        return type(batch)(rep(v) for v in batch)
    raise TypeError(f"repeat_batch: cannot repeat a batch of type {type(batch).__name__}; expected None, "
                    "a Tensor, a dataclass, a mapping or a tuple/list of tensors")


# ------------------------------------------------------------------------------------------------
# Shared machinery
# ------------------------------------------------------------------------------------------------

_INITS = ("uniform", "zeros")


def _check_common(cfg: Any) -> None:
    name = type(cfg).__name__
    if cfg.init not in _INITS:
        raise ValueError(f"{name}.init must be one of {_INITS}, got {cfg.init!r}")
    if not isinstance(cfg.seed, int):
        raise ValueError(f"{name}.seed must be an int, got {cfg.seed!r}")
    check_range(cfg, positive=("temperature",), nonnegative=("seed",))


def _resolve_mask(energy: Any, batch: Any, p: ChainPotentials | None, mask: Tensor | None, who: str) -> Tensor:
    if mask is None and p is not None:
        mask = p.mask
    if mask is None:
        mask = batch.get("mask") if isinstance(batch, Mapping) else getattr(batch, "mask", None)
    if not isinstance(mask, Tensor):
        raise ValueError(f"{who}: cannot tell the valid positions: pass init(..., mask=bool [B, N]) or a batch "
                         f"with a .mask tensor (energy {type(energy).__name__}, batch {type(batch).__name__})")
    if mask.dim() != 2 or mask.dtype != torch.bool:
        raise ValueError(f"{who}: mask must be bool [B, N], got {mask.dtype} {list(mask.shape)}")
    if mask.shape[0] == 0 or mask.shape[1] == 0:
        raise ValueError(f"{who}: mask is empty, shape {list(mask.shape)}")
    n = mask.sum(1)
    ar = torch.arange(mask.shape[1], device=mask.device)
    if not bool((n >= 1).all()) or not bool((mask == (ar[None] < n[:, None])).all()):
        raise ValueError(f"{who}: mask must be left-aligned with every sequence of length >= 1")
    return mask


def _resolve_labels(energy: Any, p: ChainPotentials | None, n_labels: int | None, cfg_labels: int, who: str) -> int:
    for L in (n_labels, cfg_labels or None, p.n_labels if p is not None else None, getattr(energy, "n_labels", None)):
        if L is not None:
            if int(L) < 1:
                raise ValueError(f"{who}: n_labels must be >= 1, got {L}")
            return int(L)
    raise ValueError(f"{who}: cannot tell the number of labels of {type(energy).__name__}: set the config's "
                     "n_labels, pass init(..., n_labels=L), or give the energy an n_labels attribute")


def _initial_labels(init: str, y0: Tensor | None, C: int, mask: Tensor, L: int, g: torch.Generator,
                    who: str) -> Tensor:
    B, N = mask.shape
    if y0 is not None:
        y0 = torch.as_tensor(y0, device=mask.device)
        if y0.dtype in (torch.bool,) or y0.is_floating_point() or y0.is_complex():
            raise ValueError(f"{who}: y0 must hold integer labels, got {y0.dtype}")
        if y0.shape == (B, N):
            y0 = y0.expand(C, B, N)
        if y0.shape != (C, B, N):
            raise ValueError(f"{who}: y0 must have shape [B, N] = {[B, N]} or [C, B, N] = {[C, B, N]}, "
                             f"got {list(y0.shape)}")
        y = y0.long().masked_fill(~mask, 0)
        if bool(((y < 0) | (y >= L)).any()):
            raise ValueError(f"{who}: y0 has labels outside [0, {L}) at valid positions")
        return y.clone()
    if init == "zeros":
        return torch.zeros(C, B, N, dtype=torch.long, device=mask.device)
    y = torch.randint(0, L, (C, B, N), generator=g, device=mask.device)
    return y.masked_fill(~mask, 0)


def _uniform_position(lengths: Tensor, C: int, g: torch.Generator) -> Tensor:
    """long [C, B]: a position drawn uniformly from {0, ..., n_b - 1}, independently per chain."""
    u = torch.rand((C, lengths.shape[0]), generator=g, device=lengths.device, dtype=torch.float64)
    return (u * lengths).long().clamp_max(lengths - 1)


def _gumbel_argmax(logits: Tensor, g: torch.Generator) -> Tensor:
    u = torch.rand(logits.shape, generator=g, device=logits.device, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float64).tiny)))
    return (logits.double() + gumbel).argmax(-1)


class _Base:
    needs: type = Energy
    name = ""

    def __init__(self, cfg: Any):
        self.cfg = cfg

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
        g.manual_seed(self.cfg.seed)
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
                         "repeat along dim 0? see mcmc.repeat_batch)")
    return e.detach().view(C, B)


# ------------------------------------------------------------------------------------------------
# Samplers
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GibbsChainConfig:
    seed: int = 0
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

    def __init__(self, cfg: GibbsChainConfig = GibbsChainConfig()):
        super().__init__(cfg)

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
    seed: int = 0
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

    def __init__(self, cfg: MHUniformConfig = MHUniformConfig()):
        super().__init__(cfg)

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


# ------------------------------------------------------------------------------------------------
# MLM samplers (thesis ch. 6): MH with masked-LM proposals, and the degenerate Gibbs sampler
# ------------------------------------------------------------------------------------------------

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
    seed: int = 0
    init: Literal["uniform", "warm"] = "uniform"   # random allowed ids | greedy MLM decode of all-[MASK]
    shared_start: bool = True               # every chain of an instance starts from the same sequence
    proposal_temperature: float = 1.0       # q = softmax(logits / proposal_temperature)
    top_p: float = 1.0                      # nucleus in (0, 1]; 1 = no pruning
    block_size: int = 1                     # positions masked and redrawn together
    block_size_final: int | None = None     # None: constant; else linear anneal to it ...
    block_anneal_sweeps: int = 0            # ... reached at this sweep
    clip_block: bool = False                # a block larger than a sequence is cut to its length

    def __post_init__(self):
        name = type(self).__name__
        if self.init not in _MLM_INITS:
            raise field_error(self, "init", f"must be one of {_MLM_INITS}, got {self.init!r}")
        if not isinstance(self.seed, int):
            raise field_error(self, "seed", f"must be an int, got {self.seed!r}")
        check_range(self, positive=("proposal_temperature", "block_size"), nonnegative=("seed", "block_anneal_sweeps"),
                    within={"top_p": "(0, 1]", "block_size_final": "[1, inf)"})
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

    def __init__(self, cfg: Any):
        self.cfg = cfg

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
        g.manual_seed(cfg.seed)
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
        rows = torch.arange(B, device=mask.device).repeat(C)
        e = energy.score(ctx, y.reshape(C * B, N), mask.repeat(C, 1), rows).detach().view(C, B)
        return MLMChainState(y=y, energy=e, batch=batch, energy_fn=energy, mask=mask, n_labels=V,
                             temperature=temperature_at(cfg, 0), generator=g, context=ctx, rows=rows)

    @staticmethod
    def _check_y0(y0: Tensor, C: int, mask: Tensor, V: int, allowed: Tensor, who: str) -> Tensor:
        B, N = mask.shape
        y0 = torch.as_tensor(y0, device=mask.device)
        if y0.dtype == torch.bool or y0.is_floating_point() or y0.is_complex():
            raise ValueError(f"{who}: y0 must hold integer token ids, got {y0.dtype}")
        if y0.shape == (B, N):
            y0 = y0.expand(C, B, N)
        if y0.shape != (C, B, N):
            raise ValueError(f"{who}: y0 must have shape [B, N] = {[B, N]} or [C, B, N] = {[C, B, N]}, "
                             f"got {list(y0.shape)}")
        y = y0.long().masked_fill(~mask, 0)
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

    def __init__(self, cfg: MHMLMConfig = MHMLMConfig()):
        super().__init__(cfg)


class GibbsMLM(_MLMKernel):
    """Degenerate (block) Gibbs: the MLM proposal of :class:`MHMLM`, always accepted (Wang & Cho
    2019). Its stationary law is generally NOT the energy's Boltzmann distribution."""

    name = "gibbs_mlm"
    accept = "always"

    def __init__(self, cfg: GibbsMLMConfig = GibbsMLMConfig()):
        super().__init__(cfg)


SAMPLERS = Registry("sampler")
SAMPLERS.register("gibbs_chain", GibbsChainConfig, lambda cfg: GibbsChain(cfg),
                  doc="single-site Gibbs (systematic or random scan) for a ChainEnergy", needs=ChainEnergy)
SAMPLERS.register("mh_uniform", MHUniformConfig, lambda cfg: MHUniform(cfg),
                  doc="Metropolis-Hastings, uniform single-site proposal, for any Energy", needs=Energy)
SAMPLERS.register("mh_mlm", MHMLMConfig, lambda cfg: MHMLM(cfg), needs=MLMScorer,
                  doc="Metropolis-Hastings with block / tempered / nucleus masked-LM proposals (thesis ch. 6)")
SAMPLERS.register("gibbs_mlm", GibbsMLMConfig, lambda cfg: GibbsMLM(cfg), needs=MLMScorer,
                  doc="degenerate (block) Gibbs: masked-LM proposals always accepted; biased baseline")


def run_chains(sampler: Sampler, energy: Any, batch: Any, *, n_chains: int, n_steps: int,
               callback: Callable[[int, ChainState, dict[str, Tensor]], None] | None = None,
               **init_kwargs: Any) -> tuple[ChainState, dict[str, Tensor]]:
    """``init`` then ``n_steps`` steps; returns the final state and each stat's mean over the steps
    [C, B] (empty dict if ``n_steps == 0``). ``callback(i, state, stats)`` after each step (progress)."""
    state = sampler.init(energy, batch, n_chains, **init_kwargs)
    sums: dict[str, Tensor] = {}
    for i in range(n_steps):
        state, stats = sampler.step(state)
        for k, v in stats.items():
            sums[k] = sums[k] + v if k in sums else v.clone()
        if callback is not None:
            callback(i, state, stats)
    return state, {k: v / n_steps for k, v in sums.items()}
