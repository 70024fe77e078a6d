"""MLM energies (thesis Sec. 6.2) against their definition, one masked position at a time.

The toy models here (a random-table MLM whose conditionals are an arbitrary function of the whole
sequence, the position and the instance's context, and so inconsistent with any joint; its
single-site and conditional variants) are shared by the MCMC and mask-predict tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from components.energies.mlm import MLMEnergy, MLMEnergyConfig, MLMScorer
from components.energies.registry import ENERGIES
from components.energies.mlm import sequence_energy
from components.models.mlm import BiLSTMMLM, BiLSTMMLMConfig, check_tokens

DT = torch.float64


# ------------------------------------------------------------------------------------------------
# Toy masked LMs
# ------------------------------------------------------------------------------------------------

@dataclass
class MLMBatch:
    ctx: torch.Tensor        # long [B]: which table slice (the instance's "source")
    mask: torch.Tensor       # bool [B, N], target positions


class TableMLM(nn.Module):
    """``logits[r, t] = table[context[rows[r]], code(tokens_r), t]`` with ``code`` the id of the
    whole token sequence (its [MASK]s, its padding, and — unless ``single_site`` — the token at t
    itself; a ``single_site`` model reads the sequence with t replaced by [MASK]). Random table:
    the conditionals are consistent with no joint distribution. Counts its calls and rows."""

    def __init__(self, V: int = 3, N: int = 3, n_ctx: int = 2, single_site: bool = False, seed: int = 0,
                 allowed: list[bool] | None = None, scale: float = 1.5):
        super().__init__()
        self.vocab_size, self.mask_id, self.single_site, self.N = V, V, single_site, N
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("table", torch.randn(n_ctx, (V + 2) ** N, N, V, generator=g, dtype=DT) * scale)
        self.register_buffer("allowed", torch.tensor(allowed if allowed is not None else [True] * V))
        self.calls = 0
        self.rows_seen = 0

    def encode(self, batch):
        return batch.ctx

    def conditionals(self, tokens, mask, context, rows):
        check_tokens(tokens, mask, self.vocab_size, "TableMLM")
        self.calls += 1
        self.rows_seen += tokens.shape[0]
        V, N = self.vocab_size, self.N
        R, n = tokens.shape
        tok = F.pad(tokens.masked_fill(~mask, V + 1), (0, N - n), value=V + 1)
        powers = (V + 2) ** torch.arange(N)
        code = (tok * powers).sum(1, keepdim=True).expand(R, n)
        if self.single_site:                                    # the code of y with t masked
            code = code + (V - tok[:, :n]) * powers[:n]
        logits = self.table[context[rows][:, None], code, torch.arange(n)[None]]
        return logits.masked_fill(~self.allowed, float("-inf"))


@dataclass
class SourceBatch:
    words: torch.Tensor      # long [B, S] source ids
    src_mask: torch.Tensor   # bool [B, S]
    mask: torch.Tensor | None = None


class CondTableMLM(TableMLM):
    """A toy conditional MLM: ``encode`` reads ``words``/``src_mask`` (context = a hash of the
    source), and ``predict_length(context)`` gives log-probs [B, N + 1] over target lengths."""

    def __init__(self, V: int = 4, N: int = 4, n_ctx: int = 5, seed: int = 0, **kw):
        super().__init__(V=V, N=N, n_ctx=n_ctx, seed=seed, **kw)
        g = torch.Generator().manual_seed(seed + 7)
        self.register_buffer("length_table", torch.randn(n_ctx, N + 1, generator=g, dtype=DT) * 2)

    def encode(self, batch):
        w = batch.words.masked_fill(~batch.src_mask, 0)
        return (w * (torch.arange(w.shape[1]) + 1)).sum(1) % self.table.shape[0]

    def predict_length(self, context):
        return torch.log_softmax(self.length_table[context], -1)


def ragged_batch(B: int = 3, N: int = 3, lengths=(3, 1, 2), n_ctx: int = 2) -> MLMBatch:
    mask = torch.arange(N)[None] < torch.tensor(lengths)[:, None]
    return MLMBatch(torch.arange(B) % n_ctx, mask)


def loop_energy(model, batch: MLMBatch, y: torch.Tensor, kind: str) -> torch.Tensor:
    """The definition: for each row and valid position t, mask t, run ONE pass on that row alone,
    read the logits at t; sum -logit[y_t] (raw) or -log_softmax[y_t] (norm)."""
    ctx = model.encode(batch)
    out = []
    for r in range(y.shape[0]):
        n = int(batch.mask[r].sum())
        e = torch.zeros((), dtype=DT)
        for t in range(n):
            tok = y[r:r + 1].masked_fill(~batch.mask[r:r + 1], 0).clone()
            tok[0, t] = model.mask_id
            logits = model.conditionals(tok, batch.mask[r:r + 1], ctx, torch.tensor([r]))[0, t]
            s = logits if kind == "raw" else torch.log_softmax(logits, -1)
            e = e - s[y[r, t]]
        out.append(e)
    return torch.stack(out)


def random_tokens(mask: torch.Tensor, V: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, mask.shape, generator=g).masked_fill(~mask, 0)


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["raw", "norm"])
@pytest.mark.parametrize("single_site", [False, True])
def test_batched_energy_equals_one_position_loop(kind, single_site):
    model = TableMLM(V=4, N=4, n_ctx=3, single_site=single_site, seed=1)
    batch = ragged_batch(B=4, N=4, lengths=(4, 1, 3, 2), n_ctx=3)
    for seed in range(3):
        y = random_tokens(batch.mask, 4, seed)
        want = loop_energy(model, batch, y, kind)
        energy = MLMEnergy(model, kind)
        model.calls = 0
        got = energy.energy(batch, y)
        assert model.calls == 1                                  # ONE batched conditionals pass
        assert model.rows_seen and got.shape == (4,)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_non_single_site_builds_one_copy_per_valid_position():
    model = TableMLM(V=3, N=3, n_ctx=2, seed=2)
    batch = ragged_batch()
    y = random_tokens(batch.mask, 3)
    model.rows_seen = 0
    MLMEnergy(model, "raw").energy(batch, y)
    assert model.rows_seen == int(batch.mask.sum())               # 3 + 1 + 2 masked copies, no padding copies


def test_max_rows_chunks_the_pass():
    model = TableMLM(V=3, N=3, n_ctx=2, seed=2)
    batch = ragged_batch()
    y = random_tokens(batch.mask, 3, 4)
    whole = MLMEnergy(model, "norm").energy(batch, y)
    model.calls = 0
    chunked = ENERGIES.build("mlm_norm", {"max_rows": 4}, model=model).energy(batch, y)
    assert model.calls == 2                                       # 6 copies in chunks of 4
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=0)


def test_raw_and_norm_definitions():
    """E_raw = -sum log phi_t(y); E_norm = E_raw + sum_t logsumexp(log phi_t) (local normalisation)."""
    model = TableMLM(V=3, N=3, n_ctx=2, seed=5)
    batch = ragged_batch()
    y = random_tokens(batch.mask, 3, 1)
    ctx = model.encode(batch)
    raw = MLMEnergy(model, "raw").energy(batch, y)
    norm = MLMEnergy(model, "norm").energy(batch, y)
    lse = torch.zeros(3, dtype=DT)
    phi = torch.zeros(3, dtype=DT)
    for r in range(3):
        for t in range(int(batch.mask[r].sum())):
            tok = y[r:r + 1].clone()
            tok[0, t] = 3
            lg = model.conditionals(tok, batch.mask[r:r + 1], ctx, torch.tensor([r]))[0, t]
            lse[r] += torch.logsumexp(lg, 0)
            phi[r] += lg[y[r, t]]
    torch.testing.assert_close(raw, -phi, atol=1e-12, rtol=0)
    torch.testing.assert_close(norm, raw + lse, atol=1e-12, rtol=0)
    assert bool((norm > 0).all())                                 # -log of probabilities


def test_sequence_energy_matches_single_site_pass():
    model = TableMLM(V=3, N=3, n_ctx=2, single_site=True, seed=3)
    batch = ragged_batch()
    y = random_tokens(batch.mask, 3, 2)
    logits = model.conditionals(y, batch.mask, model.encode(batch), torch.arange(3))
    for kind in ("raw", "norm"):
        want = sequence_energy(logits, y, batch.mask, kind)
        torch.testing.assert_close(MLMEnergy(model, kind).energy(batch, y), want, atol=1e-12, rtol=0)


def test_bilstm_mlm_energy_equals_loop():
    """The BiLSTM MLM is single-site: its one-pass energy is the masked-copies definition."""
    model = BiLSTMMLM(4, BiLSTMMLMConfig(embedding_dim=4, hidden=5), seed=0).double().eval()
    batch = ragged_batch(B=3, N=4, lengths=(4, 1, 3))
    y = random_tokens(batch.mask, 4, 3)
    with torch.no_grad():
        for kind in ("raw", "norm"):
            torch.testing.assert_close(MLMEnergy(model, kind).energy(batch, y), loop_energy(model, batch, y, kind),
                                       atol=1e-10, rtol=0)


def test_proposal_logits_mask_the_block():
    model = TableMLM(V=3, N=3, n_ctx=2, seed=6)
    batch = ragged_batch()
    y = random_tokens(batch.mask, 3, 5)
    energy = MLMEnergy(model, "raw")
    pos = torch.tensor([[True, False, True], [True, False, False], [False, True, False]])
    model.calls = 0
    got = energy.proposal_logits(batch.ctx, y, batch.mask, torch.arange(3), pos)
    assert model.calls == 1 and got.shape == (3, 3, 3)
    want = model.conditionals(y.masked_fill(pos, 3), batch.mask, batch.ctx, torch.arange(3))
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(ValueError, match="positions outside"):
        energy.proposal_logits(batch.ctx, y, batch.mask, torch.arange(3), torch.ones(3, 3, dtype=torch.bool))


def test_disallowed_ids_have_infinite_energy_and_bad_input_fails():
    model = TableMLM(V=3, N=3, n_ctx=2, seed=7, allowed=[True, False, True])
    batch = ragged_batch()
    energy = MLMEnergy(model, "norm")
    y = torch.tensor([[0, 2, 0], [2, 0, 0], [0, 1, 0]])          # row 2 holds the disallowed id 1
    e = energy.energy(batch, y)
    assert bool(torch.isfinite(e[:2]).all()) and e[2] == float("inf")
    with pytest.raises(ValueError, match="unknown token id 3"):
        energy.energy(batch, torch.full((3, 3), 3))
    with pytest.raises(ValueError, match="relaxed"):
        energy.energy(batch, F.one_hot(y, 3).double())
    with pytest.raises(ValueError, match="empty sequence"):
        energy.score(batch.ctx, y, torch.zeros(3, 3, dtype=torch.bool), torch.arange(3))
    with pytest.raises(ValueError, match="kind"):
        MLMEnergy(model, "local")
    with pytest.raises(TypeError, match="MaskedLM"):
        MLMEnergy(object(), "raw")
    with pytest.raises(ValueError, match="max_rows"):
        MLMEnergyConfig(max_rows=-1)


def test_registry_entries():
    model = TableMLM()
    for name, kind in (("mlm_raw", "raw"), ("mlm_norm", "norm")):
        e = ENERGIES.build(name, model=model)
        assert ENERGIES[name].meta["data"] == "mlm" and e.kind == kind and isinstance(e, MLMScorer)
        assert e.n_labels == 3 and e.mask_id == 3
