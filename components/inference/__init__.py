"""Inference methods for energies. ``INFERENCE`` is where a method's name is defined, once;
``SAMPLERS`` (``components.inference.mcmc``) the same for Markov kernels.

``INFERENCE.build(name, cfg, **inputs)`` builds a method from its own frozen config (a mapping
from params is read strictly). Inputs are the trained objects a method needs besides its config,
listed in ``INFERENCE[name].meta["inputs"]``: ``net``, an inference network
(``components.models.infnets``). ``meta["needs"]`` is the energy protocol the method requires;
``meta["deterministic"]`` the config overrides that make a stochastic method deterministic (the
conformance test uses them to check batch-size invariance).

Adding a method for chain energies: one module with its config and its ``Inference`` class, one
``INFERENCE.register`` line below, and its params entry under ``approx.methods``;
``tests/inference/test_conformance.py`` tests it the day it is added.
"""
from components.energies.base import ChainEnergy
from components.inference.base import Inference, InferenceResult, check
from components.inference.beam import (BeamConfig, BeamDecoder, GreedyConfig, GreedyDecoder, SoftBeamConfig,
                                       SoftBeamDecoder, StepScorer)
from components.inference.exact import Viterbi, ViterbiConfig
from components.inference.gd_adam import GDAdamConfig, GradientDescentAdam
from components.inference.gradient_descent import GDInferenceConfig, GradientDescent
from components.inference.inference_net import InferenceNetwork, TailorConfig, TailoredInferenceNetwork
from components.inference.mcmc import SAMPLERS, ChainState, Sampler
from components.registry import NoConfig, Registry

INFERENCE = Registry("inference method")
INFERENCE.register("viterbi", ViterbiConfig, lambda cfg: Viterbi(), needs=ChainEnergy, inputs=(),
                   doc="exact MAP by Viterbi: the yardstick")
INFERENCE.register("gd", GDInferenceConfig, lambda cfg: GradientDescent(cfg), needs=ChainEnergy, inputs=(),
                   deterministic={"init_std": 0.0}, doc="momentum GD in the relaxed space, one (lr, N)")
INFERENCE.register("gd_adam", GDAdamConfig, lambda cfg: GradientDescentAdam(cfg), needs=ChainEnergy, inputs=(),
                   deterministic={"init_std": 0.0}, doc="Adam GD in the relaxed space, one (lr, N)")
INFERENCE.register("gd_warm_start", GDInferenceConfig, lambda cfg, net: GradientDescent(cfg, warm_start=net),
                   needs=ChainEnergy, inputs=("net",), doc="momentum GD from an inference network's logits")
INFERENCE.register("infnet", NoConfig, lambda cfg, net: InferenceNetwork(net), needs=ChainEnergy, inputs=("net",),
                   doc="an inference network's per-position argmax")
INFERENCE.register("tailored_infnet", TailorConfig, lambda cfg, net: TailoredInferenceNetwork(net, cfg),
                   needs=ChainEnergy, inputs=("net",), doc="an inference network tailored to each instance")
INFERENCE.register("greedy", GreedyConfig, lambda cfg: GreedyDecoder(), needs=StepScorer, inputs=(),
                   doc="greedy decoding of a step scorer")
INFERENCE.register("beam", BeamConfig, lambda cfg: BeamDecoder(cfg), needs=StepScorer, inputs=(),
                   doc="hard beam search of size k over a step scorer")
INFERENCE.register("soft_beam", SoftBeamConfig, lambda cfg: SoftBeamDecoder(cfg), needs=StepScorer, inputs=(),
                   doc="soft beam search (continuous top-k, soft backpointers), decoded by hard backpointers")

__all__ = ["INFERENCE", "SAMPLERS", "ChainState", "Sampler", "Inference", "InferenceResult", "check", "Viterbi", "GradientDescent", "GradientDescentAdam",
           "InferenceNetwork", "TailoredInferenceNetwork"]
