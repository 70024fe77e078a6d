"""Stage ``cmlm``: the conditional masked LM the ``mcmc`` stage samples (thesis ch. 6, Sec. 6.5).

Mask-Predict's conditional MLM (Ghazvininejad et al. 2019: a Transformer encoder over the source,
a bidirectional Transformer decoder over the target, a [LENGTH] token predicting the target
length), trained here on the Greek -> English New Testament verse pairs with the mask-predict
objective (``components.training.cmlm``) — the thesis samples the released WMT De-En model, which
this project cannot fetch. As Mask-Predict, it learns from a teacher's translations: ``cmlm.corpus``
is the ``distil`` stage's corpus by default (the training verses translated by the ``translator``
stage's model; dev and test keep the human references), or ``data/prepared/greek_english`` for the
human targets.

A Ray Tune sweep (``cmlm.sweep``: Optuna over ``cmlm.sweep.space``, default one trial with the
settings as written) trains with early stopping on the dev loss. A model is accepted only if it
learned: its dev masked-token loss must be below the training-unigram baseline's by at least
``cmlm.min_gain`` nats (else the trial fails loudly). The best trial's model is decoded on dev
with mask-predict (``cmlm.decode``: 10 iterations, 1 length candidate) at each of ``cmlm.length_scales``
(its predicted lengths times the scale: the teacher's translations, and so the model's lengths, are
short); the dev-best scale decodes test, and dev BLEU at it must reach ``cmlm.min_bleu``.

Outputs: ``models/cmlm/`` (``model.pt``, ``model.json`` with the config and sizes, the subword
vocabularies ``vocab/src.model`` / ``vocab/tgt.model``, ``decoding.json``: the mask-predict settings with
the chosen length scale), ``metrics/cmlm.json``.

Seeds (:func:`components.seeds.seed_for` of ``base.seed``; no ``cmlm.train.seed`` knob): the data's
vocabularies and subsamples ``("cmlm", "data")`` (the ``mcmc`` stage reads the same task), the initial
weights ``("cmlm", "model")``, the training streams' base ``("cmlm", "train")`` (subsample, batches,
masks, dropout: ``components.training.cmlm``) and the Optuna searcher ``("cmlm", "tpe")``. No trial in
a name: every trial starts from the same weights and data (common random numbers).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from components.config import BaseConfig, load_section, resolve_device
from components.data.translation import load_translation_task
from components.io import write_json
from components.models.mlm import ConditionalMLM, load_cmlm, save_cmlm
from components.seeds import seed_for
from components.training.cmlm import decode_bleu, train_cmlm
from components.training.guard import DidNotLearn
from flows.ray_runtime import copy_checkpoint, epoch_bar
from flows.search_space import check_metric, check_sweep_space, with_values
from flows.stages.common import StageContext, main
from flows.sweeps import run_sweep
from flows.translation_configs import CMLMStageConfig

REPORTED = ("best_dev_loss", "dev_loss", "dev_token_loss", "dev_unigram_loss", "dev_token_acc", "dev_length_acc",
            "epoch", "train_loss")


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
    p = with_values(params, config)
    base = load_section(BaseConfig, "base", p)
    cfg = load_config(p)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    device = resolve_device(base.device)
    task = load_translation_task(Path(root) / cfg.corpus, vocab, cfg.data, seed=seed_for(base.seed, "cmlm", "data"))
    model = ConditionalMLM.for_task(task, cfg.model, seed=seed_for(base.seed, "cmlm", "model")).to(device)
    best = {"loss": float("inf")}

    def on_epoch(rec: dict[str, float]) -> None:
        best["loss"] = min(best["loss"], rec[f"dev_{cfg.train.select_on}"])     # what train_cmlm keeps
        tune.report({k: float(v) for k, v in rec.items()} | {"best_dev_loss": best["loss"]})

    result = train_cmlm(model, task, cfg.train, seed=seed_for(base.seed, "cmlm", "train"), on_epoch=on_epoch,
                        on_batch=epoch_bar("cmlm"), tgt_vocab=task.tgt_vocab)
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
    task = load_translation_task(ctx.path(cfg.corpus), vocab, cfg.data,           # the vocabularies, once
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
        n = cfg.max_decode_pairs
        dev, test = (ds if not n else ds.subset(range(min(n, len(ds)))) for ds in (task.dev, task.test))

        def decode(ds, scale):
            return decode_bleu(model, ds, task.tgt_vocab, dataclasses.replace(cfg.decode, length_scale=scale),
                               batch_size=cfg.decode_batch_size)
        by_scale = {s: decode(dev, s) for s in cfg.length_scales}
        scale = max(cfg.length_scales, key=lambda s: by_scale[s]["bleu"])      # ties: the first listed
        bleu = {"dev": by_scale[scale], "test": decode(test, scale)}
        unscaled = bleu["test"] if scale == 1.0 else decode(test, 1.0)
        ctx.tracker.log_metrics({"dev_bleu_mask_predict": bleu["dev"]["bleu"],
                                 "test_bleu_mask_predict": bleu["test"]["bleu"], "length_scale": scale,
                                 **{f"dev_{k}": v for k, v in train_info["best"].items()}})
    if bleu["dev"]["bleu"] < cfg.min_bleu:
        raise DidNotLearn(f"cmlm: did not learn to translate: dev BLEU (mask-predict, {cfg.decode.iterations} "
                          f"iterations, length scale {scale:g}) {bleu['dev']['bleu']:.2f} is under cmlm.min_bleu = {cfg.min_bleu:g}; "
                          "the mcmc stage may not sample it")
    write_json(best_dir / "decoding.json", {**dataclasses.asdict(cfg.decode), "length_scale": scale})
    copy_checkpoint(best_dir, models)
    shutil.rmtree(vocab_dir(models), ignore_errors=True)
    shutil.copytree(vocab, vocab_dir(models))
    best = train_info["best"]
    curve = [{"epoch": int(h["epoch"]), "dev_token_loss": h["dev_token_loss"], "dev_unigram_loss": h["dev_unigram_loss"],
              "dev_bleu": h.get("dev_bleu")} for h in train_info["history"]]
    dev_refs = task.dev.references
    return {"dev": best, "best_epoch": train_info["best_epoch"], "epochs": len(train_info["history"]),
            "learned_gain_nats": best["unigram_loss"] - best["token_loss"], "stats": train_info["stats"],
            "dev_bleu_mask_predict": {k: v for k, v in bleu["dev"].items() if k != "hypotheses"},
            "test_bleu_mask_predict": {k: v for k, v in bleu["test"].items() if k != "hypotheses"},
            "length_scale": scale, "dev_bleu_by_length_scale": {f"{s:g}": by_scale[s]["bleu"] for s in cfg.length_scales},
            "test_bleu_mask_predict_unscaled": unscaled["bleu"],
            "min_bleu": cfg.min_bleu, "corpus": cfg.corpus, "curve": curve,
            "dev_examples": [{"reference": r, "mask_predict": h} for r, h in zip(dev_refs[:5], bleu["dev"]["hypotheses"][:5])],
            "best_config": res.best_config, "sizes": task.sizes,
            "data_stats": {k: v for k, v in task.stats.items() if isinstance(v, (int, float))},
            "sweep_minutes": (time.perf_counter() - t0) / 60.0}


if __name__ == "__main__":
    main("cmlm")
