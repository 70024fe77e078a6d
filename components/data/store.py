"""Parquet store (pyarrow, explicit schemas, zstd) for prepared corpora and vocabularies.

Each table kind has one schema here; :func:`write_table` checks the records against it and
writes atomically; :func:`read_table` checks the file's schema on the way back in, so a stale or
foreign file fails with a message naming it rather than somewhere deep in training.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from components.data.types import TaggedSentence
from components.io import atomic_path

TAGGED = pa.schema([
    pa.field("sid", pa.string(), nullable=False),
    pa.field("words", pa.list_(pa.string()), nullable=False),
    pa.field("tags", pa.list_(pa.string()), nullable=False),
])

VOCAB = pa.schema([
    pa.field("kind", pa.string(), nullable=False),   # word | char | label
    pa.field("id", pa.int32(), nullable=False),
    pa.field("token", pa.string(), nullable=False),
    pa.field("count", pa.int64(), nullable=False),
])

EMBEDDINGS = pa.schema([
    pa.field("id", pa.int32(), nullable=False),        # row in the word vocabulary
    pa.field("token", pa.string(), nullable=False),
    pa.field("vector", pa.list_(pa.float32(), 50), nullable=False),
])

OCR = pa.schema([
    pa.field("word_id", pa.int32(), nullable=False),
    pa.field("fold", pa.int8(), nullable=False),
    pa.field("labels", pa.list_(pa.int8()), nullable=False),        # [n] in 0..25
    pa.field("pixels", pa.list_(pa.uint8()), nullable=False),       # [n * 16 * 8] row-major
])

GRID = pa.schema([
    pa.field("index", pa.int32(), nullable=False),
    pa.field("height", pa.int32(), nullable=False),
    pa.field("width", pa.int32(), nullable=False),
    pa.field("channels", pa.int32(), nullable=False),
    pa.field("x", pa.list_(pa.uint8()), nullable=False),            # [H * W * C]
    pa.field("y", pa.list_(pa.int8()), nullable=False),             # [H * W]
])

PRONUNCIATION = pa.schema([
    pa.field("word", pa.string(), nullable=False),
    pa.field("variant", pa.int8(), nullable=False),
    pa.field("phonemes", pa.list_(pa.string()), nullable=False),
])

PARALLEL = pa.schema([
    pa.field("verse_id", pa.string(), nullable=False),
    pa.field("source", pa.list_(pa.string()), nullable=False),
    pa.field("target", pa.list_(pa.string()), nullable=False),
])


def write_table(path: str | Path, columns: dict[str, Sequence[Any]], schema: pa.Schema) -> int:
    """Write ``columns`` (name -> values) with ``schema``; returns the row count."""
    names = [f.name for f in schema]
    if sorted(columns) != sorted(names):
        raise ValueError(f"{path}: columns {sorted(columns)} do not match schema columns {sorted(names)}")
    table = pa.table({n: pa.array(columns[n], type=schema.field(n).type) for n in names}, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return table.num_rows


def read_table(path: str | Path, schema: pa.Schema) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: Parquet file not found (run `dvc repro prepare`?)")
    table = pq.read_table(path)
    if not table.schema.equals(schema, check_metadata=False):
        raise ValueError(f"{path}: schema {table.schema} does not match the expected schema {schema}")
    return table


def write_tagged(path: str | Path, sentences: Iterable[TaggedSentence]) -> int:
    sentences = list(sentences)
    return write_table(path, {"sid": [s.sid for s in sentences],
                              "words": [list(s.words) for s in sentences],
                              "tags": [list(s.tags) for s in sentences]}, TAGGED)


def read_tagged(path: str | Path) -> list[TaggedSentence]:
    t = read_table(path, TAGGED).to_pydict()
    return [TaggedSentence(tuple(w), tuple(g), s) for s, w, g in zip(t["sid"], t["words"], t["tags"])]


def write_embeddings(path: str | Path, ids: Sequence[int], tokens: Sequence[str], vectors: np.ndarray) -> int:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != 50 or len(vectors) != len(ids):
        raise ValueError(f"{path}: vectors must be [{len(ids)}, 50], got {list(vectors.shape)}")
    return write_table(path, {"id": list(ids), "token": list(tokens), "vector": list(vectors)}, EMBEDDINGS)


def read_embeddings(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """-> (ids int64 [K], vectors float32 [K, 50])."""
    t = read_table(path, EMBEDDINGS)
    ids = t.column("id").to_numpy().astype(np.int64)
    flat = t.column("vector").combine_chunks().flatten().to_numpy()
    return ids, flat.reshape(len(ids), 50).astype(np.float32)
