"""Inference methods for energies. ``INFERENCE`` maps a name to a constructor."""
from components.inference.base import Inference, InferenceResult
from components.inference.exact import Viterbi

INFERENCE = {"viterbi": Viterbi}

__all__ = ["INFERENCE", "Inference", "InferenceResult", "Viterbi"]
