"""The Transformer MLMs of components.models.mlm: the MaskedLM contract, bidirectionality,
padding invariance, context gathering by ``rows``, disallowed ids, length prediction, bad input."""
from dataclasses import dataclass

import pytest
import torch

from components.config import ConfigError
from components.models.mlm import (CMLMConfig, CMLMContext, ConditionalMLM, MaskedLM, TransformerMLM,
                                   TransformerMLMConfig)

SRC_V, TGT_V = 11, 12                 # target: pad 0, unk 1, eos 2, tokens 3..11
CCFG = CMLMConfig(d_model=16, heads=2, encoder_layers=2, decoder_layers=2, ff=24, dropout=0.1,
                  max_source_len=10, max_target_len=9)
UCFG = TransformerMLMConfig(d_model=16, heads=2, layers=2, ff=24, dropout=0.1, max_len=10)
ATOL = 1e-5


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


@dataclass
class Src:                            # duck-typed TranslationBatch (encode reads only these)
    words: torch.Tensor
    src_mask: torch.Tensor


def src_batch(rows: list[list[int]], extra: int = 0) -> Src:
    S = max(map(len, rows)) + extra
    words = torch.zeros(len(rows), S, dtype=torch.long)
    for i, r in enumerate(rows):
        words[i, :len(r)] = torch.tensor(r)
    return Src(words, torch.arange(S)[None] < torch.tensor([len(r) for r in rows])[:, None])


def tgt_batch(rows: list[list[int]], extra: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(map(len, rows)) + extra
    tok = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        tok[i, :len(r)] = torch.tensor(r)
    return tok, torch.arange(T)[None] < torch.tensor([len(r) for r in rows])[:, None]


def gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest change of the finite (allowed-id) logits."""
    return float((a[..., 3:] - b[..., 3:]).detach().abs().max())


def cmlm(seed=0) -> ConditionalMLM:
    return ConditionalMLM(SRC_V, TGT_V, CCFG, seed=seed).eval()


def umlm(seed=0) -> TransformerMLM:
    return TransformerMLM(TGT_V, UCFG, seed=seed).eval()


SOURCES = [[1, 2, 3, 4], [5, 6], [7, 8, 9, 10, 1, 2, 3]]
M = TGT_V                              # [MASK]
TARGETS = [[3, M, 5, 6, M], [7, 8], [M, 9, 10, 11, 3, M]]


# ----------------------------------------------------------------------------- contract, shapes

def test_both_satisfy_the_masked_lm_protocol():
    for m in (cmlm(), umlm()):
        assert isinstance(m, MaskedLM)
        assert m.vocab_size == TGT_V and m.mask_id == TGT_V and m.single_site is False
        assert m.allowed.dtype == torch.bool and m.allowed.shape == (TGT_V,)
    assert umlm().encode(None) is None


def test_shapes():
    m = cmlm()
    ctx = m.encode(src_batch(SOURCES))
    assert isinstance(ctx, CMLMContext) and ctx.n_instances == 3
    assert ctx.memory.shape == (3, 1 + 7, 16) and ctx.memory_mask.shape == (3, 8)
    assert ctx.memory_mask.sum(1).tolist() == [5, 3, 8]          # [LENGTH] + the source tokens
    tok, mask = tgt_batch(TARGETS)
    rows = torch.tensor([0, 1, 2, 2, 0])
    tok5, mask5 = tok[rows], mask[rows]
    assert m.conditionals(tok5, mask5, ctx, rows).shape == (5, 6, TGT_V)
    assert m.predict_length(ctx).shape == (3, CCFG.max_target_len + 1)
    assert umlm().conditionals(tok, mask).shape == (3, 6, TGT_V)


def test_seed_fixes_the_weights_without_touching_the_global_generator():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a, b = cmlm(seed=3), cmlm(seed=3)
    assert torch.equal(torch.rand(1), before)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    c = cmlm(seed=4)
    assert not torch.equal(a.tgt_embed.tok.weight, c.tgt_embed.tok.weight)


# ----------------------------------------------------------------------------- bidirectionality

def test_conditional_logits_read_tokens_after_the_position():
    m = cmlm()
    ctx = m.encode(src_batch(SOURCES[:1]))
    tok, mask = tgt_batch(TARGETS[:1])
    base = m.conditionals(tok, mask, ctx)
    tok2 = tok.clone()
    tok2[0, 3] = 9                                     # a token after position 1 (a [MASK] there)
    changed = m.conditionals(tok2, mask, ctx)
    assert gap(base[0, 1], changed[0, 1]) > 1e-3
    assert gap(base[0, 0], changed[0, 0]) > 1e-3


def test_unconditional_logits_read_tokens_after_the_position():
    m = umlm()
    tok, mask = tgt_batch(TARGETS[:1])
    tok2 = tok.clone()
    tok2[0, 4] = 4
    assert gap(m.conditionals(tok, mask)[0, 1], m.conditionals(tok2, mask)[0, 1]) > 1e-3


def test_conditional_logits_depend_on_the_source():
    m = cmlm()
    tok, mask = tgt_batch(TARGETS[:1])
    a = m.conditionals(tok, mask, m.encode(src_batch([[1, 2, 3, 4]])))
    b = m.conditionals(tok, mask, m.encode(src_batch([[1, 2, 3, 5]])))
    assert gap(a, b) > 1e-3


# ----------------------------------------------------------------------------- padding and batching

def test_conditional_rows_do_not_see_padding_or_other_rows():
    m = cmlm()
    tok, mask = tgt_batch(TARGETS)
    together = m.conditionals(tok, mask, m.encode(src_batch(SOURCES)))
    padded = m.conditionals(*tgt_batch(TARGETS, extra=2), m.encode(src_batch(SOURCES, extra=3)))
    for i, (s, t) in enumerate(zip(SOURCES, TARGETS)):
        alone = m.conditionals(*tgt_batch([t]), m.encode(src_batch([s])))[0]
        n = len(t)
        torch.testing.assert_close(together[i, :n], alone[:n], atol=ATOL, rtol=0)
        torch.testing.assert_close(padded[i, :n], alone[:n], atol=ATOL, rtol=0)


def test_length_prediction_does_not_see_padding_or_other_rows():
    m = cmlm()
    together = m.predict_length(m.encode(src_batch(SOURCES, extra=2)))
    for i, s in enumerate(SOURCES):
        alone = m.predict_length(m.encode(src_batch([s])))[0]
        torch.testing.assert_close(together[i], alone, atol=ATOL, rtol=0)


def test_unconditional_rows_do_not_see_padding_or_other_rows():
    m = umlm()
    together = m.conditionals(*tgt_batch(TARGETS, extra=3))
    for i, t in enumerate(TARGETS):
        alone = m.conditionals(*tgt_batch([t]))[0]
        torch.testing.assert_close(together[i, :len(t)], alone, atol=ATOL, rtol=0)


def test_rows_gather_the_context_like_re_encoding_each_source():
    m = cmlm()
    ctx = m.encode(src_batch(SOURCES, extra=1))
    rows = torch.tensor([2, 0, 0, 1, 2])
    targets = [TARGETS[2], TARGETS[0], [4, 4, M, 5, 6], [M, M], [3, 3, M]]
    tok, mask = tgt_batch(targets)
    shared = m.conditionals(tok, mask, ctx, rows)
    for r, t in enumerate(targets):
        own = m.conditionals(*tgt_batch([t]), m.encode(src_batch([SOURCES[int(rows[r])]])), torch.tensor([0]))[0]
        torch.testing.assert_close(shared[r, :len(t)], own, atol=ATOL, rtol=0)


def test_train_mode_uses_dropout_and_eval_mode_is_deterministic():
    m = cmlm()
    ctx = m.encode(src_batch(SOURCES))
    tok, mask = tgt_batch(TARGETS)
    assert torch.equal(m.conditionals(tok, mask, ctx), m.conditionals(tok, mask, ctx))
    m.train()
    torch.manual_seed(0)
    a = m.conditionals(tok, mask, ctx)
    b = m.conditionals(tok, mask, ctx)
    assert gap(a[mask], b[mask]) > 1e-4


# ----------------------------------------------------------------------------- outputs

def test_disallowed_ids_get_minus_inf_and_only_those():
    m = cmlm()
    assert m.allowed.tolist() == [False, False, False] + [True] * (TGT_V - 3)      # pad, unk, eos
    logits = m.conditionals(*tgt_batch(TARGETS), m.encode(src_batch(SOURCES)))
    assert torch.isneginf(logits[..., :3]).all()
    assert torch.isfinite(logits[..., 3:]).all()
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:2]))


def test_special_ids_are_constructor_arguments_and_allowed_overrides_them():
    m = ConditionalMLM(SRC_V, TGT_V, CCFG, seed=0, pad=5, unk=6, eos=7)
    assert (~m.allowed).nonzero().flatten().tolist() == [5, 6, 7] and m.eos == 7
    allowed = torch.ones(TGT_V, dtype=torch.bool)
    allowed[4] = False
    m = ConditionalMLM(SRC_V, TGT_V, CCFG, seed=0, allowed=allowed).eval()
    logits = m.conditionals(*tgt_batch(TARGETS), m.encode(src_batch(SOURCES)))
    assert torch.isneginf(logits[..., 4]).all() and torch.isfinite(logits[..., :4]).all()
    u = TransformerMLM(TGT_V, UCFG, seed=0, allowed=allowed).eval()
    assert torch.isneginf(u.conditionals(*tgt_batch(TARGETS))[..., 4]).all()
    with pytest.raises(ValueError, match="eos"):
        ConditionalMLM(SRC_V, TGT_V, CCFG, eos=TGT_V)
    with pytest.raises(ValueError, match="allowed"):
        ConditionalMLM(SRC_V, TGT_V, CCFG, allowed=torch.ones(TGT_V - 1, dtype=torch.bool))


def test_predict_length_is_a_distribution_over_lengths_one_and_up():
    m = cmlm()
    lp = m.predict_length(m.encode(src_batch(SOURCES)))
    assert torch.isneginf(lp[:, 0]).all()
    assert torch.isfinite(lp[:, 1:]).all()
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(3))


def test_untied_output_layer():
    cfg = CMLMConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=24, tie_embeddings=False)
    m = ConditionalMLM(SRC_V, TGT_V, cfg, seed=0).eval()
    assert m.out.weight.shape == (TGT_V, 16)
    assert m.conditionals(*tgt_batch(TARGETS), m.encode(src_batch(SOURCES))).shape == (3, 6, TGT_V)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kw, field", [({"d_model": 0}, "d_model"), ({"heads": 3}, "heads"),
                                       ({"encoder_layers": 0}, "encoder_layers"),
                                       ({"decoder_layers": -1}, "decoder_layers"), ({"ff": 0}, "ff"),
                                       ({"dropout": 1.0}, "dropout"), ({"max_source_len": 0}, "max_source_len"),
                                       ({"max_target_len": 0}, "max_target_len")])
def test_cmlm_config_checks_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        CMLMConfig(**kw)


@pytest.mark.parametrize("kw, field", [({"d_model": -2}, "d_model"), ({"heads": 0}, "heads"),
                                       ({"layers": 0}, "layers"), ({"dropout": -0.1}, "dropout"),
                                       ({"max_len": 0}, "max_len")])
def test_transformer_mlm_config_checks_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        TransformerMLMConfig(**kw)


def test_empty_source_row_is_an_error():
    m = cmlm()
    b = src_batch(SOURCES)
    b.src_mask[1] = False
    with pytest.raises(ValueError, match=r"empty source row\(s\) \[1\]"):
        m.encode(b)
    with pytest.raises(ValueError, match="empty source"):
        m.encode(Src(torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 0, dtype=torch.bool)))


def test_unknown_ids_are_errors():
    m = cmlm()
    with pytest.raises(ValueError, match=f"unknown source token id {SRC_V} in words at row 1, position 0"):
        m.encode(src_batch([[1, 2], [SRC_V]]))
    ctx = m.encode(src_batch(SOURCES))
    tok, mask = tgt_batch(TARGETS)
    tok[2, 1] = TGT_V + 1
    with pytest.raises(ValueError, match=f"unknown token id {TGT_V + 1} at row 2, position 1"):
        m.conditionals(tok, mask, ctx)
    with pytest.raises(ValueError, match="unknown token id -1"):
        umlm().conditionals(torch.tensor([[3, -1]]), torch.ones(1, 2, dtype=torch.bool))


def test_bad_rows_context_and_lengths_are_errors():
    m = cmlm()
    ctx = m.encode(src_batch(SOURCES))
    tok, mask = tgt_batch(TARGETS)
    with pytest.raises(ValueError, match="rows must index"):
        m.conditionals(tok, mask, ctx, torch.tensor([0, 1, 3]))
    with pytest.raises(ValueError, match="rows must be long"):
        m.conditionals(tok, mask, ctx, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="rows is None"):
        m.conditionals(tok[:2], mask[:2], ctx)
    with pytest.raises(ValueError, match="CMLMContext"):
        m.conditionals(tok, mask, None, torch.arange(3))
    with pytest.raises(ValueError, match="max length 9"):
        m.conditionals(*tgt_batch([[3] * 10]), ctx, torch.tensor([0]))
    with pytest.raises(ValueError, match="max length 10"):
        m.encode(src_batch([[1] * 11]))
    with pytest.raises(ValueError, match="left-aligned"):
        m.conditionals(tok, torch.tensor([[True] * 5 + [False], [True, False, True] + [False] * 3, [True] * 6]), ctx)
    with pytest.raises(ValueError, match="left-aligned"):
        m.encode(Src(torch.ones(1, 3, dtype=torch.long), torch.tensor([[True, False, True]])))
