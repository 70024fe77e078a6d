r"""Masked language models (thesis ch. 6): networks whose outputs are the masked conditionals
``p_mlm(y_t | y_{\t})``, read as energies by ``components.energies.mlm``.

The contract (:class:`MaskedLM`), shared by every network here and by the samplers:

    vocab_size   V: output ids 0 .. V-1; the input id ``mask_id == V`` is [MASK]
    allowed      bool [V]: the ids a sequence may hold (False: padding / eos / unk of a subword
                 vocabulary); ``conditionals`` gives -inf logits at the others
    single_site  True when the logits at t never read the token at t (a context-excluding
                 network): one pass over y then gives all T conditionals p(y_t | y_{\t}) at once
    encode(batch) -> context          per-instance conditioning (None for an unconditional MLM)
    conditionals(tokens, mask, context, rows) -> logits [R, N, V]
        tokens long [R, N] (``mask_id`` at masked positions, anything at padding), mask bool [R, N]
        left-aligned valid positions, rows long [R]: the instance (row of ``context``) each row
        belongs to — so the T masked copies of one sequence share one encoding.

Networks:

* :class:`BiLSTMMLM` — the thesis' synthetic-data architecture: a forward and a backward LSTM,
  and the logits at t read the forward state at t-1 and the backward state at t+1 (learned start
  and end states at the ends): ``h(y_{\t})`` never sees ``y_t``, so the network is
  ``single_site`` and its MLM objective is the degenerate pseudo-likelihood over all positions
  in one pass. [MASK] inputs at other positions are embedded like any token.
* :class:`TransformerMLM` — an unconditional bidirectional Transformer encoder (Vaswani et al.
  2017) over token + learned position embeddings, padding excluded by a key padding mask. The
  logits at t read the input at t (a [MASK] there), so it is not ``single_site``: the T
  conditionals of a sequence need T masked copies (one ``conditionals`` call, R = T rows).
  Cost O(R N D (D + F) + R N^2 D) per layer plus O(R N D V) for the output layer.
* :class:`ConditionalMLM` — the conditional MLM of Mask-Predict (Ghazvininejad et al. 2019; thesis
  Sec. 6.5): a Transformer encoder over ``[LENGTH] x_1 .. x_S`` (source subwords with learned
  positions; [LENGTH] a learned vector without position) and a *bidirectional* Transformer decoder
  over the target ``y_1 .. y_T`` with [MASK] at masked positions (self-attention without a causal
  mask, cross-attention to every encoder state incl. [LENGTH]'s). ``encode`` runs the encoder once
  per instance (:class:`CMLMContext`); ``conditionals`` gathers its rows by ``rows`` and runs
  only the decoder. ``predict_length`` reads the encoder state of [LENGTH]: log-probs over target
  lengths 1 .. ``max_target_len`` (index = length, index 0 at -inf). Targets are subword ids
  *without* eos; pad, unk and eos of the target vocabulary are disallowed outputs by default.
  Cost per call: encoder O(B S D (D + F) + B S^2 D) per layer; decoder O(R T D (D + F) +
  R T^2 D + R T S D) per layer plus O(R T D V) for the output layer.

Both Transformers are pre-LN (``norm_first``, a final LayerNorm), ReLU feed-forward layers of
width F, input embeddings scaled by sqrt(D) and (by default) tied to the output layer as in
fairseq's Mask-Predict models.

A trained conditional MLM's folder (:func:`save_cmlm` / :func:`load_cmlm`): ``model.pt`` (weights)
and ``model.json`` (``kind`` = :data:`CMLM_KIND`, its ``CMLMConfig``, vocabulary sizes, special
ids, allowed ids) — what the ``cmlm`` stage writes and the sampling and bench stages read.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, Sequence, runtime_checkable

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from components.config import check_range, from_dict
from components.data.translation import EOS, PAD, UNK
from components.io import atomic_path, write_json

__all__ = ["MaskedLM", "BiLSTMMLMConfig", "BiLSTMMLM", "check_tokens", "TransformerMLMConfig", "TransformerMLM",
           "CMLMConfig", "CMLMContext", "ConditionalMLM", "CMLM_KIND", "save_cmlm", "load_cmlm"]


@runtime_checkable
class MaskedLM(Protocol):
    vocab_size: int
    mask_id: int
    single_site: bool
    allowed: Tensor

    def encode(self, batch: Any) -> Any: ...

    def conditionals(self, tokens: Tensor, mask: Tensor, context: Any, rows: Tensor) -> Tensor: ...


def check_tokens(tokens: Tensor, mask: Tensor, vocab_size: int, who: str, *, allow_mask_id: bool = True) -> None:
    """``ValueError`` naming ``who`` unless tokens long [R, N] / mask bool [R, N] are well formed:
    mask left-aligned, every row non-empty, valid ids in [0, V] (V = [MASK], if allowed)."""
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(f"{who}: tokens must be long [R, N], got {tokens.dtype} {list(tokens.shape)}")
    if mask.shape != tokens.shape or mask.dtype != torch.bool:
        raise ValueError(f"{who}: mask must be bool {list(tokens.shape)}, got {mask.dtype} {list(mask.shape)}")
    if tokens.shape[1] == 0 or not bool(mask[:, 0].all()):
        raise ValueError(f"{who}: every sequence needs at least one token (empty row in tokens "
                         f"{list(tokens.shape)})")
    n = mask.sum(1)
    ar = torch.arange(mask.shape[1], device=mask.device)
    if not bool((mask == (ar[None] < n[:, None])).all()):
        raise ValueError(f"{who}: mask must be left-aligned")
    hi = vocab_size + 1 if allow_mask_id else vocab_size
    bad = mask & ((tokens < 0) | (tokens >= hi))
    if bool(bad.any()):
        r, t = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{who}: unknown token id {int(tokens[r, t])} at row {r}, position {t} "
                         f"(ids are 0..{vocab_size - 1}" + (f", [MASK] = {vocab_size})" if allow_mask_id else ")"))


@dataclass(frozen=True)
class BiLSTMMLMConfig:
    embedding_dim: int = 32
    hidden: int = 64               # per direction
    layers: int = 1

    def __post_init__(self):
        check_range(self, positive=("embedding_dim", "hidden", "layers"))


class BiLSTMMLM(nn.Module):
    """Context-excluding bidirectional LSTM MLM over V tokens (module doc); unconditional.

    ``logits[r, t] = W [f_{t-1}; b_{t+1}] + c`` with ``f`` the forward LSTM's states (``f_{-1}`` a
    learned start state), ``b`` the backward LSTM's (``b_{n}`` a learned end state at each row's
    own length ``n``). Cost O(R N H (D + H)) per call, one pass for all N conditionals."""

    single_site = True

    def __init__(self, vocab_size: int, cfg: BiLSTMMLMConfig = BiLSTMMLMConfig(), seed: int | None = None):
        super().__init__()
        if vocab_size < 1:
            raise ValueError(f"BiLSTMMLM: vocab_size must be >= 1, got {vocab_size}")
        if seed is not None:
            torch.manual_seed(seed)
        self.cfg = cfg
        self.vocab_size = int(vocab_size)
        self.mask_id = int(vocab_size)
        self.register_buffer("allowed", torch.ones(vocab_size, dtype=torch.bool))
        self.embed = nn.Embedding(vocab_size + 1, cfg.embedding_dim)
        self.fwd = nn.LSTM(cfg.embedding_dim, cfg.hidden, cfg.layers, batch_first=True)
        self.bwd = nn.LSTM(cfg.embedding_dim, cfg.hidden, cfg.layers, batch_first=True)
        self.start = nn.Parameter(torch.zeros(cfg.hidden))
        self.end = nn.Parameter(torch.zeros(cfg.hidden))
        self.out = nn.Linear(2 * cfg.hidden, vocab_size)

    def encode(self, batch: Any) -> None:
        return None

    def conditionals(self, tokens: Tensor, mask: Tensor, context: Any = None, rows: Tensor | None = None) -> Tensor:
        check_tokens(tokens, mask, self.vocab_size, "BiLSTMMLM.conditionals")
        R, N = tokens.shape
        x = self.embed(tokens.masked_fill(~mask, 0))                          # [R, N, D]
        n = mask.sum(1)
        if bool((n == N).all()):
            f, _ = self.fwd(x)
            b, _ = self.bwd(x.flip(1))
            b = b.flip(1)
        else:
            lengths = n.cpu()
            f, _ = self.fwd(x)                                                # padding is after the row
            rev = _reverse_padded(x, n)
            packed = pack_padded_sequence(rev, lengths, batch_first=True, enforce_sorted=False)
            b, _ = self.bwd(packed)
            b, _ = pad_packed_sequence(b, batch_first=True, total_length=N)
            b = _reverse_padded(b, n)
        H = self.cfg.hidden
        left = torch.cat([self.start.expand(R, 1, H), f[:, :-1]], 1)          # f_{t-1}
        b_pad = torch.cat([b, b.new_zeros(R, 1, H)], 1)                       # [R, N + 1, H]
        right = b_pad[:, 1:].clone()                                          # b_{t+1}
        at_end = (torch.arange(N, device=tokens.device)[None] == (n - 1)[:, None])
        right = torch.where(at_end[..., None], self.end.expand(R, N, H), right)
        logits = self.out(torch.cat([left, right], -1))
        return logits.masked_fill(~self.allowed, float("-inf"))

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        return self.conditionals(tokens, mask)


def _reverse_padded(x: Tensor, n: Tensor) -> Tensor:
    """Reverse each row's first n[r] positions of x [R, N, ...] (the padding stays where it is)."""
    R, N = x.shape[:2]
    ar = torch.arange(N, device=x.device)[None].expand(R, N)
    idx = torch.where(ar < n[:, None], n[:, None] - 1 - ar, ar)
    return x.gather(1, idx.view(R, N, *([1] * (x.dim() - 2))).expand_as(x))


# ----------------------------------------------------------------------------- Transformer MLMs

def _check_heads(cfg: Any) -> None:
    if cfg.d_model % cfg.heads:
        raise ValueError(f"{type(cfg).__name__}: d_model ({cfg.d_model}) must be divisible by heads ({cfg.heads})")


def _allowed_mask(vocab_size: int, allowed: Tensor | Sequence[bool] | None, disallowed: Sequence[tuple[str, int]],
                  who: str) -> Tensor:
    """bool [V]: ``allowed`` as given (checked), else every id but the ``(name, id)`` pairs ``disallowed``."""
    if allowed is None:
        out = torch.ones(vocab_size, dtype=torch.bool)
        for name, i in disallowed:
            if not 0 <= int(i) < vocab_size:
                raise ValueError(f"{who}: {name} id {i} is outside the target vocabulary 0..{vocab_size - 1}")
            out[int(i)] = False
    else:
        out = torch.as_tensor(allowed)
        if out.dtype != torch.bool or out.shape != (vocab_size,):
            raise ValueError(f"{who}: allowed must be bool [{vocab_size}], got {out.dtype} {list(out.shape)}")
        out = out.clone()
    if not bool(out.any()):
        raise ValueError(f"{who}: allowed permits no output id")
    return out


def _sinusoids(n: int, d: int) -> Tensor:
    """[n, d] the sinusoidal position table of Vaswani et al. (2017): sin / cos of p / 10000^(2i/d)."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    out = torch.zeros(n, d)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return out


class _Embed(nn.Module):
    """ids long [R, N] -> sqrt(D) * token embedding + learned position embedding, [R, N, D].

    Token embeddings start N(0, 1/D) (unit scale after sqrt(D), small tied output logits);
    position embeddings start at the sinusoidal table (the same unit scale, and relative offsets
    readable by attention from the first update — with small random positions the network
    long ignores word order, its masked conditionals staying those of a bag of words)."""

    def __init__(self, n_ids: int, max_len: int, d: int):
        super().__init__()
        self.tok = nn.Embedding(n_ids, d)
        self.pos = nn.Embedding(max_len, d)
        nn.init.normal_(self.tok.weight, std=d ** -0.5)
        with torch.no_grad():
            self.pos.weight.copy_(_sinusoids(max_len, d))
        self.scale = math.sqrt(d)

    def forward(self, ids: Tensor) -> Tensor:
        return self.tok(ids) * self.scale + self.pos(torch.arange(ids.shape[1], device=ids.device))[None]


def _encoder(d: int, heads: int, ff: int, dropout: float, layers: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)


def _crop(tokens: Tensor, mask: Tensor, max_len: int, who: str, what: str) -> tuple[Tensor, Tensor]:
    """Drop all-padding columns beyond the longest row; ``ValueError`` if a row is longer than
    ``max_len``."""
    n = int(mask.sum(1).max())
    if n > max_len:
        r = int(mask.sum(1).argmax())
        raise ValueError(f"{who}: {what} row {r} has {n} tokens, more than max length {max_len}")
    return tokens[:, :n], mask[:, :n]


@dataclass(frozen=True)
class TransformerMLMConfig:
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    ff: int = 256                  # feed-forward width F
    dropout: float = 0.1
    max_len: int = 128             # longest sequence (learned positions)
    tie_embeddings: bool = True    # output layer = input token embeddings (+ a bias)

    def __post_init__(self):
        check_range(self, positive=("d_model", "heads", "layers", "ff", "max_len"), within={"dropout": "[0, 1)"})
        _check_heads(self)


class TransformerMLM(nn.Module):
    """Unconditional bidirectional Transformer-encoder MLM over V tokens (module doc).

    ``conditionals(tokens [R, N], mask [R, N]) -> logits [R, N, V]``: every position attends to
    every valid position (padding excluded by the key padding mask), so a row's logits do not
    depend on its padding or on other rows (in eval mode). -inf at ids with ``allowed`` False."""

    single_site = False

    def __init__(self, vocab_size: int, cfg: TransformerMLMConfig = TransformerMLMConfig(), seed: int | None = None,
                 allowed: Tensor | Sequence[bool] | None = None):
        super().__init__()
        if vocab_size < 1:
            raise ValueError(f"TransformerMLM: vocab_size must be >= 1, got {vocab_size}")
        self.cfg = cfg
        self.vocab_size = int(vocab_size)
        self.mask_id = int(vocab_size)
        self.register_buffer("allowed", _allowed_mask(vocab_size, allowed, (), "TransformerMLM"))
        D = cfg.d_model
        with torch.random.fork_rng(devices=[]):         # seeded without touching the global generator
            if seed is not None:
                torch.manual_seed(seed)
            self.embed = _Embed(vocab_size + 1, cfg.max_len, D)
            self.drop = nn.Dropout(cfg.dropout)
            self.encoder = _encoder(D, cfg.heads, cfg.ff, cfg.dropout, cfg.layers)
            self.out = None if cfg.tie_embeddings else nn.Linear(D, vocab_size, bias=False)
            self.out_bias = nn.Parameter(torch.zeros(vocab_size))

    def encode(self, batch: Any) -> None:
        return None

    def conditionals(self, tokens: Tensor, mask: Tensor, context: Any = None, rows: Tensor | None = None) -> Tensor:
        """tokens long [R, N] (``mask_id`` = [MASK]), mask bool [R, N] left-aligned -> logits [R, N, V]."""
        who = "TransformerMLM.conditionals"
        check_tokens(tokens, mask, self.vocab_size, who)
        N = tokens.shape[1]
        tok, m = _crop(tokens, mask, self.cfg.max_len, who, "tokens")
        h = self.encoder(self.drop(self.embed(tok.masked_fill(~m, 0))), src_key_padding_mask=~m)
        w = self.embed.tok.weight[:self.vocab_size] if self.out is None else self.out.weight
        logits = nn.functional.linear(h, w, self.out_bias)
        if logits.shape[1] < N:
            logits = nn.functional.pad(logits, (0, 0, 0, N - logits.shape[1]))
        return logits.masked_fill(~self.allowed, float("-inf"))

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        return self.conditionals(tokens, mask)


@dataclass(frozen=True)
class CMLMConfig:
    d_model: int = 128
    heads: int = 4
    encoder_layers: int = 2
    decoder_layers: int = 2
    ff: int = 256                  # feed-forward width F
    dropout: float = 0.1
    max_source_len: int = 128      # subwords (learned positions)
    max_target_len: int = 128      # subwords without eos: positions and the length classifier's classes 1..
    tie_embeddings: bool = True    # target output layer = target input embeddings (+ a bias)

    def __post_init__(self):
        check_range(self, positive=("d_model", "heads", "encoder_layers", "decoder_layers", "ff",
                                    "max_source_len", "max_target_len"), within={"dropout": "[0, 1)"})
        _check_heads(self)


class CMLMContext(NamedTuple):
    """The encoder's output for B sources (what ``ConditionalMLM.encode`` returns)."""
    memory: Tensor          # [B, 1 + S, D] encoder states of [LENGTH] x_1 .. x_S
    memory_mask: Tensor     # bool [B, 1 + S]: True at [LENGTH] and the real source positions
    length_state: Tensor    # [B, D] the [LENGTH] state (= memory[:, 0])

    def select(self, rows: Tensor) -> "CMLMContext":
        """The context of instances ``rows`` long [R] (gathered, not re-encoded)."""
        return CMLMContext(self.memory[rows], self.memory_mask[rows], self.length_state[rows])

    @property
    def n_instances(self) -> int:
        """B, the number of encoded sources."""
        return int(self.memory.shape[0])


class ConditionalMLM(nn.Module):
    """Mask-Predict's conditional MLM (module doc): a :class:`MaskedLM` over the target
    subwords given a source.

    ``encode(batch)`` reads ``batch.words`` long [B, S] (source ids, anything at padding) and
    ``batch.src_mask`` bool [B, S] (left-aligned, every row non-empty, at most
    ``max_source_len`` tokens) -> :class:`CMLMContext`. ``conditionals(tokens [R, T], mask [R, T],
    context, rows [R]) -> logits [R, T, V]`` with -inf at disallowed ids. ``predict_length(context)
    -> log-probs [B, max_target_len + 1]``.

    The disallowed outputs are ``pad``, ``unk`` and ``eos`` (defaults: the ids of
    :class:`components.data.translation.SubwordVocab`), or pass ``allowed`` bool [V] explicitly."""

    single_site = False

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: CMLMConfig = CMLMConfig(), seed: int | None = None,
                 allowed: Tensor | Sequence[bool] | None = None, *, pad: int = PAD, unk: int = UNK, eos: int = EOS):
        super().__init__()
        if src_vocab < 1:
            raise ValueError(f"ConditionalMLM: src_vocab must be >= 1, got {src_vocab}")
        if tgt_vocab < 1:
            raise ValueError(f"ConditionalMLM: tgt_vocab must be >= 1, got {tgt_vocab}")
        self.cfg = cfg
        self.src_vocab = int(src_vocab)
        self.vocab_size = int(tgt_vocab)
        self.mask_id = int(tgt_vocab)
        self.pad, self.unk, self.eos = int(pad), int(unk), int(eos)
        self.max_target_len = cfg.max_target_len
        specials = (("pad", pad), ("unk", unk), ("eos", eos))
        self.register_buffer("allowed", _allowed_mask(tgt_vocab, allowed, specials, "ConditionalMLM"))
        D = cfg.d_model
        with torch.random.fork_rng(devices=[]):         # seeded without touching the global generator
            if seed is not None:
                torch.manual_seed(seed)
            self.src_embed = _Embed(src_vocab, cfg.max_source_len, D)
            self.length_token = nn.Parameter(torch.randn(D) * D ** -0.5)
            self.encoder = _encoder(D, cfg.heads, cfg.ff, cfg.dropout, cfg.encoder_layers)
            self.length_out = nn.Linear(D, cfg.max_target_len)        # classes: lengths 1 .. max_target_len
            self.tgt_embed = _Embed(tgt_vocab + 1, cfg.max_target_len, D)
            layer = nn.TransformerDecoderLayer(D, cfg.heads, cfg.ff, cfg.dropout, batch_first=True, norm_first=True)
            self.decoder = nn.TransformerDecoder(layer, cfg.decoder_layers, norm=nn.LayerNorm(D))
            self.out = None if cfg.tie_embeddings else nn.Linear(D, tgt_vocab, bias=False)
            self.out_bias = nn.Parameter(torch.zeros(tgt_vocab))
            self.drop = nn.Dropout(cfg.dropout)

    @classmethod
    def for_task(cls, task: Any, cfg: CMLMConfig = CMLMConfig(), seed: int | None = None) -> "ConditionalMLM":
        """Sized from a ``TranslationTask``'s vocabularies, its target pad / unk / eos disallowed."""
        v = task.tgt_vocab
        return cls(len(task.src_vocab), len(v), cfg, seed, pad=v.pad, unk=v.unk, eos=v.eos)

    # -- encoder -------------------------------------------------------------------------------
    def encode(self, batch: Any) -> CMLMContext:
        """batch.words long [B, S], batch.src_mask bool [B, S] -> :class:`CMLMContext`."""
        who = "ConditionalMLM.encode"
        words, mask = getattr(batch, "words", None), getattr(batch, "src_mask", None)
        if not isinstance(words, Tensor) or not isinstance(mask, Tensor):
            raise ValueError(f"{who}: the batch needs tensors 'words' [B, S] and 'src_mask' [B, S]")
        if words.dim() != 2 or words.dtype != torch.long or mask.shape != words.shape:
            raise ValueError(f"{who}: words must be long [B, S] and src_mask [B, S] of the same shape, got "
                             f"words {words.dtype} {list(words.shape)}, src_mask {list(mask.shape)}")
        mask = mask.bool()
        n = mask.sum(1)
        if words.shape[1] == 0 or bool((n == 0).any()):
            bad = list(range(words.shape[0])) if words.shape[1] == 0 else (n == 0).nonzero().flatten().tolist()
            raise ValueError(f"{who}: empty source row(s) {bad[:10]} in words {list(words.shape)} "
                             "(every source needs >= 1 token)")
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            bad = (mask[:, 1:] & ~mask[:, :-1]).any(1).nonzero().flatten().tolist()
            raise ValueError(f"{who}: src_mask row(s) {bad[:10]} are not left-aligned")
        badid = mask & ((words < 0) | (words >= self.src_vocab))
        if bool(badid.any()):
            r, t = (int(i) for i in badid.nonzero()[0])
            raise ValueError(f"{who}: unknown source token id {int(words[r, t])} in words at row {r}, position {t} "
                             f"(ids are 0..{self.src_vocab - 1})")
        words, mask = _crop(words, mask, self.cfg.max_source_len, who, "source (words)")
        B = words.shape[0]
        x = self.src_embed(words.masked_fill(~mask, 0))
        x = torch.cat([self.length_token.expand(B, 1, -1), x], 1)
        mm = torch.cat([mask.new_ones(B, 1), mask], 1)
        h = self.encoder(self.drop(x), src_key_padding_mask=~mm)
        return CMLMContext(h, mm, h[:, 0])

    def predict_length(self, context: CMLMContext) -> Tensor:
        """log p(T | x) [B, max_target_len + 1]: index = target length (no eos), index 0 at -inf."""
        logits = self.length_out(context.length_state)
        logits = torch.cat([logits.new_full((logits.shape[0], 1), float("-inf")), logits], 1)
        return torch.log_softmax(logits, -1)

    # -- decoder -------------------------------------------------------------------------------
    def conditionals(self, tokens: Tensor, mask: Tensor, context: CMLMContext, rows: Tensor | None = None) -> Tensor:
        """tokens long [R, T] (``mask_id`` = [MASK]), mask bool [R, T] left-aligned, rows long [R]
        (row of ``context``; None = ``arange(R)``, needs R = B) -> logits [R, T, V]."""
        who = "ConditionalMLM.conditionals"
        check_tokens(tokens, mask, self.vocab_size, who)
        if not isinstance(context, CMLMContext):
            raise ValueError(f"{who}: context must be the CMLMContext of encode(batch), got {type(context).__name__}")
        R, T = tokens.shape
        B = context.n_instances
        if rows is None:
            if R != B:
                raise ValueError(f"{who}: rows is None but tokens has {R} rows and the context {B} instances")
            ctx = context
        else:
            if not isinstance(rows, Tensor) or rows.dtype != torch.long or rows.shape != (R,):
                raise ValueError(f"{who}: rows must be long [{R}], got "
                                 f"{getattr(rows, 'dtype', type(rows).__name__)} {list(getattr(rows, 'shape', []))}")
            if R and (int(rows.min()) < 0 or int(rows.max()) >= B):
                raise ValueError(f"{who}: rows must index the context's {B} instances, got values "
                                 f"{int(rows.min())}..{int(rows.max())}")
            ctx = context.select(rows)
        tok, m = _crop(tokens, mask, self.cfg.max_target_len, who, "target (tokens)")
        h = self.decoder(self.drop(self.tgt_embed(tok.masked_fill(~m, 0))), ctx.memory,
                         tgt_key_padding_mask=~m, memory_key_padding_mask=~ctx.memory_mask)
        w = self.tgt_embed.tok.weight[:self.vocab_size] if self.out is None else self.out.weight
        logits = nn.functional.linear(h, w, self.out_bias)
        if logits.shape[1] < T:
            logits = nn.functional.pad(logits, (0, 0, 0, T - logits.shape[1]))
        return logits.masked_fill(~self.allowed, float("-inf"))


# ------------------------------------------------------------------------------------------------
# A trained conditional MLM's folder
# ------------------------------------------------------------------------------------------------

#: ``model.json``'s ``kind`` for a conditional MLM (``components.checkpoints`` covers the tagging models).
CMLM_KIND = "cmlm"


def save_cmlm(model: ConditionalMLM, folder: str | Path, task: Any, cfg: CMLMConfig) -> None:
    """Write ``model.pt`` (weights) and ``model.json`` (``kind``, ``config``: the ``CMLMConfig``,
    ``sizes``: source / target vocabulary sizes, the special ids) into ``folder`` (created),
    each atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "model.pt") as tmp:
        torch.save(model.state_dict(), tmp)
    write_json(folder / "model.json", {"kind": CMLM_KIND, "config": dataclasses.asdict(cfg),
                                       "sizes": {"n_src": int(model.src_vocab), "n_tgt": int(model.vocab_size)},
                                       "special": {"pad": model.pad, "unk": model.unk, "eos": model.eos},
                                       "allowed": model.allowed.cpu().tolist()})


def load_cmlm(folder: str | Path, device: Any = "cpu") -> ConditionalMLM:
    """The :class:`ConditionalMLM` saved by :func:`save_cmlm`, in eval mode with gradients off
    (sampling and decoding never train it)."""
    folder = Path(folder)
    meta_path, weights = folder / "model.json", folder / "model.pt"
    if not meta_path.exists() or not weights.exists():
        raise FileNotFoundError(f"{folder}: no trained conditional MLM (model.pt and model.json); run the cmlm stage")
    meta = json.loads(meta_path.read_text())
    if meta.get("kind") != CMLM_KIND:
        raise ValueError(f"{meta_path}: kind {meta.get('kind')!r}, expected {CMLM_KIND!r}")
    cfg = from_dict(CMLMConfig, meta["config"], where=f"{meta_path}:config")
    sp = meta["special"]
    model = ConditionalMLM(meta["sizes"]["n_src"], meta["sizes"]["n_tgt"], cfg, allowed=torch.tensor(meta["allowed"]),
                           pad=sp["pad"], unk=sp["unk"], eos=sp["eos"])
    model.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
    return model.to(device).eval().requires_grad_(False)
