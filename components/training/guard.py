"""The check that a trained model learned, before any table may use it (DESIGN.md: "a trained
model that did not learn is a failed trial, never a table cell").

A model learned when its best dev score is above 0 and above the score of the same network before
its first update (the untrained model: chance for a tagger, whatever its initial weights happen to
get) by more than ``min_gain`` points. A model that fails raises :class:`DidNotLearn`, so that its
trial fails loudly: Ray Tune records the error, the sweep picks its best among the trials that
learned, and a sweep where none did fails with every trial's reason.
"""
from __future__ import annotations

import math


class DidNotLearn(RuntimeError):
    """A trained model's dev score is 0, or not above the untrained model's."""


def check_learned(initial_score: float, best_score: float, *, what: str, min_gain: float = 0.0) -> None:
    """Raise :class:`DidNotLearn` unless ``best_score > max(0, initial_score + min_gain)``."""
    if not math.isfinite(best_score):
        raise DidNotLearn(f"{what}: the best dev score is {best_score} (training produced no usable model)")
    if best_score <= 0.0:
        raise DidNotLearn(f"{what}: did not learn: best dev score {best_score:.4g} (untrained {initial_score:.4g})")
    if math.isfinite(initial_score) and not best_score > initial_score + min_gain:
        raise DidNotLearn(f"{what}: did not learn: best dev score {best_score:.4g} is not above the untrained "
                          f"model's {initial_score:.4g} by more than {min_gain:g}")
