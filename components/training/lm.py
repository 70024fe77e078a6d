"""Training the LSTM language models of the search-error analysis (Tu & Gimpel 2019, Sec. 6.2)
with the shared loop (:func:`components.training.loop.fit`): Adam, the mean token NLL, batches
reshuffled every epoch, a fixed number of epochs (the dev score is the negative NLL of the first
batches; the LMs only rank sentences, so no early stopping is needed)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from components.data.batching import TaggingDataset
from components.models.lm import LMConfig, LSTMLM, lm_batches, perplexities
from components.training.loop import TrainConfig, fit


def train_lm(seqs: Sequence[Sequence[int]], vocab_size: int, cfg: LMConfig = LMConfig(), *, epochs: int = 5,
             lr: float = 0.01, batch_size: int = 32, seed: int = 0) -> LSTMLM:
    """An LSTM LM over ``seqs`` (token ids < ``vocab_size``), in eval mode."""
    torch.manual_seed(seed)
    lm = LSTMLM(vocab_size, cfg)
    data = [(ids, mask) for ids, mask, _ in lm_batches(seqs, batch_size)]
    rng = np.random.default_rng(seed)
    fit(lm, lambda m, b: m.loss(*b), lambda e: [data[i] for i in rng.permutation(len(data))], len(data),
        lambda m: {"score": -float(sum(m.loss(*b) for b in data[:5]))},
        TrainConfig(lr=lr, epochs=epochs, patience=epochs, batch_size=batch_size))
    return lm.eval()


LM_KINDS = ("words", "labels")


def tagging_lm_perplexities(kind: str, train: TaggingDataset, test: TaggingDataset, word_vocab, n_labels: int,
                            cfg: LMConfig = LMConfig(), *, epochs: int = 5, seed: int = 0) -> np.ndarray:
    """Sec. 6.2's perplexity of each ``test`` sentence [len(test)] under an LM trained on ``train``:
    ``kind`` ``words`` (lower-cased word ids of ``word_vocab``, unknown words its unk id) or
    ``labels`` (the gold label ids, ``n_labels`` of them)."""
    def word_ids(ds: TaggingDataset) -> list[list[int]]:
        return [[word_vocab.index(w.lower(), word_vocab.unk_id) for w in s.words] for s in ds.sentences]

    if kind == "words":
        train_seqs, test_seqs, vocab_size = word_ids(train), word_ids(test), len(word_vocab)
    elif kind == "labels":
        train_seqs, test_seqs, vocab_size = train.tags, test.tags, n_labels
    else:
        raise ValueError(f"LM kind {kind!r}: expected one of {LM_KINDS}")
    return perplexities(train_lm(train_seqs, vocab_size, cfg, epochs=epochs, seed=seed), test_seqs)
