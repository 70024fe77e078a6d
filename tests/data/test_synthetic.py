"""Synthetic generators against brute-force enumeration; the phoneme reader on small fixture files."""
import itertools
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from components.data.synthetic import (HMM_CONCENTRATION, MAX_SEQUENCES, HMMConfig, HMMGenerator, PalindromeConfig,
                                       PalindromeGenerator, SequenceSet, all_sequences, exact_entropy, load_phonemes,
                                       make_generator, true_nll)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


def product(V, T):
    return torch.tensor(list(itertools.product(range(V), repeat=T)), dtype=torch.long)


def test_all_sequences_is_the_lexicographic_product_and_capped():
    assert torch.equal(all_sequences(3, 4), product(3, 4))
    assert torch.equal(all_sequences(5, 1), product(5, 1))
    with pytest.raises(ValueError, match=f"{39 ** 6} sequences.*cap of {MAX_SEQUENCES}"):
        all_sequences(39, 6)
    with pytest.raises(ValueError, match="cap of 10"):
        all_sequences(2, 4, max_sequences=10)


# --------------------------------------------------------------------------------------------
# Palindromes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("V,T,p", [(5, 5, 0.8), (3, 4, 0.3), (2, 1, 1.0), (4, 2, 0.0)])
def test_palindrome_log_prob_is_the_defining_formula_and_sums_to_one(V, T, p):
    gen = PalindromeGenerator(PalindromeConfig(vocab=V, length=T, p_palindrome=p))
    seqs = [list(s) for s in itertools.product(range(V), repeat=T)]
    is_pal = [s == s[::-1] for s in seqs]
    n_pal = sum(is_pal)
    n_non = len(seqs) - n_pal
    expected = [p / n_pal if pal else (1 - p) / n_non for pal in is_pal]
    lp = gen.log_prob(torch.tensor(seqs))
    assert torch.allclose(lp.exp(), torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-15)
    assert math.isclose(float(lp.exp().sum()), 1.0, abs_tol=1e-12)


def test_palindrome_entropy_closed_form():
    # 125 palindromes at 0.8/125 each, 3000 others at 0.2/3000 each
    h = 0.8 * math.log(125 / 0.8) + 0.2 * math.log(3000 / 0.2)
    assert math.isclose(exact_entropy(make_generator("palindrome")), h, rel_tol=1e-12)


def test_palindrome_samples_follow_the_mixture():
    gen = make_generator("palindrome")
    y = gen.sample(40000, torch.Generator().manual_seed(0))
    assert y.shape == (40000, 5) and y.dtype == torch.long and int(y.min()) >= 0 and int(y.max()) <= 4
    frac = float(PalindromeGenerator.is_palindrome(y).double().mean())
    assert abs(frac - 0.8) < 5 * math.sqrt(0.8 * 0.2 / 40000)
    # every palindrome is equally likely: the first three tokens are uniform over 125 values
    pal = y[PalindromeGenerator.is_palindrome(y)]
    counts = torch.bincount(pal[:, 0] * 25 + pal[:, 1] * 5 + pal[:, 2], minlength=125).double()
    expect = len(pal) / 125
    assert float(((counts - expect) ** 2 / expect).sum()) < 124 + 5 * math.sqrt(2 * 124)   # chi^2, 124 dof
    # the held-out mean -log p is the entropy, within 5 standard errors
    lp = gen.log_prob(y)
    se = float(lp.std()) / math.sqrt(len(y))
    assert abs(true_nll(gen, y) - exact_entropy(gen)) < 5 * se


def test_palindrome_bad_input():
    gen = make_generator("palindrome")
    with pytest.raises(ValueError, match="y holds ids outside 0..4"):
        gen.log_prob(torch.full((1, 5), 5))
    with pytest.raises(ValueError, match=r"y must be long \[n, 5\]"):
        gen.log_prob(torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="p_palindrome"):
        PalindromeConfig(p_palindrome=1.5)
    with pytest.raises(ValueError, match="every sequence is a palindrome"):
        PalindromeGenerator(PalindromeConfig(vocab=3, length=1, p_palindrome=0.5))


# --------------------------------------------------------------------------------------------
# HMMs
# --------------------------------------------------------------------------------------------

def brute_force_hmm(gen: HMMGenerator, y: torch.Tensor) -> torch.Tensor:
    """log sum over all S^T hidden paths of p(path) p(y | path): [n]."""
    S, T = gen.states, gen.length
    paths = product(S, T)                                                # [P, T]
    lp_path = gen.initial.log()[paths[:, 0]]
    for t in range(1, T):
        lp_path = lp_path + gen.transition.log()[paths[:, t - 1], paths[:, t]]
    emit = torch.zeros(y.shape[0], paths.shape[0], dtype=torch.float64)
    for t in range(T):
        emit = emit + gen.emission.log()[paths[:, t][None], y[:, t][:, None]]
    return torch.logsumexp(lp_path[None] + emit, 1)


@pytest.mark.parametrize("cfg", [HMMConfig(), HMMConfig(entropy="high", seed=3),
                                 HMMConfig(states=3, vocab=3, length=4, seed=1), HMMConfig(length=1, seed=2)])
def test_hmm_forward_equals_sum_over_hidden_paths(cfg):
    gen = HMMGenerator(cfg)
    y = all_sequences(cfg.vocab, cfg.length)
    lp = gen.log_prob(y)
    assert torch.allclose(lp, brute_force_hmm(gen, y), rtol=0, atol=1e-10)
    assert math.isclose(float(torch.logsumexp(lp, 0)), 0.0, abs_tol=1e-10)


def test_hmm_parameters_are_seeded_distributions():
    a, b, c = HMMGenerator(HMMConfig(seed=7)), HMMGenerator(HMMConfig(seed=7)), HMMGenerator(HMMConfig(seed=8))
    for name in ("initial", "transition", "emission"):
        p = getattr(a, name)
        assert torch.equal(p, getattr(b, name))
        assert not torch.equal(p, getattr(c, name))
        assert bool((p > 0).all())
        assert torch.allclose(p.sum(-1), torch.ones((), dtype=torch.float64), atol=1e-12, rtol=0)
    state = torch.get_rng_state()
    HMMGenerator(HMMConfig(seed=9))
    assert torch.equal(state, torch.get_rng_state())              # the caller's RNG is left alone


def test_high_entropy_hmm_has_higher_exact_entropy():
    assert HMM_CONCENTRATION["low"] < HMM_CONCENTRATION["high"]
    low = [exact_entropy(make_generator("hmm_low", seed=s)) for s in range(10)]
    high = [exact_entropy(make_generator("hmm_high", seed=s)) for s in range(10)]
    assert all(h > lo for h, lo in zip(high, low))
    assert all(0 < e < 5 * math.log(5) for e in low + high)


def test_hmm_samples_match_exact_probabilities():
    gen = HMMGenerator(HMMConfig(states=3, vocab=3, length=3, entropy="high", seed=0))
    n = 60000
    y = gen.sample(n, torch.Generator().manual_seed(1))
    counts = torch.bincount(y[:, 0] * 9 + y[:, 1] * 3 + y[:, 2], minlength=27).double() / n
    p = gen.log_prob(all_sequences(3, 3)).exp()
    assert bool(((counts - p).abs() <= 5 * (p * (1 - p) / n).sqrt() + 1e-12).all())


def test_make_generator_and_config_errors():
    assert isinstance(make_generator("hmm_high", seed=1), HMMGenerator)
    assert make_generator("hmm_low", vocab=3, length=2).vocab == 3
    with pytest.raises(ValueError, match="kind must be one of"):
        make_generator("markov")
    with pytest.raises(ValueError, match="entropy"):
        HMMConfig(entropy="mid")
    with pytest.raises(ValueError, match="states"):
        HMMConfig(states=0)


def test_sequence_set_validation():
    s = SequenceSet.full(torch.zeros(3, 4, dtype=torch.long))
    assert s.support == (4,) and len(s) == 3 and len(s.subset(slice(0, 2))) == 2
    tok = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="left-aligned"):
        SequenceSet(tok, torch.tensor([[True, False, True], [True, True, True]]), (1, 2, 3))
    with pytest.raises(ValueError, match="outside the support"):
        SequenceSet(tok, torch.tensor([[True, False, False], [True, True, True]]), (3,))
    with pytest.raises(ValueError, match="support"):
        SequenceSet(tok, torch.ones(2, 3, dtype=torch.bool), (3, 4))


# --------------------------------------------------------------------------------------------
# Phonemes
# --------------------------------------------------------------------------------------------

def write_split(path, rows):
    table = pa.table({"word": [f"w{i}" for i in range(len(rows))], "variant": pa.array([1] * len(rows), pa.int8()),
                      "phonemes": pa.array(rows, pa.list_(pa.string()))})
    pq.write_table(table, path)


@pytest.fixture
def phoneme_dir(tmp_path):
    write_split(tmp_path / "train.parquet", [["K", "AE1", "T"], ["D", "AO2", "G"], ["AH0"],
                                             ["K", "AE", "T", "S", "IH", "Z"], ["T", "AE", "K"]])
    write_split(tmp_path / "dev.parquet", [["K", "AO", "T"], ["T", "AE", "K", "S", "D"], ["G"]])
    write_split(tmp_path / "test.parquet", [["K", "AE", "T"], ["D", "AO", "ZH"]])
    return tmp_path


def test_load_phonemes_vocab_tokens_and_dropped(phoneme_dir):
    tr = load_phonemes(phoneme_dir, "train", 3)
    assert tr.vocab == ("AE", "AH", "AO", "D", "G", "IH", "K", "S", "T", "Z")   # sorted, stress stripped
    assert tr.n_read == 5 and tr.dropped == {6: 1} and len(tr.data) == 4
    assert tr.data.support == (1, 2, 3)
    ids = {p: i for i, p in enumerate(tr.vocab)}
    assert tr.tokens.tolist() == [[ids["K"], ids["AE"], ids["T"]], [ids["D"], ids["AO"], ids["G"]],
                                  [ids["AH"], 0, 0], [ids["T"], ids["AE"], ids["K"]]]
    assert tr.mask.tolist() == [[True] * 3, [True] * 3, [True, False, False], [True] * 3]
    dev = load_phonemes(phoneme_dir, "dev", 4)             # vocab from the train file by default
    assert dev.vocab == tr.vocab and dev.dropped == {5: 1} and dev.tokens.shape == (2, 4)
    assert dev.n_read == len(dev.data) + sum(dev.dropped.values())


def test_load_phonemes_unknown_phoneme_names_file_and_row(phoneme_dir):
    with pytest.raises(ValueError, match=r"test\.parquet: row 1: phoneme 'ZH' is not in the vocabulary"):
        load_phonemes(phoneme_dir, "test", 3)


def test_load_phonemes_bad_arguments(phoneme_dir, tmp_path):
    with pytest.raises(ValueError, match="split must be one of"):
        load_phonemes(phoneme_dir, "valid", 3)
    with pytest.raises(ValueError, match="max_len"):
        load_phonemes(phoneme_dir, "train", 0)
    with pytest.raises(ValueError, match="nowhere.*train.parquet: phoneme file not found"):
        load_phonemes(tmp_path / "nowhere", "train", 3)
    write_split(tmp_path / "dev.parquet", [["K"], []])
    with pytest.raises(ValueError, match=r"dev\.parquet: row 1: phonemes must be a non-empty list"):
        load_phonemes(tmp_path, "dev", 3, vocab=["K"])
