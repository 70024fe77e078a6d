import math

import pytest
import sacrebleu

from components.metrics.bleu import (BleuResult, bleu_by_source_length, bucket_labels, corpus_bleu,
                                     length_stats)

HYPS = [
    "This is the record of the genealogy of Jesus Christ, the son of David.",
    "He said to them, “Follow me.”",
    "Abraham was father of Isaac.",
    "Do not fear; I am with you!",
    "Who is my mother?",
]
REFS = [
    "This is the record of the genealogy of Jesus Christ, the son of David, the son of Abraham:",
    "And He said to them, “Follow Me, and I will make you fishers of men.”",
    "Abraham was the father of Isaac, Isaac the father of Jacob.",
    "Do not be afraid; I am with you.",
    "Who is My mother, and who are My brothers?",
]


def test_corpus_bleu_equals_sacrebleu():
    r = corpus_bleu(HYPS, REFS)
    ref = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert isinstance(r, BleuResult)
    assert r.score == ref.score
    assert list(r.precisions) == list(ref.precisions)
    assert (r.bp, r.sys_len, r.ref_len) == (ref.bp, ref.sys_len, ref.ref_len)
    assert r.ratio == ref.sys_len / ref.ref_len
    assert "tok:13a" in r.signature and "nrefs:1" in r.signature
    assert 0 < r.score < 100 and r.bp < 1          # hypotheses are shorter


def test_corpus_bleu_by_hand():
    # seg 1: hyp 5 tokens, ref 7; seg 2: hyp "x x y" (the second x is clipped), ref 4 tokens.
    hyps = ["a b c d e", "x x y"]
    refs = ["a b c d e f g", "x y z w"]
    # matches / hypothesis n-grams, summed over the corpus:
    # 1-grams: 5/5 + (x clipped to 1, y) 2/3 = 7/8; 2-grams: 4/4 + ("x y") 1/2 = 5/6
    # 3-grams: 3/3 + 0/1 = 3/4; 4-grams: 2/2 + (none) = 2/2
    p = [7 / 8, 5 / 6, 3 / 4, 1.0]
    c, r = 8, 11
    bp = math.exp(1 - r / c)
    expected = 100 * bp * math.exp(sum(math.log(x) for x in p) / 4)
    res = corpus_bleu(hyps, refs)
    assert res.score == pytest.approx(expected, rel=1e-12)
    assert res.precisions == pytest.approx([100 * x for x in p], rel=1e-12)
    assert res.bp == pytest.approx(bp, rel=1e-12)
    assert (res.sys_len, res.ref_len) == (c, r)
    assert res.ratio == pytest.approx(c / r, rel=1e-12)
    assert length_stats(hyps, refs) == pytest.approx({"hyp_len_mean": 4.0, "ref_len_mean": 5.5, "len_ratio": 8 / 11})
    d = res.as_dict()
    assert d["bleu"] == res.score and d["bleu_p3"] == res.precisions[2] and d["bleu_ratio"] == res.ratio


def test_identical_is_100_and_empty_hypothesis_is_0():
    assert corpus_bleu(REFS, REFS).score == pytest.approx(100.0)
    r = corpus_bleu(["", ""], ["a b c d", "e f g h"])
    assert r.score == 0.0 and r.sys_len == 0 and r.ratio == 0.0


def test_length_stats_uses_13a_tokens():
    s = length_stats(HYPS, REFS)
    n_h = sum(len(sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(h).split()) for h in HYPS)
    n_r = sum(len(sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(x).split()) for x in REFS)
    assert s == pytest.approx({"hyp_len_mean": n_h / 5, "ref_len_mean": n_r / 5, "len_ratio": n_h / n_r})
    assert s["len_ratio"] == pytest.approx(corpus_bleu(HYPS, REFS).ratio)
    # "David." is two 13a tokens
    assert length_stats(["David."], ["David ."])["len_ratio"] == 1.0


def test_buckets_lower_end_inclusive():
    hyps = [f"h{i} a b c d" for i in range(8)]
    refs = [f"h{i} a b c e" for i in range(8)]
    lengths = [0, 19, 20, 29, 30, 39, 40, 100]
    out = bleu_by_source_length(hyps, refs, lengths)
    assert list(out) == ["0-20", "20-30", "30-40", "40+"]
    for label, idx in (("0-20", [0, 1]), ("20-30", [2, 3]), ("30-40", [4, 5]), ("40+", [6, 7])):
        assert out[label]["n"] == 2
        assert out[label]["bleu"] == corpus_bleu([hyps[i] for i in idx], [refs[i] for i in idx]).score
    # empty buckets
    out = bleu_by_source_length(hyps[:2], refs[:2], [3, 45])
    assert out["20-30"] == {"bleu": None, "n": 0} and out["30-40"] == {"bleu": None, "n": 0}
    assert out["0-20"]["n"] == 1 and out["40+"]["n"] == 1
    assert bucket_labels((10,)) == ["0-10", "10+"]
    assert list(bleu_by_source_length(hyps[:2], refs[:2], [9, 10], edges=(10,))) == ["0-10", "10+"]


def test_errors():
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        corpus_bleu(["a", "b"], ["a", "b", "c"])
    with pytest.raises(ValueError, match="no segments"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="1 source lengths for 2 segments"):
        bleu_by_source_length(["a", "b"], ["a", "b"], [3])
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        bleu_by_source_length(["a", "b"], ["a"], [3, 4])
    with pytest.raises(TypeError, match="hypothesis 0"):
        corpus_bleu([["a", "b"]], ["a b"])
    with pytest.raises(TypeError, match="one string"):
        corpus_bleu("a b", "a b")
    with pytest.raises(ValueError, match="all empty"):
        corpus_bleu(["a"], [""])
    with pytest.raises(ValueError, match="strictly increasing"):
        bleu_by_source_length(["a"], ["a"], [1], edges=(30, 20))
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        length_stats(["a", "b"], ["a"])
