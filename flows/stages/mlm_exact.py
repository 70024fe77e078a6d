"""Stage ``mlm_exact``: thesis ch. 6, Sec. 6.2.3 — masked LMs against exact likelihood training on
spaces small enough to enumerate (Table 6.1) and the KL projection of pretrained MLM conditionals
(Figure 6.1), as one Ray Tune grid.

Trials (one per grid element, ``mlm_exact.sweep.resources`` each):

- ``cell``: a (source, train size, objective, seed) of Table 6.1 — a ``BiLSTMMLM`` read as
  E_raw trained by exact LL (log Z by enumeration), exact PLL (true conditionals) or MLM
  (free conditionals), scored on held-out data by exact NLL, -PLL and -MLM
  (``components.training.mlm_exact.run_cell``). Sources: the palindrome and low/high-entropy
  HMM generators (V = T = 5) and the CMU dictionary's phoneme sequences up to
  ``cell.phoneme_max_len`` phonemes (the thesis: 6; log Z then sums 39^6 sequences).
- ``projection``: Figure 6.1 for one (source, seed) — pretrain an MLM, then PL from scratch vs KL
  projection (alone and with PL) on growing small training sets (``run_projection``).

Seeds (:func:`components.seeds.seed_for` of ``base.seed``): a run's ``seed`` is a replicate index of
``mlm_exact.seeds``, not a seed; the run trains from ``("mlm_exact", source, "replicate<i>")`` (its
data, weights and batches derive from it: ``components.training.mlm_exact``; no objective or train
size in the name, so a replicate's objectives are paired), and the HMM generators' parameters come
from ``("mlm_exact", "generator")`` — one distribution for every replicate, and the low- and
high-entropy HMMs share their draws. The grid's fingerprint: ``("mlm_exact", "grid")``.

Outputs ``metrics/mlm_exact.json`` in the schema ``components.reports.goyal_mlm`` reads
(``table`` rows with each objective's mean and sd over seeds, ``figure``, ``settings``) and the
per-test-sequence statistics of every trained model under ``metrics/stats/mlm_exact/``
(``components.metrics.sentence_stats.save_stats``, columns ``[value, 1]``, ``[replicates, test
sequences, 2]``; the resampling unit is the held-out sequence, paired across the objectives and
sizes of a replicate because they share its test set): ``<row>.npz`` per Table 6.1 row (systems
``<objective>:nll`` / ``:neg_pll`` / ``:neg_mlm`` and ``true:nll``) and ``figure.npz`` (Figure 6.1:
``<method>@<size>:nll``, ``dpll:nll``, ``true:nll``). The report itself is written by the ``mcmc``
stage, which reads these.
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.config import BaseConfig, ConfigError, ResourcesConfig, check_range, load_section
from components.io import npz_bytes
from components.metrics.sentence_stats import save_stats
from components.seeds import seed_for
from components.training.mlm_exact import (CELL_SOURCES, EXACT_OBJECTIVES, TEACHER_OBJECTIVES, CellConfig,
                                           ProjectionConfig, run_cell, run_projection)
from flows.ray_runtime import report_final
from flows.stages.common import StageContext, main
from flows.sweeps import SweepConfig, run_sweep

#: Table 6.1 row names: source -> the thesis' prefix ("+" marks the high-entropy HMM).
ROW_NAMES = {"palindrome": ("p", ""), "hmm_low": ("h", ""), "hmm_high": ("h", "+")}


@dataclass(frozen=True)
class PhonemeStudyConfig:
    enabled: bool = True
    # sequences of length <= cell.phoneme_max_len from train.parquet (at 3: of its 6,348 such words)
    train_size: int = 3000
    objectives: tuple[str, ...] = ("pll", "mlm")   # exact LL is out of reach here, as in the thesis

    def __post_init__(self):
        check_range(self, positive=("train_size",), nonempty=("objectives",))


@dataclass(frozen=True)
class ProjectionStudyConfig:
    sources: tuple[str, ...] = ("hmm_low",)
    pretrain_size: int = 5000           # the thesis: 100k synthetic sequences (paper scale)
    train_sizes: tuple[int, ...] = (30, 100, 300, 1000)
    objectives: tuple[str, ...] = ("pll", "kl", "kl_pl")


@dataclass(frozen=True)
class MLMExactConfig:
    sources: tuple[str, ...] = ("palindrome", "hmm_low", "hmm_high")
    train_sizes: tuple[int, ...] = (1000, 3000)      # the thesis: 1k and 10k (paper scale)
    objectives: tuple[str, ...] = ("ll", "pll", "mlm")
    seeds: tuple[int, ...] = (0,)
    # test_size 2000; phoneme_max_len 3: the exact test log Z sums over 39 + 39^2 + 39^3 sequences (the
    # thesis: 6, paper scale)
    cell: CellConfig = CellConfig(test_size=2000, phoneme_max_len=3)
    phonemes: PhonemeStudyConfig = PhonemeStudyConfig()
    projection: ProjectionStudyConfig = ProjectionStudyConfig()
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=2, metric="nll", mode="min",
                                     resources=ResourcesConfig(cpu=1, gpu=0))
    paper_phoneme_max_len: int = 6
    stats_dir: str = "metrics/stats/mlm_exact"

    def __post_init__(self):
        check_range(self, positive=("train_sizes",), nonnegative=("seeds",), nonempty=("seeds",))


def load_config(params: dict[str, Any]) -> MLMExactConfig:
    cfg = load_section(MLMExactConfig, "mlm_exact", params)
    for where, names, known in (("mlm_exact.sources", cfg.sources, CELL_SOURCES),
                                ("mlm_exact.projection.sources", cfg.projection.sources, CELL_SOURCES),
                                ("mlm_exact.objectives", cfg.objectives, tuple(EXACT_OBJECTIVES)),
                                ("mlm_exact.phonemes.objectives", cfg.phonemes.objectives, tuple(EXACT_OBJECTIVES))):
        bad = [n for n in names if n not in known]
        if bad:
            raise ConfigError(f"{where}: {bad} not among {list(known)}")
    for where, names in (("mlm_exact.objectives", cfg.objectives), ("mlm_exact.phonemes.objectives", cfg.phonemes.objectives)):
        if any(n in TEACHER_OBJECTIVES for n in names):
            raise ConfigError(f"{where}: {list(TEACHER_OBJECTIVES)} need a pretrained teacher: they belong in "
                              "mlm_exact.projection.objectives")
    if "phonemes" in cfg.sources:
        raise ConfigError("mlm_exact.sources: phonemes are configured under mlm_exact.phonemes")
    # the projection's own checks (sizes, objectives) before any work
    _projection(cfg)
    return cfg


def _projection(cfg: MLMExactConfig) -> ProjectionConfig:
    p = cfg.projection
    return ProjectionConfig(cell=cfg.cell, pretrain_size=p.pretrain_size, train_sizes=tuple(p.train_sizes),
                            objectives=tuple(p.objectives))


def design(cfg: MLMExactConfig) -> list[dict[str, Any]]:
    """The grid: the projection runs first (the longest), then the Table 6.1 cells, largest first."""
    grid: list[dict[str, Any]] = []
    for seed in cfg.seeds:
        for source in cfg.projection.sources:
            grid.append({"kind": "projection", "source": source, "seed": seed})
    cells = []
    for seed in cfg.seeds:
        for size in cfg.train_sizes:
            for source in cfg.sources:
                for obj in cfg.objectives:
                    cells.append({"kind": "cell", "source": source, "train_size": size, "objective": obj, "seed": seed})
        if cfg.phonemes.enabled:
            for obj in cfg.phonemes.objectives:
                cells.append({"kind": "cell", "source": "phonemes", "train_size": cfg.phonemes.train_size,
                              "objective": obj, "seed": seed})
    cells.sort(key=lambda c: -c["train_size"] * (3 if c["objective"] == "ll" else 1))
    return grid + cells


def exact_trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable: one grid element; reports its NLL with ``record.json``."""
    run = config["run"]
    cfg = load_config(params)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    cell = _rooted(cfg.cell, Path(root))
    base_seed = load_section(BaseConfig, "base", params).seed
    seed = seed_for(base_seed, "mlm_exact", run["source"], f"replicate{run['seed']}")    # run["seed"]: a replicate
    generator_seed = seed_for(base_seed, "mlm_exact", "generator")
    if run["kind"] == "projection":
        out = run_projection(run["source"], seed, dataclasses.replace(_projection(cfg), cell=cell),
                             generator_seed=generator_seed)
        nll = float(out["pretrain"]["nll"])
    else:
        out = run_cell(run["source"], run["train_size"], run["objective"], seed, cell, generator_seed=generator_seed)
        nll = float(out["nll"])
    arrays = _pop_arrays(out)
    record = {"run": run, "result": out}
    report_final({"nll": nll}, {"record.json": json.dumps(record, indent=1), "per_sequence.npz": npz_bytes(arrays)})


def _pop_arrays(out: dict[str, Any]) -> dict[str, Any]:
    """Take the per-sequence arrays out of a cell's or projection's result (they travel as an .npz):
    ``cell``, ``pretrain``, ``<objective>@<size>``."""
    if "runs" not in out:
        return {"cell": out.pop("per_sequence")}
    arrays = {"pretrain": out["pretrain"].pop("per_sequence")}
    for r in out["runs"]:
        arrays[f"{r['objective']}@{r['train_size']}"] = r.pop("per_sequence")
    return arrays


_COLUMNS = ("value", "count")


def _as_means(x: Any) -> Any:
    """Per-sequence values ``[replicates, n]`` as ``[value, 1]`` statistics ``[replicates, n, 2]``."""
    x = np.asarray(x, dtype=np.float64)
    return np.stack([x, np.ones_like(x)], axis=-1)


def save_exact_stats(folder: Path, records: list[dict[str, Any]], arrays: list[dict[str, Any]],
                     projection_source: str | None) -> list[Path]:
    """The per-test-sequence statistics files (module doc) from the trials' records and arrays (in
    the same order; Figure 6.1's from ``projection_source``'s projection runs, as :func:`summarise`);
    replicates in increasing order. Files of an earlier design left in ``folder`` are removed.
    Returns the paths written."""
    rows: dict[str, dict[str, dict[int, Any]]] = {}
    fig: dict[str, dict[int, Any]] = {}
    for rec, arr in zip(records, arrays):
        run, rep = rec["run"], int(rec["run"]["seed"])
        if run["kind"] == "cell":
            row = rows.setdefault(_row_name(run["source"], run["train_size"]), {})
            cell = arr["cell"]
            for j, m in enumerate(("nll", "neg_pll", "neg_mlm")):
                row.setdefault(f"{run['objective']}:{m}", {})[rep] = cell[:, j]
            if cell.shape[1] > 3:
                row.setdefault("true:nll", {})[rep] = cell[:, 3]
        elif run["source"] == projection_source:
            for key, a in arr.items():
                name = "dpll" if key == "pretrain" else key
                fig.setdefault(f"{name}:nll", {})[rep] = a[:, 0]
                if key == "pretrain" and a.shape[1] > 3:
                    fig.setdefault("true:nll", {})[rep] = a[:, 3]
    written = []
    for name, systems in [*rows.items(), *([("figure", fig)] if fig else [])]:
        reps = sorted(set.intersection(*(set(v) for v in systems.values())))
        out = {s: _as_means(np.stack([v[r] for r in reps])) for s, v in systems.items()}
        path = folder / f"{name}.npz"
        save_stats(path, out, _COLUMNS)
        written.append(path)
    for stale in set(folder.glob("*.npz")) - set(written):
        stale.unlink()
    return written


def _rooted(cell: CellConfig, root: Path) -> CellConfig:
    p = Path(cell.phoneme_dir)
    return dataclasses.replace(cell, phoneme_dir=str(p if p.is_absolute() else root / p))


def _mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return None, None
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def _row_name(source: str, size: int) -> str:
    if source == "phonemes":
        return "phoneme"
    prefix, plus = ROW_NAMES.get(source, (source, ""))
    k = f"{size // 1000}k" if size % 1000 == 0 else str(size)
    return f"{prefix}-{k}{plus}"


def summarise(cfg: MLMExactConfig, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's ``metrics/mlm_exact.json`` from the trials' records."""
    cells = [r for r in records if r["run"]["kind"] == "cell"]
    table = []
    keys = list({(r["run"]["source"], r["run"]["train_size"]) for r in cells})
    order = {s: i for i, s in enumerate(cfg.sources)}
    keys.sort(key=lambda k: (k[0] == "phonemes", order.get(k[0], 99), k[1]))
    for source, size in keys:
        mine = [r for r in cells if r["run"]["source"] == source and r["run"]["train_size"] == size]
        by_obj: dict[str, Any] = {}
        for obj in dict.fromkeys(r["run"]["objective"] for r in mine):
            rs = [r["result"] for r in mine if r["run"]["objective"] == obj]
            entry: dict[str, Any] = {"seeds": len(rs), "failed": False}
            for m in ("nll", "neg_pll", "neg_mlm", "epochs", "best_epoch", "train_seconds"):
                mean, sd = _mean_sd([float(x[m]) for x in rs if m in x])
                entry[m] = mean
                if m in ("nll", "neg_pll", "neg_mlm"):
                    entry[f"{m}_sd"] = sd
            by_obj[obj] = entry
        true, _ = _mean_sd([float(r["result"]["true_nll"]) for r in mine if "true_nll" in r["result"]])
        table.append({"row": _row_name(source, size), "data": "phoneme" if source == "phonemes" else source,
                      "train_size": size, "true": true, "seeds": len({r["run"]["seed"] for r in mine}),
                      "by_objective": by_obj})
    figure: dict[str, Any] = {}
    proj = [r for r in records if r["run"]["kind"] == "projection"]
    if proj:
        source = cfg.projection.sources[0]
        mine = [r["result"] for r in proj if r["run"]["source"] == source]
        sizes = list(cfg.projection.train_sizes)
        nll: dict[str, list] = {}
        sd: dict[str, list] = {}
        for obj in cfg.projection.objectives:
            nll[obj], sd[obj] = [], []
            for size in sizes:
                m, s = _mean_sd([float(x["nll"]) for res in mine for x in res["runs"]
                                 if x["objective"] == obj and x["train_size"] == size])
                nll[obj].append(m)
                sd[obj].append(s)
        true, _ = _mean_sd([float(res["true_nll"]) for res in mine if "true_nll" in res])
        dpll, _ = _mean_sd([float(res["pretrain"]["nll"]) for res in mine])
        figure = {"data": source, "true": true, "dpll": {"pretrain_size": cfg.projection.pretrain_size, "nll": dpll},
                  "sizes": sizes, "nll": nll, "sd": sd, "seeds": len(mine)}
    settings = {"length": cfg.cell.length, "vocab": cfg.cell.vocab, "hidden": cfg.cell.model.hidden,
                "embedding_dim": cfg.cell.model.embedding_dim, "lr": cfg.cell.train.lr,
                "epochs": cfg.cell.train.epochs, "patience": cfg.cell.train.patience,
                "dev_size": cfg.cell.dev_size, "test_size": cfg.cell.test_size, "seeds": list(cfg.seeds),
                "phoneme_max_len": cfg.cell.phoneme_max_len, "paper_phoneme_max_len": cfg.paper_phoneme_max_len,
                "phoneme_train_size": cfg.phonemes.train_size if cfg.phonemes.enabled else None,
                "projection_pretrain_size": cfg.projection.pretrain_size}
    return {"table": table, "figure": figure, "settings": settings}


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_config(params)
    grid = design(cfg)
    if cfg.phonemes.enabled:
        phon = ctx.path(cfg.cell.phoneme_dir)
        if not (phon / "train.parquet").exists():
            raise FileNotFoundError(f"mlm_exact: {phon}/train.parquet is missing (run the prepare stage)")
    t0 = time.perf_counter()
    with ctx.tracker.start_run("sweep/mlm_exact", parent_run_id=ctx.run_id,
                               tags={"stage": ctx.stage, "study": "goyal_mlm"}) as parent:
        ctx.tracker.log_params({"n_runs": len(grid), "sources": ",".join(cfg.sources), "seeds": str(list(cfg.seeds))})
        trainable = tune.with_parameters(exact_trial, params=params, root=str(ctx.root))
        res = run_sweep(trainable, name="mlm_exact", cfg=cfg.sweep, params=params,
                        seed=seed_for(ctx.base.seed, "mlm_exact", "grid"),
                        tracker=ctx.tracker, parent_run_id=parent, storage=ctx.ray_storage,
                        tags={"stage": ctx.stage}, grid=grid)
        records = [json.loads((Path(t["checkpoint"]) / "record.json").read_text()) for t in res.trials]
        arrays = []
        for t in res.trials:
            with np.load(Path(t["checkpoint"]) / "per_sequence.npz", allow_pickle=False) as z:
                arrays.append({k: z[k] for k in z.files})
        metrics = summarise(cfg, records)
        save_exact_stats(ctx.path(cfg.stats_dir), records, arrays,
                         cfg.projection.sources[0] if cfg.projection.sources else None)
        ctx.tracker.log_metrics({f"{row['row'].replace('+', '_plus')}.{obj}.{m}": v for row in metrics["table"]
                                 for obj, e in row["by_objective"].items() for m, v in e.items()
                                 if m in ("nll", "neg_pll", "neg_mlm") and v is not None})
    metrics["runs"] = len(grid)
    metrics["sweep_minutes"] = (time.perf_counter() - t0) / 60.0
    return metrics


if __name__ == "__main__":
    main("mlm_exact")
