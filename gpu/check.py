"""The GPU path as one prepared script: ``python -m gpu.check --out DIR [--budget-s 540] [--quick]``.

Meant for the GPU machine lent to this project (one NVIDIA H100 or H200, 15 minutes of device time
per issue, no network, Python 3.12 with CUDA torch, numpy, pyarrow, scipy, sacrebleu, sentencepiece;
no Ray, MLflow, DVC, Optuna, and no pytest unless carried). It imports only ``components`` (never
``components.tracking``), the standard library, torch and numpy, and ``gpu/vendor`` (pytorch-crf,
MIT licence) when pytorch-crf is not installed. Sections, each timed and each skipped with a
reason when the wall budget left would not fit it:

1. ``tests``: the project's ``gpu``-marked tests, called directly (:mod:`gpu.shims`), pass / fail /
   skipped per check.
2. ``kernels``: ``log_partition`` / ``marginals`` / ``viterbi`` of
   :mod:`components.structures.linear_chain` on the device against pytorch-crf (the bench's
   adapter, :class:`components.bench.crf_libraries.PytorchCRF`) and against our own kernel in
   float64 on the CPU (agreement), at L = 17 / 400 / 1000, B = 32, N = 40 (the bench's shapes);
   times per batch by :func:`components.metrics.timing.compare` (interleaved rounds), plus the
   compiled Viterbi step on CUDA.
3. ``beam``: hard beam decoding (:func:`components.inference.beam.beam_search`, k = 5) of a
   randomly initialised seq2seq tagger (the bench's model, NER-sized vocabularies) against the
   naive per-hypothesis loop (:func:`components.bench.beam.compare_decoding`, the bench's
   96 sentences in batches of 64), then the batched decoder's throughput at larger batches.
4. ``mcmc``: ``mh_mlm`` sweeps (:class:`components.inference.mcmc.mlm_kernels.MHMLM`, energy
   ``norm``) on a randomly initialised conditional MLM built as the bench's MH benchmark builds it
   (``CMLMConfig(max_target_len=64)``, 1,000-id vocabularies, 2 sources of 12 ids, targets of 12):
   proposals/s against the number of chains (1 .. 4096), and at 5 chains against the naive
   Algorithm 4 (:func:`components.bench.mcmc.compare_mh`).
5. ``training``: one epoch of the translator (``fit`` with ``SeqCE``, the default-scale
   ``TranslatorStageConfig`` model and optimiser) and of the CMLM (``train_cmlm``, the default-scale
   ``CMLMStageConfig`` model and training config, one epoch, no per-epoch BLEU), on random token
   ids of the default corpora's sizes and length ranges (data/prepared is DVC-ignored and not on
   the lent machine): time per update.

Writes ``DIR/gpu_check.json`` and ``DIR/gpu_rows.md`` (Markdown rows for BENCHMARKS.md naming the
device) after every section, so a run cut short still leaves what it measured. Without CUDA every
section is skipped ("no CUDA device", exit 0) unless ``--cpu-smoke``, which runs every section on
the CPU at tiny sizes. Exit status: 1 if a test check failed or errored, a kernel disagreed, or a
section raised; else 0.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
VENDOR = Path(__file__).resolve().parent / "vendor"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_T_START = time.perf_counter()                  # the budget counts from here, torch's import included

import torch  # noqa: E402

FORBIDDEN = ("ray", "mlflow", "dvc", "optuna")
SECTIONS = ("tests", "kernels", "beam", "mcmc", "training")
NO_CUDA = "no CUDA device"
BASE_SEED = 0

# The default-scale shapes this script reproduces with random ids (kept in step with the sources by
# tests/test_gpu_check.py): the NER task (data/prepared/ner/meta.json: 8,478 words, 41 labels, dev
# sentences of ~20 tokens), flows/translation_configs.py's TranslatorStageConfig (1,500-id
# vocabularies, 128/192-unit model with tied embeddings, 6,370 training pairs in
# metrics/translator.json, subword lengths 15-58 for 90% of them) and CMLMStageConfig (1,000-id
# vocabularies, pairs of <= 60 subwords a side, 5,750 pairs, CMLMConfig(max_target_len=64)).
NER_WORDS, NER_LABELS, NER_LENGTHS = 8478, 41, (5, 35)
TRANSLATOR = dict(src_vocab=1500, tgt_vocab=1500, pairs=6370, src_len=(10, 60), tgt_len=(10, 58),
                  max_source_len=80, max_target_len=100,
                  model=dict(embedding_dim=128, hidden=192, attention_dim=192, dropout=0.2, tie_embeddings=True))
CMLM = dict(src_vocab=1000, tgt_vocab=1000, pairs=5750, src_len=(10, 60), tgt_len=(5, 40),
            max_source_len=60, max_target_len=60, model=dict(max_target_len=64),
            train=dict(lr=0.003, patience=5))


# ----------------------------------------------------------------------------------------------------------------
# sizes per mode
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    mode: str                                   # "cuda" | "cuda-quick" | "cpu-smoke"
    device: str
    estimates: dict[str, float]                 # seconds a section needs at least, else it is skipped
    cap_s: float                                # time cap per timed comparison
    min_turn_s: float
    labels: tuple[int, ...] = (17, 400, 1000)
    batch: int = 32
    length: int = 40
    compiled_viterbi: bool = True
    beam_sentences: int = 96
    beam_batch: int = 64
    beam_k: int = 5
    beam_vocab: tuple[int, int] = (NER_WORDS, NER_LABELS)
    beam_lengths: tuple[int, int] = NER_LENGTHS
    beam_model: dict = field(default_factory=dict)
    throughput_sentences: int = 2048
    throughput_batches: tuple[int, ...] = (64, 256, 1024, 2048)
    min_time_s: float = 0.5                     # a throughput / sweep measurement runs at least this long
    mh_chains: tuple[int, ...] = (1, 4, 16, 64, 256, 1024, 4096)
    mh_vocab: tuple[int, int] = (CMLM["src_vocab"], CMLM["tgt_vocab"])
    mh_model: dict = field(default_factory=lambda: dict(CMLM["model"]))
    mh_sentences: int = 2
    mh_length: int = 12
    mh_naive_chains: int = 5                    # 0: no comparison with the naive Algorithm 4
    mh_max_rows: int = 8192                     # rows per conditionals call (bounds memory at many chains)
    tr_pairs: int = TRANSLATOR["pairs"]
    tr_model: dict = field(default_factory=lambda: dict(TRANSLATOR["model"]))
    tr_vocab: tuple[int, int] = (TRANSLATOR["src_vocab"], TRANSLATOR["tgt_vocab"])
    tr_lengths: tuple[tuple[int, int], tuple[int, int]] = (TRANSLATOR["src_len"], TRANSLATOR["tgt_len"])
    cm_pairs: int = CMLM["pairs"]
    cm_model: dict = field(default_factory=lambda: dict(CMLM["model"]))
    cm_vocab: tuple[int, int] = (CMLM["src_vocab"], CMLM["tgt_vocab"])
    cm_lengths: tuple[tuple[int, int], tuple[int, int]] = (CMLM["src_len"], CMLM["tgt_len"])
    dev_pairs: int = 256
    train_batch: int = 32


def make_plan(device: str, quick: bool, smoke: bool) -> Plan:
    if smoke:
        return Plan(mode="cpu-smoke", device=device, cap_s=0.3, min_turn_s=0.01,
                    estimates=dict(tests=2, kernels=2, beam=2, mcmc=2, training=2),
                    labels=(5, 17), batch=4, length=8, compiled_viterbi=False,
                    beam_sentences=6, beam_batch=3, beam_k=3, beam_vocab=(60, 7), beam_lengths=(2, 6),
                    beam_model=dict(embedding_dim=8, hidden=8, label_dim=4),
                    throughput_sentences=12, throughput_batches=(4, 12), min_time_s=0.02,
                    mh_chains=(1, 4, 16), mh_vocab=(30, 30),
                    mh_model=dict(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32,
                                  max_source_len=16, max_target_len=16),
                    mh_sentences=2, mh_length=4, mh_naive_chains=2, mh_max_rows=64,
                    tr_pairs=24, tr_model=dict(embedding_dim=8, hidden=8, attention_dim=8, tie_embeddings=True),
                    tr_vocab=(40, 40), tr_lengths=((2, 6), (2, 6)),
                    cm_pairs=24, cm_model=dict(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32,
                                               max_source_len=16, max_target_len=16),
                    cm_vocab=(40, 40), cm_lengths=((2, 6), (2, 6)), dev_pairs=8, train_batch=8)
    if quick:
        return Plan(mode="cuda-quick", device=device, cap_s=3.0, min_turn_s=0.1,
                    estimates=dict(tests=20, kernels=45, beam=30, mcmc=40, training=40),
                    compiled_viterbi=False, beam_sentences=32, throughput_sentences=1024,
                    throughput_batches=(64, 1024), min_time_s=0.3, mh_chains=(1, 16, 256, 2048),
                    mh_naive_chains=0, tr_pairs=640, cm_pairs=640, dev_pairs=128)
    return Plan(mode="cuda", device=device, cap_s=8.0, min_turn_s=0.2,
                estimates=dict(tests=30, kernels=90, beam=60, mcmc=90, training=90))


# ----------------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------------
class Budget:
    def __init__(self, seconds: float, t0: float | None = None):
        self.t0 = time.perf_counter() if t0 is None else t0
        self.total = float(seconds)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.total - self.elapsed()


_BUDGET = Budget(540)
_CHECKPOINT: Callable[[], None] = lambda: None      # writes the outputs so far (set by main)


def log(msg: str) -> None:
    print(f"[gpu.check {_BUDGET.elapsed():6.1f}s] {msg}", flush=True)


def sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def seed(*name: str | int) -> int:
    from components.seeds import seed_for
    return seed_for(BASE_SEED, "gpu_check", *name)


def timed_repeats(fn: Callable[[], Any], device: str, *, min_time_s: float, min_reps: int = 3, max_reps: int = 50,
                  time_left: Callable[[], float] = lambda: math.inf) -> dict[str, float]:
    """One untimed call, then calls (synchronised) until ``min_reps`` and ``min_time_s`` are reached:
    the median / min seconds per call and the number of timed calls."""
    fn()
    sync(device)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_reps:
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
        if len(times) >= min_reps and (time.perf_counter() - start >= min_time_s or time_left() < 0):
            break
    return {"median_s": statistics.median(times), "min_s": min(times), "reps": float(len(times))}


def clean(x: Any) -> Any:
    """JSON-safe: non-finite floats as strings, tensors as lists, tuples as lists."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if torch.is_tensor(x):
        return clean(x.tolist())
    try:
        import numpy as np
        if isinstance(x, np.generic):
            return clean(x.item())
    except ImportError:
        pass
    return str(x)


def device_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "device": device, "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "cuda_runtime": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
        "cpu_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(name=torch.cuda.get_device_name(0), gpu_memory_gib=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count,
                    cudnn=torch.backends.cudnn.version(), device_count=torch.cuda.device_count(),
                    tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32))
    if device == "cpu":
        info["name"] = f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    return info


def forbidden_loaded() -> list[str]:
    return sorted(m for m, mod in sys.modules.items() if mod is not None and m.split(".")[0] in FORBIDDEN)


def _torchcrf() -> str | None:
    """Where pytorch-crf comes from: "installed", "vendored (gpu/vendor, MIT)" or None."""
    try:
        import torchcrf  # noqa: F401
        return "vendored (gpu/vendor, MIT)" if str(VENDOR) in str(getattr(torchcrf, "__file__", "")) else "installed"
    except ImportError:
        pass
    if (VENDOR / "torchcrf" / "__init__.py").exists():
        sys.path.append(str(VENDOR))
        try:
            import torchcrf  # noqa: F401
            return "vendored (gpu/vendor, MIT)"
        except ImportError:
            return None
    return None


def _lengths(n: int, lo_hi: tuple[int, int], g: torch.Generator) -> list[int]:
    lo, hi = lo_hi
    return torch.randint(lo, hi + 1, (n,), generator=g).tolist()


# ----------------------------------------------------------------------------------------------------------------
# 1. the gpu-marked tests
# ----------------------------------------------------------------------------------------------------------------
def section_tests(plan: Plan, budget: Budget, out: dict[str, Any]) -> None:
    from gpu.shims import run_marked_tests
    out.update(run_marked_tests(ROOT, "gpu", progress=log, time_left=budget.left))
    out["ok"] = out["failed"] == 0 and out["errors"] == 0


# ----------------------------------------------------------------------------------------------------------------
# 2. chain kernels
# ----------------------------------------------------------------------------------------------------------------
def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> tuple[bool, float]:
    a, b = a.double().cpu(), b.double().cpu()
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol)), float((a - b).abs().max())


def section_kernels(plan: Plan, budget: Budget, out: dict[str, Any]) -> None:
    from components.metrics.timing import TimingConfig, compare, ratio_metrics
    from components.structures import linear_chain as lc
    dev = plan.device
    crf_source = _torchcrf()
    PytorchCRF = None
    if crf_source:
        from components.bench.crf_libraries import PytorchCRF
    baseline = "pytorch_crf" if PytorchCRF else "ours_cpu"
    out.update({"shape": {"batch": plan.batch, "length": plan.length}, "pytorch_crf": crf_source or "absent",
                "baseline": baseline, "dtype": "float32", "agreement_all": True, "per_L": {},
                "data": "random potentials as the bench's: unary N(0, 1), transition 0.1 N(0, 1), full mask"})
    timing = TimingConfig(max_seconds=plan.cap_s, min_turn_s=plan.min_turn_s)
    g = torch.Generator().manual_seed(seed("kernels"))
    compiled_later = []
    for i, L in enumerate(plan.labels):
        left_L = len(plan.labels) - i
        if budget.left() < plan.estimates["kernels"] / len(plan.labels) * 0.5:
            out["per_L"][f"L{L}"] = {"skipped": f"budget: {budget.left():.0f} s left"}
            continue
        B, N = plan.batch, plan.length
        unary_c = torch.randn(B, N, L, generator=g)
        trans_c = torch.randn(L, L, generator=g) * 0.1
        mask_c = torch.ones(B, N, dtype=torch.bool)
        u, w, m = unary_c.to(dev), trans_c.to(dev), mask_c.to(dev)
        r: dict[str, Any] = {}
        # agreement: our device kernel (float32) against our kernel in float64 on the CPU, and pytorch-crf
        u64, w64 = unary_c.double(), trans_c.double()
        ref_z = lc.log_partition(u64, w64, mask_c)
        ref_marg = lc.marginals(u64, w64, mask_c)
        ref_y, ref_best = lc.viterbi(u64, w64, mask_c)
        z = lc.log_partition(u, w, m)
        marg = lc.marginals(u, w, m)
        y, _ = lc.viterbi(u, w, m)
        agree: dict[str, Any] = {}
        agree["log_partition_vs_cpu64"], agree["log_partition_vs_cpu64_max_abs"] = _close(z, ref_z, 1e-4, 1e-3)
        agree["marginals_vs_cpu64"], agree["marginals_vs_cpu64_max_abs"] = _close(marg, ref_marg, 1e-3, 1e-4)
        path = lc.score(u64, w64, mask_c, y.cpu())
        agree["viterbi_score_vs_cpu64"], agree["viterbi_score_vs_cpu64_max_abs"] = _close(path, ref_best, 1e-6, 1e-3)
        agree["viterbi_labels_equal_cpu64"] = float((y.cpu() == ref_y).double().mean())
        base = None
        if PytorchCRF is not None:
            base = PytorchCRF(w)
            agree["log_partition_vs_pytorch_crf"], agree["log_partition_vs_pytorch_crf_max_abs"] = _close(
                z, base.log_partition(u, m), 1e-4, 1e-3)
            agree["marginals_vs_pytorch_crf"], agree["marginals_vs_pytorch_crf_max_abs"] = _close(
                marg, base.marginals(u, m), 1e-3, 1e-4)
            ty = torch.as_tensor(base.viterbi(u, m))
            theirs = lc.score(u64, w64, mask_c, ty.long().cpu())
            agree["viterbi_score_vs_pytorch_crf"], agree["viterbi_score_vs_pytorch_crf_max_abs"] = _close(
                path, theirs, 1e-6, 1e-3)
        ok = all(v for k, v in agree.items() if isinstance(v, bool))
        agree["all"] = ok
        out["agreement_all"] = out["agreement_all"] and ok
        r["agreement"] = agree
        log(f"kernels {dev} L={L}: agreement {'ok' if ok else 'FAILED'} "
            f"(max |dlogZ| vs cpu64 {agree['log_partition_vs_cpu64_max_abs']:.2e})")
        # (inputs bound as defaults: the compiled Viterbi comparison calls its baseline after the loop)
        ours = {"log_partition": lambda u=u, w=w, m=m: lc.log_partition(u, w, m),
                "marginals": lambda u=u, w=w, m=m: lc.marginals(u, w, m),
                "viterbi": lambda u=u, w=w, m=m: lc.viterbi(u, w, m)}
        if base is not None:
            theirs_fns = {"log_partition": lambda b=base, u=u, m=m: b.log_partition(u, m),
                          "marginals": lambda b=base, u=u, m=m: b.marginals(u, m),
                          "viterbi": lambda b=base, u=u, m=m: b.viterbi(u, m)}
        else:
            theirs_fns = {"log_partition": lambda u=unary_c, w=trans_c, m=mask_c: lc.log_partition(u, w, m),
                          "marginals": lambda u=unary_c, w=trans_c, m=mask_c: lc.marginals(u, w, m),
                          "viterbi": lambda u=unary_c, w=trans_c, m=mask_c: lc.viterbi(u, w, m)}
        # each comparison gets at most its share of the budget left
        per_cmp = max(0.2, min(plan.cap_s, budget.left() / (3 * left_L + 8)))
        for op in ("log_partition", "marginals", "viterbi"):
            res = compare({baseline: theirs_fns[op], "ours": ours[op]}, baseline=baseline, ours="ours",
                          timing=timing, device=dev, max_seconds=per_cmp)
            rr = {"ours_ms": 1000 * res["sides"]["ours"]["median_s"],
                  f"{baseline}_ms": 1000 * res["sides"][baseline]["median_s"],
                  "rounds": res["rounds"], "converged": res["converged"]}
            rr.update(ratio_metrics(res, f"{baseline}/ours", "speedup"))
            r[op] = rr
            log(f"kernels {dev} L={L} {op}: ours {rr['ours_ms']:.3f} ms, {baseline} {rr[f'{baseline}_ms']:.3f} ms, "
                f"{rr['speedup']:.1f}x ({rr['speedup_q1']:.1f}-{rr['speedup_q3']:.1f})")
        if plan.compiled_viterbi and str(dev).startswith("cuda") and L >= 64:
            compiled_later.append((L, u, w, m, y, theirs_fns["viterbi"]))
        out["per_L"][f"L{L}"] = r
        out["ok"] = out["agreement_all"]
        _CHECKPOINT()
    # the compiled max-plus Viterbi step last: its first call compiles (inductor/triton, tens of seconds cold)
    for L, u, w, m, y, theirs in compiled_later:
        r = out["per_L"][f"L{L}"]
        if budget.left() < 60:
            r["viterbi_compiled"] = {"skipped": f"budget: {budget.left():.0f} s left < 60 s for compiling"}
            continue
        t0 = time.perf_counter()
        yc, _ = lc.viterbi(u, w, m, compile=True)
        sync(dev)
        first = time.perf_counter() - t0
        failed = bool(getattr(lc._COMPILED_MAXPLUS, "failed", False))
        rc: dict[str, Any] = {"first_call_s": first, "compile_failed_fell_back_to_eager": failed,
                              "labels_equal_eager": bool(torch.equal(yc, y))}
        per_cmp = max(0.2, min(plan.cap_s, budget.left() / 4))
        res = compare({baseline: theirs, "ours_compiled": lambda u=u, w=w, m=m: lc.viterbi(u, w, m, compile=True)},
                      baseline=baseline, ours="ours_compiled", timing=timing, device=dev, max_seconds=per_cmp)
        rc.update({"ours_ms": 1000 * res["sides"]["ours_compiled"]["median_s"],
                   f"{baseline}_ms": 1000 * res["sides"][baseline]["median_s"],
                   "rounds": res["rounds"], "converged": res["converged"]})
        rc.update(ratio_metrics(res, f"{baseline}/ours_compiled", "speedup"))
        r["viterbi_compiled"] = rc
        log(f"kernels {dev} L={L} viterbi compiled: {rc['ours_ms']:.3f} ms, {rc['speedup']:.1f}x "
            f"(first call {first:.1f} s{', FELL BACK TO EAGER' if failed else ''})")
        _CHECKPOINT()
    out["ok"] = out["agreement_all"]


# ----------------------------------------------------------------------------------------------------------------
# 3. beam decoding
# ----------------------------------------------------------------------------------------------------------------
def _tagging_batches(n: int, batch_size: int, vocab: tuple[int, int], lengths: tuple[int, int], device: str,
                     g: torch.Generator) -> list[Any]:
    from components.data.batching import TaggingBatch
    n_words, n_labels = vocab
    lens = _lengths(n, lengths, g)
    out = []
    for s in range(0, n, batch_size):
        ls = torch.tensor(lens[s:s + batch_size])
        B, T = len(ls), int(ls.max())
        mask = torch.arange(T)[None] < ls[:, None]
        words = torch.randint(2, n_words, (B, T), generator=g).masked_fill(~mask, 0)
        tags = torch.randint(0, n_labels, (B, T), generator=g).masked_fill(~mask, 0)
        chars = torch.zeros(B, T, 1, dtype=torch.long)
        out.append(TaggingBatch(words, chars, tags, mask, ls, torch.arange(s, s + B)).to(device))
    return out


def section_beam(plan: Plan, budget: Budget, out: dict[str, Any]) -> None:
    from components.bench.beam import compare_decoding, decode_all
    from components.inference.beam import beam_search
    from components.metrics.timing import TimingConfig
    from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
    dev = plan.device
    cfg = Seq2SeqTaggerConfig(**plan.beam_model)
    n_words, n_labels = plan.beam_vocab
    model = Seq2SeqTagger(cfg, n_words, n_labels, seed=seed("beam", "model")).to(dev).eval()
    g = torch.Generator().manual_seed(seed("beam", "data"))
    k = plan.beam_k
    out.update({"model": f"Seq2SeqTagger({cfg}), random init", "vocab": {"words": n_words, "labels": n_labels},
                "data": f"random word ids, sentence lengths uniform in {list(plan.beam_lengths)}", "k": k})
    batches = _tagging_batches(plan.beam_sentences, plan.beam_batch, plan.beam_vocab, plan.beam_lengths, dev, g)
    timing = TimingConfig(max_seconds=plan.cap_s, min_turn_s=plan.min_turn_s)
    r = compare_decoding(model, batches, k, target=20.0, timing=timing, device=dev)
    out["vs_naive"] = {**r, "sentences": plan.beam_sentences, "batch_size": plan.beam_batch}
    log(f"beam {dev}: k={k}, {plan.beam_sentences} sentences: batched {r['batched_sents_per_s']:.0f} sent/s, naive "
        f"{r['naive_sents_per_s']:.0f} sent/s, ratio {r[f'decode_ratio_k{k}']:.1f}x")
    _CHECKPOINT()
    sweep: list[dict[str, Any]] = []
    out["throughput"] = sweep
    pool = _tagging_batches(plan.throughput_sentences, plan.throughput_sentences, plan.beam_vocab, plan.beam_lengths,
                            "cpu", g)[0]
    tokens_total = int(pool.mask.sum())
    for bs in plan.throughput_batches:
        if budget.left() < 10 * plan.min_time_s:
            sweep.append({"batch_size": bs, "skipped": f"budget: {budget.left():.0f} s left"})
            continue
        rows = [pool.to(dev)] if bs >= plan.throughput_sentences else None
        if rows is None:
            from components.data.batching import TaggingBatch
            rows = []
            for s in range(0, plan.throughput_sentences, bs):
                sl = slice(s, s + bs)
                T = int(pool.lengths[sl].max())
                rows.append(TaggingBatch(pool.words[sl, :T], pool.chars[sl, :T], pool.tags[sl, :T], pool.mask[sl, :T],
                                         pool.lengths[sl], pool.index[sl]).to(dev))
        try:
            t = timed_repeats(lambda: decode_all(lambda b: beam_search(model, b, k), rows), dev,
                              min_time_s=plan.min_time_s, time_left=budget.left)
        except torch.cuda.OutOfMemoryError as e:  # type: ignore[attr-defined]
            sweep.append({"batch_size": bs, "error": f"out of memory: {str(e)[:200]}"})
            torch.cuda.empty_cache()
            break
        row = {"batch_size": bs, "sentences": plan.throughput_sentences, "seconds": t["median_s"],
               "sents_per_s": plan.throughput_sentences / t["median_s"], "tokens_per_s": tokens_total / t["median_s"],
               "reps": t["reps"]}
        sweep.append(row)
        log(f"beam {dev}: batch {bs}: {row['sents_per_s']:.0f} sent/s ({row['tokens_per_s']:.0f} tokens/s)")
        _CHECKPOINT()


# ----------------------------------------------------------------------------------------------------------------
# 4. MH chains
# ----------------------------------------------------------------------------------------------------------------
def section_mcmc(plan: Plan, budget: Budget, out: dict[str, Any]) -> None:
    from components.bench.mcmc import compare_mh
    from components.energies.mlm import MLMEnergy, MLMEnergyConfig
    from components.inference.mcmc.mlm_kernels import MHMLM, MHMLMConfig
    from components.inference.mcmc.traces import shard_batch
    from components.metrics.timing import TimingConfig
    from components.models.mlm import CMLMConfig, ConditionalMLM
    dev = plan.device
    mcfg = CMLMConfig(**plan.mh_model)
    vs, vt = plan.mh_vocab
    model = ConditionalMLM(vs, vt, mcfg, seed=seed("mcmc", "model")).to(dev).eval()
    g = torch.Generator().manual_seed(seed("mcmc", "sources"))
    sources = [torch.randint(3, vs, (plan.mh_length,), generator=g).tolist() for _ in range(plan.mh_sentences)]
    batch = shard_batch(sources, [plan.mh_length] * plan.mh_sentences, dev)
    tokens = int(batch.mask.sum())
    energy = MLMEnergy(model, "norm", MLMEnergyConfig(max_rows=plan.mh_max_rows))
    out.update({"model": f"ConditionalMLM({vs}, {vt}, {mcfg}), random init", "energy": "norm",
                "sampler": f"mh_mlm {MHMLMConfig()}", "sentences": plan.mh_sentences,
                "target_length": plan.mh_length, "max_rows_per_call": plan.mh_max_rows})
    rows: list[dict[str, Any]] = []
    out["chains"] = rows
    for C in plan.mh_chains:
        if budget.left() < 8 * plan.min_time_s:
            rows.append({"chains": C, "skipped": f"budget: {budget.left():.0f} s left"})
            continue
        sampler = MHMLM(MHMLMConfig(), seed=seed("mcmc", "chains", C))
        try:
            with torch.no_grad():
                state = sampler.init(energy, batch, C)
            holder = {"s": state, "acc": []}

            def sweep() -> None:
                holder["s"], stats = sampler.step(holder["s"])
                holder["acc"].append(stats["accepted"])

            t = timed_repeats(sweep, dev, min_time_s=plan.min_time_s, max_reps=20, time_left=budget.left)
        except torch.cuda.OutOfMemoryError as e:  # type: ignore[attr-defined]
            rows.append({"chains": C, "error": f"out of memory: {str(e)[:200]}"})
            torch.cuda.empty_cache()
            break
        proposals = C * tokens
        acc = float(torch.stack(holder["acc"]).float().mean())
        row = {"chains": C, "proposals_per_sweep": proposals, "sweep_s": t["median_s"],
               "proposals_per_s": proposals / t["median_s"], "acceptance": acc, "sweeps_timed": t["reps"]}
        rows.append(row)
        log(f"mcmc {dev}: {C} chains: {row['proposals_per_s']:.0f} proposals/s ({1000 * t['median_s']:.1f} ms/sweep, "
            f"acceptance {acc:.2f})")
        _CHECKPOINT()
    if plan.mh_naive_chains:
        if budget.left() < plan.estimates["mcmc"] / 3:
            out["vs_naive"] = {"skipped": f"budget: {budget.left():.0f} s left"}
        else:
            timing = TimingConfig(max_seconds=plan.cap_s, min_turn_s=plan.min_turn_s)
            bench_energy = MLMEnergy(model, "norm")
            r = compare_mh(bench_energy, batch, MHMLMConfig(), n_chains=plan.mh_naive_chains, sweeps=1,
                           timing=timing, device=dev, seed=seed("mcmc", "naive"))
            out["vs_naive"] = r
            log(f"mcmc {dev}: vs naive Algorithm 4 at {plan.mh_naive_chains} chains: ours "
                f"{r['fast_proposals_per_s']:.0f} proposals/s, naive {r['naive_proposals_per_s']:.1f}, "
                f"ratio {r['mh_ratio']:.1f}x")


# ----------------------------------------------------------------------------------------------------------------
# 5. training epochs
# ----------------------------------------------------------------------------------------------------------------
def _parallel(n: int, vocab: tuple[int, int], lengths: tuple[tuple[int, int], tuple[int, int]], max_target_len: int,
              g: torch.Generator, name: str) -> Any:
    from components.data.translation import EOS, ParallelDataset, TranslationConfig
    d = TranslationConfig()
    vs, vt = vocab
    sl = _lengths(n, lengths[0], g)
    tl = _lengths(n, lengths[1], g)
    src = [torch.randint(3, vs, (a,), generator=g).tolist() for a in sl]
    tgt = [torch.randint(3, vt, (b,), generator=g).tolist() + [EOS] for b in tl]
    ids = [f"r{i}" for i in range(n)]
    return ParallelDataset(ids, [""] * n, [""] * n, sl, src, tgt, max_target_len=max_target_len, len_a=d.len_a,
                           len_b=d.len_b, name=name)


class _UpdateClock:
    """``on_batch`` callback: the time of each update's end (after ``loss.item()``, which
    synchronises the device)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.marks: list[float] = []

    def __call__(self, i: int, n: int, loss: float) -> None:
        self.marks.append(time.perf_counter())

    def summary(self) -> dict[str, float]:
        d = [b - a for a, b in zip(self.marks, self.marks[1:])]
        first = self.marks[0] - self.t0 if self.marks else math.nan
        return {"updates": float(len(self.marks)), "first_update_s": first,
                "median_update_ms": 1000 * statistics.median(d) if d else math.nan,
                "mean_update_ms": 1000 * statistics.mean(d) if d else math.nan,
                "p90_update_ms": 1000 * sorted(d)[max(0, math.ceil(0.9 * len(d)) - 1)] if d else math.nan}


def _train_translator(plan: Plan, dev: str) -> dict[str, Any]:
    from components.data.translation import EOS
    from components.models.translator import AttentionTranslator, TranslatorConfig
    from components.training.loop import fit
    from components.training.search_aware import SeqCE
    from components.training.translator import TranslatorTrainConfig
    g = torch.Generator().manual_seed(seed("training", "translator", "data"))
    train = _parallel(plan.tr_pairs, plan.tr_vocab, plan.tr_lengths, TRANSLATOR["max_target_len"], g, "train")
    devset = _parallel(plan.dev_pairs, plan.tr_vocab, plan.tr_lengths, TRANSLATOR["max_target_len"], g, "dev")
    mcfg = TranslatorConfig(**plan.tr_model)
    model = AttentionTranslator(mcfg, plan.tr_vocab[0], plan.tr_vocab[1], eos=EOS, pad=0,
                                seed=seed("training", "translator", "model")).to(dev)
    tcfg = TranslatorTrainConfig()
    optim = dataclasses.replace(tcfg.optim, epochs=1, batch_size=plan.train_batch)
    objective = SeqCE(tcfg.objective)
    dev_batches = list(devset.batches(64, device=dev))

    def evaluate(m: Any) -> dict[str, float]:      # teacher-forced dev loss: random ids have no vocabulary for BLEU
        return {"score": -statistics.mean(float(objective(m, b)) for b in dev_batches)}

    n_batches = -(-len(train) // optim.batch_size)
    clock = _UpdateClock()
    torch.manual_seed(seed("training", "translator", "dropout"))
    st = fit(model, objective, lambda e: train.batches(optim.batch_size, shuffle=True, seed=seed("tr", "epoch", e),
                                                       device=dev), n_batches, evaluate, optim, on_batch=clock)
    rec = st.history[0]
    out = {"model": f"AttentionTranslator({mcfg})", "optimiser": f"{optim}", "objective": f"SeqCE({tcfg.objective})",
           "pairs": len(train), "target_tokens": train.n_target_tokens, "batch_size": optim.batch_size,
           "epoch_train_s": st.seconds[0], "train_loss": rec["train_loss"], "dev_loss": -rec["dev_score"],
           "dev": "teacher-forced loss on random dev pairs (BLEU needs a vocabulary)", **clock.summary()}
    out["pairs_per_s"] = out["pairs"] / out["epoch_train_s"]
    out["target_tokens_per_s"] = out["target_tokens"] / out["epoch_train_s"]
    return out


def _train_cmlm(plan: Plan, dev: str) -> dict[str, Any]:
    from components.models.mlm import CMLMConfig, ConditionalMLM
    from components.training.cmlm import CMLMTrainConfig, train_cmlm
    g = torch.Generator().manual_seed(seed("training", "cmlm", "data"))
    train = _parallel(plan.cm_pairs, plan.cm_vocab, plan.cm_lengths, CMLM["max_target_len"], g, "train")
    devset = _parallel(plan.dev_pairs, plan.cm_vocab, plan.cm_lengths, CMLM["max_target_len"], g, "dev")
    mcfg = CMLMConfig(**plan.cm_model)
    model = ConditionalMLM(plan.cm_vocab[0], plan.cm_vocab[1], mcfg, seed=seed("training", "cmlm", "model")).to(dev)
    cfg = CMLMTrainConfig(**CMLM["train"], epochs=1, batch_size=plan.train_batch, curve_bleu_pairs=0)
    clock = _UpdateClock()
    res = train_cmlm(model, SimpleNamespace(train=train, dev=devset), cfg, seed=seed("training", "cmlm"),
                     on_batch=clock)
    rec = res.history[0]
    out = {"model": f"ConditionalMLM({mcfg})", "config": f"{cfg}", "pairs": len(train),
           "target_tokens": int(sum(len(t) - 1 for t in train.tgt_ids)), "batch_size": cfg.batch_size,
           "epoch_train_s": res.seconds[0], "train_loss": rec["train_loss"],
           "dev_token_loss": rec.get("dev_token_loss"), "dev_unigram_loss": rec.get("dev_unigram_loss"),
           **clock.summary()}
    out["pairs_per_s"] = out["pairs"] / out["epoch_train_s"]
    out["target_tokens_per_s"] = out["target_tokens"] / out["epoch_train_s"]
    return out


def section_training(plan: Plan, budget: Budget, out: dict[str, Any]) -> None:
    dev = plan.device
    out["data"] = ("random token ids (ids 3..V-1, eos-terminated targets) with the default corpora's pair counts "
                   "and subword length ranges; data/prepared is not used")
    for name, fn in (("translator", _train_translator), ("cmlm", _train_cmlm)):
        if budget.left() < plan.estimates["training"] / 3:
            out[name] = {"skipped": f"budget: {budget.left():.0f} s left"}
            continue
        try:
            out[name] = fn(plan, dev)
        except torch.cuda.OutOfMemoryError as e:  # type: ignore[attr-defined]
            out[name] = {"error": f"out of memory: {str(e)[:200]}"}
            torch.cuda.empty_cache()
            continue
        r = out[name]
        log(f"training {dev} {name}: {int(r['updates'])} updates, {r['median_update_ms']:.1f} ms/update (median), "
            f"epoch {r['epoch_train_s']:.1f} s, {r['pairs_per_s']:.0f} pairs/s")
        _CHECKPOINT()


# ----------------------------------------------------------------------------------------------------------------
# outputs
# ----------------------------------------------------------------------------------------------------------------
def _f(x: Any, fmt: str = "{:.2f}") -> str:
    return fmt.format(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else "–"


def rows_markdown(report: dict[str, Any]) -> str:
    info = report["device"]
    name = info.get("name", info["device"])
    dev = (f"{name} (torch {info['torch']}, CUDA {info.get('cuda_runtime')})" if info["device"] != "cpu"
           else f"{name}, torch {info['torch']}")
    when = report["started"][:10]
    lines = [f"<!-- python -m gpu.check ({report['mode']}), {report['started']}, device: {dev} -->", ""]
    S = report["sections"]
    k = S.get("kernels", {})
    if "per_L" in k:
        base = k["baseline"]
        lines += [f"#### Chain kernels on {name} ({when}), B = {k['shape']['batch']}, N = {k['shape']['length']}, "
                  f"float32, against {base} ({k['pytorch_crf']})", "",
                  f"| device | L | op | ours (ms/batch) | {base} (ms/batch) | ratio (IQR) | rounds | converged | agreement |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for key, r in k["per_L"].items():
            if "skipped" in r:
                lines.append(f"| {name} | {key[1:]} | – | {r['skipped']} | | | | | |")
                continue
            for op in ("log_partition", "marginals", "viterbi", "viterbi_compiled"):
                x = r.get(op)
                if not isinstance(x, dict):
                    continue
                if "skipped" in x:
                    lines.append(f"| {name} | {key[1:]} | {op} | {x['skipped']} | | | | | |")
                    continue
                lines.append(f"| {name} | {key[1:]} | {op.replace('_compiled', ' (compiled)')} | {_f(x['ours_ms'], '{:.3f}')} | "
                             f"{_f(x[f'{base}_ms'], '{:.3f}')} | {_f(x['speedup'], '{:.1f}')}× "
                             f"({_f(x['speedup_q1'], '{:.1f}')}–{_f(x['speedup_q3'], '{:.1f}')}) | {x['rounds']} | "
                             f"{x['converged']} | {'yes' if r['agreement']['all'] else 'NO'} |")
        lines.append("")
    b = S.get("beam", {})
    if "vs_naive" in b:
        r = b["vs_naive"]
        kk = b["k"]
        lines += [f"#### Hard beam decoding on {name} ({when}), k = {kk}, random-init seq2seq tagger", "",
                  "| device | sentences (batch) | batched sent/s | naive sent/s | ratio (IQR) | rounds | converged |",
                  "|---|---|---|---|---|---|---|",
                  f"| {name} | {r['sentences']} ({r['batch_size']}) | {_f(r['batched_sents_per_s'], '{:.0f}')} | "
                  f"{_f(r['naive_sents_per_s'], '{:.0f}')} | {_f(r[f'decode_ratio_k{kk}'], '{:.1f}')}× "
                  f"({_f(r[f'decode_ratio_k{kk}_q1'], '{:.1f}')}–{_f(r[f'decode_ratio_k{kk}_q3'], '{:.1f}')}) | "
                  f"{int(r['rounds'])} | {r['converged']} |", "",
                  "| device | decode batch | sentences | seconds | sent/s | tokens/s |", "|---|---|---|---|---|---|"]
        for t in b.get("throughput", []):
            if "seconds" in t:
                lines.append(f"| {name} | {t['batch_size']} | {t['sentences']} | {_f(t['seconds'], '{:.3f}')} | "
                             f"{_f(t['sents_per_s'], '{:.0f}')} | {_f(t['tokens_per_s'], '{:.0f}')} |")
            else:
                lines.append(f"| {name} | {t['batch_size']} | {t.get('skipped') or t.get('error')} | | | |")
        lines.append("")
    m = S.get("mcmc", {})
    if "chains" in m:
        lines += [f"#### MH with MLM proposals on {name} ({when}), random-init CMLM, energy norm, "
                  f"{m['sentences']} sentences x {m['target_length']} tokens", "",
                  "| device | chains | proposals/sweep | ms/sweep | proposals/s | acceptance |", "|---|---|---|---|---|---|"]
        for r in m["chains"]:
            if "sweep_s" in r:
                lines.append(f"| {name} | {r['chains']} | {r['proposals_per_sweep']} | {_f(1000 * r['sweep_s'], '{:.1f}')} | "
                             f"{_f(r['proposals_per_s'], '{:.0f}')} | {_f(r['acceptance'])} |")
            else:
                lines.append(f"| {name} | {r['chains']} | {r.get('skipped') or r.get('error')} | | | |")
        v = m.get("vs_naive")
        if isinstance(v, dict) and "mh_ratio" in v:
            lines += ["", "| device | chains x sentences x length | naive proposals/s | ours proposals/s | ratio (IQR) | "
                      "rounds (converged) |", "|---|---|---|---|---|---|",
                      f"| {name} | {int(v['chains'])} x {int(v['instances'])} x {v['mean_length']:.0f} | "
                      f"{_f(v['naive_proposals_per_s'], '{:.1f}')} | {_f(v['fast_proposals_per_s'], '{:.0f}')} | "
                      f"{_f(v['mh_ratio'], '{:.1f}')}× ({_f(v['mh_ratio_q1'], '{:.1f}')}–{_f(v['mh_ratio_q3'], '{:.1f}')}) | "
                      f"{int(v['rounds'])} ({v['converged']}) |"]
        lines.append("")
    t = S.get("training", {})
    if "translator" in t or "cmlm" in t:
        lines += [f"#### One training epoch on {name} ({when}), random token ids of the default corpora's sizes", "",
                  "| device | model | pairs (batch) | updates | ms/update (median) | epoch (s) | pairs/s | target tokens/s |",
                  "|---|---|---|---|---|---|---|---|"]
        for key in ("translator", "cmlm"):
            r = t.get(key, {})
            if "median_update_ms" in r:
                lines.append(f"| {name} | {key} | {r['pairs']} ({r['batch_size']}) | {int(r['updates'])} | "
                             f"{_f(r['median_update_ms'], '{:.1f}')} | {_f(r['epoch_train_s'], '{:.1f}')} | "
                             f"{_f(r['pairs_per_s'], '{:.0f}')} | {_f(r['target_tokens_per_s'], '{:.0f}')} |")
            elif r:
                lines.append(f"| {name} | {key} | {r.get('skipped') or r.get('error')} | | | | | |")
        lines.append("")
    te = S.get("tests", {})
    if "checks" in te:
        lines += [f"gpu-marked tests on {name} ({when}): {te['passed']} passed, {te['failed']} failed, "
                  f"{te['skipped']} skipped, {te['errors']} errors ({te['runner']})", ""]
    skipped = [f"{n}: {s['skipped']}" for n, s in S.items() if isinstance(s, dict) and isinstance(s.get("skipped"), str)]
    errors = [f"{n}: {s['error']}" for n, s in S.items() if isinstance(s, dict) and isinstance(s.get("error"), str)]
    if skipped:
        lines += ["skipped sections: " + "; ".join(skipped), ""]
    if errors:
        lines += ["sections that raised: " + "; ".join(errors), ""]
    return "\n".join(lines) + "\n"


def write_outputs(out_dir: Path, report: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report["elapsed_s"] = _BUDGET.elapsed()
    report["forbidden_modules_loaded"] = forbidden_loaded()
    for name, path, text in (("json", out_dir / "gpu_check.json", lambda: json.dumps(clean(report), indent=1)),
                             ("md", out_dir / "gpu_rows.md", lambda: rows_markdown(report))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text(), encoding="utf-8")
        os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------------------
RUNNERS: dict[str, Callable[[Plan, Budget, dict[str, Any]], None]] = {
    "tests": section_tests, "kernels": section_kernels, "beam": section_beam, "mcmc": section_mcmc,
    "training": section_training}


def main(argv: list[str] | None = None) -> int:
    global _BUDGET, _CHECKPOINT
    ap = argparse.ArgumentParser(prog="python -m gpu.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for gpu_check.json and gpu_rows.md")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall budget in seconds (default 540)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and shorter timing caps")
    ap.add_argument("--cpu-smoke", action="store_true", help="run every section on the CPU at tiny sizes")
    ap.add_argument("--only", default="", help=f"comma-separated sections to run (of {', '.join(SECTIONS)})")
    args = ap.parse_args(argv)
    _BUDGET = budget = Budget(args.budget_s, _T_START)
    only = [s.strip() for s in args.only.split(",") if s.strip()] or list(SECTIONS)
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        ap.error(f"--only: unknown sections {unknown} (of {list(SECTIONS)})")
    cuda = torch.cuda.is_available()
    device = "cpu" if args.cpu_smoke else ("cuda" if cuda else "cpu")
    if args.cpu_smoke:
        torch.set_num_threads(1)                 # tiny tensors: one intra-op thread is fastest (tests/conftest.py)
    plan = make_plan(device, args.quick, args.cpu_smoke)
    report: dict[str, Any] = {
        "schema": 1, "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else list(argv), "mode": plan.mode if (cuda or args.cpu_smoke) else "skip",
        "budget_s": args.budget_s, "device": device_info(device), "sections": {}}
    _CHECKPOINT = lambda: write_outputs(args.out, report)  # noqa: E731
    log(f"device {report['device'].get('name', device)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"mode {report['mode']}, budget {args.budget_s:.0f} s")
    failed = False
    for name in SECTIONS:
        if name not in only:
            report["sections"][name] = {"skipped": "not selected (--only)"}
            continue
        if device == "cpu" and not args.cpu_smoke:
            report["sections"][name] = {"skipped": NO_CUDA}
            log(f"{name}: skipped ({NO_CUDA})")
            continue
        need = plan.estimates[name]
        if budget.left() < need:
            report["sections"][name] = {"skipped": f"budget: {budget.left():.0f} s left < {need:.0f} s estimated"}
            log(f"{name}: skipped (budget)")
            write_outputs(args.out, report)
            continue
        log(f"{name}: start ({budget.left():.0f} s left)")
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        res: dict[str, Any] = {"running": True}
        report["sections"][name] = res
        try:
            RUNNERS[name](plan, budget, res)
        except Exception as e:  # noqa: BLE001 - one section's failure must not cost the others
            res.update({"error": f"{type(e).__name__}: {str(e)[:500]}", "traceback": traceback.format_exc()[-3000:]})
            log(f"{name}: ERROR {type(e).__name__}: {e}")
            failed = True
        res.pop("running", None)
        res["seconds"] = time.perf_counter() - t0
        if device.startswith("cuda"):
            res["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if res.get("ok") is False:
            failed = True
        log(f"{name}: done in {res['seconds']:.1f} s")
        write_outputs(args.out, report)
    report["ok"] = not failed
    write_outputs(args.out, report)
    log(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'gpu_rows.md'} (ok: {report['ok']}, "
        f"{budget.elapsed():.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
