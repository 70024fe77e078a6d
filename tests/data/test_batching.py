import numpy as np
import torch

from components.data.batching import TaggingDataset, bucket_indices
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab


def make(lengths, seed=0):
    rng = np.random.default_rng(seed)
    sents = [TaggedSentence(tuple(f"w{rng.integers(5)}" for _ in range(n)),
                            tuple(["A", "B"][rng.integers(2)] for _ in range(n)), str(i))
             for i, n in enumerate(lengths)]
    vocabs = {"word": build_vocab(w.lower() for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    return sents, TaggingDataset(sents, vocabs)


def test_batches_cover_everything_once_with_left_aligned_masks():
    lengths = [1, 5, 3, 7, 2, 2, 9, 4, 1, 6, 3]
    sents, ds = make(lengths)
    seen = []
    for batch in ds.batches(4, shuffle=True, seed=1):
        B, N = batch.words.shape
        assert batch.mask.dtype == torch.bool and batch.mask.shape == (B, N)
        assert torch.equal(batch.mask.sum(1), batch.lengths)
        assert torch.equal(batch.mask, torch.arange(N)[None] < batch.lengths[:, None])
        assert int(batch.lengths.max()) == N
        assert (batch.words[~batch.mask] == 0).all() and (batch.words[batch.mask] > 0).all()
        for b, i in enumerate(batch.index.tolist()):
            n = lengths[i]
            assert int(batch.lengths[b]) == n
            labels = [ds.sentences[i].tags[t] for t in range(n)]
            assert [ds.tags[i][t] for t in range(n)] == batch.tags[b, :n].tolist()
            assert len(labels) == n
        seen += batch.index.tolist()
    assert sorted(seen) == list(range(len(lengths)))


def test_bucketing_groups_similar_lengths_and_is_seeded():
    lengths = np.array([10, 1, 10, 1, 10, 1, 10, 1])
    batches = bucket_indices(lengths, 4, shuffle=False, seed=0)
    assert [sorted(lengths[b].tolist()) for b in batches] == [[1] * 4, [10] * 4]
    a = [b.tolist() for b in bucket_indices(lengths, 2, shuffle=True, seed=5)]
    b = [b.tolist() for b in bucket_indices(lengths, 2, shuffle=True, seed=5)]
    c = [b.tolist() for b in bucket_indices(lengths, 2, shuffle=True, seed=6)]
    assert a == b and a != c


def test_chars_are_padded_per_word():
    sents, ds = make([3, 2])
    batch = ds.collate([0, 1])
    assert batch.chars.shape[:2] == batch.words.shape
    assert (batch.chars[~batch.mask] == 0).all()
    assert (batch.chars[batch.mask][:, 0] > 0).all()


def test_subset_keeps_the_encoding_and_the_study_subset_is_seeded():
    from components.data.sampling import subsample_indices
    from components.inference.study import subset
    sents, ds = make([3, 1, 4, 2, 5, 2])
    sub = ds.subset([4, 0])
    assert [s.sid for s in sub.sentences] == ["4", "0"] and sub.words == [ds.words[4], ds.words[0]]
    assert sub.tags == [ds.tags[4], ds.tags[0]] and sub.features == ds.features
    picked = subset(ds, 3, seed=7)
    assert [s.sid for s in picked.sentences] == [str(i) for i in subsample_indices(6, 3, 7)]
    assert subset(ds, 3, seed=7).words == picked.words                   # seeded: the same sentences again
    assert subset(ds, 0, seed=7) is ds and subset(ds, 6, seed=7) is ds   # 0 or >= len: everything
