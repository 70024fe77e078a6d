"""Training the attention translator on small data (``components.models.translator``).

The practice of Sennrich & Zhang (2019, "Revisiting Low-Resource Neural Machine Translation: A
Case Study"), which took an RNN translator on 100k words of TED De->En from 0 to 16.6 BLEU: a
small subword vocabulary (the task's ``TranslationConfig``), dropout on embeddings, states and the
deep output, whole-word dropout, tied target embeddings (the model's ``TranslatorConfig``),
label smoothing (:class:`components.training.search_aware.SeqCEConfig`) and small batches
(:class:`TranslatorTrainConfig`).

:func:`train_translator` is teacher-forced cross-entropy through :func:`components.training.loop.fit`
with early stopping on dev BLEU (greedy decoding of ``dev``: cheap, and what the beam builds on),
so a run's history is its learning curve (dev BLEU per epoch). Streams come from ``seed``
(:func:`components.seeds.seed_for`): the batch order of epoch e ``(seed, "batches", "epoch", e)``;
the dropout masks ``(seed, "dropout")`` (the global generator, seeded once before the first epoch).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from components.config import check_range
from components.inference.evaluate_translation import evaluate_translation
from components.inference.registry import INFERENCE
from components.seeds import seed_for
from components.training.loop import FitState, TrainConfig, fit
from components.training.search_aware import SeqCE, SeqCEConfig


@dataclass(frozen=True)
class TranslatorTrainConfig:
    # small batches (Sennrich & Zhang 2019) and a patient stop: dev BLEU is noisy from epoch to epoch
    optim: TrainConfig = TrainConfig(lr=0.003, epochs=10, patience=4, batch_size=32)
    objective: SeqCEConfig = SeqCEConfig(label_smoothing=0.1)
    eval_batch_size: int = 100

    def __post_init__(self):
        check_range(self, positive=("eval_batch_size",))


@dataclass
class TranslatorTrainResult:
    state: FitState
    history: list[dict[str, float]] = field(default_factory=list)   # per epoch: train_loss, dev_score (BLEU), ...

    @property
    def best_bleu(self) -> float:
        return float(self.state.best_score)

    @property
    def best_epoch(self) -> int:
        return int(self.state.best_epoch)


def train_translator(model: torch.nn.Module, train: Any, dev: Any, tgt_vocab: Any, cfg: TranslatorTrainConfig, *,
                     seed: int, device: str | torch.device = "cpu", state: FitState | None = None,
                     on_batch: Callable[[int, int, float], None] | None = None,
                     on_epoch: Callable[[FitState, dict[str, float]], None] | None = None) -> TranslatorTrainResult:
    """Train ``model`` (an ``AttentionTranslator``) in place on ``train`` (a ``ParallelDataset``);
    on return it holds the weights of its best dev-BLEU epoch (greedy decoding of ``dev``)."""
    objective = SeqCE(cfg.objective)
    greedy = INFERENCE.build("greedy", INFERENCE.config("greedy", {}))
    bs = cfg.optim.batch_size
    n_batches = -(-len(train) // bs)

    def batches(epoch: int):
        return train.batches(bs, shuffle=True, seed=seed_for(seed, "batches", "epoch", epoch), device=device)

    def evaluate(m) -> dict[str, float]:
        r = evaluate_translation(m, greedy, dev, tgt_vocab, batch_size=cfg.eval_batch_size, device=device)
        b = r["bleu"]
        return {"score": float(r["score"]), "bp": float(b.bp), "ratio": float(b.ratio)}

    if state is None:
        torch.manual_seed(seed_for(seed, "dropout"))
    st = fit(model, objective, batches, n_batches, evaluate, cfg.optim, state=state, on_batch=on_batch,
             on_epoch=on_epoch)
    return TranslatorTrainResult(st, list(st.history))
