"""Adapters for the published linear-chain CRF libraries, for benchmarks only.

pytorch-crf (``torchcrf.CRF``, Kmkurn) and torch-struct (``torch_struct.LinearChainCRF``, Rush
2020) are optional (``pip install -e '.[bench]'``) and never runtime dependencies. Each adapter
takes this project's inputs (unary [B, N, L], shared transition [L, L], left-aligned mask) and
computes the same quantity, so benchmark timings compare like with like (the benchmark checks
that the values agree before timing them).
"""
from __future__ import annotations

import torch


def _need(module: str, extra: str = "bench"):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"benchmark baseline {module!r} is not installed: pip install -e '.[{extra}]'") from e


class PytorchCRF:
    """pytorch-crf with zero start/end scores and our transition matrix."""

    name = "pytorch_crf"

    def __init__(self, transition: torch.Tensor):
        torchcrf = _need("torchcrf")
        L = transition.shape[0]
        self.crf = torchcrf.CRF(L, batch_first=True).to(transition.device, transition.dtype)
        with torch.no_grad():
            self.crf.transitions.copy_(transition)
            self.crf.start_transitions.zero_()
            self.crf.end_transitions.zero_()

    @torch.no_grad()
    def log_partition(self, unary, mask):
        return self.crf._compute_normalizer(unary.transpose(0, 1), mask.transpose(0, 1))

    def marginals(self, unary, mask):
        u = unary.detach().requires_grad_()
        logz = self.crf._compute_normalizer(u.transpose(0, 1), mask.transpose(0, 1))
        (g,) = torch.autograd.grad(logz.sum(), u)
        return g

    @torch.no_grad()
    def viterbi(self, unary, mask):
        return self.crf.decode(unary, mask)


class TorchStruct:
    """torch-struct's LinearChainCRF on edge potentials [B, N-1, L, L] (its memory grows as L^2 N B,
    and its parallel-scan semiring matmul as L^3: it only fits for small label sets)."""

    name = "torch_struct"

    def __init__(self, transition: torch.Tensor):
        self.ts = _need("torch_struct")
        self.transition = transition

    def _dist(self, unary, mask):
        # torch-struct's edge (t, i -> j) potential: transition[j, i] convention is [.., C_next, C_prev]
        edge = self.transition.T[None, None] + unary[:, 1:, :, None]
        edge = edge.clone()
        edge[:, 0] += unary[:, 0, None, :]
        return self.ts.LinearChainCRF(edge, lengths=mask.sum(1))

    @torch.no_grad()
    def log_partition(self, unary, mask):
        return self._dist(unary, mask).partition

    def marginals(self, unary, mask):
        return self._dist(unary, mask).marginals

    @torch.no_grad()
    def viterbi(self, unary, mask):
        return self._dist(unary, mask).argmax
