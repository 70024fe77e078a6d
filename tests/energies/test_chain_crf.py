import torch
import torch.nn.functional as F

from components.data.batching import TaggingDataset
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab
from components.energies.registry import ENERGIES
from components.inference.exact import Viterbi
from components.inference.evaluate import evaluate_inference
from components.models.encoders import BLSTMConfig
from components.structures import enumerate as brute


def _dataset():
    sents = [TaggedSentence(("a", "b", "c"), ("X", "Y", "X")), TaggedSentence(("b",), ("Y",)),
             TaggedSentence(("c", "a"), ("X", "X"))]
    vocabs = {"word": build_vocab(w for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    return TaggingDataset(sents, vocabs), vocabs


def test_energies_on_discrete_relaxed_and_viterbi():
    ds, vocabs = _dataset()
    batch = ds.collate([0, 1, 2])
    for name in [n for n, e in ENERGIES.items() if e.meta["data"] == "tagging"]:
        torch.manual_seed(0)
        energy = ENERGIES.build(name, BLSTMConfig(hidden=4), n_words=len(vocabs["word"]),
                                n_chars=len(vocabs["char"]), n_labels=2).double().eval()
        with torch.no_grad():
            torch.nn.init.normal_(energy.transition)
            p = energy.potentials(batch)
            e = energy.energy(batch, batch.tags)
            assert torch.equal(p.energy(batch.tags), e)
            onehot = F.one_hot(batch.tags, 2).double()
            assert torch.allclose(energy.energy(batch, onehot), e)
            res = Viterbi()(energy, batch)
            labels, score = brute.argmax(p.unary, p.transition, p.mask)
            assert torch.allclose(res.energy, -score)
            assert torch.equal(res.labels * p.mask, labels * p.mask)
            assert torch.all(res.energy <= e + 1e-12)          # exact MAP never loses to gold
        m = evaluate_inference(energy, Viterbi(), ds, vocabs["label"], "accuracy", batch_size=2)
        assert m["energy_pred"] <= m["energy_gold"] + 1e-9 and 0 <= m["accuracy"] <= 100
        assert m["decode_tokens_per_s"] > 0


def test_plus_variant_has_char_cnn_and_trainable_embeddings():
    _, vocabs = _dataset()
    sizes = {"n_words": len(vocabs["word"]), "n_chars": len(vocabs["char"]), "n_labels": 2}
    plain = ENERGIES.build("blstm_crf", BLSTMConfig(hidden=4), **sizes)
    plus = ENERGIES.build("blstm_crf_plus", BLSTMConfig(hidden=4), **sizes)
    assert plain.features.chars is None and not plain.features.embed.embedding.weight.requires_grad
    assert plus.features.chars.conv.kernel_size == (3,) and plus.features.chars.conv.out_channels == 30
    assert plus.features.chars.embed.embedding_dim == 30 and plus.features.embed.embedding.weight.requires_grad
