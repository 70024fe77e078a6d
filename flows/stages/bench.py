"""``bench`` stage: speed measured side by side, as ratios against named baselines.

Every comparison is timed by the one harness, :func:`components.metrics.timing.compare`, under
``bench.timing``: the sides are called in turn (ours, baseline, ours, baseline, ...), each round
gives one ratio baseline time / our time per pair, and rounds repeat until every ratio's
inter-quartile range lies within ``median * (1 +- rel_iqr)`` or the time cap ``max_seconds`` (per
comparison and device; then ``converged: false``). Each records its median ratio with q1/q3, its
rounds and the machine's load average when it started (``os.getloadavg``); the stage records the
load average at its own start too.

Kernels: ``log_partition``, ``marginals`` and ``viterbi`` (eager, and with the compiled max-plus
step) of :mod:`components.structures.linear_chain` against pytorch-crf (and torch-struct where it
fits in memory) at (B, N) = (32, 40) and each L in ``bench.kernels.labels``, on the same inputs,
with ``bench.threads`` torch threads on the CPU, and on the GPU when one is visible. Values are
checked to agree before anything is timed. Results go to ``metrics/bench.json``, MLflow, and
``plots/bench/kernels.md`` (the tables for BENCHMARKS.md).

Oracle grid (``bench.oracle``): the full GD oracle grid of ``approx.gd`` vectorised
(``gradient_descent``) against the paper's naive loop (``naive_oracle_grid``) on the first
``instances`` test sentences; a naive run takes about a minute, so there is no naive warm-up and
the labels are checked on the timed runs' outputs (they must agree).

Goyal et al. (2018) (``bench.beam``, :mod:`components.inference.beam_bench`): on the first
``train_batches`` shuffled training batches of ``bench.beam.task``, relaxed-beam training
(``BeamDirectLoss`` at each K in ``train_ks``) against cross-entropy training of the same randomly
initialised seq2seq tagger, and on the first ``sentences`` dev sentences hard ``beam_search`` at
``decode_k`` against the naive per-hypothesis loop. Metrics under ``beam.<device>``.

MH (``bench.mcmc``, :mod:`components.bench.mcmc`): ``mh_mlm`` against the naive
Algorithm 4 on a randomly initialised conditional MLM. Metrics under ``mcmc.<device>``.

Seeds (:func:`components.seeds.seed_for` of ``base.seed``; no ``bench.*.seed`` knob): the kernels'
random potentials ``("bench", "kernels", "inputs")``, the oracle grid's start
``("bench", "oracle", "starts")``, the beam benchmark's tagger ``("bench", "beam", "model")`` and
batch order ``("bench", "beam", "batches")``, and the MH benchmark's base ``("bench", "mcmc")``
(sources, model, chains derived from it). No device in a name: every device times the same inputs.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

import torch

from components.config import ConfigError, check_range, field_error, from_dict, load_section
from components.data.translation import TranslationConfig
from components.energies.mlm import ENERGY_KINDS, MLMEnergy
from components.inference.mcmc.mlm_kernels import MHMLMConfig
from components.inference.mcmc.traces import shard_batch
from components.bench.mcmc import compare_mh
from components.models.mlm import CMLMConfig, ConditionalMLM
from components.io import write_text
from components.seeds import seed_for
from components.metrics.timing import TimingConfig, compare, load_average, ratio_metrics
from components.structures import linear_chain
from components.data.tasks import load_tagging_task
from components import checkpoints
from components.inference.gd_config import GDConfig
from components.inference.gradient_descent import gradient_descent, initial_logits
from components.inference.study_config import ApproxStudyConfig
from components.bench.oracle import naive_oracle_grid
from components.bench.beam import compare_decoding, compare_train_epochs
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.bench.crf_libraries import PytorchCRF, TorchStruct
from components.bench.cost import cost_figure, gd_curve, mh_curve
from components.bench.curves import first_under, median, overhead_threshold, ray_overhead, spin
from components.io import atomic_path
from components.reports.curves import close
from flows.stages.common import StageContext, main

# every number of metrics/bench.json is a measurement (times, ratios, rounds, the machine and its load):
# the stage's results, kept whole there (read by ``run_stage``; components.metrics.run_facts): the headline
# stage reads its ratios and BENCHMARKS.md cites its raw times and load averages. It varies run to run
# by nature; only the headline stage reads it. ``stage_seconds`` still goes to metrics/timings/bench.json.
TIMINGS_ARE_RESULTS = True


@dataclass(frozen=True)
class KernelBenchConfig:
    batch: int = 32
    length: int = 40
    labels: tuple[int, ...] = (17, 400, 1000)
    baselines: tuple[str, ...] = ("pytorch_crf", "torch_struct")
    torch_struct_max_labels: int = 64      # its L^3 parallel scan does not fit beyond this on 24 GiB
    # above this L the baselines get no warm-up call in the timing: a call costs seconds, and the
    # agreement check has just called them on the same inputs
    baseline_warmup_max_labels: int = 400

    def __post_init__(self):
        check_range(self, positive=("batch", "length", "labels"),
                    nonnegative=("torch_struct_max_labels", "baseline_warmup_max_labels"))


@dataclass(frozen=True)
class OracleBenchConfig:
    task: str = "pos"
    energy: str = "blstm_crf_plus"
    instances: int = 2                      # the naive loop costs ~15 s per instance on 2 cores
    energy_dir: str = "models/energy"
    rounds: int = 2                         # exactly this many timed rounds (a naive call costs ~15 s)

    def __post_init__(self):
        check_range(self, positive=("instances", "rounds"))


@dataclass(frozen=True)
class BeamBenchConfig:
    task: str = "ner"
    model: Seq2SeqTaggerConfig = field(default_factory=Seq2SeqTaggerConfig)   # randomly initialised
    train_ks: tuple[int, ...] = (3, 5)      # relaxed-beam sizes K timed against CE training
    train_batches: int = 16                 # the first n shuffled training batches (0: the whole epoch)
    decode_k: int = 5
    sentences: int = 96                     # the first n dev sentences, decoded
    batch_size: int = 32                    # training batches
    decode_batch_size: int = 64             # batched decoding (the search_aware stage's eval_batch_size)
    lr: float = 1e-3
    decode_target: float = 20.0             # issue 6: batched decoding >= 20x the naive loop

    def __post_init__(self):
        if not self.train_ks or min(self.train_ks) < 1 or self.decode_k < 1:
            raise ValueError(f"bench.beam: beam sizes must be >= 1, got train_ks={self.train_ks}, "
                             f"decode_k={self.decode_k}")
        if self.sentences < 1 or self.batch_size < 1 or self.decode_batch_size < 1 or self.train_batches < 0:
            raise ValueError("bench.beam: sentences, batch_size and decode_batch_size must be >= 1, "
                             "train_batches >= 0")
        check_range(self, positive=("lr", "decode_target"))


@dataclass(frozen=True)
class MCMCBenchConfig:
    """Thesis ch. 6: ``mh_mlm`` (one proposal pass + one batched energy pass per proposal) against
    the naive Algorithm 4 (per chain and position, the energies recomputed with T one-sequence
    passes each), on a randomly initialised conditional MLM of the ``cmlm`` stage's architecture."""
    chains: int = 5
    sentences: int = 2                      # random sources and targets
    source_length: int = 12
    target_length: int = 12
    sweeps: int = 1
    energy: str = "norm"
    target: float = 20.0                    # issue 12: >= 20x the naive loop on CPU

    def __post_init__(self):
        check_range(self, positive=("chains", "sentences", "source_length", "target_length", "sweeps", "target"))
        if self.energy not in ENERGY_KINDS:
            raise field_error(self, "energy", f"must be one of {ENERGY_KINDS}, got {self.energy!r}")


@dataclass(frozen=True)
class CurvesConfig:
    """Cost curves (issue 29): throughput against size, each point timed beside its matmul ceiling
    (``components.bench.cost``) under ``timing`` (a short cap: a point is a curve's sample, not a
    claim), drawn into ``dir``/mh_curve.png and ``dir``/gd_curve.png."""
    # chains x sentences, strictly increasing; on 2 quiet CPU cores a sweep at 1,024 costs ~2 s (at
    # 4,096 ~8 s a call: params can extend it, as gpu/check.py does on a GPU)
    mh_totals: tuple[int, ...] = (1, 2, 4, 16, 64, 256, 1024)
    mh_max_sentences: int = 4               # sentences per point (the rest of a total are chains)
    mh_source_length: int = 12
    mh_target_length: int = 4               # one sweep costs ~T (1 + T) token passes per chain: kept short
    mh_naive_max: int = 2                   # the naive Algorithm 4 only at totals <= this
    gd_sizes: tuple[int, ...] = (1, 4, 16)  # instances (test sentences, cycled), strictly increasing
    timing: TimingConfig = field(default_factory=lambda: TimingConfig(max_seconds=2.0, min_rounds=2, max_rounds=2,
                                                                      min_turn_s=0.05))
    dir: str = "plots/bench"

    def __post_init__(self):
        check_range(self, positive=("mh_totals", "mh_max_sentences", "mh_source_length", "mh_target_length",
                                    "gd_sizes"), nonnegative=("mh_naive_max",))
        for key in ("mh_totals", "gd_sizes"):
            xs = getattr(self, key)
            if not xs or any(b <= a for a, b in zip(xs, xs[1:])):
                raise field_error(self, key, f"must be non-empty and strictly increasing, got {list(xs)}")
        bad = [t for t in self.mh_totals if t % min(t, self.mh_max_sentences)]
        if bad:
            raise field_error(self, "mh_totals", f"each total must be a multiple of min(total, mh_max_sentences="
                                                 f"{self.mh_max_sentences}), got {bad}")


@dataclass(frozen=True)
class RayBenchConfig:
    """Ray ``sharded_map`` overhead on one node (issue 29): ``len(shards) x len(work_s)`` maps of
    busy-wait shards, each the median of ``repeats`` wall times, against the ideal
    ``shards * work_s / parallelism``; ``threshold``: the overhead share the table's verdict uses."""
    enabled: bool = True
    shards: tuple[int, ...] = (2, 8)        # shards per map
    work_s: tuple[float, ...] = (0.005, 0.02, 0.08, 0.32)   # seconds of work per shard, strictly increasing
    repeats: int = 3
    parallelism: int = 2                    # CPUs of the local Ray instance (one per shard); ignored with RAY_ADDRESS
    threshold: float = 0.10
    report: str = "plots/bench/ray.md"

    def __post_init__(self):
        check_range(self, positive=("shards", "work_s", "repeats", "parallelism"), within={"threshold": "(0, 1)"})
        if not self.shards or not self.work_s or any(b <= a for a, b in zip(self.work_s, self.work_s[1:])):
            raise field_error(self, "work_s", f"must be non-empty and strictly increasing (and shards non-empty), "
                                              f"got {list(self.work_s)}")


@dataclass(frozen=True)
class BenchConfig:
    threads: int = 2
    gpu: bool = True                        # also run on CUDA when it is available
    # the stopping rule of every comparison: a 15 s cap per comparison and device; a side faster than
    # 0.2 s runs back to back within its turn (its time per call kept)
    timing: TimingConfig = field(default_factory=lambda: TimingConfig(max_seconds=15.0, min_turn_s=0.2))
    kernels: KernelBenchConfig = field(default_factory=KernelBenchConfig)
    oracle: OracleBenchConfig = field(default_factory=OracleBenchConfig)
    beam: BeamBenchConfig = field(default_factory=BeamBenchConfig)
    mcmc: MCMCBenchConfig = field(default_factory=MCMCBenchConfig)
    curves: CurvesConfig = field(default_factory=CurvesConfig)
    ray: RayBenchConfig = field(default_factory=RayBenchConfig)
    report: str = "plots/bench/kernels.md"

    def __post_init__(self):
        check_range(self, positive=("threads",))          # torch.set_num_threads needs >= 1


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


def _load(load: dict[str, float] | None) -> str:
    return "n/a" if not load else " ".join(f"{v:.2f}" for v in load.values())


def bench_kernels(cfg: KernelBenchConfig, device: str, timing: TimingConfig = TimingConfig(),
                  progress=print, *, seed: int = 0) -> dict[str, Any]:
    """Per L and op, ours against each baseline in one :func:`compare` (for ``viterbi`` also the
    compiled max-plus step, ``ours_compiled``): ``L{L}.{op}.{side}_ms`` (median),
    ``L{L}.{op}.speedup_vs_{baseline}`` (median of baseline / ours per round, with ``_q1``/``_q3``/
    ``_iqr_rel``/``_converged``), ``L{L}.viterbi.compiled_speedup_vs_pytorch_crf`` (the same),
    ``L{L}.{op}.rounds``/``.converged``/``.load_avg_start``. ``seed``: the random potentials."""
    out: dict[str, Any] = {}
    g = torch.Generator(device="cpu").manual_seed(seed)
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
        baselines = [name for name in methods if name != "ours"]
        # the compiled max-plus Viterbi step (torch.compile; off by default elsewhere), compiled untimed first
        def compiled():
            return linear_chain.viterbi(unary, trans, mask, compile=True)
        compiled()
        for op in OPS:
            fns = {name: m[op] for name, m in methods.items()}
            ours = ["ours"]
            if op == "viterbi":
                fns["ours_compiled"] = compiled
                ours.append("ours_compiled")
            cold = baselines if L > cfg.baseline_warmup_max_labels else []
            res = compare(fns, baseline=baselines, ours=ours, timing=timing, device=device, no_warmup=cold)
            for name, side in res["sides"].items():
                out[f"L{L}.{op}.{name}_ms"] = 1000 * side["median_s"]
            for b in baselines:
                out.update(ratio_metrics(res, f"{b}/ours", f"L{L}.{op}.speedup_vs_{b}"))
            if op == "viterbi" and "pytorch_crf" in baselines:
                out.update(ratio_metrics(res, "pytorch_crf/ours_compiled", f"L{L}.viterbi.compiled_speedup_vs_pytorch_crf"))
            out.update({f"L{L}.{op}.rounds": float(res["rounds"]), f"L{L}.{op}.converged": res["converged"],
                        f"L{L}.{op}.load_avg_start": res["load_avg_start"]})
            progress(f"bench {device} L={L} {op}: " + ", ".join(
                f"{r['baseline']}/{r['ours']} {r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})"
                for r in res["ratios"].values()) + f"; {res['rounds']} rounds, converged: {res['converged']}")
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


def _ratio(res: dict[str, Any], key: str, digits: int = 1) -> str:
    """``median× (q1–q3)`` of a ratio in flat metrics, or a dash."""
    v = res.get(key)
    if not isinstance(v, float):
        return "–"
    return f"{v:.{digits}f}× ({res[key + '_q1']:.{digits}f}–{res[key + '_q3']:.{digits}f})"


def markdown(results: dict[str, dict[str, Any]], cfg: KernelBenchConfig) -> str:
    """The kernel tables (one per device) and the oracle-grid line: times are medians, a ratio is
    the median of per-round ratios baseline / ours with its IQR."""
    lines = []
    for dev, res in results.items():
        lines += [f"### {dev}", "", "| L | op | ours (ms) | pytorch-crf (ms) | ratio (IQR) | torch-struct (ms) | "
                  "ratio (IQR) | rounds | converged | load at start |", "|---|---|---|---|---|---|---|---|---|---|"]
        for L in cfg.labels:
            def cell(k, fmt="{:.2f}"):
                v = res.get(k)
                return fmt.format(v) if isinstance(v, float) else "–"
            for op in OPS:
                tail = (f"{cell(f'L{L}.{op}.rounds', '{:.0f}')} | {res.get(f'L{L}.{op}.converged', '–')} | "
                        f"{_load(res.get(f'L{L}.{op}.load_avg_start'))} |")
                lines.append(f"| {L} | {op} | {cell(f'L{L}.{op}.ours_ms')} | {cell(f'L{L}.{op}.pytorch_crf_ms')} | "
                             f"{_ratio(res, f'L{L}.{op}.speedup_vs_pytorch_crf')} | "
                             f"{cell(f'L{L}.{op}.torch_struct_ms')} | {_ratio(res, f'L{L}.{op}.speedup_vs_torch_struct')} | "
                             + tail)
                if op == "viterbi":
                    lines.append(f"| {L} | viterbi (compiled) | {cell(f'L{L}.viterbi.ours_compiled_ms')} | "
                                 f"{cell(f'L{L}.viterbi.pytorch_crf_ms')} | "
                                 f"{_ratio(res, f'L{L}.viterbi.compiled_speedup_vs_pytorch_crf')} | – | – | " + tail)
        lines += ["", "targets (on the median ratios): "
                  + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in targets(res).items()), ""]
        o = res.get("oracle_grid")
        if o:
            lines += [f"oracle grid ({int(o['instances'])} test sentences x {int(o['lrs'])} learning rates x N up to "
                      f"{int(o['max_N'])}): vectorised {o['batched_s']:.2f} s, naive loop {o['naive_s']:.1f} s "
                      f"(medians), ratio {_ratio(o, 'speedup', 0)} over {int(o['rounds'])} rounds (converged: "
                      f"{o['converged']}; load at start {_load(o['load_avg_start'])}); target 100x: "
                      f"{'met' if o['target_100x'] else 'NOT met'}; label agreement {o['label_agreement']:.4f}", ""]
    return "\n".join(lines) + "\n"


def oracle_potentials(cfg: OracleBenchConfig, ctx: StageContext, device: str, n: int):
    """(unary, transition, mask) of the oracle energy on the first ``n`` test sentences of its task."""
    task = load_tagging_task(ctx.path(ctx.base.prepared_dir) / cfg.task)
    energy = checkpoints.load(ctx.path(cfg.energy_dir) / cfg.task / cfg.energy, device, expect="energy")
    batch = task.test.collate(list(range(min(n, len(task.test))))).to(device)
    with torch.no_grad():
        p = energy.potentials(batch)
    ch = linear_chain.validate(p.unary, p.transition, p.mask, caller="bench oracle")
    return ch.unary, ch.transition, ch.mask


def bench_oracle(cfg: OracleBenchConfig, gd: GDConfig, ctx: StageContext, device: str,
                 timing: TimingConfig = TimingConfig()) -> dict[str, Any]:
    """The full oracle grid (every lr x every N) on the first ``instances`` test sentences of a task:
    the vectorised GD against the paper's naive loop (one instance, one (N, lr) at a time), same
    initial logits, same data, interleaved by :func:`compare` (no warm-up of the naive side: a
    run costs about a minute); labels must agree."""
    unary, trans, mask = oracle_potentials(cfg, ctx, device, cfg.instances)
    g = torch.Generator(device="cpu").manual_seed(seed_for(ctx.base.seed, "bench", "oracle", "starts"))
    z0 = initial_logits(unary, mask, gd, None, g)
    last: dict[str, Any] = {}

    def side(name: str, fn) -> Any:
        def call() -> None:
            last[name] = fn(unary, trans, mask, gd, init_logits=z0)
        return call

    fns = {"naive": side("naive", naive_oracle_grid), "batched": side("batched", gradient_descent)}
    res = compare(fns, baseline="naive", ours="batched", timing=timing, no_warmup=["naive"], device=device,
                  min_rounds=cfg.rounds, max_rounds=cfg.rounds)
    fast, slow = last["batched"], last["naive"]
    agree = float((fast.labels == slow.labels)[mask.expand_as(fast.labels)].double().mean())
    if agree < 0.999:
        raise RuntimeError(f"bench: the vectorised GD grid disagrees with the naive loop (label agreement {agree:.4f})")
    out = {"batched_s": res["sides"]["batched"]["median_s"], "naive_s": res["sides"]["naive"]["median_s"],
           **ratio_metrics(res, "naive/batched", "speedup"), "rounds": float(res["rounds"]),
           "converged": res["converged"], "load_avg_start": res["load_avg_start"], "label_agreement": agree,
           "max_abs_energy_diff": float((fast.energy - slow.energy).abs().max()),
           "max_abs_relaxed_energy_diff": float((fast.relaxed_energy - slow.relaxed_energy).abs().max())}
    return {**out, "instances": float(unary.shape[0]), "lrs": float(len(gd.lrs)),
            "max_N": float(max(gd.checkpoints)), "target_100x": out["speedup"] >= 100}


def bench_beam(cfg: BeamBenchConfig, ctx: StageContext, device: str, timing: TimingConfig = TimingConfig()) -> dict[str, Any]:
    """Goyal et al. (2018): relaxed-beam vs CE training passes and batched vs naive hard beam
    decoding, on the real task with a randomly initialised seq2seq tagger (see the module doc)."""
    task = load_tagging_task(ctx.path(ctx.base.prepared_dir) / cfg.task)
    sizes = task.sizes
    model = Seq2SeqTagger(cfg.model, sizes["n_words"], sizes["n_labels"], n_chars=sizes["n_chars"],
                          glove_ids=task.glove_ids, glove_vectors=task.glove_vectors,
                          seed=seed_for(ctx.base.seed, "bench", "beam", "model")).to(device)
    o_id = task.vocabs["label"].index("O", -1)
    train = list(task.train.batches(cfg.batch_size, shuffle=True, device=device,
                                    seed=seed_for(ctx.base.seed, "bench", "beam", "batches")))
    train = train[:cfg.train_batches] if cfg.train_batches else train
    out = compare_train_epochs(model, train, cfg.train_ks, o_id=o_id, lr=cfg.lr, timing=timing, device=device)
    dev = task.dev.subset(range(min(cfg.sentences, len(task.dev))))
    dec = compare_decoding(model, list(dev.batches(cfg.decode_batch_size, device=device)), cfg.decode_k,
                           target=cfg.decode_target, timing=timing, device=device)
    shared = ("rounds", "converged", "load_avg_start", "sentences")
    out = {f"train_{k}" if k in shared else k: v for k, v in out.items()}
    out.update({f"decode_{k}" if k in shared else k: v for k, v in dec.items()})
    return out


def beam_markdown(beam: dict[str, Any], cfg: BeamBenchConfig) -> str:
    lines = [f"### Goyal et al. (2018): search-aware training and beam decoding ({cfg.task}, random init)", ""]
    for dev, r in beam.items():
        if not isinstance(r, dict):
            lines += [f"{dev}: {r}", ""]
            continue
        lines += [f"#### {dev}", "",
                  f"training, {int(r['batches'])} batches ({int(r['train_sentences'])} sentences), "
                  f"{int(r['train_rounds'])} interleaved rounds (converged: {r['train_converged']}; load at start "
                  f"{_load(r['train_load_avg_start'])}): CE {r['ce_s']:.3f} s", "",
                  "| K | relaxed beam (s) | ratio to CE (median) | IQR | <= K |", "|---|---|---|---|---|"]
        for k in cfg.train_ks:
            lines.append(f"| {k} | {r[f'beam_k{k}_s']:.3f} | {r[f'train_ratio_k{k}']:.2f}x | "
                         f"{r[f'train_ratio_k{k}_q1']:.2f}-{r[f'train_ratio_k{k}_q3']:.2f} | "
                         f"{'yes' if r[f'train_within_k{k}'] else 'NO'} |")
        k = cfg.decode_k
        lines += ["", f"hard beam decoding, k = {k}, {int(r['decode_sentences'])} dev sentences, "
                      f"{int(r['decode_rounds'])} rounds (converged: {r['decode_converged']}; load at start "
                      f"{_load(r['decode_load_avg_start'])}): batched {r['batched_sents_per_s']:.0f} sent/s "
                      f"({r['batched_s']:.3f} s), naive loop {r['naive_sents_per_s']:.0f} sent/s ({r['naive_s']:.2f} s), "
                      f"ratio {r[f'decode_ratio_k{k}']:.1f}x (IQR {r[f'decode_ratio_k{k}_q1']:.1f}-"
                      f"{r[f'decode_ratio_k{k}_q3']:.1f}; target {cfg.decode_target:.0f}x: "
                      f"{'met' if r['decode_target_met'] else 'NOT met'})", ""]
    return "\n".join(lines) + "\n"


def cmlm_section(params: dict[str, Any], key: str, cls: type) -> Any:
    """``cmlm.<key>`` (the conditional MLM's architecture or data settings) loaded strictly."""
    try:
        return from_dict(cls, params["cmlm"][key], where=f"cmlm.{key}")
    except KeyError:
        raise ConfigError(f"params: the bench's MH benchmark reads cmlm.{key}, which is missing") from None


def bench_mcmc(cfg: MCMCBenchConfig, model_cfg: CMLMConfig, vocab: tuple[int, int], device: str,
               timing: TimingConfig = TimingConfig(), *, seed: int = 0) -> dict[str, Any]:
    """MH proposals per second, ``mh_mlm`` vs the naive Algorithm 4, at equal chains and lengths;
    ``seed``: the base of the random sources (``seed_for(seed, "sources")``), the model (``"model"``)
    and the chains (``"chains"``)."""
    g = torch.Generator().manual_seed(seed_for(seed, "sources"))
    model = ConditionalMLM(vocab[0], vocab[1], model_cfg, seed=seed_for(seed, "model")).to(device).eval()
    low = 3                                                  # SubwordVocab: pad 0, unk 1, eos 2
    sources = [torch.randint(low, vocab[0], (cfg.source_length,), generator=g).tolist() for _ in range(cfg.sentences)]
    batch = shard_batch(sources, [cfg.target_length] * cfg.sentences, device)
    energy = MLMEnergy(model, cfg.energy)
    out = compare_mh(energy, batch, MHMLMConfig(), n_chains=cfg.chains, sweeps=cfg.sweeps,
                     timing=timing, device=device, seed=seed_for(seed, "chains"))
    out["target"] = cfg.target
    out["target_met"] = bool(out["mh_ratio"] >= cfg.target)
    return out


def mcmc_markdown(res: dict[str, Any], cfg: MCMCBenchConfig) -> str:
    lines = ["### Thesis ch. 6: MH with MLM proposals, batched vs the naive Algorithm 4 (random-init CMLM)", "",
             "| device | chains x sentences x length | naive proposals/s | ours proposals/s | ratio (median) | IQR "
             "| passes/proposal naive | ours | rounds | load at start | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for dev, r in res.items():
        if not isinstance(r, dict):
            lines.append(f"| {dev} | {r} | | | | | | | | | |")
            continue
        lines.append(f"| {dev} | {int(r['chains'])} x {int(r['instances'])} x {r['mean_length']:.0f} | "
                     f"{r['naive_proposals_per_s']:.1f} | {r['fast_proposals_per_s']:.0f} | {r['mh_ratio']:.1f}x | "
                     f"{r['mh_ratio_q1']:.1f}-{r['mh_ratio_q3']:.1f} | {r['naive_passes_per_proposal']:.1f} | "
                     f"{r['fast_passes_per_proposal']:.2f} | {int(r['rounds'])} (converged: {r['converged']}) | "
                     f"{_load(r['load_avg_start'])} | "
                     f"{cfg.target:.0f}x: {'met' if r['target_met'] else 'NOT met'} |")
    return "\n".join(lines) + "\n"


def bench_curves(cfg: CurvesConfig, mcfg: MCMCBenchConfig, model_cfg: CMLMConfig, vocab: tuple[int, int],
                 potentials: tuple[torch.Tensor, torch.Tensor, torch.Tensor], gd: GDConfig, device: str, *,
                 seed: int = 0) -> dict[str, Any]:
    """The MH and GD cost curves (``components.bench.cost``) on ``device``: ``{"mh": [points],
    "gd": [points]}``. The MH model is the MH benchmark's random-init CMLM (``seed_for(seed, "model")``)."""
    model = ConditionalMLM(vocab[0], vocab[1], model_cfg, seed=seed_for(seed, "model")).to(device).eval()
    mh = mh_curve(model, mcfg.energy, cfg.mh_totals, max_sentences=cfg.mh_max_sentences,
                  source_length=cfg.mh_source_length, target_length=cfg.mh_target_length, src_vocab=vocab[0],
                  naive_max=cfg.mh_naive_max, timing=cfg.timing, device=device, seed=seed_for(seed, "mh"))
    unary, trans, mask = (t.to(device) for t in potentials)
    gdc = gd_curve(unary, trans, mask, gd, cfg.gd_sizes, timing=cfg.timing, device=device, seed=seed_for(seed, "gd"))
    return {"mh": mh, "gd": gdc}


def curve_figures(curves: dict[str, Any], oracle: dict[str, Any] | None, device: str) -> dict[str, Any]:
    """The two figures of one device's curves: ``{"mh_curve.png": fig, "gd_curve.png": fig}``; the
    GD figure's naive point is the oracle-grid comparison's (``oracle``)."""
    mh, gdc = curves["mh"], curves["gd"]
    naive = [p for p in mh if "naive_proposals_per_s" in p]
    f_mh = cost_figure([p["total"] for p in mh], {
        "mh_mlm (one sweep)": ([p["total"] for p in mh], [p["fast_proposals_per_s"] for p in mh]),
        "naive Algorithm 4": ([p["total"] for p in naive], [p["naive_proposals_per_s"] for p in naive]),
        "ceiling: output-projection matmul": ([p["total"] for p in mh], [p["ceiling_proposals_per_s"] for p in mh])},
        xlabel="chains x sentences", ylabel="MH proposals / s", ceiling="ceiling: output-projection matmul",
        title=f"MH with MLM proposals ({device}, target length {mh[0]['proposals'] // max(mh[0]['total'], 1)})")
    gd_series = {
        "vectorised GD grid": ([p["instances"] for p in gdc], [p["instances_per_s"] for p in gdc]),
        "naive loop (oracle comparison)": (([oracle["instances"]], [oracle["instances"] / oracle["naive_s"]])
                                           if oracle else ([], [])),
        "ceiling: pairwise matmul": ([p["instances"] for p in gdc], [p["ceiling_instances_per_s"] for p in gdc])}
    f_gd = cost_figure([p["instances"] for p in gdc], gd_series, xlabel="instances (test sentences)",
                       ylabel="instances / s (full oracle grid)", ceiling="ceiling: pairwise matmul",
                       title=f"GD oracle grid ({device}, {gdc[0]['grid']} runs per instance, {gdc[0]['steps']} steps)")
    return {"mh_curve.png": f_mh, "gd_curve.png": f_gd}


def bench_ray(cfg: RayBenchConfig, progress=print) -> dict[str, Any]:
    """``flows.parallel.sharded_map`` overhead (module ``components.bench.curves``): for each shard
    count and work per shard, the median wall time of ``repeats`` maps of ``spin(work_s)`` shards
    (one CPU each) after one untimed map that starts the workers. Joins the cluster at
    ``RAY_ADDRESS`` when it is set (parallelism: the cluster's CPUs), else starts a local instance
    of ``cfg.parallelism`` CPUs (and shuts it down after). Returns ``rows`` (one per map, see
    ``ray_overhead``), ``parallelism``, ``overhead_per_task_s`` (median over the rows),
    ``threshold``, ``model_threshold_work_s`` (the shard work above which that overhead is under
    ``threshold``), ``measured_threshold_work_s`` (the smallest measured work with every row under
    it, or None), ``nodes``, ``address``."""
    import os
    import time

    import ray

    from components.config import ResourcesConfig
    from flows.parallel import sharded_map
    from flows.ray_runtime import init_ray, shutdown_ray

    address = os.environ.get("RAY_ADDRESS") or None
    started = not ray.is_initialized()
    init_ray(num_cpus=None if address else cfg.parallelism)
    try:
        parallelism = int(ray.cluster_resources().get("CPU", 1))
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        one = ResourcesConfig(cpu=1, gpu=0)
        sharded_map(spin, [0.0] * parallelism, resources=one, desc="ray warm-up", progress=False)
        rows = []
        for n in cfg.shards:
            for w in cfg.work_s:
                walls = []
                for _ in range(cfg.repeats):
                    t0 = time.perf_counter()
                    sharded_map(spin, [w] * n, resources=one, desc=f"ray {n}x{w:g}s", progress=False)
                    walls.append(time.perf_counter() - t0)
                row = ray_overhead(median(walls), n, w, parallelism)
                rows.append(row)
                progress(f"bench ray {n} shards x {w:g} s: wall {row['wall_s']:.3f} s, ideal {row['ideal_s']:.3f} s, "
                         f"overhead {100 * row['overhead_frac']:.0f}%")
    finally:
        if started:
            shutdown_ray()
    o = median(r["overhead_per_task_s"] for r in rows)
    return {"rows": rows, "parallelism": float(parallelism), "nodes": float(nodes), "address": address or "local",
            "overhead_per_task_s": o, "threshold": cfg.threshold,
            "model_threshold_work_s": overhead_threshold(o, cfg.threshold),
            "measured_threshold_work_s": first_under(rows, cfg.threshold)}


def ray_markdown(r: dict[str, Any]) -> str:
    t = r["threshold"]
    lines = [f"### Ray sharded_map overhead ({int(r['nodes'])} node(s), {r['address']}, parallelism "
             f"{int(r['parallelism'])} CPUs, one CPU per shard)", "",
             "| shards | work per shard (s) | wall (s, median) | ideal (s) | overhead (s) | per task (s) | "
             "overhead share | efficiency |", "|---|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        lines.append(f"| {int(row['shards'])} | {row['work_s']:g} | {row['wall_s']:.3f} | {row['ideal_s']:.3f} | "
                     f"{row['overhead_s']:.3f} | {row['overhead_per_task_s']:.4f} | {100 * row['overhead_frac']:.0f}% | "
                     f"{row['efficiency']:.2f} |")
    m = r["measured_threshold_work_s"]
    lines += ["", f"ideal = shards x work / parallelism; per-task overhead = (wall - ideal) x parallelism / shards, "
                  f"median {r['overhead_per_task_s'] * 1000:.1f} ms: the overhead is under {100 * t:.0f}% of the "
                  f"time once a shard holds more than {r['model_threshold_work_s']:.3f} s of work "
                  f"(o (1 - f) / f); measured: "
                  + (f"under {100 * t:.0f}% at every shard count from {m:g} s of work per shard" if m is not None
                     else f"no measured shard size was under {100 * t:.0f}% at every shard count"), ""]
    return "\n".join(lines) + "\n"


def curves_markdown(curves: dict[str, Any]) -> str:
    lines = ["### Cost curves (issue 29)", ""]
    for dev, c in curves.items():
        if not isinstance(c, dict):
            lines += [f"{dev}: {c}", ""]
            continue
        lines += [f"#### {dev}", ""]
        if dev == "cpu":
            lines += ["![MH proposals/s](mh_curve.png) ![GD instances/s](gd_curve.png)", ""]
        lines += ["| chains x sentences | chains | sentences | mh_mlm proposals/s | naive proposals/s | "
                  "ceiling proposals/s | share of ceiling | rows/proposal | rounds |", "|---|---|---|---|---|---|---|---|---|"]
        for p in c["mh"]:
            nv = f"{p['naive_proposals_per_s']:.1f}" if "naive_proposals_per_s" in p else "–"
            lines.append(f"| {p['total']} | {p['chains']} | {p['sentences']} | {p['fast_proposals_per_s']:.0f} | {nv} | "
                         f"{p['ceiling_proposals_per_s']:.0f} | "
                         f"{p['fast_proposals_per_s'] / p['ceiling_proposals_per_s']:.2f} | "
                         f"{p['rows_per_proposal']:.2f} | {p['rounds']} |")
        lines += ["", "| instances | GD grid instances/s | ceiling instances/s | share of ceiling | grid s | rounds |",
                  "|---|---|---|---|---|---|"]
        for p in c["gd"]:
            lines.append(f"| {p['instances']} | {p['instances_per_s']:.1f} | {p['ceiling_instances_per_s']:.0f} | "
                         f"{p['instances_per_s'] / p['ceiling_instances_per_s']:.3f} | {p['batched_s']:.3f} | "
                         f"{p['rounds']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(BenchConfig, "bench", params)
    cmlm_model = cmlm_section(params, "model", CMLMConfig)
    cmlm_data = cmlm_section(params, "data", TranslationConfig)
    acfg = load_section(ApproxStudyConfig, "approx", params)
    load = load_average()                           # before this stage's own work
    torch.set_num_threads(cfg.threads)
    devices = ["cpu"] + (["cuda"] if cfg.gpu and torch.cuda.is_available() else [])
    gd = acfg.gd.for_task(cfg.oracle.task)          # the grid the approx stage runs on that task
    results = {}
    for dev in devices:
        results[dev] = bench_kernels(cfg.kernels, dev, cfg.timing, progress=lambda m: print(m, flush=True),
                                     seed=seed_for(ctx.base.seed, "bench", "kernels", "inputs"))
        results[dev]["targets"] = targets(results[dev])
        results[dev]["oracle_grid"] = bench_oracle(cfg.oracle, gd, ctx, dev, cfg.timing)
        print(f"bench {dev} oracle grid: {results[dev]['oracle_grid']}", flush=True)
    beam: dict[str, Any] = {}
    for dev in devices:
        beam[dev] = bench_beam(cfg.beam, ctx, dev, cfg.timing)
        print(f"bench {dev} beam: {beam[dev]}", flush=True)
    mcmc: dict[str, Any] = {}
    for dev in devices:
        mcmc[dev] = bench_mcmc(cfg.mcmc, cmlm_model, (cmlm_data.src_vocab_size, cmlm_data.tgt_vocab_size), dev,
                               cfg.timing, seed=seed_for(ctx.base.seed, "bench", "mcmc"))
        print(f"bench {dev} mcmc: {mcmc[dev]}", flush=True)
    curves: dict[str, Any] = {}
    vocab = (cmlm_data.src_vocab_size, cmlm_data.tgt_vocab_size)
    for dev in devices:
        pots = oracle_potentials(cfg.oracle, ctx, dev, max(cfg.curves.gd_sizes))
        curves[dev] = bench_curves(cfg.curves, cfg.mcmc, cmlm_model, vocab, pots, gd, dev,
                                   seed=seed_for(ctx.base.seed, "bench", "curves"))
        print(f"bench {dev} curves: {curves[dev]}", flush=True)
    figs = curve_figures(curves["cpu"], results["cpu"].get("oracle_grid"), "cpu")
    for name, fig in figs.items():
        with atomic_path(ctx.path(cfg.curves.dir) / name) as tmp:
            fig.savefig(tmp, format="png")
        close(fig)
        ctx.tracker.log_artifact(ctx.path(cfg.curves.dir) / name, "bench")
    ray_res: dict[str, Any] = {}
    if cfg.ray.enabled:
        ray_res = bench_ray(cfg.ray, progress=lambda m: print(m, flush=True))
        write_text(ctx.path(cfg.ray.report), ray_markdown(ray_res))
    else:
        write_text(ctx.path(cfg.ray.report), "Ray sharded_map overhead: not measured (bench.ray.enabled: false)\n")
    ctx.tracker.log_artifact(ctx.path(cfg.ray.report), "bench")
    if "cuda" not in devices:
        beam["cuda"] = "no GPU" if not torch.cuda.is_available() else "skipped (bench.gpu: false)"
        mcmc["cuda"] = beam["cuda"]
        curves["cuda"] = beam["cuda"]
    machine = {"cpu": platform.processor() or platform.machine(), "threads": cfg.threads,
               "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if "cuda" in devices else "none",
               "load_avg_start": _load(load)}
    t = cfg.timing
    method = (f"method: interleaved rounds (components.metrics.timing.compare) until every ratio's IQR lies within "
              f"median x (1 +- {t.rel_iqr:g}), at least {t.min_rounds} rounds"
              + (f", at most {t.max_rounds}" if t.max_rounds is not None else "")
              + f", or {t.max_seconds:g} s per comparison and device (then converged: False); {t.warmup} warm-up "
              f"call(s) per side; sides under {t.min_turn_s:g} s run back to back within a turn. Times are medians; "
              "a ratio is the median of the per-round ratios baseline / ours, with its IQR (q1-q3). "
              "Load average (1, 5, 15 min) at the start of the stage and of each comparison.")
    write_text(ctx.path(cfg.report), f"machine: {machine}\n\n{method}\n\n" + markdown(results, cfg.kernels)
               + "\n" + beam_markdown(beam, cfg.beam) + "\n" + mcmc_markdown(mcmc, cfg.mcmc)
               + "\n" + curves_markdown(curves) + "\n" + (ray_markdown(ray_res) if ray_res else ""))
    ctx.tracker.log_artifact(ctx.path(cfg.report), "bench")
    ctx.tracker.log_params({f"machine.{k}": v for k, v in machine.items()})
    return {"kernels": results, "beam": beam, "mcmc": mcmc, "curves": curves, "ray": ray_res, "machine": machine,
            "load_avg_start": load}


if __name__ == "__main__":
    main("bench")
