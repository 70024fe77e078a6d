"""components.inference.api: the library entry's own checks (the examples test the happy paths)."""
from __future__ import annotations

import pytest
import torch

from components.inference.api import PytorchCRFEnergy, chain, decode, sample
from components.inference.beam import beam_search
from components.structures import linear_chain
from tests.step_scorers import tiny_batch, tiny_tagger


def test_chain_builds_the_mask_from_lengths_and_decode_is_viterbi():
    g = torch.Generator().manual_seed(0)
    u, w = torch.randn(3, 4, 5, generator=g), torch.randn(5, 5, generator=g)
    p = chain(u, w, lengths=[4, 2, 1])
    assert p.mask.tolist() == [[True] * 4, [True, True, False, False], [True, False, False, False]]
    labels, _ = linear_chain.viterbi(u, w, p.mask)
    assert torch.equal(decode(p).labels, labels)


@pytest.mark.parametrize("kwargs, match", [
    ({"lengths": [4, 2]}, "lengths has shape"),
    ({"lengths": [4, 2, 1], "mask": torch.ones(3, 4, dtype=torch.bool)}, "mask or lengths"),
])
def test_chain_rejects_bad_lengths(kwargs, match):
    with pytest.raises(ValueError, match=match):
        chain(torch.zeros(3, 4, 5), torch.zeros(5, 5), **kwargs)


def test_decode_checks_what_it_is_given():
    p = chain(torch.zeros(1, 2, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="its own batch"):
        decode(p, batch=object())
    with pytest.raises(TypeError, match="Viterbi"):          # the method names itself and what is missing
        decode(object(), batch=None)


def test_pytorch_crf_energy_needs_batch_first_and_matching_shapes():
    torchcrf = pytest.importorskip("torchcrf")
    with pytest.raises(ValueError, match="batch_first"):
        PytorchCRFEnergy(torchcrf.CRF(4), emissions=lambda b: b, mask=lambda b: b)
    e = PytorchCRFEnergy(torchcrf.CRF(4, batch_first=True), emissions=lambda b: torch.zeros(2, 3, 5),
                         mask=lambda b: torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_tags=4"):
        e.potentials(None)


def test_decode_runs_the_step_decoders_on_a_step_scorer():
    scorer, batch = tiny_tagger(0), tiny_batch(1)
    got = decode(scorer, "beam", {"k": 3}, batch=batch)
    ref = beam_search(scorer, batch, 3, 0.0)
    assert torch.equal(got.labels, ref.labels)
    assert torch.equal(decode(scorer, "greedy", batch=batch).labels, decode(scorer, "beam", {"k": 1}, batch=batch).labels)


def test_sample_runs_a_sampler_on_a_chain_energy():
    from components.energies.chain import FixedPotentials
    p = chain(torch.zeros(2, 3, 4), torch.zeros(4, 4), lengths=[3, 2])
    state, stats = sample(FixedPotentials(p), "gibbs_chain", batch=None, n_chains=5, n_steps=3, seed=1)
    assert state.y.shape == (5, 2, 3) and (state.y[:, 1, 2] == 0).all()         # masked positions stay 0
    again, _ = sample(FixedPotentials(p), "gibbs_chain", batch=None, n_chains=5, n_steps=3, seed=1)
    assert torch.equal(state.y, again.y)                                          # seeded
