r"""Synthetic sequence distributions with exact probabilities, and the CMU phoneme sequences
(thesis ch. 6, Sec. 6.2.3: "Synthetic Data" and "Real Data").

Every generator is a distribution over the ``V^T`` sequences of one length ``T`` over ids
``0 .. V-1``, with ``sample(n, generator) -> long [n, T]`` and an exact ``log_prob(y [n, T]) -> [n]``:

* :class:`PalindromeGenerator` — the ``V^T`` sequences are split into the ``V^ceil(T/2)``
  palindromes and the rest; a Bernoulli(p) draw picks the set and the sequence is uniform within
  it: ``p(y) = p / #pal`` for a palindrome, ``(1 - p) / #non`` otherwise. (The thesis: V = T = 5,
  p = 0.8, whose exact entropy is 5.96 nats; its True column reads 5.32-5.35, which that
  description does not give: p = 0.92 would.)
* :class:`HMMGenerator` — a hidden Markov model with S states (thesis: S = 4, V = T = 5) whose
  initial, transition and emission distributions are seeded Dirichlet draws; ``log_prob`` is the
  forward algorithm in log space, O(n T S^2). The thesis' "low" and "high entropy" HMMs are two
  Dirichlet concentrations (:data:`HMM_CONCENTRATION`), 0.15 and 0.35: the smaller, the more
  peaked the rows and the fewer the likely sequences. The thesis does not give its parameters;
  these two were picked so that, with S = 4 and V = T = 5, the mean exact entropy over seeds
  0..99 is 4.68 and 6.36 nats, near its True column (5.0 and 6.4); for every one of those seeds
  the high-entropy HMM has the higher entropy (the draws of one seed share their random stream).
  The maximum is T log V = 8.05 nats.

:func:`exact_entropy` (= the NLL of an infinite test set) and :func:`true_nll` (the "True"
column of Table 6.1: mean -log p of a held-out set under the generator) enumerate / evaluate
exactly. Enumeration is capped at :data:`MAX_SEQUENCES` sequences.

:func:`load_phonemes` reads ``{train,dev,test}.parquet`` of ``data/prepared/cmudict`` (column
``phonemes``: lists of ARPAbet strings; the prepared files already hold them without stress
digits, a trailing 0/1/2 is stripped here all the same) into left-aligned ``tokens``/``mask``
tensors over the sorted vocabulary of the train file (39 phonemes), keeping lengths
``1 .. max_len`` and counting the longer ones it leaves out.

:class:`SequenceSet` is the common currency: tokens long [n, N], mask bool [n, N] (left-aligned)
and ``support``, the lengths the source distribution puts mass on (``(T,)`` for a generator,
``(1, ..., max_len)`` for phonemes) — what a model's partition function must sum over.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, Sequence

import pyarrow.parquet as pq
import torch
from torch import Tensor

from components.config import check_range

__all__ = ["MAX_SEQUENCES", "HMM_CONCENTRATION", "GENERATOR_KINDS", "SequenceSet", "SequenceGenerator",
           "PalindromeConfig", "PalindromeGenerator", "HMMConfig", "HMMGenerator", "make_generator",
           "all_sequences", "exact_entropy", "true_nll", "PhonemeSplit", "load_phonemes", "PHONEME_SPLITS"]

#: Largest number of sequences any exact enumeration here (and in ``components.training.mlm_exact``)
#: builds by default: 5^5 = 3125 synthetic sequences are far below it; 39^4 + 39^3 + 39^2 + 39
#: (phonemes up to length 4) = 2.37M fit, up to length 5 (92.6M) do not.
MAX_SEQUENCES = 5_000_000

#: Dirichlet concentration of every row (initial, transition, emission) of an HMM, per entropy level.
HMM_CONCENTRATION = {"low": 0.15, "high": 0.35}

GENERATOR_KINDS = ("palindrome", "hmm_low", "hmm_high")
PHONEME_SPLITS = ("train", "dev", "test")


def check_enumerable(V: int, lengths: Sequence[int], max_sequences: int = MAX_SEQUENCES,
                     who: str = "enumeration") -> int:
    """The number of sequences of the given lengths over V ids; ``ValueError`` above the cap."""
    total = sum(V ** int(n) for n in lengths)
    if total > max_sequences:
        raise ValueError(f"{who}: {total} sequences (V = {V}, lengths {list(lengths)}) exceed the enumeration "
                         f"cap of {max_sequences}; use a smaller vocabulary / length or raise max_sequences")
    return total


def sequence_block(V: int, T: int, start: int, stop: int, device: torch.device | str | None = None) -> Tensor:
    """Sequences number ``start .. stop-1`` of the ``V^T`` in lexicographic order: long [stop-start, T]
    (sequence i has digit ``(i // V^(T-1-t)) % V`` at position t). No cap: the caller chunks."""
    i = torch.arange(start, stop, dtype=torch.long, device=device)
    powers = V ** torch.arange(T - 1, -1, -1, dtype=torch.long, device=device)
    return (i[:, None] // powers[None]) % V


def all_sequences(V: int, T: int, max_sequences: int = MAX_SEQUENCES) -> Tensor:
    """All ``V^T`` sequences, lexicographic: long [V^T, T]; ``ValueError`` above ``max_sequences``."""
    if V < 1 or T < 1:
        raise ValueError(f"all_sequences: V and T must be >= 1, got V = {V}, T = {T}")
    check_enumerable(V, [T], max_sequences, "all_sequences")
    return sequence_block(V, T, 0, V ** T)


def _check_y(y: Tensor, V: int, T: int, who: str) -> None:
    if not isinstance(y, Tensor) or y.dtype != torch.long or y.dim() != 2 or y.shape[1] != T:
        got = f"{y.dtype} {list(y.shape)}" if isinstance(y, Tensor) else type(y).__name__
        raise ValueError(f"{who}: y must be long [n, {T}], got {got}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= V):
        raise ValueError(f"{who}: y holds ids outside 0..{V - 1} (min {int(y.min())}, max {int(y.max())})")


@dataclass(frozen=True)
class SequenceSet:
    """A set of sequences: tokens long [n, N], mask bool [n, N] (left-aligned, every row non-empty)
    and ``support``: the sequence lengths of the distribution they come from (sorted, <= N)."""
    tokens: Tensor
    mask: Tensor
    support: tuple[int, ...]

    def __post_init__(self):
        t, m = self.tokens, self.mask
        if t.dtype != torch.long or t.dim() != 2:
            raise ValueError(f"SequenceSet: tokens must be long [n, N], got {t.dtype} {list(t.shape)}")
        if m.dtype != torch.bool or m.shape != t.shape:
            raise ValueError(f"SequenceSet: mask must be bool {list(t.shape)}, got {m.dtype} {list(m.shape)}")
        n = m.sum(1)
        aligned = m == (torch.arange(t.shape[1], device=m.device)[None] < n[:, None])
        if t.shape[0] and (t.shape[1] == 0 or not bool(aligned.all()) or int(n.min()) < 1):
            raise ValueError("SequenceSet: mask must be left-aligned with at least one position a row")
        sup = tuple(int(s) for s in self.support)
        if not sup or list(sup) != sorted(set(sup)) or sup[0] < 1 or sup[-1] > t.shape[1]:
            raise ValueError(f"SequenceSet: support must be distinct sorted lengths in 1..{t.shape[1]}, got {sup}")
        if t.shape[0] and not set(n.unique().tolist()) <= set(sup):
            raise ValueError(f"SequenceSet: row lengths {sorted(set(n.tolist()))} outside the support {sup}")
        object.__setattr__(self, "support", sup)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @staticmethod
    def full(tokens: Tensor) -> "SequenceSet":
        """Fixed-length sequences tokens long [n, T]: every position valid, support (T,)."""
        return SequenceSet(tokens, torch.ones_like(tokens, dtype=torch.bool), (tokens.shape[1],))

    def subset(self, index: Tensor | slice) -> "SequenceSet":
        return SequenceSet(self.tokens[index], self.mask[index], self.support)


class SequenceGenerator(Protocol):
    vocab: int
    length: int

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor: ...

    def log_prob(self, y: Tensor) -> Tensor: ...


# --------------------------------------------------------------------------------------------
# Palindromes
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PalindromeConfig:
    vocab: int = 5
    length: int = 5
    p_palindrome: float = 0.8

    def __post_init__(self):
        check_range(self, positive=("vocab", "length"), within={"p_palindrome": "[0, 1]"})


class PalindromeGenerator:
    """Bernoulli(p) mixture of the uniform distributions on palindromes and on non-palindromes
    (module doc). ``log_prob`` is -inf on a set the mixture gives no weight."""

    def __init__(self, cfg: PalindromeConfig = PalindromeConfig()):
        self.cfg = cfg
        self.vocab, self.length = cfg.vocab, cfg.length
        V, T = cfg.vocab, cfg.length
        self.n_palindromes = V ** ((T + 1) // 2)
        self.n_other = V ** T - self.n_palindromes
        if self.n_other == 0 and cfg.p_palindrome < 1:
            raise ValueError(f"PalindromeConfig: with vocab {V} and length {T} every sequence is a palindrome, "
                             f"so p_palindrome must be 1, got {cfg.p_palindrome}")
        self._log_p = (math.log(cfg.p_palindrome) - math.log(self.n_palindromes) if cfg.p_palindrome > 0
                       else -math.inf)
        self._log_q = (math.log(1 - cfg.p_palindrome) - math.log(self.n_other)
                       if cfg.p_palindrome < 1 else -math.inf)

    @staticmethod
    def is_palindrome(y: Tensor) -> Tensor:
        """bool [n] for y long [n, T]."""
        return (y == y.flip(1)).all(1)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """long [n, T]: the set by a Bernoulli(p) draw, then a uniform member of it."""
        V, T = self.vocab, self.length
        half = (T + 1) // 2
        pal = torch.rand(n, generator=generator) < self.cfg.p_palindrome
        # a palindrome is its first ceil(T/2) tokens, mirrored
        first = torch.randint(0, V, (n, half), generator=generator)
        mirrored = torch.cat([first, first[:, : T // 2].flip(1)], 1)
        # a uniform non-palindrome: the k-th (lexicographic) of the non-palindromes, by index
        other = torch.zeros(n, T, dtype=torch.long)
        if self.n_other:
            seqs = all_sequences(V, T)
            non = seqs[~self.is_palindrome(seqs)]
            other = non[torch.randint(0, self.n_other, (n,), generator=generator)]
        return torch.where(pal[:, None], mirrored, other)

    def log_prob(self, y: Tensor) -> Tensor:
        """[n] for y long [n, T]: log(p / #palindromes) or log((1 - p) / #non-palindromes)."""
        _check_y(y, self.vocab, self.length, "PalindromeGenerator.log_prob")
        pal = self.is_palindrome(y)
        return torch.where(pal, torch.full(pal.shape, self._log_p, dtype=torch.float64),
                           torch.full(pal.shape, self._log_q, dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# HMMs
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HMMConfig:
    states: int = 4
    vocab: int = 5
    length: int = 5
    entropy: Literal["low", "high"] = "low"
    seed: int = 0                   # draws the parameters (sampling takes its own generator)

    def __post_init__(self):
        check_range(self, positive=("states", "vocab", "length"), nonnegative=("seed",))
        if self.entropy not in HMM_CONCENTRATION:
            raise ValueError(f"HMMConfig.entropy must be one of {tuple(HMM_CONCENTRATION)}, got {self.entropy!r}")


class HMMGenerator:
    """An HMM over S hidden states emitting ids 0..V-1 (module doc). Parameters (float64):
    ``initial`` [S], ``transition`` [S, S] (row: from-state), ``emission`` [S, V] (row: state),
    each row an independent Dirichlet(alpha * 1) draw seeded by ``cfg.seed``."""

    def __init__(self, cfg: HMMConfig = HMMConfig()):
        self.cfg = cfg
        self.vocab, self.length, self.states = cfg.vocab, cfg.length, cfg.states
        alpha = HMM_CONCENTRATION[cfg.entropy]
        # torch's Dirichlet sampler takes no generator: draw under a forked, seeded global RNG so
        # the parameters depend on cfg.seed alone and the caller's RNG state is left untouched
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            draw = torch.distributions.Dirichlet

            def dirichlet(rows: int, k: int) -> Tensor:
                p = draw(torch.full((rows, k), alpha, dtype=torch.float64)).sample()
                p = p.clamp_min(1e-300)      # a small alpha can underflow to 0; keep every log finite
                return p / p.sum(1, keepdim=True)

            self.initial = dirichlet(1, cfg.states)[0]
            self.transition = dirichlet(cfg.states, cfg.states)
            self.emission = dirichlet(cfg.states, cfg.vocab)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """long [n, T]: ancestral sampling, states then emissions."""
        out = torch.empty(n, self.length, dtype=torch.long)
        s = torch.multinomial(self.initial.expand(n, -1), 1, generator=generator)[:, 0] if n else \
            torch.empty(0, dtype=torch.long)
        for t in range(self.length):
            if t:
                s = torch.multinomial(self.transition[s], 1, generator=generator)[:, 0]
            out[:, t] = torch.multinomial(self.emission[s], 1, generator=generator)[:, 0]
        return out

    def log_prob(self, y: Tensor) -> Tensor:
        """[n] float64 for y long [n, T]: the forward algorithm,
        ``a_0 = log pi + log B[:, y_0]``, ``a_t = logsumexp_i(a_{t-1, i} + log A[i, :]) + log B[:, y_t]``."""
        _check_y(y, self.vocab, self.length, "HMMGenerator.log_prob")
        log_a, log_b = self.transition.log(), self.emission.log()
        alpha = self.initial.log()[None] + log_b[:, y[:, 0]].T                      # [n, S]
        for t in range(1, self.length):
            alpha = torch.logsumexp(alpha[:, :, None] + log_a[None], 1) + log_b[:, y[:, t]].T
        return torch.logsumexp(alpha, 1)


# --------------------------------------------------------------------------------------------
# The small API
# --------------------------------------------------------------------------------------------

def make_generator(kind: str, vocab: int = 5, length: int = 5, seed: int = 0) -> SequenceGenerator:
    """``"palindrome"`` (p = 0.8; ``seed`` unused: the distribution has no parameters to draw),
    ``"hmm_low"`` or ``"hmm_high"`` (4 states, parameters drawn with ``seed``)."""
    if kind == "palindrome":
        return PalindromeGenerator(PalindromeConfig(vocab=vocab, length=length))
    if kind in ("hmm_low", "hmm_high"):
        return HMMGenerator(HMMConfig(vocab=vocab, length=length, entropy=kind[4:], seed=seed))
    raise ValueError(f"make_generator: kind must be one of {GENERATOR_KINDS}, got {kind!r}")


def exact_entropy(gen: SequenceGenerator, max_sequences: int = MAX_SEQUENCES) -> float:
    """H(p) = -sum_y p(y) log p(y) in nats over all V^T sequences (the NLL of an infinite test set)."""
    lp = gen.log_prob(all_sequences(gen.vocab, gen.length, max_sequences)).double()
    p = lp.exp()
    return float(-(torch.where(p > 0, p * lp, torch.zeros_like(p))).sum())


def true_nll(gen: SequenceGenerator, tokens: Tensor) -> float:
    """Mean -log p(y) over held-out sequences tokens long [n, T] (Table 6.1's "True" column)."""
    if tokens.shape[0] == 0:
        raise ValueError("true_nll: tokens is empty")
    return float(-gen.log_prob(tokens).double().mean())


# --------------------------------------------------------------------------------------------
# CMU phonemes
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PhonemeSplit:
    """One split of the phoneme data: ``data`` (tokens long [n, max_len], mask, support 1..max_len),
    ``vocab`` (id -> phoneme, sorted), ``n_read`` rows in the file and ``dropped``: length -> count of
    the rows longer than ``max_len`` that were left out (``n_read = len(data) + sum(dropped)``)."""
    data: SequenceSet
    vocab: tuple[str, ...]
    n_read: int
    dropped: dict[int, int]

    @property
    def tokens(self) -> Tensor:
        return self.data.tokens

    @property
    def mask(self) -> Tensor:
        return self.data.mask


def _strip_stress(p: str) -> str:
    return p[:-1] if len(p) > 1 and p[-1] in "012" else p


def _read_phoneme_rows(path: Path) -> list[list[str]]:
    if not path.exists():
        raise ValueError(f"{path}: phoneme file not found")
    try:
        table = pq.read_table(path, columns=["phonemes"])
    except (KeyError, ValueError) as e:         # pyarrow: a missing column is a KeyError / ArrowInvalid
        raise ValueError(f"{path}: expected a column 'phonemes' (lists of phoneme strings): {e}") from None
    rows = table.column("phonemes").to_pylist()
    out = []
    for r, row in enumerate(rows):
        if not isinstance(row, list) or not row or not all(isinstance(p, str) and p for p in row):
            raise ValueError(f"{path}: row {r}: phonemes must be a non-empty list of non-empty strings, got {row!r}")
        out.append([_strip_stress(p) for p in row])
    return out


def load_phonemes(path_dir: str | Path, split: str, max_len: int, vocab: Sequence[str] | None = None) -> PhonemeSplit:
    """Phoneme sequences of ``path_dir/{split}.parquet`` with 1..max_len phonemes as ids over
    ``vocab`` (default: the sorted phonemes of ``path_dir/train.parquet``, stress digits stripped).
    A phoneme outside the vocabulary is a ``ValueError`` naming the file and row; longer rows are
    counted in ``dropped``."""
    if split not in PHONEME_SPLITS:
        raise ValueError(f"load_phonemes: split must be one of {PHONEME_SPLITS}, got {split!r}")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"load_phonemes: max_len must be an integer >= 1, got {max_len!r}")
    path_dir = Path(path_dir)
    path = path_dir / f"{split}.parquet"
    rows = _read_phoneme_rows(path)
    if vocab is None:
        train = rows if split == "train" else _read_phoneme_rows(path_dir / "train.parquet")
        vocab = sorted({p for row in train for p in row})
    vocab = tuple(vocab)
    index = {p: i for i, p in enumerate(vocab)}
    if len(index) != len(vocab):
        raise ValueError(f"load_phonemes: vocab has duplicate phonemes: {vocab}")
    kept, dropped = [], {}
    for r, row in enumerate(rows):
        for p in row:
            if p not in index:
                raise ValueError(f"{path}: row {r}: phoneme {p!r} is not in the vocabulary of {len(vocab)} "
                                 f"phonemes (built from the train file)")
        if len(row) > max_len:
            dropped[len(row)] = dropped.get(len(row), 0) + 1
        else:
            kept.append([index[p] for p in row])
    tokens = torch.tensor([ids + [0] * (max_len - len(ids)) for ids in kept], dtype=torch.long).view(-1, max_len)
    lengths = torch.tensor([len(ids) for ids in kept], dtype=torch.long)
    mask = torch.arange(max_len)[None] < lengths[:, None]
    data = SequenceSet(tokens, mask, tuple(range(1, max_len + 1)))
    return PhonemeSplit(data, vocab, len(rows), dict(sorted(dropped.items())))
