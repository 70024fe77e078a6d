"""Inference methods for energies. ``INFERENCE`` maps a name to a constructor."""
from components.inference.base import Inference, InferenceResult
from components.inference.exact import Viterbi
from components.inference.gradient_descent import GradientDescent
from components.inference.inference_net import InferenceNetwork, TailoredInferenceNetwork

INFERENCE = {"viterbi": Viterbi, "gd": GradientDescent, "infnet": InferenceNetwork,
             "tailored_infnet": TailoredInferenceNetwork}

__all__ = ["INFERENCE", "Inference", "InferenceResult", "Viterbi", "GradientDescent", "InferenceNetwork",
           "TailoredInferenceNetwork"]
