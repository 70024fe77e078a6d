r"""An LSTM encoder-decoder with Bahdanau attention, a ``StepScorer`` (Goyal, Dyer & Berg-Kirkpatrick
2019's MT model: "a seq2seq model with a simple attention mechanism (Bahdanau et al., 2015), a
bidirectional LSTM encoder (1 layer), an LSTM decoder (1 layer)").

Encoder, once per batch (not per beam item): source subword embeddings x_s (``padding_idx=pad``)
-> dropout -> a one-layer BLSTM over packed sequences -> dropout: states enc [B, S, 2H]. The
attention's key projection K = W_s enc [B, S, A] is computed here too, once.

Decoder start: h_0 = tanh(W_0 mean_s enc_s) with the mean over the real source positions (a
length-independent summary that padding cannot reach), c_0 = 0; both expanded to the k beam items.

Step t (batched over B instances and k beam items; y_{t-1} the fed embedding, a learned
start-symbol embedding at t = 1):

    e_{t,s}  = v . tanh(W_h h_{t-1} + K_s)         additive attention on the previous state
    a_t      = softmax_s(e_t), pad positions at -inf
    ctx_t    = sum_s a_{t,s} enc_s                 [B, k, 2H]
    h_t, c_t = LSTMCell([y_{t-1} ; ctx_t], (h_{t-1}, c_{t-1}))
    raw_t    = W_o [h_t ; ctx_t ; y_{t-1}] + b_o   [B, k, V]   (Bahdanau's deep output reads
                                                               the state, context and previous symbol)

Scores are read through ``components.models.step_scorer.step_scores``: log-softmax (``local``) or raw
(``global``); ``normalisation`` is a plain attribute so an objective may switch the reading.

Costs: the encoder O(B S H (D + H)) and the key projection O(B S H A), once per batch; per step
O(B k H A) for the query, O(B k S A) for the scores and O(B k S H) for the context, O(B k H (D + 3H))
for the decoder cell and O(B k V (3H + D)) for the output layer (O(B k D (3H + V)) with ``tie_embeddings``).

Small-data settings (Sennrich & Zhang 2019), off by default: ``word_dropout`` drops whole source
and fed target tokens in training; ``output_dropout`` regularises the deep output;
``tie_embeddings`` reads the output layer through the target embeddings (raw = E_tgt P [h ; ctx ;
y] + b), which halves the parameters a rare subword has to learn.

Bad input is a ``ValueError`` naming it: a source row with no tokens, a mask not left-aligned,
k < 1, sizes out of range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
from torch import nn

from components.config import check_range
from components.models.step_scorer import NORMALISATIONS, BeamState, check_beam_size, step_scores


@dataclass(frozen=True)
class TranslatorConfig:
    embedding_dim: int = 64        # source and target embeddings
    hidden: int = 128              # encoder (per direction) and decoder
    attention_dim: int = 128       # A: the additive attention's hidden size
    dropout: float = 0.2           # on source embeddings and encoder states
    normalisation: Literal["local", "global"] = "local"
    # Low-resource practice (Sennrich & Zhang 2019, "Revisiting Low-Resource NMT"); the defaults
    # leave the model as Goyal et al. (2019) describe it:
    word_dropout: float = 0.0      # training only: each source token and each fed target token is
                                   # dropped whole (its embedding zeroed) with this probability
    output_dropout: float = 0.0    # training only: dropout on the deep output's input [h ; ctx ; y]
    tie_embeddings: bool = False   # output layer W_o = E_tgt P (Press & Wolf 2017): raw = E_tgt (P [h ; ctx ; y]) + b

    def __post_init__(self):
        check_range(self, positive=("embedding_dim", "hidden", "attention_dim"),
                    within={"dropout": "[0, 1)", "word_dropout": "[0, 1)", "output_dropout": "[0, 1)"})
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(f"translator: normalisation must be one of {NORMALISATIONS}, got {self.normalisation!r}")


class SourceContext(NamedTuple):
    """The per-instance context of a ``BeamState`` (the search never touches it)."""
    states: torch.Tensor          # enc [B, S, 2H]
    keys: torch.Tensor            # W_s enc [B, S, A]
    mask: torch.Tensor            # bool [B, S]


class AttentionTranslator(nn.Module):
    """A ``StepScorer`` over target subword sequences (see the module doc).

    The batch is read by duck typing: ``words`` long [B, S] (source ids, ``pad`` at padding),
    ``src_mask`` bool [B, S] (left-aligned) and ``decode_mask`` bool [B, T] (the steps a decoder
    may take)."""

    def __init__(self, cfg: TranslatorConfig, n_src: int, n_tgt: int, *, eos: int, pad: int = 0, seed: int = 0):
        super().__init__()
        if n_src < 1:
            raise ValueError(f"translator: n_src must be >= 1, got {n_src}")
        if n_tgt < 1:
            raise ValueError(f"translator: n_tgt must be >= 1, got {n_tgt}")
        if not 0 <= eos < n_tgt:
            raise ValueError(f"translator: eos must be a target id in [0, {n_tgt}), got {eos}")
        if not 0 <= pad < n_src:
            raise ValueError(f"translator: pad must be a source id in [0, {n_src}), got {pad}")
        self.cfg = cfg
        self.n_labels = n_tgt
        self.normalisation = cfg.normalisation
        self.eos = eos
        self.pad = pad
        D, H, A = cfg.embedding_dim, cfg.hidden, cfg.attention_dim
        # Seeded without touching the global generator: building a model has no side effects.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.src_embed = nn.Embedding(n_src, D, padding_idx=pad)
            self.drop = nn.Dropout(cfg.dropout)
            self.encoder = nn.LSTM(D, H, batch_first=True, bidirectional=True)
            self.init_h = nn.Linear(2 * H, H)
            self.att_keys = nn.Linear(2 * H, A, bias=False)     # W_s
            self.att_query = nn.Linear(H, A)                    # W_h (with the attention's bias)
            self.att_v = nn.Linear(A, 1, bias=False)            # v
            self.tgt_embed = nn.Embedding(n_tgt, D)
            self.start_symbol = nn.Parameter(torch.zeros(D))
            self.cell = nn.LSTMCell(D + 2 * H, H)
            self.out_drop = nn.Dropout(cfg.output_dropout)
            if cfg.tie_embeddings:
                self.out_proj = nn.Linear(H + 2 * H + D, D, bias=False)     # P
                self.out_bias = nn.Parameter(torch.zeros(n_tgt))
            else:
                self.out = nn.Linear(H + 2 * H + D, n_tgt)

    def _word_drop(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., D] with whole token embeddings zeroed at rate ``word_dropout`` (training only;
        no rescaling: a dropped word is an unknown word, not a louder one)."""
        p = self.cfg.word_dropout
        if not self.training or p == 0.0:
            return x
        keep = torch.rand(x.shape[:-1], device=x.device) >= p
        return x * keep[..., None].to(x.dtype)

    @torch.no_grad()
    def shift_scores(self, c: float) -> None:
        """Add ``c`` to every raw score (the output bias): each step's softmax, hence the locally
        normalised model and its CE, is unchanged, while every log Z moves by ``c``."""
        bias = self.out_bias if self.cfg.tie_embeddings else self.out.bias
        bias.add_(float(c))

    def output(self, features: torch.Tensor) -> torch.Tensor:
        """The deep output layer: [h ; ctx ; y] [..., 3H + D] -> raw scores [..., V]."""
        features = self.out_drop(features)
        if self.cfg.tie_embeddings:
            return self.out_proj(features) @ self.tgt_embed.weight.T + self.out_bias
        return self.out(features)

    # -- encoder -------------------------------------------------------------------------------
    def check_source(self, batch: Any) -> torch.Tensor:
        words, mask = batch.words, batch.src_mask
        if words.dim() != 2 or mask.shape != words.shape:
            raise ValueError(f"translator: words {tuple(words.shape)} and src_mask {tuple(mask.shape)} "
                             "must both be [B, S]")
        mask = mask.bool()
        lengths = mask.sum(1)
        if mask.shape[1] == 0 or bool((lengths == 0).any()):
            bad = list(range(mask.shape[0])) if mask.shape[1] == 0 else (lengths == 0).nonzero().flatten().tolist()
            raise ValueError(f"translator: source row(s) {bad} have no tokens (all padding): every source "
                             "needs >= 1 token")
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            bad = (mask[:, 1:] & ~mask[:, :-1]).any(1).nonzero().flatten().tolist()
            raise ValueError(f"translator: src_mask row(s) {bad} are not left-aligned (a token after padding)")
        return mask

    def encode(self, batch: Any) -> SourceContext:
        """-> the source context: encoder states [B, S, 2H], keys W_s enc [B, S, A], mask [B, S]."""
        mask = self.check_source(batch)
        words = batch.words
        x = self.drop(self._word_drop(self.src_embed(words)))
        lengths = mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.encoder(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=words.shape[1])
        enc = self.drop(h)
        return SourceContext(enc, self.att_keys(enc), mask)

    def attend(self, h: torch.Tensor, src: SourceContext) -> tuple[torch.Tensor, torch.Tensor]:
        """Additive attention of decoder states h [B, k, H] over the source -> (context [B, k, 2H],
        weights [B, k, S], zero at padding)."""
        q = self.att_query(h)                                               # [B, k, A]
        e = self.att_v(torch.tanh(q[:, :, None, :] + src.keys[:, None, :, :]))[..., 0]   # [B, k, S]
        e = e.masked_fill(~src.mask[:, None, :], float("-inf"))
        a = torch.softmax(e, -1)
        return torch.bmm(a, src.states), a

    # -- StepScorer ----------------------------------------------------------------------------
    def start(self, batch: Any, k: int) -> tuple[BeamState, torch.Tensor]:
        check_beam_size(k)
        src = self.encode(batch)
        m = src.mask[..., None].to(src.states.dtype)
        mean = (src.states * m).sum(1) / m.sum(1)
        h0 = torch.tanh(self.init_h(mean))                                  # [B, H]
        B = h0.shape[0]
        h = h0[:, None].expand(B, k, -1)
        return BeamState((h, torch.zeros_like(h)), src), batch.decode_mask

    def step(self, state: BeamState, prev_embedding: torch.Tensor | None) -> tuple[torch.Tensor, BeamState]:
        (h, c), src = state.beam, state.context
        B, k, H = h.shape
        if prev_embedding is None:
            prev_embedding = self.start_symbol.expand(B, k, -1)
        ctx, _ = self.attend(h, src)                                         # attention on h_{t-1}
        x = torch.cat([prev_embedding, ctx], -1).reshape(B * k, -1)
        h2, c2 = self.cell(x, (h.reshape(B * k, H), c.reshape(B * k, H)))
        h2, c2 = h2.reshape(B, k, H), c2.reshape(B, k, H)
        raw = self.output(torch.cat([h2, ctx, prev_embedding], -1))
        return step_scores(raw, self.normalisation), BeamState((h2, c2), src)

    def embed(self, weights: torch.Tensor) -> torch.Tensor:
        return weights.to(self.tgt_embed.weight.dtype) @ self.tgt_embed.weight

    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        return self._word_drop(self.tgt_embed(ids))


def build_translator(cfg: TranslatorConfig, n_src: int, n_tgt: int, *, eos: int, pad: int = 0,
                     seed: int = 0) -> AttentionTranslator:
    return AttentionTranslator(cfg, n_src, n_tgt, eos=eos, pad=pad, seed=seed)
