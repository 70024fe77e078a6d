"""Length-bucketed, padded torch batches with masks for tagging corpora.

A batch holds ``B`` sentences of (padded) length ``N = max length in the batch``; masks are
left-aligned (``mask[b, t]`` is True for ``t < lengths[b]``), the shape every structure in
``components.structures`` expects. Bucketing sorts sentences by length (ties broken by a seeded
shuffle) and cuts consecutive runs into batches, so padding is small; the batch order is then
shuffled. Everything is a pure function of (data, seed, epoch).

Per-token feature columns (``TaggedSentence.feats``, e.g. a POS column as an input to chunking)
are encoded with the vocabularies ``feat:<name>`` (``<pad>`` = 0, ``<unk>`` = 1) into
``TaggingBatch.feats`` long ``[B, N, F]``, one column per feature in the dataset's order; a
dataset without features has ``F = 0``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from components.data.store import FEAT_PREFIX, check_feature_names
from components.data.types import TaggedSentence
from components.data.vocab import Vocab, encode_labels


@dataclass
class TaggingBatch:
    words: torch.Tensor    # long [B, N] word ids (0 = pad)
    chars: torch.Tensor    # long [B, N, C] char ids (0 = pad)
    tags: torch.Tensor     # long [B, N] label ids (0 where masked; read with mask)
    mask: torch.Tensor     # bool [B, N], left-aligned
    lengths: torch.Tensor  # long [B]
    index: torch.Tensor    # long [B] row of each sentence in its dataset
    feats: torch.Tensor = None  # type: ignore[assignment]  # long [B, N, F] feature ids (0 = pad); None -> [B, N, 0]

    def __post_init__(self):
        if self.feats is None:
            self.feats = torch.zeros(*self.words.shape, 0, dtype=torch.long, device=self.words.device)

    def to(self, device: torch.device | str) -> "TaggingBatch":
        return TaggingBatch(*(getattr(self, f).to(device) for f in
                              ("words", "chars", "tags", "mask", "lengths", "index", "feats")))

    def __len__(self) -> int:
        return int(self.words.shape[0])


class TaggingDataset:
    """Sentences encoded with the task's vocabularies (``word``, ``char``, ``label``, and
    ``feat:<name>`` for each feature).

    Words are looked up lower-cased when ``lowercase`` (GloVe 6B is lower-cased); characters keep
    their case. Unknown words/chars/feature values map to ``<unk>``; labels outside the label
    vocabulary map to ``*`` and are counted in ``n_mapped_labels``. ``features`` names the
    feature columns to encode, in order; ``None`` takes every ``feat:<name>`` vocabulary in
    ``vocabs`` (in their order), so a task loaded with features keeps them when it is subsampled.
    A sentence without a requested feature is an error naming it.
    """

    def __init__(self, sentences: Sequence[TaggedSentence], vocabs: dict[str, Vocab], *,
                 lowercase: bool = True, max_word_len: int = 20, features: Sequence[str] | None = None):
        if not sentences:
            raise ValueError("TaggingDataset: no sentences")
        self.sentences = list(sentences)
        self.vocabs, self.lowercase, self.max_word_len = vocabs, lowercase, max_word_len
        if features is None:
            features = [k[len(FEAT_PREFIX):] for k in vocabs if k.startswith(FEAT_PREFIX)]
        self.features = check_feature_names(features, "TaggingDataset")
        for f in self.features:
            if FEAT_PREFIX + f not in vocabs:
                raise ValueError(f"TaggingDataset: feature {f!r} has no vocabulary {FEAT_PREFIX + f!r} "
                                 f"(vocabularies: {sorted(vocabs)})")
        fvs = [vocabs[FEAT_PREFIX + f] for f in self.features]
        self.feat_sizes = [len(v) for v in fvs]
        wv, cv, lv = vocabs["word"], vocabs["char"], vocabs["label"]
        w_unk, c_unk = wv.unk_id, cv.unk_id
        self.words, self.chars, self.tags, self.feats = [], [], [], []
        self.n_mapped_labels = 0
        for s in self.sentences:
            if len(s.words) == 0:
                raise ValueError(f"TaggingDataset: sentence {s.sid!r} is empty")
            self.words.append([wv.index(w.lower() if lowercase else w, w_unk) for w in s.words])
            self.chars.append([[cv.index(c, c_unk) for c in w[:max_word_len]] or [c_unk] for w in s.words])
            ids, mapped = encode_labels(s.tags, lv)
            self.tags.append(ids)
            self.n_mapped_labels += mapped
            cols = []
            for f, fv in zip(self.features, fvs):
                if f not in s.feats:
                    raise ValueError(f"TaggingDataset: sentence {s.sid!r} has no feature {f!r} "
                                     f"(its features: {sorted(s.feats) or 'none'})")
                cols.append([fv.index(v, fv.unk_id) for v in s.feats[f]])
            self.feats.append(cols)   # [F][n]
        self.lengths = np.array([len(w) for w in self.words], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sentences)

    def subset(self, indices: Sequence[int]) -> "TaggingDataset":
        """The sentences at ``indices`` (in that order), encoded with the same vocabularies."""
        return TaggingDataset([self.sentences[int(i)] for i in indices], self.vocabs, lowercase=self.lowercase,
                              max_word_len=self.max_word_len, features=self.features)

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())

    def subset(self, rows: Sequence[int]) -> "TaggingDataset":
        """The sentences at ``rows`` (already encoded; same vocabularies and features)."""
        rows = [int(i) for i in rows]
        out = TaggingDataset.__new__(TaggingDataset)
        out.__dict__.update(self.__dict__)
        for k in ("sentences", "words", "chars", "tags", "feats"):
            setattr(out, k, [getattr(self, k)[i] for i in rows])
        out.lengths = self.lengths[rows]
        out.n_mapped_labels = None     # counted when encoding; not tracked per sentence
        return out

    def collate(self, idx: Sequence[int]) -> TaggingBatch:
        idx = list(idx)
        B = len(idx)
        N = int(self.lengths[idx].max())
        C = max(len(c) for i in idx for c in self.chars[i])
        words = torch.zeros(B, N, dtype=torch.long)
        chars = torch.zeros(B, N, C, dtype=torch.long)
        tags = torch.zeros(B, N, dtype=torch.long)
        feats = torch.zeros(B, N, len(self.features), dtype=torch.long)
        for b, i in enumerate(idx):
            n = self.lengths[i]
            words[b, :n] = torch.tensor(self.words[i])
            tags[b, :n] = torch.tensor(self.tags[i])
            for t, cs in enumerate(self.chars[i]):
                chars[b, t, :len(cs)] = torch.tensor(cs)
            if self.features:
                feats[b, :n] = torch.tensor(self.feats[i]).T
        lengths = torch.as_tensor(self.lengths[idx])
        mask = torch.arange(N)[None, :] < lengths[:, None]
        return TaggingBatch(words, chars, tags, mask, lengths, torch.tensor(idx, dtype=torch.long), feats)

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                device: str | torch.device | None = None) -> Iterator[TaggingBatch]:
        """Length-bucketed batches (shuffled by ``seed``), moved to ``device`` when given."""
        for idx in bucket_indices(self.lengths, batch_size, shuffle=shuffle, seed=seed):
            b = self.collate(idx)
            yield b if device is None else b.to(device)


def bucket_indices(lengths: np.ndarray, batch_size: int, *, shuffle: bool, seed: int) -> list[np.ndarray]:
    """Index batches of similar length. Without ``shuffle`` the order is by length (stable)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.asarray(lengths)
    rng = np.random.default_rng(seed)
    tie = rng.random(len(lengths)) if shuffle else np.arange(len(lengths))
    order = np.lexsort((tie, lengths))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


@torch.no_grad()
def decode_dataset(ds: TaggingDataset, decode: Callable[[Any], torch.Tensor], labels: Vocab, *,
                   batch_size: int = 64, device: str | torch.device = "cpu") -> list[list[str]]:
    """The one loop over a tagging dataset: ``decode(batch) -> label ids [B, N]`` on every batch
    (moved to ``device``); returns each sentence's label strings, in dataset order."""
    preds: list[list[str] | None] = [None] * len(ds)
    for batch in ds.batches(batch_size, device=device):
        lab = decode(batch).cpu()
        for b, i in enumerate(batch.index.tolist()):
            preds[i] = [labels.tokens[j] for j in lab[b, :int(batch.lengths[b])].tolist()]
    return preds  # type: ignore[return-value]
