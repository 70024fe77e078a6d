"""Linear-chain CRF energy (Lafferty et al. 2001; Tu & Gimpel 2019, eq. 2).

    E(x, y) = -( sum_t y_t . U(x)_t  +  sum_{t>1} y_{t-1}^T W y_t )

U(x) [B, N, L] comes from a feature network (BLSTM-CRF: a BLSTM over fixed GloVe embeddings;
BLSTM-CRF+: plus a character CNN and fine-tuned embeddings), W [L, L] is a learned transition
matrix (W[i, j]: label i followed by label j). The same expression scores discrete labels and
relaxed outputs (rows of [B, N, L] on the simplex), which is what gradient-descent inference and
inference networks optimise.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from components.energies.chain import ChainPotentials
from components.models.encoders import BLSTMConfig, BLSTMTagger


class ChainCRFEnergy(nn.Module):
    structure = "chain"                 # see components.energies.base.ChainEnergy

    def __init__(self, features: nn.Module, n_labels: int):
        super().__init__()
        self.features = features
        self.transition = nn.Parameter(torch.zeros(n_labels, n_labels))

    def potentials(self, batch: Any) -> ChainPotentials:
        unary = self.features(batch.words, batch.mask, batch.chars)
        return ChainPotentials(unary, self.transition, batch.mask)

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor:
        return self.potentials(batch).energy(y)


def _chain_crf(cfg: BLSTMConfig, n_words, n_chars, n_labels, glove_ids=None, glove_vectors=None, seed=0):
    features = BLSTMTagger(cfg, n_words, n_labels, n_chars=n_chars, pretrained_ids=glove_ids,
                           pretrained=glove_vectors, seed=seed)
    return ChainCRFEnergy(features, n_labels)


def blstm_crf(cfg: BLSTMConfig, **inputs) -> ChainCRFEnergy:
    """BLSTM over fixed GloVe embeddings; no character features."""
    return _chain_crf(dataclasses.replace(cfg, char_filters=0, freeze_embeddings=True), **inputs)


def blstm_crf_plus(cfg: BLSTMConfig, **inputs) -> ChainCRFEnergy:
    """BLSTM-CRF+: character CNN (30 filters of width 3 over 30-dim char embeddings, max-pooled),
    fine-tuned word embeddings, dropout 0.5 (Tu & Gimpel 2019, Sec. 7)."""
    return _chain_crf(dataclasses.replace(cfg, char_filters=cfg.char_filters or 30, freeze_embeddings=False), **inputs)
