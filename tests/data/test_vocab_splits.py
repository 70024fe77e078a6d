import pytest

from components.data import splits
from components.data.types import TaggedSentence
from components.data.vocab import (OTHER, PAD, UNK, build_label_vocab, build_vocab, encode_labels,
                                   read_vocabs, write_vocabs)


def S(tags, sid=""):
    return TaggedSentence(tuple("w" * len(tags)), tuple(tags), sid)


def test_build_vocab_order_and_specials():
    v = build_vocab(["b", "a", "b", "c", "a", "b"], min_count=2)
    assert v.tokens == (PAD, UNK, "b", "a")
    assert v.index("zzz", v.unk_id) == 1


def test_label_vocab_top_k_maps_rest_to_other():
    train = [S(["A", "A", "A", "B", "B", "C"])]
    v = build_label_vocab(train, top_k=2)
    assert v.tokens == ("A", "B", OTHER)
    assert v.counts[-1] == 1
    ids, mapped = encode_labels(["A", "C", "D"], v)
    assert ids == [0, 2, 2] and mapped == 2


def test_label_vocab_other_only_when_needed():
    train = [S(["A", "B"])]
    assert build_label_vocab(train, [S(["A"])]).tokens == ("A", "B")
    v = build_label_vocab(train, [S(["Z"])])
    assert v.tokens == ("A", "B", OTHER)
    with pytest.raises(KeyError, match="'Z'"):
        encode_labels(["Z"], build_label_vocab(train))
    with pytest.raises(ValueError, match="reserved"):
        build_label_vocab([S(["*"])])


def test_vocab_round_trip(tmp_path):
    vs = {"word": build_vocab(["x", "y", "x"]), "label": build_label_vocab([S(["A", "B"])], top_k=1)}
    write_vocabs(tmp_path / "v.parquet", vs)
    back = read_vocabs(tmp_path / "v.parquet")
    assert back["word"].tokens == vs["word"].tokens and back["word"].unk_id == 1
    assert back["label"].tokens == vs["label"].tokens and back["label"].other_id == 1


def test_random_split_is_seeded_and_complete():
    items = list(range(100))
    a = splits.random_split(items, (0.8, 0.1, 0.1), seed=3)
    b = splits.random_split(items, (0.8, 0.1, 0.1), seed=3)
    c = splits.random_split(items, (0.8, 0.1, 0.1), seed=4)
    assert a == b and a != c
    assert sorted(a["train"] + a["dev"] + a["test"]) == items
    assert [len(a[k]) for k in splits.SPLITS] == [80, 10, 10]
    with pytest.raises(ValueError, match="sum"):
        splits.random_split(items, (0.8, 0.1, 0.2), seed=0)


def test_book_split():
    items = [S(["A"], sid) for sid in ["40001001", "41001001", "43002003", "45001001"]]
    out = splits.book_split(items, lambda s: s.sid, ["41"], ["43"])
    assert [s.sid for s in out["train"]] == ["40001001", "45001001"]
    assert [s.sid for s in out["dev"]] == ["41001001"] and [s.sid for s in out["test"]] == ["43002003"]
    with pytest.raises(ValueError, match="empty"):
        splits.book_split(items, lambda s: s.sid, ["41"], ["50"])
    with pytest.raises(ValueError, match="verse id"):
        splits.book_of("4x")
