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


def cap_vocabulary(train_seqs: Sequence[Sequence[int]], test_seqs: Sequence[Sequence[int]], max_words: int
                   ) -> tuple[list[list[int]], list[list[int]], int, np.ndarray]:
    """Keep the ``max_words`` most frequent ids of ``train_seqs`` (ties: the smaller id first), renumbered
    0..max_words-1 by that order; every other id, in either split, becomes the one extra id ``max_words``
    (the rare-word class). -> (train, test, vocabulary size max_words + 1, rare_nll [len(test)]).

    The LM's softmax then costs O(max_words) instead of O(|V|) per token (Greek morphology: 17,144
    words, mostly hapaxes). So that a rare word still costs what a rare word should, each test token
    in the rare class adds -log p(word | rare class), the add-one estimate from the rare words' training
    counts (unseen words count 0, one extra type): ``rare_nll[s]`` sums it over sentence ``s``, and
    log p(w) = log p(rare class | context) + log p(w | rare class) is a proper class-factored LM."""
    if max_words <= 0:
        raise ValueError(f"cap_vocabulary: max_words must be positive, got {max_words}")
    counts: dict[int, int] = {}
    for s in train_seqs:
        for i in s:
            counts[i] = counts.get(i, 0) + 1
    kept = sorted(counts, key=lambda i: (-counts[i], i))[:max_words]
    new = {old: rank for rank, old in enumerate(kept)}
    rare = {i: c for i, c in counts.items() if i not in new}
    denominator = sum(rare.values()) + len(rare) + 1                  # add one to every rare type and to "unseen"
    rare_nll = np.array([sum(-np.log((rare.get(i, 0) + 1) / denominator) for i in s if i not in new)
                         for s in test_seqs], dtype=np.float64)
    remap = lambda seqs: [[new.get(i, max_words) for i in s] for s in seqs]  # noqa: E731
    return remap(train_seqs), remap(test_seqs), max_words + 1, rare_nll


def tagging_lm_perplexities(kind: str, train: TaggingDataset, test: TaggingDataset, word_vocab, n_labels: int,
                            cfg: LMConfig = LMConfig(), *, epochs: int = 5, seed: int = 0,
                            max_words: int = 0) -> np.ndarray:
    """Sec. 6.2's perplexity of each ``test`` sentence [len(test)] under an LM trained on ``train``:
    ``kind`` ``words`` (lower-cased word ids of ``word_vocab``, unknown words its unk id; with
    ``max_words`` > 0 only the most frequent training words keep their own id and the rest share a
    class whose words are scored by their training frequency, see :func:`cap_vocabulary`) or ``labels`` (the gold label ids, ``n_labels`` of them)."""
    def word_ids(ds: TaggingDataset) -> list[list[int]]:
        return [[word_vocab.index(w.lower(), word_vocab.unk_id) for w in s.words] for s in ds.sentences]

    rare_nll = None
    if kind == "words":
        train_seqs, test_seqs, vocab_size = word_ids(train), word_ids(test), len(word_vocab)
        if 0 < max_words < vocab_size:
            train_seqs, test_seqs, vocab_size, rare_nll = cap_vocabulary(train_seqs, test_seqs, max_words)
    elif kind == "labels":
        train_seqs, test_seqs, vocab_size = train.tags, test.tags, n_labels
    else:
        raise ValueError(f"LM kind {kind!r}: expected one of {LM_KINDS}")
    ppl = perplexities(train_lm(train_seqs, vocab_size, cfg, epochs=epochs, seed=seed), test_seqs)
    if rare_nll is None:
        return ppl
    n_predicted = np.array([len(t) + 1 for t in test_seqs], dtype=np.float64)       # the LM also predicts EOS
    return ppl * np.exp(rare_nll / n_predicted)
