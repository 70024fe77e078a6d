"""End of sequence in the decoders (Goyal et al. 2019's translation setting), against enumeration.

The scorer is a tiny real seq2seq tagger given an ``eos`` id: its mask is the decoding horizon. A
hypothesis ends at its first eos; its score is the sum of the step scores up to and including it.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from components.inference.beam import beam_search, eos_of, greedy, soft_beam_search
from tests.step_scorers import float64_default, score_of, tiny_batch, tiny_tagger  # noqa: F401

EOS = 0


def eos_tagger(seed: int, normalisation: str = "local", V: int = 3, scale: float = 8.0):
    m = tiny_tagger(seed, normalisation, V=V, scale=scale)
    m.eos = EOS
    return m


def hypotheses(V: int, T: int):
    """Every complete output: a non-eos prefix then eos (lengths 1..T), or T non-eos symbols."""
    out = []
    for n in range(T):
        for pre in itertools.product([v for v in range(V) if v != EOS], repeat=n):
            out.append(pre + (EOS,))
    out += list(itertools.product([v for v in range(V) if v != EOS], repeat=T))
    return out


def enumerate_row(scorer, batch, row: int, V: int):
    T = int(batch.mask[row].sum())
    return {h: score_of(scorer, batch, row, h) for h in hypotheses(V, T)}


def as_hyp(labels: torch.Tensor, length: int) -> tuple[int, ...]:
    return tuple(int(x) for x in labels[:length])


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_with_eos_returns_every_hypothesis_with_its_length(float64_default, normalisation, seed):
    V, T = 3, 3
    scorer, batch = eos_tagger(seed, normalisation, V), tiny_batch(seed, B=3, T=T, V=V, lengths=[3, 2, 3])
    k = len(hypotheses(V, T))                        # 1 + 2 + 4 + 8 = 15: the beam keeps all of them
    res = beam_search(scorer, batch, k)
    for row in range(3):
        exact = enumerate_row(scorer, batch, row, V)
        got = {}
        for i in range(len(exact)):
            n = int(res.beam_lengths[row, i])
            got[as_hyp(res.beam_labels[row, i], n)] = float(res.beam_scores[row, i])
        assert set(got) == set(exact)                 # finished at lengths 1, 2, .. and unfinished, each once
        for h, s in exact.items():
            assert got[h] == pytest.approx(s, abs=1e-9)
        best = max(exact, key=exact.get)
        assert as_hyp(res.labels[row], int(res.lengths[row])) == best
        assert float(res.score[row]) == pytest.approx(exact[best], abs=1e-9)
        L = int(res.lengths[row])
        assert bool((res.labels[row, L:] == EOS).all()) or L == res.labels.shape[1] or not batch.mask[row, L:].any()


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("seed", [0, 3])
def test_beam_with_eos_matches_a_naive_beam(float64_default, k, seed):
    """Against a per-instance, per-hypothesis beam over python lists (finished hypotheses stay in
    the beam with their score; their one continuation is eos at 0)."""
    V, T = 4, 5
    scorer, batch = eos_tagger(seed, "global", V), tiny_batch(seed, B=2, T=T, V=V, lengths=[5, 4])
    res = beam_search(scorer, batch, k)
    for row in range(2):
        steps = int(batch.mask[row].sum())
        beam = [((), 0.0, False)]
        for _ in range(steps):
            cands = []
            for seq, s, done in beam:
                if done:
                    cands.append((seq + (EOS,), s, True))
                    continue
                for v in range(V):
                    cands.append((seq + (v,), score_of(scorer, batch, row, seq + (v,)), v == EOS))
            beam = sorted(cands, key=lambda c: -c[1])[:k]
        want = beam[0]
        L = int(res.lengths[row])
        got = as_hyp(res.labels[row], L)
        first_eos = want[0].index(EOS) + 1 if EOS in want[0] else len(want[0])
        assert got == want[0][:first_eos]
        assert float(res.score[row]) == pytest.approx(want[1], abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_with_eos_stops_at_the_first_eos(float64_default, seed):
    V, T = 3, 5
    scorer, batch = eos_tagger(seed, "local", V), tiny_batch(seed, B=3, T=T, V=V)
    res = greedy(scorer, batch)
    for row in range(3):
        steps = int(batch.mask[row].sum())
        seq, total = (), 0.0
        for _ in range(steps):                         # the argmax step by step, by teacher forcing
            scores = [score_of(scorer, batch, row, seq + (v,)) - (score_of(scorer, batch, row, seq) if seq else 0.0)
                      for v in range(V)]
            v = max(range(V), key=lambda i: scores[i])
            seq, total = seq + (v,), total + scores[v]
            if v == EOS:
                break
        assert as_hyp(res.labels[row], int(res.lengths[row])) == seq
        assert float(res.score[row]) == pytest.approx(total, abs=1e-9)


def test_all_finished_stops_early(float64_default):
    """A scorer that always prefers eos: one step, whatever the horizon."""
    scorer, batch = eos_tagger(0, "local", 3), tiny_batch(0, B=2, T=6, V=3, lengths=[6, 6])
    with torch.no_grad():
        scorer.out.bias[EOS] += 1000.0
    for res in (greedy(scorer, batch), beam_search(scorer, batch, 1), soft_beam_search(scorer, batch, 1, 1e4)):
        assert res.labels.shape[1] == 1 and res.lengths.tolist() == [1, 1]


def _min_gap_eos(scorer, batch, k: int) -> float:
    """The hard beam's smallest gap among the k + 1 best candidates, eos forcing included."""
    state, mask = scorer.start(batch, k)
    B, T = mask.shape
    s, prev, gaps = None, None, []
    done = torch.zeros(B, k, dtype=torch.bool)
    with torch.no_grad():
        for t in range(T):
            scores, state = scorer.step(state, prev)
            V = scores.shape[-1]
            forced = torch.full_like(scores, -math.inf)
            forced[..., EOS] = 0.0
            scores = torch.where(done[..., None], forced, scores)
            if s is None:
                s = torch.full((B, k), -math.inf, dtype=scores.dtype)
                s[:, 0] = 0.0
            cand = (s[:, :, None] + scores).reshape(B, k * V)
            top = cand.sort(-1, descending=True).values[:, :k + 1]
            finite = torch.isfinite(top[:, 1:])
            gap = torch.where(finite, top[:, :-1] - top[:, 1:], torch.full_like(top[:, 1:], math.inf)).min(-1).values
            gaps.append(gap[mask[:, t]])
            vals, idx = cand.topk(k, -1)
            active = mask[:, t, None]
            s = torch.where(active, vals, s)
            b = torch.where(active, idx // V, torch.arange(k).expand(B, k))
            done = torch.where(active, done.gather(1, b) | (idx % V == EOS), done)
            state = state.reorder(b)
            prev = scorer.embed_ids(idx % V)
    return float(torch.cat(gaps).min())


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("k", [2, 3])
def test_soft_beam_with_eos_at_large_alpha_is_the_hard_beam(float64_default, normalisation, k):
    checked = 0
    for seed in range(40):
        scorer, batch = eos_tagger(seed, normalisation, 4), tiny_batch(seed, B=3, T=5, V=4)
        if _min_gap_eos(scorer, batch, k) <= 0.06:
            continue                                   # a near-tie: the relaxation may pick either side
        hard, soft = beam_search(scorer, batch, k), soft_beam_search(scorer, batch, k, 1e4)
        assert torch.equal(soft.lengths, hard.lengths)
        for row in range(3):
            L = int(hard.lengths[row])
            assert torch.equal(soft.labels[row, :L], hard.labels[row, :L])
        assert torch.allclose(soft.score, hard.score, atol=1e-6)
        assert torch.allclose(soft.beam_scores.sort(-1).values, hard.beam_scores.sort(-1).values, atol=1e-6)
        checked += 1
        if checked == 3:
            break
    assert checked == 3, "fewer than 3 well-separated instances"


def test_soft_beam_cost_charges_early_eos(float64_default):
    """With a cost table over the horizon, a hypothesis that stops early keeps paying d_t(eos)."""
    V, T = 3, 4
    scorer, batch = eos_tagger(0, "local", V), tiny_batch(0, B=1, T=T, V=V, lengths=[4])
    with torch.no_grad():
        scorer.out.bias[EOS] += 1000.0                 # eos at once, then forced eos
    cost = torch.ones(1, T, V)
    cost[0, :, 1] = 0.0                                # the reference: 1 1 1 1 (eos costs 1 every step)
    res = soft_beam_search(scorer, batch, 1, 1e4, cost=cost)
    assert res.lengths.tolist() == [1]
    assert float(res.loss[0]) == pytest.approx(4.0, abs=1e-6)


def test_eos_out_of_range_is_a_value_error():
    scorer = eos_tagger(0, "local", 3)
    scorer.eos = 7
    with pytest.raises(ValueError, match="eos id 7"):
        eos_of(scorer)


def test_taggers_have_no_eos_and_decode_every_step(float64_default):
    scorer, batch = tiny_tagger(0), tiny_batch(0, B=3, T=4, V=3)
    assert eos_of(scorer) is None
    for res in (greedy(scorer, batch), beam_search(scorer, batch, 2), soft_beam_search(scorer, batch, 2, 10.0)):
        assert res.lengths.tolist() == batch.mask.sum(1).tolist()
        assert res.labels.shape[1] == 4
