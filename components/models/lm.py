"""A small LSTM language model over token-id sequences (words or labels).

Used for the search-error analysis of Tu & Gimpel (2019, Sec. 6.2): two LMs, one on word
sequences and one on gold label sequences, give each test sentence a perplexity, which is then
rank-correlated with the search error of an approximate inference method.

Input ids [B, N] with mask [B, N]; the model predicts token t from tokens < t, with a BOS id
prepended and an EOS id appended. Cost O(B N H (H + D + V)) per forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from components.config import check_range


@dataclass(frozen=True)
class LMConfig:
    dim: int = 32
    hidden: int = 64
    dropout: float = 0.2

    def __post_init__(self):
        check_range(self, positive=("dim", "hidden"), within={"dropout": "[0, 1)"})


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


def lm_batches(seqs: Sequence[Sequence[int]], batch_size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Length-sorted padded batches ``(ids [b, n] long, mask [b, n] bool)`` of ``seqs``, with the
    sequences' positions in ``seqs`` as a third element ``order`` [b] (to put results back)."""
    if any(len(s) == 0 for s in seqs):
        raise ValueError("lm_batches: empty sequence (an LM scores at least one token)")
    order = np.argsort([len(s) for s in seqs], kind="stable")
    out = []
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        n = max(len(seqs[j]) for j in idx)
        ids = torch.zeros(len(idx), n, dtype=torch.long)
        for b, j in enumerate(idx):
            ids[b, :len(seqs[j])] = torch.as_tensor(seqs[j], dtype=torch.long)
        lengths = torch.tensor([len(seqs[j]) for j in idx])
        out.append((ids, torch.arange(n)[None] < lengths[:, None], torch.as_tensor(idx)))
    return out


@torch.no_grad()
def perplexities(lm: LSTMLM, seqs: Sequence[Sequence[int]], batch_size: int = 64) -> np.ndarray:
    """Per-sequence perplexity [len(seqs)] in the order of ``seqs`` (padding never affects a
    sequence's score: the LM is left-to-right and padded positions come after its last token)."""
    out = np.empty(len(seqs))
    for ids, mask, idx in lm_batches(seqs, batch_size):
        out[idx.numpy()] = lm.perplexity(ids, mask).double().numpy()
    return out
