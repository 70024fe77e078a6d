"""``prepare`` stage: raw corpora -> splits, vocabularies and GloVe rows as Parquet.

For every tagging task in ``prepare.tasks`` (default corpora and any user corpus named there):
read with the task's reader (``READERS`` in :mod:`components.data.readers`; the task config and
its reader options are in :mod:`components.data.prepare`, validated for every task first), split (seeded random 80/10/10, Greek NT by book, or the user's own
train/dev/test files; the random split's seed is ``seed_for(base.seed, "prepare", <task>, "split")``),
optionally convert BIO -> BIOES, build word/char/label vocabularies
(optionally top-K labels, the rest mapped to ``*``), match GloVe 50d rows, and write
``data/prepared/<task>/{train,dev,test,vocab,glove}.parquet`` plus ``meta.json``.
A task may keep per-token input columns (``features: [pos]``; for the ``conll`` format name their
0-based columns in ``feature_columns: {pos: 1}``, as for CoNLL-2000 ``word POS chunk``): its
splits then get ``feat:<name>`` columns, its vocabulary file ``feat:<name>`` vocabularies (from
train, with ``<pad>``/``<unk>``), and ``meta.json`` a ``features`` list. Without features the
files are exactly as before. A sentence without a requested feature is an error naming the task
and the sentence.
The non-tagging corpora (OCR letters, snakes, CMU dict, Greek->English verse pairs) are written
as Parquet too, with their official splits/folds where they exist.

Every raw file is checked against its SHA-256 in ``components/data/checksums.json`` before it is
read (:class:`~components.data.prepare.RawFiles`, each file hashed once per run): a changed file
stops the stage with an error naming it and both sums. Files without a recorded sum (user
corpora) are read unchecked; the stage logs them as a warning and counts them in the metric
``unverified_files`` (present only when there are any).

Input checks, before anything is written: task names are plain names and ``base.prepared_dir``
lies inside the repository (:func:`components.config.check_contained`); a sentence longer than
``prepare.max_sentence_tokens`` (512) is an error at its ``file:line``. A dev or test split whose
unknown-word rate (the share of its words the vocabulary built from train does not know) exceeds
``prepare.max_unknown_rate`` (0.5) is logged as a warning and counted: per task
``unknown_rate_warnings`` (0, 1 or 2 splits), and over all tasks the top-level metric of that name
(present only when there are any).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from components.config import check_contained, load_section
from components.data import readers, splits, store
from components.data.fetch import load_checksums
from components.data.glove import load_glove, match_glove
from components.data.prepare import (PrepareConfig, RawFiles, TaggingTaskConfig, check_features, check_prepare_config,
                                     read_task)
from components.data.vocab import build_label_vocab, build_vocab, write_vocabs
from components.io import write_json
from components.seeds import seed_for
from flows import progress
from flows.stages.common import StageContext, main

log = logging.getLogger(__name__)


def prepare_task(task: str, cfg: TaggingTaskConfig, pcfg: PrepareConfig, ctx: StageContext,
                 glove: tuple[dict[str, int], np.ndarray] | None, raw: RawFiles) -> dict[str, Any]:
    features = tuple(cfg.features)
    parts = read_task(task, cfg, pcfg, lambda p: raw.check(ctx.path(p)),
                      seed_for(ctx.base.seed, "prepare", task, "split"))
    check_features(task, features, parts)
    out_dir = ctx.path(ctx.base.prepared_dir) / task
    metrics: dict[str, Any] = {}
    for k, sents in parts.items():
        store.write_tagged(out_dir / f"{k}.parquet", sents, features)
        metrics[f"{k}_sentences"] = len(sents)
        metrics[f"{k}_tokens"] = sum(len(s.words) for s in sents)
    train, held = parts["train"], parts["dev"] + parts["test"]
    words = build_vocab((w.lower() for s in train for w in s.words), min_count=pcfg.min_word_count)
    if glove is not None:
        # Embeddings are fixed GloVe rows, so a dev/test word that has a GloVe vector is useful
        # without leaking labels: add those words to the vocabulary (a standard practice).
        extra = sorted({w.lower() for s in held for w in s.words} - set(words.tokens))
        extra = [w for w in extra if w in glove[0]]
        words = dataclasses.replace(words, tokens=words.tokens + tuple(extra), counts=words.counts + (0,) * len(extra))
    chars = build_vocab(c for s in train for w in s.words for c in w)
    labels = build_label_vocab(train, held, top_k=cfg.top_k_labels)
    feat_vocabs = {store.FEAT_PREFIX + f: build_vocab(v for s in train for v in s.feats[f]) for f in features}
    write_vocabs(out_dir / "vocab.parquet", {"word": words, "char": chars, "label": labels, **feat_vocabs})
    label_set = set(labels.tokens)
    for k, sents in parts.items():
        metrics[f"{k}_tags_mapped_to_other"] = sum(t not in label_set for s in sents for t in s.tags)
    known = set(words.tokens)
    for k in ("dev", "test"):            # the share of held-out tokens the word vocabulary does not know
        metrics[f"{k}_unknown_word_rate"] = (sum(w.lower() not in known for s in parts[k] for w in s.words)
                                             / max(metrics[f"{k}_tokens"], 1))
    high = [k for k in ("dev", "test") if metrics[f"{k}_unknown_word_rate"] > pcfg.max_unknown_rate]
    for k in high:
        log.warning("prepare %s: %.1f%% of the %s split's words are unknown to the vocabulary built from train, "
                    "above prepare.max_unknown_rate (%.0f%%): a wrong word column, another language or another "
                    "corpus in the %s files?", task, 100 * metrics[f"{k}_unknown_word_rate"], k,
                    100 * pcfg.max_unknown_rate, k)
    metrics["unknown_rate_warnings"] = len(high)
    metrics.update(n_words=len(words), n_chars=len(chars), n_labels=len(labels))
    for f in features:
        metrics[f"n_feat_{f}"] = len(feat_vocabs[store.FEAT_PREFIX + f])
    if glove is not None:
        ids, toks, vecs = match_glove(words, *glove)
        store.write_embeddings(out_dir / "glove.parquet", ids, toks, vecs)
        metrics["glove_coverage"] = len(ids) / max(len(words) - len(words.specials), 1)
    extra = {"features": list(features)} if features else {}   # no key at all without features
    if cfg.top_k_labels > 0:                                     # nor without a top-K cut
        extra["top_k_labels"] = cfg.top_k_labels
    write_json(out_dir / "meta.json", {"task": task, "format": cfg.format, "metric": cfg.metric,
                                       "scheme": cfg.scheme, "split": cfg.split, **extra, **metrics})
    return metrics


def prepare_ocr(ctx: StageContext, raw: RawFiles) -> dict[str, Any]:
    words = readers.read_ocr_letters(raw.file("ocr_letters/letters.pickle"))
    n = store.write_table(ctx.path(ctx.base.prepared_dir) / "ocr_letters" / "letters.parquet", {
        "word_id": [w.word_id for w in words], "fold": [w.fold for w in words],
        "labels": [w.labels.astype(np.int8).tolist() for w in words],
        "pixels": [w.images.astype(np.uint8).reshape(-1).tolist() for w in words]}, store.OCR)
    return {"words": n, "letters": int(sum(len(w.labels) for w in words)),
            "folds": len({w.fold for w in words})}


def prepare_snakes(ctx: StageContext, raw: RawFiles) -> dict[str, Any]:
    data = readers.read_snakes(raw.file("snakes/snakes.pickle"))
    out = {}
    for part, examples in data.items():
        xs = [np.asarray(e.x) for e in examples]
        out[f"{part}_grids"] = store.write_table(ctx.path(ctx.base.prepared_dir) / "snakes" / f"{part}.parquet", {
            "index": list(range(len(xs))), "height": [x.shape[0] for x in xs], "width": [x.shape[1] for x in xs],
            "channels": [x.shape[2] for x in xs], "x": [x.astype(np.uint8).reshape(-1).tolist() for x in xs],
            "y": [np.asarray(e.y).astype(np.int8).reshape(-1).tolist() for e in examples]}, store.GRID)
    return out


def prepare_cmudict(pcfg: PrepareConfig, ctx: StageContext, raw: RawFiles) -> dict[str, Any]:
    entries = readers.read_cmudict(raw.file("cmudict/cmudict.dict"))
    # split by word, so that the variants of one word stay in one split
    by_word: dict[str, list] = {}
    for e in entries:
        by_word.setdefault(e.word, []).append(e)
    parts = splits.random_split(sorted(by_word), pcfg.fractions,
                                seed_for(ctx.base.seed, "prepare", "cmudict", "split"))
    out = {}
    for k, ws in parts.items():
        rows = [e for w in ws for e in by_word[w]]
        out[f"{k}_entries"] = store.write_table(ctx.path(ctx.base.prepared_dir) / "cmudict" / f"{k}.parquet", {
            "word": [e.word for e in rows], "variant": [e.variant for e in rows],
            "phonemes": [list(e.phonemes) for e in rows]}, store.PRONUNCIATION)
    return out


def prepare_parallel(pcfg: PrepareConfig, ctx: StageContext, raw: RawFiles) -> dict[str, Any]:
    pairs = readers.read_parallel(raw.file("sblgnt/SBLGNT.tsv"), raw.file("bsb/nt_BSB.tsv"))
    parts = splits.book_split(pairs, lambda p: p.verse_id, pcfg.dev_books, pcfg.test_books)
    out = {}
    for k, ps in parts.items():
        out[f"{k}_pairs"] = store.write_table(ctx.path(ctx.base.prepared_dir) / "greek_english" / f"{k}.parquet", {
            "verse_id": [p.verse_id for p in ps], "source": [list(p.source) for p in ps],
            "target": [list(p.target) for p in ps]}, store.PARALLEL)
    return out


def run(params: dict[str, Any], ctx: StageContext, *, checksums: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The stage; ``checksums`` (``{"<corpus>/<name>": sha256}``) defaults to the recorded
    ``components/data/checksums.json``."""
    pcfg = load_section(PrepareConfig, "prepare", params)
    # task names plain, every folder written inside the repository (run_stage checks all params; this
    # stage checks its own when called directly), before any file is read or written
    check_contained({"base": dataclasses.asdict(ctx.base), "prepare": params.get("prepare") or {}}, ctx.root)
    check_prepare_config(pcfg)           # every task, before any file is read
    raw = RawFiles(ctx.path(ctx.base.raw_dir), load_checksums() if checksums is None else checksums)
    glove = None
    if pcfg.glove:
        glove = load_glove(raw.file("glove50/glove_6B_50d_emb.npy"), raw.file("glove50/glove_6B_index.parquet"))
    metrics: dict[str, Any] = {}
    for task, tcfg in pcfg.tasks.items():
        m = metrics[task] = prepare_task(task, tcfg, pcfg, ctx, glove, raw)
        progress.line(f"prepare {task} ({tcfg.format}): " + ", ".join(
            f"{k} {m[f'{k}_sentences']:,} sentences / {m[f'{k}_tokens']:,} tokens" for k in ("train", "dev", "test"))
            + f"; {m['n_labels']} labels, {m['n_words']:,} words; unknown words: dev "
            f"{m['dev_unknown_word_rate']:.1%}, test {m['test_unknown_word_rate']:.1%}")
    if pcfg.ocr_letters:
        metrics["ocr_letters"] = prepare_ocr(ctx, raw)
    if pcfg.snakes:
        metrics["snakes"] = prepare_snakes(ctx, raw)
    if pcfg.cmudict:
        metrics["cmudict"] = prepare_cmudict(pcfg, ctx, raw)
    if pcfg.parallel:
        metrics["greek_english"] = prepare_parallel(pcfg, ctx, raw)
    if warned := sum(m["unknown_rate_warnings"] for m in map(metrics.get, pcfg.tasks)):
        metrics["unknown_rate_warnings"] = warned     # splits over prepare.max_unknown_rate, all tasks together
    if raw.unverified:
        log.warning("prepare: %d file(s) read without a recorded SHA-256, so not verified: %s",
                    len(raw.unverified), ", ".join(map(str, raw.unverified)))
        metrics["unverified_files"] = len(raw.unverified)
    return metrics


if __name__ == "__main__":
    main("prepare")
