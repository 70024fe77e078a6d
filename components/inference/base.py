"""The Inference contract: ``method(energy, batch) -> InferenceResult``.

labels [B, N] (masked positions 0), relaxed [B, N, L] or None (for methods that work in the
relaxed space), energy [B] of the discrete labels, and method-specific stats (iterations, ...).

Every method declares what it needs in ``needs`` — ``ChainEnergy`` (Viterbi, GD in the relaxed
chain space, inference networks), a ``StepScorer`` (greedy / beam decoding) or any ``Energy``
(samplers) — and calls :func:`check` first, so handing it the wrong kind of model is a clear
``TypeError`` naming the method and what is missing, not an ``AttributeError`` deep inside.
Methods compute what they need from ``energy`` themselves (a ``ChainEnergy`` gives its
``potentials(batch)``); a caller that wants the potentials computed once — to time inference
alone, or to score many outputs — passes ``FixedPotentials.of(energy, batch)`` as the energy.

``INFERENCE`` (``components.inference``) is the registry of methods: ``INFERENCE.build(name,
cfg, **inputs)`` with the entry's own frozen config; ``INFERENCE[name].meta["inputs"]`` names the
trained objects a method needs besides its config (``net``: an inference network).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch

from components.energies.base import require


@dataclass
class InferenceResult:
    labels: torch.Tensor
    relaxed: torch.Tensor | None
    energy: torch.Tensor
    stats: dict[str, float] = field(default_factory=dict)


class Inference(Protocol):
    needs: ClassVar[type]                 # the protocol the energy must implement

    def __call__(self, energy: Any, batch: Any) -> InferenceResult: ...


def check(method: Any, energy: Any) -> None:
    """Raise ``TypeError`` unless ``energy`` implements what ``method`` declares in ``needs``."""
    require(energy, method.needs, type(method).__name__)
