"""The settings of the approximate-inference study (Tu & Gimpel 2019): the ``approx`` params
section. Kept apart from the study's loops (:mod:`components.inference.study`) so that a stage that
only reads them (the report) does not depend on the inference kernels.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.config import ResourcesConfig, check_range, field_error
from components.inference.gd_config import GDConfig
from components.models.lm import LMConfig


@dataclass(frozen=True)
class GDGridConfig(GDConfig):
    """The paper's GD grid (:class:`GDConfig`) plus a per-task cap on N for large label sets."""
    max_iterations: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, nonnegative=("max_iterations",))          # 0 = no cap
        for task, cap in self.max_iterations.items():
            if 0 < cap < self.checkpoints[0]:
                raise field_error(self, f"max_iterations.{task}", f"must be 0 (no cap) or >= the first checkpoint "
                                  f"{self.checkpoints[0]} (else no checkpoint is left), got {cap}")

    def for_task(self, task: str) -> GDConfig:
        """The grid run on ``task``: checkpoints above its cap dropped."""
        cap = self.max_iterations.get(task, 0)
        return dataclasses.replace(self, checkpoints=tuple(n for n in self.checkpoints if cap <= 0 or n <= cap),
                                   max_iterations={})


@dataclass(frozen=True)
class TunedConfig:
    """A method tuned on dev: one test row per value of ``rows_key`` (e.g. ``n_steps``); for each
    row the value of ``tune_key`` (e.g. ``lr``) with the best dev score; ``config`` the rest."""
    rows_key: str
    rows: tuple[Any, ...]
    tune_key: str
    values: tuple[Any, ...]
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        check_range(self, nonempty=("rows", "values"))


def _default_tuned() -> dict[str, TunedConfig]:
    return {"tailored_infnet": TunedConfig("n_steps", (3, 5, 10), "lr", (0.1, 0.01, 0.001)),
            "gd_warm_start": TunedConfig("iterations", (3, 5, 10), "lr",
                                           (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0))}


def replicate_folder(folder: str | Path, replicate: int) -> Path:
    """Where replicate ``replicate`` of the trained model in ``folder`` lives: ``folder`` itself for
    replicate 0, ``folder/replicate<k>`` for k > 0 — the layout ``train_energy`` and ``infnets`` write
    (``flows.task_sweeps.replicate_folder``)."""
    return Path(folder) if replicate == 0 else Path(folder) / f"replicate{replicate}"


@dataclass(frozen=True)
class ApproxStudyConfig:
    tasks: tuple[str, ...] = ("pos", "ner", "greek_morph")
    # replicate indices (components.seeds names them in train_energy and infnets), replicate 0 first: every
    # trained model (Viterbi of each energy, the networks, approx.methods) is evaluated on each replicate's
    # models; the GD grid, the tuned rows, speed and the LM correlations run on replicate 0 only
    seeds: tuple[int, ...] = (0,)
    energy: str = "blstm_crf_plus"            # Tables 4 and 6
    table1_energy: str = "blstm_crf"          # Tables 1 and 3
    archs: tuple[str, ...] = ("cnn", "blstm", "seq2seq")                 # Table 1's inference networks
    modes: tuple[str, ...] = ("local", "infnet")                         # local baseline, inference network
    arch: dict[str, str] = field(default_factory=lambda: {"pos": "cnn", "ner": "seq2seq", "greek_morph": "blstm"})
    # INFERENCE methods evaluated on test with one config each, under both energies (Viterbi is the
    # yardstick and always runs); name -> its config. gd_adam: Adam in the relaxed space, no
    # per-instance oracle
    methods: dict[str, dict[str, Any]] = field(default_factory=lambda: {"gd_adam": {"lr": 0.1, "iterations": 50}})
    # INFERENCE methods that take the task's inference network (input ``net``), tuned on dev (Table 6)
    tuned: dict[str, TunedConfig] = field(default_factory=_default_tuned)
    # test sentences per task (0 / absent = the whole test set); Greek morphology's L ~ 1000 labels make
    # the GD grid costly at the default scale
    max_test_sentences: dict[str, int] = field(default_factory=lambda: {"greek_morph": 60})
    max_dev_sentences: int = 40    # dev sentences for the dev-tuned GD (N, lr) and the tuned rows of Table 6
    batch_size: int = 32
    # momentum GD, every (N, lr) of the grid, oracle-selected per instance; N capped at 50 on the large
    # label set at the default scale
    gd: GDGridConfig = field(default_factory=lambda: GDGridConfig(max_iterations={"greek_morph": 50}))
    # further initialisation scales z_0 ~ N(0, std^2) whose whole GD grid is run on the test sentences
    # under the ``energy`` (Table 6) energy, beside ``gd.init_std``: the effect of the start on GD
    gd_init_stds: tuple[float, ...] = (1.0,)
    shard_size: int = 50
    resources: ResourcesConfig = ResourcesConfig()
    speed_batch_sizes: tuple[int, ...] = (10, 32, 100)
    speed_methods: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"viterbi": {}, "gd": {"lr": 100.0, "iterations": 20}})
    lm: LMConfig = LMConfig()
    lm_epochs: int = 5
    # the word LM's vocabulary: its most frequent training words, the rest unknown (0 = all). Greek's
    # 17,144-way softmax took ~180 of approx@greek_morph's 280 s; 2,000 words at the default scale
    lm_max_words: int = 2000
    energy_dir: str = "models/energy"
    infnet_dir: str = "models/infnet"

    def __post_init__(self):
        check_range(self, positive=("batch_size", "shard_size", "speed_batch_sizes", "lm_epochs"),
                    nonnegative=("max_test_sentences", "max_dev_sentences", "gd_init_stds", "lm_max_words"))   # 0 = the whole split
        check_range(self, nonempty=("seeds",), nonnegative=("seeds",))
        if self.seeds[0] != 0:
            raise field_error(self, "seeds", f"must list replicate 0 first (the replicate the GD grid, the tuned rows, "
                                             f"speed and the LM correlations run on), got {list(self.seeds)}")
        if len(set(self.seeds)) != len(self.seeds):
            raise field_error(self, "seeds", f"lists a replicate twice: {list(self.seeds)}")
