"""Global vs local readings and self-normalisation (Goyal, Dyer & Berg-Kirkpatrick 2019, Sec. 3.2.1)."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from components.inference.beam import BeamState, beam_search, greedy, reading, sequence_scores, step_scores
from components.training.registry import OBJECTIVES
from components.training.search_aware import SelfNormalisedCEConfig, eos_hamming_costs, log_normalisers
from tests.step_scorers import float64_default, tiny_batch, tiny_tagger  # noqa: F401


class Normalised(nn.Module):
    """A step scorer whose *network* ends in a log-softmax: log Z_L,t = 0 at every step, so its
    local and global readings coincide (the ideal self-normalised model)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.n_labels = inner.n_labels
        self.normalisation = "global"

    def start(self, batch, k):
        return self.inner.start(batch, k)

    def step(self, state: BeamState, prev):
        with reading(self.inner, "local"):
            raw, state = self.inner.step(state, prev)      # a normalised network output
        return step_scores(raw, self.normalisation), state

    def embed(self, w):
        return self.inner.embed(w)

    def embed_ids(self, ids):
        return self.inner.embed_ids(ids)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_readings_agree_when_log_z_is_zero(float64_default, seed):
    scorer, batch = Normalised(tiny_tagger(seed)), tiny_batch(seed)
    assert torch.allclose(log_normalisers(scorer, batch), torch.zeros(batch.mask.shape, dtype=torch.float64), atol=1e-12)
    with reading(scorer, "local"):
        loc_g, loc_b = greedy(scorer, batch), beam_search(scorer, batch, 2)
    with reading(scorer, "global"):
        glo_g, glo_b = greedy(scorer, batch), beam_search(scorer, batch, 2)
    assert torch.equal(loc_g.labels, glo_g.labels) and torch.allclose(loc_g.score, glo_g.score)
    assert torch.equal(loc_b.labels, glo_b.labels) and torch.allclose(loc_b.score, glo_b.score)


def test_readings_differ_when_log_z_is_not_zero(float64_default):
    """A plain network: the global reading's sequence score is the local one plus sum_t log Z_t."""
    scorer, batch = tiny_tagger(0), tiny_batch(0)
    log_z = log_normalisers(scorer, batch)
    assert log_z.abs().max() > 0.1
    with reading(scorer, "local"):
        local = sequence_scores(scorer, batch, batch.tags)
    with reading(scorer, "global"):
        glob = sequence_scores(scorer, batch, batch.tags)
    assert torch.allclose(glob, local + log_z.sum(1))
    assert scorer.normalisation == "local"           # the reading is restored


def test_reading_rejects_unknown_normalisation():
    with pytest.raises(ValueError, match="normalisation"):
        with reading(tiny_tagger(0), "softmax"):
            pass


@pytest.mark.parametrize("normalisation", ["local", "global"])
def test_self_normalisation_penalty(float64_default, normalisation):
    """SN loss = CE + lam * sum_t (log Z_t)^2: the penalty is lam * sum log Z^2 exactly, whatever the
    scorer's own reading, and 0 exactly when every log Z_t is 0."""
    scorer, batch = tiny_tagger(1, normalisation), tiny_batch(1)
    ce = OBJECTIVES.build("seq_ce", None, updates_per_epoch=1)
    for lam in (0.0, 0.5, 2.0):
        sn = OBJECTIVES.build("self_normalised_ce", {"lam": lam}, updates_per_epoch=1)
        log_z = log_normalisers(scorer, batch)
        want = ce.loss(scorer, batch) + lam * (log_z ** 2).sum(1)
        assert torch.allclose(sn.loss(scorer, batch), want)
        assert scorer.normalisation == normalisation
    assert float((log_normalisers(scorer, batch) ** 2).sum()) > 0
    ideal = Normalised(tiny_tagger(1))
    sn = OBJECTIVES.build("self_normalised_ce", {"lam": 3.0}, updates_per_epoch=1)
    assert torch.allclose(sn.loss(ideal, batch), ce.loss(ideal, batch))


def test_self_normalisation_drives_log_z_toward_zero():
    """A few hundred Adam steps of CE + lam log Z^2 shrink |log Z| while the CE stays low."""
    torch.manual_seed(0)
    scorer, batch = tiny_tagger(2, scale=1.0).float().train(), tiny_batch(2, B=6, T=5)
    start = float(log_normalisers(scorer, batch).abs().sum() / batch.mask.sum())
    obj = OBJECTIVES.build("self_normalised_ce", {"lam": 1.0}, updates_per_epoch=1)
    opt = torch.optim.Adam(scorer.parameters(), lr=0.02)
    for _ in range(200):
        opt.zero_grad()
        obj(scorer, batch).backward()
        opt.step()
    with torch.no_grad():
        end = float(log_normalisers(scorer, batch).abs().sum() / batch.mask.sum())
        ce = float(OBJECTIVES.build("seq_ce", None, updates_per_epoch=1)(scorer, batch))
    assert start > 0.5 and end < 0.05 and ce < 0.5


def test_lambda_must_be_non_negative():
    with pytest.raises(ValueError, match="lam"):
        SelfNormalisedCEConfig(lam=-1.0)
    with pytest.raises(ValueError, match="lam"):
        SelfNormalisedCEConfig(lam=math.nan)


def test_eos_costs_pad_the_reference_with_eos():
    gold = torch.tensor([[3, 1, 0, 0], [2, 0, 0, 0]])     # eos = 0 ends each reference
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]).bool()
    horizon = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]).bool()
    d = eos_hamming_costs(gold, mask, horizon, 4, eos=0)
    ref = [[3, 1, 0, 0, 0], [2, 0, 0, 0, 0]]
    for b in range(2):
        for t in range(5):
            for v in range(4):
                want = float(v != ref[b][t]) if horizon[b, t] else 0.0
                assert float(d[b, t, v]) == want
