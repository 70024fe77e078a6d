"""Mask-predict (Ghazvininejad et al. 2019) against a per-candidate reference loop on a toy
conditional MLM (random tables: conditionals depend on the source, the whole sequence and the
position; a length predictor)."""
from __future__ import annotations

import pytest
import torch

from components.config import ConfigError
from components.inference.mask_predict import MaskPredictConfig, mask_predict
from tests.energies.test_mlm_energy import CondTableMLM, SourceBatch, TableMLM


def sources(B: int = 4, S: int = 3, seed: int = 0) -> SourceBatch:
    g = torch.Generator().manual_seed(seed)
    src_len = torch.tensor([3, 1, 2, 3][:B])
    return SourceBatch(torch.randint(1, 9, (B, S), generator=g), torch.arange(S)[None] < src_len[:, None])


def reference(model, batch, iterations: int, k: int, scale: float = 1.0):
    """One source and one candidate length at a time, plain Python over positions; each of the k most
    probable lengths times ``scale``, rounded (half to even) into 1 .. max_len."""
    ctx = model.encode(batch)
    logl = model.predict_length(ctx)
    out = []
    for b in range(len(ctx)):
        lens = [min(logl.shape[1] - 1, max(1, round(L * scale)))
                for L in sorted(range(1, logl.shape[1]), key=lambda L: -float(logl[b, L]))[:k]]
        best = None
        for L in lens:
            tokens, probs = [0] * L, [0.0] * L
            remask = list(range(L))
            for i in range(iterations):
                if i > 0:
                    n = (L * (iterations - i)) // iterations
                    if n == 0:
                        break
                    remask = sorted(range(L), key=lambda t: (probs[t], t))[:n]
                inp = torch.tensor([[model.mask_id if t in remask else tokens[t] for t in range(L)]])
                p = torch.softmax(model.conditionals(inp, torch.ones(1, L, dtype=torch.bool), ctx,
                                                     torch.tensor([b]))[0].double(), -1)
                for t in remask:
                    probs[t], tokens[t] = float(p[t].max()), int(p[t].argmax())
            score = sum(torch.log(torch.tensor(probs, dtype=torch.float64))) / L
            if best is None or float(score) > best[0]:
                best = (float(score), L, tokens)
        out.append(best)
    return out


@pytest.mark.parametrize("iterations,k,scale", [(1, 1, 1.0), (1, 3, 1.0), (2, 2, 1.0), (3, 3, 1.0), (10, 2, 1.0),
                                                (3, 3, 0.5), (2, 2, 1.5), (3, 1, 2.0)])
def test_matches_reference(iterations, k, scale):
    model = CondTableMLM(V=4, N=4, n_ctx=5, seed=1, allowed=[True, True, False, True])
    batch = sources()
    res = mask_predict(model, batch, MaskPredictConfig(iterations=iterations, length_candidates=k, length_scale=scale))
    for b, (score, L, tokens) in enumerate(reference(model, batch, iterations, k, scale)):
        assert int(res.lengths[b]) == L
        assert res.tokens[b, :L].tolist() == tokens and bool((res.tokens[b, L:] == 0).all())
        assert res.mask[b].tolist() == [t < L for t in range(res.mask.shape[1])]
        assert float(res.log_prob[b]) == pytest.approx(score, abs=1e-12)


def test_one_iteration_is_the_argmax_of_the_all_mask_conditionals():
    model = CondTableMLM(V=4, N=4, n_ctx=5, seed=2)
    batch = sources(seed=3)
    res = mask_predict(model, batch, MaskPredictConfig(iterations=1, length_candidates=1))
    ctx = model.encode(batch)
    want_len = model.predict_length(ctx)[:, 1:].argmax(1) + 1
    assert torch.equal(res.lengths, want_len)
    for b in range(4):
        L = int(want_len[b])
        logits = model.conditionals(torch.full((1, L), model.mask_id), torch.ones(1, L, dtype=torch.bool), ctx,
                                    torch.tensor([b]))[0]
        assert res.tokens[b, :L].tolist() == logits.argmax(-1).tolist()
        want = torch.log_softmax(logits.double(), -1).max(-1).values.mean()
        assert float(res.log_prob[b]) == pytest.approx(float(want), abs=1e-12)


def test_candidates_and_allowed_ids():
    model = CondTableMLM(V=4, N=4, n_ctx=5, seed=4, allowed=[False, True, True, False])
    batch = sources(seed=5)
    res = mask_predict(model, batch, MaskPredictConfig(iterations=4, length_candidates=3))
    logl = model.predict_length(model.encode(batch))
    for b in range(4):
        top = sorted(range(1, 5), key=lambda L: -float(logl[b, L]))[:3]
        assert res.candidate_lengths[b].tolist() == top and int(res.lengths[b]) in top
        assert float(res.log_prob[b]) == float(res.candidate_log_prob[b].max())
        torch.testing.assert_close(res.candidate_length_log_prob[b], logl[b, top])
    assert set(res.tokens[res.mask].unique().tolist()) <= {1, 2}


def test_bad_input():
    model = CondTableMLM(V=4, N=4, n_ctx=5)
    batch = sources()
    with pytest.raises(ValueError, match="empty source"):
        mask_predict(model, SourceBatch(batch.words, batch.src_mask & torch.tensor([True, True, True])[None]
                                        & torch.tensor([[True], [False], [True], [True]])))
    with pytest.raises(ValueError, match="length_candidates 5"):
        mask_predict(model, batch, MaskPredictConfig(length_candidates=5))
    with pytest.raises(TypeError, match="predict_length"):
        mask_predict(TableMLM(), batch)
    for key in ("iterations", "length_candidates", "length_scale"):
        with pytest.raises(ConfigError, match=key):
            MaskPredictConfig(**{key: 0})
