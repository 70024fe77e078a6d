"""Readers refuse malformed text instead of reading it wrongly (issue 14, item 5).

Each case is a small file written here, one malformed-input case per relevant reader: a NUL byte,
a stray ``\\r`` (CR-only line ends), too few columns (a one-column CoNLL file; columns glued by a
comma or a no-break space, which ``str.split()`` would have split), a tag column equal to the
word column throughout, a truncated row. Every error is a :class:`FormatError` whose message
names ``<file>:<line>`` at the right line and says what it found.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from components.data import readers as R
from components.data.types import FormatError, TaggedSentence

NBSP = "\xa0"
CONLLU_ROW = "{i}\t{w}\t{w}\t{t}\t{t}\t_\t0\troot\t_\t_"
SBLGNT_ROW = "n400010010{k:02d}\t\t{w}\tG1\t\t\t{w}\tnoun\t{t}"
BSB_ROW = "400010010{k:02d}\t40001001\t{w}\t\t\t\t"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


def expect(fn, path: Path, line: int, *words: str, **kw) -> FormatError:
    """``fn(path)`` raises a FormatError at ``line``, the message names ``<file>:<line>`` and holds ``words``."""
    with pytest.raises(FormatError) as e:
        fn(path, **kw)
    msg = str(e.value)
    assert e.value.line == line, msg
    assert f"{path}:{line}:" in msg, msg
    for w in words:
        assert w in msg, msg
    return e.value


def conllu(*rows: tuple[str, str]) -> str:
    return "\n".join(CONLLU_ROW.format(i=i, w=w, t=t) for i, (w, t) in enumerate(rows, 1)) + "\n"


def sblgnt(*rows: tuple[str, str], eol: str = "\n") -> str:
    lines = ["\t".join(R.SBLGNT_HEADER)] + [SBLGNT_ROW.format(k=k, w=w, t=t) for k, (w, t) in enumerate(rows, 1)]
    return eol.join(lines) + eol


def bsb(*words: str, eol: str = "\n") -> str:
    lines = ["\t".join(R.BSB_HEADER)] + [BSB_ROW.format(k=k, w=w) for k, w in enumerate(words, 1)]
    return eol.join(lines) + eol


# --------------------------------------------------------------------------------------------
# CoNLL columns
# --------------------------------------------------------------------------------------------

def test_conll_one_column_file(tmp_path):
    p = write(tmp_path, "one.txt", "EU\nrejects\n\nPeter\n")
    expect(R.read_conll, p, 1, "1 column", "word_col=0", "tag_col=-1", "same column", "at least 2")


def test_conll_comma_separated(tmp_path):
    p = write(tmp_path, "comma.txt", "EU,B-ORG\nrejects,O\n")
    expect(R.read_conll, p, 1, "'EU,B-ORG'", "same column", "1 comma(s)")


def test_conll_nbsp_separated(tmp_path):
    p = write(tmp_path, "nbsp.txt", f"EU{NBSP}B-ORG\nrejects{NBSP}O\n")
    expect(R.read_conll, p, 1, "U+00A0 (NO-BREAK SPACE) at character 3", "ASCII spaces or TABs")


def test_conll_nbsp_in_one_line_of_a_good_file(tmp_path):
    # two columns everywhere but line 4, where a no-break space glues them
    p = write(tmp_path, "nbsp4.txt", f"EU B-ORG\nrejects O\n\nPeter{NBSP}B-PER\n")
    expect(R.read_conll, p, 4, "U+00A0")


def test_conll_nbsp_only_line_is_not_a_sentence_break(tmp_path):
    # str.strip() would call this line blank and split the sentence silently
    p = write(tmp_path, "nbspline.txt", f"EU B-ORG\n{NBSP}\nrejects O\n")
    expect(R.read_conll, p, 2, "U+00A0")


def test_conll_stray_cr_inside_a_crlf_file(tmp_path):
    p = write(tmp_path, "crmid.txt", "EU B-ORG\r\nrejects O\r\nPeter\rB-PER\r\n")
    expect(R.read_conll, p, 3, "carriage return", "character 6", "1 stray \\r in the file")


def test_conll_crlf_line_ends_are_accepted(tmp_path):
    p = write(tmp_path, "crlf.txt", "EU B-ORG\r\nrejects O\r\n\r\nPeter B-PER\r\n")
    assert R.read_conll(p) == [TaggedSentence(("EU", "rejects"), ("B-ORG", "O"), sid="crlf.txt:1"),
                               TaggedSentence(("Peter",), ("B-PER",), sid="crlf.txt:4")]


def test_conll_tag_column_equals_word_column(tmp_path):
    p = write(tmp_path, "same.txt", "-DOCSTART- -X-\n\nEU EU\nrejects rejects\n\nPeter Peter\n")
    expect(R.read_conll, p, 3, "tag column (tag_col=-1)", "word column (word_col=0)", "every token", "3 tokens")


def test_conll_tag_column_equal_on_some_tokens_only_is_fine(tmp_path):
    p = write(tmp_path, "some.txt", ", ,\nEU B-ORG\n")
    assert R.read_conll(p)[0].tags == (",", "B-ORG")


def test_conll_too_few_columns_for_the_tag_column_asked(tmp_path):
    p = write(tmp_path, "short.txt", "EU NNP\n")
    expect(R.read_conll, p, 1, "2 columns", "column 2 (tag_col)", tag_col=2)


# --------------------------------------------------------------------------------------------
# CoNLL-U
# --------------------------------------------------------------------------------------------

def test_conllu_truncated_row(tmp_path):
    text = conllu(("Burda", "PRON"), ("da", "PRT")) + "3\t.\t.\tPUNCT\n"
    p = write(tmp_path, "trunc.conllu", text)
    expect(R.read_conllu, p, 3, "4 TAB-separated fields", "expected 10")


def test_conllu_nbsp_separated(tmp_path):
    p = write(tmp_path, "nbsp.conllu", conllu(("Burda", "PRON")).replace("\t", NBSP))
    expect(R.read_conllu, p, 1, "1 TAB-separated fields", "U+00A0 (NO-BREAK SPACE) at character 2", "a TAB only")


def test_conllu_tag_equals_form(tmp_path):
    p = write(tmp_path, "same.conllu", "# sent_id = s1\n" + conllu(("NOUN", "NOUN"), ("VERB", "VERB")))
    expect(R.read_conllu, p, 2, "UPOS field", "FORM field", "every token")


# --------------------------------------------------------------------------------------------
# ARK Twitter
# --------------------------------------------------------------------------------------------

def test_ark_nbsp_separated(tmp_path):
    p = write(tmp_path, "nbsp.txt", f"ikr\t!\nsmh{NBSP}G\n")
    expect(R.read_ark_twitter, p, 2, "expected token<TAB>tag", "U+00A0")


def test_ark_tag_equals_token(tmp_path):
    p = write(tmp_path, "same.txt", "\nN\tN\nV\tV\n\n!\t!\n")
    expect(R.read_ark_twitter, p, 2, "tag column", "token column", "every token")


# --------------------------------------------------------------------------------------------
# word/TAG and CCGbank
# --------------------------------------------------------------------------------------------

def test_word_tag_nbsp_between_tokens(tmp_path):
    # with U+00A0 read as part of a token, 'a/DT<NBSP>dog/NN' would be the word 'a/DT<NBSP>dog'
    p = write(tmp_path, "nbsp.txt", f"The/DT cat/NN\na/DT{NBSP}dog/NN\n")
    expect(R.read_word_tag, p, 2, "U+00A0 (NO-BREAK SPACE) at character 5", "word/TAG tokens")


def test_word_tag_tag_equals_word(tmp_path):
    p = write(tmp_path, "same.txt", "\nNN/NN DT/DT\nVB/VB\n")
    expect(R.read_word_tag, p, 2, "TAG after '/'", "every token")


def test_ccg_nbsp_between_tokens(tmp_path):
    p = write(tmp_path, "nbsp.txt", f"Pierre|NNP|N/N{NBSP}Vinken|NNP|N\n")
    expect(R.read_ccg, p, 1, "U+00A0", "word|POS|supertag tokens")


def test_ccg_supertag_equals_word(tmp_path):
    p = write(tmp_path, "same.txt", "N|NN|N NP|NNP|NP\n")
    expect(R.read_ccg, p, 1, "supertag field", "word field")


# --------------------------------------------------------------------------------------------
# SBLGNT, the BSB target (read_parallel)
# --------------------------------------------------------------------------------------------

def test_sblgnt_crlf_is_accepted(tmp_path):
    # the real SBLGNT.tsv has \r\n line ends
    p = write(tmp_path, "crlf.tsv", sblgnt(("Βίβλος", "N-NSF"), ("γενέσεως", "N-GSF"), eol="\r\n"))
    assert R.read_sblgnt(p)[0].words == ("Βίβλος", "γενέσεως")


def test_sblgnt_truncated_row(tmp_path):
    text = sblgnt(("Βίβλος", "N-NSF"), ("γενέσεως", "N-GSF"))
    p = write(tmp_path, "trunc.tsv", text.rsplit("\t", 3)[0] + "\n")
    expect(R.read_sblgnt, p, 3, "6 TAB-separated fields", "expected 9")


def test_sblgnt_nbsp_instead_of_tab(tmp_path):
    rows = sblgnt(("Βίβλος", "N-NSF"), ("γενέσεως", "N-GSF")).split("\n")
    rows[2] = rows[2].replace("\tnoun\t", f"\tnoun{NBSP}")
    p = write(tmp_path, "nbsp.tsv", "\n".join(rows))
    expect(R.read_sblgnt, p, 3, "8 TAB-separated fields", "U+00A0", "a TAB only")


def test_sblgnt_tag_equals_text(tmp_path):
    p = write(tmp_path, "same.tsv", sblgnt(("a", "a"), ("b", "b")))
    expect(R.read_sblgnt, p, 2, "morph column", "text column", "every token")


def test_bsb_truncated_row(tmp_path):
    src = write(tmp_path, "s.tsv", sblgnt(("Βίβλος", "N-NSF")))
    tgt = write(tmp_path, "bsb.tsv", bsb("This", "is").replace("\tis\t\t\t\t\n", "\tis\n"))
    expect(lambda t: R.read_parallel(src, t), tgt, 3, "3 TAB-separated fields", "expected 7")


# --------------------------------------------------------------------------------------------
# CMU dict
# --------------------------------------------------------------------------------------------

def test_cmudict_nbsp_separated(tmp_path):
    p = write(tmp_path, "nbsp.dict", f"a AH0\nabc{NBSP}EY1 B IY1 S IY1\n")
    expect(R.read_cmudict, p, 2, "U+00A0 (NO-BREAK SPACE) at character 4", "word and phonemes")


def test_cmudict_nbsp_in_a_trailing_comment_is_fine(tmp_path):
    p = write(tmp_path, "c.dict", f"a AH0 # a{NBSP}comment\n")
    assert R.read_cmudict(p)[0].phonemes == ("AH",)


def test_cmudict_comma_separated(tmp_path):
    p = write(tmp_path, "comma.dict", "a AH0\nabc,EY1,B,IY1\n")
    expect(R.read_cmudict, p, 2, "no phonemes", "3 comma(s)")


# --------------------------------------------------------------------------------------------
# Shared: the last line, BOM, UTF-16
# --------------------------------------------------------------------------------------------

def test_cr_at_the_end_of_the_last_line_without_lf(tmp_path):
    p = write(tmp_path, "end.txt", "EU B-ORG\nrejects O\r")
    expect(R.read_conll, p, 2, "carriage return")


def test_utf16_file_is_named_by_its_nul_bytes(tmp_path):
    p = write(tmp_path, "u16.txt", "EU B-ORG\nrejects O\n".encode("utf-16-le"))
    expect(R.read_conll, p, 1, "NUL byte", "UTF-16")


# --------------------------------------------------------------------------------------------
# Every text reader: NUL bytes and CR-only line ends, at their line
# --------------------------------------------------------------------------------------------

BROKEN_LINES = [   # reader, file text, line of the error, words of the message
    ("conll", R.read_conll, "EU B-ORG\rrejects O\r\rPeter B-PER\r", 1,
     ("carriage return", "character 9", "CR-only line ends")),
    ("conll", R.read_conll, "EU B-ORG\nrej\0ects O\n", 2, ("NUL byte at character 4",)),
    ("conllu", R.read_conllu, conllu(("Burda", "PRON"), ("da", "PRT")).replace("\n", "\r"), 1,
     ("carriage return", "CR-only line ends")),
    ("conllu", R.read_conllu, "# sent_id = s1\n" + conllu(("Burda", "PRON"), ("d\0a", "PRT")), 3, ("NUL byte",)),
    ("ark", R.read_ark_twitter, "ikr\t!\rsmh\tG\r", 1, ("carriage return",)),
    ("ark", R.read_ark_twitter, "ikr\t!\n\nsmh\0\tG\n", 3, ("NUL byte",)),
    ("word_tag", R.read_word_tag, "The/DT cat/NN\ra/DT dog/NN\r", 1, ("carriage return", "CR-only")),
    ("word_tag", R.read_word_tag, "The/DT cat/NN\n\na/DT d\0og/NN\n", 3, ("NUL byte at character 7",)),
    ("ccg", R.read_ccg, "Pierre|NNP|N/N\rVinken|NNP|N\r", 1, ("carriage return",)),
    ("ccg", R.read_ccg, "Pierre|NNP|N/N\nVinken|NNP|N\0\n", 2, ("NUL byte",)),
    ("sblgnt", R.read_sblgnt, sblgnt(("Βίβλος", "N-NSF"), eol="\r"), 1, ("carriage return", "CR-only")),
    ("sblgnt", R.read_sblgnt, sblgnt(("Βίβλος", "N-NSF"), ("γενέ\0σεως", "N-GSF"), eol="\r\n"), 3, ("NUL byte",)),
    ("bsb", "parallel", bsb("This", "is", eol="\r"), 1, ("carriage return",)),
    ("bsb", "parallel", bsb("This", "i\0s"), 3, ("NUL byte",)),
    ("cmudict", R.read_cmudict, "a AH0\rb B IY1\r", 1, ("carriage return", "CR-only")),
    ("cmudict", R.read_cmudict, "a AH0\nb B\0 IY1\n", 2, ("NUL byte",)),
]


@pytest.mark.parametrize("name, read, text, line, words", BROKEN_LINES,
                         ids=[f"{c[0]}-{'nul' if chr(0) in c[2] else 'cr'}" for c in BROKEN_LINES])
def test_nul_bytes_and_cr_only_line_ends_are_errors_at_their_line(tmp_path, name, read, text, line, words):
    if read == "parallel":
        src = write(tmp_path, "s.tsv", sblgnt(("Βίβλος", "N-NSF")))
        read = lambda t: R.read_parallel(src, t)    # noqa: E731 — the target file is the one checked
    expect(read, write(tmp_path, f"{name}.txt", text), line, *words)
