"""A prepared tagging task, loaded back from ``data/prepared/<task>/`` (written by ``prepare``).

A task prepared with per-token features (``prepare.tasks.<task>.features``) lists them in
``meta.json`` under ``features``; its splits carry ``feat:<name>`` columns and its vocabulary
file ``feat:<name>`` vocabularies, and its datasets fill ``TaggingBatch.feats`` ``[B, N, F]``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from components.data.sampling import subsample_indices
from components.data.batching import TaggingDataset
from components.data.store import read_embeddings, read_tagged
from components.data.vocab import Vocab, read_vocabs


@dataclass
class TaggingTask:
    name: str
    meta: dict[str, Any]
    vocabs: dict[str, Vocab]
    train: TaggingDataset
    dev: TaggingDataset
    test: TaggingDataset
    glove_ids: np.ndarray | None
    glove_vectors: np.ndarray | None

    @property
    def metric(self) -> str:
        return self.meta["metric"]

    @property
    def sizes(self) -> dict[str, int]:
        """Vocabulary sizes a model is built with: ``n_words``, ``n_chars``, ``n_labels``."""
        return {"n_words": len(self.vocabs["word"]), "n_chars": len(self.vocabs["char"]),
                "n_labels": len(self.vocabs["label"])}

    @property
    def features(self) -> tuple[str, ...]:
        """Names of the per-token feature columns, in the order of ``TaggingBatch.feats``."""
        return tuple(self.meta.get("features", ()))

    @property
    def feat_sizes(self) -> list[int]:
        """Vocabulary size of each feature column (for the feature embeddings of a model)."""
        return list(self.train.feat_sizes)


def load_tagging_task(folder: str | Path, *, max_train_sentences: int = 0, seed: int = 0) -> TaggingTask:
    """Load splits and vocabularies; ``max_train_sentences`` > 0 keeps a seeded subsample of train."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: not a prepared task folder (run `dvc repro prepare`)")
    meta = json.loads(meta_path.read_text())
    vocabs = read_vocabs(folder / "vocab.parquet")
    features = tuple(meta.get("features", ()))
    train = read_tagged(folder / "train.parquet", features)
    if 0 < max_train_sentences < len(train):
        train = [train[i] for i in subsample_indices(len(train), max_train_sentences, seed)]
    ids = vecs = None
    if (folder / "glove.parquet").exists():
        ids, vecs = read_embeddings(folder / "glove.parquet")
    return TaggingTask(folder.name, meta, vocabs, TaggingDataset(train, vocabs, features=features),
                       TaggingDataset(read_tagged(folder / "dev.parquet", features), vocabs, features=features),
                       TaggingDataset(read_tagged(folder / "test.parquet", features), vocabs, features=features),
                       ids, vecs)
