"""Stage ``cmlm``: the conditional masked LM the ``mcmc`` stage samples (thesis ch. 6, Sec. 6.5).

Mask-Predict's conditional MLM (Ghazvininejad et al. 2019: a Transformer encoder over the source,
a bidirectional Transformer decoder over the target, a [LENGTH] token predicting the target
length), trained here on the Greek -> English New Testament verse pairs with the mask-predict
objective (``components.training.cmlm``) — the thesis samples the released WMT De-En model, which
this project cannot fetch.

A Ray Tune sweep (``cmlm.sweep``: Optuna over ``cmlm.sweep.space``, default one trial with the
settings as written) trains with early stopping on the dev loss. A model is accepted only if it
learned: its dev masked-token loss must be below the training-unigram baseline's by at least
``cmlm.min_gain`` nats (else the trial fails loudly). The best trial's model is decoded on dev
with mask-predict (10 iterations, 1 length candidate) for a BLEU a reader can compare.

Outputs: ``models/cmlm/`` (``model.pt``, ``model.json`` with the config and sizes, the subword
vocabularies ``vocab/src.model`` / ``vocab/tgt.model``), ``metrics/cmlm.json``.

Seeds (:func:`components.seeds.seed_for` of ``base.seed``; no ``cmlm.train.seed`` knob): the data's
vocabularies and subsamples ``("cmlm", "data")`` (the ``mcmc`` stage reads the same task), the initial
weights ``("cmlm", "model")``, the training streams' base ``("cmlm", "train")`` (subsample, batches,
masks, dropout: ``components.training.cmlm``) and the Optuna searcher ``("cmlm", "tpe")``. No trial in
a name: every trial starts from the same weights and data (common random numbers).
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from components.config import (BaseConfig, ResourcesConfig, check_range, field_error, load_section, resolve_device,
                               set_dotted)
from components.data.translation import TranslationConfig, load_translation_task
from components.inference.mask_predict import MaskPredictConfig
from components.models.mlm import CMLMConfig, ConditionalMLM, load_cmlm, save_cmlm
from components.seeds import seed_for
from components.training.cmlm import CMLMTrainConfig, decode_bleu, train_cmlm
from flows.ray_runtime import copy_checkpoint, epoch_bar
from flows.search_space import check_metric, check_sweep_space
from flows.stages.common import StageContext, main
from flows.sweeps import SweepConfig, run_sweep

REPORTED = ("best_dev_loss", "dev_loss", "dev_token_loss", "dev_unigram_loss", "dev_token_acc", "dev_length_acc",
            "epoch", "train_loss")


@dataclass(frozen=True)
class CMLMStageConfig:
    # the default scale: the 3,477 verse pairs of <= 40 subwords a side. The bench and mcmc stages read
    # params' cmlm.data / cmlm.model over the plain classes' defaults: params.yaml states what differs
    data: TranslationConfig = TranslationConfig(src_vocab_size=1000, tgt_vocab_size=1000, max_source_len=40,
                                                max_target_len=40)
    model: CMLMConfig = CMLMConfig(d_model=64, ff=128, max_target_len=64)
    train: CMLMTrainConfig = CMLMTrainConfig(lr=0.003, epochs=12)
    min_gain: float = 0.4                  # nats: dev token loss must be this far below the unigram loss
    decode: MaskPredictConfig = MaskPredictConfig()
    decode_batch_size: int = 64
    max_decode_pairs: int = 200            # dev pairs decoded by mask-predict for the stage's BLEU (0: all)
    models_dir: str = "models/cmlm"
    # max_failures 0: no retry of a model that did not learn
    sweep: SweepConfig = SweepConfig(num_samples=1, max_concurrent=1, metric="best_dev_loss", mode="min",
                                     resources=ResourcesConfig(cpu=2, gpu="auto"), max_failures=0)

    def __post_init__(self):
        check_range(self, positive=("decode_batch_size",), nonnegative=("min_gain", "max_decode_pairs"))
        if self.data.max_source_len > self.model.max_source_len:
            raise field_error(self, "data", f"max_source_len {self.data.max_source_len} exceeds the model's "
                              f"max_source_len {self.model.max_source_len}")
        if self.data.max_target_len - 1 > self.model.max_target_len:
            raise field_error(self, "data", f"max_target_len {self.data.max_target_len} (with eos) exceeds the "
                              f"model's max_target_len {self.model.max_target_len} + 1")


def load_config(params: dict[str, Any]) -> CMLMStageConfig:
    cfg = load_section(CMLMStageConfig, "cmlm", params)
    check_sweep_space(cfg.sweep.space, params, "cmlm", lambda p: load_section(CMLMStageConfig, "cmlm", p))
    check_metric(cfg.sweep, REPORTED, "cmlm.sweep.metric")
    return cfg


def vocab_dir(folder: Path) -> Path:
    return folder / "vocab"


def cmlm_trial(config: dict[str, Any], *, params: dict[str, Any], root: str, vocab: str) -> None:
    """Ray Tune function trainable: trains one CMLM with the trial's settings, saves it in the trial
    folder, reports per-epoch dev metrics; fails if the model did not learn."""
    from ray import tune
    p = params
    for k, v in config.items():
        p = set_dotted(p, k, v)
    base = load_section(BaseConfig, "base", p)
    cfg = load_config(p)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    device = resolve_device(base.device)
    task = load_translation_task(Path(root) / base.prepared_dir / "greek_english", vocab, cfg.data,
                                 seed=seed_for(base.seed, "cmlm", "data"))
    model = ConditionalMLM.for_task(task, cfg.model, seed=seed_for(base.seed, "cmlm", "model")).to(device)
    best = {"loss": float("inf")}

    def on_epoch(rec: dict[str, float]) -> None:
        best["loss"] = min(best["loss"], rec[f"dev_{cfg.train.select_on}"])     # what train_cmlm keeps
        tune.report({k: float(v) for k, v in rec.items()} | {"best_dev_loss": best["loss"]})

    result = train_cmlm(model, task, cfg.train, seed=seed_for(base.seed, "cmlm", "train"), on_epoch=on_epoch,
                        on_batch=epoch_bar("cmlm"))
    gain = result.best["unigram_loss"] - result.best["token_loss"]
    out = Path(tune.get_context().get_trial_dir()) / "model"
    save_cmlm(model, out, task, cfg.model)
    (out / "train.json").write_text(json.dumps({"best_epoch": result.best_epoch, "best": result.best,
                                                "stats": result.stats, "history": result.history}, indent=1))
    if gain < cfg.min_gain:
        raise RuntimeError(f"cmlm: the model did not learn: dev masked-token loss {result.best['token_loss']:.3f} is "
                           f"only {gain:.3f} nats below the unigram baseline's {result.best['unigram_loss']:.3f} "
                           f"(cmlm.min_gain = {cfg.min_gain})")


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_config(params)
    models = ctx.path(cfg.models_dir)
    vocab = vocab_dir(ctx.work)
    prepared = ctx.path(ctx.base.prepared_dir) / "greek_english"
    task = load_translation_task(prepared, vocab, cfg.data,                      # the vocabularies, once
                                 seed=seed_for(ctx.base.seed, "cmlm", "data"))
    t0 = time.perf_counter()
    with ctx.tracker.start_run("sweep/cmlm", parent_run_id=ctx.run_id,
                               tags={"stage": ctx.stage, "study": "goyal_mlm"}) as parent:
        trainable = tune.with_parameters(cmlm_trial, params=params, root=str(ctx.root), vocab=str(vocab))
        res = run_sweep(trainable, name="cmlm", cfg=cfg.sweep, params=params,
                        seed=seed_for(ctx.base.seed, "cmlm", "tpe"), tracker=ctx.tracker, parent_run_id=parent,
                        storage=ctx.ray_storage, tags={"stage": ctx.stage}, reuse_actors=False)       # the trial saves its model in its trial folder
        best_dir = Path(next(t["path"] for t in res.trials if t["config"] == res.best_config
                             and t["metrics"].get(cfg.sweep.metric) == res.best_metrics.get(cfg.sweep.metric))) / "model"
        train_info = json.loads((best_dir / "train.json").read_text())
        device = resolve_device(ctx.base.device)
        model = load_cmlm(best_dir, device=device)
        dev = task.dev if not cfg.max_decode_pairs else task.dev.subset(range(min(cfg.max_decode_pairs, len(task.dev))))
        bleu = decode_bleu(model, dev, task.tgt_vocab, cfg.decode, batch_size=cfg.decode_batch_size)
        ctx.tracker.log_metrics({"dev_bleu_mask_predict": bleu["bleu"], **{f"dev_{k}": v for k, v in
                                                                          train_info["best"].items()}})
    copy_checkpoint(best_dir, models)
    shutil.rmtree(vocab_dir(models), ignore_errors=True)
    shutil.copytree(vocab, vocab_dir(models))
    best = train_info["best"]
    return {"dev": best, "best_epoch": train_info["best_epoch"], "epochs": len(train_info["history"]),
            "learned_gain_nats": best["unigram_loss"] - best["token_loss"], "stats": train_info["stats"],
            "dev_bleu_mask_predict": {k: v for k, v in bleu.items() if k != "hypotheses"},
            "dev_examples": [{"reference": r, "mask_predict": h} for r, h in zip(dev.references[:5], bleu["hypotheses"][:5])],
            "best_config": res.best_config, "sizes": task.sizes,
            "data_stats": {k: v for k, v in task.stats.items() if isinstance(v, (int, float))},
            "sweep_minutes": (time.perf_counter() - t0) / 60.0}


if __name__ == "__main__":
    main("cmlm")
