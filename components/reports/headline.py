"""Headline metrics: per study, the few numbers a reader of the paper looks at first, as one flat
mapping of at most :data:`MAX_KEYS` numbers, for ``dvc exp show`` / ``dvc metrics diff``
(``metrics/headline/<study>.json``, written by the ``headline`` stage). The detailed metrics stay
where their stages write them (``metrics/<stage>.json``, ``metrics/<stage>/<task>.json``).

:data:`HEADLINES` maps a study (``flows.studies.STUDIES``' names) to ``(inputs, fn)``: the metrics
files it reads, relative to the project root (``{task}`` stands for each task of the list the caller
passes), and ``fn(data, **design) -> {key: Pick}`` where ``data`` maps each of those paths to the
file's parsed JSON. A :class:`Pick` carries the value and where it comes from (the file and the
path of keys inside it; ``path`` is ``None`` for a value computed from the file, such as a count).
A number the detailed metrics lack — not run, a variant that failed to train, NaN — is a pick with
value ``None``: :func:`values` leaves it out of the headline and :func:`left_out` names it, so the
caller can say so. No timings (seconds, minutes): they change from run to run.

Key suffixes name the task's metric (``_acc``: accuracy, ``_f1``: span F1, ``_bleu``: BLEU, else the
metric's own name; ``_score`` when the file names none); ``_speedup``: a median ratio baseline time /
our time. ``findings.<verdict>`` (``<study>.<verdict>`` in the file, see :func:`build`): how many
of the report's verdicts have that word of the report kit's vocabulary (``reproduced``,
``not_reproduced``, ``inconclusive``, ``not_testable``; ``components.reports.kit``), as the report
stage counted them (``findings`` in its metrics file: ``metrics/report.json`` for Tu & Gimpel,
``metrics/report_<study>.json`` for the others).

Where each key comes from (``T`` = task, ``E`` = the Table 6 energy ``approx.energy``, ``A`` =
``approx.arch[T]``):

``pipeline`` — ``metrics/bench.json``, ``metrics/prepare.json``; ``D`` = ``cpu``, and ``cuda`` when
the bench measured it:

- ``D.log_partition_L400_speedup``: ``kernels.D["L400.log_partition.speedup_vs_pytorch_crf"]``
- ``D.viterbi_L400_speedup``: ``kernels.D["L400.viterbi.speedup_vs_pytorch_crf"]`` (eager, not compiled)
- ``D.gd_oracle_grid_speedup``: ``kernels.D.oracle_grid.speedup`` (vectorised GD oracle grid vs the naive loop)
- ``D.beam_decode_speedup``: ``beam.D.decode_ratio_k<k>`` (batched hard-beam decoding vs the naive loop)
- ``D.mh_speedup``: ``mcmc.D.mh_ratio`` (our MH sweeps vs the naive Algorithm 4)
- ``prepared_tasks``: the number of entries of ``metrics/prepare.json`` that are task summaries (mappings)

``tu_gimpel`` (Tu & Gimpel 2019) — ``metrics/approx/{T}.json`` per task, ``metrics/report.json``:

- ``T.viterbi_<m>``: ``T["E.viterbi"].score`` (exact inference's test score under the Table 6 energy)
- ``T.gd_oracle_search_error``: ``T["E.gd_search_error"]`` (GD with (N, lr) oracle-selected per sentence)
- ``T.infnet_search_error``: ``T["E.A.infnet_search_error"]`` (the task's inference network)
- ``findings.*``: ``metrics/report.json`` ``findings``

``shevchenko_osokin`` (Shevchenko & Osokin) — ``metrics/report_shevchenko_osokin.json`` (the report
stage's: the runs' per-cell ``results`` and the ``findings``); per task of its ``results``
(``task/objective/procedure`` keys) and its objective ``O``: the first of
``components.reports.shevchenko_osokin.OBJECTIVES`` with a ``joint`` run (cross-entropy first):

- ``T.stage``, ``T.joint``: ``results["T/O/stage"].mean``, ``results["T/O/joint"].mean`` (test, mean over runs)
- ``T.best_scaled``: ``results["T/O/<fix>"].mean`` (test) of the scaling fix (online, offline,
  offline_reg) with the highest ``dev`` score: chosen on dev, reported on test
- ``findings.*``: ``findings``

``goyal_2018`` (Goyal et al. 2018; thesis ch. 3) — ``metrics/search_aware.json``, per task of ``tasks``
(variants that failed to train are left out), and ``metrics/report_goyal_2018.json``:

- ``T.ce_greedy_<m>``, ``T.ce_beam_<m>``: ``tasks.T.variants.ce.test.greedy`` / ``.beam``
- ``T.search_aware_beam_<m>``: ``test.beam`` of the search-aware variant (``dl_*``, ``hinge_*``) with the best ``dev.beam``
- ``T.relaxed_ss_greedy_<m>``: ``test.greedy`` of the α-soft scheduled-sampling variant (``dss_fixed_*``,
  ``dss_annealed_*``) with the best ``dev.greedy``
- ``findings.*``: ``metrics/report_goyal_2018.json`` ``findings``

``goyal_2019`` (Goyal, Dyer & Berg-Kirkpatrick 2019) — ``metrics/translator.json``,
``metrics/normalisation.json``, ``metrics/report_goyal_2019.json``; ``I`` = ``regular`` or ``sn``
(``self_normalised``) initialisation;
rows that failed to train are left out:

- ``translator.test_bleu``: ``metrics/translator.json`` ``test.beam.bleu``
- ``tagging.uni.I.local_<m>``, ``tagging.uni.I.global_<m>``: ``tagging.rows.lstm.<init>.local.test`` / ``.global.test``
  (the unidirectional encoder, where the paper's label-bias claims are)
- ``mt.I.local_bleu``, ``mt.I.global_bleu``: ``translation.rows.<init>.local.test`` / ``.global.test``
- ``findings.*``: ``findings`` of ``metrics/report_goyal_2019.json``

``goyal_mlm`` (Goyal's thesis, ch. 6) — ``metrics/cmlm.json``, ``metrics/distil.json``,
``metrics/mcmc.json``, ``metrics/report_goyal_mlm.json``; ``S`` = ``mh_raw``, ``mh_norm`` or ``gibbs`` (MH
with E_raw, MH with E_norm, degenerate Gibbs: the runs' schemes ``raw``, ``norm``, ``deg``):

- ``cmlm.test_bleu``, ``cmlm.dev_bleu``: ``test_bleu_mask_predict.bleu`` / ``dev_bleu_mask_predict.bleu``
- ``distil.targets_bleu``: ``train_bleu_vs_references`` (the distilled training targets against the references)
- ``main.S.e_norm``, ``main.S.bleu_mean``: the ``runs`` entry named ``main/<scheme>``: ``e_norm`` / ``bleu``
  (Figure 6.2, proposal temperature 1)
- ``full.S.bleu_final``: the ``runs`` entry named ``full/<scheme>``: ``bleu_final`` (Table 6.6)
- ``full.mask_predict.bleu``: ``baselines.mask_predict.bleu`` (Table 6.6)
- ``findings.*``: ``findings`` of ``metrics/report_goyal_mlm.json`` (the report's verdicts on the
  ``mcmc`` and ``mlm_exact`` stages' outputs)
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from components.reports import goyal_2018, goyal_2019, kit
from components.reports.shevchenko_osokin import FIXES, OBJECTIVES

MAX_KEYS = 20

BENCH, PREPARE = "metrics/bench.json", "metrics/prepare.json"
APPROX, REPORT = "metrics/approx/{task}.json", "metrics/report.json"
REPORT_SO = "metrics/report_shevchenko_osokin.json"
SEARCH_AWARE, REPORT_G18 = "metrics/search_aware.json", "metrics/report_goyal_2018.json"
TRANSLATOR, NORMALISATION = "metrics/translator.json", "metrics/normalisation.json"
REPORT_G19 = "metrics/report_goyal_2019.json"
CMLM, DISTIL, MCMC = "metrics/cmlm.json", "metrics/distil.json", "metrics/mcmc.json"
REPORT_MLM = "metrics/report_goyal_mlm.json"

BENCH_LABELS = 400                      # the label-set size of the kernels' targets (CCG's 400 supertags)
DEVICES = ("cpu", "cuda")
METRIC_SUFFIX = {"accuracy": "acc", "span_f1": "f1", "bleu": "bleu"}
INIT_KEY = {"regular": "regular", "self_normalised": "sn"}
MCMC_SCHEMES = {"raw": "mh_raw", "norm": "mh_norm", "deg": "gibbs"}
RELAXED_SS = tuple(v for v in goyal_2018.SS_VARIANTS if v.startswith("dss_"))

Path_ = tuple[Any, ...]                 # keys (str) and list indices (int) into a parsed JSON file


class Pick(NamedTuple):
    """One headline number: its value (``None``: the detailed metrics lack it), the file it comes
    from and the keys that reach it there (``None``: computed from the file, see the module doc)."""
    value: float | int | None
    file: str
    path: Path_ | None


Data = Mapping[str, Any]                # repo-relative path -> the parsed metrics file
Fn = Callable[..., dict[str, Pick]]


class Headline(NamedTuple):
    inputs: tuple[str, ...]             # repo-relative; "{task}" expands once per task
    fn: Fn


# ---------------------------------------------------------------------------------------------
# reading the detailed metrics

def lookup(obj: Any, path: Iterable[Any]) -> Any:
    """``obj[k0][k1]...``, or ``None`` where a key (or list index) is absent."""
    for k in path:
        if isinstance(obj, Mapping) and k in obj:
            obj = obj[k]
        elif isinstance(obj, list) and isinstance(k, int) and 0 <= k < len(obj):
            obj = obj[k]
        else:
            return None
    return obj


def number(v: Any) -> float | int | None:
    """``v`` when it is a finite number (not a bool), else ``None``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return v


def _file(data: Data, file: str) -> Mapping[str, Any]:
    if file not in data:
        raise ValueError(f"headline: {file} was not given (inputs given: {sorted(data)})")
    d = data[file]
    if not isinstance(d, Mapping):
        raise ValueError(f"headline: {file}: expected a JSON object at the top, got {type(d).__name__}")
    return d


def at(data: Data, file: str, *path: Any) -> Pick:
    """The number at ``path`` in ``file`` (``None`` when absent or not a finite number)."""
    return Pick(number(lookup(_file(data, file), path)), file, tuple(path))


def _none(file: str) -> Pick:
    return Pick(None, file, None)


def metric_suffix(metric: Any) -> str:
    """``accuracy`` -> ``acc``, ``span_f1`` -> ``f1``, ``bleu`` -> ``bleu``; another name as it is;
    ``score`` when there is none."""
    if not isinstance(metric, str) or not metric:
        return "score"
    return METRIC_SUFFIX.get(metric, re.sub(r"\W+", "_", metric))


def _file_findings(data: Data, file: str) -> dict[str, Pick]:
    """The verdict counts the report stage wrote into its metrics (``findings``: :func:`kit.counts`),
    one key per word of the kit's vocabulary."""
    return {f"findings.{v.replace(' ', '_')}": at(data, file, "findings", v.replace(" ", "_")) for v in kit.VERDICTS}


def _usable(entry: Any) -> bool:
    """A variant / row entry that ran and did not fail to train."""
    return isinstance(entry, Mapping) and not entry.get("failed")


def _best_by_dev(data: Data, file: str, base: Path_, names: Sequence[str], decoding: str) -> Pick:
    """``test.<decoding>`` of the entry of ``names`` (under ``base``) with the best ``dev.<decoding>``
    (the first on a tie; failed entries and entries without both numbers left out)."""
    best, best_dev = None, -math.inf
    for n in names:
        entry = lookup(_file(data, file), (*base, n))
        dev, test = number(lookup(entry, ("dev", decoding))), number(lookup(entry, ("test", decoding)))
        if _usable(entry) and dev is not None and test is not None and dev > best_dev:
            best, best_dev = n, dev
    return at(data, file, *base, best, "test", decoding) if best is not None else _none(file)


def _if_usable(data: Data, file: str, entry_path: Path_, *rest: Any) -> Pick:
    entry = lookup(_file(data, file), entry_path)
    return at(data, file, *entry_path, *rest) if _usable(entry) else _none(file)


# ---------------------------------------------------------------------------------------------
# one function per study

def pipeline(data: Data) -> dict[str, Pick]:
    """The shared stages: the bench's median speed ratios against the named baselines, and the
    number of prepared tasks."""
    bench = _file(data, BENCH)
    out: dict[str, Pick] = {}
    for dev in DEVICES:
        measured = any(isinstance(lookup(bench, (part, dev)), Mapping) for part in ("kernels", "beam", "mcmc"))
        if dev != "cpu" and not measured:
            continue
        L = f"L{BENCH_LABELS}"
        out[f"{dev}.log_partition_{L}_speedup"] = at(data, BENCH, "kernels", dev,
                                                     f"{L}.log_partition.speedup_vs_pytorch_crf")
        out[f"{dev}.viterbi_{L}_speedup"] = at(data, BENCH, "kernels", dev, f"{L}.viterbi.speedup_vs_pytorch_crf")
        out[f"{dev}.gd_oracle_grid_speedup"] = at(data, BENCH, "kernels", dev, "oracle_grid", "speedup")
        beam = lookup(bench, ("beam", dev))
        decode = sorted(k for k in (beam if isinstance(beam, Mapping) else {}) if re.fullmatch(r"decode_ratio_k\d+", k))
        out[f"{dev}.beam_decode_speedup"] = (at(data, BENCH, "beam", dev, decode[0]) if len(decode) == 1
                                             else _none(BENCH))
        out[f"{dev}.mh_speedup"] = at(data, BENCH, "mcmc", dev, "mh_ratio")
    prepare = _file(data, PREPARE)
    out["prepared_tasks"] = Pick(sum(isinstance(v, Mapping) for v in prepare.values()), PREPARE, None)
    return out


def tu_gimpel(data: Data, *, tasks: Sequence[str], energy: str, arch: Mapping[str, str] | None = None
              ) -> dict[str, Pick]:
    """Per task: Viterbi's test score under the Table 6 energy ``energy``, the oracle GD's and the
    inference network's mean search error there; the report's findings counts. ``arch``: the
    task's inference-network architecture (``approx.arch``); a task it does not name takes the one
    architecture with an inference network under ``energy`` in the file, if there is one."""
    out: dict[str, Pick] = {}
    for t in tasks:
        f = APPROX.format(task=t)
        m = lookup(_file(data, f), (t,))
        m = m if isinstance(m, Mapping) else {}
        sfx = metric_suffix(m.get("metric"))
        out[f"{t}.viterbi_{sfx}"] = at(data, f, t, f"{energy}.viterbi", "score")
        out[f"{t}.gd_oracle_search_error"] = at(data, f, t, f"{energy}.gd_search_error")
        a = (arch or {}).get(t)
        if a is None:
            found = [k[len(energy) + 1:-len(".infnet_search_error")] for k in m
                     if k.startswith(f"{energy}.") and k.endswith(".infnet_search_error")]
            a = found[0] if len(found) == 1 else None
        out[f"{t}.infnet_search_error"] = (at(data, f, t, f"{energy}.{a}.infnet_search_error") if a is not None
                                           else _none(f))
    out.update(_file_findings(data, REPORT))
    return out


def shevchenko_osokin(data: Data) -> dict[str, Pick]:
    """Per task: stage and joint training's test score and the best scaling fix's, for the task's
    first objective (cross-entropy first) with a joint run; the findings counts."""
    results = lookup(_file(data, REPORT_SO), ("results",))
    results = results if isinstance(results, Mapping) else {}
    tasks = list(dict.fromkeys(k.split("/", 1)[0] for k in results if "/" in k))
    out: dict[str, Pick] = {}
    for t in tasks:
        obj = next((o for o in OBJECTIVES if f"{t}/{o}/joint" in results), None)
        if obj is None:
            out[f"{t}.stage"] = out[f"{t}.joint"] = out[f"{t}.best_scaled"] = _none(REPORT_SO)
            continue
        out[f"{t}.stage"] = at(data, REPORT_SO, "results", f"{t}/{obj}/stage", "mean")
        out[f"{t}.joint"] = at(data, REPORT_SO, "results", f"{t}/{obj}/joint", "mean")
        fixes = [(number(lookup(results, (f"{t}/{obj}/{fix}", "dev"))), fix) for fix in FIXES
                 if number(lookup(results, (f"{t}/{obj}/{fix}", "mean"))) is not None]
        fixes = [(v, fix) for v, fix in fixes if v is not None]
        best = max(fixes, key=lambda x: x[0])[1] if fixes else None
        out[f"{t}.best_scaled"] = (at(data, REPORT_SO, "results", f"{t}/{obj}/{best}", "mean") if best
                                   else _none(REPORT_SO))
    out.update(_file_findings(data, REPORT_SO))
    return out


def goyal_2018_headline(data: Data) -> dict[str, Pick]:
    """Per task: CE decoded greedily and by hard beam, the best search-aware variant (by dev) by
    hard beam, the best α-soft scheduled-sampling variant (by dev) greedily; the findings counts."""
    metrics = _file(data, SEARCH_AWARE)
    tasks = lookup(metrics, ("tasks",))
    out: dict[str, Pick] = {}
    for t, entry in (tasks if isinstance(tasks, Mapping) else {}).items():
        sfx = metric_suffix(lookup(entry, ("metric",)))
        base = ("tasks", t, "variants")
        out[f"{t}.ce_greedy_{sfx}"] = _if_usable(data, SEARCH_AWARE, (*base, "ce"), "test", "greedy")
        out[f"{t}.ce_beam_{sfx}"] = _if_usable(data, SEARCH_AWARE, (*base, "ce"), "test", "beam")
        out[f"{t}.search_aware_beam_{sfx}"] = _best_by_dev(data, SEARCH_AWARE, base, goyal_2018.SEARCH_AWARE, "beam")
        out[f"{t}.relaxed_ss_greedy_{sfx}"] = _best_by_dev(data, SEARCH_AWARE, base, RELAXED_SS, "greedy")
    out.update(_file_findings(data, REPORT_G18))
    return out


def goyal_2019_headline(data: Data) -> dict[str, Pick]:
    """The translator's test BLEU; local vs global test scores, per initialisation, on tagging
    (unidirectional encoder) and on MT; the findings counts."""
    metrics = _file(data, NORMALISATION)
    out = {"translator.test_bleu": at(data, TRANSLATOR, "test", "beam", "bleu")}
    tsfx = metric_suffix(lookup(metrics, ("tagging", "metric")))
    msfx = metric_suffix(lookup(metrics, ("translation", "metric")))
    for init in goyal_2019.INITS:
        i = INIT_KEY.get(init, init)
        for row in ("local", "global"):
            out[f"tagging.uni.{i}.{row}_{tsfx}"] = _if_usable(data, NORMALISATION,
                                                              ("tagging", "rows", "lstm", init, row), "test")
            out[f"mt.{i}.{row}_{msfx}"] = _if_usable(data, NORMALISATION, ("translation", "rows", init, row), "test")
    out.update(_file_findings(data, REPORT_G19))
    return out


def _mcmc_run(data: Data, name: str, key: str) -> Pick:
    runs = lookup(_file(data, MCMC), ("runs",))
    for i, r in enumerate(runs if isinstance(runs, list) else []):
        if isinstance(r, Mapping) and r.get("name") == name:
            return at(data, MCMC, "runs", i, key)
    return _none(MCMC)


def goyal_mlm_headline(data: Data) -> dict[str, Pick]:
    """The CMLM's mask-predict BLEU, the distilled targets' BLEU, the samplers' E_norm and BLEU at
    T = 1 (Figure 6.2) and on the full test set (Table 6.6); the findings counts."""
    out = {"cmlm.test_bleu": at(data, CMLM, "test_bleu_mask_predict", "bleu"),
           "cmlm.dev_bleu": at(data, CMLM, "dev_bleu_mask_predict", "bleu"),
           "distil.targets_bleu": at(data, DISTIL, "train_bleu_vs_references")}
    for scheme, s in MCMC_SCHEMES.items():
        out[f"main.{s}.e_norm"] = _mcmc_run(data, f"main/{scheme}", "e_norm")
        out[f"main.{s}.bleu_mean"] = _mcmc_run(data, f"main/{scheme}", "bleu")
    for scheme, s in MCMC_SCHEMES.items():
        out[f"full.{s}.bleu_final"] = _mcmc_run(data, f"full/{scheme}", "bleu_final")
    out["full.mask_predict.bleu"] = at(data, MCMC, "baselines", "mask_predict", "bleu")
    out.update(_file_findings(data, REPORT_MLM))
    return out


HEADLINES: dict[str, Headline] = {
    "pipeline": Headline((BENCH, PREPARE), pipeline),
    "tu_gimpel": Headline((APPROX, REPORT), tu_gimpel),
    "shevchenko_osokin": Headline((REPORT_SO,), shevchenko_osokin),
    "goyal_2018": Headline((SEARCH_AWARE, REPORT_G18), goyal_2018_headline),
    "goyal_2019": Headline((TRANSLATOR, NORMALISATION, REPORT_G19), goyal_2019_headline),
    "goyal_mlm": Headline((CMLM, DISTIL, MCMC, REPORT_MLM), goyal_mlm_headline),
}


# ---------------------------------------------------------------------------------------------
# the caller's side

def _entry(study: str) -> Headline:
    if study not in HEADLINES:
        raise ValueError(f"headline: unknown study {study!r} (known: {sorted(HEADLINES)})")
    return HEADLINES[study]


def input_paths(study: str, tasks: Sequence[str] = ()) -> tuple[str, ...]:
    """The metrics files ``study``'s headline reads, relative to the project root, ``{task}``
    expanded once per task of ``tasks`` (in order)."""
    out: list[str] = []
    for p in _entry(study).inputs:
        out += [p.format(task=t) for t in tasks] if "{task}" in p else [p]
    return tuple(out)


def build(study: str, data: Data, max_keys: int = MAX_KEYS, **design: Any) -> dict[str, Pick]:
    """``study``'s picks from ``data`` (its input files, parsed); ``design``: the keyword arguments
    its function takes (the Tu & Gimpel task list, energy and architectures). More than
    ``max_keys`` keys is an error naming the study: a headline must stay readable."""
    # the verdict counts as <study>.<verdict>: a key no other study's file has, so `dvc exp show`
    # names its column without the file (findings.reproduced is in every report)
    picks = {(f"{study}.{k[len('findings.'):]}" if k.startswith("findings.") else k): v
             for k, v in _entry(study).fn(data, **design).items()}
    if len(picks) > max_keys:
        raise ValueError(f"headline {study}: {len(picks)} keys, more than {max_keys} ({sorted(picks)}); fewer "
                         f"tasks, or a larger max_keys")
    return picks


def values(picks: Mapping[str, Pick]) -> dict[str, float | int]:
    """The headline file's content: every pick with a value."""
    return {k: p.value for k, p in picks.items() if p.value is not None}


def left_out(picks: Mapping[str, Pick]) -> dict[str, str]:
    """key -> the file that lacks it, for every pick without a value."""
    return {k: p.file for k, p in picks.items() if p.value is None}
