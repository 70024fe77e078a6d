"""Stage ``scaling``: the Shevchenko & Osokin study of unary vs pairwise scaling, as one Ray Tune grid.

Every (task, objective, procedure, fold, seed) is one trial of a grid run through the sweep spine
(``flows.sweeps.run_sweep(grid=...)``); trials ask Ray for the resources in
``scaling.sweep.resources`` (one GPU each where there are GPUs) and log to MLflow as child runs
of ``sweep/scaling`` (params ``run/task``, ``run/objective``, ``run/procedure`` ...; per-epoch dev
score, alpha and unary/pairwise ratio as metric curves). Tasks:

- ``ocr``: OCR letters, LeNet unaries + 26x26 pairwise chain CRF; fold 0 is the validation fold
  (stopping rule, LR schedule), each test fold trains on the other eight folds.
- ``tagging``: a prepared tagging task (default the Greek NT POS task) with context-free MLP
  unaries — the paper's chunking setup where scaling breaks; its own train/dev/test split.
- ``snakes``: the Gaussian CRF (UNet unaries and pixel embeddings) on the snakes grids; a seeded
  part of the training grids is the dev set.

Procedures: ``unary`` (unaries only), ``stage``, ``joint`` and joint training under the scaling
methods ``online``, ``offline``, ``offline_reg``, ``temperature``, ``fixed_alpha`` (S&O Fig. 1a).
The stage writes ``reports/shevchenko_osokin/`` (README with the Table 1 / Table 2 analogs beside
the paper's numbers, figures 1a-1c, ``records.json`` with every run) and ``metrics/scaling.json``.
``base.scale: paper`` switches to all nine folds, eight seeds, the full data and all objectives.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.config import BaseConfig, load_section, resolve_device
from components.data.grids import GridSet, read_grids
from components.data.ocr import cv_split, read_ocr_words, subsample
from components.data.tasks import load_tagging_task
from components.energies.gcrf import GCRFConfig, GaussianCRF
from components.energies.unary_pairwise import UnaryPairwiseCRF
from components.io import write_json
from components.models.lenet import LeNetConfig, LeNetUnary
from components.models.mlp import MLPUnaryConfig, MLPUnary
from components.reports import shevchenko_osokin as report
from components.training.scaling import ScaledModel, ScalingConfig
from components.training.structured import ChainTask, GridTask, ProcedureConfig, evaluate, train_procedure
from flows.stages.common import StageContext, main, numeric
from flows.sweeps import ResourcesConfig, SweepConfig, epoch_bar, run_sweep

# procedure name in the tables -> (training procedure, scaling method)
PROCEDURES = {"unary": ("unary", "none"), "stage": ("stage", "none"), "joint": ("joint", "none"),
              "online": ("joint", "online"), "offline": ("joint", "offline"),
              "offline_reg": ("joint", "offline_reg"), "temperature": ("joint", "temperature"),
              "fixed_alpha": ("joint", "fixed")}


@dataclass(frozen=True)
class MethodsConfig:
    """Hyperparameters of the scaling methods (tuned on the validation data in the paper)."""
    offline_alpha: float = 8.0        # alpha of eq. 20
    reg_alpha: float = 8.0            # target ratio of eq. 21
    reg_lambda: float = 0.01          # lambda of eq. 21
    temperature: float = 2.0          # App. A.2: alpha in front of both potentials
    online: ScalingConfig = ScalingConfig(method="online")   # grid, subset size, initial alpha


@dataclass(frozen=True)
class StudyTaskConfig:
    """What every task of the study shares: which runs, and how each phase trains."""
    runs: dict[str, tuple[str, ...]] = field(default_factory=lambda: {"marginal_ce": ("unary", "stage", "joint", "online", "offline", "offline_reg")})
    fixed_alphas: tuple[float, ...] = ()      # extra joint runs at a fixed alpha (first objective)
    sigmoid: tuple[str, ...] = ()             # procedures re-run with the sigmoid last activation
    procedure: ProcedureConfig = ProcedureConfig()
    methods: MethodsConfig = MethodsConfig()


@dataclass(frozen=True)
class OcrStudyConfig(StudyTaskConfig):
    path: str = "ocr_letters/letters.parquet"      # under base.prepared_dir
    select_fold: int = 0
    test_folds: tuple[int, ...] = (1,)
    max_train_words: int = 0                        # 0 = the eight training folds in full
    max_dev_words: int = 0                          # 0 = the whole validation fold
    model: LeNetConfig = LeNetConfig()
    pairwise_init_std: float = 0.1


@dataclass(frozen=True)
class TaggingStudyConfig(StudyTaskConfig):
    task: str = "greek_pos"                         # a prepared tagging task
    max_train_sentences: int = 0
    model: MLPUnaryConfig = MLPUnaryConfig()
    pairwise_init_std: float = 0.1


@dataclass(frozen=True)
class GridStudyConfig(StudyTaskConfig):
    path: str = "snakes"                            # folder with train.parquet, test.parquet
    dev_fraction: float = 0.2                       # of the training grids, seeded
    ignore_label: int = 0                           # left out of the metric (background)
    model: GCRFConfig = GCRFConfig()


@dataclass(frozen=True)
class ScalingStudyConfig:
    tasks: tuple[str, ...] = ("ocr", "tagging", "snakes")
    seeds: tuple[int, ...] = (0,)
    eval_batch_size: int = 256
    ocr: OcrStudyConfig = OcrStudyConfig()
    tagging: TaggingStudyConfig = TaggingStudyConfig()
    snakes: GridStudyConfig = GridStudyConfig()
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=2, metric="best_dev_score",
                                     resources=ResourcesConfig(cpu=1, gpu="auto"))
    report_dir: str = "reports/shevchenko_osokin"
    report_objective: str = "marginal_ce"           # the objective of figures 1a-1c


TASK_KINDS = ("ocr", "tagging", "snakes")


def design(cfg: ScalingStudyConfig) -> list[dict[str, Any]]:
    """The grid: one dict per (task, objective, procedure, last activation, alpha, fold, seed)."""
    rows = []
    for kind in cfg.tasks:
        if kind not in TASK_KINDS:
            raise ValueError(f"scaling.tasks: {kind!r} is not one of {TASK_KINDS}")
        t = getattr(cfg, kind)
        name = t.task if kind == "tagging" else kind
        folds = t.test_folds if kind == "ocr" else (0,)
        act = t.model.last_activation if kind != "snakes" else "none"
        if not t.runs:
            raise ValueError(f"scaling.{kind}.runs is empty")
        first = next(iter(t.runs))
        variants = []
        for objective, procs in t.runs.items():
            if kind == "snakes" and objective != "gcrf_ce":
                raise ValueError(f"scaling.snakes.runs: the Gaussian CRF trains with 'gcrf_ce' only, not {objective!r}")
            for proc in procs:
                if proc not in PROCEDURES or proc == "fixed_alpha":
                    raise ValueError(f"scaling.{kind}.runs.{objective}: procedure {proc!r} is not one of "
                                     f"{sorted(set(PROCEDURES) - {'fixed_alpha'})} (fixed alphas go in fixed_alphas)")
                variants.append((objective, proc, act, 1.0))
        variants += [(first, "fixed_alpha", act, float(a)) for a in t.fixed_alphas]
        if t.sigmoid and kind == "snakes":
            raise ValueError("scaling.snakes.sigmoid: the UNet has no last-activation switch")
        variants += [(first, p, "sigmoid", 1.0) for p in t.sigmoid]
        for objective, proc, a, alpha in variants:
            for fold in folds:
                for seed in cfg.seeds:
                    rows.append({"kind": kind, "task": name, "objective": objective, "procedure": proc,
                                 "last_activation": a, "alpha": alpha, "fold": int(fold), "seed": int(seed)})
    return rows


def scaling_for(run: dict[str, Any], m: MethodsConfig) -> ScalingConfig:
    method = PROCEDURES[run["procedure"]][1]
    alpha = {"fixed": run["alpha"], "offline": m.offline_alpha, "offline_reg": m.reg_alpha,
             "temperature": m.temperature, "online": m.online.alpha}.get(method, 1.0)
    return replace(m.online, method=method, alpha=float(alpha), reg_lambda=m.reg_lambda)


@dataclass
class _Data:
    train: Any
    dev: Any
    test: Any
    subset: Any
    model: torch.nn.Module
    task: Any


def _build(run: dict[str, Any], cfg: ScalingStudyConfig, base: BaseConfig, root: Path) -> _Data:
    """Data splits and the unscaled energy for one run."""
    kind, seed = run["kind"], run["seed"]
    t = getattr(cfg, kind)
    prepared = root / base.prepared_dir
    if kind == "ocr":
        words = read_ocr_words(prepared / t.path)
        train, test = cv_split(words, run["fold"], select_fold=t.select_fold)
        train = subsample(train, t.max_train_words, seed)
        dev = subsample(words.subset(np.flatnonzero(words.folds == t.select_fold)), t.max_dev_words, 0)
        net = LeNetUnary(replace(t.model, last_activation=run["last_activation"]), seed=seed)
        model = UnaryPairwiseCRF(net, 26, init_std=t.pairwise_init_std, seed=seed)
        task = ChainTask(run["objective"], metric="per_example")
    elif kind == "tagging":
        tt = load_tagging_task(prepared / t.task, max_train_sentences=t.max_train_sentences, seed=seed)
        train, dev, test = tt.train, tt.dev, tt.test
        net = MLPUnary(replace(t.model, last_activation=run["last_activation"]), len(tt.vocabs["word"]),
                       len(tt.vocabs["char"]), tt.feat_sizes, len(tt.vocabs["label"]),
                       pretrained_ids=tt.glove_ids, pretrained=tt.glove_vectors, seed=seed)
        model = UnaryPairwiseCRF(net, len(tt.vocabs["label"]), init_std=t.pairwise_init_std, seed=seed)
        task = ChainTask(run["objective"], metric="pooled")
    else:
        full = GridSet(read_grids(prepared / t.path / "train.parquet"))
        test = GridSet(read_grids(prepared / t.path / "test.parquet"))
        order = np.random.default_rng(seed).permutation(len(full))
        n_dev = max(1, int(round(t.dev_fraction * len(full))))
        dev, train = full.subset(order[:n_dev]), full.subset(np.sort(order[n_dev:]))
        model = GaussianCRF(int(full.x.shape[1]), int(full.y.max()) + 1, t.model, seed=seed)
        task = GridTask(model, ignore_label=t.ignore_label)
    n_sub = t.methods.online.subset_size(len(train))
    rows = np.sort(np.random.default_rng(seed + 1).choice(len(train), n_sub, replace=False))
    return _Data(train, dev, test, train.subset(rows), model, task)


def scaling_trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable: trains and scores one run of the design."""
    from ray import tune

    run = config["run"]
    base = load_section(BaseConfig, "base", params)
    cfg = load_section(ScalingStudyConfig, "scaling", params)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    torch.manual_seed(run["seed"])
    device = resolve_device(base.device)
    d = _build(run, cfg, base, Path(root))
    t = getattr(cfg, run["kind"])
    model = ScaledModel(d.model, scaling_for(run, t.methods)).to(device)
    bs = cfg.eval_batch_size
    on_batch = epoch_bar(f"{run['task']}/{run['objective']}/{run['procedure']}/f{run['fold']}/s{run['seed']}")

    best = {"dev": -1.0}

    def on_epoch(rec: dict[str, Any]) -> None:
        best["dev"] = max(best["dev"], float(rec["dev_score"]))
        tune.report({k: float(v) for k, v in rec.items() if isinstance(v, (int, float))}
                    | {"best_dev_score": best["dev"], "phase_index": float(("unary", "pairwise", "joint").index(rec["phase"]))})

    def batches(source):
        return lambda *a: (b.to(device) for b in source.batches(bs))

    result = train_procedure(
        model, d.task, PROCEDURES[run["procedure"]][0], t.procedure,
        train_batches=lambda s, size: (b.to(device) for b in d.train.batches(size, shuffle=True, seed=s)),
        n_train=len(d.train), dev_batches=batches(d.dev), subset_batches=batches(d.subset),
        seed=run["seed"], on_epoch=on_epoch, on_batch=on_batch)
    unary_only = run["procedure"] == "unary"
    t0 = time.perf_counter()
    test = evaluate(model, d.task, batches(d.test)(), unary_only=unary_only)
    train_score = evaluate(model, d.task, batches(d.subset)(), unary_only=unary_only)
    record = {**{k: run[k] for k in ("task", "objective", "procedure", "last_activation", "fold", "seed")},
              "alpha": result.alpha, "test_score": 100.0 * test, "train_score": 100.0 * train_score,
              "train_minutes": result.minutes, "eval_seconds": time.perf_counter() - t0,
              "epochs": result.epochs, "n_train": len(d.train), "n_test": len(d.test),
              "device": str(device), "history": result.history}
    trial_dir = Path(tune.get_context().get_trial_dir())
    (trial_dir / "record.json").write_text(json.dumps(record, indent=1))
    tune.report({"best_dev_score": best["dev"], "test_score": record["test_score"],
                 "train_score": record["train_score"], "train_minutes": result.minutes,
                 "alpha": result.alpha, "epochs_run": float(result.epochs)})


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in report.aggregate(records):
        key = f"{row['task']}/{row['objective']}/{row['procedure']}"
        if row.get("last_activation") == "sigmoid":
            key += "/sigmoid"
        if row["procedure"] == "fixed_alpha":
            key += f"/alpha_{row['alpha']:g}"
        out[key] = {"mean": row["mean"], "std": row["std"], "n": row["n"], "minutes": row["minutes"]}
    return out


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_section(ScalingStudyConfig, "scaling", params)
    grid = design(cfg)
    prepared = ctx.path(ctx.base.prepared_dir)
    needs = {"ocr": prepared / cfg.ocr.path, "tagging": prepared / cfg.tagging.task / "meta.json",
             "snakes": prepared / cfg.snakes.path / "train.parquet"}
    for kind in cfg.tasks:
        if not needs[kind].exists():
            raise FileNotFoundError(f"scaling.{kind}: {needs[kind]} not found (is it prepared? run `dvc repro prepare`)")
    t0 = time.perf_counter()
    with ctx.tracker.start_run("sweep/scaling", parent_run_id=ctx.run_id, tags={"study": "shevchenko_osokin"}) as parent:
        ctx.tracker.log_params({"n_runs": len(grid), "tasks": ",".join(cfg.tasks), "seeds": str(list(cfg.seeds))})
        trainable = tune.with_parameters(scaling_trial, params=params, root=str(ctx.root))
        res = run_sweep(trainable, name="scaling", cfg=cfg.sweep, params=params, seed=ctx.base.seed,
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.path(".ray_results"),
                        tags={"stage": ctx.stage}, grid=grid)
        records, failed = [], []
        for tr in res.trials:
            rec = Path(tr["path"]) / "record.json"
            if tr["error"] or not rec.exists():
                failed.append({"run": tr["config"].get("run"), "error": tr["error"] or "no record.json"})
            else:
                records.append(json.loads(rec.read_text()))
        out_dir = ctx.path(cfg.report_dir)
        write_json(out_dir / "records.json", records)
        paths = report.write_report(records, out_dir, task="ocr" if "ocr" in cfg.tasks else records[0]["task"],
                                    objective=cfg.report_objective)
        if failed:
            from components.io import write_text
            readme = paths["README.md"]
            write_text(readme, readme.read_text() + "\n## Failed runs\n\n" + "\n".join(
                f"- `{json.dumps(f['run'])}`: {f['error']}" for f in failed) + "\n")
        for p in paths.values():
            ctx.tracker.log_artifact(p, "shevchenko_osokin")
        ctx.tracker.log_artifact(out_dir / "records.json", "shevchenko_osokin")
        summary = _summary(records)
        ctx.tracker.log_metrics(numeric(summary))
    return {"runs": len(grid), "n_failed": len(failed), "sweep_minutes": (time.perf_counter() - t0) / 60.0,
            "results": summary, "design": {"tasks": list(cfg.tasks), "seeds": list(cfg.seeds),
                                           "ocr_test_folds": list(cfg.ocr.test_folds)}}


if __name__ == "__main__":
    main("scaling")
