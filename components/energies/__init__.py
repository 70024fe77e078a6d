"""Energies: the Energy contract and its implementations.

``ENERGIES`` maps a name to a builder ``(model_cfg, n_words, n_chars, n_labels, glove_ids,
glove_vectors, seed) -> Energy``; each builder only declares what differs.
"""
from __future__ import annotations

import dataclasses

from components.energies.base import ChainPotentials, Energy
from components.energies.chain_crf import ChainCRFEnergy
from components.energies.gcrf import GaussianCRF
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.models.encoders import BLSTMConfig, BLSTMTagger


def _chain_crf(cfg: BLSTMConfig, n_words, n_chars, n_labels, glove_ids=None, glove_vectors=None, seed=0):
    features = BLSTMTagger(cfg, n_words, n_labels, n_chars=n_chars, pretrained_ids=glove_ids,
                           pretrained=glove_vectors, seed=seed)
    return ChainCRFEnergy(features, n_labels)


def blstm_crf(cfg: BLSTMConfig, *args, **kwargs) -> ChainCRFEnergy:
    """BLSTM over fixed GloVe embeddings; no character features."""
    return _chain_crf(dataclasses.replace(cfg, char_filters=0, freeze_embeddings=True), *args, **kwargs)


def blstm_crf_plus(cfg: BLSTMConfig, *args, **kwargs) -> ChainCRFEnergy:
    """BLSTM-CRF+: character CNN (30 filters of width 3 over 30-dim char embeddings, max-pooled),
    fine-tuned word embeddings, dropout 0.5 (Tu & Gimpel 2019, Sec. 7)."""
    return _chain_crf(dataclasses.replace(cfg, char_filters=cfg.char_filters or 30, freeze_embeddings=False),
                      *args, **kwargs)


ENERGIES = {"blstm_crf": blstm_crf, "blstm_crf_plus": blstm_crf_plus}

__all__ = ["ENERGIES", "ChainCRFEnergy", "ChainPotentials", "Energy", "GaussianCRF", "UnaryPairwiseCRF"]
