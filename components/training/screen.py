r"""The CE screen of stand-in tasks for search-aware training (issue 27), and the trivial baseline a
search-aware model must beat.

Search-aware training (Goyal et al. 2018; Goyal, Dyer & Berg-Kirkpatrick 2019) has something to fix
only where a cross-entropy (CE) model trained under teacher forcing is hurt by its own search: the
2018 paper's CCG premise is that beam search already helps the CE model ("the baseline cross entropy
trained model improves its predictions with beam search decoding compared to greedy decoding by 2
accuracy points", Table 1: 82.42 vs 80.35), and the 2019 paper's label-bias premise is that a
unidirectional encoder loses much against a bidirectional one (Table 2, CE greedy: 76.54 vs 92.59,
a gap of 16). A stand-in task where both gaps are near zero cannot show what the papers show.

:func:`screen_task` trains, on one prepared tagging task, the ``ce`` variant of the ``search_aware``
stage — the seq2seq tagger (:class:`~components.models.seq2seq.Seq2SeqTagger`) with the
teacher-forced CE objective (:class:`~components.training.search_aware.SeqCE`) — twice, with a
unidirectional (``lstm``) and a bidirectional (``blstm``) encoder and otherwise the same config,
seed and batches; it decodes the test set greedily and by hard beam search (decoders passed in by
the caller) and returns each system's per-sentence statistics ``[n, d]``
(:func:`components.metrics.tagging.sentence_stats`) and the 95% paired-bootstrap intervals
(:func:`components.metrics.significance.percentile_bootstrap`, test sentences resampled) of

- ``beam_minus_greedy``: CE beam - CE greedy, unidirectional encoder (the 2019 paper's tagger);
- ``bi_beam_minus_greedy``: the same with the bidirectional encoder (the 2018 paper's tagger);
- ``bi_minus_uni``: CE greedy, bidirectional - unidirectional (the label-bias gap).

Cost: two trainings of at most ``optim.epochs`` epochs over the (capped) training set, O(E N T) for
N sentences of length T, plus greedy (O(T V)) and beam (O(k T V)) decodings of the test set.

:func:`majority_tag_stats` is the trivial baseline: every token tagged with the training set's most
frequent tag (``O`` for NER, whose span F1 is then 0); the ``search_aware`` stage's did-not-learn
guard compares each variant's test score with it.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Callable

import numpy as np
import torch

from components.data.batching import TaggingDataset
from components.data.tasks import TaggingTask
from components.inference.evaluate_decoding import evaluate_decoding
from components.metrics.run_facts import results_only
from components.metrics.significance import Interval, percentile_bootstrap
from components.metrics.tagging import sentence_stats, stats_columns, stats_score
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.training.loop import TrainConfig, fit
from components.training.search_aware import SeqCE, SeqCEConfig

ENCODERS = {"uni": "lstm", "bi": "blstm"}        # the screen's two taggers -> Seq2SeqTaggerConfig.encoder
DECODINGS = ("greedy", "beam")


def majority_tag(train: TaggingDataset) -> str:
    """The most frequent tag of the training sentences (the first in sorted order on a tie)."""
    counts = Counter(t for s in train.sentences for t in s.tags)
    if not counts:
        raise ValueError("majority_tag: the training set has no tagged tokens")
    top = max(counts.values())
    return min(t for t, c in counts.items() if c == top)


def majority_tag_stats(train: TaggingDataset, test: TaggingDataset, metric: str) -> np.ndarray:
    """Per-sentence statistics ``[n, d]`` of tagging every test token with :func:`majority_tag`."""
    tag = majority_tag(train)
    gold = [list(s.tags) for s in test.sentences]
    return sentence_stats(metric, gold, [[tag] * len(g) for g in gold])


def interval_record(iv: Interval) -> dict[str, float]:
    """An interval as plain data (a metrics file), read back by :func:`interval_from_record`."""
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "confidence": iv.confidence, "n": iv.n,
            "seeds": iv.seeds, "resamples": iv.resamples}


def interval_from_record(r: dict[str, Any]) -> Interval:
    return Interval(float(r["estimate"]), float(r["low"]), float(r["high"]), float(r["confidence"]), int(r["n"]),
                    int(r.get("seeds", 1)), int(r.get("resamples", 0)))


def train_ce(task: TaggingTask, dev: TaggingDataset, model_cfg: Seq2SeqTaggerConfig, optim: TrainConfig,
             tune_on: Any, *, seed: int, batch_seed: Callable[[int], int], device: str | torch.device = "cpu",
             eval_batch_size: int = 64, on_batch=None) -> tuple[Seq2SeqTagger, Any]:
    """A seq2seq tagger trained with teacher-forced CE, early-stopped on ``dev`` decoded by ``tune_on``
    (the ``search_aware`` stage's ``ce`` variant) -> (model with its best-on-dev weights, fit state)."""
    torch.manual_seed(seed)
    model = Seq2SeqTagger(model_cfg, **task.sizes, glove_ids=task.glove_ids, glove_vectors=task.glove_vectors,
                          seed=seed).to(device)
    labels = task.vocabs["label"]
    n_batches = -(-len(task.train) // optim.batch_size)
    state = fit(model, SeqCE(SeqCEConfig()),
                lambda epoch: task.train.batches(optim.batch_size, shuffle=True, device=device, seed=batch_seed(epoch)),
                n_batches, lambda m: results_only(evaluate_decoding(m, tune_on, dev, labels, task.metric,
                                                                    batch_size=eval_batch_size, device=device)),
                optim, on_batch=on_batch)
    model.eval()
    return model, state


def screen_task(task: TaggingTask, *, model_cfg: Seq2SeqTaggerConfig, optim: TrainConfig,
                decoders: dict[str, Any], seed: int, batch_seed: Callable[[int], int], max_dev_sentences: int = 0,
                max_test_sentences: int = 0, device: str | torch.device = "cpu", eval_batch_size: int = 64,
                resamples: int = 2000, bootstrap_seed: int = 0, on_batch=None) -> dict[str, Any]:
    """The screen of one task (module doc). ``decoders``: ``{"greedy": ..., "beam": ...}`` built by
    the caller (``INFERENCE``). Returns ``{"record": {...} (JSON-able: scores, gaps, sizes),
    "stats": {"uni/greedy": [n, d], ...}, "columns": (...)}``."""
    missing = [d for d in DECODINGS if d not in decoders]
    if missing:
        raise ValueError(f"screen_task: decoders {missing} not given (need {list(DECODINGS)})")
    dev = task.dev.subset(np.arange(min(len(task.dev), max_dev_sentences))) if max_dev_sentences else task.dev
    test = task.test.subset(np.arange(min(len(task.test), max_test_sentences))) if max_test_sentences else task.test
    labels, metric = task.vocabs["label"], task.metric
    stats: dict[str, np.ndarray] = {}
    record: dict[str, Any] = {"metric": metric, "n_labels": len(labels), "n_train": len(task.train),
                              "n_dev": len(dev), "n_test": len(test), "models": {}}
    for name, encoder in ENCODERS.items():
        cfg = dataclasses.replace(model_cfg, encoder=encoder)
        model, state = train_ce(task, dev, cfg, optim, decoders["greedy"], seed=seed, batch_seed=batch_seed,
                                device=device, eval_batch_size=eval_batch_size, on_batch=on_batch)
        rec: dict[str, Any] = {"encoder": encoder, "best_epoch": state.best_epoch, "epochs_run": state.epoch,
                               "best_dev_greedy": state.best_score}
        with torch.no_grad():
            for d in DECODINGS:
                out, inst = evaluate_decoding(model, decoders[d], test, labels, metric, batch_size=eval_batch_size,
                                              device=device, instances=True)
                rec[d] = float(out["score"])
                stats[f"{name}/{d}"] = inst["stats"]
        record["models"][name] = rec
    stats["majority/constant"] = majority_tag_stats(task.train, test, metric)
    score = stats_score(metric)
    record["majority"] = float(score(stats["majority/constant"].sum(0)))
    boot = dict(score=score, resamples=resamples, seed=bootstrap_seed)
    record["gaps"] = {
        "beam_minus_greedy": interval_record(percentile_bootstrap(stats["uni/beam"], stats["uni/greedy"], **boot)),
        "bi_beam_minus_greedy": interval_record(percentile_bootstrap(stats["bi/beam"], stats["bi/greedy"], **boot)),
        "bi_minus_uni": interval_record(percentile_bootstrap(stats["bi/greedy"], stats["uni/greedy"], **boot)),
    }
    return {"record": record, "stats": stats, "columns": stats_columns(metric)}
