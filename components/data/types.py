"""Plain record types that readers return and the Parquet store writes.

Every reader in :mod:`components.data.readers` returns a list of one of these; nothing is
dropped silently, and a malformed line raises :class:`FormatError` naming the file and line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class FormatError(ValueError):
    """A malformed input file: the message names the file, the 1-based line and what was expected."""

    def __init__(self, path: str | Path, line: int | None, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class TaggedSentence:
    """One tagged sequence. ``words[i]`` carries ``tags[i]``; ``sid`` identifies it in its source
    (a sentence id, a verse id, or ``file:line``). ``feats`` holds optional extra per-token
    columns of the same length (e.g. ``{"pos": (...)}`` for CCGbank or the SBLGNT)."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    sid: str = ""
    feats: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        if len(self.words) != len(self.tags):
            raise ValueError(f"sentence {self.sid!r}: {len(self.words)} words but {len(self.tags)} tags")
        for k, v in self.feats.items():
            if len(v) != len(self.words):
                raise ValueError(f"sentence {self.sid!r}: feature {k!r} has {len(v)} values for {len(self.words)} words")


@dataclass(frozen=True)
class OcrWord:
    """One handwritten word of the OCR letters corpus (Taskar et al. 2003).

    images: uint8 [n_letters, 16, 8] binary pixels; labels: int64 [n_letters] in 0..25; fold in 0..9.
    """

    word_id: int
    images: np.ndarray
    labels: np.ndarray
    fold: int


@dataclass(frozen=True)
class GridExample:
    """One grid-labelling example (snakes): x float32/uint8 [H, W, C], y int64 [H, W]."""

    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Pronunciation:
    """A CMU dict entry: ``variant`` is 1 for ``word`` and k for ``word(k)``; phonemes without stress digits."""

    word: str
    phonemes: tuple[str, ...]
    variant: int = 1


@dataclass(frozen=True)
class VersePair:
    """A source/target verse pair joined on verse id (book 2 digits, chapter 3, verse 3)."""

    verse_id: str
    source: tuple[str, ...]
    target: tuple[str, ...]
