"""Vocabularies for words, characters and labels.

Words and characters reserve ``<pad>`` = 0 and ``<unk>`` = 1. Labels reserve nothing, except
the "other" label ``*`` (last id) when the label set is truncated to the top-K most frequent
(as the papers do for CCG supertags) or when dev/test carry a label never seen in training:
such labels map to ``*`` and are counted, never dropped.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from components.data.store import VOCAB, read_table, write_table
from components.data.types import TaggedSentence

PAD, UNK, OTHER = "<pad>", "<unk>", "*"


@dataclass(frozen=True)
class Vocab:
    tokens: tuple[str, ...]
    counts: tuple[int, ...]
    specials: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})
        if len(self._index) != len(self.tokens):
            raise ValueError("vocabulary has duplicate tokens")

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def index(self, token: str, default: int | None = None) -> int:
        i = self._index.get(token)
        if i is None:
            if default is None:
                raise KeyError(f"{token!r} is not in the vocabulary and no fallback was given")
            return default
        return i

    @property
    def unk_id(self) -> int | None:
        return self._index.get(UNK)

    @property
    def other_id(self) -> int | None:
        return self._index.get(OTHER)


def build_vocab(tokens: Iterable[str], *, specials: Sequence[str] = (PAD, UNK), min_count: int = 1,
                max_size: int = 0) -> Vocab:
    """Tokens sorted by descending count, ties alphabetically (deterministic)."""
    counter = Counter(tokens)
    items = sorted(((t, c) for t, c in counter.items() if c >= min_count and t not in specials),
                   key=lambda tc: (-tc[1], tc[0]))
    if max_size > 0:
        items = items[:max_size]
    return Vocab(tuple(specials) + tuple(t for t, _ in items),
                 tuple([0] * len(specials)) + tuple(c for _, c in items), tuple(specials))


def build_label_vocab(train: Sequence[TaggedSentence], others: Sequence[TaggedSentence] = (),
                      top_k: int = 0) -> Vocab:
    """Training labels (top-K most frequent if ``top_k`` > 0) plus ``*`` when anything maps to it."""
    counter = Counter(t for s in train for t in s.tags)
    if OTHER in counter:
        raise ValueError(f"label {OTHER!r} occurs in the training data; it is reserved for 'other labels'")
    full = build_vocab(counter.elements(), specials=())
    kept = full.tokens[:top_k] if top_k > 0 else full.tokens
    need_other = len(kept) < len(full) or any(t not in set(kept) for s in others for t in s.tags)
    tokens = tuple(kept) + ((OTHER,) if need_other else ())
    counts = tuple(counter[t] for t in kept) + ((sum(counter[t] for t in full.tokens[len(kept):]),) if need_other else ())
    return Vocab(tokens, counts)


def encode_labels(tags: Sequence[str], vocab: Vocab) -> tuple[list[int], int]:
    """-> (ids, how many tags were mapped to ``*``). Raises if a tag is unknown and there is no ``*``."""
    other = vocab.other_id
    ids, mapped = [], 0
    for t in tags:
        i = vocab._index.get(t)
        if i is None:
            if other is None:
                raise KeyError(f"label {t!r} not in the label vocabulary (and no '*' label exists)")
            i, mapped = other, mapped + 1
        ids.append(i)
    return ids, mapped


def write_vocabs(path: str | Path, vocabs: dict[str, Vocab]) -> int:
    kinds, ids, toks, counts = [], [], [], []
    for kind, v in vocabs.items():
        kinds += [kind] * len(v)
        ids += list(range(len(v)))
        toks += list(v.tokens)
        counts += list(v.counts)
    return write_table(path, {"kind": kinds, "id": ids, "token": toks, "count": counts}, VOCAB)


def read_vocabs(path: str | Path) -> dict[str, Vocab]:
    t = read_table(path, VOCAB).to_pydict()
    by_kind: dict[str, list[tuple[int, str, int]]] = {}
    for k, i, tok, c in zip(t["kind"], t["id"], t["token"], t["count"]):
        by_kind.setdefault(k, []).append((i, tok, c))
    out = {}
    for k, rows in by_kind.items():
        rows.sort()
        if [r[0] for r in rows] != list(range(len(rows))):
            raise ValueError(f"{path}: vocabulary {k!r} ids are not 0..{len(rows) - 1}")
        specials = tuple(tok for _, tok, _ in rows if tok in (PAD, UNK))
        out[k] = Vocab(tuple(r[1] for r in rows), tuple(r[2] for r in rows), specials)
    return out
