"""``screen`` stage: the CE screen of candidate stand-in tasks for search-aware training (issue 27;
``components.training.screen``).

For each task of ``screen.tasks`` that is a prepared tagging task (``data/prepared/<task>/meta.json``;
``cmudict``, a grapheme-to-phoneme dictionary with no tag per token, is skipped with its reason), a
cross-entropy seq2seq tagger with a unidirectional and one with a bidirectional encoder are trained
in this process (no Ray: the screen is a few minutes), decoded greedily and by hard beam on test, and
the gaps the papers' premises need — CE beam − greedy, bidirectional − unidirectional — are reported
with their paired-bootstrap intervals.

Outputs: ``metrics/screen.json`` (per task: scores, gaps with intervals; skipped tasks with the
reason) and ``metrics/stats/screen/<task>.npz`` (per-sentence statistics of ``uni/greedy``,
``uni/beam``, ``bi/greedy``, ``bi/beam`` and the ``majority/constant`` baseline). The table
(``reports/stand_in_screen/README.md``) is the stage ``report_stand_in_screen``'s.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config import BaseConfig, ConfigError, check_range, load_section, resolve_device
from components.data.tasks import load_tagging_task
from components.inference.registry import INFERENCE
from components.metrics.sentence_stats import save_stats
from components.models.seq2seq import Seq2SeqTaggerConfig
from components.seeds import seed_for
from components.training.loop import TrainConfig
from components.training.screen import screen_task
from flows.progress import line
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class ScreenConfig:
    tasks: tuple[str, ...] = ("ner", "pos", "oanc_pos", "greek_pos", "turkish_upos", "greek_morph",
                              "greek_morph_k400", "cmudict")
    beam_size: int = 3                    # Goyal 2018: beam 3 in every beam experiment
    max_train_sentences: int = 2000       # a seeded subsample per task (0 = all)
    max_dev_sentences: int = 200          # early stopping (0 = all)
    max_test_sentences: int = 1000        # the first test sentences, the intervals' n (0 = the whole test set)
    model: Seq2SeqTaggerConfig = Seq2SeqTaggerConfig()     # search_aware's ``ce`` model; the encoder is set per run
    optim: TrainConfig = TrainConfig(lr=0.01, epochs=8, patience=3, batch_size=64)   # search_aware's CE optimiser
    eval_batch_size: int = 64
    resamples: int = 2000                 # paired-bootstrap resamples per gap
    stats_dir: str = "metrics/stats/screen"

    def __post_init__(self):
        check_range(self, positive=("beam_size", "eval_batch_size", "resamples"),
                    nonnegative=("max_train_sentences", "max_dev_sentences", "max_test_sentences"))


def load_config(params: dict[str, Any]) -> ScreenConfig:
    cfg = load_section(ScreenConfig, "screen", params)
    if not cfg.tasks:
        raise ConfigError("screen.tasks: at least one task")
    if len(set(cfg.tasks)) != len(cfg.tasks):
        raise ConfigError(f"screen.tasks: a task is listed twice: {list(cfg.tasks)}")
    return cfg


def _not_tagging(folder: Path) -> str:
    """Why a prepared folder is not a tagging task of ``load_tagging_task`` ("" when it is)."""
    if not folder.is_dir():
        return "not prepared (not under prepare.tasks)"
    if not (folder / "meta.json").exists():
        return "not a tagging task in our loader (no meta.json: e.g. cmudict is a grapheme-to-phoneme dictionary, " \
               "words to phoneme strings of another length, not one tag per token)"
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("metric") not in ("accuracy", "span_f1"):
        return f"not a tagging task (metric {meta.get('metric')!r})"
    return ""


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_config(params)
    base = load_section(BaseConfig, "base", params)
    device = resolve_device(base.device)
    decoders = {"greedy": INFERENCE.build_with("greedy", {"k": cfg.beam_size}),
                "beam": INFERENCE.build_with("beam", {"k": cfg.beam_size})}
    tasks: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in cfg.tasks:
        folder = ctx.path(base.prepared_dir) / name
        why = _not_tagging(folder)
        if why:
            skipped[name] = why
            line(f"screen {name}: skipped: {why}")
            continue
        task = load_tagging_task(folder, max_train_sentences=cfg.max_train_sentences,
                                 seed=seed_for(base.seed, "data", name, "train_subsample"))
        out = screen_task(task, model_cfg=cfg.model, optim=cfg.optim, decoders=decoders,
                          seed=seed_for(base.seed, "screen", name, "model"),
                          batch_seed=lambda epoch, name=name: seed_for(base.seed, "screen", name, "batches", epoch),
                          max_dev_sentences=cfg.max_dev_sentences, max_test_sentences=cfg.max_test_sentences,
                          device=device, eval_batch_size=cfg.eval_batch_size, resamples=cfg.resamples,
                          bootstrap_seed=seed_for(base.seed, "screen", name, "bootstrap"))
        save_stats(ctx.path(cfg.stats_dir) / f"{name}.npz", out["stats"], out["columns"])
        tasks[name] = out["record"]
        g = out["record"]["gaps"]
        line(f"screen {name}: beam - greedy {g['beam_minus_greedy']['estimate']:+.2f}, "
             f"bi - uni {g['bi_minus_uni']['estimate']:+.2f}")
    return {"beam_size": cfg.beam_size, "max_train_sentences": cfg.max_train_sentences,
            "epochs": cfg.optim.epochs, "tasks": tasks, "skipped": skipped}


if __name__ == "__main__":
    main("screen")
