import torch

from components.models.lm import LMConfig, LSTMLM


def test_lm_learns_and_ranks_frequent_sequences_as_less_perplexing():
    torch.manual_seed(0)
    frequent = torch.tensor([[1, 2, 3, 4]])
    rare = torch.tensor([[4, 1, 1, 2]])
    data = torch.cat([frequent.repeat(15, 1), rare])
    mask = torch.ones_like(data, dtype=torch.bool)
    lm = LSTMLM(5, LMConfig(dim=8, hidden=16, dropout=0.0))
    opt = torch.optim.Adam(lm.parameters(), lr=0.05)
    before = lm.perplexity(frequent, mask[:1]).item()
    for _ in range(60):
        opt.zero_grad()
        lm.train()
        lm.loss(data, mask).backward()
        opt.step()
    after_f = lm.perplexity(frequent, mask[:1]).item()
    after_r = lm.perplexity(rare, mask[:1]).item()
    assert after_f < before / 2 and after_f < after_r


def test_ragged_lengths_ignore_padding():
    torch.manual_seed(0)
    lm = LSTMLM(6, LMConfig(dim=4, hidden=8, dropout=0.0))
    ids = torch.tensor([[1, 2, 0, 0], [1, 2, 5, 5]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    nll, n = lm.token_nll(ids, mask)
    assert n.tolist() == [3, 5]
    nll_alone, _ = lm.token_nll(ids[:1, :2], mask[:1, :2])
    torch.testing.assert_close(nll[0], nll_alone[0])


def test_capped_vocabulary_keeps_the_most_frequent_training_ids_and_scores_the_rest_by_frequency():
    import math

    import pytest

    from components.training.lm import cap_vocabulary
    train = [[7, 3, 3, 9], [9, 3, 5, 7], [2]]          # counts: 3 x3, 7 x2, 9 x2, 5 x1, 2 x1
    test = [[3, 9, 11], [5, 7, 2], [3]]                 # 11 never seen in training
    tr, te, size, rare_nll = cap_vocabulary(train, test, 3)
    # kept by count, ties by the smaller id: 3 -> 0, 7 -> 1, 9 -> 2; everything else -> 3
    assert size == 4
    assert tr == [[1, 0, 0, 2], [2, 0, 3, 1], [3]]
    assert te == [[0, 2, 3], [3, 1, 3], [0]]
    # p(w | rare class), add-one over the rare types {5, 2} and "unseen": (count + 1) / (2 + 2 + 1)
    p = {5: 2 / 5, 2: 2 / 5, 11: 1 / 5}
    assert rare_nll == pytest.approx([-math.log(p[11]), -math.log(p[5]) - math.log(p[2]), 0.0])
    # a cap above the vocabulary renumbers without an unknown in use
    tr, te, size, rare_nll = cap_vocabulary(train, test, 10)
    assert size == 11 and max(max(s) for s in tr) == 4 and te[0][2] == 10
    assert rare_nll[1] == 0.0 and rare_nll[0] == pytest.approx(-math.log(1.0))   # no rare types: unseen gets 1/1
    with pytest.raises(ValueError, match="max_words must be positive"):
        cap_vocabulary(train, test, 0)


def test_a_capped_word_lm_still_ranks_sentences_of_rare_words_as_more_perplexing():
    """The rare-word class keeps Sec. 6.2's signal: with every rare word sharing one cheap id, a
    sentence of hapaxes would look as predictable as a sentence of frequent words."""
    from types import SimpleNamespace

    from components.models.lm import LMConfig
    from components.training.lm import tagging_lm_perplexities

    class Vocab(dict):
        unk_id = 0

        def index(self, w, default):
            return self.get(w, default)

    common = "the a of and to in is".split()
    rare = [f"w{i}" for i in range(60)]
    vocab = Vocab({w: i + 1 for i, w in enumerate(common + rare)})
    sent = lambda words: SimpleNamespace(words=words)  # noqa: E731
    train = SimpleNamespace(sentences=[sent(common[i % 7:] + common[:i % 7] + [rare[i]]) for i in range(60)] * 3)
    test = SimpleNamespace(sentences=[sent(common[:4]), sent(rare[:4])])
    ppl = tagging_lm_perplexities("words", train, test, vocab, 0, LMConfig(dim=8, hidden=16, dropout=0.0),
                                  epochs=3, max_words=8)
    assert ppl[1] > 3 * ppl[0]
