"""Conformance of every ``INFERENCE`` method on chain energies (a method added tomorrow is tested
the day it is added): labels zero at masked positions, ``energy == E(labels)``, never below
exact Viterbi, relaxed outputs on the simplex, batch-size invariance, and a clear error for an
energy without what the method needs."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from components.data.batching import TaggingDataset
from components.data.types import TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab
from components.energies.chain import ChainEnergy, FixedPotentials
from components.energies.registry import ENERGIES
from components.inference.registry import INFERENCE
from components.models.encoders import BLSTMConfig
from components.models.infnets import InfNetConfig, build_infnet

WORDS = "a b c d e f".split()
LABELS = "X Y Z W".split()


def _data():
    g = torch.Generator().manual_seed(3)
    lengths = [5, 1, 3, 4, 2]                                   # ragged, with a length-1 sentence
    sents = [TaggedSentence(tuple(WORDS[int(i)] for i in torch.randint(len(WORDS), (n,), generator=g)),
                            tuple(LABELS[int(i)] for i in torch.randint(len(LABELS), (n,), generator=g)))
             for n in lengths]
    vocabs = {"word": build_vocab(w for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    return TaggingDataset(sents, vocabs), vocabs


DS, VOCABS = _data()
SIZES = {"n_words": len(VOCABS["word"]), "n_chars": len(VOCABS["char"]), "n_labels": len(VOCABS["label"])}


def _energy():
    torch.manual_seed(0)
    e = ENERGIES.build("blstm_crf", BLSTMConfig(hidden=4), **SIZES).double().eval()
    with torch.no_grad():
        torch.nn.init.normal_(e.transition, std=1.0)
    return e.requires_grad_(False)


def _inputs(name: str) -> dict:
    out = {}
    for key in INFERENCE[name].meta["inputs"]:
        if key == "net":
            out["net"] = build_infnet(InfNetConfig(arch="blstm", hidden=4), **SIZES, seed=1).double().eval()
        else:                                                   # a new input kind needs a fixture here
            raise AssertionError(f"no test fixture for input {key!r} of {name!r}")
    return out


def _build(name: str, deterministic: bool = False):
    over = INFERENCE[name].meta.get("deterministic", {}) if deterministic else {}
    cfg = dataclasses.replace(INFERENCE.config(name), **over)
    return INFERENCE.build(name, cfg, **_inputs(name))


CHAIN_METHODS = sorted(n for n, e in INFERENCE.items() if e.meta["needs"] == "ChainEnergy")


def test_every_method_declares_what_it_needs():
    for name, entry in INFERENCE.items():
        assert "needs" in entry.meta and "inputs" in entry.meta, name
        assert _build(name).needs.__name__ == entry.meta["needs"]


@pytest.mark.parametrize("name", CHAIN_METHODS)
def test_chain_method_contract(name):
    energy, batch = _energy(), DS.collate(list(range(len(DS))))
    method = _build(name)
    res = method(energy, batch)
    vit = INFERENCE.build("viterbi")(energy, batch)
    B, N = batch.mask.shape
    assert res.labels.shape == (B, N) and res.labels.dtype == torch.long
    assert bool((res.labels[~batch.mask] == 0).all())                       # zero at masked positions
    assert bool(((res.labels >= 0) & (res.labels < SIZES["n_labels"])).all())
    assert torch.allclose(res.energy, energy.energy(batch, res.labels), atol=1e-9)     # energy == E(labels)
    assert bool((res.energy >= vit.energy - 1e-9).all())                    # never below exact inference
    if res.relaxed is not None:
        assert res.relaxed.shape == (B, N, SIZES["n_labels"])
        rows = res.relaxed[batch.mask].sum(-1)
        assert torch.allclose(rows, torch.ones_like(rows)) and bool((res.relaxed >= 0).all())
    # the same answer through FixedPotentials (how evaluation times a method)
    again = _build(name, deterministic=True)(FixedPotentials.of(energy, batch), batch)
    ref = _build(name, deterministic=True)(energy, batch)
    assert torch.equal(again.labels, ref.labels)


@pytest.mark.parametrize("name", CHAIN_METHODS)
def test_chain_method_batch_size_invariance(name):
    energy = _energy()
    whole = _build(name, deterministic=True)(energy, DS.collate(list(range(len(DS)))))
    for i in range(len(DS)):
        one = _build(name, deterministic=True)(energy, DS.collate([i]))
        n = len(DS.sentences[i].words)
        assert torch.equal(one.labels[0, :n], whole.labels[i, :n]), (name, i)
        assert torch.allclose(one.energy[0], whole.energy[i], atol=1e-9)


class _PlainEnergy:
    """An Energy without potentials."""

    def energy(self, batch, y):
        return torch.zeros(y.shape[0])


@pytest.mark.parametrize("name", CHAIN_METHODS)
def test_chain_method_rejects_an_energy_without_potentials(name):
    with pytest.raises(TypeError, match=f"needs a ChainEnergy; got _PlainEnergy"):
        _build(name)(_PlainEnergy(), DS.collate([0]))


def test_gd_adam_reaches_viterbi_on_small_chains():
    """Adam GD in the relaxed space is an approximate method: on small random chains it reaches
    the exact MAP for most sentences with enough steps (and never goes below it)."""
    energy, batch = _energy(), DS.collate(list(range(len(DS))))
    vit = INFERENCE.build("viterbi")(energy, batch)
    res = INFERENCE.build("gd_adam", {"lr": 0.5, "iterations": 300})(energy, batch)
    assert int(torch.isclose(res.energy, vit.energy, atol=1e-9).sum()) >= len(DS) - 1


def test_step_scores_local_and_global():
    from components.inference.beam import step_scores
    raw = torch.randn(2, 3, 5, dtype=torch.double)
    local = step_scores(raw, "local")
    assert torch.allclose(local.exp().sum(-1), torch.ones(2, 3, dtype=torch.double))
    assert torch.allclose(local - raw, (local - raw)[..., :1].expand_as(raw))       # same ranking, shifted
    assert torch.equal(step_scores(raw, "global"), raw)
    with pytest.raises(ValueError, match="normalisation"):
        step_scores(raw, "none")
