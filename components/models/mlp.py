"""Context-free MLP unary potentials for tagging (Shevchenko & Osokin, "Scaling matters", Sec. 6.1).

Per token ``t`` of a sentence, independently of every other token:

    x_t = [ E_word(w_t) ; CharCNN(c_t) ; E_1(f_t1) ; ... ; E_F(f_tF) ]     (dropout on x_t)
    h_t = ReLU(W_1 x_t + b_1)                                               (dropout on h_t)
    u_t = act(W_2 h_t + b_2)        act in {identity, ReLU, sigmoid} (``last_activation``)

giving the unary potentials ``u [B, N, L]`` of a linear-chain CRF. This is the chunking model
of Shevchenko & Osokin whose word-level BiLSTM is replaced by two linear layers with a ReLU in
between, the model for which "the scaling breaks" and joint training of unary and pairwise
terms underperforms; ``last_activation`` mirrors their OCR observation that a final ReLU breaks
joint training where a final sigmoid does not. The embeddings of the feature columns
(``TaggingBatch.feats``, e.g. the POS tag of CoNLL-2000) have ``feat_dim`` each, like the
paper's 10-dim POS embedding; the character CNN (Ma & Hovy 2016, :class:`CharCNN`) stands in
for the paper's character BiLSTM and only sees the characters of its own word.

There is no context across tokens: ``u_t`` depends on the inputs of token ``t`` alone.
Cost: O(B N (D H + H L)) with ``D = word_dim + char_filters + F * feat_dim``, plus
O(B N C K char_filters) for the char CNN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from components.config import check_range
from components.models.encoders import CharCNN, WordEmbedding

_ACTIVATIONS = ("none", "relu", "sigmoid")


@dataclass(frozen=True)
class MLPUnaryConfig:
    word_dim: int = 50
    char_filters: int = 30         # 0: no character features
    char_dim: int = 30
    char_width: int = 3
    feat_dim: int = 10             # embedding size of each feature column (POS: 10 in the paper)
    hidden: int = 128
    dropout: float = 0.0
    last_activation: Literal["none", "relu", "sigmoid"] = "none"
    freeze_embeddings: bool = False  # True: keep the word embeddings (e.g. GloVe rows) fixed

    def __post_init__(self):
        # feat_dim 0 is allowed without feature columns (the model checks it against the data)
        check_range(self, positive=("word_dim", "char_dim", "char_width", "hidden"),
                    nonnegative=("char_filters", "feat_dim"), within={"dropout": "[0, 1)"})


class MLPUnary(nn.Module):
    """Per-token MLP from word, character and feature-column embeddings to ``n_labels`` scores."""

    def __init__(self, cfg: MLPUnaryConfig, n_words: int, n_chars: int, feat_sizes: list[int], n_labels: int,
                 pretrained_ids: np.ndarray | None = None, pretrained: np.ndarray | None = None, seed: int = 0):
        super().__init__()
        if cfg.last_activation not in _ACTIVATIONS:
            raise ValueError(f"MLPUnaryConfig.last_activation must be one of {_ACTIVATIONS}, "
                             f"got {cfg.last_activation!r}")
        if n_labels < 1:
            raise ValueError(f"MLPUnary: n_labels must be >= 1, got {n_labels}")
        if feat_sizes and cfg.feat_dim < 1:
            raise ValueError(f"MLPUnary: {len(feat_sizes)} feature columns need feat_dim >= 1, got {cfg.feat_dim}")
        self.cfg = cfg
        # Seeded initialisation without touching the caller's global RNG state.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = WordEmbedding(n_words, cfg.word_dim, pretrained_ids=pretrained_ids, pretrained=pretrained,
                                       freeze=cfg.freeze_embeddings, seed=seed)
            if cfg.char_filters > 0:
                if n_chars < 2:
                    raise ValueError("MLPUnary: char_filters > 0 needs the character vocabulary size (n_chars >= 2)")
                self.chars = CharCNN(n_chars, cfg.char_dim, cfg.char_filters, cfg.char_width, cfg.dropout)
            else:
                self.chars = None
            self.feats = nn.ModuleList(nn.Embedding(n, cfg.feat_dim, padding_idx=0) for n in feat_sizes)
            d_in = cfg.word_dim + max(cfg.char_filters, 0) + len(feat_sizes) * cfg.feat_dim
            self.drop = nn.Dropout(cfg.dropout)
            self.hidden = nn.Linear(d_in, cfg.hidden)
            self.out = nn.Linear(cfg.hidden, n_labels)

    @property
    def n_feats(self) -> int:
        return len(self.feats)

    def forward(self, batch) -> torch.Tensor:
        """``batch``: a TaggingBatch (words [B, N], chars [B, N, C], feats [B, N, F]) -> unary [B, N, L].

        Padded positions get scores too (of the padding ids); read them with ``batch.mask``.
        """
        parts = [self.embed(batch.words)]
        if self.chars is not None:
            parts.append(self.chars(batch.chars))
        feats = batch.feats
        if feats.shape[-1] != len(self.feats):
            raise ValueError(f"MLPUnary: batch.feats has {feats.shape[-1]} feature columns "
                             f"(shape {list(feats.shape)}); the model was built for {len(self.feats)}")
        parts += [emb(feats[..., k]) for k, emb in enumerate(self.feats)]
        h = torch.relu(self.hidden(self.drop(torch.cat(parts, -1))))
        u = self.out(self.drop(h))
        if self.cfg.last_activation == "relu":
            return torch.relu(u)
        if self.cfg.last_activation == "sigmoid":
            return torch.sigmoid(u)
        return u
