"""Word encoders for tagging.

``WordEmbedding``: a word-embedding table initialised from matched GloVe rows (the rest drawn
from N(0, 0.1^2); padding row zero), frozen or fine-tuned.
``CharCNN``: character embeddings (30-dim) -> convolution of width 3 -> max-pool over the word
(Ma & Hovy 2016), the character features of BLSTM-CRF+.
``BLSTMTagger``: [word embeddings ; char-CNN features] -> dropout -> BLSTM(H per direction) ->
dropout -> linear to L label scores [B, N, L]. Trained with token cross-entropy it is the "local
baseline" of Tu & Gimpel (2019); its scores are the unary potentials of the BLSTM-CRF energy.
With ``char_filters > 0`` and ``freeze_embeddings: false`` it is the BLSTM-CRF+ feature network
(Tu & Gimpel 2019, Sec. 7: char CNN, fine-tuned embeddings, dropout 0.5 before the char CNN, on
the word-embedding layer and after the BLSTM).
Cost: O(B N H (H + D)) per forward pass, plus O(B N C K F) for the char CNN.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from components.config import check_range


@dataclass(frozen=True)
class BLSTMConfig:
    hidden: int = 100          # per direction
    layers: int = 1
    dropout: float = 0.5
    embedding_dim: int = 50
    freeze_embeddings: bool = True
    char_filters: int = 0      # > 0: a char CNN with this many filters (BLSTM-CRF+ uses 30)
    char_dim: int = 30
    char_width: int = 3

    def __post_init__(self):
        check_range(self, positive=("hidden", "layers", "embedding_dim", "char_dim", "char_width"),
                    nonnegative=("char_filters",), within={"dropout": "[0, 1)"})


class WordEmbedding(nn.Module):
    def __init__(self, vocab_size: int, dim: int, *, pretrained_ids: np.ndarray | None = None,
                 pretrained: np.ndarray | None = None, freeze: bool = True, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        weight = torch.randn(vocab_size, dim, generator=g) * 0.1
        weight[0] = 0.0
        if pretrained is not None and len(pretrained):
            if pretrained.shape[1] != dim:
                raise ValueError(f"pretrained vectors have dim {pretrained.shape[1]}, the model expects {dim}")
            weight[torch.as_tensor(pretrained_ids)] = torch.as_tensor(pretrained)
        self.embedding = nn.Embedding.from_pretrained(weight, freeze=freeze, padding_idx=0)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        return self.embedding(words)


class CharCNN(nn.Module):
    def __init__(self, n_chars: int, dim: int = 30, filters: int = 30, width: int = 3, dropout: float = 0.5):
        super().__init__()
        self.embed = nn.Embedding(n_chars, dim, padding_idx=0)
        self.drop = nn.Dropout(dropout)          # on the char embeddings, before the CNN
        self.conv = nn.Conv1d(dim, filters, width, padding=width // 2)

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """chars long [B, N, C] (0 = pad) -> features [B, N, filters]."""
        B, N, C = chars.shape
        x = self.drop(self.embed(chars.reshape(B * N, C))).transpose(1, 2)          # [BN, dim, C]
        h = self.conv(x)                                                  # [BN, F, C]
        h = h.masked_fill((chars.reshape(B * N, 1, C) == 0), float("-inf")).amax(-1)
        return torch.nan_to_num(h, neginf=0.0).reshape(B, N, -1)          # all-pad words -> 0


class BLSTMTagger(nn.Module):
    def __init__(self, cfg: BLSTMConfig, n_words: int, n_labels: int, *, n_chars: int = 0,
                 pretrained_ids=None, pretrained=None, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.embed = WordEmbedding(n_words, cfg.embedding_dim, pretrained_ids=pretrained_ids,
                                   pretrained=pretrained, freeze=cfg.freeze_embeddings, seed=seed)
        self.drop = nn.Dropout(cfg.dropout)
        if cfg.char_filters > 0:
            if n_chars < 2:
                raise ValueError("BLSTMTagger: char_filters > 0 needs the character vocabulary size (n_chars)")
            self.chars = CharCNN(n_chars, cfg.char_dim, cfg.char_filters, cfg.char_width, cfg.dropout)
        else:
            self.chars = None
        d_in = cfg.embedding_dim + max(cfg.char_filters, 0)
        self.lstm = nn.LSTM(d_in, cfg.hidden, num_layers=cfg.layers, batch_first=True,
                            bidirectional=True, dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.out = nn.Linear(2 * cfg.hidden, n_labels)

    def forward(self, words: torch.Tensor, mask: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """words long [B, N], mask bool [B, N], chars long [B, N, C] -> label scores [B, N, L]."""
        x = self.drop(self.embed(words))
        if self.chars is not None:
            if chars is None:
                raise ValueError("BLSTMTagger: this model has a char CNN; pass chars [B, N, C]")
            x = torch.cat([x, self.chars(chars)], -1)
        lengths = mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=words.shape[1])
        return self.out(self.drop(h))
