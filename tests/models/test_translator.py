from dataclasses import dataclass, replace

import pytest
import torch

from components.inference.beam import BeamState, StepScorer
from components.models.translator import AttentionTranslator, TranslatorConfig, build_translator
from components.training.normalisation import centre_log_z
from components.training.search_aware import log_normalisers

N_SRC, N_TGT, EOS = 9, 10, 9          # source: pad 0, tokens 1..8; target: tokens 1..8, eos 9
TINY = TranslatorConfig(embedding_dim=6, hidden=8, attention_dim=7, dropout=0.0)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


@dataclass
class Batch:                           # duck-typed TranslationBatch
    words: torch.Tensor
    src_mask: torch.Tensor
    tags: torch.Tensor
    mask: torch.Tensor
    decode_mask: torch.Tensor


def make_batch(sources: list[list[int]], targets: list[list[int]], extra_src: int = 0, extra_dec: int = 2) -> Batch:
    """Right-padded tensors; targets end in eos; the decoder may take len(target) + extra_dec steps."""
    S = max(map(len, sources)) + extra_src
    T = max(map(len, targets)) + 1
    B = len(sources)
    words = torch.zeros(B, S, dtype=torch.long)
    tags = torch.zeros(B, T, dtype=torch.long)
    for i, (s, t) in enumerate(zip(sources, targets)):
        words[i, :len(s)] = torch.tensor(s)
        tags[i, :len(t) + 1] = torch.tensor(t + [EOS])
    lens = torch.tensor([len(t) + 1 for t in targets])
    mask = torch.arange(T)[None] < lens[:, None]
    decode_mask = torch.arange(T + extra_dec)[None] < (lens + extra_dec)[:, None]
    return Batch(words, words != 0, tags, mask, decode_mask)


def model(cfg=TINY, seed=0) -> AttentionTranslator:
    return build_translator(cfg, N_SRC, N_TGT, eos=EOS, seed=seed).eval()


SOURCES = [[1, 2, 3], [4, 5], [6, 7, 8, 1, 2]]
TARGETS = [[3, 2, 1], [5, 4], [2, 1, 8, 7, 6]]


def teacher_forced(m: AttentionTranslator, batch: Batch, k: int = 1) -> torch.Tensor:
    """Step scores [B, T, V] with the gold symbol fed (item 0 of a beam of k)."""
    state, _ = m.start(batch, k)
    prev, out = None, []
    for t in range(batch.tags.shape[1]):
        scores, state = m.step(state, prev)
        out.append(scores[:, 0])
        prev = m.embed_ids(batch.tags[:, t])[:, None].expand(-1, k, -1)
    return torch.stack(out, 1)


def test_is_a_step_scorer_with_the_attributes_decoders_read():
    m = model()
    assert isinstance(m, StepScorer)
    assert m.n_labels == N_TGT and m.eos == EOS and m.normalisation == "local"


def test_config_and_constructor_checks_name_the_field():
    for kw, field in [({"hidden": 0}, "hidden"), ({"embedding_dim": -1}, "embedding_dim"),
                      ({"attention_dim": 0}, "attention_dim"), ({"dropout": 1.0}, "dropout"),
                      ({"normalisation": "softmax"}, "normalisation")]:
        with pytest.raises(ValueError, match=field):
            TranslatorConfig(**kw)
    with pytest.raises(ValueError, match="eos"):
        build_translator(TINY, N_SRC, N_TGT, eos=N_TGT)


def test_seed_fixes_the_weights_without_touching_the_global_generator():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b = model(seed=3), model(seed=3)
    assert torch.rand(1) == before
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n
    assert not torch.equal(a.out.weight, model(seed=4).out.weight)


@pytest.mark.parametrize("k", [1, 3])
def test_start_and_step_shapes(k):
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    state, dmask = m.start(batch, k)
    B, S = batch.words.shape
    assert dmask is batch.decode_mask
    h, c = state.beam
    assert h.shape == c.shape == (B, k, TINY.hidden)
    assert state.context.states.shape == (B, S, 2 * TINY.hidden)
    assert state.context.keys.shape == (B, S, TINY.attention_dim)
    scores, state = m.step(state, None)
    assert scores.shape == (B, k, N_TGT)
    # k copies of one start (equal up to rounding: BLAS may sum rows in a different order)
    torch.testing.assert_close(scores, scores[:, :1].expand_as(scores), rtol=0, atol=1e-6)
    prev = m.embed_ids(torch.arange(B * k).reshape(B, k) % N_TGT)
    scores2, state2 = m.step(state, prev)
    assert scores2.shape == (B, k, N_TGT) and state2.beam[0].shape == (B, k, TINY.hidden)
    assert isinstance(state2, BeamState)


def test_beam_items_are_independent_and_follow_reorder():
    """Item j fed symbol y_j scores as a beam of 1 fed y_j; reordering the state moves the scores."""
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    ys = torch.tensor([1, 4, 7])
    state, _ = m.start(batch, 3)
    _, state = m.step(state, None)
    scores, _ = m.step(state, m.embed_ids(ys).expand(len(SOURCES), -1, -1))
    for j, y in enumerate(ys):
        s1, _ = m.start(batch, 1)
        _, s1 = m.step(s1, None)
        alone, _ = m.step(s1, m.embed_ids(y).expand(len(SOURCES), 1, -1))
        torch.testing.assert_close(scores[:, j], alone[:, 0], rtol=1e-5, atol=1e-6)
    # reorder: item 0 takes item 2's state -> its next scores are item 2's
    state, _ = m.start(batch, 3)
    _, state = m.step(state, None)
    _, state = m.step(state, m.embed_ids(ys).expand(len(SOURCES), -1, -1))
    idx = torch.tensor([[2, 1, 0]]).expand(len(SOURCES), -1)
    prev = m.embed_ids(torch.full((len(SOURCES), 3), 5))
    a, _ = m.step(state, prev)
    b, _ = m.step(state.reorder(idx), prev)
    torch.testing.assert_close(b, a.gather(1, idx[..., None].expand_as(a)))


def test_attention_ignores_source_padding():
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    padded = make_batch(SOURCES, TARGETS, extra_src=4)
    torch.testing.assert_close(teacher_forced(m, padded), teacher_forced(m, batch), rtol=1e-5, atol=1e-6)
    state, _ = m.start(padded, 2)
    _, w = m.attend(state.beam[0], state.context)
    assert torch.all(w[~padded.src_mask[:, None, :].expand_as(w)] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))


def test_a_row_scores_the_same_in_a_batch_and_alone():
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    together = teacher_forced(m, batch)
    for i, (s, t) in enumerate(zip(SOURCES, TARGETS)):
        alone = teacher_forced(m, make_batch([s], [t]))
        n = len(t) + 1
        torch.testing.assert_close(alone[0, :n], together[i, :n], rtol=1e-5, atol=1e-6)


def test_local_reading_is_log_softmax_of_the_global_raw_scores():
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    local = teacher_forced(m, batch)
    torch.testing.assert_close(local.logsumexp(-1), torch.zeros(local.shape[:2]), rtol=0, atol=1e-5)
    m.normalisation = "global"
    raw = teacher_forced(m, batch)
    assert not torch.allclose(raw.logsumexp(-1), torch.zeros(raw.shape[:2]), atol=1e-2)
    torch.testing.assert_close(torch.log_softmax(raw, -1), local, rtol=1e-5, atol=1e-6)


def test_embed_of_one_hot_is_the_lookup_and_mixes_linearly():
    m = model()
    ids = torch.tensor([[1, 9, 0], [3, 3, 8]])
    torch.testing.assert_close(m.embed(torch.nn.functional.one_hot(ids, N_TGT).float()), m.embed_ids(ids))
    w = torch.softmax(torch.randn(2, 3, N_TGT), -1)
    torch.testing.assert_close(m.embed(w), (w[..., None] * m.tgt_embed.weight).sum(-2))


def test_gradient_reaches_encoder_attention_and_decoder():
    m = build_translator(TranslatorConfig(embedding_dim=6, hidden=8, attention_dim=7, dropout=0.1),
                         N_SRC, N_TGT, eos=EOS).train()
    batch = make_batch(SOURCES, TARGETS)
    scores = teacher_forced(m, batch)
    loss = -(scores.gather(-1, batch.tags[..., None])[..., 0] * batch.mask).sum()
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert torch.all(m.src_embed.weight.grad[0] == 0)                    # pad row gets nothing


def greedy_decode(m: AttentionTranslator, batch: Batch, max_len: int) -> list[list[int]]:
    state, _ = m.start(batch, 1)
    B = batch.words.shape[0]
    done = torch.zeros(B, dtype=torch.bool)
    out: list[list[int]] = [[] for _ in range(B)]
    prev = None
    for _ in range(max_len):
        scores, state = m.step(state, prev)
        tok = scores[:, 0].argmax(-1)
        for i in range(B):
            if not done[i]:
                out[i].append(int(tok[i]))
        done |= tok == m.eos
        if bool(done.all()):
            break
        prev = m.embed_ids(tok)[:, None]
    return out


def test_overfits_a_reversal_task_and_greedy_decoding_reproduces_it():
    g = torch.Generator().manual_seed(0)
    sources = [torch.randint(1, 9, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
               for _ in range(20)]
    targets = [s[::-1] for s in sources]
    batch = make_batch(sources, targets)
    m = build_translator(TranslatorConfig(embedding_dim=16, hidden=32, attention_dim=32, dropout=0.0),
                         N_SRC, N_TGT, eos=EOS, seed=0)
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    torch.manual_seed(0)
    n_tok = batch.mask.sum()
    for _ in range(150):
        opt.zero_grad()
        m.train()
        scores = teacher_forced(m, batch)
        loss = -(scores.gather(-1, batch.tags[..., None])[..., 0] * batch.mask).sum() / n_tok
        loss.backward()
        opt.step()
    m.eval()
    with torch.no_grad():
        scores = teacher_forced(m, batch)
        loss = -(scores.gather(-1, batch.tags[..., None])[..., 0] * batch.mask).sum() / n_tok
        decoded = greedy_decode(m, batch, batch.decode_mask.shape[1])
    assert loss.item() < 0.1
    assert decoded == [t + [EOS] for t in targets]


def test_an_all_pad_source_row_is_a_clear_error():
    m = model()
    batch = make_batch(SOURCES, TARGETS)
    batch.words[1] = 0
    batch.src_mask[1] = False
    with pytest.raises(ValueError, match=r"source row\(s\) \[1\].*padding"):
        m.start(batch, 2)
    ok = make_batch(SOURCES, TARGETS)
    ok.src_mask[0, 0] = False                                            # a hole before real tokens
    with pytest.raises(ValueError, match="left-aligned"):
        m.start(ok, 1)
    with pytest.raises(ValueError, match="beam size"):
        m.start(make_batch(SOURCES, TARGETS), 0)


def test_decoders_with_eos_on_the_translator_match_enumeration():
    """The decoders serve the translator: a beam wide enough to keep every hypothesis returns each
    complete output (ended at its first eos, or at the horizon) with its teacher-forced score."""
    import itertools

    from components.inference.beam import beam_search, greedy, soft_beam_search
    from tests.step_scorers import score_of
    V, eos = 3, 2                                   # target: tokens 0, 1 and eos 2
    m = build_translator(TINY, N_SRC, V, eos=eos, seed=3).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(4.0)                             # spread the scores: no near-ties
    words = torch.tensor([[1, 2, 3], [4, 5, 0]])
    horizon = torch.tensor([[1, 1, 1], [1, 1, 0]]).bool()
    batch = Batch(words, words != 0, torch.zeros(2, 3, dtype=torch.long), horizon.clone(), horizon)

    def score(row: int, seq: tuple[int, ...]) -> float:
        return score_of(m, batch, row, seq)

    with torch.no_grad():
        res = beam_search(m, batch, 15)             # 1 + 2 + 4 ended by eos + 8 unfinished within a horizon of 3
        for row, T in ((0, 3), (1, 2)):
            outs = [p + (eos,) for n in range(T) for p in itertools.product((0, 1), repeat=n)]
            outs += list(itertools.product((0, 1), repeat=T))
            exact = {h: score(row, h) for h in outs}
            got = {tuple(res.beam_labels[row, i, :int(res.beam_lengths[row, i])].tolist()): float(res.beam_scores[row, i])
                   for i in range(15) if torch.isfinite(res.beam_scores[row, i])}
            assert set(got) == set(exact)
            assert all(got[h] == pytest.approx(exact[h], abs=1e-9) for h in exact)
        g = greedy(m, batch)
        soft = soft_beam_search(m, batch, 15, 1e4)
    assert torch.equal(soft.lengths, res.lengths)
    for row in range(2):
        assert soft.labels[row, :int(res.lengths[row])].tolist() == res.labels[row, :int(res.lengths[row])].tolist()
        assert float(res.score[row]) >= float(g.score[row]) - 1e-9     # the exact best beats greedy


# -- small-data settings (Sennrich & Zhang 2019) -------------------------------------------------------
SMALL_DATA = TranslatorConfig(embedding_dim=6, hidden=5, attention_dim=4, dropout=0.0, word_dropout=0.3,
                              output_dropout=0.2, tie_embeddings=True)


def test_tied_output_layer_reads_the_target_embeddings():
    """raw = E_tgt (P [h ; ctx ; y]) + b: the output weights are the embedding matrix, so a change to
    one target embedding moves that symbol's scores and no other's."""
    m = model(SMALL_DATA)
    assert not hasattr(m, "out") and m.out_proj.out_features == SMALL_DATA.embedding_dim
    feats = torch.randn(3, 2, m.out_proj.in_features)
    before = m.output(feats)
    with torch.no_grad():
        m.tgt_embed.weight[4] += 1.0
    after = m.output(feats)
    changed = (after - before).abs().amax((0, 1)) > 1e-6
    assert changed.tolist() == [i == 4 for i in range(N_TGT)]
    expected = m.out_proj(feats) @ m.tgt_embed.weight.T + m.out_bias
    torch.testing.assert_close(after, expected)


def test_word_and_output_dropout_act_in_training_only():
    batch = make_batch(SOURCES, TARGETS)
    m = model(SMALL_DATA)
    ref = teacher_forced(m, batch)                      # eval: deterministic
    torch.testing.assert_close(teacher_forced(m, batch), ref)
    m.train()
    torch.manual_seed(0)
    assert (teacher_forced(m, batch) - ref).abs().max() > 1e-4
    # word dropout zeroes whole embeddings at its rate (no rescaling)
    ids = torch.randint(1, N_TGT, (200, 50))
    x = m.embed_ids(ids)
    dropped = (x == 0).all(-1).float().mean().item()
    n = ids.numel()
    assert abs(dropped - 0.3) < 4 * (0.3 * 0.7 / n) ** 0.5
    kept = ~(x == 0).all(-1)
    torch.testing.assert_close(x[kept], m.tgt_embed(ids)[kept])


def test_small_data_settings_are_checked_by_name():
    for key, bad in (("word_dropout", 1.0), ("output_dropout", -0.1)):
        with pytest.raises(ValueError, match=key):
            TranslatorConfig(**{key: bad})


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_length_normalised_beam_picks_the_best_normalised_hypothesis_of_the_enumeration(alpha):
    """A beam wide enough to keep every hypothesis, ranking by s / lp(|y|) (Wu et al. 2016), returns
    the enumeration's argmax of the normalised score with its raw teacher-forced score; alpha 0 is
    the plain beam."""
    import itertools

    from components.inference.beam import beam_search, length_normaliser
    from tests.step_scorers import score_of
    V, eos = 3, 2
    m = build_translator(TINY, N_SRC, V, eos=eos, seed=1).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(2.0)                             # a model whose raw-score beam stops at once on row 0
    words = torch.tensor([[1, 2, 3], [4, 5, 0]])
    horizon = torch.tensor([[1, 1, 1], [1, 1, 0]]).bool()
    batch = Batch(words, words != 0, torch.zeros(2, 3, dtype=torch.long), horizon.clone(), horizon)
    with torch.no_grad():
        res = beam_search(m, batch, 15, length_penalty=alpha)
        plain = beam_search(m, batch, 15)
        same = beam_search(m, batch, 15, length_penalty=0.0)
    assert torch.equal(plain.labels, same.labels) and torch.equal(plain.beam_scores, same.beam_scores)
    assert plain.lengths[0] == 1                    # the plain beam's short bias: eos first ...
    for row, T in ((0, 3), (1, 2)):
        outs = [p + (eos,) for n in range(T) for p in itertools.product((0, 1), repeat=n)]
        outs += list(itertools.product((0, 1), repeat=T))
        norm = {h: score_of(m, batch, row, h) / float(length_normaliser(torch.tensor(len(h)), alpha)) for h in outs}
        best = max(norm, key=norm.get)
        n = int(res.lengths[row])
        assert tuple(res.labels[row, :n].tolist()) == best
        assert float(res.score[row]) == pytest.approx(score_of(m, batch, row, best), abs=1e-9)
    if alpha >= 2.0:                                # ... which the normalised ranking overturns
        assert int(res.lengths[0]) > 1
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(m, batch, 2, length_penalty=-1.0)


@pytest.mark.parametrize("tie", [True, False])
def test_centre_log_z_moves_log_z_to_zero_and_leaves_the_softmax_unchanged(tie):
    """centre_log_z (self-normalisation's start from a CE model) shifts every raw score by minus the
    mean log Z over the batches: the mean becomes 0, each step's log Z moves by exactly that constant
    (the variance is kept) and the locally normalised scores are unchanged."""
    m = model(replace(TINY, tie_embeddings=tie), seed=3)
    batch = make_batch(SOURCES, TARGETS)
    with torch.no_grad():
        m.shift_scores(7.0)                          # a CE model's large log Z
        local_before = teacher_forced(m, batch)
        z_before = log_normalisers(m, batch)
        out = centre_log_z(m, [batch])
        local_after = teacher_forced(m, batch)
        z_after = log_normalisers(m, batch)
    real = batch.mask
    assert out["mean_before"] == pytest.approx(float(z_before[real].mean()), abs=1e-5)
    assert out["shift"] == pytest.approx(-out["mean_before"])
    assert float(z_after[real].mean()) == pytest.approx(0.0, abs=1e-5)
    torch.testing.assert_close(z_after[real], z_before[real] + out["shift"], rtol=0, atol=1e-5)
    torch.testing.assert_close(local_after, local_before, rtol=0, atol=1e-5)


def test_centre_log_z_needs_a_shiftable_scorer():
    with pytest.raises(TypeError, match="Linear has no shift_scores"):
        centre_log_z(torch.nn.Linear(2, 2), [])
