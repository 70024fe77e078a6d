"""``OBJECTIVES``: where a training objective's name is defined, once (lazy: an entry's module is
imported when it is built or its config read; see :mod:`components.registry`).


``OBJECTIVES``: ``build(name, cfg, **inputs)`` -> an objective with ``loss(p, gold) -> [B]``,
  ``predict(p) -> labels`` and ``per_position`` (see ``components.training.objectives``). Meta:
  ``structure`` ("chain": ChainPotentials, no inputs; "grid": the Gaussian CRF, input
  ``energy=GaussianCRF``) and ``prediction`` (the paper's rule). Registered in the order of the
  paper's tables.
- ``SCALINGS``: the unary/pairwise scaling methods (``components.training.scaling``), each
  ``make(cfg)`` -> a method with ``transform(p, alpha)``, ``regulariser(raw) -> [B]``,
  ``selects_alpha`` and ``initial_alpha``; ``ScaledModel(energy, name, cfg)`` applies one.

Step objectives (structure ``steps``, ``components.training.search_aware``) train a ``StepScorer``:
``build(name, cfg, updates_per_epoch=, seed=, o_id=, k=)`` -> ``objective(scorer, batch) -> scalar``
with ``loss(scorer, batch) -> [B]`` (every step objective takes the same inputs; each uses what it
needs: ``k``, the task's beam size, sets a relaxed-beam objective's ``k``). An objective tells a
flow what it needs to know about it: ``alpha_at(epoch)`` and ``describe()`` (``_StepObjective``).
Meta ``feed`` (what the decoder is fed in training) and ``prediction`` (the decoding the paper
evaluates it with).

The Shevchenko & Osokin study's tasks are ``STUDY_TASKS`` in ``components.training.studies``.
"""
from components.registry import NoConfig, Registry

OBJECTIVES = Registry("objective")
OBJECTIVES.register("marginal_ce", NoConfig, "components.training.objectives:make_marginal_ce", structure="chain", prediction="marginals",
                    doc="cross-entropy under the exact marginals (per position); predicts the marginal argmax")
OBJECTIVES.register("ssvm", NoConfig, "components.training.objectives:make_ssvm", structure="chain", prediction="map",
                    doc="structured SVM, normalised Hamming margin; predicts MAP")
OBJECTIVES.register("nll", NoConfig, "components.training.objectives:make_nll", structure="chain", prediction="map",
                    doc="CRF negative log-likelihood; predicts MAP")
OBJECTIVES.register("mean_field_ce", "MeanFieldCEConfig", "components.training.objectives:make_mean_field_ce", structure="chain",
                    prediction="mean_field", doc="cross-entropy under unrolled mean-field marginals (per position)")
OBJECTIVES.register("gcrf_ce", NoConfig, "components.training.objectives:make_gcrf_ce", structure="grid", prediction="scores",
                    doc="Gaussian CRF: per-pixel cross-entropy of softmax(s*); predicts argmax s*")

OBJECTIVES.register("seq_ce", "SeqCEConfig", "components.training.search_aware:make_seq_ce", structure="steps", feed="gold",
                    prediction="greedy", doc="teacher-forced cross-entropy of a step scorer")
OBJECTIVES.register("self_normalised_ce", "SelfNormalisedCEConfig", "components.training.search_aware:make_self_normalised_ce",
                    structure="steps", feed="gold", prediction="greedy",
                    doc="Goyal et al. (2019) Sec. 3.2.1: CE + lambda (log Z_L,t)^2 of the raw step scores")
OBJECTIVES.register("scheduled_sampling", "ScheduledSamplingConfig", "components.training.search_aware:make_scheduled_sampling",
                    structure="steps", feed="model (hard)", prediction="greedy",
                    doc="Bengio et al. (2015): gold or the model's hard choice, inverse-sigmoid decay")
OBJECTIVES.register("soft_scheduled_sampling", "SoftScheduledSamplingConfig", "components.training.search_aware:make_soft_scheduled_sampling",
                    structure="steps", feed="model (alpha-soft)", prediction="greedy",
                    doc="differentiable scheduled sampling: alpha-soft argmax or Gumbel soft sample")
OBJECTIVES.register("beam_dl", "BeamObjectiveConfig", "components.training.search_aware:make_beam_dl", structure="steps", feed="soft beam",
                    prediction="beam", doc="relaxed direct loss through the soft beam (decomposable Hamming cost)")
OBJECTIVES.register("beam_hinge", "BeamObjectiveConfig", "components.training.search_aware:make_beam_hinge", structure="steps",
                    feed="soft beam", prediction="beam",
                    doc="relaxed hinge: cost-augmented soft beam max score minus the gold score")


def objectives_for(structure: str) -> tuple[str, ...]:
    """The objectives that train a given structure, in registration order (nothing imported)."""
    return OBJECTIVES.names(structure=structure)
