"""A small LSTM language model over token-id sequences (words or labels).

Used for the search-error analysis of Tu & Gimpel (2019, Sec. 6.2): two LMs, one on word
sequences and one on gold label sequences, give each test sentence a perplexity, which is then
rank-correlated with the search error of an approximate inference method.

Input ids [B, N] with mask [B, N]; the model predicts token t from tokens < t, with a BOS id
prepended and an EOS id appended. Cost O(B N H (H + D + V)) per forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LMConfig:
    dim: int = 32
    hidden: int = 64
    dropout: float = 0.2


class LSTMLM(nn.Module):
    def __init__(self, vocab_size: int, cfg: LMConfig = LMConfig()):
        super().__init__()
        self.bos, self.eos = vocab_size, vocab_size + 1          # two extra ids
        self.embed = nn.Embedding(vocab_size + 2, cfg.dim)
        self.lstm = nn.LSTM(cfg.dim, cfg.hidden, batch_first=True)
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden, vocab_size + 2)

    def token_nll(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (summed NLL per sequence [B], number of predicted tokens per sequence [B] incl. EOS)."""
        B, N = ids.shape
        lengths = mask.sum(1)
        inp = torch.cat([torch.full((B, 1), self.bos, dtype=ids.dtype, device=ids.device), ids], 1)
        tgt = torch.cat([ids, torch.zeros(B, 1, dtype=ids.dtype, device=ids.device)], 1)
        tgt[torch.arange(B), lengths] = self.eos
        tmask = torch.arange(N + 1, device=ids.device)[None] <= lengths[:, None]
        h, _ = self.lstm(self.drop(self.embed(inp)))
        logits = self.out(self.drop(h))
        nll = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none") * tmask
        return nll.sum(1), tmask.sum(1)

    def loss(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        nll, n = self.token_nll(ids, mask)
        return nll.sum() / n.sum()

    @torch.no_grad()
    def perplexity(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-sequence perplexity exp(mean token NLL) [B]."""
        self.eval()
        nll, n = self.token_nll(ids, mask)
        return torch.exp(nll / n)
