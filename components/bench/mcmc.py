r"""Benchmark of the batched MLM Metropolis–Hastings sampler against the thesis' Algorithm 4 run
as written.

- :func:`naive_mh`: a faithful, unbatched Algorithm 4 (thesis Sec. 6.4): chain by chain, instance
  by instance, each sweep a random order of the positions (without replacement); at each position
  t the energy of the current sequence is recomputed from scratch with T separate forward passes
  (one masked copy each, line 6), the proposal comes from one pass with t masked (lines 7-9), the
  proposal's energy takes T more passes (line 10), and the acceptance test is a Python comparison
  (lines 11-12): ``1 + 2T`` forward passes per proposal, O(T^2) per sweep, as the thesis counts.
  The encoder is amortised (one ``encode`` of the batch). Its pieces (:func:`naive_energy`,
  :func:`naive_proposal`, :func:`naive_log_accept`) are exposed so the tests can build its exact
  transition matrix and compare it with ``mh_mlm``'s.
- ``mh_mlm`` (``components.inference.mcmc``): all chains and instances at once, the current
  energy cached, per block one proposal pass over the C x B rows and one batched energy pass of
  the proposals (for a non-single-site model the T masked copies of every row in that one pass).
- :func:`compare_mh`: both, at block size 1 (the same Markov kernel), with the same chains, the
  same instances and lengths and the same initial state: before timing, their acceptance
  probabilities for the same proposals must agree (else ``RuntimeError``); then the two sides are
  timed by the one harness, :func:`components.metrics.timing.compare` (interleaved rounds until
  the ratio's IQR is within the target, or its time cap), and forward passes are counted on the
  model for both.

No I/O. For the ``bench`` stage, never for timed tests.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from components.energies.mlm import MLMEnergy
from components.inference.mcmc.mlm_kernels import (MHMLM, MHMLMConfig, block_log_q, mh_mlm_log_accept,
                                                   proposal_log_probs, temperature_at)
from components.metrics.timing import TimingConfig, compare, ratio_metrics
from components.seeds import seed_for

__all__ = ["naive_energy", "naive_proposal", "naive_log_accept", "NaiveResult", "naive_mh", "acceptance_gap",
           "compare_mh"]


# -- Algorithm 4, one position at a time -----------------------------------------------------------
def naive_energy(model: Any, kind: str, context: Any, y: Tensor, row: int) -> float:
    """E(y) of ONE sequence y long [n] (instance ``row`` of ``context``) by n separate forward
    passes, each on one copy of y with position t masked: ``-sum_t logit_t[y_t]`` (raw) or
    ``-sum_t log_softmax(logit_t)[y_t]`` (norm)."""
    n = y.shape[0]
    mask = torch.ones(1, n, dtype=torch.bool, device=y.device)
    rows = torch.tensor([row], device=y.device)
    e = 0.0
    for t in range(n):
        tok = y.clone()[None]
        tok[0, t] = model.mask_id
        logits = model.conditionals(tok, mask, context, rows)[0, t]
        s = logits if kind == "raw" else torch.log_softmax(logits, -1)
        e -= float(s[y[t]])
    return e


def naive_proposal(model: Any, context: Any, y: Tensor, t: int, row: int, temperature: float = 1.0,
                   top_p: float = 1.0) -> Tensor:
    """log q [V] of the token at position t of y long [n]: ONE pass with t masked (Algorithm 4,
    lines 7-8), tempered and cut to the nucleus as in ``mh_mlm``."""
    n = y.shape[0]
    tok = y.clone()[None]
    tok[0, t] = model.mask_id
    logits = model.conditionals(tok, torch.ones(1, n, dtype=torch.bool, device=y.device), context,
                                torch.tensor([row], device=y.device))[0, t]
    return proposal_log_probs(logits.double(), temperature, top_p)


def naive_log_accept(e_old: float, e_new: float, lq_forward: float, lq_reverse: float, temperature: float) -> float:
    """log a(y'; y) = min(0, (E_old - E_new) / T + log q(y | y') - log q(y' | y)) in Python floats
    (Algorithm 4, line 11); a nan (inf - inf) rejects."""
    v = (e_old - e_new) / temperature + lq_reverse - lq_forward
    return -math.inf if math.isnan(v) else min(0.0, v)


@dataclass
class NaiveResult:
    y: Tensor                   # long [C, B, N] the final sequences
    accepted: int               # accepted proposals
    proposals: int              # C * sweeps * sum_b n_b
    forward_passes: int         # conditionals calls: proposals * (1 + 2 n)


@torch.no_grad()
def naive_mh(energy: MLMEnergy, batch: Any, y_init: Tensor, cfg: MHMLMConfig = MHMLMConfig(), *, sweeps: int = 1,
             mask: Tensor | None = None, first_sweep: int = 0, seed: int = 0) -> NaiveResult:
    """Algorithm 4 (module doc) from ``y_init`` long [C, B, N] for ``sweeps`` sweeps over
    ``mask`` (default ``batch.mask``) bool [B, N]. Single-site only (``cfg.block_size == 1``);
    the target temperature follows ``temperature_at(cfg, first_sweep + e)``."""
    if cfg.block_size != 1 or (cfg.block_size_final not in (None, 1)):
        raise ValueError(f"naive_mh: Algorithm 4 is single-site; block_size must be 1, got {cfg.block_size} "
                         f"(final {cfg.block_size_final})")
    model, kind = energy.model, energy.kind
    mask = batch.mask if mask is None else mask
    C, B, N = y_init.shape
    if mask.shape != (B, N):
        raise ValueError(f"naive_mh: y_init [C, B, N] = {list(y_init.shape)} and mask {list(mask.shape)} disagree")
    g = torch.Generator(device=y_init.device)
    g.manual_seed(seed)
    context = energy.context(batch)
    y = y_init.clone()
    lengths = mask.sum(1).tolist()
    accepted = proposals = passes = 0
    for e in range(sweeps):
        T = temperature_at(cfg, first_sweep + e)
        free = first_sweep + e < cfg.accept_first_sweeps
        for c in range(C):
            for b in range(B):
                n = int(lengths[b])
                seq = y[c, b, :n].clone()
                for t in torch.randperm(n, generator=g, device=y.device).tolist():
                    e_old = naive_energy(model, kind, context, seq, b)                    # line 6: n passes
                    log_q = naive_proposal(model, context, seq, t, b, cfg.proposal_temperature, cfg.top_p)
                    w_new = int(torch.multinomial(log_q.exp(), 1, generator=g))            # line 8
                    w_old = int(seq[t])
                    prop = seq.clone()
                    prop[t] = w_new
                    e_new = naive_energy(model, kind, context, prop, b)                   # line 10: n passes
                    log_a = naive_log_accept(e_old, e_new, float(log_q[w_new]), float(log_q[w_old]), T)
                    u = float(torch.rand((), generator=g, device=y.device, dtype=torch.float64))
                    proposals += 1
                    passes += 1 + 2 * n
                    if free or u < math.exp(log_a):                                       # line 12
                        seq = prop
                        accepted += 1
                y[c, b, :n] = seq
    return NaiveResult(y=y, accepted=accepted, proposals=proposals, forward_passes=passes)


# -- the same law ------------------------------------------------------------------------------------
@torch.no_grad()
def acceptance_gap(energy: MLMEnergy, batch: Any, y: Tensor, positions: Tensor, tokens: Tensor,
                   cfg: MHMLMConfig = MHMLMConfig(), mask: Tensor | None = None, sweep: int = 0) -> float:
    """max of |log q_naive - log q_fast| (inf if their supports differ) and |log a_naive - log a_fast|
    over rows: for each row r of
    y long [R, N] (instance r mod B), the single-site proposal of ``tokens[r]`` at position
    ``positions[r]``, scored by the naive pieces and by ``mh_mlm``'s batched pieces. Both log
    acceptances are clipped at -1e30 (a certain rejection compares equal)."""
    mask_b = batch.mask if mask is None else mask
    B, N = mask_b.shape
    R = y.shape[0]
    rows = torch.arange(R, device=y.device) % B
    m = mask_b[rows]
    ctx = energy.context(batch)
    pos = torch.zeros(R, N, dtype=torch.bool, device=y.device)
    pos[torch.arange(R, device=y.device), positions] = True
    y_prop = torch.where(pos, tokens[:, None], y)
    T = temperature_at(cfg, sweep)
    log_q = proposal_log_probs(energy.proposal_logits(ctx, y, m, rows, pos).double(), cfg.proposal_temperature,
                               cfg.top_p)
    fast_a = mh_mlm_log_accept(energy.score(ctx, y, m, rows).double(), energy.score(ctx, y_prop, m, rows).double(),
                               block_log_q(log_q, y_prop, pos), block_log_q(log_q, y, pos), T)
    gap = 0.0
    for r in range(R):
        n, b, t = int(m[r].sum()), int(rows[r]), int(positions[r])
        lq = naive_proposal(energy.model, ctx, y[r, :n], t, b, cfg.proposal_temperature, cfg.top_p)
        la = naive_log_accept(naive_energy(energy.model, energy.kind, ctx, y[r, :n], b),
                              naive_energy(energy.model, energy.kind, ctx, y_prop[r, :n], b),
                              float(lq[int(tokens[r])]), float(lq[int(y[r, t])]), T)
        fin, fast_fin = torch.isfinite(lq), torch.isfinite(log_q[r, t])
        q_gap = float((lq - log_q[r, t])[fin].abs().max()) if torch.equal(fin, fast_fin) else math.inf
        gap = max(gap, q_gap, abs(max(la, -1e30) - max(float(fast_a[r]), -1e30)))
    return gap


# -- timing --------------------------------------------------------------------------------------------
class _Counting:
    """A MaskedLM that counts its ``conditionals`` calls and rows (everything else delegated)."""

    def __init__(self, model: Any):
        self._model = model
        self.calls = 0
        self.rows = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def conditionals(self, tokens: Tensor, mask: Tensor, context: Any, rows: Tensor) -> Tensor:
        self.calls += 1
        self.rows += int(tokens.shape[0])
        return self._model.conditionals(tokens, mask, context, rows)


def compare_mh(energy: MLMEnergy, batch: Any, cfg: MHMLMConfig = MHMLMConfig(), *, n_chains: int = 4,
               sweeps: int = 1, mask: Tensor | None = None, timing: TimingConfig = TimingConfig(),
               device: str = "cpu", law_rows: int = 8, seed: int = 0) -> dict[str, Any]:
    """``mh_mlm`` vs :func:`naive_mh` for ``sweeps`` sweeps of ``n_chains`` chains on ``batch``
    (block size 1; same initial state), under ``torch.no_grad``. ``seed`` is the base of its streams
    (``seed_for(seed, "start")``: the chains' start; ``"law_rows"``: the checked proposals;
    ``"sweeps"``: both sides' sweeps, the same seed for each, every timed call). ``law_rows`` random single-site
    proposals are first scored both ways (:func:`acceptance_gap` must be < 1e-6 relative, else
    ``RuntimeError``). Timed by :func:`components.metrics.timing.compare` under ``timing`` (naive,
    fast, naive, ...; a fast turn runs back to back up to ``timing.min_turn_s``, ``fast_calls``
    times).

    Returns ``naive_s``/``fast_s`` (median seconds for the sweeps), ``mh_ratio`` (median per-round
    naive / fast) with ``_q1``/``_q3``/``_iqr_rel``/``_converged``, ``naive_proposals_per_s``/
    ``fast_proposals_per_s``, ``naive_passes_per_proposal``/``fast_passes_per_proposal``
    (conditionals calls per proposal), ``naive_rows_per_proposal``/``fast_rows_per_proposal``
    (sequences through the network per proposal; one per call for the naive side), ``proposals``
    (per run), ``chains``, ``instances``, ``tokens``, ``mean_length``, ``law_gap`` (max gap in log q and log a, naive vs batched) and
    ``law_tol`` (1e-6 x max(1, max |energy|): the float32 rounding allowed it; a larger gap raises), ``rounds``,
    ``converged``, ``load_avg_start``, ``fast_calls``."""
    if cfg.block_size != 1 or cfg.block_size_final not in (None, 1):
        raise ValueError("compare_mh: the naive Algorithm 4 is single-site; block_size must be 1, "
                         f"got {cfg.block_size}")
    if not (isinstance(sweeps, int) and sweeps >= 1):
        raise ValueError(f"compare_mh: sweeps must be an int >= 1, got {sweeps!r}")
    was_training = getattr(energy, "training", False)
    energy.eval()
    try:
        counting = _Counting(energy.model)
        fast_energy = MLMEnergy(counting, energy.kind, energy.cfg)
        sampler = MHMLM(cfg, seed=seed_for(seed, "start"))
        with torch.no_grad():
            state0 = sampler.init(fast_energy, batch, n_chains, mask=mask)
        m = state0.mask
        B, N = m.shape
        g = torch.Generator().manual_seed(seed_for(seed, "law_rows"))
        R = min(law_rows, n_chains * B)
        y_rows = state0.y.reshape(-1, N)[:R]
        lens = m.repeat(n_chains, 1)[:R].sum(1)
        positions = (torch.rand(R, generator=g, dtype=torch.float64) * lens.cpu()).long().to(m.device)
        allowed_ids = energy.allowed.nonzero()[:, 0]
        tokens = allowed_ids[torch.randint(0, len(allowed_ids), (R,), generator=g).to(allowed_ids.device)]
        gap = acceptance_gap(energy, batch, y_rows, positions, tokens, cfg, mask=m)
        # float32 log-probabilities and energies: their rounding grows with the energies' size
        law_tol = 1e-6 * max(1.0, float(state0.energy.abs().max()))
        if gap > law_tol:
            raise RuntimeError(f"compare_mh: naive and batched MH disagree on acceptance (gap {gap:.3g})")

        sweeps_seed = seed_for(seed, "sweeps")

        def fast() -> None:
            with torch.no_grad():
                st = dataclasses.replace(state0, generator=torch.Generator(device=m.device).manual_seed(sweeps_seed))
                for _ in range(sweeps):
                    st, _ = sampler.step(st)

        def naive() -> NaiveResult:
            return naive_mh(energy, batch, state0.y, cfg, sweeps=sweeps, mask=m, seed=sweeps_seed)

        counting.calls = counting.rows = 0
        fast()
        fast_calls, fast_rows = counting.calls, counting.rows
        ref = naive()
        res = compare({"naive": naive, "fast": fast}, baseline="naive", ours="fast", timing=timing, device=device)
    finally:
        if was_training:
            energy.train()
    lengths = m.sum(1)
    proposals = ref.proposals
    out: dict[str, Any] = {"naive_s": res["sides"]["naive"]["median_s"], "fast_s": res["sides"]["fast"]["median_s"]}
    out.update(ratio_metrics(res, "naive/fast", "mh_ratio"))
    out.update(naive_proposals_per_s=proposals / out["naive_s"], fast_proposals_per_s=proposals / out["fast_s"],
               naive_passes_per_proposal=ref.forward_passes / proposals,
               fast_passes_per_proposal=fast_calls / proposals,
               naive_rows_per_proposal=ref.forward_passes / proposals, fast_rows_per_proposal=fast_rows / proposals,
               proposals=float(proposals), chains=float(n_chains), instances=float(B),
               tokens=float(lengths.sum()), mean_length=float(lengths.double().mean()), law_gap=gap, law_tol=law_tol,
               rounds=float(res["rounds"]), converged=res["converged"], load_avg_start=res["load_avg_start"],
               fast_calls=float(res["sides"]["fast"]["calls"]))
    return out
