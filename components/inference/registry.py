"""``INFERENCE``: where an inference method's name is defined, once (lazy: an entry's module is
imported when it is built or its config read; see :mod:`components.registry`).

``INFERENCE.build(name, cfg, **inputs)`` builds a method from its own frozen config (a mapping
from params is read strictly). Inputs are the trained objects a method needs besides its config,
listed in ``INFERENCE[name].meta["inputs"]``: ``net``, an inference network
(``components.models.infnets``). ``meta["needs"]`` names the protocol the method requires
(``"ChainEnergy"``: :mod:`components.energies.base`; ``"StepScorer"``:
:mod:`components.models.step_scorer`); ``meta["deterministic"]`` the config overrides that make a
stochastic method deterministic (the conformance test uses them to check batch-size invariance);
``meta["seeded"]`` marks a method whose builder takes ``seed=`` (an int: its random starts). A seed is
never a config field: the flow derives it from ``base.seed`` (:mod:`components.seeds`), so params
cannot set one; methods compared on the same instances get the same seed (common random numbers).

Adding a method for chain energies: one module with its config, its ``Inference`` class and a
``make(cfg, **inputs)``, one ``INFERENCE.register`` line below, and its params entry under
``approx.methods``; ``tests/inference/test_conformance.py`` tests it the day it is added.
"""
from components.registry import NoConfig, Registry

INFERENCE = Registry("inference method")
INFERENCE.register("viterbi", "ViterbiConfig", "components.inference.exact:make_viterbi", needs="ChainEnergy",
                   inputs=(), doc="exact MAP by Viterbi: the yardstick")
INFERENCE.register("gd", "GDInferenceConfig", "components.inference.gradient_descent:make_gd", needs="ChainEnergy",
                   inputs=(), deterministic={"init_std": 0.0}, seeded=True,
                   doc="momentum GD in the relaxed space, one (lr, N)")
INFERENCE.register("gd_adam", "GDAdamConfig", "components.inference.gd_adam:make_gd_adam", needs="ChainEnergy",
                   inputs=(), deterministic={"init_std": 0.0}, seeded=True,
                   doc="Adam GD in the relaxed space, one (lr, N)")
INFERENCE.register("gd_warm_start", "GDInferenceConfig", "components.inference.gradient_descent:make_gd_warm_start",
                   needs="ChainEnergy", inputs=("net",), seeded=True,
                   doc="momentum GD from an inference network's logits")
INFERENCE.register("infnet", NoConfig, "components.inference.inference_net:make_infnet", needs="ChainEnergy",
                   inputs=("net",), doc="an inference network's per-position argmax")
INFERENCE.register("tailored_infnet", "TailorConfig", "components.inference.inference_net:make_tailored",
                   needs="ChainEnergy", inputs=("net",), doc="an inference network tailored to each instance")
INFERENCE.register("greedy", "GreedyConfig", "components.inference.beam:make_greedy", needs="StepScorer", inputs=(),
                   doc="greedy decoding of a step scorer")
INFERENCE.register("beam", "BeamConfig", "components.inference.beam:BeamDecoder", needs="StepScorer", inputs=(),
                   doc="hard beam search of size k over a step scorer")
INFERENCE.register("soft_beam", "SoftBeamConfig", "components.inference.beam:SoftBeamDecoder", needs="StepScorer",
                   inputs=(), doc="soft beam search (continuous top-k, soft backpointers), decoded by hard backpointers")
