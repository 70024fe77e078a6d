r"""Inference-network architectures for sequence labelling (Tu & Gimpel 2019, Sec. 4.1).

An inference network A(x) maps a sentence to label logits ``[B, N, L]``; its softmax is a point
of the relaxed output space (rows on the simplex) and its per-position argmax a labelling. Every
network here has the interface of ``BLSTMTagger``::

    net(words [B, N] long, mask [B, N] bool, chars [B, N, C] long | None, *, unrolled=False)
        -> logits [B, N, L]

so the local-baseline helpers of ``components.training.tagger`` (``token_ce_loss``,
``predict_tags``) train and evaluate them unchanged. Outputs at real positions never depend on
the content of padded positions.

Architectures (``INFNETS``; ``H`` = ``InfNetConfig.hidden``, ``D`` = word-embedding dim plus the
char-CNN filters):

- ``cnn``: per width ``w = 2n + 1`` in ``cnn_widths`` (the paper's {1,3}- or {1,5}-gram nets)
  ``H`` filters ``f_n(x, t) = relu(W_n [v_{t-n}; ...; v_{t+n}] + b_n)`` over the word window
  centred on ``t`` (zero vectors beyond the sentence), no pooling; the feature maps are
  concatenated and mapped linearly to ``L``. ``O(B N D H sum(w))``.
- ``blstm``: the BLSTM tagger (``components.models.encoders.BLSTMTagger``, 1 or more layers, ``H``
  per direction, linear from ``2H`` to ``L``). ``O(B N H (H + D))``.
- ``seq2seq``: a BLSTM encoder ``s_t`` (``H`` per direction) and an LSTM decoder (``H``) with fixed
  position attention (Goyal et al. 2018): at step ``t`` the context is exactly ``s_t``; the
  decoder input is ``[e(y_{t-1}); s_t]`` and ``logits_t = W_s [h_t; s_t]``. ``e(y_0)`` is a learned
  start vector. **Choice:** with ``seq2seq_feed: soft`` (default) the previous "prediction" is
  fed as the expected label embedding ``softmax(logits_{t-1}) @ E`` — differentiable, so the
  energy's gradient reaches earlier positions through the feed, and training and test run the
  same function. ``hard`` feeds ``E[argmax logits_{t-1}]`` as the paper does (scheduled-sampling
  style, no gradient through the choice). ``O(B N H (H + D + L))`` with an ``N``-step loop.

"+" variants (Sec. 2.1 / 7; :func:`plus_config`): a character CNN (30 filters of width 3 over 30-dim
char embeddings, max-pooled; ``CharCNN``), fine-tuned word embeddings and dropout 0.5 on the
char embeddings, on the word-embedding layer and after the BLSTM / convolutions.

``unrolled=True`` runs every LSTM as an explicit masked time loop over the module's own
parameters (``torch.func.vmap`` has no batching rule for ``aten::lstm`` / ``aten::lstm_cell`` in
torch 2.13 and packed sequences need concrete lengths); it computes the same function as the
packed cuDNN/MKL path and is what instance tailoring vmaps over. The seq2seq decoder always uses
the explicit cell. The CNN ignores the flag.

Reference: L. Tu, K. Gimpel (2019), Benchmarking approximate inference methods for neural
structured prediction, NAACL. K. Goyal, G. Neubig, C. Dyer, T. Berg-Kirkpatrick (2018), A
continuous relaxation of beam search for end-to-end training of neural sequence models, AAAI.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from components.config import check_range
from components.models.encoders import BLSTMConfig, BLSTMTagger, CharCNN, WordEmbedding

__all__ = ["InfNetConfig", "plus_config", "CNNInfNet", "BLSTMInfNet", "Seq2SeqInfNet", "INFNETS",
           "build_infnet", "lstm_unrolled"]

_CHAR_DIM, _CHAR_WIDTH, _PLUS_CHAR_FILTERS, _PLUS_DROPOUT = 30, 3, 30, 0.5


@dataclass(frozen=True)
class InfNetConfig:
    arch: Literal["cnn", "blstm", "seq2seq"] = "blstm"
    hidden: int = 100                      # H: filters per width (cnn), per direction (blstm, seq2seq)
    cnn_widths: tuple[int, ...] = (1, 3)   # odd window widths 2n+1: (1, 3) or (1, 5)
    layers: int = 1                        # BLSTM layers (blstm, seq2seq encoder)
    dropout: float = 0.0                   # "+": 0.5
    char_filters: int = 0                  # "+": 30 (a char CNN); 0 = none
    freeze_embeddings: bool = True         # "+": False (fine-tuned)
    embedding_dim: int = 50
    seq2seq_feed: Literal["soft", "hard"] = "soft"

    def __post_init__(self):
        if self.arch not in INFNET_ARCHS:
            raise ValueError(f"InfNetConfig.arch must be one of {INFNET_ARCHS}, got {self.arch!r}")
        check_range(self, positive=("hidden", "layers", "embedding_dim"), nonnegative=("char_filters",),
                    within={"dropout": "[0, 1)"})
        if not self.cnn_widths or any(w < 1 or w % 2 == 0 for w in self.cnn_widths):
            raise ValueError(f"InfNetConfig.cnn_widths must be odd positive window widths (2n+1), "
                             f"got {self.cnn_widths}")
        if self.seq2seq_feed not in ("soft", "hard"):
            raise ValueError(f"InfNetConfig.seq2seq_feed must be 'soft' or 'hard', got {self.seq2seq_feed!r}")


INFNET_ARCHS = ("cnn", "blstm", "seq2seq")


def plus_config(cfg: InfNetConfig) -> InfNetConfig:
    """The "+" version of ``cfg`` (infnet+): char CNN (30 filters unless set), fine-tuned word
    embeddings, dropout 0.5 (Tu & Gimpel 2019, Sec. 2.1 and 7)."""
    return dataclasses.replace(cfg, char_filters=cfg.char_filters or _PLUS_CHAR_FILTERS,
                               freeze_embeddings=False, dropout=_PLUS_DROPOUT)


# ---------------------------------------------------------------------------------------------
# Explicit (vmap-able) LSTMs over nn.LSTM / nn.LSTMCell parameters
# ---------------------------------------------------------------------------------------------

def _cell(x_proj: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_hh: torch.Tensor):
    """One LSTM step; ``x_proj`` = x W_ih^T + b_ih + b_hh [B, 4H]; gates in torch order i, f, g, o."""
    i, f, g, o = (x_proj + h @ w_hh.T).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _scan(x: torch.Tensor, mask: torch.Tensor, w_ih, w_hh, b_ih, b_hh, reverse: bool) -> torch.Tensor:
    """One direction of one layer: x [B, N, D] -> h [B, N, H] (zero at padded positions).

    The state is carried only through real positions, so the reverse direction starts at each
    sentence's last word, exactly as with packed sequences.
    """
    B, N, _ = x.shape
    H = w_hh.shape[1]
    xp = x @ w_ih.T + (b_ih + b_hh)               # all input projections in one matmul
    h = xp.new_zeros(B, H)
    c = xp.new_zeros(B, H)
    out: list[torch.Tensor] = [xp] * N
    for t in (range(N - 1, -1, -1) if reverse else range(N)):
        m = mask[:, t, None]
        h_new, c_new = _cell(xp[:, t], h, c, w_hh)
        h, c = torch.where(m, h_new, h), torch.where(m, c_new, c)
        out[t] = h_new * m
    return torch.stack(out, 1)


def lstm_unrolled(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor, training: bool = False) -> torch.Tensor:
    """``nn.LSTM`` (batch_first, any layers, uni- or bidirectional) as an explicit masked loop:
    x [B, N, D], mask [B, N] -> [B, N, H * directions], equal to the packed-sequence output
    (zeros at padded positions). Inter-layer dropout follows ``lstm.dropout`` when ``training``."""
    if not lstm.batch_first or lstm.proj_size:
        raise ValueError("lstm_unrolled: expects batch_first=True and no projections")
    dirs = 2 if lstm.bidirectional else 1
    for layer in range(lstm.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            outs.append(_scan(x, mask, getattr(lstm, "weight_ih" + sfx), getattr(lstm, "weight_hh" + sfx),
                              getattr(lstm, "bias_ih" + sfx), getattr(lstm, "bias_hh" + sfx), reverse=bool(d)))
        x = torch.cat(outs, -1) if dirs == 2 else outs[0]
        if layer < lstm.num_layers - 1 and lstm.dropout > 0:
            x = F.dropout(x, lstm.dropout, training)
    return x


def _lstm_packed(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    lengths = mask.sum(1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    h, _ = lstm(packed)
    h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
    return h


# ---------------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------------

class _Inputs(nn.Module):
    """[word embedding ; char-CNN features], dropout, zeroed at padded positions -> [B, N, D]."""

    def _init_inputs(self, cfg: InfNetConfig, n_words: int, n_chars: int, pretrained_ids, pretrained, seed):
        self.embed = WordEmbedding(n_words, cfg.embedding_dim, pretrained_ids=pretrained_ids,
                                   pretrained=pretrained, freeze=cfg.freeze_embeddings, seed=seed)
        self.drop = nn.Dropout(cfg.dropout)
        if cfg.char_filters > 0:
            if n_chars < 2:
                raise ValueError(f"{type(self).__name__}: char_filters > 0 needs the character vocabulary "
                                 f"size (n_chars), got {n_chars}")
            self.chars = CharCNN(n_chars, _CHAR_DIM, cfg.char_filters, _CHAR_WIDTH, cfg.dropout)
        else:
            self.chars = None
        return cfg.embedding_dim + cfg.char_filters

    def _inputs(self, words: torch.Tensor, mask: torch.Tensor, chars: torch.Tensor | None) -> torch.Tensor:
        x = self.drop(self.embed(words))
        if self.chars is not None:
            if chars is None:
                raise ValueError(f"{type(self).__name__}: this network has a char CNN; pass chars [B, N, C]")
            x = torch.cat([x, self.chars(chars)], -1)
        return x * mask[..., None].to(x.dtype)


class CNNInfNet(_Inputs):
    """Window CNN (Sec. 4.1.1): logits [B, N, L] from concatenated ReLU feature maps."""

    def __init__(self, cfg: InfNetConfig, n_words: int, n_labels: int, *, n_chars: int = 0,
                 pretrained_ids: np.ndarray | None = None, pretrained: np.ndarray | None = None, seed: int = 0):
        super().__init__()
        self.config = cfg
        d_in = self._init_inputs(cfg, n_words, n_chars, pretrained_ids, pretrained, seed)
        self.convs = nn.ModuleList(nn.Conv1d(d_in, cfg.hidden, w, padding=w // 2) for w in cfg.cnn_widths)
        self.out = nn.Linear(len(cfg.cnn_widths) * cfg.hidden, n_labels)

    def forward(self, words: torch.Tensor, mask: torch.Tensor, chars: torch.Tensor | None = None, *,
                unrolled: bool = False) -> torch.Tensor:
        """words [B, N], mask [B, N], chars [B, N, C] -> logits [B, N, L]."""
        x = self._inputs(words, mask, chars).transpose(1, 2)                  # [B, D, N]
        h = torch.cat([torch.relu(conv(x)) for conv in self.convs], 1)     # [B, k H, N]
        return self.out(self.drop(h.transpose(1, 2)))


class BLSTMInfNet(BLSTMTagger):
    """The BLSTM tagger (Sec. 4.1.2) with an ``unrolled`` (vmap-able) path; its parameters and
    state dict are those of ``BLSTMTagger``."""

    def __init__(self, cfg: InfNetConfig, n_words: int, n_labels: int, *, n_chars: int = 0,
                 pretrained_ids: np.ndarray | None = None, pretrained: np.ndarray | None = None, seed: int = 0):
        bcfg = BLSTMConfig(hidden=cfg.hidden, layers=cfg.layers, dropout=cfg.dropout,
                           embedding_dim=cfg.embedding_dim, freeze_embeddings=cfg.freeze_embeddings,
                           char_filters=cfg.char_filters, char_dim=_CHAR_DIM, char_width=_CHAR_WIDTH)
        super().__init__(bcfg, n_words, n_labels, n_chars=n_chars, pretrained_ids=pretrained_ids,
                         pretrained=pretrained, seed=seed)
        self.config = cfg

    def forward(self, words: torch.Tensor, mask: torch.Tensor, chars: torch.Tensor | None = None, *,
                unrolled: bool = False) -> torch.Tensor:
        """words [B, N], mask [B, N], chars [B, N, C] -> logits [B, N, L]."""
        if not unrolled:
            return super().forward(words, mask, chars)
        x = self.drop(self.embed(words))
        if self.chars is not None:
            if chars is None:
                raise ValueError("BLSTMInfNet: this network has a char CNN; pass chars [B, N, C]")
            x = torch.cat([x, self.chars(chars)], -1)
        return self.out(self.drop(lstm_unrolled(self.lstm, x, mask, self.training)))


class Seq2SeqInfNet(_Inputs):
    """BLSTM encoder + LSTM decoder with fixed position attention (Sec. 4.1.3)."""

    def __init__(self, cfg: InfNetConfig, n_words: int, n_labels: int, *, n_chars: int = 0,
                 pretrained_ids: np.ndarray | None = None, pretrained: np.ndarray | None = None, seed: int = 0):
        super().__init__()
        self.config = cfg
        H = cfg.hidden
        d_in = self._init_inputs(cfg, n_words, n_chars, pretrained_ids, pretrained, seed)
        self.encoder = nn.LSTM(d_in, H, num_layers=cfg.layers, batch_first=True, bidirectional=True,
                               dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.label_embed = nn.Embedding(n_labels + 1, H)        # row n_labels: the start symbol
        self.decoder = nn.LSTMCell(H + 2 * H, H)
        self.out = nn.Linear(H + 2 * H, n_labels)
        self.n_labels = n_labels

    def forward(self, words: torch.Tensor, mask: torch.Tensor, chars: torch.Tensor | None = None, *,
                unrolled: bool = False) -> torch.Tensor:
        """words [B, N], mask [B, N], chars [B, N, C] -> logits [B, N, L]; step t depends on
        positions <= t of the decoder and on all of x through the encoder."""
        x = self._inputs(words, mask, chars)
        s = lstm_unrolled(self.encoder, x, mask, self.training) if unrolled else _lstm_packed(self.encoder, x, mask)
        s = self.drop(s)                                            # [B, N, 2H]
        B, N, _ = s.shape
        E = self.label_embed.weight                                 # [L + 1, H]
        dec = self.decoder
        w_ih, w_hh, bias = dec.weight_ih, dec.weight_hh, dec.bias_ih + dec.bias_hh
        # the context part of the decoder input, projected for all steps at once
        s_proj = s @ w_ih[:, E.shape[1]:].T + bias                  # [B, N, 4H]
        w_prev = w_ih[:, :E.shape[1]]
        prev = E[self.n_labels].expand(B, -1)
        h = s.new_zeros(B, dec.hidden_size)
        c = s.new_zeros(B, dec.hidden_size)
        logits = []
        for t in range(N):
            h, c = _cell(s_proj[:, t] + prev @ w_prev.T, h, c, w_hh)
            z = self.out(torch.cat([self.drop(h), s[:, t]], -1))   # [B, L]
            logits.append(z)
            if self.config.seq2seq_feed == "soft":
                prev = torch.softmax(z, -1) @ E[:self.n_labels]
            else:
                prev = E[z.detach().argmax(-1)]
        return torch.stack(logits, 1)


INFNETS: dict[str, type[nn.Module]] = {"cnn": CNNInfNet, "blstm": BLSTMInfNet, "seq2seq": Seq2SeqInfNet}


def build_infnet(cfg: InfNetConfig, n_words: int, n_chars: int, n_labels: int,
                 glove_ids: np.ndarray | None = None, glove_vectors: np.ndarray | None = None,
                 seed: int = 0) -> nn.Module:
    """The network ``cfg.arch`` with word embeddings initialised from GloVe rows ``glove_ids`` ->
    ``glove_vectors`` [k, embedding_dim]. Initialisation is a function of ``seed`` alone (the global
    torch RNG is forked, not advanced)."""
    if cfg.arch not in INFNETS:
        raise ValueError(f"build_infnet: unknown arch {cfg.arch!r}; known: {sorted(INFNETS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return INFNETS[cfg.arch](cfg, n_words, n_labels, n_chars=n_chars, pretrained_ids=glove_ids,
                                 pretrained=glove_vectors, seed=seed)
