"""Parquet store (pyarrow, explicit schemas, zstd) for prepared corpora and vocabularies.

Each table kind has one schema here; :func:`write_table` checks the records against it and
writes atomically; :func:`read_table` checks the file's schema on the way back in, so a stale or
foreign file fails with a message naming it rather than somewhere deep in training.

Tagged sentences (:data:`TAGGED`: ``sid``, ``words``, ``tags``) may carry named per-token feature
columns (a POS column as an input to chunking, say). A file written without features has exactly
the :data:`TAGGED` schema; one written with features ``(f1, f2, ...)`` has that schema plus one
``list<string>`` column ``feat:<name>`` per feature, in the order given (:func:`tagged_schema`).
:func:`read_tagged` finds the feature columns in the file's schema (or checks them against the
names it is given) and returns them in ``TaggedSentence.feats``.
"""
from __future__ import annotations

import re
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

#: Prefix of the per-token feature columns of a tagged file (and of the feature vocabularies).
FEAT_PREFIX = "feat:"
_FEATURE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def check_feature_names(features: Sequence[str], where: str = "features") -> tuple[str, ...]:
    """``features`` as a tuple after checking each is a plain name (letters, digits, ``_.-``) given once."""
    features = tuple(features)
    for f in features:
        if not isinstance(f, str) or not _FEATURE_NAME.fullmatch(f):
            raise ValueError(f"{where}: feature name {f!r}; expected letters, digits, '_', '.' or '-'")
    if len(set(features)) != len(features):
        raise ValueError(f"{where}: feature names {list(features)} repeat a name")
    return features


def tagged_schema(features: Sequence[str] = ()) -> pa.Schema:
    """:data:`TAGGED` itself without features, else TAGGED plus ``feat:<name>`` list<string> columns."""
    features = check_feature_names(features)
    if not features:
        return TAGGED
    return pa.schema(list(TAGGED) + [pa.field(FEAT_PREFIX + f, pa.list_(pa.string()), nullable=False)
                                     for f in features])


VOCAB = pa.schema([
    pa.field("kind", pa.string(), nullable=False),   # word | char | label | feat:<name>
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


def write_tagged(path: str | Path, sentences: Iterable[TaggedSentence], features: Sequence[str] = ()) -> int:
    """Write sentences with the feature columns ``features`` (each sentence must carry them in
    ``feats``; other entries of ``feats`` are not written). Without features the file has
    exactly the :data:`TAGGED` schema."""
    sentences = list(sentences)
    schema = tagged_schema(features)
    columns: dict[str, list] = {"sid": [s.sid for s in sentences],
                                "words": [list(s.words) for s in sentences],
                                "tags": [list(s.tags) for s in sentences]}
    for f in features:
        col = []
        for s in sentences:
            if f not in s.feats:
                raise ValueError(f"{path}: sentence {s.sid!r} has no feature {f!r} "
                                 f"(its features: {sorted(s.feats) or 'none'})")
            col.append(list(s.feats[f]))
        columns[FEAT_PREFIX + f] = col
    return write_table(path, columns, schema)


def tagged_features(path: str | Path) -> tuple[str, ...]:
    """The feature names of a tagged Parquet file (its ``feat:<name>`` columns, in file order)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: Parquet file not found (run `dvc repro prepare`?)")
    return tuple(n[len(FEAT_PREFIX):] for n in pq.read_schema(path).names if n.startswith(FEAT_PREFIX))


def read_tagged(path: str | Path, features: Sequence[str] | None = None) -> list[TaggedSentence]:
    """Sentences of a tagged file. ``features=None`` reads whatever feature columns it holds;
    a sequence of names requires exactly those columns, in that order (an error names the file)."""
    found = tagged_features(path)
    if features is not None and tuple(features) != found:
        raise ValueError(f"{path}: feature columns {list(found)}; expected {list(features)} "
                         f"(re-run `dvc repro prepare` after changing prepare.tasks.<task>.features?)")
    t = read_table(path, tagged_schema(found)).to_pydict()
    cols = [t[FEAT_PREFIX + f] for f in found]
    return [TaggedSentence(tuple(w), tuple(g), s, {f: tuple(c[i]) for f, c in zip(found, cols)})
            for i, (s, w, g) in enumerate(zip(t["sid"], t["words"], t["tags"]))]


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
