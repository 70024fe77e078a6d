"""OCR letters (Taskar et al. 2003) as word batches for chain models (Shevchenko & Osokin, Sec. 6.1).

Reads ``data/prepared/ocr_letters/letters.parquet`` (schema ``store.OCR``: 16x8 binary images per
letter, labels 0..25, folds 0..9) into :class:`OcrWords`, selects folds, and batches words into
:class:`OcrBatch`: images float [B, N, 1, 32, 32] (each 16x8 letter zero-padded to 32x32, centred,
as the paper's LeNet input), tags long [B, N], mask bool [B, N] (left-aligned), lengths [B].

Protocol of the paper: fold 0 selects hyperparameters only; the other nine folds are a 9-fold
cross-validation (train on eight, test on one) — :func:`cv_split`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from components.data import store
from components.data.sampling import subsample_indices

N_LETTERS = 26
PAD = 32


@dataclass
class OcrBatch:
    images: torch.Tensor   # float [B, N, 1, 32, 32]
    tags: torch.Tensor     # long [B, N] (0 where masked)
    mask: torch.Tensor     # bool [B, N]
    lengths: torch.Tensor  # long [B]
    index: torch.Tensor    # long [B] rows in the OcrWords they came from

    def to(self, device) -> "OcrBatch":
        return OcrBatch(*(getattr(self, f).to(device) for f in ("images", "tags", "mask", "lengths", "index")))

    def __len__(self) -> int:
        return int(self.tags.shape[0])


@dataclass
class OcrWords:
    """Words of the corpus: ``images[i]`` uint8 [n_i, 16, 8], ``labels[i]`` int64 [n_i], ``folds`` [W]."""
    images: list[np.ndarray]
    labels: list[np.ndarray]
    folds: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows: Sequence[int]) -> "OcrWords":
        rows = list(rows)
        return OcrWords([self.images[i] for i in rows], [self.labels[i] for i in rows], self.folds[rows])

    @property
    def n_letters(self) -> int:
        return int(sum(len(y) for y in self.labels))

    def batch(self, rows: Sequence[int]) -> OcrBatch:
        rows = list(rows)
        n = max(len(self.labels[i]) for i in rows)
        images = torch.zeros(len(rows), n, 1, PAD, PAD)
        tags = torch.zeros(len(rows), n, dtype=torch.long)
        mask = torch.zeros(len(rows), n, dtype=torch.bool)
        top, left = (PAD - 16) // 2, (PAD - 8) // 2
        for b, i in enumerate(rows):
            k = len(self.labels[i])
            images[b, :k, 0, top:top + 16, left:left + 8] = torch.from_numpy(self.images[i].astype(np.float32))
            tags[b, :k] = torch.from_numpy(self.labels[i])
            mask[b, :k] = True
        return OcrBatch(images, tags, mask, mask.sum(1), torch.tensor(rows, dtype=torch.long))

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0) -> Iterator[OcrBatch]:
        order = np.arange(len(self))
        if shuffle:
            np.random.default_rng(seed).shuffle(order)
        for s in range(0, len(order), batch_size):
            yield self.batch(order[s:s + batch_size])


def read_ocr_words(path: str | Path) -> OcrWords:
    """Load the prepared Parquet; a word whose pixel count is not 128 per letter is an error."""
    t = store.read_table(path, store.OCR).to_pydict()
    images, labels = [], []
    for wid, y, px in zip(t["word_id"], t["labels"], t["pixels"]):
        y = np.asarray(y, dtype=np.int64)
        px = np.asarray(px, dtype=np.uint8)
        if len(y) == 0 or px.size != len(y) * 128:
            raise ValueError(f"{path}: word {wid} has {len(y)} labels but {px.size} pixels; expected 128 per letter")
        if y.min() < 0 or y.max() >= N_LETTERS:
            raise ValueError(f"{path}: word {wid} has labels outside 0..25")
        images.append(px.reshape(len(y), 16, 8))
        labels.append(y)
    return OcrWords(images, labels, np.asarray(t["fold"], dtype=np.int64))


def cv_split(words: OcrWords, test_fold: int, *, select_fold: int = 0) -> tuple[OcrWords, OcrWords]:
    """(train, test) of one cross-validation round: test = ``test_fold``, train = the folds other
    than it and ``select_fold`` (held out for hyperparameter selection). ``test_fold ==
    select_fold`` gives the selection round: train on folds 1..9, evaluate on fold 0."""
    folds = sorted(set(words.folds.tolist()))
    if test_fold not in folds:
        raise ValueError(f"test fold {test_fold} is not among the corpus folds {folds}")
    test = np.flatnonzero(words.folds == test_fold)
    train = np.flatnonzero((words.folds != test_fold) & (words.folds != select_fold))
    return words.subset(train), words.subset(test)


def subsample(words: OcrWords, n: int, seed: int) -> OcrWords:
    """A seeded subsample of ``n`` words (``n`` <= 0 or >= len: all, in order)."""
    if n <= 0 or n >= len(words):
        return words
    return words.subset(subsample_indices(len(words), n, seed))
