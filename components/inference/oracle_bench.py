"""The naive oracle-grid baseline (the paper's loop) and a side-by-side comparison with the batched one.

:func:`naive_oracle_grid` is the faithful per-run implementation of Tu & Gimpel's oracle protocol:
a Python loop over instances, restarts, learning rates and iteration counts N, each
(instance, restart, lr, N) a *separate* run of N momentum-GD steps on that single sequence (trimmed
to its length) from the same initial logits, with the gradient from autograd through
``linear_chain.score(softmax(z))`` and the update from ``torch.optim.SGD(momentum=...)``. It shares
nothing with :func:`components.inference.gradient_descent.gradient_descent` but the initial
logits (:func:`~components.inference.gradient_descent.initial_logits`), so agreement checks both
the analytic gradient and the update rule. Its cost is ``B * R * K * sum(checkpoints)`` steps
(the batched version: ``max(checkpoints)`` batched steps).

:func:`compare_oracle_grid` times both once on the same inputs and reports seconds, the speed-up
and the largest disagreement. Used by benchmarks only, never by timed tests.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
from torch import Tensor

from components.inference.gradient_descent import GDConfig, GDResult, _check_cfg, gradient_descent, initial_logits
from components.structures import linear_chain

__all__ = ["naive_oracle_grid", "compare_oracle_grid"]


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


def compare_oracle_grid(unary: Tensor, transition: Tensor, mask: Tensor | None = None, cfg: GDConfig = GDConfig(), *,
                        seed: int = 0) -> dict[str, float]:
    """Run the batched and the naive grid once each from the same seeded initial logits.

    Returns ``batched_s``, ``naive_s``, ``speedup`` (naive / batched), ``label_agreement`` (fraction
    of equal discretised labels over unmasked positions and all candidates) and the largest absolute
    differences of the discretised and relaxed energies. CUDA work is synchronised before the clock
    is read.
    """
    ch = linear_chain.validate(unary, transition, mask, caller="compare_oracle_grid")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    z0 = initial_logits(ch.unary, ch.mask, cfg, None, gen)
    cuda = ch.unary.is_cuda
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fast = gradient_descent(ch.unary, ch.transition, ch.mask, cfg, init_logits=z0)
    sync()
    t1 = time.perf_counter()
    slow = naive_oracle_grid(ch.unary, ch.transition, ch.mask, cfg, init_logits=z0)
    sync()
    t2 = time.perf_counter()
    m = ch.mask.expand_as(fast.labels)
    agree = float((fast.labels == slow.labels)[m].double().mean())
    return {"batched_s": t1 - t0, "naive_s": t2 - t1, "speedup": (t2 - t1) / max(t1 - t0, 1e-12),
            "label_agreement": agree,
            "max_abs_energy_diff": float((fast.energy - slow.energy).abs().max()),
            "max_abs_relaxed_energy_diff": float((fast.relaxed_energy - slow.relaxed_energy).abs().max())}
