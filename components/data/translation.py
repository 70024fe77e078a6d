"""Greek -> English translation data: detokenisation, subword vocabularies, padded batches.

Stands in for the IWSLT de-en task of Goyal, Dyer & Berg-Kirkpatrick (2019) (Tables 1, 4-6):
verse-aligned Greek New Testament -> English, prepared by ``prepare`` into
``data/prepared/greek_english/{train,dev,test}.parquet`` (:data:`components.data.store.PARALLEL`:
``verse_id``, ``source`` (Greek words), ``target`` (tokenised English incl. punctuation tokens)).

Text form. Both sides are turned into plain text with :func:`detokenize` before subword
segmentation, and the English references used by BLEU are the same detokenised strings, so a
hypothesis decoded by :meth:`SubwordVocab.decode` and its reference have the same form
(sacrebleu then applies its own 13a tokenisation to both). The Greek side has no punctuation
tokens in this corpus, so its text is the words joined by spaces (:func:`detokenize` would attach
Greek ``, . ; ·`` if they appeared).

Subwords. :class:`SubwordVocab` wraps a sentencepiece BPE model (ids: pad 0, unk 1, eos 2, no
bos), trained on the training verses only: the source vocabulary on the Greek text, the target
vocabulary on the detokenised English.

Batches. :class:`TranslationBatch` (B pairs, S = longest source, T = longest target):
``words`` long [B, S] source ids (0 = pad), ``src_mask`` bool [B, S]; ``tags`` long [B, T] target
ids ending in eos (0 after it), ``mask`` bool [B, T] including the eos position; ``decode_mask``
bool [B, T_dec], row b left-aligned with ``min(max_target_len, ceil(len_a * S_b + len_b))`` True
steps (the decoder's length budget, ``S_b`` = the row's source length in subwords, ``T_dec`` = the
largest budget in the batch); ``lengths`` (target incl. eos), ``src_lengths`` (subwords),
``index`` long [B] (row in the dataset). The decoders and objectives read ``tags`` and ``mask``
exactly as they read a :class:`components.data.batching.TaggingBatch`.

Bad input (:func:`load_translation_task`; nothing is dropped silently, every count is in
``TranslationTask.stats``):

* a missing file, a missing column or a column of the wrong type, a null value, or a verse id
  repeated within a split or shared between splits -> an error naming the file (and column /
  verse id);
* a pair whose source or target side is empty (no tokens, or only empty tokens) -> dropped from
  its split, counted as ``empty_source_<split>`` / ``empty_target_<split>``, the first 10 verse
  ids listed under ``stats["verse_ids"]``;
* training pairs whose source is longer than ``max_source_len`` subwords or whose target
  (incl. eos) is longer than ``max_target_len`` -> dropped, counted as ``too_long_train``
  (split into ``too_long_source_train`` / ``too_long_target_train``; a pair over both limits
  counts once in ``too_long_train`` and in both parts);
* dev/test pairs are never dropped for length: a source over ``max_source_len`` is truncated to
  its first ``max_source_len`` subwords (``truncated_source_<split>``); a reference longer than
  ``max_target_len`` (incl. eos) is kept whole and counted as ``target_over_max_<split>`` (the
  decoder cannot produce all of it within its budget);
* unknown subwords (the unk id) are counted per split in the encoded sources and targets before
  any truncation: ``unk_source_<split>`` / ``unk_target_<split>`` (subword tokens) and
  ``unk_source_rate_<split>`` / ``unk_target_rate_<split>`` (per subword; eos not counted).
  Training text has none by construction (``character_coverage=1.0``).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sentencepiece as spm
import torch

from components.config import field_error
from components.data.batching import bucket_indices
from components.data.sampling import subsample_indices
from components.data.store import PARALLEL
from components.io import atomic_path, write_json

# ----------------------------------------------------------------------------- detokenisation

#: Tokens written without a space before them (closing punctuation, closing quotes).
ATTACH_LEFT = frozenset({",", ".", ";", ":", "?", "!", ")", "]", "}", "’", "”", "...", "…", "%",
                         "·", "\u0387"})   # Greek ano teleia (two code points)
#: Tokens written without a space after them (opening brackets and quotes).
ATTACH_RIGHT = frozenset({"(", "[", "{", "“", "‘"})
#: English clitics split off by tokenisers ('s, n't, 're, ...; straight or curly apostrophe).
_CLITIC = re.compile(r"^(?:['’](?:s|re|ve|ll|d|m|t)|n['’]t)$", re.IGNORECASE)


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens into text: no space before ``, . ; : ? ! ) ] ’ ” ...`` or a clitic (``'s``,
    ``n't``, ...), none after ``( [ “ ‘``; straight double quotes ``"`` alternate open / close
    within the sequence (the first opens). Everything else (words, ``—``, ``-``) is separated by
    one space. Empty tokens carry no text and are skipped (a sequence of only empty tokens gives
    ``""``, which :func:`load_translation_task` reports as an empty side)."""
    if isinstance(tokens, str):
        raise TypeError(f"detokenize: expected a sequence of tokens, got the string {tokens[:40]!r}")
    out: list[str] = []
    glue_next = True          # no space before the next token (start of text, after an opener)
    quote_open = False        # the last straight double quote opened a quotation
    for tok in tokens:
        if not isinstance(tok, str):
            raise TypeError(f"detokenize: token {tok!r} is not a string")
        if tok.strip() == "":
            continue
        if tok == '"':
            left = quote_open                   # a closing quote attaches to the previous token
            quote_open = not quote_open
            right = quote_open                  # an opening quote attaches to the next token
        elif tok in ATTACH_LEFT or _CLITIC.match(tok):
            left, right = True, False
        elif tok in ATTACH_RIGHT:
            left, right = False, True
        else:
            left, right = False, False
        if out and not (left or glue_next):
            out.append(" ")
        out.append(tok)
        glue_next = right
    return "".join(out)


# ----------------------------------------------------------------------------- subword vocabulary

PAD, UNK, EOS = 0, 1, 2
_MODEL_TYPE = "bpe"


def _sha256_texts(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


class SubwordVocab:
    """A sentencepiece BPE model with fixed special ids: pad 0, unk 1, eos 2, no bos.

    Why BPE rather than unigram: BPE training is a deterministic sequence of greedy merges over
    all of the input (no EM, no sentence sampling), so the same text and size give a
    byte-identical model on any machine, and segmentation at decode time is deterministic too
    (no sampling to switch off); it is also what the paper's era of NMT systems used
    (subword-nmt BPE), and it trains in ~0.1 s on this corpus. Training settings: identity
    normalisation (the prepared text is already NFC; NFKC would rewrite characters, so a decoded
    hypothesis would no longer match its reference), ``character_coverage=1.0`` by default
    (every training character is a piece; unseen characters in dev/test become unk), one
    thread (the thread count is recorded in the model; one fixes the bytes).

    ``len(vocab)`` is the realised size. It equals the requested size unless the text cannot
    support that many pieces; then training is repeated with ``hard_vocab_limit=False`` and the
    smaller realised size is recorded in ``meta`` (``hard_vocab_limit: false``).
    """

    def __init__(self, proto: bytes, meta: dict[str, Any] | None = None, path: str | Path | None = None):
        self._sp = spm.SentencePieceProcessor(model_proto=proto)
        self.proto = proto
        self.meta = dict(meta or {})
        self.path = Path(path) if path is not None else None
        where = self.path or "SubwordVocab"
        for name, want, got in (("pad", PAD, self._sp.pad_id()), ("unk", UNK, self._sp.unk_id()),
                                ("eos", EOS, self._sp.eos_id()), ("bos", -1, self._sp.bos_id())):
            if got != want:
                raise ValueError(f"{where}: sentencepiece model has {name} id {got}; expected {want}")

    # -- construction
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, path_prefix: str | Path, *,
              character_coverage: float = 1.0, seed: int = 0) -> "SubwordVocab":
        """Train on ``texts`` (one sentence each; none empty) and write ``<path_prefix>.model``
        (plus ``<path_prefix>.json``: settings, realised size, checksums) atomically.

        ``seed`` goes to sentencepiece's random generator (process-wide); BPE over the full
        input draws nothing from it, so the model does not depend on it. It is recorded."""
        texts = list(texts)
        if not texts:
            raise ValueError(f"{path_prefix}: no texts to train a subword vocabulary on")
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"{path_prefix}: training text {i} is {t!r}; expected a non-empty string")
            if "\n" in t:
                raise ValueError(f"{path_prefix}: training text {i} contains a newline: {t[:60]!r}")
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 4:
            raise ValueError(f"{path_prefix}: vocab_size must be an int >= 4, got {vocab_size!r}")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(f"{path_prefix}: character_coverage must be in (0, 1], got {character_coverage}")
        # sentencepiece silently skips sentences longer than max_sentence_length bytes
        longest = max(len(t.encode("utf-8")) for t in texts)
        opts = dict(vocab_size=vocab_size, model_type=_MODEL_TYPE, character_coverage=character_coverage,
                    pad_id=PAD, unk_id=UNK, eos_id=EOS, bos_id=-1, normalization_rule_name="identity",
                    num_threads=1, input_sentence_size=0, max_sentence_length=max(4192, longest + 1),
                    minloglevel=2)
        spm.set_random_generator_seed(int(seed))
        hard = True
        try:
            proto = cls._train_proto(texts, opts | {"hard_vocab_limit": True})
        except RuntimeError as e:
            if "Vocabulary size too high" not in str(e):
                raise
            hard = False
            proto = cls._train_proto(texts, opts | {"hard_vocab_limit": False})
        prefix = Path(path_prefix)
        model_path = prefix.with_name(prefix.name + ".model")
        vocab = cls(proto, path=model_path)
        vocab.meta = {"model_type": _MODEL_TYPE, "requested_size": vocab_size, "size": len(vocab),
                      "hard_vocab_limit": hard, "character_coverage": character_coverage, "seed": int(seed),
                      "n_texts": len(texts), "texts_sha256": _sha256_texts(texts),
                      "model_sha256": hashlib.sha256(proto).hexdigest(), "sentencepiece": spm.__version__}
        with atomic_path(model_path) as tmp:
            tmp.write_bytes(proto)
        write_json(prefix.with_name(prefix.name + ".json"), vocab.meta)
        return vocab

    @staticmethod
    def _train_proto(texts: list[str], opts: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buf, **opts)
        return buf.getvalue()

    @classmethod
    def load(cls, path: str | Path) -> "SubwordVocab":
        """Load ``<prefix>.model`` (its ``<prefix>.json`` sidecar, if present, becomes ``meta``)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: sentencepiece model not found")
        proto = path.read_bytes()
        try:
            vocab = cls(proto, path=path)
        except RuntimeError as e:
            raise ValueError(f"{path}: not a sentencepiece model ({e})") from e
        side = path.with_suffix(".json")
        if side.exists():
            vocab.meta = json.loads(side.read_text())
        return vocab

    # -- use
    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"SubwordVocab.encode: expected a string, got {type(text).__name__}")
        return list(self._sp.encode(text, out_type=int))

    def pieces(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"SubwordVocab.pieces: expected a string, got {type(text).__name__}")
        return list(self._sp.encode(text, out_type=str))

    def decode(self, ids: Sequence[int] | torch.Tensor | np.ndarray) -> str:
        """Text of ``ids`` up to (not including) the first eos; pads are dropped. ``ids`` may be a
        1-D tensor or array (a decoder's output row)."""
        if isinstance(ids, (torch.Tensor, np.ndarray)):
            if ids.ndim != 1:
                raise ValueError(f"SubwordVocab.decode: expected one sequence (1-D), got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        out = []
        n = len(self)
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i == PAD:
                continue
            if not 0 <= i < n:
                raise ValueError(f"SubwordVocab.decode: id {i} outside the vocabulary [0, {n})")
            out.append(i)
        return self._sp.decode(out)

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(int(i))

    @property
    def pad(self) -> int:
        return PAD

    @property
    def unk(self) -> int:
        return UNK

    @property
    def eos(self) -> int:
        return EOS

    def __len__(self) -> int:
        return int(self._sp.get_piece_size())

    def __repr__(self) -> str:
        return f"SubwordVocab(size={len(self)}, path={str(self.path) if self.path else None!r})"


# ----------------------------------------------------------------------------- batches and datasets

@dataclass
class TranslationBatch:
    words: torch.Tensor        # long [B, S] source subword ids (0 = pad)
    src_mask: torch.Tensor     # bool [B, S], left-aligned
    tags: torch.Tensor         # long [B, T] target ids, each row ending with eos (0 after; read with mask)
    mask: torch.Tensor         # bool [B, T] target mask incl. the eos position
    decode_mask: torch.Tensor  # bool [B, T_dec] steps a decoder may take (left-aligned)
    lengths: torch.Tensor      # long [B] target length incl. eos
    src_lengths: torch.Tensor  # long [B] source length in subwords (after truncation)
    index: torch.Tensor        # long [B] row of each pair in its dataset

    def to(self, device: torch.device | str) -> "TranslationBatch":
        return TranslationBatch(*(getattr(self, f.name).to(device) for f in fields(self)))

    def __len__(self) -> int:
        return int(self.words.shape[0])


def decode_budget(src_len: int, *, len_a: float, len_b: int, max_target_len: int) -> int:
    """``min(max_target_len, ceil(len_a * src_len + len_b))``, computed exactly in decimal (a
    float product such as 1.2 * 10 = 12.000000000000002 would otherwise round up a step)."""
    return int(min(max_target_len, math.ceil(Fraction(str(len_a)) * int(src_len) + int(len_b))))


class ParallelDataset:
    """The encoded pairs of one split.

    ``src_ids[i]`` is the source's subwords (truncated for dev/test, see the module docstring),
    ``tgt_ids[i]`` the target's subwords followed by eos. Plain-text accessors: ``sources``
    (detokenised Greek, the full verse even where the ids are truncated), ``references``
    (detokenised English, what BLEU compares against), ``src_lengths`` (source length in Greek
    words, for Table 6's buckets), ``verse_ids``; ``truncated`` marks rows whose source ids were cut.
    """

    def __init__(self, verse_ids: Sequence[str], sources: Sequence[str], references: Sequence[str],
                 src_word_lengths: Sequence[int], src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                 *, max_target_len: int, len_a: float, len_b: int, truncated: Sequence[bool] | None = None,
                 name: str = "ParallelDataset"):
        n = len(verse_ids)
        truncated = [False] * n if truncated is None else list(truncated)
        for what, col in (("sources", sources), ("references", references), ("src_word_lengths", src_word_lengths),
                          ("src_ids", src_ids), ("tgt_ids", tgt_ids), ("truncated", truncated)):
            if len(col) != n:
                raise ValueError(f"{name}: {len(col)} {what} for {n} verse ids")
        if n == 0:
            raise ValueError(f"{name}: no pairs")
        self.name = name
        self._verse_ids = list(verse_ids)
        self._sources = list(sources)
        self._references = list(references)
        self._src_words = np.asarray(src_word_lengths, dtype=np.int64)
        self.src_ids = [list(map(int, s)) for s in src_ids]
        self.tgt_ids = [list(map(int, t)) for t in tgt_ids]
        self.truncated = np.asarray(truncated, dtype=bool)
        for vid, s, t in zip(self._verse_ids, self.src_ids, self.tgt_ids):
            if not s or PAD in s or EOS in s:
                raise ValueError(f"{name}: verse {vid}: source ids {s[:10]}... must be non-empty, without pad/eos")
            if len(t) < 2 or t[-1] != EOS or EOS in t[:-1] or PAD in t:
                raise ValueError(f"{name}: verse {vid}: target ids {t[:10]}... must be >= 1 id, then eos, no pad")
        self.src_len = np.array([len(s) for s in self.src_ids], dtype=np.int64)   # subwords
        self.tgt_len = np.array([len(t) for t in self.tgt_ids], dtype=np.int64)   # incl. eos
        self.max_target_len, self.len_a, self.len_b = int(max_target_len), len_a, int(len_b)
        self.budget = np.array([decode_budget(s, len_a=len_a, len_b=len_b, max_target_len=max_target_len)
                                for s in self.src_len], dtype=np.int64)

    # -- plain text
    @property
    def verse_ids(self) -> list[str]:
        return list(self._verse_ids)

    @property
    def sources(self) -> list[str]:
        return list(self._sources)

    @property
    def references(self) -> list[str]:
        return list(self._references)

    @property
    def src_lengths(self) -> np.ndarray:
        """int64 [n]: source length in Greek words (not subwords)."""
        return self._src_words.copy()

    def __len__(self) -> int:
        return len(self._verse_ids)

    @property
    def n_target_tokens(self) -> int:
        return int(self.tgt_len.sum())

    def subset(self, rows: Sequence[int]) -> "ParallelDataset":
        """The pairs at ``rows`` (in that order); batch ``index`` then refers to the subset."""
        rows = [int(i) for i in rows]
        pick = lambda xs: [xs[i] for i in rows]  # noqa: E731
        return ParallelDataset(pick(self._verse_ids), pick(self._sources), pick(self._references),
                               self._src_words[rows], pick(self.src_ids), pick(self.tgt_ids),
                               max_target_len=self.max_target_len, len_a=self.len_a, len_b=self.len_b,
                               truncated=self.truncated[rows], name=self.name)

    def collate(self, idx: Sequence[int]) -> TranslationBatch:
        idx = [int(i) for i in idx]
        if not idx:
            raise ValueError(f"{self.name}: collate of an empty index list")
        B = len(idx)
        src_len = torch.as_tensor(self.src_len[idx])
        tgt_len = torch.as_tensor(self.tgt_len[idx])
        budget = torch.as_tensor(self.budget[idx])
        S, T, T_dec = int(src_len.max()), int(tgt_len.max()), int(budget.max())
        words = torch.zeros(B, S, dtype=torch.long)
        tags = torch.zeros(B, T, dtype=torch.long)
        for b, i in enumerate(idx):
            words[b, :src_len[b]] = torch.tensor(self.src_ids[i])
            tags[b, :tgt_len[b]] = torch.tensor(self.tgt_ids[i])
        return TranslationBatch(words=words, src_mask=torch.arange(S)[None, :] < src_len[:, None],
                                tags=tags, mask=torch.arange(T)[None, :] < tgt_len[:, None],
                                decode_mask=torch.arange(T_dec)[None, :] < budget[:, None],
                                lengths=tgt_len, src_lengths=src_len, index=torch.tensor(idx, dtype=torch.long))

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                device: str | torch.device | None = None) -> Iterator[TranslationBatch]:
        """Batches bucketed by source length in subwords (shuffled by ``seed``), on ``device``."""
        for idx in bucket_indices(self.src_len, batch_size, shuffle=shuffle, seed=seed):
            b = self.collate(idx)
            yield b if device is None else b.to(device)


# ----------------------------------------------------------------------------- config and task

@dataclass(frozen=True)
class TranslationConfig:
    src_vocab_size: int = 1000     # requested source (Greek) subword vocabulary size
    tgt_vocab_size: int = 1000     # requested target (English) subword vocabulary size
    max_source_len: int = 80       # subwords; longer training pairs dropped, dev/test sources truncated
    max_target_len: int = 100      # subwords incl. eos; longer training pairs dropped; decoder budget cap
    len_a: float = 1.5             # decoder budget: ceil(len_a * source subwords + len_b) steps
    len_b: int = 5
    max_train_pairs: int = 0       # 0 = all; else a seeded subsample (after filtering)
    max_dev_pairs: int = 0         # 0 = all; else a seeded subsample (after filtering)

    def __post_init__(self):
        # the checks predate components.config.check_range; their wording is kept (tests match it),
        # and field_error gives from_dict the key: normalisation.translation.data.max_source_len
        def int_at_least(name: str, lo: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise field_error(self, name, f"must be an int >= {lo}, got {v!r}",
                                  message=f"TranslationConfig.{name} must be an int >= {lo}, got {v!r}")
        int_at_least("src_vocab_size", 4)     # 3 special ids + at least one piece
        int_at_least("tgt_vocab_size", 4)
        int_at_least("max_source_len", 1)
        int_at_least("max_target_len", 2)     # at least one token and eos
        int_at_least("len_b", 0)
        int_at_least("max_train_pairs", 0)    # 0 = all
        int_at_least("max_dev_pairs", 0)
        a = self.len_a
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < 0:
            raise field_error(self, "len_a", f"must be a finite number >= 0, got {a!r}",
                              message=f"TranslationConfig.len_a must be a finite number >= 0, got {a!r}")
        if a + self.len_b <= 0:
            detail = ("len_a + len_b must be > 0 (a one-subword source needs >= 1 decoding step), "
                      f"got len_a={a}, len_b={self.len_b}")
            raise field_error(self, "len_a", detail, message=f"TranslationConfig: {detail}")


@dataclass
class TranslationTask:
    train: ParallelDataset
    dev: ParallelDataset
    test: ParallelDataset
    src_vocab: SubwordVocab
    tgt_vocab: SubwordVocab
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def sizes(self) -> dict[str, int]:
        """Realised vocabulary sizes a model is built with."""
        return {"n_src": len(self.src_vocab), "n_tgt": len(self.tgt_vocab)}


SPLITS = ("train", "dev", "test")
_N_IDS = 10   # verse ids listed per reason in stats


def read_parallel(path: str | Path) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """``(verse_ids, sources, targets)`` of a parallel Parquet file, checked column by column
    against :data:`PARALLEL` (an error names the file and the column or verse)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: Parquet file not found (run `dvc repro prepare`?)")
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable Parquet file ({e})") from e
    for f in PARALLEL:
        if f.name not in schema.names:
            raise ValueError(f"{path}: missing column {f.name!r} (columns: {schema.names}; "
                             f"expected {PARALLEL.names})")
        got = schema.field(f.name).type
        if not got.equals(f.type):
            raise ValueError(f"{path}: column {f.name!r} has type {got}; expected {f.type}")
    t = pq.read_table(path, columns=PARALLEL.names).to_pydict()
    ids, src, tgt = t["verse_id"], t["source"], t["target"]
    for r, vid in enumerate(ids):
        if vid is None:
            raise ValueError(f"{path}: row {r}: column 'verse_id' is null")
        for col, seq in (("source", src[r]), ("target", tgt[r])):
            if seq is None or any(w is None for w in seq):
                raise ValueError(f"{path}: verse {vid} (row {r}): column {col!r} is or contains null")
    seen: dict[str, int] = {}
    for r, vid in enumerate(ids):
        if vid in seen:
            raise ValueError(f"{path}: verse id {vid!r} repeated (rows {seen[vid]} and {r})")
        seen[vid] = r
    return ids, src, tgt


def _vocab(texts: list[str], size: int, prefix: Path, seed: int) -> tuple[SubwordVocab, bool]:
    """Load ``<prefix>.model`` when its sidecar matches (size, settings, training text, model
    bytes); else train it. -> (vocab, trained)."""
    model, side = prefix.with_name(prefix.name + ".model"), prefix.with_name(prefix.name + ".json")
    if model.exists() and side.exists():
        try:
            meta = json.loads(side.read_text())
        except json.JSONDecodeError:
            meta = {}
        want = {"model_type": _MODEL_TYPE, "requested_size": size, "character_coverage": 1.0, "seed": seed,
                "texts_sha256": _sha256_texts(texts), "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
        if all(meta.get(k) == v for k, v in want.items()):
            return SubwordVocab.load(model), False
    return SubwordVocab.train(texts, size, prefix, character_coverage=1.0, seed=seed), True


def _count_ids(stats: dict, key: str, n: int, ids: list[str]) -> None:
    stats[key] = n
    if ids:
        stats["verse_ids"][key] = ids[:_N_IDS]


def load_translation_task(prepared_dir: str | Path, vocab_dir: str | Path, cfg: TranslationConfig = TranslationConfig(),
                          *, seed: int, vocab_seed: int | None = None) -> TranslationTask:
    """Read the three splits, train (or reuse) the vocabularies on the training verses, encode,
    filter and subsample as the module docstring describes. ``vocab_dir`` gets ``src.model``,
    ``tgt.model`` (and their ``.json`` sidecars); existing ones are reused when their requested
    size, settings and training text match. ``seed`` picks the ``max_*_pairs`` subsamples; ``vocab_seed``
    (default ``seed``) is the vocabularies' (recorded in their sidecars: a task reading another stage's
    vocabularies passes that stage's)."""
    vocab_seed = seed if vocab_seed is None else vocab_seed
    if not isinstance(cfg, TranslationConfig):
        raise TypeError(f"load_translation_task: cfg must be a TranslationConfig, got {type(cfg).__name__}")
    prepared_dir, vocab_dir = Path(prepared_dir), Path(vocab_dir)
    stats: dict[str, Any] = {"verse_ids": {}}
    raw = {s: read_parallel(prepared_dir / f"{s}.parquet") for s in SPLITS}
    owner: dict[str, str] = {}
    for s in SPLITS:
        for vid in raw[s][0]:
            if vid in owner:
                raise ValueError(f"{prepared_dir / (s + '.parquet')}: verse id {vid!r} is also in "
                                 f"{prepared_dir / (owner[vid] + '.parquet')} (splits must not overlap)")
            owner[vid] = s

    # 1. text; drop empty sides (counted)
    text: dict[str, dict[str, list]] = {}
    for s in SPLITS:
        ids, src, tgt = raw[s]
        stats[f"pairs_raw_{s}"] = len(ids)
        es, et = [], []
        keep = {"verse_ids": [], "sources": [], "references": [], "src_words": []}
        for vid, sw, tw in zip(ids, src, tgt):
            st, tt = detokenize(sw), detokenize(tw)
            if not st:
                es.append(vid)
            if not tt:
                et.append(vid)
            if st and tt:
                keep["verse_ids"].append(vid)
                keep["sources"].append(st)
                keep["references"].append(tt)
                keep["src_words"].append(sum(1 for w in sw if w.strip()))
        _count_ids(stats, f"empty_source_{s}", len(es), es)
        _count_ids(stats, f"empty_target_{s}", len(et), et)
        if not keep["verse_ids"]:
            raise ValueError(f"{prepared_dir / (s + '.parquet')}: no pair with both sides non-empty")
        text[s] = keep

    # 2. vocabularies from the training verses only
    src_vocab, src_new = _vocab(text["train"]["sources"], cfg.src_vocab_size, vocab_dir / "src", vocab_seed)
    tgt_vocab, tgt_new = _vocab(text["train"]["references"], cfg.tgt_vocab_size, vocab_dir / "tgt", vocab_seed)
    stats.update(src_vocab_requested=cfg.src_vocab_size, src_vocab_size=len(src_vocab),
                 tgt_vocab_requested=cfg.tgt_vocab_size, tgt_vocab_size=len(tgt_vocab),
                 vocab_trained=bool(src_new or tgt_new))

    # 3. encode, count unks, length-filter (train) or truncate (dev/test), subsample
    datasets = {}
    for s in SPLITS:
        k = text[s]
        src_ids = [src_vocab.encode(t) for t in k["sources"]]
        tgt_ids = [tgt_vocab.encode(t) + [EOS] for t in k["references"]]
        for side, seqs, drop_last in (("source", src_ids, 0), ("target", tgt_ids, 1)):
            n_tok = sum(len(q) - drop_last for q in seqs)
            n_unk = sum(q.count(UNK) for q in seqs)
            stats[f"unk_{side}_{s}"] = n_unk
            stats[f"unk_{side}_rate_{s}"] = n_unk / n_tok if n_tok else 0.0
        rows = list(range(len(src_ids)))
        truncated = [False] * len(rows)
        if s == "train":
            long_s = [i for i in rows if len(src_ids[i]) > cfg.max_source_len]
            long_t = [i for i in rows if len(tgt_ids[i]) > cfg.max_target_len]
            bad = sorted(set(long_s) | set(long_t))
            _count_ids(stats, "too_long_train", len(bad), [k["verse_ids"][i] for i in bad])
            stats["too_long_source_train"], stats["too_long_target_train"] = len(long_s), len(long_t)
            bad_set = set(bad)
            rows = [i for i in rows if i not in bad_set]
            if not rows:
                raise ValueError(f"{prepared_dir / 'train.parquet'}: every training pair is over max_source_len="
                                 f"{cfg.max_source_len} or max_target_len={cfg.max_target_len}")
        else:
            cut = [i for i in rows if len(src_ids[i]) > cfg.max_source_len]
            for i in cut:
                src_ids[i] = src_ids[i][:cfg.max_source_len]
                truncated[i] = True
            _count_ids(stats, f"truncated_source_{s}", len(cut), [k["verse_ids"][i] for i in cut])
            over = [i for i in rows if len(tgt_ids[i]) > cfg.max_target_len]
            _count_ids(stats, f"target_over_max_{s}", len(over), [k["verse_ids"][i] for i in over])
        stats[f"pairs_kept_{s}"] = len(rows)
        cap = {"train": cfg.max_train_pairs, "dev": cfg.max_dev_pairs}.get(s, 0)
        rows = [rows[j] for j in subsample_indices(len(rows), cap, seed)]
        stats[f"pairs_used_{s}"] = len(rows)
        pick = lambda xs: [xs[i] for i in rows]  # noqa: E731
        datasets[s] = ParallelDataset(pick(k["verse_ids"]), pick(k["sources"]), pick(k["references"]),
                                      pick(k["src_words"]), pick(src_ids), pick(tgt_ids),
                                      max_target_len=cfg.max_target_len, len_a=cfg.len_a, len_b=cfg.len_b,
                                      truncated=pick(truncated), name=f"{prepared_dir / (s + '.parquet')}")
    stats["verse_ids"] = stats.pop("verse_ids")     # the lists last, after the counts
    return TranslationTask(datasets["train"], datasets["dev"], datasets["test"], src_vocab, tgt_vocab, stats)
