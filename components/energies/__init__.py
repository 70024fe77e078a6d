"""Energies: the Energy contract and its implementations. ``ENERGIES`` defines their names, once.

``ENERGIES.build(name, cfg, **inputs)``: chain-CRF energies over tagging data
(``meta["data"] == "tagging"``) take inputs ``n_words, n_chars, n_labels`` and optionally
``glove_ids, glove_vectors, seed``; the Gaussian CRF over grids (``"grid"``) takes
``in_channels, n_labels`` and optionally ``seed``; the masked-LM energies (``"mlm"``, thesis ch. 6)
take ``model``, a ``components.models.mlm.MaskedLM``. ``meta["protocol"]`` is the contract the built
object implements (``ChainEnergy`` or ``Energy``).
"""
from __future__ import annotations

import dataclasses

from components.energies.base import ChainEnergy, ChainPotentials, Energy, FixedPotentials, require
from components.energies.chain_crf import ChainCRFEnergy
from components.energies.gcrf import GCRFConfig, GaussianCRF
from components.energies.mlm import MLMEnergy, MLMEnergyConfig, MLMScorer
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.models.encoders import BLSTMConfig, BLSTMTagger
from components.registry import Registry


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


def gcrf(cfg: GCRFConfig, in_channels: int, n_labels: int, seed: int | None = None) -> GaussianCRF:
    """Gaussian CRF with UNet unaries and pixel embeddings (Shevchenko & Osokin Sec. 4.2)."""
    return GaussianCRF(in_channels, n_labels, cfg, seed=seed)


ENERGIES = Registry("energy")
ENERGIES.register("blstm_crf", BLSTMConfig, blstm_crf, data="tagging", protocol=ChainEnergy)
ENERGIES.register("blstm_crf_plus", BLSTMConfig, blstm_crf_plus, data="tagging", protocol=ChainEnergy)
ENERGIES.register("gcrf", GCRFConfig, gcrf, data="grid", protocol=Energy)
ENERGIES.register("mlm_raw", MLMEnergyConfig, lambda cfg, model: MLMEnergy(model, "raw", cfg), data="mlm",
                  protocol=Energy, doc="E_raw(y) = -sum_t log phi_t(y): an MLM's raw masked logits (thesis 6.2.1)")
ENERGIES.register("mlm_norm", MLMEnergyConfig, lambda cfg, model: MLMEnergy(model, "norm", cfg), data="mlm",
                  protocol=Energy, doc="E_norm(y) = -sum_t log p_mlm(y_t | y_\\t): locally normalised (thesis 6.2.4)")

__all__ = ["ENERGIES", "ChainCRFEnergy", "ChainEnergy", "ChainPotentials", "Energy", "FixedPotentials", "GaussianCRF",
           "MLMEnergy", "MLMEnergyConfig", "MLMScorer", "UnaryPairwiseCRF", "require"]
