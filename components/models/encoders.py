"""Word encoders for tagging.

``WordEmbedding``: a word-embedding table initialised from matched GloVe rows (the rest drawn
from N(0, 0.1^2); padding row zero), frozen or fine-tuned.
``BLSTMTagger``: embeddings -> dropout -> BLSTM(H per direction) -> dropout -> linear to L
label scores [B, N, L]. Trained with token cross-entropy it is the "local baseline" of Tu & Gimpel
(2019); its scores are the unary potentials of the BLSTM-CRF energy.
Cost: O(B N H (H + D)) per forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class BLSTMConfig:
    hidden: int = 100          # per direction
    layers: int = 1
    dropout: float = 0.5
    embedding_dim: int = 50
    freeze_embeddings: bool = True


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


class BLSTMTagger(nn.Module):
    def __init__(self, cfg: BLSTMConfig, n_words: int, n_labels: int, *, pretrained_ids=None,
                 pretrained=None, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.embed = WordEmbedding(n_words, cfg.embedding_dim, pretrained_ids=pretrained_ids,
                                   pretrained=pretrained, freeze=cfg.freeze_embeddings, seed=seed)
        self.drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(cfg.embedding_dim, cfg.hidden, num_layers=cfg.layers, batch_first=True,
                            bidirectional=True, dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.out = nn.Linear(2 * cfg.hidden, n_labels)

    def forward(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """words long [B, N], mask bool [B, N] -> label scores [B, N, L]."""
        x = self.drop(self.embed(words))
        lengths = mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=words.shape[1])
        return self.out(self.drop(h))
