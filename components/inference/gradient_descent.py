r"""Gradient-descent inference in the softmax-relaxed output space (Tu & Gimpel 2019, Sec. 3, eq. 1).

Problem. For a chain energy ``E(x, y) = -s(y)`` with ``s(q) = sum_t q_t . U_t + sum_t q_{t-1}^T W_{t-1} q_t``
(``components.structures.linear_chain``), minimise over unconstrained logits ``z`` [N, L]

    min_z  E(x, softmax(z))          (softmax per position)

and read off labels ``argmax_l q_{t,l} = argmax_l z_{t,l}`` (softmax is monotone, so the argmax of
``z`` is the argmax of ``q`` without underflow ties).

Gradient (analytic, no autograd). With ``q = softmax(z)`` and masked rows of ``q`` zeroed,

    g_t = dE/dq_t = -(U_t + W_t q_{t+1} + W_{t-1}^T q_{t-1})      (terms past either end omitted)
    dE/dz_t = q_t * (g_t - <q_t, g_t>)                              (softmax Jacobian)

so a step costs two ``[*, L] x [L, L]`` products (``O(N L^2)`` per sequence). Masked positions get
zero gradient, so their logits never move and never affect anything.

Update (classical heavy-ball momentum, identical to ``torch.optim.SGD(momentum=mu)`` with
dampening 0, no Nesterov, no weight decay):

    v_0 = 0;   v_{i+1} = mu * v_i + dE/dz(z_i);   z_{i+1} = z_i - lr * v_{i+1}

A *checkpoint* ``n`` records the state ``z_n`` after ``n`` updates (``n = 0``: the initial logits).

Batching. The paper's protocol runs one GD per (instance, learning rate, iteration count N) from
the same initialisation. Here every (restart r, learning rate k, instance b) is one row of a single
stacked tensor ``[R*K, B, N, L]`` that runs ``max(checkpoints)`` steps once; each N in the grid is a
prefix of that one trajectory (a run of N steps is exactly the first N steps of a longer run from
the same start), recorded on the way. So the whole oracle grid costs one run of ``max N`` steps.

Initialisation. ``z_0 ~ N(0, init_std^2)`` i.i.d., one draw per (restart, instance), shared by every
learning rate (so the oracle compares learning rates from the same start, as the paper does).
Warm start (Sec. 4.2.2): ``init_logits`` [B, N, L] (e.g. inference-network logits) is restart 0's
start; restarts ``r >= 1`` are *random* restarts drawn as above (warm start plus random restarts,
so an oracle over restarts can only improve on the warm start). ``init_logits`` [R, B, N, L] sets
every restart's start explicitly (used to compare against :func:`naive_oracle_grid` in
``components.bench.oracle``).

Outputs (:class:`GDResult`), with ``C = len(checkpoints)``, ``R = restarts``, ``K = len(lrs)``:

    labels          long [C, R, K, B, N]   argmax labels at each checkpoint (0 at masked positions)
    energy          [C, R, K, B]           E(labels), computed exactly by linear_chain.score
    relaxed_energy  [C, R, K, B]           E(softmax(z)) at the checkpoint
    relaxed         [R, K, B, N, L] | None softmax(z) after the last checkpoint (keep_relaxed=True;
                                           zero rows at masked positions)

Complexity: time ``O(max(checkpoints) * R K B N L^2)``; memory a handful of ``[R K, B, N, L]``
tensors (z, velocity, q, gradient and two ``[R K, B, N-1, L]`` products): at K = 9, B = 100, N = 40,
L = 1000 in float32 that is ~144 MB each. No relaxed tensor is kept per checkpoint. To bound memory
further, split the instances into shards (rows are independent), e.g. ``flows/parallel.py``.

Numerics: learning rates up to 1e4 drive logits to magnitudes ~1e6-1e10; softmax subtracts the row
maximum, so it stays exact and finite. The state is checked for NaN/inf at every checkpoint and a
``FloatingPointError`` names the learning rate if one appears (it does not for finite potentials
in float32 unless the logits pass ~1e38).

Reference: L. Tu, K. Gimpel (2019), Benchmarking approximate inference methods for neural structured
prediction, NAACL (Sec. 3; appendix: N in {5, ..., 1000}, lr in {1e4, ..., 1}, momentum).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from components.config import check_range, field_error
from components.energies.chain import ChainEnergy
from components.inference.gd_config import GDConfig, GDStart
from components.inference.base import InferenceResult, check
from components.inference.inference_net import warm_start_logits
from components.structures import linear_chain

__all__ = ["GDInferenceConfig", "GDResult", "gradient_descent", "initial_logits", "relaxed_energy",
           "GradientDescent", "SeededStarts"]


@dataclass
class GDResult:
    """Checkpointed GD outputs; layouts in the module docstring (``[C, R, K, B, ...]``)."""

    checkpoints: tuple[int, ...]
    lrs: tuple[float, ...]
    labels: Tensor
    energy: Tensor
    relaxed_energy: Tensor
    relaxed: Tensor | None = None

    @property
    def restarts(self) -> int:
        return int(self.energy.shape[1])


def _check_cfg(cfg: GDConfig) -> None:
    if not isinstance(cfg, GDConfig):
        raise TypeError(f"gradient_descent: cfg must be a GDConfig, got {type(cfg).__name__}")
    if len(cfg.lrs) == 0:
        raise ValueError("GDConfig.lrs is empty")
    for lr in cfg.lrs:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (0 < float(lr) < float("inf")):
            raise ValueError(f"GDConfig.lrs must be positive finite numbers, got {lr!r}")
    if len(cfg.checkpoints) == 0:
        raise ValueError("GDConfig.checkpoints is empty")
    for n in cfg.checkpoints:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"GDConfig.checkpoints must be non-negative ints, got {n!r}")
    if any(b <= a for a, b in zip(cfg.checkpoints, cfg.checkpoints[1:])):
        raise ValueError(f"GDConfig.checkpoints must be strictly increasing, got {list(cfg.checkpoints)}")
    if not 0.0 <= float(cfg.momentum) < 1.0:
        raise ValueError(f"GDConfig.momentum must be in [0, 1), got {cfg.momentum!r}")
    if isinstance(cfg.restarts, bool) or not isinstance(cfg.restarts, int) or cfg.restarts < 1:
        raise ValueError(f"GDConfig.restarts must be a positive int, got {cfg.restarts!r}")


def initial_logits(unary: Tensor, mask: Tensor, cfg: GDConfig, init_logits: Tensor | None = None,
                   generator: torch.Generator | None = None) -> Tensor:
    """Starting logits ``z_0`` [R, B, N, L] in ``unary``'s dtype and device (see the module docstring).

    Random draws come from ``generator`` (on any device; the draw is moved to ``unary``'s device)
    or the global RNG. Masked rows are set to 0 (they never move and never matter).
    """
    R = cfg.restarts
    B, N, L = unary.shape
    dt, dev = unary.dtype, unary.device

    def draw(n: int) -> Tensor:
        gdev = generator.device if generator is not None else dev
        x = torch.randn((n, B, N, L), generator=generator, dtype=dt, device=gdev)
        return (x * float(cfg.init_std)).to(dev)

    if init_logits is None:
        z0 = draw(R)
    else:
        if not isinstance(init_logits, Tensor) or not init_logits.dtype.is_floating_point:
            raise ValueError(f"gradient_descent: init_logits must be a floating tensor [B, N, L] or "
                             f"[R, B, N, L], got {getattr(init_logits, 'dtype', type(init_logits).__name__)}")
        z = init_logits.detach().to(dtype=dt, device=dev)
        if tuple(z.shape) == (B, N, L):
            z0 = torch.cat([z.unsqueeze(0), draw(R - 1)], 0) if R > 1 else z.unsqueeze(0).clone()
        elif tuple(z.shape) == (R, B, N, L):
            z0 = z.clone()
        else:
            raise ValueError(f"gradient_descent: init_logits must have shape [B, N, L] = {[B, N, L]} or "
                             f"[R, B, N, L] = {[R, B, N, L]}, got {list(z.shape)}")
    m = mask[None, :, :, None]
    bad = m & ~torch.isfinite(z0)
    if bool(bad.any()):
        raise ValueError(f"gradient_descent: init_logits contains NaN or inf at unmasked index "
                         f"{bad.nonzero()[0].tolist()} (restart, b, t, l)")
    return torch.where(m, z0, torch.zeros((), dtype=dt, device=dev))


def _right(qm: Tensor, W: Tensor, per_position: bool) -> Tensor:
    """``W_t q_{t+1}`` for t < N-1: [S, B, N-1, L]."""
    if per_position:
        return torch.einsum("btij,sbtj->sbti", W, qm[:, :, 1:])
    return torch.matmul(qm[:, :, 1:], W.transpose(0, 1))


def _left(qm: Tensor, W: Tensor, per_position: bool) -> Tensor:
    """``W_{t-1}^T q_{t-1}`` for t >= 1: [S, B, N-1, L]."""
    if per_position:
        return torch.einsum("btij,sbti->sbtj", W, qm[:, :, :-1])
    return torch.matmul(qm[:, :, :-1], W)


def _relaxed_energy(qm: Tensor, right: Tensor, U: Tensor) -> Tensor:
    """E(q) [S, B] from masked ``qm`` [S, B, N, L] and ``right = W_t q_{t+1}``."""
    e = (qm * U).sum((2, 3))
    if right.shape[2] > 0:
        e = e + (qm[:, :, :-1] * right).sum((2, 3))
    return -e


def relaxed_energy(unary: Tensor, transition: Tensor, mask: Tensor | None, q: Tensor) -> Tensor:
    """E(q) for relaxed rows ``q`` [S, B, N, L] (a leading stack of outputs per instance) -> [S, B].

    The same multilinear expression as ``-linear_chain.score`` without the simplex check, batched
    over the leading axis without copying the potentials.
    """
    ch = linear_chain.validate(unary, transition, mask, caller="relaxed_energy")
    if q.dim() != 4 or tuple(q.shape[1:]) != tuple(unary.shape):
        raise ValueError(f"relaxed_energy: q must have shape [S, B, N, L] with [B, N, L] = {list(unary.shape)}, "
                         f"got {list(q.shape)}")
    qm = q * ch.mask[None, :, :, None].to(q.dtype)
    return _relaxed_energy(qm, _right(qm, ch.transition, ch.per_position), ch.unary)


@torch.no_grad()
def gradient_descent(unary: Tensor, transition: Tensor, mask: Tensor | None = None,
                     cfg: GDConfig = GDConfig(), *, init_logits: Tensor | None = None,
                     generator: torch.Generator | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     keep_relaxed: bool = False) -> GDResult:
    """Momentum GD on ``E(softmax(z))`` for every (restart, learning rate, instance) at once.

    Args: chain potentials ``unary`` [B, N, L], ``transition`` [L, L] or [B, N-1, L, L], ``mask``
    [B, N] (validated by ``linear_chain.validate``; gradients never flow into them); ``cfg`` the
    grid; ``init_logits`` [B, N, L] (warm start of restart 0) or [R, B, N, L]; ``generator`` for
    the random starts; ``on_step(i, total)`` called after update ``i`` of ``total``;
    ``keep_relaxed`` to return the final ``softmax(z)``.

    Returns a :class:`GDResult` with tensors laid out ``[C, R, K, B, ...]`` (module docstring).
    """
    ch = linear_chain.validate(unary, transition, mask, caller="gradient_descent")
    _check_cfg(cfg)
    B, N, L = ch.shape
    R, K, C = cfg.restarts, len(cfg.lrs), len(cfg.checkpoints)
    S = R * K
    U, W, mask = ch.unary.detach(), ch.transition.detach(), ch.mask
    dt, dev = U.dtype, U.device
    mf = mask[:, :, None].to(dt)                                        # [B, N, 1]

    z0 = initial_logits(U, mask, cfg, init_logits, generator)          # [R, B, N, L]
    z = z0.unsqueeze(1).expand(R, K, B, N, L).reshape(S, B, N, L).clone()
    del z0
    lr = torch.tensor([float(x) for x in cfg.lrs], dtype=dt, device=dev).repeat(R).view(S, 1, 1, 1)
    mu = float(cfg.momentum)
    v = torch.zeros_like(z)
    negU = (-U).unsqueeze(0)

    labels_out = torch.zeros((C, S, B, N), dtype=torch.long, device=dev)
    energy_out = torch.empty((C, S, B), dtype=dt, device=dev)
    relaxed_out = torch.empty((C, S, B), dtype=dt, device=dev)
    ck_index = {n: i for i, n in enumerate(cfg.checkpoints)}
    total = cfg.checkpoints[-1]
    for it in range(total + 1):
        # masked rows zeroed: they drop out of the energy, and their gradient q * (...) is 0
        q = torch.softmax(z, -1).mul_(mf)
        right = _right(q, W, ch.per_position) if N > 1 else None
        c = ck_index.get(it)
        if c is not None:
            if not bool(torch.isfinite(z).all()):
                bad = (~torch.isfinite(z)).flatten(1).any(1).nonzero()[0, 0].item()
                raise FloatingPointError(f"gradient_descent: logits became non-finite after {it} steps "
                                         f"(lr = {cfg.lrs[bad % K]}, restart {bad // K})")
            relaxed_out[c] = _relaxed_energy(q, right if right is not None else q[:, :, :0], U)
            lab = torch.where(mask, z.argmax(-1), 0)                      # [S, B, N]
            labels_out[c] = lab
            for s in range(S):
                energy_out[c, s] = -linear_chain.score(U, W, mask, lab[s])
        if it == total:
            break
        g = negU.expand(S, B, N, L).clone()                             # dE/dq
        if right is not None:
            g[:, :, :-1] -= right
            g[:, :, 1:] -= _left(q, W, ch.per_position)
        del right                                                       # masked rows: q = 0 below
        g.sub_((q * g).sum(-1, keepdim=True)).mul_(q)                    # dE/dz
        v.mul_(mu).add_(g)
        del g
        z.addcmul_(lr, v, value=-1.0)
        if on_step is not None:
            on_step(it + 1, total)

    relaxed = q.view(R, K, B, N, L) if keep_relaxed else None
    return GDResult(checkpoints=tuple(cfg.checkpoints), lrs=tuple(float(x) for x in cfg.lrs),
                    labels=labels_out.view(C, R, K, B, N), energy=energy_out.view(C, R, K, B),
                    relaxed_energy=relaxed_out.view(C, R, K, B), relaxed=relaxed)


@dataclass(frozen=True)
class GDInferenceConfig(GDStart):
    """One fixed (lr, N) of momentum GD, the ``gd`` entry of ``INFERENCE``. The defaults (lr 100,
    50 iterations) are a serviceable point of the paper's grid, not the paper's protocol: it tunes
    both per instance (``components.inference.oracle``) or, for warm starts, on dev."""

    lr: float = 100.0
    iterations: int = 50
    momentum: float = 0.9
    # init_std: GDStart's (the one owner of the start)
    # no seed here: the random start's seed is the method's ``seed`` argument (the flow derives it
    # from base.seed, components.seeds), so that params cannot set a seed other than base.seed

    def __post_init__(self):
        super().__post_init__()
        check_range(self, positive=("lr",), nonnegative=("iterations",), within={"momentum": "[0, 1)"})

    def grid(self) -> GDConfig:
        cfg = GDConfig(lrs=(float(self.lr),), checkpoints=(int(self.iterations),), momentum=self.momentum,
                       restarts=1, init_std=self.init_std)
        _check_cfg(cfg)
        return cfg


class SeededStarts:
    """Random starts from one generator per device, seeded once and advancing across calls."""

    def __init__(self, seed: int):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"SeededStarts: seed must be an int >= 0, got {seed!r}")
        self.seed = seed
        self._generators: dict[str, torch.Generator] = {}

    def __call__(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]


class GradientDescent:
    """GD inference with one fixed (lr, N): the ``Inference`` protocol, evaluable like Viterbi.

    ``warm_start`` (an inference network, ``net(words, mask, chars) -> logits [B, N, L]``)
    optionally supplies the start (its pre-softmax scores, Sec. 4.2.2); otherwise
    ``z_0 ~ N(0, init_std^2)`` from a generator seeded with ``seed`` (one per device, advancing
    across calls: two methods built with the same seed draw the same starts for the same batches).

    Returns labels [B, N], the final relaxed output [B, N, L], the exact energy [B] of the labels,
    and stats ``relaxed_energy`` (mean over the batch), ``lr``, ``iterations``.
    """

    needs = ChainEnergy

    def __init__(self, cfg: GDInferenceConfig = GDInferenceConfig(), *, warm_start: Any = None, seed: int = 0):
        self.cfg = cfg.grid()
        self.warm_start = warm_start
        self._starts = SeededStarts(seed)

    @torch.no_grad()
    def __call__(self, energy: Any, batch: Any) -> InferenceResult:
        check(self, energy)
        p = energy.potentials(batch)
        init = warm_start_logits(self.warm_start, batch) if self.warm_start is not None else None
        res = gradient_descent(p.unary, p.transition, p.mask, self.cfg, init_logits=init,
                               generator=self._starts(p.unary.device), keep_relaxed=True)
        assert res.relaxed is not None
        return InferenceResult(labels=res.labels[-1, 0, 0], relaxed=res.relaxed[0, 0],
                               energy=res.energy[-1, 0, 0],
                               stats={"relaxed_energy": float(res.relaxed_energy[-1, 0, 0].mean()),
                                      "lr": self.cfg.lrs[0], "iterations": float(self.cfg.checkpoints[0])})


def make_gd(cfg: GDInferenceConfig, *, seed: int = 0) -> GradientDescent:
    """The ``INFERENCE`` builder of ``gd`` (``seed``: its random starts)."""
    return GradientDescent(cfg, seed=seed)


def make_gd_warm_start(cfg: GDInferenceConfig, net: Any, *, seed: int = 0) -> GradientDescent:
    """The ``INFERENCE`` builder of ``gd_warm_start``: GD from an inference network's logits (``seed``
    is accepted like every seeded method's, and unused: the start is the network's)."""
    return GradientDescent(cfg, warm_start=net, seed=seed)
