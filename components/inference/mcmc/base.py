r"""What every Markov kernel over discrete sequences shares: the chain state, the ``Sampler``
protocol, the Metropolis acceptance, batch tiling, start states and the driver :func:`run_chains`.

Target. For an energy ``E(x, y)`` (``components.energies.base``) over label sequences ``y`` of a
sequence's ``n_b`` valid positions, each with ``L`` labels, and a temperature ``T > 0``,

    pi_T(y | x) = exp(-E(x, y) / T) / Z_T(x)          (T = 1: the model's Boltzmann distribution)

A kernel ``K`` leaves ``pi_T`` invariant (``pi_T K = pi_T``). The kernels live one family a module
(``chain_kernels``: single-site Gibbs and uniform MH; ``mlm_kernels``: MH with masked-LM proposals
and degenerate Gibbs); their names are defined once, in ``components.inference.mcmc.registry``.

State (:class:`ChainState`). ``C`` chains for each of ``B`` instances of padded length ``N``:

    y       long [C, B, N]   current labels; 0 at masked positions (they never move)
    energy  [C, B]           E(x_b, y[c, b]), cached (never stale)
    mask    bool [B, N]      left-aligned, from the potentials, ``batch.mask`` or ``init(mask=...)``

``step(state) -> (state', stats)`` returns a new state (the old one is not modified; the
generator is shared and advances) and per-chain float stats [C, B]: ``accepted`` (1 if the
proposal was accepted; Gibbs always accepts), ``changed`` (1 if ``y`` differs from before the
step) and kernel-specific ones.

Metropolis acceptance (:func:`mh_log_accept`) for a symmetric proposal:

    alpha(y -> y') = min(1, exp((E(y) - E(y')) / T))

Initial state (``init``): ``"uniform"`` (every valid label i.i.d. uniform, so the initial law is
uniform over labelings), ``"zeros"``, or an explicit ``y0`` [B, N] / [C, B, N] passed to ``init``
(:func:`_initial_labels`). Randomness comes from one ``torch.Generator`` seeded with the kernel's
``seed`` (a constructor argument, ``SAMPLERS.build(name, cfg, seed=...)``, never a config field: a
flow derives it from ``base.seed`` with :func:`components.seeds.seed_for`), on the labels' device,
so a run is reproducible. :func:`repeat_batch` tiles every
per-instance tensor of a batch along dim 0 (row ``c*B + b`` is instance ``b``), so a general energy
scores ``C x B`` sequences in one call.

References: N. Metropolis, A. Rosenbluth, M. Rosenbluth, A. Teller, E. Teller (1953), Equation of
state calculations by fast computing machines. W. K. Hastings (1970), Monte Carlo sampling methods
using Markov chains and their applications.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from components.config import check_range

__all__ = ["ChainState", "Sampler", "check_seed", "mh_log_accept", "repeat_batch", "run_chains"]


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
    potentials: Any = None                 # ChainPotentials, when the energy is evaluated from them
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


def mh_log_accept(energy: Tensor, proposed_energy: Tensor, temperature: float = 1.0) -> Tensor:
    """log of the Metropolis acceptance probability ``min(1, exp((E(y) - E(y')) / T))`` (elementwise)."""
    return ((energy - proposed_energy) / temperature).clamp_max(0.0)



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
# Shared machinery: configs, masks, labels, start states, draws
# ------------------------------------------------------------------------------------------------

_INITS = ("uniform", "zeros")


def check_seed(seed: Any, who: str) -> int:
    """A kernel's ``seed``: an int >= 0 (else a ``ValueError`` naming ``who``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{who}: seed must be an int >= 0, got {seed!r}")
    return seed


def _check_common(cfg: Any) -> None:
    name = type(cfg).__name__
    if cfg.init not in _INITS:
        raise ValueError(f"{name}.init must be one of {_INITS}, got {cfg.init!r}")
    check_range(cfg, positive=("temperature",))


def _resolve_mask(energy: Any, batch: Any, p: Any, mask: Tensor | None, who: str) -> Tensor:
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


def _resolve_labels(energy: Any, p: Any, n_labels: int | None, cfg_labels: int, who: str) -> int:
    for L in (n_labels, cfg_labels or None, p.n_labels if p is not None else None, getattr(energy, "n_labels", None)):
        if L is not None:
            if int(L) < 1:
                raise ValueError(f"{who}: n_labels must be >= 1, got {L}")
            return int(L)
    raise ValueError(f"{who}: cannot tell the number of labels of {type(energy).__name__}: set the config's "
                     "n_labels, pass init(..., n_labels=L), or give the energy an n_labels attribute")


def start_ids(y0: Tensor, C: int, mask: Tensor, who: str, what: str) -> Tensor:
    """A given start ``y0`` ([B, N] or [C, B, N] integer ids) as long [C, B, N], 0 at padding."""
    B, N = mask.shape
    y0 = torch.as_tensor(y0, device=mask.device)
    if y0.dtype == torch.bool or y0.is_floating_point() or y0.is_complex():
        raise ValueError(f"{who}: y0 must hold integer {what}, got {y0.dtype}")
    if y0.shape == (B, N):
        y0 = y0.expand(C, B, N)
    if y0.shape != (C, B, N):
        raise ValueError(f"{who}: y0 must have shape [B, N] = {[B, N]} or [C, B, N] = {[C, B, N]}, "
                         f"got {list(y0.shape)}")
    return y0.long().masked_fill(~mask, 0)


def _initial_labels(init: str, y0: Tensor | None, C: int, mask: Tensor, L: int, g: torch.Generator,
                    who: str) -> Tensor:
    B, N = mask.shape
    if y0 is not None:
        y = start_ids(y0, C, mask, who, "labels")
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
