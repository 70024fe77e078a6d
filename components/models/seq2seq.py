"""The seq2seq tagger of Goyal et al. (2018) and Goyal, Dyer & Berg-Kirkpatrick (2019), a ``StepScorer``.

Encoder: word embeddings (GloVe rows where matched) -> a one-layer LSTM over the sentence,
bidirectional (``encoder: blstm``, the 2018 paper) or left-to-right (``lstm``, the 2019 paper's
ablation). Decoder: a one-layer LSTM cell whose input at step i is [label embedding of the
previous symbol ; encoder state i] — the fixed attention to the i-th input when emitting the i-th
label, no attention parameters — and whose output layer reads [decoder state ; encoder state i].
The decoder starts from a state computed from the encoder (``init: encoder``: tanh of a linear map
of the encoder's summary, the last state of each direction) or from zeros (``init: zeros``; Goyal
2019's ablation). Scores are read through ``components.models.step_scorer.step_scores``: log-softmax
(``normalisation: local``, the default) or raw (``global``).

Costs per step: O(B k H (H + D_label + E)) for the decoder cell and O(B k V (H + E)) for the
output layer; the encoder runs once per batch, whatever the beam size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from components.config import check_range
from components.models.step_scorer import NORMALISATIONS, BeamState, check_mask, step_scores
from components.models.encoders import WordEmbedding


@dataclass(frozen=True)
class Seq2SeqTaggerConfig:
    embedding_dim: int = 50
    freeze_embeddings: bool = False
    hidden: int = 64               # encoder (per direction) and decoder
    label_dim: int = 8             # label embeddings (NER: 8 in the 2018 paper)
    dropout: float = 0.2           # on word embeddings and encoder states
    encoder: Literal["blstm", "lstm"] = "blstm"
    init: Literal["encoder", "zeros"] = "encoder"
    normalisation: Literal["local", "global"] = "local"

    def __post_init__(self):
        check_range(self, positive=("embedding_dim", "hidden", "label_dim"), within={"dropout": "[0, 1)"})
        if self.encoder not in ("blstm", "lstm"):
            raise ValueError(f"seq2seq tagger: encoder must be blstm or lstm, got {self.encoder!r}")
        if self.init not in ("encoder", "zeros"):
            raise ValueError(f"seq2seq tagger: init must be encoder or zeros, got {self.init!r}")
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(f"seq2seq tagger: normalisation must be one of {NORMALISATIONS}, got {self.normalisation!r}")


class Seq2SeqTagger(nn.Module):
    """A ``StepScorer`` over label sequences (see the module doc)."""

    def __init__(self, cfg: Seq2SeqTaggerConfig, n_words: int, n_labels: int, *, n_chars: int = 0,
                 glove_ids: np.ndarray | None = None, glove_vectors: np.ndarray | None = None, seed: int = 0):
        super().__init__()
        if n_labels < 1:
            raise ValueError(f"seq2seq tagger: n_labels must be >= 1, got {n_labels}")
        self.cfg = cfg
        self.n_labels = n_labels
        self.normalisation = cfg.normalisation
        torch.manual_seed(seed)
        self.embed_words = WordEmbedding(n_words, cfg.embedding_dim, pretrained_ids=glove_ids, pretrained=glove_vectors,
                                         freeze=cfg.freeze_embeddings, seed=seed)
        self.drop = nn.Dropout(cfg.dropout)
        bi = cfg.encoder == "blstm"
        self.encoder = nn.LSTM(cfg.embedding_dim, cfg.hidden, batch_first=True, bidirectional=bi)
        self.enc_dim = cfg.hidden * (2 if bi else 1)
        self.labels = nn.Embedding(n_labels, cfg.label_dim)
        self.start_label = nn.Parameter(torch.zeros(cfg.label_dim))
        self.cell = nn.LSTMCell(cfg.label_dim + self.enc_dim, cfg.hidden)
        self.init_h = nn.Linear(self.enc_dim, cfg.hidden) if cfg.init == "encoder" else None
        self.out = nn.Linear(cfg.hidden + self.enc_dim, n_labels)

    # -- encoder -------------------------------------------------------------------------------
    def encode(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (encoder states [B, T, E], summary [B, E]: last forward state ; first backward state)."""
        mask = batch.mask
        x = self.drop(self.embed_words(batch.words))
        lengths = mask.sum(1).cpu().clamp_min(1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.encoder(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=batch.words.shape[1])
        h = self.drop(h)
        last = (lengths - 1).to(h.device)
        fwd = h[torch.arange(h.shape[0], device=h.device), last, :self.cfg.hidden]
        summary = torch.cat([fwd, h[:, 0, self.cfg.hidden:]], -1) if self.cfg.encoder == "blstm" else fwd
        return h, summary

    # -- StepScorer ----------------------------------------------------------------------------
    def start(self, batch: Any, k: int) -> tuple[BeamState, torch.Tensor]:
        check_mask(batch.mask)
        enc, summary = self.encode(batch)
        B = enc.shape[0]
        h0 = torch.tanh(self.init_h(summary)) if self.init_h is not None else enc.new_zeros(B, self.cfg.hidden)
        h = h0[:, None].expand(B, k, -1)
        c = torch.zeros_like(h)
        return BeamState((h, c), (enc, 0)), batch.mask

    def step(self, state: BeamState, prev_embedding: torch.Tensor | None) -> tuple[torch.Tensor, BeamState]:
        (h, c), (enc, t) = state.beam, state.context
        B, k, H = h.shape
        if prev_embedding is None:
            prev_embedding = self.start_label.expand(B, k, -1)
        enc_t = enc[:, t, None, :].expand(B, k, -1)
        x = torch.cat([prev_embedding, enc_t], -1).reshape(B * k, -1)
        h2, c2 = self.cell(x, (h.reshape(B * k, H), c.reshape(B * k, H)))
        h2, c2 = h2.reshape(B, k, H), c2.reshape(B, k, H)
        raw = self.out(torch.cat([h2, enc_t], -1))
        return step_scores(raw, self.normalisation), BeamState((h2, c2), (enc, t + 1))

    def embed(self, weights: torch.Tensor) -> torch.Tensor:
        return weights.to(self.labels.weight.dtype) @ self.labels.weight

    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        return self.labels(ids)


def build_seq2seq(cfg: Seq2SeqTaggerConfig, n_words: int, n_chars: int, n_labels: int, *,
                  glove_ids: np.ndarray | None = None, glove_vectors: np.ndarray | None = None,
                  seed: int = 0) -> Seq2SeqTagger:
    return Seq2SeqTagger(cfg, n_words, n_labels, n_chars=n_chars, glove_ids=glove_ids, glove_vectors=glove_vectors,
                         seed=seed)
