"""The naive oracle-grid baseline: the paper's loop, one run per (instance, restart, lr, N).

:func:`naive_oracle_grid` is the faithful per-run implementation of Tu & Gimpel's oracle protocol:
a Python loop over instances, restarts, learning rates and iteration counts N, each
(instance, restart, lr, N) a *separate* run of N momentum-GD steps on that single sequence (trimmed
to its length) from the same initial logits, with the gradient from autograd through
``linear_chain.score(softmax(z))`` and the update from ``torch.optim.SGD(momentum=...)``. It shares
nothing with :func:`components.inference.gradient_descent.gradient_descent` but the initial
logits (:func:`~components.inference.gradient_descent.initial_logits`), so agreement checks both
the analytic gradient and the update rule. Its cost is ``B * R * K * sum(checkpoints)`` steps
(the batched version: ``max(checkpoints)`` batched steps).

The ``bench`` stage times it against the batched grid with the one benchmark harness
(:func:`components.metrics.timing.compare`) and checks their labels agree. Used by benchmarks and
tests only, never by timed tests.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from components.inference.gd_config import GDConfig
from components.inference.gradient_descent import GDResult, _check_cfg, initial_logits
from components.structures import linear_chain

__all__ = ["naive_oracle_grid"]


def naive_oracle_grid(unary: Tensor, transition: Tensor, mask: Tensor | None = None, cfg: GDConfig = GDConfig(), *,
                      init_logits: Tensor | None = None, generator: torch.Generator | None = None,
                      on_run: Callable[[int, int], None] | None = None) -> GDResult:
    """The grid of :func:`gradient_descent`, one independent run per (instance, restart, lr, N).

    Same arguments and the same :class:`GDResult` layout ([C, R, K, B, ...]; ``relaxed`` is None).
    Pass the same ``init_logits`` (or an identically seeded ``generator``) to both to compare.
    ``on_run(i, total)`` is called after each run.
    """
    ch = linear_chain.validate(unary, transition, mask, caller="naive_oracle_grid")
    _check_cfg(cfg)
    B, N, L = ch.shape
    R, K, C = cfg.restarts, len(cfg.lrs), len(cfg.checkpoints)
    U, W, mask = ch.unary.detach(), ch.transition.detach(), ch.mask
    z0 = initial_logits(U, mask, cfg, init_logits, generator)
    labels = torch.zeros((C, R, K, B, N), dtype=torch.long, device=U.device)
    energy = torch.empty((C, R, K, B), dtype=U.dtype, device=U.device)
    relaxed = torch.empty((C, R, K, B), dtype=U.dtype, device=U.device)
    lengths = mask.sum(1).tolist()
    total, done = B * R * K * C, 0
    for b in range(B):
        n_b = lengths[b]
        u = U[b:b + 1, :n_b]
        w = W[b:b + 1, :n_b - 1] if ch.per_position else W
        for r in range(R):
            for k, lr in enumerate(cfg.lrs):
                for c, steps in enumerate(cfg.checkpoints):
                    z = z0[r, b:b + 1, :n_b].clone().requires_grad_()
                    opt = torch.optim.SGD([z], lr=float(lr), momentum=float(cfg.momentum))
                    for _ in range(steps):
                        opt.zero_grad()
                        e = -linear_chain.score(u, w, None, torch.softmax(z, -1)).sum()
                        e.backward()
                        opt.step()
                    with torch.no_grad():
                        y = z.argmax(-1)
                        labels[c, r, k, b, :n_b] = y[0]
                        energy[c, r, k, b] = -linear_chain.score(u, w, None, y)[0]
                        relaxed[c, r, k, b] = -linear_chain.score(u, w, None, torch.softmax(z, -1))[0]
                    done += 1
                    if on_run is not None:
                        on_run(done, total)
    return GDResult(checkpoints=tuple(cfg.checkpoints), lrs=tuple(float(x) for x in cfg.lrs),
                    labels=labels, energy=energy, relaxed_energy=relaxed)
