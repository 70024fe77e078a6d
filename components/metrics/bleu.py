"""Corpus BLEU (Papineni et al., 2002) via sacrebleu, with the breakdowns of Goyal, Dyer &
Berg-Kirkpatrick (2019): n-gram precisions and brevity penalty (Table 5), BLEU by source length
(Table 6).

Inputs are detokenised strings, one hypothesis and one reference per segment (the references of
:class:`components.data.translation.ParallelDataset` and hypotheses from
:meth:`SubwordVocab.decode` are in that form). sacrebleu applies its 13a tokenisation (the WMT
``mteval-v13a`` rules: ASCII punctuation split off, case kept) and exponential smoothing (which
only matters when some n-gram order has no match):

    BLEU = BP * exp(sum_{n=1..4} log(p_n) / 4),  p_n = clipped n-gram matches / hypothesis n-grams
    BP = 1 if c > r else exp(1 - r / c)           (c, r = hypothesis / reference length in tokens)

Note that 13a does not split non-ASCII punctuation: a curly quote stays attached to its word
(``“Hello``), on both sides alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

DEFAULT_EDGES = (20, 30, 40)


@dataclass(frozen=True)
class BleuResult:
    score: float                    # BLEU in percent (0-100)
    precisions: tuple[float, ...]   # 1- to 4-gram precisions, percent
    bp: float                       # brevity penalty
    sys_len: int                    # hypothesis length in 13a tokens
    ref_len: int                    # reference length in 13a tokens
    ratio: float                    # sys_len / ref_len
    signature: str                  # sacrebleu's signature (nrefs, case, tokeniser, smoothing, version)

    def as_dict(self, prefix: str = "bleu") -> dict[str, float]:
        """Flat metrics: ``bleu``, ``bleu_p1``..``bleu_p4``, ``bleu_bp``, ``bleu_sys_len``,
        ``bleu_ref_len``, ``bleu_ratio`` (the signature is a string: log it as a tag)."""
        d = {prefix: self.score}
        d.update({f"{prefix}_p{n}": p for n, p in enumerate(self.precisions, 1)})
        d.update({f"{prefix}_bp": self.bp, f"{prefix}_sys_len": float(self.sys_len),
                  f"{prefix}_ref_len": float(self.ref_len), f"{prefix}_ratio": self.ratio})
        return d


def _check(hypotheses: Sequence[str], references: Sequence[str], where: str) -> tuple[list[str], list[str]]:
    for name, xs in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(xs, str):
            raise TypeError(f"{where}: {name} must be a sequence of strings, got one string")
    hyps, refs = list(hypotheses), list(references)
    if len(hyps) != len(refs):
        raise ValueError(f"{where}: {len(hyps)} hypotheses for {len(refs)} references")
    if not hyps:
        raise ValueError(f"{where}: no segments (empty hypotheses and references)")
    for name, xs in (("hypothesis", hyps), ("reference", refs)):
        for i, x in enumerate(xs):
            if not isinstance(x, str):
                raise TypeError(f"{where}: {name} {i} is a {type(x).__name__}, expected a detokenised string "
                                "(join tokens with components.data.translation.detokenize)")
    return hyps, refs


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a") -> BleuResult:
    """Corpus BLEU of ``hypotheses[i]`` against the single reference ``references[i]``.

    An empty hypothesis string is allowed (it contributes length 0); references that are all
    empty are an error (the ratio and the brevity penalty are undefined)."""
    hyps, refs = _check(hypotheses, references, "corpus_bleu")
    metric = BLEU(tokenize=tokenize)
    r = metric.corpus_score(hyps, [refs])
    if r.ref_len == 0:
        raise ValueError(f"corpus_bleu: the {len(refs)} references are all empty after {tokenize} tokenisation")
    return BleuResult(score=float(r.score), precisions=tuple(float(p) for p in r.precisions), bp=float(r.bp),
                      sys_len=int(r.sys_len), ref_len=int(r.ref_len), ratio=r.sys_len / r.ref_len,
                      signature=str(metric.get_signature()))


def sentence_stats(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a") -> np.ndarray:
    """Per-sentence BLEU sufficient statistics ``[n, 10]`` in sacrebleu's layout (``sys_len,
    ref_len, correct_1..4, total_1..4``; ``components.metrics.sentence_stats.BLEU_COLUMNS``): their
    sum scored by ``significance.bleu_score()`` is :func:`corpus_bleu`'s score, and resampling their
    rows is Koehn's paired bootstrap."""
    hyps, refs = _check(hypotheses, references, "sentence_stats")
    metric = BLEU(tokenize=tokenize)
    return np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)


def bucket_labels(edges: Sequence[int] = DEFAULT_EDGES) -> list[str]:
    """``(20, 30, 40)`` -> ``["0-20", "20-30", "30-40", "40+"]``."""
    edges = list(edges)
    if not edges or any(not isinstance(e, int) or isinstance(e, bool) for e in edges) or edges[0] <= 0 \
            or any(a >= b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be strictly increasing positive ints, got {edges}")
    lows = [0] + edges
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges)] + [f"{edges[-1]}+"]


def bucket_of(length: int, edges: Sequence[int] = DEFAULT_EDGES) -> int:
    """Index of the bucket of a source of ``length`` words: buckets are half-open, lower end
    inclusive: ``[0, 20)``, ``[20, 30)``, ``[30, 40)``, ``[40, inf)`` (a 20-word source is in "20-30")."""
    return sum(1 for e in edges if length >= e)


def bleu_by_source_length(hypotheses: Sequence[str], references: Sequence[str], source_lengths: Sequence[int],
                          edges: Sequence[int] = DEFAULT_EDGES) -> dict[str, dict]:
    """Table 6: corpus BLEU of the segments in each source-length bucket (source length in words;
    buckets ``[0, e1)``, ``[e1, e2)``, ..., ``[e_k, inf)``, labelled "0-20", ..., "40+").

    -> ``{label: {"bleu": float | None, "n": int}}`` in bucket order; an empty bucket has
    ``{"bleu": None, "n": 0}``."""
    hyps, refs = _check(hypotheses, references, "bleu_by_source_length")
    lengths = [int(x) for x in source_lengths]
    if len(lengths) != len(hyps):
        raise ValueError(f"bleu_by_source_length: {len(lengths)} source lengths for {len(hyps)} segments")
    if any(x < 0 for x in lengths):
        raise ValueError(f"bleu_by_source_length: negative source length {min(lengths)}")
    labels = bucket_labels(edges)
    members: list[list[int]] = [[] for _ in labels]
    for i, n in enumerate(lengths):
        members[bucket_of(n, edges)].append(i)
    out: dict[str, dict] = {}
    for label, idx in zip(labels, members):
        out[label] = ({"bleu": corpus_bleu([hyps[i] for i in idx], [refs[i] for i in idx]).score, "n": len(idx)}
                      if idx else {"bleu": None, "n": 0})
    return out


def length_stats(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a") -> dict[str, float]:
    """Mean hypothesis and reference length in ``tokenize`` (13a) tokens and their ratio
    (total hypothesis tokens / total reference tokens, = :attr:`BleuResult.ratio`)."""
    hyps, refs = _check(hypotheses, references, "length_stats")
    tok = BLEU(tokenize=tokenize).tokenizer
    h = sum(len(tok(x).split()) for x in hyps)
    r = sum(len(tok(x).split()) for x in refs)
    if r == 0:
        raise ValueError(f"length_stats: the {len(refs)} references are all empty after {tokenize} tokenisation")
    return {"hyp_len_mean": h / len(hyps), "ref_len_mean": r / len(refs), "len_ratio": h / r}
