"""Many MCMC chains over MLM energies, traced and summarised (thesis ch. 6, Sec. 6.6-6.8).

:func:`run_traced` runs one sampler (any ``SAMPLERS`` entry over an MLM energy, e.g. ``mh_mlm``
or ``gibbs_mlm``) on a batch of sources, ``C`` chains each, for ``burn_in + sweeps`` sweeps, and
records after every sweep (and at the start, sweep 0) each chain's state:

    energy    [S+1, C, B]   the sampler's own energy (E_raw or E_norm; Gibbs: of its energy)
    e_norm    [S+1, C, B]   E_norm of the state (the thesis reports -E_norm for every sampler)
    accepted  [S+1, C, B]   fraction of the sweep's proposals accepted (sweep 0: nan)
    novel     [S+1, C, B]   fraction accepted and different from the current state (sweep 0: nan)
    hamming   [S+1, C, B]   positions differing from the chain's start
    tokens    [S+1, C, B, N] the states (long)

and the target temperature of each sweep (the state's ``temperature``, so any sampler's schedule).

:func:`trace_rows` flattens a trace into one row per (sweep, chain, sentence) with the decoded text
and its sentence BLEU; :func:`summarise_run` turns the rows of one configuration into the report's
figures (means over the sampling sweeps, per-sweep curves, corpus BLEU per chain and sweep, rank
R-hat and bulk ESS of each sentence's energy trace across its chains); :func:`sentence_stats` turns
them into per-chain, per-sentence statistics ``[C, B, d]`` (the paired bootstrap's inputs:
``components.metrics.sentence_stats``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from components.energies.mlm import MLMEnergy
from components.inference.diagnostics import trace_diagnostics
from components.metrics.bleu import corpus_bleu, sentence_stats as bleu_sentence_stats

__all__ = ["ChainBatch", "ChainTrace", "run_traced", "trace_rows", "summarise_run", "sentence_stats", "shard_batch",
           "RATE_COLUMNS"]


@dataclass
class ChainBatch:
    """What a conditional MLM energy reads: ``words`` long [B, S] / ``src_mask`` bool [B, S] (the
    source) and ``mask`` bool [B, N] (the target positions the chains sample)."""
    words: Tensor
    src_mask: Tensor
    mask: Tensor


@dataclass
class ChainTrace:
    energy: Tensor
    e_norm: Tensor
    accepted: Tensor
    novel: Tensor
    hamming: Tensor
    tokens: Tensor
    mask: Tensor                     # bool [B, N]
    temperature: list[float]         # the target temperature used at each sweep (sweep 0: the start)


@torch.no_grad()
def run_traced(sampler: Any, energy: MLMEnergy, norm: MLMEnergy, batch: ChainBatch, *, chains: int, steps: int,
               y0: Tensor | None = None, on_sweep: Callable[[int], None] | None = None) -> ChainTrace:
    """``init`` then ``steps`` sweeps of ``sampler`` on ``energy``; ``norm`` (the same model read as
    E_norm) scores every state. ``y0`` long [B, N] (every chain's start) or None (the config's init)."""
    if steps < 0:
        raise ValueError(f"run_traced: steps must be >= 0, got {steps}")
    state = sampler.init(energy, batch, chains, y0=y0)
    C, B, N = state.y.shape
    mask_rows = state.mask.repeat(C, 1)

    def e_norm_of(y: Tensor, e: Tensor) -> Tensor:
        if energy.kind == "norm" and energy.model is norm.model:
            return e
        return norm.score(state.context, y.reshape(C * B, N), mask_rows, state.rows).view(C, B)

    start = state.y.clone()
    energy_t, norm_t, acc_t, nov_t, ham_t, tok_t = [state.energy.clone()], [e_norm_of(state.y, state.energy)], \
        [torch.full((C, B), math.nan)], [torch.full((C, B), math.nan)], [torch.zeros(C, B)], [state.y.clone()]
    temps = [float(state.temperature)]
    for i in range(steps):
        temps.append(float(state.temperature))          # the target of this sweep (the sampler's schedule)
        state, stats = sampler.step(state)
        energy_t.append(state.energy.clone())
        norm_t.append(e_norm_of(state.y, state.energy))
        acc_t.append(stats["accepted"].float().cpu())
        nov_t.append(stats["novel"].float().cpu())
        ham_t.append(((state.y != start) & state.mask).sum(2).float().cpu())
        tok_t.append(state.y.clone())
        if on_sweep is not None:
            on_sweep(i + 1)
    cpu = lambda xs: torch.stack([x.detach().float().cpu() for x in xs])   # noqa: E731
    return ChainTrace(energy=cpu(energy_t), e_norm=cpu(norm_t), accepted=torch.stack(acc_t), novel=torch.stack(nov_t),
                      hamming=torch.stack(ham_t), tokens=torch.stack([t.cpu() for t in tok_t]),
                      mask=state.mask.cpu(), temperature=temps)


def trace_rows(trace: ChainTrace, *, decode: Callable[[Sequence[int]], str], references: Sequence[str],
               sentence_ids: Sequence[str], sentence_bleu: Callable[[str, str], float]) -> list[dict[str, Any]]:
    """One row per (sweep, chain, sentence): ``sweep, chain, sentence, energy, e_norm, accepted,
    novel, hamming, temperature, text, bleu`` (sentence BLEU of the state against the reference).
    Texts are decoded once per distinct state."""
    S1, C, B = trace.energy.shape
    if len(references) != B or len(sentence_ids) != B:
        raise ValueError(f"trace_rows: {B} sentences in the trace, {len(references)} references, "
                         f"{len(sentence_ids)} ids")
    lengths = trace.mask.sum(1).tolist()
    cache: dict[tuple[int, tuple[int, ...]], tuple[str, float]] = {}
    rows = []
    tok = trace.tokens.tolist()
    for s in range(S1):
        for c in range(C):
            for b in range(B):
                ids = tuple(tok[s][c][b][:lengths[b]])
                key = (b, ids)
                if key not in cache:
                    text = decode(list(ids))
                    cache[key] = (text, sentence_bleu(text, references[b]))
                text, bleu = cache[key]
                rows.append({"sweep": s, "chain": c, "sentence": sentence_ids[b],
                             "energy": float(trace.energy[s, c, b]), "e_norm": float(trace.e_norm[s, c, b]),
                             "accepted": float(trace.accepted[s, c, b]), "novel": float(trace.novel[s, c, b]),
                             "hamming": float(trace.hamming[s, c, b]), "temperature": trace.temperature[s],
                             "text": text, "bleu": bleu})
    return rows


def _nanmean(x: np.ndarray) -> float | None:
    x = np.asarray(x, dtype=float)
    return float(np.nanmean(x)) if np.isfinite(x).any() else None


def summarise_run(rows: Sequence[dict[str, Any]], references: dict[str, str], *, burn_in: int) -> dict[str, Any]:
    """The report's figures of one configuration from its :func:`trace_rows` (all its sentences).

    Means are over the sampling sweeps (``sweep > burn_in``), chains and sentences; ``bleu`` is
    the corpus BLEU of each (chain, sweep) over the sentences, averaged over the sampling sweeps and
    chains (``bleu_best``: the best sweep's chain mean; ``bleu_final``: the last sweep's); curves
    are per-sweep means (sweep 0 = the start). R-hat / ESS: per sentence, of its energy trace over
    the sampling sweeps across chains (arviz rank R-hat, bulk ESS), then median / max / min."""
    if not rows:
        raise ValueError("summarise_run: no rows")
    sweeps = sorted({r["sweep"] for r in rows})
    chains = sorted({r["chain"] for r in rows})
    sents = sorted({r["sentence"] for r in rows})
    missing = [s for s in sents if s not in references]
    if missing:
        raise ValueError(f"summarise_run: no reference for sentences {missing[:5]}")
    si, ci, bi = ({v: i for i, v in enumerate(xs)} for xs in (sweeps, chains, sents))
    shape = (len(sweeps), len(chains), len(sents))
    arr = {k: np.full(shape, np.nan) for k in ("energy", "e_norm", "accepted", "novel", "hamming")}
    text = np.empty(shape, dtype=object)
    for r in rows:
        idx = (si[r["sweep"]], ci[r["chain"]], bi[r["sentence"]])
        for k in arr:
            arr[k][idx] = r[k]
        text[idx] = r["text"]
    refs = [references[s] for s in sents]
    bleu = np.array([[corpus_bleu(list(text[s, c]), refs).score for c in range(len(chains))]
                     for s in range(len(sweeps))])                                       # [S+1, C]
    sampling = np.array([s > burn_in for s in sweeps])
    if not sampling.any():
        raise ValueError(f"summarise_run: no sweep after the burn-in ({burn_in}); sweeps {sweeps[-1]}")
    curve = {k: [_nanmean(arr[k][s]) for s in range(len(sweeps))] for k in ("e_norm", "accepted", "novel", "energy")}
    curve["bleu"] = [float(bleu[s].mean()) for s in range(len(sweeps))]
    curve["accept"] = curve.pop("accepted")
    diag = trace_diagnostics(torch.as_tensor(arr["energy"][sampling].transpose(1, 2, 0)))   # [C, B, S]
    rhat = np.asarray(diag["rhat"], dtype=float)
    ess = np.asarray(diag["ess_bulk"], dtype=float)
    finite = np.isfinite(rhat)
    sample_bleu = bleu[sampling]
    return {
        "e_norm": _nanmean(arr["e_norm"][sampling]), "energy": _nanmean(arr["energy"][sampling]),
        "accept": _nanmean(arr["accepted"][sampling]), "novel": _nanmean(arr["novel"][sampling]),
        "hamming": _nanmean(arr["hamming"][sampling]),
        "bleu": float(sample_bleu.mean()), "bleu_best": float(sample_bleu.mean(1).max()),
        "bleu_final": float(bleu[-1].mean()), "bleu_start": float(bleu[0].mean()),
        "bleu_chain_sd": float(sample_bleu.mean(0).std()) if len(chains) > 1 else 0.0,
        "curve": curve,
        "rhat": {"median": float(np.median(rhat[finite])) if finite.any() else None,
                 "max": float(rhat[finite].max()) if finite.any() else None,
                 "frac_below_1_1": float((rhat[finite] < 1.1).mean()) if finite.any() else None,
                 "constant": int((~finite).sum())},
        "ess_bulk": {"median": float(np.median(ess[np.isfinite(ess)])) if np.isfinite(ess).any() else None,
                     "min": float(ess[np.isfinite(ess)].min()) if np.isfinite(ess).any() else None},
        "chains": len(chains), "sentences": len(sents), "sweeps": len(sweeps) - 1,
    }


#: columns of a per-sentence mean (energy, rate): ``[value, 1]``, scored by ``significance.mean_score``
RATE_COLUMNS = ("value", "count")


def sentence_stats(rows: Sequence[dict[str, Any]], references: dict[str, str], sentence_ids: Sequence[str], *,
                   burn_in: int, final: bool = False) -> dict[str, np.ndarray]:
    """Per-chain, per-sentence statistics of one configuration from its :func:`trace_rows`, the
    sentences in the order of ``sentence_ids`` (each must have rows) and the chains in index order
    (chain ``c`` of two configurations starts from the same draws: the stage's common random numbers):

    - ``bleu`` [C, B, 10]: BLEU sufficient statistics (``components.metrics.bleu.sentence_stats``)
      of the chain's states summed over the sampling sweeps (``sweep > burn_in``), or of its last
      state only (``final``) — each chain's corpus BLEU is ``significance.bleu_score()`` of the sum
      over sentences;
    - ``e_norm``, ``energy``, ``accept``, ``novel`` [C, B, 2]: ``[mean over the sampling sweeps, 1]``
      (:data:`RATE_COLUMNS`; ``accept`` / ``novel``: the sweep's fraction of proposals accepted /
      accepted and new, averaged over sweeps);
    - ``e_norm@early`` / ``e_norm@late`` [C, B, 2]: the same mean over the first / last third of the
      sampling sweeps (at least one sweep each)."""
    if not rows:
        raise ValueError("sentence_stats: no rows")
    sweeps = sorted({r["sweep"] for r in rows})
    chains = sorted({r["chain"] for r in rows})
    bi = {v: i for i, v in enumerate(sentence_ids)}
    unknown = sorted({r["sentence"] for r in rows} - set(bi))
    if unknown:
        raise ValueError(f"sentence_stats: rows of sentences {unknown[:5]} not in sentence_ids")
    missing = [s for s in sentence_ids if s not in references]
    if missing:
        raise ValueError(f"sentence_stats: no reference for sentences {missing[:5]}")
    sampling = [s for s in sweeps if s > burn_in]
    if not sampling:
        raise ValueError(f"sentence_stats: no sweep after the burn-in ({burn_in}); last sweep {sweeps[-1]}")
    si, ci = {v: i for i, v in enumerate(sampling)}, {v: i for i, v in enumerate(chains)}
    shape = (len(sampling), len(chains), len(sentence_ids))
    arr = {k: np.full(shape, np.nan) for k in ("energy", "e_norm", "accepted", "novel")}
    text = np.empty(shape, dtype=object)
    for r in rows:
        if r["sweep"] not in si:
            continue
        idx = (si[r["sweep"]], ci[r["chain"]], bi[r["sentence"]])
        for k in arr:
            arr[k][idx] = r[k]
        text[idx] = r["text"]
    if any(t is None for t in text.flat):
        raise ValueError("sentence_stats: some (sweep, chain, sentence) has no row")
    refs = [references[s] for s in sentence_ids]
    used = [len(sampling) - 1] if final else range(len(sampling))
    bleu = np.zeros((len(chains), len(sentence_ids), 10))
    for s in used:
        for c in range(len(chains)):
            bleu[c] += bleu_sentence_stats(list(text[s, c]), refs)
    k = max(1, len(sampling) // 3)

    def mean(x: np.ndarray) -> np.ndarray:               # [S', C, B] -> [C, B, 2]
        m = x.mean(0)
        return np.stack([m, np.ones_like(m)], axis=-1)

    return {"bleu": bleu, "e_norm": mean(arr["e_norm"]), "energy": mean(arr["energy"]),
            "accept": mean(arr["accepted"]), "novel": mean(arr["novel"]),
            "e_norm@early": mean(arr["e_norm"][:k]), "e_norm@late": mean(arr["e_norm"][-k:])}


def shard_batch(sources: Sequence[Sequence[int]], lengths: Sequence[int], device: str = "cpu") -> ChainBatch:
    """A :class:`ChainBatch` of B sources (padded with 0) and target masks of the given lengths."""
    if not sources or len(sources) != len(lengths):
        raise ValueError(f"shard_batch: {len(sources)} sources and {len(lengths)} lengths")
    for i, (s, n) in enumerate(zip(sources, lengths)):
        if len(s) == 0:
            raise ValueError(f"shard_batch: source {i} is empty")
        if n < 1:
            raise ValueError(f"shard_batch: target length {n} of sentence {i} must be >= 1")
    S, N = max(len(s) for s in sources), max(lengths)
    words = torch.zeros(len(sources), S, dtype=torch.long)
    for i, s in enumerate(sources):
        words[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    ar = torch.arange(S)
    src_mask = ar[None] < torch.as_tensor([len(s) for s in sources])[:, None]
    mask = torch.arange(N)[None] < torch.as_tensor(list(lengths))[:, None]
    return ChainBatch(words.to(device), src_mask.to(device), mask.to(device))
