"""Stage ``translator``: the Greek -> English attention translator, trained for small data, that
every translation study starts from.

One training shared by everything that needs a translator (thesis ch. 3 and 6; Goyal, Dyer &
Berg-Kirkpatrick 2019): the ``normalisation`` stage fine-tunes it (its CE and self-normalised
initialisers), and the ``distil`` stage translates the training verses with it for the
conditional MLM (sequence-level knowledge distillation, Kim & Rush 2016), so changing it re-runs
exactly what depends on it.

The model is the paper's (``components.models.translator``: a BiLSTM encoder, an LSTM decoder with
additive attention) trained with the low-resource practice of Sennrich & Zhang (2019): a small
subword vocabulary, aggressive dropout, whole-word dropout, tied target embeddings, label smoothing
and small batches (``translator`` in params.yaml says what each choice is for). Early stopping on
dev BLEU (greedy, the whole dev book); the kept model is then decoded by greedy search and by beam
search (``beam_size``) on dev and test, the beam with the length penalty of Wu et al. (2016) that
gives the best dev BLEU among ``length_penalties`` (the plain beam's outputs were 30% shorter than
the references: brevity penalty 0.66 on dev, 2026-11-27).

A Ray Tune sweep (``translator.sweep``) runs it: one trial with the settings as written by default;
with a ``sweep.space`` (dotted params keys, e.g. ``translator.train.optim.lr``) an Optuna study on
dev BLEU, kept in the project's study storage, so a user can resume it and watch it in
``optuna-dashboard`` (``make optuna-ui``). A model whose dev BLEU (beam) is under
``translator.min_bleu`` fails the stage (did not learn: nothing downstream may read it).

Seeds (:func:`components.seeds.seed_for` of ``base.seed``): the vocabularies and subsamples
``("translator", "data")``, the initial weights ``("translator", "model")``, the training streams
``("translator", "train")`` and the Optuna sampler ``("translator", "tpe")``; no trial in a name
(every trial starts from the same weights and data).

Outputs: ``models/translator/`` (``model.pt``, ``model.json`` with its recipe and learning curve,
``vocab/{src,tgt}.model``, ``decoded.json``: every dev and test hypothesis, ``decoding.json``: the
beam settings the distil stage uses), ``metrics/translator.json``
(BLEU with sacrebleu's signature, the learning curve, the data's counts).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from components.checkpoints import load as load_model
from components.config import BaseConfig, load_section, resolve_device
from components.data.translation import TranslationTask, load_translation_task
from components.inference.evaluate_translation import evaluate_translation
from components.inference.registry import INFERENCE
from components.models.translator import TranslatorConfig, build_translator
from components.recipes import recipe
from components.seeds import seed_for
from components.training.guard import DidNotLearn
from components.training.loop import FitState
from components.training.translator import train_translator
from flows.ray_runtime import copy_checkpoint, epoch_bar, report_final, tensor_bytes
from flows.search_space import check_metric, check_sweep_space, with_values
from flows.stages.common import StageContext, main
from flows.sweeps import run_sweep
from flows.translation_configs import TranslatorStageConfig

REPORTED = ("best_dev_bleu", "dev_score", "train_loss", "epoch")


def load_config(params: dict[str, Any]) -> TranslatorStageConfig:
    cfg = load_section(TranslatorStageConfig, "translator", params)
    check_sweep_space(cfg.sweep.space, params, "translator", lambda p: load_section(TranslatorStageConfig, "translator", p),
                      where="translator.sweep.space")
    check_metric(cfg.sweep, REPORTED, "translator.sweep.metric")
    return cfg


def load_task(root: Path, base: BaseConfig, cfg: TranslatorStageConfig, vocab: Path) -> TranslationTask:
    """The translation task as this stage trains on it (the vocabularies in ``vocab``)."""
    return load_translation_task(root / base.prepared_dir / "greek_english", vocab, cfg.data,
                                 seed=seed_for(base.seed, "translator", "data"))


def translator_recipe(task: TranslationTask, model_cfg: TranslatorConfig) -> dict[str, Any]:
    return recipe("translator", "attention", model_cfg, {"n_src": len(task.src_vocab), "n_tgt": len(task.tgt_vocab),
                                                          "eos": task.tgt_vocab.eos, "pad": task.tgt_vocab.pad})


def translator_trial(config: dict[str, Any], *, params: dict[str, Any], root: str, vocab: str) -> None:
    """Ray Tune function trainable: one translator with the trial's settings; reports dev BLEU per
    epoch with the training state as a checkpoint (a resumed trial continues from it); its model in
    the final checkpoint; fails if it did not learn (dev BLEU under the bar)."""
    from ray import tune
    p = with_values(params, config)
    base = load_section(BaseConfig, "base", p)
    cfg = load_config(p)
    torch.set_num_threads(max(1, int(cfg.sweep.resources.cpu)))
    device = resolve_device(base.device)
    task = load_task(Path(root), base, cfg, Path(vocab))
    model = build_translator(cfg.model, len(task.src_vocab), len(task.tgt_vocab), eos=task.tgt_vocab.eos,
                             pad=task.tgt_vocab.pad, seed=seed_for(base.seed, "translator", "model")).to(device)
    resume = None
    ckpt = tune.get_checkpoint()          # an interrupted trial (stopped stage, lost worker): its last epoch
    if ckpt is not None:
        with ckpt.as_directory() as d:
            resume = FitState.from_dict(torch.load(Path(d) / "state.pt", weights_only=True))

    def on_epoch(state: FitState, rec: dict[str, float]) -> None:
        # every epoch's state in the trial's checkpoint, so a re-run of a stopped stage continues from
        # its last finished epoch (the run is the same: fit restores the weights, the optimiser and
        # every generator) instead of starting the hours of a study translator again
        with tempfile.TemporaryDirectory() as d:
            torch.save(state.to_dict(), Path(d) / "state.pt")
            tune.report({k: float(v) for k, v in rec.items()} | {"best_dev_bleu": max(float(h["dev_score"]) for h in state.history)},
                        checkpoint=tune.Checkpoint.from_directory(d))

    result = train_translator(model, task.train, task.dev, task.tgt_vocab, cfg.train,
                              seed=seed_for(base.seed, "translator", "train"), device=device, state=resume,
                              on_epoch=on_epoch, on_batch=epoch_bar("translator"))
    if result.best_bleu < cfg.min_bleu:
        raise DidNotLearn(f"translator: did not learn: best dev BLEU (greedy) {result.best_bleu:.2f} after "
                          f"{result.state.epoch} epochs is under translator.min_bleu = {cfg.min_bleu:g}")
    meta = {"recipe": translator_recipe(task, cfg.model), "best_epoch": result.best_epoch,
            "history": result.history, "settings": {k: v for k, v in config.items()}}
    report_final({"best_dev_bleu": result.best_bleu, "best_epoch": float(result.best_epoch),
                  "epochs_run": float(result.state.epoch)},
                 {"model.pt": tensor_bytes({n: t.detach().cpu() for n, t in model.state_dict().items()}),
                  "model.json": json.dumps(meta, indent=1)})


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    from ray import tune
    cfg = load_config(params)
    vocab = ctx.work / "vocab"
    task = load_task(ctx.root, ctx.base, cfg, vocab)               # the vocabularies, once, before the trials
    t0 = time.perf_counter()
    with ctx.tracker.start_run("sweep/translator", parent_run_id=ctx.run_id,
                               tags={"stage": ctx.stage, "study": "goyal_2019"}) as parent:
        trainable = tune.with_parameters(translator_trial, params=params, root=str(ctx.root), vocab=str(vocab))
        res = run_sweep(trainable, name="translator", cfg=cfg.sweep, params=params,
                        seed=seed_for(ctx.base.seed, "translator", "tpe"), tracker=ctx.tracker,
                        parent_run_id=parent, storage=ctx.ray_storage, tags={"stage": ctx.stage})
        if res.best_checkpoint is None:
            raise RuntimeError("translator: the sweep's best trial has no checkpoint")
        ckpt = Path(res.best_checkpoint)
        meta = json.loads((ckpt / "model.json").read_text())
        device = resolve_device(ctx.base.device)
        model = load_model(ckpt, device=str(device), expect="translator")      # rebuilt from its recipe

        def decode(name: str, split: str, **settings: Any) -> dict[str, Any]:
            return evaluate_translation(model, INFERENCE.build_with(name, {"k": cfg.beam_size, **settings}),
                                        getattr(task, split), task.tgt_vocab, batch_size=cfg.eval_batch_size,
                                        device=device)

        # the beam's length penalty, tuned on dev (the plain beam prefers short outputs)
        tried = {lp: decode("beam", "dev", length_penalty=lp) for lp in cfg.length_penalties}
        best_lp = max(cfg.length_penalties, key=lambda lp: (tried[lp]["score"], -lp))
        scores: dict[str, dict[str, Any]] = {}
        decoded: dict[str, dict[str, list[str]]] = {}
        for split in ("dev", "test"):
            scores[split], decoded[split] = {}, {}
            for name in ("greedy", "beam"):
                r = tried[best_lp] if (name, split) == ("beam", "dev") else \
                    decode(name, split, **({"length_penalty": best_lp} if name == "beam" else {}))
                b = r["bleu"]
                scores[split][name] = {"bleu": b.score, "precisions": list(b.precisions), "bp": b.bp,
                                       "ratio": b.ratio, "signature": b.signature,
                                       "decode_seconds": r["decode_seconds"]}
                decoded[split][name] = r["hypotheses"]
        ctx.tracker.log_metrics({f"{split}_bleu_{name}": s["bleu"] for split in scores for name, s in scores[split].items()})
        ctx.tracker.log_params({"translator.bleu_signature": scores["test"]["beam"]["signature"]})
    dev_bleu = scores["dev"]["beam"]["bleu"]
    if dev_bleu < cfg.min_bleu:
        raise DidNotLearn(f"translator: did not learn: dev BLEU (beam {cfg.beam_size}, length penalty {best_lp:g}) "
                          f"{dev_bleu:.2f} is under translator.min_bleu = {cfg.min_bleu:g}; nothing downstream may use it")
    models = ctx.path(cfg.models_dir)
    copy_checkpoint(ckpt, models)
    shutil.copytree(vocab, models / "vocab")
    (models / "decoded.json").write_text(json.dumps(decoded, ensure_ascii=False))
    decoding = {"beam_size": cfg.beam_size, "length_penalty": best_lp}      # what the distil stage decodes with
    (models / "decoding.json").write_text(json.dumps(decoding))
    ctx.tracker.log_artifact(models / "decoded.json", "translator")
    examples = [{"verse_id": task.test.verse_ids[i], "source": task.test.sources[i],
                 "reference": task.test.references[i], "beam": decoded["test"]["beam"][i]}
                for i in range(0, len(task.test), max(1, len(task.test) // 5))][:5]
    curve = [{"epoch": int(h["epoch"]), "train_loss": h["train_loss"], "dev_bleu": h["dev_score"]} for h in meta["history"]]
    return {"dev": scores["dev"], "test": scores["test"], "best_epoch": meta["best_epoch"], "epochs": len(curve),
            "curve": curve, "beam_size": cfg.beam_size, "length_penalty": best_lp,
            "dev_bleu_by_length_penalty": {f"{lp:g}": tried[lp]["score"] for lp in cfg.length_penalties},
            "min_bleu": cfg.min_bleu, "best_config": res.best_config,
            "sizes": task.sizes, "n_train": len(task.train), "n_dev": len(task.dev), "n_test": len(task.test),
            "data_stats": {k: v for k, v in task.stats.items() if isinstance(v, (int, float))},
            "examples": examples, "sweep_minutes": (time.perf_counter() - t0) / 60.0}


if __name__ == "__main__":
    main("translator")
