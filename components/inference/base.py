"""The Inference contract: ``method(energy, batch) -> InferenceResult``.

labels [B, N] (masked positions 0), relaxed [B, N, L] or None (for methods that work in the
relaxed space), energy [B] of the discrete labels, and method-specific stats (iterations, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


@dataclass
class InferenceResult:
    labels: torch.Tensor
    relaxed: torch.Tensor | None
    energy: torch.Tensor
    stats: dict[str, float] = field(default_factory=dict)


class Inference(Protocol):
    def __call__(self, energy: Any, batch: Any) -> InferenceResult: ...
