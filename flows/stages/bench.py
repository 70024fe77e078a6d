"""``bench`` stage: speed measured side by side, as ratios against named baselines.

Kernels: ``log_partition``, ``marginals`` and ``viterbi`` of :mod:`components.structures.linear_chain`
against pytorch-crf (and torch-struct where it fits in memory) at (B, N) = (32, 40) and each L in
``bench.kernels.labels``, on the same inputs, with ``bench.threads`` torch threads on the CPU, and
on the GPU when one is visible. Values are checked to agree before anything is timed. Results go
to ``metrics/bench.json``, MLflow, and ``plots/bench/kernels.md`` (a table for BENCHMARKS.md).
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

import torch

from components.config import load_section
from components.io import write_text
from components.metrics.timing import time_call
from components.structures import linear_chain
from components.data.tasks import load_tagging_task
from components import checkpoints
from components.inference.gradient_descent import GDConfig
from components.inference.study import ApproxStudyConfig
from components.inference.oracle_bench import compare_oracle_grid
from components.structures.baselines import PytorchCRF, TorchStruct
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class KernelBenchConfig:
    batch: int = 32
    length: int = 40
    labels: tuple[int, ...] = (17, 400, 1000)
    repeats: int = 5
    baselines: tuple[str, ...] = ("pytorch_crf", "torch_struct")
    torch_struct_max_labels: int = 64      # its L^3 parallel scan does not fit beyond this on 24 GiB
    seed: int = 0


@dataclass(frozen=True)
class OracleBenchConfig:
    task: str = "pos"
    energy: str = "blstm_crf_plus"
    instances: int = 8                      # the naive loop costs ~15 s per instance on 2 cores
    energy_dir: str = "models/energy"


@dataclass(frozen=True)
class BenchConfig:
    threads: int = 2
    gpu: bool = True                        # also run on CUDA when it is available
    kernels: KernelBenchConfig = field(default_factory=KernelBenchConfig)
    oracle: OracleBenchConfig = field(default_factory=OracleBenchConfig)
    report: str = "plots/bench/kernels.md"


OPS = ("log_partition", "marginals", "viterbi")


def _ours(unary, trans, mask):
    return {"log_partition": lambda: linear_chain.log_partition(unary, trans, mask),
            "marginals": lambda: linear_chain.marginals(unary, trans, mask),
            "viterbi": lambda: linear_chain.viterbi(unary, trans, mask)}


def _check_agreement(name: str, base, unary, trans, mask) -> None:
    ours_z = linear_chain.log_partition(unary, trans, mask)
    theirs_z = base.log_partition(unary, mask)
    if not torch.allclose(ours_z, theirs_z.to(ours_z.dtype), rtol=1e-4, atol=1e-3):
        raise RuntimeError(f"bench: {name} log Z disagrees with ours (max diff {(ours_z - theirs_z).abs().max():.3g})")
    ours_y, _ = linear_chain.viterbi(unary, trans, mask)
    theirs_y = base.viterbi(unary, mask)
    theirs_y = torch.as_tensor(theirs_y) if not torch.is_tensor(theirs_y) else theirs_y
    if theirs_y.dim() == 4:
        # torch-struct returns one-hot edge parts [B, N-1, next, prev]: recover the labels
        theirs_y = torch.cat([theirs_y[:, 0].sum(-2).argmax(-1)[:, None], theirs_y.sum(-1).argmax(-1)], 1)
    s_ours = linear_chain.score(unary, trans, mask, ours_y)
    s_theirs = linear_chain.score(unary, trans, mask, theirs_y.to(unary.device).long())
    if not torch.allclose(s_ours, s_theirs, rtol=1e-4, atol=1e-3):
        raise RuntimeError(f"bench: {name} Viterbi path scores disagree with ours")


def bench_kernels(cfg: KernelBenchConfig, device: str, progress=print) -> dict[str, Any]:
    out: dict[str, Any] = {}
    g = torch.Generator(device="cpu").manual_seed(cfg.seed)
    for L in cfg.labels:
        unary = torch.randn(cfg.batch, cfg.length, L, generator=g).to(device)
        trans = (torch.randn(L, L, generator=g) * 0.1).to(device)
        mask = torch.ones(cfg.batch, cfg.length, dtype=torch.bool, device=device)
        methods = {"ours": _ours(unary, trans, mask)}
        for name in cfg.baselines:
            if name == "torch_struct" and L > cfg.torch_struct_max_labels:
                out[f"L{L}.torch_struct.skipped"] = f"L={L} > torch_struct_max_labels={cfg.torch_struct_max_labels}"
                continue
            base = {"pytorch_crf": PytorchCRF, "torch_struct": TorchStruct}[name](trans)
            _check_agreement(name, base, unary, trans, mask)
            methods[name] = {"log_partition": lambda b=base: b.log_partition(unary, mask),
                             "marginals": lambda b=base: b.marginals(unary, mask),
                             "viterbi": lambda b=base: b.viterbi(unary, mask)}
        # the compiled max-plus Viterbi step (torch.compile; off by default elsewhere)
        t = time_call(lambda: linear_chain.viterbi(unary, trans, mask, compile=True), repeats=cfg.repeats,
                      warmup=2, device=device)
        out[f"L{L}.viterbi.ours_compiled_ms"] = 1000 * t["median_s"]
        for op in OPS:
            for name, fns in methods.items():
                t = time_call(fns[op], repeats=cfg.repeats, warmup=1, device=device)
                out[f"L{L}.{op}.{name}_ms"] = 1000 * t["median_s"]
                progress(f"bench {device} L={L} {op} {name}: {1000 * t['median_s']:.2f} ms")
            for name in methods:
                if name != "ours":
                    out[f"L{L}.{op}.speedup_vs_{name}"] = out[f"L{L}.{op}.{name}_ms"] / out[f"L{L}.{op}.ours_ms"]
        if "pytorch_crf" in methods:
            out[f"L{L}.viterbi.compiled_speedup_vs_pytorch_crf"] = \
                out[f"L{L}.viterbi.pytorch_crf_ms"] / out[f"L{L}.viterbi.ours_compiled_ms"]
    return out


def targets(res: dict[str, Any]) -> dict[str, bool]:
    """Issue 3's targets, where the numbers exist."""
    t = {}
    if "L400.log_partition.speedup_vs_pytorch_crf" in res:
        t["log_partition_40x_at_L400"] = res["L400.log_partition.speedup_vs_pytorch_crf"] >= 40
        t["viterbi_10x_at_L400"] = res["L400.viterbi.speedup_vs_pytorch_crf"] >= 10
        t["viterbi_compiled_10x_at_L400"] = res["L400.viterbi.compiled_speedup_vs_pytorch_crf"] >= 10
    if "L17.log_partition.speedup_vs_pytorch_crf" in res:
        t["never_slower_at_L17"] = all(res[f"L17.{op}.speedup_vs_pytorch_crf"] >= 1 for op in OPS)
    return t


def markdown(results: dict[str, dict[str, Any]], cfg: KernelBenchConfig) -> str:
    lines = []
    for dev, res in results.items():
        lines += [f"### {dev}", "", "| L | op | ours (ms) | pytorch-crf (ms) | ratio | torch-struct (ms) | ratio |",
                  "|---|---|---|---|---|---|---|"]
        for L in cfg.labels:
            for op in OPS:
                def cell(k, fmt="{:.2f}"):
                    v = res.get(k)
                    return fmt.format(v) if isinstance(v, float) else "–"
                lines.append(f"| {L} | {op} | {cell(f'L{L}.{op}.ours_ms')} | {cell(f'L{L}.{op}.pytorch_crf_ms')} | "
                             f"{cell(f'L{L}.{op}.speedup_vs_pytorch_crf', '{:.1f}×')} | "
                             f"{cell(f'L{L}.{op}.torch_struct_ms')} | {cell(f'L{L}.{op}.speedup_vs_torch_struct', '{:.1f}×')} |")
            lines.append(f"| {L} | viterbi (compiled) | {cell(f'L{L}.viterbi.ours_compiled_ms')} | "
                         f"{cell(f'L{L}.viterbi.pytorch_crf_ms')} | "
                         f"{cell(f'L{L}.viterbi.compiled_speedup_vs_pytorch_crf', '{:.1f}×')} | – | – |")
        lines += ["", "targets: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in targets(res).items()), ""]
        o = res.get("oracle_grid")
        if o:
            lines += [f"oracle grid ({int(o['instances'])} test sentences x {int(o['lrs'])} learning rates x N up to "
                      f"{int(o['max_N'])}): vectorised {o['batched_s']:.2f} s, naive loop {o['naive_s']:.1f} s, "
                      f"ratio {o['speedup']:.0f}x (target 100x: {'met' if o['target_100x'] else 'NOT met'}); "
                      f"label agreement {o['label_agreement']:.4f}", ""]
    return "\n".join(lines) + "\n"


def bench_oracle(cfg: OracleBenchConfig, gd: GDConfig, ctx: StageContext, device: str) -> dict[str, Any]:
    """The full oracle grid (every lr x every N) on the first ``instances`` test sentences of a task:
    the vectorised GD against the paper's naive loop (one instance, one (N, lr) at a time), same
    initial logits, same data, one run; labels must agree."""
    task = load_tagging_task(ctx.path(ctx.base.prepared_dir) / cfg.task)
    energy = checkpoints.load(ctx.path(cfg.energy_dir) / cfg.task / cfg.energy, device, expect="energy")
    batch = task.test.collate(list(range(min(cfg.instances, len(task.test))))).to(device)
    with torch.no_grad():
        p = energy.potentials(batch)
    res = compare_oracle_grid(p.unary, p.transition, p.mask, gd, seed=0)
    if res["label_agreement"] < 0.999:
        raise RuntimeError(f"bench: the vectorised GD grid disagrees with the naive loop ({res})")
    return {**res, "instances": float(batch.words.shape[0]), "lrs": float(len(gd.lrs)),
            "max_N": float(max(gd.checkpoints)), "target_100x": res["speedup"] >= 100}


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(BenchConfig, "bench", params)
    acfg = load_section(ApproxStudyConfig, "approx", params)
    torch.set_num_threads(cfg.threads)
    devices = ["cpu"] + (["cuda"] if cfg.gpu and torch.cuda.is_available() else [])
    gd = acfg.gd.for_task(cfg.oracle.task)          # the grid the approx stage runs on that task
    results = {}
    for dev in devices:
        results[dev] = bench_kernels(cfg.kernels, dev, progress=lambda m: print(m, flush=True))
        results[dev]["targets"] = targets(results[dev])
        results[dev]["oracle_grid"] = bench_oracle(cfg.oracle, gd, ctx, dev)
        print(f"bench {dev} oracle grid: {results[dev]['oracle_grid']}", flush=True)
    machine = {"cpu": platform.processor() or platform.machine(), "threads": cfg.threads,
               "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if "cuda" in devices else "none"}
    write_text(ctx.path(cfg.report), f"machine: {machine}\n\n" + markdown(results, cfg.kernels))
    ctx.tracker.log_artifact(ctx.path(cfg.report), "bench")
    ctx.tracker.log_params({f"machine.{k}": v for k, v in machine.items()})
    return {"kernels": results, "machine": machine}


if __name__ == "__main__":
    main("bench")
