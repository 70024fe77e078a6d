"""The settings of gradient-descent inference in the relaxed space (Tu & Gimpel 2019, appendix):
the paper's grid of learning rates and iteration counts, momentum and the start. Kept apart from
the algorithm (:mod:`components.inference.gradient_descent`) so that a stage that only reads the
settings (the report) does not depend on the kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

from components.config import check_range, field_error


@dataclass(frozen=True)
class GDStart:
    """Where gradient descent in the relaxed space starts: ``z_0 ~ N(0, init_std^2)``. The one owner
    of ``init_std``: the paper's grid (:class:`GDConfig`, ``approx.gd``) and the single-(lr, N)
    methods (``gd``, ``gd_adam`` of ``INFERENCE``) inherit it, and it is checked here only."""

    # z_0 ~ N(0, init_std^2): 0.01 is a near-uniform relaxed output. With N(0, 1) logits the softmax
    # saturates, a large learning rate sends every position to a vertex in one step where the
    # gradient vanishes, and GD stalls far from Viterbi (POS: ~40% accuracy instead of ~95%).
    init_std: float = 0.01

    def __post_init__(self):
        check_range(self, nonnegative=("init_std",))


@dataclass(frozen=True)
class GDConfig(GDStart):
    """The paper's grid (appendix): learning rates, iteration counts N (checkpoints), momentum."""

    lrs: tuple[float, ...] = (1e4, 5e3, 1e3, 500, 100, 50, 10, 5, 1)
    checkpoints: tuple[int, ...] = (5, 10, 20, 30, 40, 50, 100, 500, 1000)
    momentum: float = 0.9
    restarts: int = 1

    def __post_init__(self):
        super().__post_init__()
        check_range(self, nonempty=("lrs", "checkpoints"), positive=("lrs", "restarts"),
                    nonnegative=("checkpoints",), within={"momentum": "[0, 1)"})
        if any(b <= a for a, b in zip(self.checkpoints, self.checkpoints[1:])):
            raise field_error(self, "checkpoints", f"must be strictly increasing, got {list(self.checkpoints)}")
