"""Stage ``mcmc``: masked LMs as energies, sampled by many parallel Metropolis–Hastings chains
(thesis ch. 6, Sec. 6.6–6.8); the chapter's report ``reports/goyal_mlm/`` is the stage
``report_goyal_mlm``, which reads what this stage (and ``mlm_exact``) writes.

The conditional MLM of the ``cmlm`` stage is read as two energies (E_raw, E_norm) and sampled, for
the test verses whose source has at most ``mcmc.data.max_source_words`` words (the thesis: 20), at
the target length the model predicts. What runs is what params name:

- ``mcmc.schemes``: name -> a ``SAMPLERS`` entry (``sampler``), the energy it targets (``energy``:
  raw | norm), the report's ``label`` and the sampler's own settings (``config``). The thesis's:
  ``raw`` / ``norm`` (``mh_mlm`` with E_raw / E_norm) and ``deg`` (``gibbs_mlm``, degenerate Gibbs).
- ``mcmc.groups``: name -> the ``schemes`` it runs, in order, optionally swept over one sampler
  setting (``vary`` over ``values``: the runs go value by value, then scheme by scheme), with
  settings of its own (``config``), a ``block`` tag for the report and the sentence ``set``
  (``short`` | ``full``). The thesis's: ``main`` (Figure 6.2), ``temperature`` / ``nucleus``
  (Tables 6.2, 6.3), ``block`` (Table 6.4, Figure 6.3), ``anneal`` (Table 6.5, Figure 6.4),
  ``full`` (Table 6.6, on ``full_sentences``, against mask-predict and the warm start itself),
  ``random_start`` (Figure 6.2's "all samplers start with the same random sequence": ``main`` from
  one uniform random sequence per sentence, shared by its chains, no perturbation; the thesis's
  claim that degenerate Gibbs degrades over the sweeps is about such a start).

Starts: ``mcmc.init`` (default ``warm``: the MLM's greedy decode of the all-[MASK] sequence,
Algorithm 4 line 3; ``uniform``: one uniform random sequence) and ``mcmc.start_noise`` (default
0.2): each chain of a sentence starts from that sequence with each position independently redrawn
uniformly with this probability, so the chains start apart and R-hat / ESS compare over-dispersed
chains (identical starts make R-hat meaningless). A run's sampler config is ``{init, start_noise}``
from these, then the scheme's ``config``, the group's ``config`` and the group's ``vary: value``,
keeping only the keys the sampler's config has (a group's target-temperature settings do not
reach the Gibbs sampler, which has no target temperature); a key that none of a group's samplers
has is an error (``init`` / ``start_noise`` reach only the samplers that have them). Adding a
sampler: its module, its ``SAMPLERS`` line, a ``mcmc.schemes`` entry and its name in a group; the
report lists it.

Every configuration runs ``chains`` chains per sentence for ``burn_in + sweeps`` sweeps (one sweep
= every position once, in a random order). Configurations x sentence chunks are shards: Ray tasks
(``flows.parallel.sharded_map``, a GPU each where present; :func:`run_shard` loads the model in the
worker), each vectorised over its chains and sentences; a configuration identical to another
(temperature 1 or nucleus 1 = main) is run once.

Seeds (:func:`components.seeds.seed_for` of ``base.seed``; no ``mcmc.*.seed`` knob): the verses of
each set ``("mcmc", "verses", set)``; a shard's chains ``("mcmc", "chains", "from", i)``, ``i`` the
test index of its first verse — no configuration in the name, so every configuration starts its
chains on a verse from the same draws (common random numbers); the translation task's vocabularies
and subsamples ``("cmlm", "data")``, the ``cmlm`` stage's own.

Outputs: ``data/mcmc/traces.parquet`` (one row per run, sweep, chain and sentence: energy, E_norm,
accepted, novel, Hamming distance to the start, text, sentence BLEU; also logged to MLflow),
``metrics/mcmc.json`` (per configuration: means over the sampling sweeps, per-sweep curves, corpus
BLEU, R-hat / ESS of the energy traces; the baselines; ``labels``: each scheme's label, as the
report prints it), the per-chain, per-sentence statistics of every configuration under
``metrics/stats/mcmc/`` (``components.inference.mcmc.traces.sentence_stats``, written by
``components.metrics.sentence_stats.save_stats``; systems are the configurations' names, ``[chains,
sentences, d]``): ``bleu.npz`` (BLEU statistics over the sampling sweeps, short set), ``e_norm.npz``
(also ``<name>@early`` / ``<name>@late``: the first / last third of the sampling sweeps),
``accept.npz``, ``novel.npz`` (``[mean, 1]`` columns) and ``bleu_full.npz`` (the ``full`` set's last
states, with ``mask_predict`` and ``warm_start`` repeated over the chains).
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import pandas as pd
import sacrebleu
import torch

from components.config import ConfigError, ResourcesConfig, check_range, field_error, load_section, resolve_device
from components.data.translation import SubwordVocab, load_translation_task
from components.energies.mlm import MLMEnergy, MLMEnergyConfig
from components.inference.mask_predict import MaskPredictConfig
from components.inference.mcmc.registry import SAMPLERS
from components.inference.mcmc.traces import RATE_COLUMNS, run_traced, sentence_stats, shard_batch, summarise_run, \
    trace_rows
from components.io import atomic_path
from components.metrics.bleu import sentence_stats as bleu_sentence_stats
from components.metrics.sentence_stats import BLEU_COLUMNS, save_stats
from components.models.mlm import load_cmlm
from components.seeds import seed_for
from components.training.cmlm import decode_bleu, predict_lengths
from flows.parallel import sharded_map
from flows.translation_configs import CMLMStageConfig
from flows.stages.common import StageContext, main

@dataclass(frozen=True)
class MCMCDataConfig:
    """The default scale: the 4 verses (of <= 10 Greek words) with the shortest predicted targets; a sweep
    costs O(T^3) network work per chain. The thesis (paper scale): sources up to 20 words."""
    max_source_words: int = 10          # the thesis' De-En: 20
    sentences: int = 4                  # test verses sampled by every configuration but `full`
    shortest: bool = True               # the verses with the shortest predicted targets (else random; both sets)
    full_sentences: int = 4             # Table 6.6's set (0: the whole test set)

    def __post_init__(self):
        check_range(self, positive=("max_source_words", "sentences"), nonnegative=("full_sentences",))


@dataclass(frozen=True)
class SchemeConfig:
    """A sampler run on one energy: ``mcmc.schemes.<name>``."""
    sampler: str                        # a SAMPLERS name
    energy: Literal["raw", "norm"] = "norm"     # the target: E_raw or E_norm of the CMLM
    label: str = ""                     # what the report prints ("": the scheme's name)
    config: dict[str, Any] = field(default_factory=dict)   # the sampler's settings in every group


@dataclass(frozen=True)
class GroupConfig:
    """Runs of several schemes under the same settings: ``mcmc.groups.<name>``."""
    schemes: tuple[str, ...]            # names of mcmc.schemes, in run order
    vary: str = ""                      # a sampler setting swept over `values` ("": one run a scheme)
    values: tuple[Any, ...] = ()        # written as the setting expects (2.0 for a float)
    config: dict[str, Any] = field(default_factory=dict)   # settings of every run of the group
    block: str = "single"               # the report's tag: single-site or annealed block proposals
    set: Literal["short", "full"] = "short"     # which sentences

    def __post_init__(self):
        check_range(self, nonempty=("schemes",))
        if bool(self.vary) != bool(self.values):
            raise field_error(self, "values", f"vary ({self.vary!r}) and values ({list(self.values)}) go together")


def _schemes() -> dict[str, SchemeConfig]:
    return {"raw": SchemeConfig("mh_mlm", "raw", "MH, E_raw (raw)"),
            "norm": SchemeConfig("mh_mlm", "norm", "MH, E_norm (norm)"),
            "deg": SchemeConfig("gibbs_mlm", "norm", "degenerate Gibbs (deg)")}


def _groups() -> dict[str, GroupConfig]:
    """The thesis's design at the default scale: fewer values per table (``scales/paper.yaml`` restores the
    thesis's: temperatures 2, 1.5, 1, .8, .5; top-p 1, .99, .95, .9, .8; anneal steps .02, .04, .06,
    and so does ``scales/study.yaml``). The block size anneals over the whole chain (:func:`design`)."""
    return {
        "main": GroupConfig(("raw", "norm", "deg")),
        "random_start": GroupConfig(("raw", "norm", "deg"), config={"init": "uniform", "start_noise": 0.0}),  # Fig. 6.2
        "temperature": GroupConfig(("norm", "deg"), "proposal_temperature", (2.0, 1.0, 0.5)),             # Table 6.2
        "nucleus": GroupConfig(("norm", "deg"), "top_p", (1.0, 0.9, 0.8)),                                 # Table 6.3
        "block": GroupConfig(("deg", "raw", "norm"), block="annealed",                                      # Table 6.4
                             config={"block_size": 4, "block_size_final": 1, "clip_block": True}),
        "anneal": GroupConfig(("norm", "raw"), "anneal_step", (0.02, 0.06),                                # Table 6.5
                              config={"min_temperature": 0.05}),
        "full": GroupConfig(("deg", "norm", "raw"), set="full",                                             # Table 6.6
                            config={"init": "warm", "start_noise": 0.0, "proposal_temperature": 0.8, "anneal_step": 0.02,
                                    "min_temperature": 0.05, "accept_first_sweeps": 2}),
    }


@dataclass(frozen=True)
class MCMCStageConfig:
    data: MCMCDataConfig = MCMCDataConfig()
    schemes: dict[str, SchemeConfig] = field(default_factory=_schemes)
    groups: dict[str, GroupConfig] = field(default_factory=_groups)
    # every run's start, unless its scheme or group says otherwise: warm = Algorithm 4 line 3 (greedy
    # decode of the all-[MASK] sequence) | uniform = one uniform random sequence per sentence ...
    init: Literal["warm", "uniform"] = "warm"
    # ... then per chain, each position redrawn uniformly with this probability: over-dispersed
    # starts, so that R-hat / ESS compare chains that started apart
    start_noise: float = 0.2
    chains: int = 5                     # >= 5 per configuration (the thesis)
    burn_in: int = 4                    # the thesis: 7 (paper scale)
    sweeps: int = 12                    # sampling sweeps; the thesis: >= 26 (paper scale)
    shard_sentences: int = 4            # sentences per shard
    max_rows: int = 0                   # energy pass chunking (0: one pass)
    mask_predict: MaskPredictConfig = MaskPredictConfig()
    resources: ResourcesConfig = ResourcesConfig(cpu=1, gpu="auto")
    model_dir: str = "models/cmlm"
    traces: str = "data/mcmc/traces.parquet"
    stats_dir: str = "metrics/stats/mcmc"

    def __post_init__(self):
        check_range(self, positive=("chains", "sweeps", "shard_sentences"), nonnegative=("burn_in", "max_rows"),
                    within={"start_noise": "[0, 1)"})
        # the R-hat / ESS of every run's summary (components.inference.diagnostics) need these: fail here, not
        # after the sampling
        if self.chains < 2:
            raise field_error(self, "chains", f"must be >= 2 (R-hat compares chains), got {self.chains}")
        if self.sweeps < 4:
            raise field_error(self, "sweeps", f"must be >= 4 sampling sweeps (R-hat / ESS), got {self.sweeps}")
        if not self.groups:
            raise field_error(self, "groups", "must name at least one group of runs")


def load_config(params: dict[str, Any], samplers: Any = SAMPLERS) -> MCMCStageConfig:
    cfg = load_section(MCMCStageConfig, "mcmc", params)
    for name, s in cfg.schemes.items():
        samplers.check(s.sampler, f"mcmc.schemes.{name}.sampler")
    for run in design(cfg, samplers):                    # every sampler config is valid before any work
        samplers.config(run["sampler"], run["config"], where=f"mcmc run {run['name']}")
    return cfg


def _fields(samplers: Any, sampler: str) -> set[str]:
    return {f.name for f in dataclasses.fields(samplers[sampler].config) if f.init}


def design(cfg: MCMCStageConfig, samplers: Any = SAMPLERS) -> list[dict[str, Any]]:
    """The configurations, in params order (group, then value, then scheme): ``name, group, value,
    scheme, block, sampler, config, energy, set``. ``samplers``: the registry the names are read in."""
    out: list[dict[str, Any]] = []
    for g, grp in cfg.groups.items():
        where = f"mcmc.groups.{g}"
        unknown = [s for s in grp.schemes if s not in cfg.schemes]
        if unknown:
            raise ConfigError(f"{where}.schemes: unknown {unknown}; mcmc.schemes defines {sorted(cfg.schemes)}")
        fields = {s: _fields(samplers, cfg.schemes[s].sampler) for s in grp.schemes}
        for key in [*grp.config, *([grp.vary] if grp.vary else [])]:
            if not any(key in f for f in fields.values()):
                raise ConfigError(f"{where}: {key!r} is a setting of none of its samplers "
                                  f"({sorted({cfg.schemes[s].sampler for s in grp.schemes})})")
        for value in (grp.values if grp.vary else (None,)):
            for s in grp.schemes:
                scheme = cfg.schemes[s]
                over = {**scheme.config, **grp.config, **({grp.vary: value} if grp.vary else {})}
                base = {"init": cfg.init, "start_noise": cfg.start_noise}
                c = {k: v for k, v in {**base, **over}.items() if k in fields[s]}
                if c.get("block_size_final") is not None and "block_anneal_sweeps" not in c \
                        and "block_anneal_sweeps" in fields[s]:
                    # the thesis anneals the block "with epochs" over the chain: from the first sweep to the
                    # last (burn-in included), not to some sweep in its middle after which it is single-site
                    c["block_anneal_sweeps"] = max(cfg.burn_in + cfg.sweeps - 1, 1)
                name = f"{g}/{s}" + ("" if value is None else f"/{value}")
                out.append({"name": name, "group": g, "value": value, "scheme": s, "block": grp.block,
                            "sampler": scheme.sampler, "config": c, "energy": scheme.energy, "set": grp.set})
    return out


def labels(cfg: MCMCStageConfig) -> dict[str, str]:
    """The report's label of each scheme (``labels`` in the metrics: the report prints them)."""
    return {name: s.label or name for name, s in cfg.schemes.items()}


# ------------------------------------------------------------------------------------------------
# One shard of a sharded run (a Ray task): everything it needs is in the spec, the model is loaded
# from its folder by the worker itself.
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardSpec:
    run: str                              # the configuration's key (kept on every row)
    model_dir: str                        # a saved conditional MLM (components.models.mlm.save_cmlm)
    sampler: str                          # SAMPLERS name
    sampler_config: dict                  # its config, as a mapping
    energy: str                           # "raw" | "norm"
    chains: int
    steps: int                            # burn-in + sampling sweeps
    sources: tuple                        # per sentence: source subword ids
    lengths: tuple                        # per sentence: the target length sampled
    references: tuple                     # per sentence: the reference text
    sentence_ids: tuple
    y0: tuple | None = None               # per sentence: the start (ids), or None (the config's init)
    device: str = "cpu"
    threads: int = 1
    max_rows: int = 0                     # MLMEnergyConfig.max_rows
    seed: int = 0                         # the sampler's generator (module doc: its name)


def run_shard(spec: ShardSpec, on_sweep: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Run ``spec.chains`` chains per sentence of the shard and return its ``trace_rows``, each
    row tagged with ``run``."""
    torch.set_num_threads(max(1, spec.threads))
    model = load_cmlm(spec.model_dir, device=spec.device)
    vocab = SubwordVocab.load(f"{spec.model_dir}/vocab/tgt.model")
    ecfg = MLMEnergyConfig(max_rows=spec.max_rows)
    energy = MLMEnergy(model, spec.energy, ecfg)
    norm = energy if spec.energy == "norm" else MLMEnergy(model, "norm", ecfg)
    sampler = SAMPLERS.build(spec.sampler, SAMPLERS.config(spec.sampler, dict(spec.sampler_config),
                                                           where=f"mcmc run {spec.run}"), seed=spec.seed)
    batch = shard_batch(spec.sources, spec.lengths, spec.device)
    y0 = None
    if spec.y0 is not None:
        N = int(batch.mask.shape[1])
        y0 = torch.zeros(len(spec.y0), N, dtype=torch.long)
        for i, s in enumerate(spec.y0):
            y0[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        y0 = y0.to(spec.device)
    trace = run_traced(sampler, energy, norm, batch, chains=spec.chains, steps=spec.steps, y0=y0, on_sweep=on_sweep)
    rows = trace_rows(trace, decode=vocab.decode, references=list(spec.references),
                      sentence_ids=list(spec.sentence_ids),
                      sentence_bleu=lambda h, r: float(sacrebleu.sentence_bleu(h, [r]).score))
    for r in rows:
        r["run"] = spec.run
    return rows


def _key(run: dict[str, Any], samplers: Any = SAMPLERS) -> str:
    """Runs with the same sampler, energy, sentences and (default-filled) config are one run."""
    full = dataclasses.asdict(samplers.config(run["sampler"], run["config"]))
    return json.dumps([run["sampler"], run["energy"], run["set"], full], sort_keys=True)


def _select(ds: Any, max_words: int, n: int, seed: int, lengths: list[int] | None = None) -> list[int]:
    """Indices (sorted) of up to ``n`` test verses with at most ``max_words`` source words: with
    ``lengths`` (the predicted target length of every verse), the ``n`` shortest targets, ties in a
    seeded random order (sampling costs O(T^3) a sweep); else a seeded random ``n`` (0: all)."""
    short = [i for i, w in enumerate(ds.src_lengths.tolist()) if w <= max_words]
    g = torch.Generator().manual_seed(seed)
    order = [short[i] for i in torch.randperm(len(short), generator=g).tolist()]
    if lengths is not None:
        order.sort(key=lambda i: lengths[i])                  # stable: the seeded order breaks ties
    return sorted(order[:n] if n else order)


def _save_stats(folder: Path, cfg: MCMCStageConfig, runs: list[dict[str, Any]],
                by_key: dict[str, list[dict[str, Any]]], refs: dict[str, str], order: dict[str, list[str]],
                full_baselines: dict[str, Any]) -> dict[str, Path]:
    """Every configuration's per-chain, per-sentence statistics (module doc), by its name; returns
    file stem -> path."""
    per: dict[str, dict[str, Any]] = {}
    for r in runs:
        per[r["name"]] = sentence_stats(by_key[_key(r)], refs, order[r["set"]], burn_in=cfg.burn_in,
                                        final=r["set"] == "full")
    short = [r["name"] for r in runs if r["set"] == "short"]
    full = [r["name"] for r in runs if r["set"] == "full"]
    files: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
        "bleu": ({n: per[n]["bleu"] for n in short}, BLEU_COLUMNS),
        "e_norm": ({f"{n}{w}": per[n][f"e_norm{w}"] for n in short for w in ("", "@early", "@late")}, RATE_COLUMNS),
        "accept": ({n: per[n]["accept"] for n in short}, RATE_COLUMNS),
        "novel": ({n: per[n]["novel"] for n in short}, RATE_COLUMNS),
        "bleu_full": ({**{n: per[n]["bleu"] for n in full},
                       # deterministic decoders: the same statistics for every chain, so they pair with the samplers
                       **{b: _tile(x, cfg.chains) for b, x in full_baselines.items()}}, BLEU_COLUMNS),
    }
    out = {}
    for stem, (systems, columns) in files.items():
        if systems:
            save_stats(folder / f"{stem}.npz", systems, columns)
            out[stem] = folder / f"{stem}.npz"
        elif (folder / f"{stem}.npz").exists():
            (folder / f"{stem}.npz").unlink()             # a stale file of a group no longer run
    return out


def _tile(x: Any, chains: int) -> Any:
    return np.repeat(np.asarray(x)[None], chains, axis=0)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_config(params)
    cmlm = load_section(CMLMStageConfig, "cmlm", params)  # the cmlm stage's corpus and data: its vocabularies
    model_dir = ctx.path(cfg.model_dir)
    device = resolve_device(ctx.base.device)
    model = load_cmlm(model_dir, device=device)
    task = load_translation_task(ctx.path(cmlm.corpus), model_dir / "vocab", cmlm.data,
                                 seed=seed_for(ctx.base.seed, "cmlm", "data"))      # the cmlm stage's
    if task.stats.get("vocab_trained"):
        raise RuntimeError(f"mcmc: the subword vocabularies in {model_dir / 'vocab'} do not match cmlm.data: "
                           "re-run the cmlm stage")
    test = task.test
    t0 = time.perf_counter()
    predicted = predict_lengths(model, test, batch_size=64)     # the chains' lengths: the model's own
    sets = {"short": _select(test, cfg.data.max_source_words, cfg.data.sentences,
                             seed_for(ctx.base.seed, "mcmc", "verses", "short"),
                             predicted if cfg.data.shortest else None),
            "full": _select(test, 10 ** 9, cfg.data.full_sentences, seed_for(ctx.base.seed, "mcmc", "verses", "full"),
                            predicted if cfg.data.shortest and cfg.data.full_sentences else None)}
    if not sets["short"]:
        raise ValueError(f"mcmc: no test verse has <= {cfg.data.max_source_words} source words")
    lengths, baselines, baseline_stats = {}, {}, {}
    for name, idx in sets.items():
        sub = test.subset(idx)
        lengths[name] = [predicted[i] for i in idx]
        mp = decode_bleu(model, sub, task.tgt_vocab, cfg.mask_predict, batch_size=64)
        warm = decode_bleu(model, sub, task.tgt_vocab, dataclasses.replace(cfg.mask_predict, iterations=1,
                                                                            length_candidates=1), batch_size=64)
        baseline_stats[name] = {"mask_predict": bleu_sentence_stats(mp["hypotheses"], sub.references),
                                "warm_start": bleu_sentence_stats(warm["hypotheses"], sub.references)}
        baselines[name] = {"mask_predict": {"bleu": mp["bleu"], "iterations": cfg.mask_predict.iterations,
                                            "length_candidates": cfg.mask_predict.length_candidates},
                           "warm_start": {"bleu": warm["bleu"]}}
    runs = design(cfg)
    unique: dict[str, dict[str, Any]] = {}
    for r in runs:
        unique.setdefault(_key(r), r)
    refs_all, vids = test.references, test.verse_ids
    specs = []
    threads = max(1, int(cfg.resources.cpu))
    for key, r in unique.items():
        idx = sets[r["set"]]
        for s in range(0, len(idx), cfg.shard_sentences):
            chunk = idx[s:s + cfg.shard_sentences]
            specs.append(ShardSpec(
                run=key, model_dir=str(model_dir), sampler=r["sampler"], sampler_config=r["config"],
                energy=r["energy"], chains=cfg.chains, steps=cfg.burn_in + cfg.sweeps,
                sources=tuple(tuple(test.src_ids[i]) for i in chunk),
                lengths=tuple(lengths[r["set"]][s:s + cfg.shard_sentences]),
                references=tuple(refs_all[i] for i in chunk),
                sentence_ids=tuple(vids[i] for i in chunk),
                device=str(device), threads=threads, max_rows=cfg.max_rows,
                # no configuration in the name: every configuration's chains on these verses start alike
                seed=seed_for(ctx.base.seed, "mcmc", "chains", "from", int(chunk[0]))))
    results = sharded_map(run_shard, specs, resources=cfg.resources, desc="mcmc shards")
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rows in results:
        for row in rows:
            by_key[row["run"]].append(row)
    refs = dict(zip(vids, refs_all))
    summaries = {key: summarise_run(by_key[key], refs, burn_in=cfg.burn_in) for key in unique}
    _save_stats(ctx.path(cfg.stats_dir), cfg, runs, by_key, refs,
                {name: [vids[i] for i in idx] for name, idx in sets.items()}, baseline_stats["full"])
    out_runs = []
    for r in runs:
        s = summaries[_key(r)]
        out_runs.append({k: r[k] for k in ("name", "group", "value", "scheme", "block", "sampler", "energy", "set")}
                        | {"config": r["config"]} | s)
    frame = pd.DataFrame([row | {"run": unique[row["run"]]["name"]} for key in unique for row in by_key[key]])
    traces = ctx.path(cfg.traces)
    traces.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(traces) as tmp:
        frame.to_parquet(tmp, index=False)
    ctx.tracker.log_artifact(traces, "mcmc")
    model_info = json.loads((ctx.path("metrics") / "cmlm.json").read_text()) if (ctx.path("metrics") / "cmlm.json").exists() else {}
    metrics = {
        "model": {"dev_masked_loss": model_info.get("dev", {}).get("token_loss"),
                  "dev_unigram_loss": model_info.get("dev", {}).get("unigram_loss"),
                  "dev_length_accuracy": model_info.get("dev", {}).get("length_acc"),
                  "dev_bleu_mask_predict": (model_info.get("dev_bleu_mask_predict") or {}).get("bleu"),
                  "test_bleu_mask_predict": (model_info.get("test_bleu_mask_predict") or {}).get("bleu"),
                  "length_scale": model_info.get("length_scale"),      # of that BLEU; the chains use the model's lengths
                  "curve": model_info.get("curve"),
                  "n_train": len(task.train), **task.sizes},
        "settings": {"chains": cfg.chains, "burn_in": cfg.burn_in, "sweeps": cfg.sweeps,
                     "sentences": len(sets["short"]), "max_source_len": cfg.data.max_source_words,
                     "full_sentences": len(sets["full"]), "test_sentences": len(test),
                     "distinct_runs": len(unique), "shards": len(specs), "base_seed": ctx.base.seed},
        "runs": out_runs,
        "baselines": baselines["full"],
        "baselines_short": baselines["short"],
        "labels": labels(cfg),
        "sampling_minutes": (time.perf_counter() - t0) / 60.0,
    }
    ctx.tracker.log_metrics({f"{r['name']}.{k}": r[k] for r in out_runs for k in ("e_norm", "accept", "novel", "bleu")
                             if isinstance(r.get(k), (int, float))})
    return metrics


if __name__ == "__main__":
    main("mcmc")
