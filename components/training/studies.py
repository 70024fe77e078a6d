"""The Shevchenko & Osokin scaling study as components: its tasks, its design and one run.

``STUDY_TASKS`` (a :class:`~components.registry.Registry`) defines the study's tasks; each entry
has its frozen config (``OcrStudyConfig`` ...) and ``make(cfg)`` returns a :class:`StudyTask`
whose ``build(run, prepared)`` gives one run's :class:`RunData` (train/dev/test splits, the fixed
training subset D, the unscaled energy and the ``StructuredTask`` that trains and scores it).
Meta ``structure`` ("chain" | "grid") names the objectives of ``OBJECTIVES`` a task trains with.

- ``ocr``: OCR letters, LeNet unaries + 26x26 pairwise chain CRF; fold ``select_fold`` is the
  validation fold (stopping rule, LR schedule), each test fold trains on the other eight folds;
  metric: letter accuracy averaged per word.
- ``tagging``: a prepared tagging task (default the Greek NT POS task) with context-free MLP
  unaries — the paper's chunking setup where scaling breaks; its own train/dev/test split; metric:
  pooled token accuracy, or span F1 for a span task (NER; chunking).
- ``snakes``: the Gaussian CRF (UNet unaries and pixel embeddings) on the snakes grids; a seeded
  ``dev_fraction`` of the training grids is the dev set; metric: per-grid accuracy on non-background.

A run is a dict ``{kind, task, objective, procedure, last_activation, alpha, fold, seed}`` from
:func:`design`. Its ``procedure`` names a training procedure and a scaling method of ``SCALINGS``
(:data:`PROCEDURES`): ``unary``/``stage``/``joint`` train unscaled; every other scaling method is a
joint-training procedure of its own name, with ``fixed`` as ``fixed_alpha`` (its alpha varies per
run, Fig. 1a). Each task's ``methods`` configures the methods by ``SCALINGS`` name (the paper
tunes them on validation data). :func:`train_and_evaluate` trains one run and returns its record
(the input of ``components.reports.shevchenko_osokin``).

Seeds: a run's ``seed`` is a replicate index of ``scaling.seeds``, not a seed. Its streams derive
(:func:`components.seeds.seed_for`) from ``base_seed`` (``base.seed``, given by the flow) through
:func:`run_seed`, ``("scaling", kind, "replicate<i>")``: the training subsample, D, the snakes dev
split, the initial weights, the global torch generator and each epoch's batch order. No objective,
procedure, activation, alpha or fold in the name: the variants of a replicate start from the same
weights and see the same data and batches (common random numbers), so their comparison is paired.
The OCR dev subsample is one for every replicate: ``("scaling", "ocr", "dev_subsample")``.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch

from components.config import ConfigError, check_range
from components.data.grids import GridSet, read_grids
from components.data.ocr import cv_split, read_ocr_words, subsample
from components.data.sampling import subsample_indices
from components.data.tasks import load_tagging_task
from components.energies.gcrf import GCRFConfig, GaussianCRF
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.models.lenet import LeNetConfig, LeNetUnary
from components.models.mlp import MLPUnary, MLPUnaryConfig
from components.registry import Registry
from components.seeds import seed_for
from components.training.registry import OBJECTIVES, objectives_for
from components.training.guard import check_learned
from components.training.loop import TrainConfig
from components.training.scaling import SCALINGS, ScaledModel, ratio
from components.training.structured import (ChainTask, GridTask, ProcedureConfig, StructuredTask, evaluate,
                                            train_procedure)

# procedure name in the tables -> (training procedure, scaling method of SCALINGS)
PROCEDURES: dict[str, tuple[str, str]] = {
    "unary": ("unary", "none"), "stage": ("stage", "none"), "joint": ("joint", "none"),
    **{m: ("joint", m) for m in SCALINGS if m not in ("none", "fixed")},
    "fixed_alpha": ("joint", "fixed")}


# -- configs -----------------------------------------------------------------------------------
def _phase(lr: float, epochs: int, patience: int, batch_size: int, lr_patience: int, min_epochs: int = 0) -> TrainConfig:
    """One phase of a task's default procedure: Adam, a plateau gain of 10^-3, the LR cut after
    ``lr_patience`` such epochs (S&O App. B)."""
    return TrainConfig(lr=lr, epochs=epochs, patience=patience, batch_size=batch_size, min_delta=1e-3,
                       lr_patience=lr_patience, min_epochs=min_epochs)


@dataclass(frozen=True)
class StudyTaskConfig:
    """What every task of the study shares: which runs, how each phase trains, the methods' settings."""
    runs: dict[str, tuple[str, ...]] = field(default_factory=lambda: {"marginal_ce": ("unary", "stage", "joint", "online", "offline", "offline_reg")})
    fixed_alphas: tuple[float, ...] = ()      # extra joint runs at a fixed alpha (first objective)
    sigmoid: tuple[str, ...] = ()             # procedures re-run with the sigmoid last activation
    procedure: ProcedureConfig = ProcedureConfig()
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)   # SCALINGS name -> its config

    def __post_init__(self):
        check_range(self, positive=("fixed_alphas",))

    def scaling(self, name: str, where: str = "methods") -> Any:
        """The config of scaling method ``name``: ``methods[name]`` read strictly over its defaults."""
        SCALINGS.check(name, where)
        return SCALINGS.config(name, self.methods.get(name), where=f"{where}.{name}")


@dataclass(frozen=True)
class OcrStudyConfig(StudyTaskConfig):
    path: str = "ocr_letters/letters.parquet"      # under base.prepared_dir
    select_fold: int = 0
    test_folds: tuple[int, ...] = (1,)              # paper: 1..9 (train on the other eight)
    max_train_words: int = 1000                     # default scale: a seeded 1,000 of ~5,500 (0 = the eight folds in full)
    max_dev_words: int = 300                        # 0 = the whole validation fold
    model: LeNetConfig = LeNetConfig()
    pairwise_init_std: float = 0.1
    # Adam + ReduceLROnPlateau + stop on a plateau (App. B: LR cut after 3, stop after 7 epochs; default
    # scale: 2 and 4); stage's phases together = joint = 12 epochs at most
    procedure: ProcedureConfig = ProcedureConfig(
        budget=12, unary=_phase(1e-3, 7, 4, 8, 2), pairwise=_phase(1e-2, 3, 4, 8, 2),
        finetune=_phase(3e-4, 12, 4, 8, 2), joint=_phase(1e-3, 12, 4, 8, 2))

    def __post_init__(self):
        super().__post_init__()
        check_range(self, nonnegative=("select_fold", "test_folds", "max_train_words", "max_dev_words",
                                       "pairwise_init_std"))


@dataclass(frozen=True)
class TaggingStudyConfig(StudyTaskConfig):
    # WNUT-16 NER (BIOES spans, span F1) with context-free MLP unaries: the stand-in for the paper's
    # chunking, where joint training fails. Greek NT POS (greek_pos), whose tags the word alone mostly
    # fixes, shows no failure (joint 94.2 vs stage 94.1, 2026-11-24); a context-free tagger of spans
    # needs the pairwise term, and training both from the start under-trains the unaries.
    task: str = "ner"                               # a prepared tagging task
    # default scale: a seeded 1,000 of the 1,915 (stage 34.8 vs joint 30.1 F1 there, 42.1 vs 34.8 on
    # all; 2026-11-25); 0 = all
    max_train_sentences: int = 1000
    model: MLPUnaryConfig = MLPUnaryConfig()
    pairwise_init_std: float = 0.1
    # App. B for chunking: LR cut after 1 epoch, stop after 3, never before 10 epochs (a span tagger
    # scores 0 F1 while it predicts only O); stage = joint = 30 epochs
    procedure: ProcedureConfig = ProcedureConfig(
        budget=30, unary=_phase(5e-3, 20, 3, 16, 1, min_epochs=10), pairwise=_phase(1e-2, 5, 3, 16, 1),
        finetune=_phase(5e-4, 30, 3, 16, 1), joint=_phase(5e-3, 30, 3, 16, 1, min_epochs=10))

    def __post_init__(self):
        super().__post_init__()
        check_range(self, nonnegative=("max_train_sentences", "pairwise_init_std"))    # 0 = all


@dataclass(frozen=True)
class GridStudyConfig(StudyTaskConfig):
    path: str = "snakes"                            # folder with train.parquet, test.parquet
    dev_fraction: float = 0.2                       # of the training grids, seeded
    ignore_label: int = 0                           # left out of the metric (background)
    model: GCRFConfig = GCRFConfig()
    # App. B for segmentation: LR cut after 5 epochs, stop after 13 (default scale: 3 and 7); stage =
    # joint = 25 epochs
    procedure: ProcedureConfig = ProcedureConfig(
        budget=25, unary=_phase(1e-2, 15, 7, 16, 3), pairwise=_phase(1e-2, 5, 7, 16, 3),
        finetune=_phase(1e-3, 25, 7, 16, 3), joint=_phase(1e-2, 25, 7, 16, 3))

    def __post_init__(self):
        super().__post_init__()
        check_range(self, within={"dev_fraction": "(0, 1)"})


@dataclass(frozen=True)
class ScalingStudyConfig:
    """The study (the ``scaling`` params section less its sweep settings, which the flow adds).
    ``ocr``, ``tagging``, ``snakes``: the config of each ``STUDY_TASKS`` entry, by name."""
    tasks: tuple[str, ...] = ("ocr", "tagging", "snakes")
    seeds: tuple[int, ...] = (0,)
    eval_batch_size: int = 256
    ocr: OcrStudyConfig = OcrStudyConfig()
    tagging: TaggingStudyConfig = TaggingStudyConfig()
    snakes: GridStudyConfig = GridStudyConfig()
    # a run whose final dev score is 0 or not above its untrained model's by more than guard_min_gain
    # points (scores in %) fails (components.training.guard); off only for plumbing tests on random data.
    # 5 points: a snakes GCRF whose scaling collapsed scored 10.1-11.5 against its untrained 10 (2026-11-27),
    # a cell at chance, where every model that learned is above 29 on every task
    guard: bool = True
    guard_min_gain: float = 5.0

    def __post_init__(self):
        check_range(self, nonnegative=("seeds", "guard_min_gain"), positive=("eval_batch_size",))

    def task(self, kind: str) -> "StudyTask":
        """The built ``STUDY_TASKS`` entry ``kind`` with its config from this section."""
        STUDY_TASKS.check(kind, "scaling.tasks")
        return STUDY_TASKS.build(kind, getattr(self, kind))


# -- tasks -------------------------------------------------------------------------------------
@dataclass
class RunData:
    """One run's data and model: splits (each with ``batches(size, shuffle=, seed=)``, ``subset``
    and ``len``), D = a seeded part of ``train`` (online scaling's alpha selection and the ratio
    curves), the unscaled energy and the task that trains and scores it."""
    train: Any
    dev: Any
    test: Any
    subset: Any
    energy: torch.nn.Module
    task: StructuredTask


class StudyTask:
    """A study task built from its config; subclasses load their data and build their energy."""
    activation_switch = True          # the unary network has a last-activation switch (Table 1 sigmoid)

    def __init__(self, cfg: StudyTaskConfig):
        self.cfg = cfg

    @property
    def dataset(self) -> str | None:
        """The data set's name in the records, where it is not the task's registry name."""
        return None

    @property
    def folds(self) -> tuple[int, ...]:
        return (0,)

    @property
    def base_activation(self) -> str:
        return self.cfg.model.last_activation

    def required(self, prepared: Path) -> Path:
        """A prepared file the task reads (its absence is reported before any work starts)."""
        raise NotImplementedError

    def splits(self, run: dict[str, Any], prepared: Path,
               base_seed: int) -> tuple[Any, Any, Any, torch.nn.Module, StructuredTask]:
        raise NotImplementedError

    def build(self, run: dict[str, Any], prepared: Path, base_seed: int) -> RunData:
        """One run's data and unscaled energy, every seed derived from ``base_seed`` (module doc)."""
        train, dev, test, energy, task = self.splits(run, Path(prepared), base_seed)
        n_sub = self.cfg.scaling("online").subset_size(len(train))
        sub = subsample_indices(len(train), n_sub, seed_for(run_seed(base_seed, run), "subset"))
        return RunData(train, dev, test, train.subset(sub), energy, task)


class OcrStudy(StudyTask):
    @property
    def folds(self):
        return tuple(self.cfg.test_folds)

    def required(self, prepared):
        return Path(prepared) / self.cfg.path

    def splits(self, run, prepared, base_seed):
        t, seed = self.cfg, run_seed(base_seed, run)
        words = read_ocr_words(prepared / t.path)
        train, test = cv_split(words, run["fold"], select_fold=t.select_fold)
        train = subsample(train, t.max_train_words, seed_for(seed, "train_subsample"))
        # one dev set for every replicate and run (the stopping rule's yardstick)
        dev = subsample(words.subset(np.flatnonzero(words.folds == t.select_fold)), t.max_dev_words,
                        seed_for(base_seed, "scaling", "ocr", "dev_subsample"))
        net = LeNetUnary(replace(t.model, last_activation=run["last_activation"]),
                         seed=seed_for(seed, "model", "unary"))
        energy = UnaryPairwiseCRF(net, 26, init_std=t.pairwise_init_std, seed=seed_for(seed, "model", "pairwise"))
        return train, dev, test, energy, ChainTask(run["objective"], metric="per_example")


class TaggingStudy(StudyTask):
    @property
    def dataset(self):
        return self.cfg.task

    def required(self, prepared):
        return Path(prepared) / self.cfg.task / "meta.json"

    def splits(self, run, prepared, base_seed):
        t, seed = self.cfg, run_seed(base_seed, run)
        tt = load_tagging_task(prepared / t.task, max_train_sentences=t.max_train_sentences,
                               seed=seed_for(seed, "train_subsample"))
        n_labels = len(tt.vocabs["label"])
        net = MLPUnary(replace(t.model, last_activation=run["last_activation"]), len(tt.vocabs["word"]),
                       len(tt.vocabs["char"]), tt.feat_sizes, n_labels,
                       pretrained_ids=tt.glove_ids, pretrained=tt.glove_vectors, seed=seed_for(seed, "model", "unary"))
        energy = UnaryPairwiseCRF(net, n_labels, init_std=t.pairwise_init_std, seed=seed_for(seed, "model", "pairwise"))
        metric = "span_f1" if tt.metric == "span_f1" else "pooled"       # span tasks (NER, chunking): F1
        return tt.train, tt.dev, tt.test, energy, ChainTask(run["objective"], metric=metric,
                                                             labels=tuple(tt.vocabs["label"].tokens))


class GridStudy(StudyTask):
    activation_switch = False         # the UNet has no last-activation switch

    @property
    def base_activation(self):
        return "none"

    def required(self, prepared):
        return Path(prepared) / self.cfg.path / "train.parquet"

    def splits(self, run, prepared, base_seed):
        t, seed = self.cfg, run_seed(base_seed, run)
        full = GridSet(read_grids(prepared / t.path / "train.parquet"))
        test = GridSet(read_grids(prepared / t.path / "test.parquet"))
        # a seeded permutation: its head is the dev set (in that order), the rest trains
        order = np.random.default_rng(seed_for(seed, "dev_split")).permutation(len(full))
        n_dev = max(1, int(round(t.dev_fraction * len(full))))
        dev, train = full.subset(order[:n_dev]), full.subset(np.sort(order[n_dev:]))
        energy = GaussianCRF(int(full.x.shape[1]), int(full.y.max()) + 1, t.model, seed=seed_for(seed, "model"))
        return train, dev, test, energy, GridTask(energy, ignore_label=t.ignore_label, objective=run["objective"])


STUDY_TASKS = Registry("study task")
STUDY_TASKS.register("ocr", OcrStudyConfig, OcrStudy, structure="chain",
                     doc="OCR letters: LeNet unaries + pairwise chain CRF, cross-validation folds")
STUDY_TASKS.register("tagging", TaggingStudyConfig, TaggingStudy, structure="chain",
                     doc="a prepared tagging task: MLP unaries + pairwise chain CRF")
STUDY_TASKS.register("snakes", GridStudyConfig, GridStudy, structure="grid",
                     doc="snakes grids: the Gaussian CRF (UNet unaries and embeddings)")


# -- design ------------------------------------------------------------------------------------
def design(cfg: ScalingStudyConfig) -> list[dict[str, Any]]:
    """The grid: one dict per (task, objective, procedure, last activation, alpha, fold, seed).
    Validates every name (tasks, objectives, procedures, methods) before any work starts."""
    rows = []
    runnable = sorted(set(PROCEDURES) - {"fixed_alpha"})
    for kind in cfg.tasks:
        task = cfg.task(kind)
        t = task.cfg
        for name in t.methods:
            t.scaling(name, where=f"scaling.{kind}.methods")
        if not t.runs:
            raise ConfigError(f"scaling.{kind}.runs is empty")
        structure = STUDY_TASKS[kind].meta["structure"]
        act = task.base_activation
        first = next(iter(t.runs))
        variants = []
        for objective, procs in t.runs.items():
            OBJECTIVES.check(objective, f"scaling.{kind}.runs")
            if OBJECTIVES[objective].meta["structure"] != structure:
                raise ConfigError(f"scaling.{kind}.runs: objective {objective!r} does not serve {structure} models; "
                                  f"this task trains with {list(objectives_for(structure))}")
            for proc in procs:
                if proc not in runnable:
                    raise ConfigError(f"scaling.{kind}.runs.{objective}: procedure {proc!r} is not one of "
                                      f"{runnable} (fixed alphas go in fixed_alphas)")
                variants.append((objective, proc, act, 1.0))
        variants += [(first, "fixed_alpha", act, float(a)) for a in t.fixed_alphas]
        if t.sigmoid and not task.activation_switch:
            raise ConfigError(f"scaling.{kind}.sigmoid: this task's unary network has no last-activation switch")
        variants += [(first, p, "sigmoid", 1.0) for p in t.sigmoid]
        for objective, proc, a, alpha in variants:
            for fold in task.folds:
                for seed in cfg.seeds:
                    rows.append({"kind": kind, "task": task.dataset or kind, "objective": objective, "procedure": proc,
                                 "last_activation": a, "alpha": alpha, "fold": int(fold), "seed": int(seed)})
    return rows


def missing_inputs(cfg: ScalingStudyConfig, prepared: Path) -> list[str]:
    """One message per task whose prepared data is absent."""
    out = []
    for kind in cfg.tasks:
        path = cfg.task(kind).required(Path(prepared))
        if not path.exists():
            out.append(f"scaling.{kind}: {path} not found (is it prepared? run `dvc repro prepare`)")
    return out


def scaling_for(run: dict[str, Any], t: StudyTaskConfig) -> tuple[str, Any]:
    """(scaling method name, its config) of a run; a ``fixed_alpha`` run's alpha is the run's own."""
    method = PROCEDURES[run["procedure"]][1]
    cfg = t.scaling(method)
    if method == "fixed":
        cfg = dataclasses.replace(cfg, alpha=float(run["alpha"]))
    return method, cfg


# -- per-item statistics (the paired bootstrap's inputs) -----------------------------------------
# the columns of :func:`item_stats` per task metric: a ratio of sums, score = 100 * sum(col 0) / sum(col 1)
ITEM_COLUMNS: dict[str, tuple[str, str]] = {
    "per_example": ("item_accuracy", "scored"),      # OCR words, snake grids: accuracy averaged per item
    "pooled": ("correct", "tokens"),                 # token accuracy over the corpus
    "span_f1": ("two_tp", "predicted_plus_gold"),    # span F1 = 2 sum tp / sum (predicted + gold)
}
LOG_RATIO_COLUMNS = ("log10_ratio", "count")         # mean log10 ||U|| / ||W|| = sum(col 0) / sum(col 1)


@torch.no_grad()
def item_stats(model: ScaledModel, task: StructuredTask, batches: Iterable[Any], *,
               unary_only: bool = False) -> np.ndarray:
    """[n, 2] per item (word, sentence, grid) of ``batches``: the task's metric as a ratio of sums
    (:data:`ITEM_COLUMNS`): ``per_example`` -> ``[correct_i / scored_i, 1]`` (``[0, 0]`` for an item
    with nothing scored, which ``evaluate`` leaves out too), ``pooled`` -> ``[correct, tokens]``,
    ``span_f1`` -> ``[2 tp, predicted + gold]``. ``100 * sum(col 0) / sum(col 1)`` is
    ``100 * components.training.structured.evaluate`` on the same batches."""
    was = model.training
    model.eval()
    rows = []
    for b in batches:
        p = model.potentials(b)
        pred = task.unary_predict(p) if unary_only else task.predict(p)
        ok, n = (x.double().cpu() for x in task.counts(pred, b))
        if task.metric == "per_example":
            has = n > 0
            rows.append(torch.stack([torch.where(has, ok / n.clamp_min(1), 0.0), has.double()], -1))
        else:
            rows.append(torch.stack([ok, n], -1))
    model.train(was)
    return torch.cat(rows).numpy() if rows else np.zeros((0, 2))


@torch.no_grad()
def item_log_ratios(model: ScaledModel, batches: Iterable[Any]) -> np.ndarray:
    """[n, 2] per item: ``[log10 ||U|| / ||W||, 1]`` of the potentials the model uses (S&O Fig. 1b-c),
    ``[0, 0]`` for an item without a pairwise term (||W|| = 0, as ``mean_ratio`` skips it)."""
    was = model.training
    model.eval()
    rows = []
    for b in batches:
        p = model.potentials(b)
        r = ratio(p).double().cpu()
        has = (p.pairwise_norm().cpu() > 0) & (r > 0) & torch.isfinite(r)
        rows.append(torch.stack([torch.where(has, torch.log10(torch.where(has, r, 1.0)), 0.0), has.double()], -1))
    model.train(was)
    return torch.cat(rows).numpy() if rows else np.zeros((0, 2))


def stats_score(stats: np.ndarray) -> float:
    """``100 * sum(col 0) / sum(col 1)`` of :func:`item_stats` (0 when nothing is scored)."""
    s = np.asarray(stats, dtype=np.float64).sum(0)
    return 100.0 * float(s[0]) / max(float(s[1]), 1e-12) if s[1] > 0 else 0.0


# -- one run -----------------------------------------------------------------------------------
def run_seed(base_seed: int, run: dict[str, Any]) -> int:
    """The base of one run's streams: ``seed_for(base_seed, "scaling", kind, "replicate<i>")``, ``i`` =
    ``run["seed"]`` (a replicate index). Shared by every variant and fold of the replicate (module doc)."""
    return seed_for(base_seed, "scaling", run["kind"], f"replicate{run['seed']}")


def _on(source: Any, device: Any, batch_size: int) -> Callable[..., Iterator[Any]]:
    """A ``() -> batches`` of ``source`` moved to ``device`` (for dev, D and test)."""
    return lambda *a: (b.to(device) for b in source.batches(batch_size))


def train_and_evaluate(run: dict[str, Any], cfg: ScalingStudyConfig, prepared: Path, device: Any, *,
                       base_seed: int, on_epoch: Callable[[dict[str, Any]], None] | None = None,
                       on_batch: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Train one run of the design by its procedure, score it on test and on D, return its record:
    the run's keys, final alpha, test/train score (percent), minutes, epochs, sizes, the
    per-epoch history (see ``components.reports.shevchenko_osokin``) and ``item_stats``: the
    per-item statistics (lists of rows) of the test set and of D (:func:`item_stats`, columns
    ``columns``; their sums give test_score and train_score) and D's log ratios
    (:func:`item_log_ratios`), the inputs of the report's paired bootstrap. Every seed derives from
    ``base_seed`` (``base.seed``) and the run's replicate (:func:`run_seed`; module doc)."""
    seed = run_seed(base_seed, run)
    torch.manual_seed(seed_for(seed, "torch"))
    task = cfg.task(run["kind"])
    d = task.build(run, Path(prepared), base_seed)
    method, scaling_cfg = scaling_for(run, task.cfg)
    model = ScaledModel(d.energy, method, scaling_cfg).to(device)
    bs = cfg.eval_batch_size
    unary_only = run["procedure"] == "unary"
    untrained = evaluate(model, d.task, _on(d.dev, device, bs)(), unary_only=unary_only) if cfg.guard else 0.0
    result = train_procedure(
        model, d.task, PROCEDURES[run["procedure"]][0], task.cfg.procedure,
        train_batches=lambda s, size: (b.to(device) for b in d.train.batches(size, shuffle=True, seed=s)),
        n_train=len(d.train), dev_batches=_on(d.dev, device, bs), subset_batches=_on(d.subset, device, bs),
        seed=seed_for(seed, "batches"), on_epoch=on_epoch, on_batch=on_batch)
    if cfg.guard:        # a model that did not learn fails its run (the stage lists it as failed, never a table cell)
        # the model ends on its last phase's best-on-dev weights: that phase's best recorded dev score
        last = result.history[-1]["phase"]
        trained = max(h["dev_score"] for h in itertools.takewhile(lambda h: h["phase"] == last,
                                                                  reversed(result.history)))
        check_learned(100.0 * untrained, 100.0 * trained, what=f"scaling {run['task']} {run['objective']} "
                      f"{run['procedure']} (fold {run['fold']}, seed {run['seed']})", min_gain=cfg.guard_min_gain)
    t0 = time.perf_counter()
    # per item: the test set and the training subset D scored (their sums give the scores), and D's
    # log ratio ||U|| / ||W|| (Fig. 1b-c), for the paired bootstrap of the report's claims
    test = item_stats(model, d.task, _on(d.test, device, bs)(), unary_only=unary_only)
    train = item_stats(model, d.task, _on(d.subset, device, bs)(), unary_only=unary_only)
    log_ratio = item_log_ratios(model, _on(d.subset, device, bs)())
    return {**{k: run[k] for k in ("task", "objective", "procedure", "last_activation", "fold", "seed")},
            "alpha": result.alpha, "test_score": stats_score(test), "train_score": stats_score(train),
            "train_minutes": result.minutes, "eval_seconds": time.perf_counter() - t0,
            "epochs": result.epochs, "n_train": len(d.train), "n_test": len(d.test),
            "device": str(device), "history": result.history,
            "item_stats": {"columns": list(ITEM_COLUMNS[d.task.metric]), "test": test.tolist(),
                           "train": train.tolist(), "log_ratio": log_ratio.tolist()}}
