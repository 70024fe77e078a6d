"""The tagging tasks of the ``prepare`` stage: their configs, how each is read and split.

A task (``prepare.tasks.<task>`` in ``params.yaml``, a :class:`TaggingTaskConfig`) names a format
of :data:`~components.data.readers.READERS` and its files. The reader's options come from the
task: ``tag_field`` (conllu: ``upos|xpos``; sblgnt: ``morph|pos``) and ``feature_columns``
(conll: feature name -> 0-based column) are task keys kept for brevity, and ``reader: {...}``
holds any other option of the reader's config (conll: ``word_col``, ``tag_col``, ``docstart``;
word_tag: ``sep``). A key the format's reader does not have is a :class:`ConfigError` naming
``prepare.tasks.<task>.<key>``. ``scheme: bioes`` works for every format: a reader whose config
has a ``scheme`` (conll) converts while reading, so a bad tag is reported at its line; the
sentences of the others are converted after reading.

Splits: ``random`` (seeded, ``fractions``), ``book`` (Greek NT by book: ``dev_books``,
``test_books``) or ``given`` (the user's own ``train``/``dev``/``test`` files).

:func:`check_prepare_config` validates every task before any file is read.

Raw files are verified before they are read: :class:`RawFiles` checks each file that has a
SHA-256 recorded in ``components/data/checksums.json`` (keys ``"<corpus>/<name>"``, the files the
``fetch`` stage puts under ``raw_dir``) and refuses one whose bytes changed, naming the file, the
recorded and the actual sum. A file without a recorded sum (a user corpus) is read unchecked and
listed in :attr:`RawFiles.unverified`, for the stage to report.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from components.config import ConfigError, check_range
from components.data import splits, store
from components.data.fetch import CHECKSUMS_PATH, FetchError
from components.data.readers import READERS, SentenceTooLong, TaggedReader, bio_to_bioes
from components.data.types import FormatError, TaggedSentence

#: Task keys that are options of the format's reader (set only for readers whose config has them).
TASK_READER_KEYS = ("tag_field", "feature_columns")


@dataclass(frozen=True)
class TaggingTaskConfig:
    format: str                          # a name in READERS: conll | conllu | word_tag | ccg | ark_twitter | sblgnt
    paths: tuple[str, ...] = ()          # files to read and split (split: random | book)
    train: str = ""                      # split: given -> the user's own files
    dev: str = ""
    test: str = ""
    split: Literal["random", "book", "given"] = "random"
    tag_field: str = ""                  # reader option; conllu: upos|xpos; sblgnt: morph|pos ("" = its default)
    scheme: Literal["keep", "bioes"] = "keep"
    metric: Literal["accuracy", "span_f1"] = "accuracy"
    top_k_labels: int = 0                # > 0: keep the K most frequent labels, map the rest to '*'
    features: tuple[str, ...] = ()       # per-token input columns to keep (TaggedSentence.feats), e.g. [pos]
    feature_columns: dict[str, int] = field(default_factory=dict)  # reader option; conll: name -> 0-based column
    reader: dict[str, Any] = field(default_factory=dict)           # other options of the format's reader


@dataclass(frozen=True)
class PrepareConfig:
    tasks: dict[str, TaggingTaskConfig] = field(default_factory=dict)
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)   # seeded train/dev/test split (split: random)
    # split: book (the Greek NT): Mark is dev, John is test, the other 25 books are train
    dev_books: tuple[str, ...] = ("41",)     # Mark
    test_books: tuple[str, ...] = ("43",)    # John
    min_word_count: int = 1
    glove: bool = True
    ocr_letters: bool = True
    snakes: bool = True
    cmudict: bool = True
    parallel: bool = True
    # the longest sentence a tagging task may hold, in tokens: a longer one (a missing blank line
    # between sentences, a whole document on one line) is an error at its file:line, since one
    # 100,000-token sentence grew a one-epoch training to 8.7 GB. The longest sentence of the corpora
    # read here has 220 tokens (OANC; WSJ 104, Turkish UD 88, SBLGNT 58, WNUT-16 39): 512, more than
    # twice that, leaves room for the long sentences of other treebanks
    max_sentence_tokens: int = 512
    # a dev or test split whose share of words the vocabulary does not know is above this is logged
    # as a warning and counted in the stage's metric unknown_rate_warnings (a wrong column, another
    # language, a test file swapped in): our corpora's highest is 0.16 (Turkish UD test)
    max_unknown_rate: float = 0.5

    def __post_init__(self):
        check_range(self, positive=("max_sentence_tokens",), within={"max_unknown_rate": "[0, 1]"})


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def reader_config(task: str, cfg: TaggingTaskConfig) -> Any:
    """The config of the task's reader, from ``reader`` and the task's reader keys (strict)."""
    where = f"prepare.tasks.{task}"
    READERS.check(cfg.format, f"{where}.format")
    entry = READERS[cfg.format]
    known = _fields(entry.config)
    for key in ("scheme", *TASK_READER_KEYS):
        if key in cfg.reader:
            raise ConfigError(f"{where}.reader.{key}: {key!r} is a task key; write it as {where}.{key}")
    READERS.config(cfg.format, cfg.reader, where=f"{where}.reader")      # its own keys, named as written
    opts = dict(cfg.reader)
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(TaggingTaskConfig) if f.name in TASK_READER_KEYS}
    for key in TASK_READER_KEYS:
        value = getattr(cfg, key)
        if value == defaults[key]:
            continue
        if key not in known:
            having = [n for n, e in READERS.items() if key in _fields(e.config)]
            raise ConfigError(f"{where}.{key}: the {cfg.format} reader has no option {key!r} (its options: "
                              f"{sorted(known) or 'none'}); readers with it: {having}")
        opts[key] = value
    if "scheme" in known:            # this reader converts BIO -> BIOES itself
        opts["scheme"] = cfg.scheme
    return READERS.config(cfg.format, opts, where=where)


def reader_feats(task: str, cfg: TaggingTaskConfig) -> tuple[str, ...] | None:
    """Feature columns the task's reader gives every sentence (``None``: unknown)."""
    feats = READERS[cfg.format].meta.get("feats")
    if feats is None:
        rcfg = reader_config(task, cfg)
        return tuple(getattr(rcfg, "feature_columns", {}) or ())
    return tuple(feats)


def check_task(task: str, cfg: TaggingTaskConfig) -> tuple[str, ...]:
    """Validate a task before any work; returns its feature names (plain names given once)."""
    where = f"prepare.tasks.{task}"
    rcfg = reader_config(task, cfg)
    if cfg.split == "given":
        missing = [k for k in splits.SPLITS if not getattr(cfg, k)]
        if missing or cfg.paths:
            raise ConfigError(f"{where}: split 'given' needs train, dev and test paths "
                              f"(missing {missing}) and no 'paths'")
    elif not cfg.paths:
        raise ConfigError(f"{where}: split {cfg.split!r} needs 'paths'")
    elif cfg.train or cfg.dev or cfg.test:
        raise ConfigError(f"{where}: train/dev/test files are for split 'given', not {cfg.split!r}")
    features = store.check_feature_names(cfg.features, f"{where}.features")
    store.check_feature_names(list(getattr(rcfg, "feature_columns", {}) or ()), f"{where}.feature_columns")
    have = reader_feats(task, cfg)
    if have is not None and (absent := [f for f in features if f not in have]):
        hint = " (conll reads a column per feature_columns entry, e.g. {%s: 1})" % absent[0] \
            if "feature_columns" in _fields(READERS[cfg.format].config) else ""
        raise ConfigError(f"{where}.features: the {cfg.format} reader gives no feature {absent} "
                          f"(it gives: {list(have) or 'none'}){hint}")
    return features


def check_prepare_config(pcfg: PrepareConfig) -> dict[str, tuple[str, ...]]:
    """Validate every task (see :func:`check_task`); returns each task's feature names."""
    if not pcfg.tasks:
        raise ConfigError("prepare.tasks is empty: name at least one tagging task in params.yaml")
    return {task: check_task(task, cfg) for task, cfg in pcfg.tasks.items()}


def task_reader(task: str, cfg: TaggingTaskConfig, max_tokens: int = 0) -> TaggedReader:
    """``read(path) -> sentences`` for the task: its format's reader, then BIO -> BIOES if asked
    and the reader does not convert itself. ``max_tokens`` > 0: a longer sentence is a
    :class:`FormatError` at its first line naming ``prepare.max_sentence_tokens`` (a plug-in reader,
    which knows no lines, names the sentence)."""
    rcfg = reader_config(task, cfg)
    read = READERS.build(cfg.format, rcfg)
    own = cfg.format in READERS.names()          # the project's readers take max_tokens themselves
    convert = cfg.scheme == "bioes" and not hasattr(rcfg, "scheme")

    def too_long(n: int) -> str:
        return (f"prepare.tasks.{task}: the sentence has {n:,} tokens, more than prepare.max_sentence_tokens "
                f"({max_tokens}); split it (a blank line or line end missing?) or, if it is meant to be one "
                f"sentence, raise the cap: dvc exp run -S prepare.max_sentence_tokens={n}")

    def read_task_file(path: str | Path) -> list[TaggedSentence]:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: corpus file not found (a default corpus: run `dvc repro fetch`; "
                                    f"a user corpus: check its path in params.yaml)")
        try:
            sents = read(path, max_tokens=max_tokens) if own and max_tokens else read(path)
        except SentenceTooLong as e:                 # at the sentence's first line
            raise FormatError(e.path, e.line, too_long(e.n_tokens)) from None
        for s in sents if max_tokens else ():        # a plug-in reader's sentences: named by their id
            if len(s.words) > max_tokens:
                raise FormatError(path, None, f"sentence {s.sid!r}: {too_long(len(s.words))}")
        if convert:
            sents = [dataclasses.replace(s, tags=tuple(bio_to_bioes(s.tags))) for s in sents]
        return sents

    return read_task_file


def read_task(task: str, cfg: TaggingTaskConfig, pcfg: PrepareConfig, resolve: Callable[[str], Path],
              seed: int) -> dict[str, list[TaggedSentence]]:
    """The task's ``{"train", "dev", "test"}`` sentences; ``resolve`` maps a params path to a file."""
    check_task(task, cfg)
    read = task_reader(task, cfg, pcfg.max_sentence_tokens)
    if cfg.split == "given":
        return {k: read(resolve(getattr(cfg, k))) for k in splits.SPLITS}
    sents = [s for p in cfg.paths for s in read(resolve(p))]
    if cfg.split == "book":
        return splits.book_split(sents, lambda s: s.sid, pcfg.dev_books, pcfg.test_books)
    return splits.random_split(sents, pcfg.fractions, seed)


def check_features(task: str, features: tuple[str, ...], parts: dict[str, list[TaggedSentence]]) -> None:
    """Every sentence carries every requested feature (else an error naming the sentence)."""
    for k, sents in parts.items():
        for s in sents:
            for f in features:
                if f not in s.feats:
                    raise ValueError(
                        f"prepare.tasks.{task}: sentence {s.sid!r} ({k} split) has no feature {f!r} "
                        f"(its features: {sorted(s.feats) or 'none'}); conll files need the column in "
                        f"feature_columns, e.g. {{{f}: 1}}")


class RawFiles:
    """The raw files a stage reads, each checked against its recorded SHA-256 before it is read.

    ``checksums`` maps ``"<corpus>/<name>"`` to the SHA-256 of ``raw_dir/<corpus>/<name>`` (as
    :func:`components.data.fetch.load_checksums` reads them). :meth:`check` hashes a file whose key
    is recorded, once per instance (several tasks read the SBLGNT), and raises :class:`FetchError`
    naming the file, the recorded and the actual sum when they differ. A file with no recorded sum
    (outside ``raw_dir``, or a key not recorded) is returned unchecked and listed in
    :attr:`unverified`; a missing file is returned as it is, for its reader to report.
    """

    def __init__(self, raw_dir: str | Path, checksums: Mapping[str, str]):
        self.raw_dir = Path(raw_dir)
        self.checksums = dict(checksums)
        self.verified: dict[str, str] = {}      # checksum key -> SHA-256, each hashed once
        self.unverified: list[Path] = []        # read without a recorded sum, in first-read order

    def key(self, path: str | Path) -> str | None:
        """The checksum key of ``path`` (``"<corpus>/<name>"`` relative to ``raw_dir``) if recorded."""
        tries = ((Path(os.path.abspath(path)), Path(os.path.abspath(self.raw_dir))),  # symlinks kept
                 (Path(path).resolve(), self.raw_dir.resolve()))                        # symlinks followed
        for p, root in tries:
            try:
                key = p.relative_to(root).as_posix()
            except ValueError:
                continue
            if key in self.checksums:
                return key
        return None

    def check(self, path: str | Path) -> Path:
        """``path``, after checking its SHA-256 if one is recorded (see the class doc)."""
        path = Path(path)
        if not path.is_file():
            return path
        key = self.key(path)
        if key is None:
            if path not in self.unverified:
                self.unverified.append(path)
            return path
        if key not in self.verified:
            with open(path, "rb") as f:
                actual = hashlib.file_digest(f, "sha256").hexdigest()
            expected = self.checksums[key]
            if actual != expected:
                raise FetchError(
                    f"{path}: checksum mismatch for {key}: expected SHA-256 {expected} (recorded in "
                    f"{CHECKSUMS_PATH.name}), got {actual}; the raw file is corrupted or was changed after it "
                    "was fetched. Fetch it again with `dvc repro fetch` (or `python -m flows.stages.fetch`) "
                    "and re-run prepare")
            self.verified[key] = actual
        return path

    def file(self, name: str) -> Path:
        """``raw_dir/<name>`` (``name`` like ``"cmudict/cmudict.dict"``), checked."""
        return self.check(self.raw_dir / name)
