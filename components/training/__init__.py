"""Training: objectives, schedules, scaling methods and the train loop.

``OBJECTIVES`` maps a name to ``(potentials, gold [B, N]) -> losses [B]``.
"""
from components.training.objectives import marginal_ce, mean_field_ce, nll, ssvm

OBJECTIVES = {"nll": nll, "marginal_ce": marginal_ce, "ssvm": ssvm, "mean_field_ce": mean_field_ce}

__all__ = ["OBJECTIVES"]
