"""``normalisation`` stage: local vs global normalisation under search-aware training (Goyal, Dyer &
Berg-Kirkpatrick 2019; thesis ch. 5), on tagging and on Greek->English translation; its report is the
stage ``report_goyal_2019`` (``reports/goyal_2019``), which reads what this stage writes.

Two Ray Tune grids, one trial per configuration (both cores busy):

1. ``pretrain``: the initialisers — for tagging, per encoder (``lstm``: the decoder sees the input
   up to position i only, label bias from partial input; ``blstm``: all of it) x init (``regular``:
   teacher-forced CE; ``self_normalised``: CE + lambda (log Z_L,t)^2) x seed; for translation, per
   init x seed, plus the thesis Table 3.1 MT rows (scheduled sampling variants), each a fine-tuning
   of the ``translator`` stage's model (trained for small data; a translator trained from scratch
   on a subsample never got past BLEU 2 here) with its objective.
   Each is decoded greedily (``pretrain_greedy``) and by hard beam (``pretrain_beam``); log Z's
   mean and variance on train and dev are measured (Table 1).
2. ``search``: per part x encoder x init x normalisation (``local``: log-softmax scores;
   ``global``: the same network's raw scores) x seed, the search-aware relaxed-beam objective
   (G~_DL through the soft beam, decomposable Hamming cost) fine-tunes the initialiser of its init
   and seed; decoded by soft beam with hard backpointers (the paper's decoding), also by hard beam.

Inside a trial (``flows.tuning.tune_in_trial``) a seeded Optuna study tunes the part's ``space`` (grid 1) or ``search_space``
(grid 2: learning rate, alpha annealing) on dev for ``trials`` trainings, with early stopping on
dev (greedy for the initialisers, hard beam for search-aware training). Translation dev scores are
on ``translation.max_dev_pairs`` verses while training; every reported score uses the whole
split.

Outputs: ``models/normalisation/`` (per part: the best seed's model of each row with its decoded
outputs; the subword vocabularies), ``metrics/stats/normalisation/`` (every scored system's
per-sentence statistics, ``[seeds, n, d]`` with several seeds: ``tagging.npz`` / ``translation.npz``
on test, ``translation_dev.npz`` on dev, ``tagging_log_z.npz`` / ``translation_log_z.npz`` each
initialiser's per-sentence log Z on dev, ``translation_dev_source_length.npz``; the findings' input),
``metrics/normalisation.json`` (the report's input, see ``components.reports.goyal_2019``) and
``plots/normalisation/<part>.json`` (training curves).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.config import (BaseConfig, ConfigError, ResourcesConfig, check_range, from_dict, load_section,
                               resolve_device)
from components.data.tasks import load_tagging_task
from components.data.translation import load_translation_task
from components.inference.evaluate_decoding import evaluate_decoding
from components.inference.evaluate_translation import evaluate_translation
from components.inference.registry import INFERENCE
from components.io import npz_bytes, write_json
from components.metrics.bleu import bleu_by_source_length, corpus_bleu
from components.metrics.sentence_stats import BLEU_COLUMNS, save_stats
from components.metrics.tagging import stats_columns
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.models.translator import AttentionTranslator, TranslatorConfig
from components.recipes import recipe
from components.seeds import seed_for
from components.training.loop import TrainConfig, fit
from components.training.normalisation import LOG_Z_COLUMNS, centre_log_z, log_z_sentence_stats, log_z_stats
from components.training.registry import OBJECTIVES
from flows.lifecycle import work_dir
from flows.ray_runtime import copy_checkpoint, report_final, tensor_bytes
from flows.search_space import check_sweep_space, with_values
from flows.stages.common import StageContext, main
from flows.translation_configs import TranslatorStageConfig
from flows.tuning import run_grid, tune_in_trial

INITS = ("regular", "self_normalised")
NORMALISATIONS = ("local", "global")
PRETRAIN_OBJECTIVE = {"regular": "seq_ce", "self_normalised": "self_normalised_ce"}
LOG_Z_TRAIN_SENTENCES = 1000          # log Z on train: the first (seeded-subsample) sentences


@dataclass(frozen=True)
class SearchConfig:
    objective: str = "beam_dl"                            # a step objective through the soft beam
    config: dict[str, Any] = field(default_factory=lambda: {"alpha": {"init": 1.0, "anneal": 4.0}})


@dataclass(frozen=True)
class TaggingPart:
    task: str = "greek_morph_k400"      # Greek morphology (top-400 tags) for CCG supertagging
    encoders: tuple[str, ...] = ("lstm", "blstm")   # unidirectional (partial input: label bias) vs bidirectional
    beam_size: int = 5
    lam: float = 0.1                    # self-normalisation: CE + lam (log Z_L,t)^2 (1.0 stalls the zero-init tagger)
    max_train_sentences: int = 800      # default scale: a seeded subsample (0 = all)
    max_dev_sentences: int = 300
    model: Seq2SeqTaggerConfig = Seq2SeqTaggerConfig(label_dim=16, encoder="lstm", init="zeros")
    optim: TrainConfig = TrainConfig(lr=0.01, epochs=15, patience=4, batch_size=64)
    finetune: TrainConfig = TrainConfig(lr=0.001, epochs=2, patience=2, batch_size=64)
    # Optuna spaces in dotted params keys: the initialisers' (``space``) and the search-aware
    # fine-tuning's (``search_space``, e.g. ``normalisation.tagging.finetune.lr``,
    # ``normalisation.search.config.alpha.anneal``); empty: the settings as written
    space: dict[str, dict[str, Any]] = field(default_factory=dict)
    search_space: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        check_range(self, positive=("beam_size",), nonnegative=("lam", "max_train_sentences", "max_dev_sentences"))


@dataclass(frozen=True)
class SSVariant:
    objective: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TranslationPart:
    """Greek -> English: every translation row starts from the ``translator`` stage's model (its
    architecture, vocabularies and weights; trained for small data), which the initialisers
    fine-tune with their objective (``optim``) and search-aware training fine-tunes further
    (``finetune``)."""
    enabled: bool = True
    translator_dir: str = "models/translator"
    beam_size: int = 3
    lam: float = 0.1                    # self-normalisation's lambda (1.0 stalls the translator in the first epochs)
    # the default scale fine-tunes on a seeded 300 of the training verses (the soft beam's k = 3 items
    # make search-aware training ~5x a CE epoch): the initialisers for one epoch, search-aware training
    # for four, so that alpha anneals 1, 4, 16, 64 toward the hard beam the paper decodes with (after one
    # epoch the kept model was decoded at alpha 1, where the soft beam mixes its items: dev BLEU 3.3
    # against 6.3 by the hard beam), at lr 1e-4 (5e-4 took dev BLEU from 6.6 to 0.3-3.8 in three
    # epochs; 2026-11-27 probes on 300-400 verses). scales/paper.yaml fine-tunes on every verse
    max_train_pairs: int = 300          # fine-tuning pairs: a seeded subsample (0 = all)
    max_dev_pairs: int = 150            # dev verses scored while fine-tuning (every reported score: the whole split)
    optim: TrainConfig = TrainConfig(lr=0.0005, epochs=1, patience=1, batch_size=32)     # the initialisers' fine-tuning
    finetune: TrainConfig = TrainConfig(lr=0.0001, epochs=4, patience=4, batch_size=32)  # search-aware fine-tuning
    space: dict[str, dict[str, Any]] = field(default_factory=dict)          # as in TaggingPart
    search_space: dict[str, dict[str, Any]] = field(default_factory=dict)
    examples: int = 6                   # test verses shown with every system's translation in the report
    ss: dict[str, SSVariant] = field(default_factory=dict)
    min_bleu: float = 5.0             # a row below this dev BLEU is marked "did not train" (no verdicts on noise)
    # self-normalisation starts from the CE translator with its raw scores shifted so that their mean
    # log Z is 0 (components.training.normalisation.centre_log_z; the softmax is unchanged): without the
    # shift one epoch of lambda (log Z)^2 took the mean log Z from 11.8 only to 8.4 and dev BLEU from
    # 6.7 to 3.3 (2026-11-27), as Adam moves the output bias, the one parameter that shifts log Z
    # exactly, by ~lr per update
    centre_log_z: bool = True

    def __post_init__(self):
        check_range(self, positive=("beam_size",), nonnegative=("lam", "examples", "max_train_pairs", "max_dev_pairs"),
                    within={"min_bleu": "[0, 100]"})


@dataclass(frozen=True)
class NormalisationConfig:
    seeds: tuple[int, ...] = (0,)       # replicate indices (components.seeds names them), not seeds
    trials: int = 1                     # Optuna trainings per trial over its space (default: the settings as written)
    max_concurrent: int = 2
    resources: ResourcesConfig = ResourcesConfig()
    eval_batch_size: int = 64
    decode_alpha: float = 10.0
    models_dir: str = "models/normalisation"
    plots_dir: str = "plots/normalisation"
    search: SearchConfig = SearchConfig()
    tagging: TaggingPart = TaggingPart()
    translation: TranslationPart = TranslationPart()

    def __post_init__(self):
        check_range(self, positive=("max_concurrent", "eval_batch_size", "decode_alpha"),
                    nonnegative=("seeds",))


# -- configuration -----------------------------------------------------------------------------------
def load_config(params: dict[str, Any]) -> NormalisationConfig:
    """The section, strictly; every objective, config, space and scheduled-sampling variant is
    checked before Ray starts (a ``ConfigError`` naming the key)."""
    cfg = load_section(NormalisationConfig, "normalisation", params)
    where = "normalisation"
    if not cfg.seeds:
        raise ConfigError(f"{where}.seeds: at least one seed")
    if cfg.trials < 1:
        raise ConfigError(f"{where}.trials must be >= 1, got {cfg.trials}")
    s = cfg.search
    if s.objective not in OBJECTIVES or OBJECTIVES[s.objective].meta.get("feed") != "soft beam":
        beams = [n for n, e in OBJECTIVES.items() if e.meta.get("feed") == "soft beam"]
        raise ConfigError(f"{where}.search.objective: {s.objective!r} is not a relaxed-beam objective; one of {beams}")
    OBJECTIVES.config(s.objective, s.config, where=f"{where}.search.config")
    t = cfg.tagging
    bad = [e for e in t.encoders if e not in ("lstm", "blstm")]
    if bad or not t.encoders:
        raise ConfigError(f"{where}.tagging.encoders: {list(t.encoders)} must be a non-empty list of lstm, blstm")
    for part, p in (("tagging", t), ("translation", cfg.translation)):
        if p.beam_size < 1:
            raise ConfigError(f"{where}.{part}.beam_size must be >= 1, got {p.beam_size}")
        OBJECTIVES.config("self_normalised_ce", {"lam": p.lam}, where=f"{where}.{part}.lam")
    ss = {}
    for name, v in cfg.translation.ss.items():
        w = f"{where}.translation.ss.{name}"
        v = v if isinstance(v, SSVariant) else from_dict(SSVariant, v, where=w)
        if v.objective not in OBJECTIVES or OBJECTIVES[v.objective].meta["structure"] != "steps" \
                or OBJECTIVES[v.objective].meta["feed"] == "soft beam":
            raise ConfigError(f"{w}.objective: {v.objective!r} is not a teacher-forced or scheduled-sampling step objective")
        OBJECTIVES.config(v.objective, v.config, where=f"{w}.config")
        ss[name] = v
    if "ce" in ss or any(n in INITS for n in ss):
        raise ConfigError(f"{where}.translation.ss: names 'ce', {INITS} are reserved")
    return dataclasses.replace(cfg, translation=dataclasses.replace(cfg.translation, ss=ss))


# -- the two parts: what differs between tagging and translation -----------------------------------
class _Tagging:
    """Greek morphology with the fixed-attention, zero-init seq2seq tagger."""
    name = "tagging"

    def __init__(self, cfg: NormalisationConfig, root: Path, base: BaseConfig, encoder: str, device: str):
        self.p, self.encoder, self.device, self.cfg = cfg.tagging, encoder, device, cfg
        self.task = load_tagging_task(root / base.prepared_dir / self.p.task,
                                      max_train_sentences=self.p.max_train_sentences,
                                      seed=seed_for(base.seed, "data", self.p.task, "train_subsample"))
        dev = self.task.dev
        self.dev_tuning = dev.subset(np.arange(min(len(dev), self.p.max_dev_sentences))) if self.p.max_dev_sentences else dev
        self.labels = self.task.vocabs["label"]
        self.model_cfg = dataclasses.replace(self.p.model, encoder=encoder)
        self.splits = {"train": self.task.train, "dev": self.task.dev, "test": self.task.test}

    def build(self, normalisation: str, seed: int) -> Seq2SeqTagger:
        t = self.task
        return Seq2SeqTagger(dataclasses.replace(self.model_cfg, normalisation=normalisation), **t.sizes,
                             glove_ids=t.glove_ids, glove_vectors=t.glove_vectors, seed=seed).to(self.device)

    def recipe(self, normalisation: str) -> dict[str, Any]:
        return recipe("seq2seq", "seq2seq", dataclasses.replace(self.model_cfg, normalisation=normalisation),
                      self.task.sizes)

    def evaluate(self, model, method, split: str, tuning: bool = False) -> dict[str, Any]:
        """The split's metrics; on a whole split (not ``tuning``) also ``stats``: the metric's
        per-sentence sufficient statistics (the paired bootstrap's input)."""
        ds = self.dev_tuning if tuning else self.splits[split]
        if tuning:
            return evaluate_decoding(model, method, ds, self.labels, self.task.metric,
                                     batch_size=self.cfg.eval_batch_size, device=self.device)
        out, inst = evaluate_decoding(model, method, ds, self.labels, self.task.metric,
                                      batch_size=self.cfg.eval_batch_size, device=self.device, instances=True)
        return {**out, "stats": inst["stats"]}


class _Translation:
    """Greek -> English verses with the translator stage's Bahdanau-attention encoder-decoder; BLEU."""
    name = "translation"

    def __init__(self, cfg: NormalisationConfig, root: Path, base: BaseConfig, encoder: str, device: str,
                 params: dict[str, Any]):
        self.p, self.encoder, self.device, self.cfg = cfg.translation, encoder, device, cfg
        self.translator = root / self.p.translator_dir
        self.task = translation_task(params, root, base, self.p, vocab_dir(work_dir(root, "normalisation")))
        dev = self.task.dev
        n = self.p.max_dev_pairs
        self.dev_tuning = dev.subset(np.arange(min(len(dev), n))) if n else dev
        self.splits = {"train": self.task.train, "dev": self.task.dev, "test": self.task.test}
        self.rec = translator_recipe_of(self.translator)

    def model_config(self, normalisation: str) -> TranslatorConfig:
        return dataclasses.replace(from_dict(TranslatorConfig, self.rec["config"], where=f"{self.translator}/model.json"),
                                   normalisation=normalisation)

    def build(self, normalisation: str, seed: int) -> AttentionTranslator:
        """The translator's network read as ``normalisation``, with the translator's weights."""
        t = self.task
        model = AttentionTranslator(self.model_config(normalisation), len(t.src_vocab), len(t.tgt_vocab),
                                    eos=t.tgt_vocab.eos, pad=t.tgt_vocab.pad, seed=seed)
        model.load_state_dict(torch.load(self.translator / "model.pt", map_location="cpu", weights_only=True))
        return model.to(self.device)

    def recipe(self, normalisation: str) -> dict[str, Any]:
        return recipe("translator", "attention", self.model_config(normalisation), self.rec["sizes"]) | {
            "vocabularies": ["vocab/src.model", "vocab/tgt.model"]}

    def evaluate(self, model, method, split: str, tuning: bool = False) -> dict[str, Any]:
        ds = self.dev_tuning if tuning else self.splits[split]
        return evaluate_translation(model, method, ds, self.task.tgt_vocab, batch_size=self.cfg.eval_batch_size,
                                    device=self.device)


def translator_recipe_of(folder: Path) -> dict[str, Any]:
    meta = folder / "model.json"
    if not meta.exists():
        raise FileNotFoundError(f"{meta}: no translator (run the translator stage: dvc repro translator)")
    rec = json.loads(meta.read_text()).get("recipe") or {}
    if rec.get("kind") != "translator":
        raise ConfigError(f"{meta}: not a translator's recipe (kind {rec.get('kind')!r})")
    return rec


def translation_task(params: dict[str, Any], root: Path, base: BaseConfig, p: TranslationPart, vocab: Path):
    """The translator's task (its data settings and vocabularies, copied to ``vocab``) with this
    part's subsample of training pairs; the whole dev and test splits."""
    translator_recipe_of(root / p.translator_dir)                 # a clear error when there is no translator
    data = dataclasses.replace(load_section(TranslatorStageConfig, "translator", params).data,
                               max_train_pairs=p.max_train_pairs, max_dev_pairs=0)
    src = root / p.translator_dir / "vocab"
    if not vocab.exists():
        copy_checkpoint(src, vocab)
    task = load_translation_task(root / base.prepared_dir / "greek_english", vocab, data,
                                 seed=seed_for(base.seed, "normalisation", "data"),
                                 vocab_seed=seed_for(base.seed, "translator", "data"))     # the translator's
    if task.stats.get("vocab_trained"):
        raise RuntimeError(f"normalisation: the vocabularies in {src} do not match translator.data: re-run the "
                           "translator stage")
    return task


def vocab_dir(models: Path) -> Path:
    """The subword vocabularies: in the stage's working folder during the run (``models`` =
    ``work_dir``), beside the models at its end."""
    return models / "translation" / "vocab"


def _part(name: str, cfg: NormalisationConfig, root: Path, base: BaseConfig, encoder: str, device: str,
          params: dict[str, Any]) -> _Tagging | _Translation:
    if name == "tagging":
        return _Tagging(cfg, root, base, encoder, device)
    return _Translation(cfg, root, base, encoder, device, params)


def check_config(params: dict[str, Any]) -> NormalisationConfig:
    """:func:`load_config`, and every Optuna space: each key a setting of the section, every value
    it can take valid (before Ray starts)."""
    cfg = load_config(params)
    for part in ("tagging", "translation"):
        for key in ("space", "search_space"):
            check_sweep_space(getattr(getattr(cfg, part), key), params, "normalisation", load_config,
                              where=f"normalisation.{part}.{key}")
    return cfg


def _warm(models: Path, part: str, encoder: str, init: str, seed: int) -> Path:
    """Where the initialiser of (part, encoder, init, seed) waits for the search-aware trials: in the
    stage's working folder during the run, beside the models at its end."""
    return models / part / "warm_start" / f"{encoder}.{init}.seed{seed}"


# -- one trial ----------------------------------------------------------------------------------------
def trial(config: dict[str, Any], *, params: dict[str, Any], root: str) -> None:
    """Ray Tune function trainable over ``config["run"]``: {grid: pretrain | search, part, encoder,
    row (regular | self_normalised | an ss variant; the init for grid search), normalisation, seed
    (the replicate index)}. Seeds (``components.seeds``): the model's initialisation and the batch
    order are named by (part, encoder, replicate) — every row of a replicate starts alike (paired
    comparisons) — the objective's sampling and the Optuna study by the row too."""
    run = config["run"]
    grid, part_name, encoder, row, rep = run["grid"], run["part"], run["encoder"], run["row"], int(run["seed"])
    norm = run.get("normalisation", "local")
    base = load_section(BaseConfig, "base", params)
    cfg = load_config(params)
    name = ("normalisation", part_name, encoder, f"replicate{rep}")
    model_seed = seed_for(base.seed, *name, "model")
    device = resolve_device(base.device)
    rootp = Path(root)
    part = _part(part_name, cfg, rootp, base, encoder, device, params)
    p = part.p
    k = p.beam_size
    train_ds = part.task.train

    def objective_of(c: NormalisationConfig) -> tuple[str, dict[str, Any], TrainConfig]:
        pc = getattr(c, part_name)
        if grid == "search":
            return c.search.objective, c.search.config, pc.finetune
        if row in INITS:
            return PRETRAIN_OBJECTIVE[row], ({"lam": pc.lam} if row == "self_normalised" else {}), pc.optim
        return pc.ss[row].objective, pc.ss[row].config, pc.optim

    objective_name, _, optim = objective_of(cfg)
    space = p.search_space if grid == "search" else p.space
    greedy_dec = INFERENCE.build_with("greedy", {"k": k})

    def tune_on(objective):
        """The dev decoder that picks the kept epoch: greedy for the initialisers; for search-aware
        training the decoder its row reports, the soft beam at the epoch's alpha (the hard beam picked
        epochs whose soft decode was ~half as good: at alpha 1 the soft beam mixes its items' states)."""
        if grid != "search":
            return greedy_dec
        return INFERENCE.build_with("soft_beam", {"k": k, "alpha": objective.alpha_at(objective.epoch) or cfg.decode_alpha})
    if grid == "search":
        warm = _warm(work_dir(rootp, "normalisation"), part_name, encoder, row, rep) / "model.pt"
        if not warm.exists():
            raise FileNotFoundError(f"{warm}: the initialiser this trial starts from (grid 'pretrain' runs first)")
    n_batches = -(-len(train_ds) // optim.batch_size)

    def build():
        model = part.build(norm, model_seed)
        if grid == "search":
            model.load_state_dict(torch.load(warm, map_location="cpu", weights_only=True))
        return model

    centred: dict[str, float] = {}          # centre_log_z's shift, when the row starts with one
    log_z_train = train_ds.subset(np.arange(min(len(train_ds), LOG_Z_TRAIN_SENTENCES)))

    def train(values: dict[str, Any], report, on_batch):
        obj_name, obj_cfg, tcfg = objective_of(load_config(with_values(params, values)))
        torch.manual_seed(model_seed)
        objective = OBJECTIVES.build(obj_name, obj_cfg, updates_per_epoch=n_batches, k=k,
                                     seed=seed_for(base.seed, *name, grid, row, norm, "objective"))
        model = build()
        if grid == "pretrain" and row == "self_normalised" and isinstance(p, TranslationPart) and p.centre_log_z:
            centred.update(centre_log_z(model, log_z_train.batches(cfg.eval_batch_size, device=device)))
        state = fit(model, objective,
                    lambda epoch: train_ds.batches(tcfg.batch_size, shuffle=True, device=device,
                                                   seed=seed_for(base.seed, *name, "batches", epoch)),
                    n_batches, lambda m: {"score": part.evaluate(m, tune_on(objective), "dev", tuning=True)["score"]}, tcfg,
                    on_epoch=lambda s, r: report(r), on_batch=on_batch)
        return state.best_score, {"state": state, "objective": objective,
                                  "weights": {n: t.detach().cpu().clone() for n, t in model.state_dict().items()}}

    label = f"{grid}:{part_name}/{encoder}/{row}" + (f"/{norm}" if grid == "search" else "")
    best = tune_in_trial(label, space, cfg.trials, seed_for(base.seed, *name, grid, row, norm, "tpe"), train)
    state, objective = best.kept["state"], best.kept["objective"]
    model = build()
    model.load_state_dict(best.kept["weights"])
    model.eval()
    decodings = ("greedy", "beam") if grid == "pretrain" else ("soft_beam",)
    # the soft beam decodes a model trained through it with the alpha of its kept epoch
    alpha = (objective.alpha_at(state.best_epoch) if grid == "search" else None) or cfg.decode_alpha
    scores: dict[str, dict[str, float]] = {"dev": {}, "test": {}}
    outputs: dict[str, dict[str, list[str]]] = {"dev": {}, "test": {}}
    stats: dict[str, np.ndarray] = {}       # "<split>/<decoding>" -> per-sentence statistics; "log_z/dev"
    with torch.no_grad():
        for split in ("dev", "test"):
            for d in decodings:
                res = part.evaluate(model, INFERENCE.build_with(d, {"k": k, "alpha": alpha}), split)
                scores[split][d] = float(res["score"])
                stats[f"{split}/{d}"] = np.asarray(res["stats"], dtype=np.float64)
                if "hypotheses" in res:
                    outputs[split][d] = res["hypotheses"]
        log_z = {}
        if grid == "pretrain" and row in INITS:
            for split, ds in (("train", log_z_train), ("dev", part.splits["dev"])):
                st = log_z_stats(model, ds.batches(cfg.eval_batch_size, device=device))
                log_z[f"{split}_mean"], log_z[f"{split}_var"] = st["mean"], st["var"]
            dev = part.splits["dev"]
            stats["log_z/dev"] = log_z_sentence_stats(model, dev.batches(cfg.eval_batch_size, device=device), len(dev))
    meta = {"run": run, "objective": objective_name, "config": dataclasses.asdict(objective.cfg),
            "tuned": best.values, "recipe": part.recipe(norm), "history": state.history, "scores": scores,
            "beam_size": k, "decode_alpha": alpha, "log_z": log_z,
            "centred_log_z": centred or None}
    files: dict[str, str | bytes] = {"model.pt": tensor_bytes(best.kept["weights"]),
                                     "model.json": json.dumps(meta, indent=2, default=str)}
    if any(outputs.values()):
        files["decoded.json"] = json.dumps(outputs, ensure_ascii=False)
    files["stats.npz"] = npz_bytes(stats)
    report_final({"best_dev_score": best.score, "best_epoch": float(state.best_epoch),
                  "epochs_run": float(state.epoch),
                  "seconds_per_epoch": float(np.mean(state.seconds)) if state.seconds else 0.0,
                  "tuning_seconds": best.seconds, **{f"logz_{k_}": v for k_, v in log_z.items()},
                  **{f"{split}_{d}": sc for split in scores for d, sc in scores[split].items()}}, files)


def _trial_stats(run: dict[str, Any]) -> dict[str, np.ndarray]:
    """A trial's per-sentence statistics (``stats.npz`` in its checkpoint): "<split>/<decoding>", "log_z/dev"."""
    with np.load(Path(run["checkpoint"]) / "stats.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _over_seeds(runs: list[dict[str, Any]], key: str) -> np.ndarray:
    """``key``'s statistics of each seed's run, ``[n, d]`` for one seed, ``[seeds, n, d]`` for several
    (in the order of ``normalisation.seeds``: paired by replicate across systems)."""
    runs = sorted(runs, key=lambda r: int(r["run"]["seed"]))
    arrays = [_trial_stats(r)[key] for r in runs]
    return arrays[0] if len(arrays) == 1 else np.stack(arrays)


_DECODING = {"pretrain_greedy": "greedy", "pretrain_beam": "beam", "local": "soft_beam", "global": "soft_beam"}


def _bucket_key(label: str) -> str:
    """A source-length bucket's key in the metrics, as MLflow accepts it: the label of
    :func:`components.metrics.bleu.bleu_by_source_length` with ``+`` spelled out ("40+" -> "40-inf")."""
    return label.replace("+", "-inf")


def _save_part_stats(stats_dir: Path, part: str, encoders: list[str], pre, search, columns: tuple[str, ...],
                     ss: Any = (), splits: tuple[str, ...] = ("test",)) -> None:
    """Every system's per-sentence statistics of ``part``: ``<part>.npz`` (test; ``<part>_dev.npz`` for
    dev when asked), systems "<encoder>/<init>/<row>" (tagging) or "<init>/<row>" (translation: one
    encoder) and, for scheduled sampling, "ss/<variant>" (greedy decoding); and ``<part>_log_z.npz``:
    each initialiser's per-sentence log Z on dev, "<encoder>/<init>" ("<init>")."""
    named = (lambda enc, rest: f"{enc}/{rest}") if part == "tagging" else (lambda enc, rest: rest)
    for split in splits:
        systems: dict[str, np.ndarray] = {}
        for enc in encoders:
            for init in INITS:
                p_runs = _select(pre, part=part, encoder=enc, row=init)
                for row in ("pretrain_greedy", "pretrain_beam"):
                    systems[named(enc, f"{init}/{row}")] = _over_seeds(p_runs, f"{split}/{_DECODING[row]}")
                for norm in NORMALISATIONS:
                    s_runs = _select(search, part=part, encoder=enc, row=init, normalisation=norm)
                    systems[named(enc, f"{init}/{norm}")] = _over_seeds(s_runs, f"{split}/soft_beam")
        for name in ss:
            systems[f"ss/{name}"] = _over_seeds(_select(pre, part=part, row=name), f"{split}/greedy")
        save_stats(stats_dir / (f"{part}.npz" if split == "test" else f"{part}_{split}.npz"), systems, columns)
    log_z = {named(enc, init): _over_seeds(_select(pre, part=part, encoder=enc, row=init), "log_z/dev")
             for enc in encoders for init in INITS}
    save_stats(stats_dir / f"{part}_log_z.npz", log_z, LOG_Z_COLUMNS)


# -- the stage ---------------------------------------------------------------------------------------
def _grids(cfg: NormalisationConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    parts = [("tagging", e) for e in cfg.tagging.encoders]
    if cfg.translation.enabled:
        parts.append(("translation", "bilstm_attention"))
    pre, search = [], []
    for part, enc in parts:
        rows = list(INITS) + (list(cfg.translation.ss) if part == "translation" else [])
        pre += [{"grid": "pretrain", "part": part, "encoder": enc, "row": r, "seed": s} for r in rows for s in cfg.seeds]
        search += [{"grid": "search", "part": part, "encoder": enc, "row": init, "normalisation": n, "seed": s}
                   for init in INITS for n in NORMALISATIONS for s in cfg.seeds]
    return pre, search


def _summary(runs: list[dict[str, Any]], key: str, floor: float = 0.0) -> dict[str, Any]:
    """Mean / std over seeds of metric ``split_decoding`` for dev and test; ``failed`` when the dev
    score is at most ``floor`` (a model that did not learn enough for its numbers to mean anything)."""
    out: dict[str, Any] = {"seeds": len(runs)}
    for split in ("dev", "test"):
        vals = [r["metrics"][f"{split}_{key}"] for r in runs]
        out[split], out[f"{split}_std"] = float(np.mean(vals)), float(np.std(vals))
    out["failed"] = bool(out["dev"] <= floor)
    out["failure"] = (f"dev score {out['dev']:.2f} is below {floor:g}: the model did not learn enough to compare"
                      if out["failed"] else "")
    return out


def _translator_summary(ctx: StageContext, p: TranslationPart) -> dict[str, Any]:
    """What the report says of the translator every translation row starts from: its settings (from
    its recipe), dev / test BLEU and learning curve (``metrics/translator.json``; ``{}`` parts when absent)."""
    rec = translator_recipe_of(ctx.path(p.translator_dir))
    path = ctx.path("metrics") / "translator.json"
    t = json.loads(path.read_text()) if path.exists() else {}
    c = rec["config"]
    settings = (f"{c['embedding_dim']}-dim embeddings, {c['hidden']} hidden units, dropout {c['dropout']:g}, word "
                f"dropout {c.get('word_dropout', 0):g}, output dropout {c.get('output_dropout', 0):g}, "
                f"{'tied' if c.get('tie_embeddings') else 'untied'} target embeddings, "
                f"{rec['sizes']['n_src']} / {rec['sizes']['n_tgt']} source / target subwords")
    return {"settings": settings, **{k: t.get(k) for k in ("dev", "test", "best_epoch", "epochs", "curve", "beam_size",
                                                            "length_penalty", "dev_bleu_by_length_penalty",
                                                            "min_bleu", "n_train")}}


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return runs[int(np.argmax([r["metrics"]["best_dev_score"] for r in runs]))]


def _log_z(runs: list[dict[str, Any]], floor: float = 0.0) -> dict[str, Any]:
    keys = ("train_mean", "train_var", "dev_mean", "dev_var")
    out: dict[str, Any] = {k: float(np.mean([r["metrics"][f"logz_{k}"] for r in runs])) for k in keys}
    out["dev_score"] = float(np.mean([r["metrics"]["dev_beam"] for r in runs]))
    out["failed"] = bool(out["dev_score"] <= floor)
    return out


def _select(runs, **match) -> list[dict[str, Any]]:
    return [r for r in runs if all(r["run"].get(k) == v for k, v in match.items())]


def _decoded(run: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    return json.loads((Path(run["checkpoint"]) / "decoded.json").read_text())


def _part_metrics(cfg: NormalisationConfig, part: str, encoders: list[str], pre, search, models: Path,
                  curves: dict[str, Any], floor: float = 0.0) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    log_z: dict[str, Any] = {}
    best_runs: dict[str, dict[str, Any]] = {}          # "<encoder>/<init>/<row>" -> the best seed's run
    for enc in encoders:
        rows[enc], log_z[enc] = {}, {}
        for init in INITS:
            p_runs = _select(pre, part=part, encoder=enc, row=init)
            r = {"pretrain_greedy": _summary(p_runs, "greedy", floor), "pretrain_beam": _summary(p_runs, "beam", floor)}
            log_z[enc][init] = _log_z(p_runs, floor)
            best_runs[f"{enc}/{init}/pretrain_greedy"] = best_runs[f"{enc}/{init}/pretrain_beam"] = _best(p_runs)
            for norm in NORMALISATIONS:
                s_runs = _select(search, part=part, encoder=enc, row=init, normalisation=norm)
                r[norm] = _summary(s_runs, "soft_beam", floor)
                best_runs[f"{enc}/{init}/{norm}"] = _best(s_runs)
            rows[enc][init] = r
    for key, run in best_runs.items():
        enc, init, row = key.split("/")
        if row == "pretrain_beam":
            continue
        name = "pretrain" if row == "pretrain_greedy" else row
        copy_checkpoint(Path(run["checkpoint"]), models / part / enc / init / name)
        meta = json.loads((Path(run["checkpoint"]) / "model.json").read_text())
        curves[f"{enc}/{init}/{name}"] = [{"epoch": h["epoch"], "train_loss": h["train_loss"], "dev_score": h["dev_score"]}
                                          for h in meta["history"]]
    return {"rows": rows, "log_z": log_z, "_best": best_runs}


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = check_config(params)
    prepared = ctx.path(ctx.base.prepared_dir)
    if not (prepared / cfg.tagging.task / "meta.json").exists():
        raise FileNotFoundError(f"normalisation.tagging.task: task {cfg.tagging.task!r} has not been prepared "
                                f"(is it under prepare.tasks in params.yaml?)")
    models = ctx.path(cfg.models_dir)
    mt = None
    if cfg.translation.enabled:                       # the subword vocabularies, once, before the trials
        vocab = vocab_dir(ctx.work)
        if vocab.exists():
            shutil.rmtree(vocab)                      # a fresh copy of the translator's
        mt = translation_task(params, ctx.root, ctx.base, cfg.translation, vocab)   # as the trials
    pre_grid, search_grid = _grids(cfg)
    pre = run_grid(ctx, params, trial, "pretrain", pre_grid, max_concurrent=cfg.max_concurrent, resources=cfg.resources)
    warm = [r["run"] for r in pre if r["run"]["row"] in INITS]
    for r in pre:
        if r["run"]["row"] in INITS:
            run_ = r["run"]
            copy_checkpoint(Path(r["checkpoint"]), _warm(ctx.work, run_["part"], run_["encoder"], run_["row"], run_["seed"]))
    search = run_grid(ctx, params, trial, "search", search_grid, max_concurrent=cfg.max_concurrent,
                      resources=cfg.resources)
    for w in warm:                                    # every grid finished: what the trials started from joins the models
        key = (w["part"], w["encoder"], w["row"], w["seed"])
        copy_checkpoint(_warm(ctx.work, *key), _warm(models, *key))
    if mt is not None:
        copy_checkpoint(vocab_dir(ctx.work), vocab_dir(models))

    metrics: dict[str, Any] = {}
    curves: dict[str, dict[str, Any]] = {"tagging": {}, "translation": {}}
    t = load_tagging_task(prepared / cfg.tagging.task, max_train_sentences=cfg.tagging.max_train_sentences,
                          seed=seed_for(ctx.base.seed, "data", cfg.tagging.task, "train_subsample"))
    tag = _part_metrics(cfg, "tagging", list(cfg.tagging.encoders), pre, search, models, curves["tagging"])
    tag.pop("_best")
    stats_dir = ctx.path("metrics") / "stats" / "normalisation"
    if stats_dir.exists():
        shutil.rmtree(stats_dir)                      # this run's systems only
    _save_part_stats(stats_dir, "tagging", list(cfg.tagging.encoders), pre, search, stats_columns(t.metric))
    metrics["tagging"] = {"task": cfg.tagging.task, "metric": t.metric, "n_labels": len(t.vocabs["label"]),
                          "top_k_labels": int(t.meta.get("top_k_labels", 0)), "beam_size": cfg.tagging.beam_size,
                          "n_train": len(t.train), "seeds": len(cfg.seeds), **tag}
    if mt is not None:
        enc = "bilstm_attention"
        floor = cfg.translation.min_bleu
        tr = _part_metrics(cfg, "translation", [enc], pre, search, models, curves["translation"], floor)
        best = tr.pop("_best")
        _save_part_stats(stats_dir, "translation", [enc], pre, search, BLEU_COLUMNS, ss=list(cfg.translation.ss),
                         splits=("test", "dev"))
        save_stats(stats_dir / "translation_dev_source_length.npz",      # Table 6's buckets
                   {"source": np.asarray(mt.dev.src_lengths, dtype=np.float64)[:, None]}, ("source_tokens",))
        ss = {"ce": _summary(_select(pre, part="translation", row="regular"), "greedy", floor)}
        for name in cfg.translation.ss:
            runs = _select(pre, part="translation", row=name)
            ss[name] = _summary(runs, "greedy", floor)
            copy_checkpoint(Path(_best(runs)["checkpoint"]), models / "translation" / "ss" / name)
        outputs = {f"{init}/{row}": _decoded(best[f"{enc}/{init}/{row}"])
                   for init in INITS for row in ("pretrain_greedy", "pretrain_beam", "local", "global")}

        def hyps(key: str, split: str) -> list[str]:
            init, row = key.split("/")
            dec = {"pretrain_greedy": "greedy", "pretrain_beam": "beam"}.get(row, "soft_beam")
            return outputs[key][split][dec]

        refs_dev = mt.dev.references
        breakdown, by_length = {}, {}
        for row in ("pretrain_beam", "local", "global"):
            h = hyps(f"self_normalised/{row}", "dev")
            b = corpus_bleu(h, refs_dev)
            breakdown[row] = {"bleu": b.score, "precisions": list(b.precisions), "bp": b.bp, "ratio": b.ratio}
            by_length[row] = {_bucket_key(k_): v["bleu"] for k_, v in           # keys MLflow accepts
                              bleu_by_source_length(h, refs_dev, list(mt.dev.src_lengths)).items()}
        signature = corpus_bleu(hyps("regular/pretrain_beam", "test"), mt.test.references).signature
        ctx.tracker.log_params({"translation.bleu_signature": signature, "translation.src_vocab": len(mt.src_vocab),
                                "translation.tgt_vocab": len(mt.tgt_vocab)})
        n_ex = min(cfg.translation.examples, len(mt.test))
        rng = np.random.default_rng(seed_for(ctx.base.seed, "normalisation", "examples"))
        picks = rng.choice(len(mt.test), size=n_ex, replace=False) if n_ex else []
        examples = [{"verse_id": mt.test.verse_ids[i], "source": mt.test.sources[i], "reference": mt.test.references[i],
                     "systems": {key: hyps(key, "test")[i] for key in outputs}} for i in sorted(int(x) for x in picks)]
        metrics["translation"] = {"metric": "bleu", "beam_size": cfg.translation.beam_size,
                                  "translator": _translator_summary(ctx, cfg.translation),
                                  "optim_epochs": cfg.translation.optim.epochs, "optim_lr": cfg.translation.optim.lr,
                                  "finetune_epochs": cfg.translation.finetune.epochs,
                                  "finetune_lr": cfg.translation.finetune.lr,
                                  "centre_log_z": cfg.translation.centre_log_z,
                                  "src_vocab": len(mt.src_vocab), "tgt_vocab": len(mt.tgt_vocab), "n_train": len(mt.train),
                                  "min_bleu": floor,
                                  "filtered": mt.stats, "signature": signature,
                                  "rows": tr["rows"][enc], "log_z": tr["log_z"][enc], "ss": ss,
                                  "breakdown": breakdown, "by_length": by_length, "examples": examples}
        for init in INITS:                            # decoded outputs as artifacts (also beside the models)
            for name in ("pretrain", "local", "global"):
                ctx.tracker.log_artifact(models / "translation" / enc / init / name / "decoded.json",
                                         f"decoded/translation/{init}_{name}")
    for part, c in curves.items():
        if c:
            write_json(ctx.path(cfg.plots_dir) / f"{part}.json", c)
    return metrics


if __name__ == "__main__":
    main("normalisation")
