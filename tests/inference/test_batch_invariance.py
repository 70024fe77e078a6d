"""Every decoder's output and scores depend on the sentence alone, not on the sentences that share
its batch (issue 27): each sentence decoded alone equals its row decoded in mixed batches.

Before: once every beam item of a sentence had emitted eos, the soft beam kept mixing that
sentence's state (its relaxed top-k over the finished items' scores) until the whole batch was
finished, so at finite alpha its scores and relaxed max score depended on its batch-mates.
"""
from __future__ import annotations

import types

import pytest
import torch

from components.inference.beam import beam_search, greedy, soft_beam_search
from tests.step_scorers import float64_default, tiny_batch, tiny_tagger  # noqa: F401

EOS = 0


def _decoders():
    return {"greedy": lambda s, b: greedy(s, b),
            "beam3": lambda s, b: beam_search(s, b, 3),
            "soft_beam3_a1": lambda s, b: soft_beam_search(s, b, 3, 1.0),
            "soft_beam2_a10": lambda s, b: soft_beam_search(s, b, 2, 10.0)}


def _rows(batch, idx: list[int]):
    return types.SimpleNamespace(**{k: v[idx] for k, v in vars(batch).items()})


def _fields(res) -> dict[str, torch.Tensor]:
    names = ("labels", "scores", "lengths", "beam_labels", "beam_scores", "beam_lengths", "max_score")
    return {n: getattr(res, n) for n in names if getattr(res, n, None) is not None}


def _finishes_early(scorer, batch) -> bool:
    """Some sentence's beam is all finished before the batch's last step (the case that mattered)."""
    res = beam_search(scorer, batch, 3)
    return bool((res.beam_lengths.max(-1).values < batch.mask.sum(-1)).any())


def _cases(normalisation: str, n: int = 4):
    """The first ``n`` seeds whose batch has a sentence that finishes before the batch's last step."""
    out = []
    for seed in range(50):
        scorer = tiny_tagger(seed, normalisation, V=3, scale=3.0)
        scorer.eos = EOS
        batch = tiny_batch(seed, B=5, T=7, V=3, lengths=[7, 2, 5, 7, 3])
        if _finishes_early(scorer, batch):
            out.append((scorer, batch))
        if len(out) == n:
            return out
    raise AssertionError("no batch with an early-finished sentence")


@pytest.mark.parametrize("normalisation", ["local", "global"])
@pytest.mark.parametrize("decoder", list(_decoders()))
def test_a_sentence_decodes_the_same_alone_and_in_any_batch(float64_default, normalisation, decoder):
    decode = _decoders()[decoder]
    for scorer, batch in _cases(normalisation):
        with torch.no_grad():
            alone = [_fields(decode(scorer, _rows(batch, [i]))) for i in range(5)]
            for order in ([0, 1, 2, 3, 4], [4, 2, 0], [1, 3], [3, 1, 4, 0, 2]):
                mixed = _fields(decode(scorer, _rows(batch, order)))
                for pos, i in enumerate(order):
                    for name, got in mixed.items():
                        want, got_i = alone[i][name][0], got[pos]
                        if got_i.dtype.is_floating_point:
                            torch.testing.assert_close(got_i, want, rtol=0, atol=1e-9,
                                                       msg=f"{name} of sentence {i} in {order}")
                        elif name.endswith("labels"):     # the alone run stops when its sentence is done:
                            n = want.shape[-1]                 # later steps of a batch add eos (= padding 0)
                            assert torch.equal(got_i[..., :n], want) and not got_i[..., n:].any(), (name, i, order)
                        else:
                            assert torch.equal(got_i, want), (name, i, order)
