"""The Energy contract: lower energy = better; E(x, y) = -score(x, y).

- :class:`Energy`: any structured output. ``energy(batch, y) -> [B]`` for a batch and an output y
  of the energy's own kind — chain labels [B, N] (long) or relaxed rows on the simplex [B, N, L];
  a Gaussian CRF's score maps [B, M, H, W] or pixel labels [B, H, W]; a masked-LM energy's token
  sequences.
- :class:`ChainEnergy`: linear-chain energies add ``potentials(batch) -> ChainPotentials``, so
  exact inference (``components.structures.linear_chain``) is the yardstick of every approximate
  method, and the potentials (not the network) are what inference and the scaling methods see.
- :class:`FixedPotentials`: a ChainEnergy whose potentials were computed once for one batch;
  evaluation times inference without the network's forward pass, and an energy frozen for
  inference-network training is scored without recomputing its potentials.

``require(energy, ChainEnergy, who)`` turns a missing capability into a clear ``TypeError``.

The linear-chain contract (``ChainPotentials``, ``ChainEnergy``, ``FixedPotentials``) is in
:mod:`components.energies.chain`: an energy that is not a chain does not depend on the chain
kernels.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

# protocols whose implementations also declare a ``structure`` (by protocol name): a Gaussian CRF
# has a ``potentials`` method too, of another kind, and a structural check alone cannot tell them apart
REQUIRED_STRUCTURE: dict[str, str] = {"ChainEnergy": "chain"}


@runtime_checkable
class Energy(Protocol):
    """Any structured output: ``energy(batch, y) -> [B]``, lower is better."""

    def energy(self, batch: Any, y: torch.Tensor) -> torch.Tensor: ...


def conforms(energy: Any, protocol: type) -> bool:
    """``isinstance(energy, protocol)``, and for ``ChainEnergy`` the declared ``structure``."""
    if not isinstance(energy, protocol):
        return False
    want = REQUIRED_STRUCTURE.get(protocol.__name__)
    return want is None or getattr(energy, "structure", None) == want


def require(energy: Any, protocol: type, who: str) -> None:
    """Raise ``TypeError`` naming ``who`` unless ``energy`` implements ``protocol``."""
    if not conforms(energy, protocol):
        missing = [m for m in ("energy", "potentials", "start", "step", "embed", "embed_ids")
                   if hasattr(protocol, m) and not hasattr(energy, m)]
        if not missing and hasattr(energy, "structure"):
            missing_s = f", whose structure is {energy.structure!r}"
        else:
            missing_s = f", which has no {', '.join(missing)}()" if missing else ""
        raise TypeError(f"{who} needs a {protocol.__name__}; got {type(energy).__name__}{missing_s}")
