"""A plug-in inference method, kept outside the project's code: name it in ``params.yaml`` as
``my_methods:UnaryArgmax`` with this folder as ``base.plugin_dir`` (or copy the file into
``plugins/``), and ``dvc repro approx`` runs it beside the registered methods, under both energies,
against exact Viterbi:

    base:
      plugin_dir: examples/plugins
    approx:
      methods:
        my_methods:UnaryArgmax: {temperature: 1.0}

The object a params entry names is the builder, called as ``make(cfg, **inputs)``: here the class
itself. ``config`` is its frozen config dataclass (read strictly from the params entry: a misspelt
key is an error naming it), ``meta`` what the stages ask of an inference method (``needs``: the
protocol of the energy, ``inputs``: trained objects besides the config; none here).

The method: the per-position argmax of the unary potentials, ignoring the transitions. Its
search error against Viterbi is what the transitions are worth on a task.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from components.energies.chain import ChainEnergy
from components.inference.base import InferenceResult, check


@dataclass(frozen=True)
class UnaryArgmaxConfig:
    temperature: float = 1.0          # divides the unary scores (the argmax does not change with it)

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(f"my_methods:UnaryArgmax.temperature: must be > 0, got {self.temperature}")


class UnaryArgmax:
    """Per-position argmax of the unary potentials (no transitions)."""
    config = UnaryArgmaxConfig
    meta = {"needs": "ChainEnergy", "inputs": ()}
    needs = ChainEnergy

    def __init__(self, cfg: UnaryArgmaxConfig):
        self.cfg = cfg

    @torch.no_grad()
    def __call__(self, energy, batch) -> InferenceResult:
        check(self, energy)
        p = energy.potentials(batch)                                  # unary [B, N, L], mask [B, N]
        labels = (p.unary / self.cfg.temperature).argmax(-1).masked_fill(~p.mask, 0)
        return InferenceResult(labels=labels, relaxed=None, energy=energy.energy(batch, labels))
