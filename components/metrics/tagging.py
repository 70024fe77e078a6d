"""Token accuracy and span F1 with conlleval semantics.

Span extraction follows ``conlleval.pl`` (CoNLL-2000 shared task script): a chunk starts at
``B-``/``S-`` tags, at an ``I-``/``E-`` tag whose type differs from the previous tag's, or at an
``I-``/``E-`` after ``O``/``E-``/``S-``; it ends before ``B-``/``S-``/``O`` or a change of type,
and after ``E-``/``S-``. So BIO and BIOES sequences are scored alike, and an ill-formed ``I-``
opens a chunk instead of being dropped. A predicted chunk is correct when its start, end and
type all equal a gold chunk's. Precision, recall and F1 are micro-averaged over the corpus.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from components.metrics.sentence_stats import f1_score, ratio_score


def _split(tag: str) -> tuple[str, str]:
    if tag == "O" or tag == "*" or "-" not in tag:
        return "O", ""
    p, _, t = tag.partition("-")
    if p not in ("B", "I", "E", "S"):
        return "O", ""
    return p, t


def _end_of_chunk(prev_p: str, prev_t: str, p: str, t: str) -> bool:
    if prev_p in ("E", "S"):
        return True
    if prev_p in ("B", "I"):
        return p in ("B", "S", "O") or t != prev_t
    return False


def _start_of_chunk(prev_p: str, prev_t: str, p: str, t: str) -> bool:
    if p in ("B", "S"):
        return True
    if p in ("I", "E"):
        return prev_p in ("E", "S", "O") or t != prev_t
    return False


def spans(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """Chunks as (start, end exclusive, type)."""
    out = set()
    start, cur_t = None, ""
    prev_p, prev_t = "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        p, t = _split(tag)
        if start is not None and _end_of_chunk(prev_p, prev_t, p, t):
            out.add((start, i, cur_t))
            start = None
        if _start_of_chunk(prev_p, prev_t, p, t):
            start, cur_t = i, t
        prev_p, prev_t = p, t
    return out


def span_f1(gold: Iterable[Sequence[str]], pred: Iterable[Sequence[str]]) -> dict[str, float]:
    n_gold = n_pred = n_correct = 0
    for g, p in zip(gold, pred, strict=True):
        if len(g) != len(p):
            raise ValueError(f"span_f1: a gold sequence has {len(g)} tags but its prediction has {len(p)}")
        gs, ps = spans(g), spans(p)
        n_gold += len(gs)
        n_pred += len(ps)
        n_correct += len(gs & ps)
    precision = n_correct / n_pred if n_pred else 0.0
    recall = n_correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1,
            "n_gold_spans": float(n_gold), "n_pred_spans": float(n_pred)}


def accuracy(gold: Iterable[Sequence[str]], pred: Iterable[Sequence[str]]) -> dict[str, float]:
    n = c = 0
    for g, p in zip(gold, pred, strict=True):
        if len(g) != len(p):
            raise ValueError(f"accuracy: a gold sequence has {len(g)} tags but its prediction has {len(p)}")
        n += len(g)
        c += sum(a == b for a, b in zip(g, p))
    return {"accuracy": 100 * c / n if n else 0.0, "n_tokens": float(n)}


ACCURACY_COLUMNS = ("correct", "tokens")
SPAN_F1_COLUMNS = ("tp", "predicted", "gold")


def sentence_stats(metric: str, gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> np.ndarray:
    """Per-sentence sufficient statistics of ``metric`` ``[n, d]``: ``accuracy`` -> ``[correct,
    tokens]`` (:data:`ACCURACY_COLUMNS`), ``span_f1`` -> ``[tp, predicted, gold]`` spans
    (:data:`SPAN_F1_COLUMNS`). Summed over sentences and scored by :func:`stats_score` they give
    :func:`tagging_scores`'s ``score``; the paired bootstrap resamples their rows
    (``components.metrics.sentence_stats``)."""
    rows = []
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence_stats: sentence {i} has {len(g)} gold tags but {len(p)} predicted")
        if metric == "accuracy":
            rows.append((sum(a == b for a, b in zip(g, p)), len(g)))
        elif metric == "span_f1":
            gs, ps = spans(g), spans(p)
            rows.append((len(gs & ps), len(ps), len(gs)))
        else:
            raise ValueError(f"unknown tagging metric {metric!r}: expected 'accuracy' or 'span_f1'")
    width = len(ACCURACY_COLUMNS) if metric == "accuracy" else len(SPAN_F1_COLUMNS)
    return np.asarray(rows, dtype=np.float64).reshape(-1, width)


def stats_columns(metric: str) -> tuple[str, ...]:
    """The columns of :func:`sentence_stats` for ``metric``."""
    if metric not in ("accuracy", "span_f1"):
        raise ValueError(f"unknown tagging metric {metric!r}: expected 'accuracy' or 'span_f1'")
    return ACCURACY_COLUMNS if metric == "accuracy" else SPAN_F1_COLUMNS


def stats_score(metric: str):
    """The score (percent) of summed :func:`sentence_stats`: accuracy or span F1 (vectorised)."""
    stats_columns(metric)
    return ratio_score() if metric == "accuracy" else f1_score()


def tagging_scores(metric: str, gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """``metric`` is ``accuracy`` or ``span_f1``; the headline number is under ``score``."""
    if metric == "accuracy":
        out = accuracy(gold, pred)
        out["score"] = out["accuracy"]
    elif metric == "span_f1":
        out = span_f1(gold, pred)
        out.update({"score": out["f1"], "accuracy": accuracy(gold, pred)["accuracy"]})
    else:
        raise ValueError(f"unknown tagging metric {metric!r}: expected 'accuracy' or 'span_f1'")
    return out
