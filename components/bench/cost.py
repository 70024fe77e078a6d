r"""Cost curves of the ``bench`` stage: throughput against problem size, each point timed by the one
harness (:func:`components.metrics.timing.compare`) side by side with its matmul ceiling (the
method's dominant matmul at the same shapes, timed alone in the same round), and the naive loop
at the small sizes where it is affordable. The arithmetic is :mod:`components.bench.curves`.

- :func:`mh_curve`: MH proposals/s of ``mh_mlm`` (one sweep) at each total of chains x sentences;
  ceiling: the model's output projection ``[rows * T, d_model] x [d_model, V]`` (``F.linear`` with
  the model's own weight) for the ``rows`` sequences of one pass, times the rows sent through the
  network per proposal (counted on the model). The naive Algorithm 4 at totals <= ``naive_max``
  through :func:`components.bench.mcmc.compare_mh` (its acceptance law checked first).
- :func:`gd_curve`: instances/s of the vectorised GD oracle grid at each number of instances;
  ceiling: the pairwise term's matmul ``[S * B * (N-1), L] x [L, L]`` (S = restarts x learning
  rates), three per step (forward, and the gradient to each side), ``max(checkpoints)`` steps.
- :func:`cost_figure`: one log-log figure of such curves (matplotlib, Agg).

No I/O. For the ``bench`` stage and its tests (which assert no times).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from components.bench.curves import check_sizes, gd_ceiling, mh_ceiling, rate, split_total  # noqa: E402
from components.bench.mcmc import _Counting, compare_mh  # noqa: E402
from components.energies.mlm import MLMEnergy  # noqa: E402
from components.inference.gd_config import GDConfig  # noqa: E402
from components.inference.gradient_descent import gradient_descent, initial_logits  # noqa: E402
from components.inference.mcmc.mlm_kernels import MHMLM, MHMLMConfig  # noqa: E402
from components.inference.mcmc.traces import shard_batch  # noqa: E402
from components.metrics.timing import TimingConfig, compare  # noqa: E402
from components.seeds import seed_for  # noqa: E402

__all__ = ["mh_curve", "gd_curve", "cost_figure"]


def _projection(model: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output layer's weight [V, D] and bias of a conditional MLM (tied or not)."""
    w = model.tgt_embed.tok.weight[:model.vocab_size] if model.out is None else model.out.weight
    return w.detach(), (None if model.out_bias is None else model.out_bias.detach())


@torch.no_grad()
def mh_curve(model: Any, kind: str, totals: Sequence[int], *, max_sentences: int, source_length: int,
             target_length: int, src_vocab: int, naive_max: int, timing: TimingConfig, device: str = "cpu",
             seed: int = 0) -> list[dict[str, Any]]:
    """One point per total of chains x sentences (module doc): ``total``, ``chains``, ``sentences``,
    ``proposals`` (per sweep), ``fast_s``, ``fast_proposals_per_s``, ``matmul_s``,
    ``rows_per_proposal``, ``ceiling_proposals_per_s``, ``rounds``, ``converged``,
    ``load_avg_start``, and where the naive loop ran, ``naive_s``, ``naive_proposals_per_s`` and
    ``law_gap``, ``law_tol``. ``seed``: the sources (``seed_for(seed, "sources", total)``) and chains."""
    totals = check_sizes(totals, "totals")
    w, bias = _projection(model)
    energy = MLMEnergy(model, kind)
    out = []
    for total in totals:
        chains, sents = split_total(total, max_sentences)
        g = torch.Generator().manual_seed(seed_for(seed, "sources", total))
        sources = [torch.randint(3, src_vocab, (source_length,), generator=g).tolist() for _ in range(sents)]
        batch = shard_batch(sources, [target_length] * sents, device)
        counting = _Counting(model)
        fast_energy = MLMEnergy(counting, kind)
        sampler = MHMLM(MHMLMConfig(), seed=seed_for(seed, "chains", total))
        state0 = sampler.init(fast_energy, batch, chains)
        rows = chains * sents
        gen_seed = seed_for(seed, "sweeps", total)

        def fast() -> None:
            st = dataclasses.replace(state0, generator=torch.Generator(device=state0.y.device).manual_seed(gen_seed))
            sampler.step(st)

        counting.calls = counting.rows = 0
        fast()
        proposals = int(state0.mask.sum()) * chains
        rows_per_proposal = counting.rows / proposals
        h = torch.randn(rows * target_length, w.shape[1], generator=g).to(device=device, dtype=w.dtype)

        def matmul() -> None:
            torch.nn.functional.linear(h, w, bias)

        res = compare({"fast": fast, "matmul": matmul}, baseline="fast", ours="matmul", timing=timing, device=device)
        fast_s, mm_s = res["sides"]["fast"]["median_s"], res["sides"]["matmul"]["median_s"]
        p = {"total": total, "chains": chains, "sentences": sents, "proposals": proposals, "fast_s": fast_s,
             "fast_proposals_per_s": rate(proposals, fast_s), "matmul_s": mm_s,
             "rows_per_proposal": rows_per_proposal,
             "ceiling_proposals_per_s": mh_ceiling(rows, mm_s, rows_per_proposal),
             "rounds": res["rounds"], "converged": res["converged"], "load_avg_start": res["load_avg_start"]}
        if total <= naive_max:
            r = compare_mh(energy, batch, n_chains=chains, timing=timing, device=device,
                           seed=seed_for(seed, "naive", total))
            p.update(naive_s=r["naive_s"], naive_proposals_per_s=r["naive_proposals_per_s"], law_gap=r["law_gap"],
                     law_tol=r["law_tol"], naive_ratio=r["mh_ratio"])
        out.append(p)
    return out


def gd_curve(unary: torch.Tensor, transition: torch.Tensor, mask: torch.Tensor, gd: GDConfig,
             sizes: Sequence[int], *, timing: TimingConfig, device: str = "cpu", seed: int = 0) -> list[dict[str, Any]]:
    """One point per number of instances B (the first B rows of ``unary``/``mask`` [B_max, N, L],
    cycled when B exceeds them): ``instances``, ``batched_s`` (the whole grid), ``instances_per_s``,
    ``matmul_s``, ``steps``, ``grid``, ``ceiling_instances_per_s``, ``rounds``, ``converged``,
    ``load_avg_start``. Same start logits per size (``seed_for(seed, B)``)."""
    sizes = check_sizes(sizes, "sizes")
    Bmax, N, L = unary.shape
    S = gd.restarts * len(gd.lrs)
    steps = max(gd.checkpoints)
    out = []
    for B in sizes:
        idx = torch.arange(B, device=unary.device) % Bmax
        u, m = unary[idx], mask[idx]
        tr = transition[idx] if transition.dim() == 4 else transition      # per-position [B, N-1, L, L]
        g = torch.Generator().manual_seed(seed_for(seed, B))
        z0 = initial_logits(u, m, gd, None, g)

        def batched() -> None:
            gradient_descent(u, tr, m, gd, init_logits=z0)

        a = torch.randn(S * B * max(N - 1, 1), L, generator=g).to(device=device, dtype=unary.dtype)
        wt = transition.detach() if transition.dim() == 2 else transition.detach()[0, 0]

        def matmul() -> None:
            a @ wt

        res = compare({"batched": batched, "matmul": matmul}, baseline="batched", ours="matmul", timing=timing,
                      device=device)
        bs, mm = res["sides"]["batched"]["median_s"], res["sides"]["matmul"]["median_s"]
        out.append({"instances": B, "batched_s": bs, "instances_per_s": rate(B, bs), "matmul_s": mm, "steps": steps,
                    "grid": S, "ceiling_instances_per_s": gd_ceiling(B, mm, steps),
                    "rounds": res["rounds"], "converged": res["converged"], "load_avg_start": res["load_avg_start"]})
    return out


def cost_figure(x: Sequence[float], series: dict[str, tuple[Sequence[float], Sequence[float]]], *, xlabel: str,
                ylabel: str, title: str, ceiling: str | None = None) -> Figure:
    """A log-log figure: ``series`` name -> (xs, ys); the one named ``ceiling`` dashed."""
    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=110)
    for name, (xs, ys) in series.items():
        if not xs:
            continue
        style = dict(ls="--", color="grey") if name == ceiling else dict(marker="o")
        ax.plot(list(xs), list(ys), label=name, **style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
