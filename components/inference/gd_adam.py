r"""Gradient-descent inference with Adam in the softmax-relaxed output space.

The problem is Tu & Gimpel's (2019, Sec. 3): for a chain energy minimise ``E(x, softmax(z))`` over
unconstrained logits ``z`` [B, N, L] and read off ``argmax_l z_{t,l}``. Where
:mod:`components.inference.gradient_descent` takes heavy-ball momentum steps with an analytic
gradient (the paper's optimiser), this method takes Adam steps (Kingma & Ba 2015) with the
gradient from autograd of the relaxed energy ``-linear_chain.score(U, W, mask, softmax(z))``:

    g_i = dE/dz(z_i);  m_i = b1 m_{i-1} + (1 - b1) g_i;  v_i = b2 v_{i-1} + (1 - b2) g_i^2
    z_{i+1} = z_i - lr * (m_i / (1 - b1^i)) / (sqrt(v_i / (1 - b2^i)) + eps)

Adam normalises each logit's step by its own gradient scale, so one learning rate serves
sentences and label sets whose energy gradients differ by orders of magnitude, where momentum GD
needs a per-instance oracle over nine learning rates. Adam acts elementwise, so instances in a
batch do not interact: the result for a sentence does not depend on its batch-mates (padded
positions get zero gradient, hence zero steps).

Start: ``z_0 ~ N(0, init_std^2)`` (near-uniform, as for momentum GD) from a generator seeded with the
method's ``seed`` argument (the flow derives it from ``base.seed``: ``components.seeds``), or an
inference network's logits (``warm_start``). Cost: ``iterations`` forward/backward passes of the
relaxed chain score, ``O(B N L^2)`` each; memory a few ``[B, N, L]`` tensors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from components.config import check_range
from components.energies.chain import ChainEnergy
from components.inference.base import InferenceResult, check
from components.inference.gd_config import GDConfig, GDStart
from components.inference.gradient_descent import SeededStarts, initial_logits
from components.inference.inference_net import warm_start_logits


@dataclass(frozen=True)
class GDAdamConfig(GDStart):
    lr: float = 0.1
    iterations: int = 50
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    # init_std: GDStart's (the one owner of the start); the start's seed is the method's ``seed``
    # argument, never a config field

    def __post_init__(self):
        super().__post_init__()
        check_range(self, positive=("lr", "eps"), nonnegative=("iterations",), within={"betas": "[0, 1)"})


class GradientDescentAdam:
    """``Inference`` for chain energies: Adam on the relaxed energy; labels, final relaxed output,
    the exact energy of the labels, stats ``relaxed_energy`` (batch mean) and ``iterations``."""

    needs = ChainEnergy

    def __init__(self, cfg: GDAdamConfig = GDAdamConfig(), *, warm_start: Any = None, seed: int = 0):
        self.cfg, self.warm_start = cfg, warm_start
        self._starts = SeededStarts(seed)

    def __call__(self, energy: Any, batch: Any) -> InferenceResult:
        check(self, energy)
        c = self.cfg
        with torch.no_grad():
            p = energy.potentials(batch).detach()
            init = warm_start_logits(self.warm_start, batch) if self.warm_start is not None else None
            z0 = initial_logits(p.unary, p.mask, GDConfig(init_std=c.init_std), init, self._starts(p.unary.device))[0]
        z = z0.clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=c.lr, betas=c.betas, eps=c.eps)
        with torch.enable_grad():
            for _ in range(c.iterations):
                opt.zero_grad(set_to_none=True)
                p.energy(torch.softmax(z, -1)).sum().backward()
                opt.step()
        with torch.no_grad():
            q = torch.softmax(z, -1) * p.mask[..., None]
            labels = torch.where(p.mask, z.argmax(-1), 0)
            return InferenceResult(labels=labels, relaxed=q, energy=p.energy(labels),
                                   stats={"relaxed_energy": float(p.energy(q).mean()),
                                          "iterations": float(c.iterations)})


def make_gd_adam(cfg: GDAdamConfig, *, seed: int = 0) -> GradientDescentAdam:
    """The ``INFERENCE`` builder of ``gd_adam`` (``seed``: its random starts)."""
    return GradientDescentAdam(cfg, seed=seed)
