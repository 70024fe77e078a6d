"""Training: objectives, schedules, scaling methods and the train loop.

Registries (``components.registry.Registry``; a name is defined here, once):

- ``OBJECTIVES``: ``build(name, cfg, **inputs)`` -> an objective with ``loss(p, gold) -> [B]``,
  ``predict(p) -> labels`` and ``per_position`` (see ``components.training.objectives``). Meta:
  ``structure`` ("chain": ChainPotentials, no inputs; "grid": the Gaussian CRF, input
  ``energy=GaussianCRF``) and ``prediction`` (the paper's rule). Registered in the order of the
  paper's tables.
- ``SCALINGS``: the unary/pairwise scaling methods (``components.training.scaling``), each
  ``make(cfg)`` -> a method with ``transform(p, alpha)``, ``regulariser(raw) -> [B]``,
  ``selects_alpha`` and ``initial_alpha``; ``ScaledModel(energy, name, cfg)`` applies one.

The Shevchenko & Osokin study's tasks are ``STUDY_TASKS`` in ``components.training.studies``.
"""
from components.registry import NoConfig, Registry
from components.training.objectives import (MeanFieldCEConfig, make_gcrf_ce, make_marginal_ce, make_mean_field_ce,
                                            make_nll, make_ssvm)
from components.training.scaling import SCALINGS

OBJECTIVES = Registry("objective")
OBJECTIVES.register("marginal_ce", NoConfig, make_marginal_ce, structure="chain", prediction="marginals",
                    doc="cross-entropy under the exact marginals (per position); predicts the marginal argmax")
OBJECTIVES.register("ssvm", NoConfig, make_ssvm, structure="chain", prediction="map",
                    doc="structured SVM, normalised Hamming margin; predicts MAP")
OBJECTIVES.register("nll", NoConfig, make_nll, structure="chain", prediction="map",
                    doc="CRF negative log-likelihood; predicts MAP")
OBJECTIVES.register("mean_field_ce", MeanFieldCEConfig, make_mean_field_ce, structure="chain",
                    prediction="mean_field", doc="cross-entropy under unrolled mean-field marginals (per position)")
OBJECTIVES.register("gcrf_ce", NoConfig, make_gcrf_ce, structure="grid", prediction="scores",
                    doc="Gaussian CRF: per-pixel cross-entropy of softmax(s*); predicts argmax s*")


def objectives_for(structure: str) -> tuple[str, ...]:
    """The registered objective names serving models of ``structure`` ("chain" | "grid")."""
    return tuple(n for n, e in OBJECTIVES.items() if e.meta["structure"] == structure)


__all__ = ["OBJECTIVES", "SCALINGS", "objectives_for"]
