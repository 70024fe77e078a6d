import dataclasses

import numpy as np
import pytest
import torch

from components.data.batching import TaggingBatch, TaggingDataset
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab
from components.models.mlp import MLPUnary, MLPUnaryConfig

CFG = MLPUnaryConfig(word_dim=6, char_filters=4, char_dim=5, char_width=3, feat_dim=3, hidden=8)


def _data(with_feats=True):
    rng = np.random.default_rng(0)
    sents = []
    for i, n in enumerate([4, 2, 5]):
        words = tuple(f"w{rng.integers(6)}x" for _ in range(n))
        feats = {"pos": tuple(f"P{rng.integers(3)}" for _ in range(n)),
                 "case": tuple(f"C{rng.integers(2)}" for _ in range(n))} if with_feats else {}
        sents.append(TaggedSentence(words, tuple("AB"[rng.integers(2)] for _ in range(n)), str(i), feats))
    vocabs = {"word": build_vocab(w.lower() for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    if with_feats:
        for f in ("pos", "case"):
            vocabs[f"feat:{f}"] = build_vocab(v for s in sents for v in s.feats[f])
    return TaggingDataset(sents, vocabs), vocabs


def _model(ds, vocabs, cfg=CFG, n_labels=3):
    return MLPUnary(cfg, len(vocabs["word"]), len(vocabs["char"]), ds.feat_sizes, n_labels, seed=1).eval()


def test_output_shape_with_and_without_features():
    for with_feats in (True, False):
        ds, vocabs = _data(with_feats)
        batch = ds.collate([0, 1, 2])
        assert batch.feats.shape == (3, 5, 2 if with_feats else 0)
        u = _model(ds, vocabs)(batch)
        assert u.shape == (3, 5, 3) and u.dtype == torch.float32 and torch.isfinite(u).all()


def test_no_context_across_tokens():
    ds, vocabs = _data()
    model = _model(ds, vocabs)
    batch = ds.collate([0, 2])
    u = model(batch)
    N = batch.words.shape[1]
    for j in range(N):
        words, chars, feats = batch.words.clone(), batch.chars.clone(), batch.feats.clone()
        words[:, j] = (words[:, j] + 1) % len(vocabs["word"])
        chars[:, j, 0] = (chars[:, j, 0] + 1) % len(vocabs["char"])
        feats[:, j] = 1
        changed = dataclasses.replace(batch, words=words, chars=chars, feats=feats)
        v = model(changed)
        others = [i for i in range(N) if i != j]
        assert torch.equal(u[:, others], v[:, others])
        assert not torch.equal(u[:, j], v[:, j])


def test_features_are_used():
    ds, vocabs = _data()
    model = _model(ds, vocabs)
    batch = ds.collate([0])
    u = model(batch)
    v = model(dataclasses.replace(batch, feats=torch.flip(batch.feats, [-1])))
    assert not torch.equal(u, v)
    with pytest.raises(ValueError, match="2 feature columns"):
        MLPUnary(CFG, len(vocabs["word"]), len(vocabs["char"]), [4], 3)(batch)


@pytest.mark.parametrize("act", ["none", "relu", "sigmoid"])
def test_last_activation(act):
    ds, vocabs = _data()
    batch = ds.collate([0, 1, 2])
    base = _model(ds, vocabs)(batch)      # same seed -> same weights
    u = _model(ds, vocabs, dataclasses.replace(CFG, last_activation=act))(batch)
    expect = {"none": base, "relu": torch.relu(base), "sigmoid": torch.sigmoid(base)}[act]
    torch.testing.assert_close(u, expect)
    if act == "relu":
        assert (u >= 0).all() and (u == 0).any()
    if act == "sigmoid":
        assert ((u > 0) & (u < 1)).all()


def test_config_errors_and_seeding():
    ds, vocabs = _data()
    with pytest.raises(ValueError, match="last_activation"):
        _model(ds, vocabs, dataclasses.replace(CFG, last_activation="tanh"))
    state = torch.random.get_rng_state()
    a, b = _model(ds, vocabs), _model(ds, vocabs)
    assert torch.equal(torch.random.get_rng_state(), state)       # the global RNG is left alone
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), k
    no_chars = _model(ds, vocabs, dataclasses.replace(CFG, char_filters=0))
    assert no_chars.chars is None and no_chars(ds.collate([1])).shape == (1, 2, 3)


def test_pretrained_rows_and_gradients():
    ds, vocabs = _data()
    vec = np.full((1, CFG.word_dim), 0.5, dtype=np.float32)
    model = MLPUnary(CFG, len(vocabs["word"]), len(vocabs["char"]), ds.feat_sizes, 3,
                     pretrained_ids=np.array([2]), pretrained=vec)
    assert torch.equal(model.embed.embedding.weight[2], torch.full((CFG.word_dim,), 0.5))
    batch: TaggingBatch = ds.collate([0, 1])
    model(batch)[batch.mask].sum().backward()
    assert model.embed.embedding.weight.grad is not None            # fine-tuned by default
    assert all(e.weight.grad is not None for e in model.feats)
