"""Stage ``distil``: sequence-level knowledge distillation (Kim & Rush 2016) of the translator into
the conditional MLM's training data, as Mask-Predict trains (Ghazvininejad et al. 2019, Sec. 4.1).

The ``translator`` stage's model translates every training verse's Greek (beam search with the
beam size and length penalty that stage chose on dev); those translations replace the English references as the training targets
the ``cmlm`` stage learns from. Dev and test are copied unchanged (their references stay the human
ones: every BLEU is against them), so no dev or test verse trains either model.

Output ``data/distilled/greek_english/{train,dev,test}.parquet`` (the prepared corpus's schema,
:data:`components.data.store.PARALLEL`; one train row per training verse of the prepared corpus,
its source words unchanged, its target the translation's space-separated tokens) and ``meta.json``
(counts: verses, empty translations, translations whose detokenised form changes when re-read;
the training BLEU of the distilled targets against the human references; the translator's dev
and test BLEU). An empty translation is written as an empty target (the loaders count and drop
it: nothing is dropped silently).
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from typing import Any

from components.checkpoints import load as load_model
from components.config import load_section, resolve_device
from components.data.store import PARALLEL, write_table
from components.data.translation import detokenize, load_translation_task, read_parallel
from components.inference.evaluate_translation import translate
from components.inference.registry import INFERENCE
from components.io import atomic_path, write_json
from components.metrics.bleu import corpus_bleu
from components.seeds import seed_for
from flows.stages.common import StageContext, main
from flows.translation_configs import DistilConfig, TranslatorStageConfig

SPLITS = ("train", "dev", "test")
UNLIMITED = 10 ** 6                     # every training verse is translated, whatever its length


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(DistilConfig, "distil", params)
    data_cfg = load_section(TranslatorStageConfig, "translator", params).data      # its vocabularies
    model_dir = ctx.path(cfg.model_dir)
    prepared = ctx.path(ctx.base.prepared_dir) / "greek_english"
    vocab = ctx.work / "vocab"
    if vocab.exists():
        shutil.rmtree(vocab)
    shutil.copytree(model_dir / "vocab", vocab)
    # the translator's vocabularies; no training pair dropped for its length
    whole = replace(data_cfg, max_source_len=UNLIMITED, max_target_len=UNLIMITED, max_train_pairs=0, max_dev_pairs=0)
    task = load_translation_task(prepared, vocab, whole, seed=seed_for(ctx.base.seed, "translator", "data"))
    if task.stats.get("vocab_trained"):
        raise RuntimeError(f"distil: the subword vocabularies in {model_dir / 'vocab'} do not match translator.data: "
                           "re-run the translator stage")
    device = resolve_device(ctx.base.device)
    model = load_model(model_dir, device=str(device), expect="translator")
    t0 = time.perf_counter()
    decoding_path = model_dir / "decoding.json"
    if not decoding_path.exists():
        raise FileNotFoundError(f"{decoding_path}: the translator's beam settings are missing (re-run the translator stage)")
    decoding = json.loads(decoding_path.read_text())
    decoder = (INFERENCE.build_with("greedy", {}) if cfg.decoder == "greedy" else
               INFERENCE.build_with("beam", {"k": int(decoding["beam_size"]), "length_penalty": float(decoding["length_penalty"])}))
    hyps, seconds = translate(model, decoder, task.train, task.tgt_vocab, batch_size=cfg.batch_size, device=device)
    by_verse = dict(zip(task.train.verse_ids, hyps))
    ids, sources, _ = read_parallel(prepared / "train.parquet")
    missing = [v for v in ids if v not in by_verse]
    stats = task.stats
    dropped = stats.get("empty_source_train", 0) + stats.get("empty_target_train", 0)
    if len(missing) != dropped:
        raise RuntimeError(f"distil: {len(missing)} training verses were not translated, but the loader dropped "
                           f"{dropped} (empty sides): {missing[:10]}")
    out = ctx.path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    targets, empty, changed = [], [], 0
    for vid in ids:
        h = by_verse.get(vid, "")
        toks = h.split()
        if not toks:
            empty.append(vid)
        elif detokenize(toks) != h:
            changed += 1
        targets.append(toks)
    n = write_table(out / "train.parquet", {"verse_id": ids, "source": sources, "target": targets}, PARALLEL)
    for split in ("dev", "test"):
        with atomic_path(out / f"{split}.parquet") as tmp:
            shutil.copyfile(prepared / f"{split}.parquet", tmp)
    refs = task.train.references
    fit = corpus_bleu(hyps, refs)
    translator = json.loads((ctx.path("metrics") / "translator.json").read_text()) \
        if (ctx.path("metrics") / "translator.json").exists() else {}
    meta = {"verses": n, "translated": len(hyps), "not_translated_empty_side": missing[:10],
            "empty_translations": len(empty), "empty_verse_ids": empty[:10],
            "detokenised_form_changed": changed, "decoder": cfg.decoder,
            **(decoding if cfg.decoder == "beam" else {}),
            "train_bleu_vs_references": fit.score, "signature": fit.signature,
            "translator_dev_bleu": (translator.get("dev", {}).get("beam") or {}).get("bleu"),
            "translator_test_bleu": (translator.get("test", {}).get("beam") or {}).get("bleu"),
            "mean_target_tokens": sum(len(t) for t in targets) / max(n, 1)}
    write_json(out / "meta.json", meta)
    ctx.tracker.log_artifact(out / "meta.json", "distil")
    return meta | {"decode_seconds": seconds, "stage_minutes": (time.perf_counter() - t0) / 60.0}


if __name__ == "__main__":
    main("distil")
