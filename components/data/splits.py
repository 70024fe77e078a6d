"""Deterministic splits.

- ``random``: a seeded permutation cut by fractions (80/10/10 by default), for corpora that come
  without an official split (WNUT-16 train part, the WSJ/OANC samples, the Turkish UD files).
- ``book``: the Greek New Testament (and the Greek->English verse pairs) split by book, so that
  no verse of a test book is seen in training. Books are the two digits of the verse id
  (40 = Matthew ... 66 = Revelation). Default: dev = Mark (41), test = John (43), the rest train.
- ``given``: the user supplies train/dev/test files (CoNLL-2003, CCGbank sections, ...).
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import numpy as np

T = TypeVar("T")

SPLITS = ("train", "dev", "test")


def random_split(items: Sequence[T], fractions: Sequence[float], seed: int) -> dict[str, list[T]]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"split fractions must be three non-negative numbers summing to 1, got {list(fractions)}")
    if len(items) < 3:
        raise ValueError(f"cannot split {len(items)} items into train/dev/test")
    perm = np.random.default_rng(seed).permutation(len(items))
    n_train = int(round(fractions[0] * len(items)))
    n_dev = int(round(fractions[1] * len(items)))
    cuts = {"train": perm[:n_train], "dev": perm[n_train:n_train + n_dev], "test": perm[n_train + n_dev:]}
    return {k: [items[i] for i in sorted(idx)] for k, idx in cuts.items()}


def book_of(verse_id: str) -> str:
    """'40001001' (or 'n40001001001') -> '40'."""
    digits = verse_id.lstrip("n")
    if len(digits) < 8 or not digits[:8].isdigit():
        raise ValueError(f"verse id {verse_id!r}: expected book(2) chapter(3) verse(3) digits")
    return digits[:2]


def book_split(items: Sequence[T], key: Callable[[T], str], dev_books: Sequence[str],
               test_books: Sequence[str]) -> dict[str, list[T]]:
    overlap = set(dev_books) & set(test_books)
    if overlap:
        raise ValueError(f"books {sorted(overlap)} are in both dev and test")
    out: dict[str, list[T]] = {k: [] for k in SPLITS}
    for it in items:
        b = book_of(key(it))
        out["dev" if b in dev_books else "test" if b in test_books else "train"].append(it)
    for k, v in out.items():
        if not v:
            raise ValueError(f"book split: the {k} split is empty (dev books {list(dev_books)}, test books {list(test_books)})")
    return out
