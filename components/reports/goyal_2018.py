"""Tables 1 and 2 of Goyal, Dyer & Berg-Kirkpatrick, "A Continuous Relaxation of Beam Search for
End-to-end Training of Neural Sequence Models" (AAAI 2018;
``papers/goyal-2018-continuous-relaxation-of-beam-search.txt``) and Tables 3.1 and 3.2 of Goyal's
thesis, ch. 3 "differentiable scheduled sampling"
(``papers/goyal-thesis-exposure-bias-label-bias-energy-models.txt``), with our runs beside the papers'
numbers, a findings table whose verdicts are computed from the numbers, and learning curves.

Input: the ``search_aware`` stage's metrics (``metrics/search_aware.json``)::

    {"tasks": {task: {"metric": "span_f1" | "accuracy" (percent), "n_labels", "top_k_labels" (0 = all),
                      "beam_size", "n_train",
                      "variants": {variant: {"objective", "feed", "alpha", "decay_k", "config", "seeds",
                                             "dev" / "test" / "dev_std" / "test_std":
                                                 {"greedy", "beam", "soft_beam"},
                                             "epochs_run", "best_epoch", "seconds_per_epoch",
                                             "failed", "failure"}},
                      "curves": {variant: [{"epoch", "train_loss", "dev_score"}, ...]}}}}

What maps to what:

* Goyal 2018 Tables 1 (CCG supertagging) and 2 (NER): rows Baseline CE, G̃hinge annealed α, G̃hinge α = 1,
  G̃DL α = 1, G̃DL annealed α -> our variants ``ce``, ``hinge_annealed``, ``hinge_alpha1``, ``dl_alpha1``,
  ``dl_annealed``; columns greedy / hard beam / soft beam (Dev, Test) -> the decodings ``greedy``,
  ``beam``, ``soft_beam``. The paper leaves greedy decoding of the search-aware models blank ("-").
* Thesis Table 3.1 (NER F1, MT BLEU): Baseline CE -> ``ce``; Bengio et al. (2015) greedy / sample ->
  ``ss_greedy`` / ``ss_sample``; α-soft fixed and annealed, greedy / sample -> ``dss_fixed_greedy``,
  ``dss_fixed_sample``, ``dss_annealed_greedy``, ``dss_annealed_sample``; all decoded greedily.
* Thesis Table 3.2 (decay strength k of the inverse-sigmoid schedule, NER test F1): k = 100, 10, 1,
  always -> ``dss_k100``, ``dss_k10``, ``dss_k1``, ``dss_always`` (greedy decoding).

Tasks: ``ner`` (WNUT-16 Twitter NER, span F1) stands in for the papers' CoNLL-2003 German NER;
``greek_morph`` / ``greek_morph_k400`` (SBLGNT morphology restricted to the top-K labels, accuracy) stands in for CCG
supertagging (1,284 supertags, accuracy). The thesis has no CCG column: its second column is MT (IWSLT
De->En, BLEU), shown for reference only. Any other task is reported with our numbers and no paper's.
The corpora differ, so the comparison is of *patterns* (which training wins, in which direction),
not of absolute numbers.

Public API: :data:`PAPER_TASK`, :data:`TABLE1_2`, :data:`TABLE3_1`, :data:`TABLE3_2`,
:func:`table_beam`, :func:`table_ss`, :func:`table_decay`, :func:`findings`, :func:`findings_table`,
:func:`curves_figure`, :func:`readme`, :func:`write_report`.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from components.io import atomic_path, write_text  # noqa: E402
from components.reports.curves import MAX_SERIES, close  # noqa: E402
from components.reports.findings import NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, row as _row  # noqa: E402
from components.reports.findings import table as _table  # noqa: E402

# our task -> the papers' task
PAPER_TASK = {"ner": "NER", "greek_morph": "CCG", "greek_morph_k400": "CCG"}
TASK_NOTE = {
    "ner": "WNUT-16 Twitter NER (span F1) in place of the papers' CoNLL-2003 German NER",
    "greek_morph": "SBLGNT Greek morphology, top-K labels (accuracy) in place of CCG supertagging (1,284 labels)",
    "greek_morph_k400": "SBLGNT Greek morphology with its 400 most frequent tags (the rest mapped to '*'; accuracy) "
                        "in place of CCG supertagging (1,284 labels)",
}
DECODINGS = ("greedy", "beam", "soft_beam")   # the papers' columns, by INFERENCE name (the stage decodes with these)
DECODING_LABEL = {"greedy": "greedy", "beam": "hard beam", "soft_beam": "soft beam"}
SPLITS = ("dev", "test")

# ---------------------------------------------------------------------------------------------
# The papers' numbers, transcribed exactly; "-" (a blank cell in the paper) is None.
BEAM_VARIANTS = ("ce", "hinge_annealed", "hinge_alpha1", "dl_alpha1", "dl_annealed")
SEARCH_AWARE = ("hinge_annealed", "hinge_alpha1", "dl_alpha1", "dl_annealed")
VARIANT_LABEL = {
    "ce": "Baseline CE", "hinge_annealed": "G̃hinge, annealed α", "hinge_alpha1": "G̃hinge, α = 1",
    "dl_alpha1": "G̃DL, α = 1", "dl_annealed": "G̃DL, annealed α",
    "ss_greedy": "Bengio et al. (2015), greedy", "ss_sample": "Bengio et al. (2015), sample",
    "dss_fixed_greedy": "α-soft fixed, greedy", "dss_fixed_sample": "α-soft fixed, sample",
    "dss_annealed_greedy": "α-soft annealed, greedy", "dss_annealed_sample": "α-soft annealed, sample",
    "dss_k100": "k = 100", "dss_k10": "k = 10", "dss_k1": "k = 1", "dss_always": "always",
}
# Goyal 2018: rows "variant|greedy dev|greedy test|hard beam dev|hard beam test|soft beam dev|soft beam test"
_TABLE1 = """\
ce|80.15|80.35|82.17|82.42|81.62|82.00
hinge_annealed|-|-|83.03|83.54|82.82|83.05
hinge_alpha1|-|-|83.02|83.36|82.49|82.85
dl_alpha1|-|-|83.23|82.65|82.58|82.82
dl_annealed|-|-|85.69|85.82|85.58|85.78"""
_TABLE2 = """\
ce|50.21|54.92|46.22|51.34|47.50|52.78
hinge_annealed|-|-|41.10|45.98|41.24|46.34
hinge_alpha1|-|-|40.09|44.67|39.67|43.82
dl_alpha1|-|-|49.88|54.08|50.73|54.77
dl_annealed|-|-|51.86|56.15|51.96|56.38"""
# Thesis Table 3.1: "variant|NER dev|NER test|MT dev|MT test" (F1, BLEU)
SS_VARIANTS = ("ce", "ss_greedy", "ss_sample", "dss_fixed_greedy", "dss_fixed_sample",
               "dss_annealed_greedy", "dss_annealed_sample")
_TABLE3_1 = """\
ce|49.43|53.32|20.35|19.11
ss_greedy|49.75|54.83|20.52|19.85
ss_sample|50.90|54.60|20.40|19.69
dss_fixed_greedy|51.65|55.88|21.32|20.28
dss_fixed_sample|51.13|56.25|20.48|19.69
dss_annealed_greedy|51.43|56.33|21.28|20.18
dss_annealed_sample|50.99|54.20|21.36|20.60"""
# Thesis Table 3.2: NER test F1 per decay strength k ("always": never feed the gold label)
DECAY_VARIANTS = ("dss_k100", "dss_k10", "dss_k1", "dss_always")
TABLE3_2: dict[str, float] = {"dss_k100": 56.33, "dss_k10": 55.88, "dss_k1": 55.30, "dss_always": 54.83}


def _num_or_none(cell: str) -> float | None:
    return None if cell.strip() == "-" else float(cell)


def _parse_beam(text: str) -> dict[str, dict[str, dict[str, float | None]]]:
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for line in text.splitlines():
        variant, *cells = line.split("|")
        vals = [_num_or_none(c) for c in cells]
        out[variant] = {s: {d: vals[2 * i + j] for i, d in enumerate(DECODINGS)} for j, s in enumerate(SPLITS)}
    return out


def _parse_ss(text: str) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {"NER": {}, "MT": {}}
    for line in text.splitlines():
        variant, nd, nt, md, mt = line.split("|")
        out["NER"][variant] = {"dev": float(nd), "test": float(nt)}
        out["MT"][variant] = {"dev": float(md), "test": float(mt)}
    return out


# paper task -> variant -> split -> decoding -> score
TABLE1_2 = {"CCG": _parse_beam(_TABLE1), "NER": _parse_beam(_TABLE2)}
# paper task ("NER" or "MT") -> variant -> split -> score
TABLE3_1 = _parse_ss(_TABLE3_1)



# ---------------------------------------------------------------------------------------------
# reading our metrics
def _tasks(metrics: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The ``tasks`` dict, known tasks first (in :data:`PAPER_TASK` order), then the others as given."""
    if not isinstance(metrics, Mapping) or not isinstance(metrics.get("tasks"), Mapping):
        raise ValueError("search_aware metrics: expected a dict with a 'tasks' dict")
    tasks = metrics["tasks"]
    order = [t for t in PAPER_TASK if t in tasks] + [t for t in tasks if t not in PAPER_TASK]
    return {t: tasks[t] for t in order}


def _task(metrics: Mapping[str, Any], task: str) -> Mapping[str, Any]:
    tasks = _tasks(metrics)
    if task not in tasks:
        raise KeyError(f"search_aware metrics: no task {task!r}; have {list(tasks)}")
    return tasks[task]


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _variant(m: Mapping[str, Any], variant: str) -> Mapping[str, Any] | None:
    v = m.get("variants", {}).get(variant)
    return v if isinstance(v, Mapping) else None


def _score(m: Mapping[str, Any], variant: str, split: str, decoding: str) -> tuple[float | None, float | None]:
    """(mean, std) of our score; std is None for a single seed (or none recorded)."""
    v = _variant(m, variant)
    if v is None:
        return None, None
    mean = _finite(v.get(split, {}).get(decoding))
    std = _finite(v.get(f"{split}_std", {}).get(decoding)) if int(v.get("seeds", 1) or 1) > 1 else None
    return mean, std


def _metric_name(m: Mapping[str, Any]) -> str:
    return "F1" if m.get("metric") == "span_f1" else "accuracy"


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _ours_cell(m: Mapping[str, Any], variant: str, split: str, decoding: str) -> str:
    """"56.20 ± 0.31", "56.20 ✗" for a failed run, "—" when not run."""
    v = _variant(m, variant)
    if v is None:
        return "—"
    mean, std = _score(m, variant, split, decoding)
    s = _fmt(mean) + (f" ± {std:.2f}" if std is not None and mean is not None else "")
    return s + (" ✗" if v.get("failed") else "")


def _with_paper(ours: str, paper: float | None, has_paper: bool) -> str:
    return f"{ours} ({_fmt(paper)})" if has_paper else ours


def _footnotes(metrics: Mapping[str, Any], tasks: Sequence[str], variants: Sequence[str]) -> list[str]:
    """"not run" and "✗ failed" notes for the given tasks and variants."""
    notes = []
    all_tasks = _tasks(metrics)
    for t in tasks:
        m = all_tasks[t]
        missing = [v for v in variants if _variant(m, v) is None]
        if missing:
            notes.append(f"{t}: not run: {', '.join(missing)} (—).")
        for v in variants:
            r = _variant(m, v)
            if r is not None and r.get("failed"):
                notes.append(f"✗ {t} / {v} failed: “{r.get('failure') or 'no reason recorded'}”.")
    return notes


def _setup_line(task: str, m: Mapping[str, Any]) -> str:
    seeds = sorted({int(v.get("seeds", 1) or 1) for v in m.get("variants", {}).values() if isinstance(v, Mapping)})
    seeds_s = "–" if not seeds else (str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}")
    k = m.get("top_k_labels")
    k_s = "all" if k in (0, None) else str(k)
    return (f"{task}: beam size {m.get('beam_size', '–')}, top-K labels K = {k_s} "
            f"(of {m.get('n_labels', '–')}), {m.get('n_train', '–')} training sentences, "
            f"{seeds_s} seed(s) per variant; metric {_metric_name(m)} (%).")


# ---------------------------------------------------------------------------------------------
# tables
def table_beam(metrics: Mapping[str, Any], task: str) -> str:
    """Goyal 2018 Table 1 (CCG) / Table 2 (NER) analog for ``task``: per training procedure, the greedy,
    hard-beam and soft-beam scores on dev and test, cells "ours (paper)" (± std over seeds when > 1)."""
    m = _task(metrics, task)
    paper_task = PAPER_TASK.get(task)
    paper = TABLE1_2.get(paper_task or "", {})
    cols = [(d, s) for d in DECODINGS for s in SPLITS]
    lines = ["| training procedure | variant | " + " | ".join(f"{DECODING_LABEL[d]} {s}" for d, s in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for v in BEAM_VARIANTS:
        cells = [_with_paper(_ours_cell(m, v, s, d), paper.get(v, {}).get(s, {}).get(d), bool(paper))
                 for d, s in cols]
        lines.append(f"| {VARIANT_LABEL[v]} | `{v}` | " + " | ".join(cells) + " |")
    which = {"NER": "Table 2, NER macro F1", "CCG": "Table 1, CCG supertagging accuracy"}
    note = [f"Task {task}, {_metric_name(m)} (%). "
            + (f"Cells: ours (the paper's {which[paper_task]}); " if paper_task else "No paper counterpart; ")
            + "ours is the mean over seeds ± std when seeds > 1; '–' in parentheses: the paper leaves the cell "
              "blank (it reports no greedy decoding for the search-aware models)."]
    note += _footnotes(metrics, [task], BEAM_VARIANTS)
    return "\n".join(lines) + "\n\n" + "\n\n".join(note) + "\n"


def table_ss(metrics: Mapping[str, Any]) -> str:
    """Thesis Table 3.1 analog across tasks: Baseline CE, Bengio et al. (2015) scheduled sampling and the
    α-soft relaxations, greedy decoding, dev and test, cells "ours (paper)"; the thesis's MT (BLEU)
    column is shown for reference."""
    # the tasks that ran scheduled sampling (the CE row alone is Table 1/2's)
    tasks = {t: m for t, m in _tasks(metrics).items() if any(_variant(m, v) for v in SS_VARIANTS if v != "ce")}
    head = ["training procedure", "variant"]
    for t in tasks:
        head += [f"{t} dev", f"{t} test"]
    head += ["paper MT BLEU dev (reference)", "paper MT BLEU test (reference)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in SS_VARIANTS:
        cells = [VARIANT_LABEL[v], f"`{v}`"]
        for t, m in tasks.items():
            paper = TABLE3_1["NER"].get(v) if PAPER_TASK.get(t) == "NER" else None
            has = PAPER_TASK.get(t) == "NER"
            cells += [_with_paper(_ours_cell(m, v, s, "greedy"), paper[s] if paper else None, has) for s in SPLITS]
        cells += [_fmt(TABLE3_1["MT"][v]["dev"]), _fmt(TABLE3_1["MT"][v]["test"])]
        lines.append("| " + " | ".join(cells) + " |")
    note = ["All decoded greedily. Cells: ours (the thesis's NER F1) for ner; ours alone for the other tasks. "
            "Tasks without scheduled-sampling runs are left out. The thesis has no CCG column, so a Greek "
            "morphology column has no paper numbers. Its second column is "
            "MT (IWSLT'14 De→En, BLEU), shown for reference only: MT comes with the Greek→English study and "
            "is not comparable with these tagging tasks. Ours: mean over seeds ± std when seeds > 1; the "
            "thesis reports the random restart with the best dev score."]
    note += _footnotes(metrics, list(tasks), SS_VARIANTS)
    return "\n".join(lines) + "\n\n" + "\n\n".join(note) + "\n"


def table_decay(metrics: Mapping[str, Any]) -> str:
    """Thesis Table 3.2 analog: test score (greedy decoding) against the decay strength k of the
    inverse-sigmoid schedule of the gold-feeding probability, for every task that ran any k variant,
    beside the thesis's NER F1."""
    tasks = {t: m for t, m in _tasks(metrics).items() if any(_variant(m, v) for v in DECAY_VARIANTS)}
    head = ["k", "variant", *[f"{t} test ours" for t in tasks], "paper NER test F1"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in DECAY_VARIANTS:
        cells = [VARIANT_LABEL[v].removeprefix("k = "), f"`{v}`"]
        cells += [_ours_cell(m, v, "test", "greedy") for m in tasks.values()]
        cells.append(_fmt(TABLE3_2[v]))
        lines.append("| " + " | ".join(cells) + " |")
    note = ["Higher k: gentler decay (gold labels fed for longer); always: the model's own predictions are "
            "always fed, never the gold label. Ours: mean over seeds ± std when seeds > 1."]
    if not tasks:
        note.append("No task ran a decay variant (dss_k100, dss_k10, dss_k1, dss_always): paper column only.")
    note += _footnotes(metrics, list(tasks), DECAY_VARIANTS)
    return "\n".join(lines) + "\n\n" + "\n\n".join(note) + "\n"


def training_table(metrics: Mapping[str, Any]) -> str:
    """Ours only: what each variant is, its seeds, epochs and time, and its dev-tuned settings."""
    lines = ["| task | variant | objective | feed | α | decay k | seeds | epochs run | best epoch | s / epoch | "
             "dev-tuned config |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, m in _tasks(metrics).items():
        for name, v in m.get("variants", {}).items():
            if not isinstance(v, Mapping):
                continue
            k = v.get("decay_k")
            k_s = "–" if k is None else ("always" if k == -1 else f"{k:g}")
            cfg = ", ".join(f"{key}={val}" for key, val in sorted((v.get("config") or {}).items())) or "–"
            num = lambda x, f="{:.1f}": f.format(x) if _finite(x) is not None else "–"  # noqa: E731
            lines.append(f"| {t} | `{name}`{' ✗' if v.get('failed') else ''} | {v.get('objective', '–')} | "
                         f"{v.get('feed', '–')} | {v.get('alpha', '–')} | {k_s} | {v.get('seeds', '–')} | "
                         f"{num(v.get('epochs_run'))} | {num(v.get('best_epoch'))} | "
                         f"{num(v.get('seconds_per_epoch'))} | {cfg} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# findings
class _Side:
    """One side of a comparison: a (possibly best-of) variant's test score."""

    def __init__(self, name: str, score: float | None, std: float | None):
        self.name, self.score, self.std = name, score, std

    def __str__(self) -> str:
        return f"{self.name} {_fmt(self.score)}" + (f" ± {self.std:.2f}" if self.std is not None else "")


def _testable(m: Mapping[str, Any], variant: str, split: str, decoding: str) -> tuple[_Side | None, str]:
    """Our side, or None and why it cannot be used (not run / failed / no score)."""
    v = _variant(m, variant)
    if v is None:
        return None, f"{variant} not run"
    if v.get("failed"):
        return None, f"{variant} failed ({v.get('failure') or 'no reason recorded'})"
    mean, std = _score(m, variant, split, decoding)
    if mean is None:
        return None, f"{variant} has no {split} {DECODING_LABEL[decoding]} score"
    return _Side(variant, mean, std), ""


def _noise(a: _Side, b: _Side) -> str:
    """" (within noise: |Δ| ≤ pooled std x)" when both sides have a std and the difference is within it."""
    if a.std is None or b.std is None:
        return ""
    pooled = math.sqrt((a.std ** 2 + b.std ** 2) / 2)
    return f" (within noise: |Δ| ≤ pooled std {pooled:.2f})" if abs(a.score - b.score) <= pooled else ""


def _compare(a: _Side, b: _Side, strict: bool) -> tuple[bool, str]:
    """Whether a > b (strict) or a ≥ b, and "a 56.20 > b 55.10 (Δ +1.10)" with the noise note."""
    ok = a.score > b.score if strict else a.score >= b.score
    sym = (">" if strict else "≥") if ok else ("≤" if strict else "<")
    return ok, f"{a} {sym} {b} (Δ {a.score - b.score:+.2f}){_noise(a, b)}"


def _pair_claim(claim: str, task: str, m: Mapping[str, Any], paper: str, a: tuple[str, str], b: tuple[str, str],
                strict: bool = True, split: str = "test") -> dict[str, str]:
    """A claim "a (variant, decoding) beats b": reproduced when it holds on our test scores."""
    sa, why_a = _testable(m, a[0], split, a[1])
    sb, why_b = _testable(m, b[0], split, b[1])
    if sa is None or sb is None:
        return _row(claim, task, paper, "; ".join(w for w in (why_a, why_b) if w), NOT_TESTABLE)
    sa.name, sb.name = f"{a[0]} ({DECODING_LABEL[a[1]]})", f"{b[0]} ({DECODING_LABEL[b[1]]})"
    ok, text = _compare(sa, sb, strict)
    return _row(claim, task, paper, text, REPRODUCED if ok else NOT_REPRODUCED)


def _paper_beam(task: str, variant: str, decoding: str) -> float | None:
    return TABLE1_2.get(PAPER_TASK.get(task, ""), {}).get(variant, {}).get("test", {}).get(decoding)


def _paper_pair(task: str, a: tuple[str, str], b: tuple[str, str], strict: bool = True) -> str:
    pt = PAPER_TASK.get(task)
    if pt is None:
        return "no paper counterpart"
    pa, pb = _paper_beam(task, *a), _paper_beam(task, *b)
    holds = (pa > pb) if strict else (pa >= pb)
    return (f"{pt} test: {a[0]} ({DECODING_LABEL[a[1]]}) {_fmt(pa)} vs {b[0]} ({DECODING_LABEL[b[1]]}) "
            f"{_fmt(pb)}{'' if holds else ' (does not hold in the paper)'}")


def _best_by_dev(m: Mapping[str, Any], variants: Sequence[str]) -> tuple[_Side | None, list[str]]:
    """The variant with the best dev score (greedy decoding) among the usable ones; its test score."""
    usable, why = [], []
    for v in variants:
        side, reason = _testable(m, v, "test", "greedy")
        if side is None:
            why.append(reason)
            continue
        dev = _score(m, v, "dev", "greedy")[0]
        usable.append((dev if dev is not None else -math.inf, side))
    if not usable:
        return None, why
    return max(usable, key=lambda x: x[0])[1], why


def _paper_ss(paper_task: str) -> str:
    t = TABLE3_1[paper_task]
    best = lambda vs: max(vs, key=lambda v: t[v]["dev"])  # noqa: E731
    d, s = best(SS_VARIANTS[3:]), best(SS_VARIANTS[1:3])
    holds = t[d]["test"] > t[s]["test"] > t["ce"]["test"]
    return (f"{d} {t[d]['test']:.2f} > {s} {t[s]['test']:.2f} > ce {t['ce']['test']:.2f} "
            f"(test, best by dev){'' if holds else ' (does not hold in the paper)'}")


def findings(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per directional claim per task, with the verdict computed from our test scores.

    Claims (each "a beats b" is strict, except (3) which is "≥"; our scores are means over seeds; when
    both sides have seeds > 1 and |Δ| ≤ the pooled std sqrt((s_a² + s_b²) / 2), ``ours`` says "within
    noise" but the verdict still follows the sign):

    1. ``dl_annealed`` decoded with hard beam beats ``ce`` decoded greedily.
    2. annealed α beats α = 1 (hard beam): ``dl_annealed`` > ``dl_alpha1``; ``hinge_annealed`` >
       ``hinge_alpha1`` (two rows).
    3. soft-beam decoding ≥ hard-beam decoding for every search-aware model (``dl_*``, ``hinge_*``) that
       ran and did not fail: reproduced when it holds for all of them.
    4. relaxed scheduled sampling > Bengio scheduled sampling > CE (greedy): the ``dss_fixed_*`` /
       ``dss_annealed_*`` variant with the best dev score against the ``ss_*`` variant with the best dev
       score against ``ce``, compared on test.
    5. gentler decay is better: ``dss_k100`` > ``dss_always`` (greedy).

    A claim whose variants are missing or failed is "not testable here", with the reason in ``ours``.
    ``paper`` quotes the paper's numbers for the corresponding task (and says when they do not hold)."""
    rows: list[dict[str, str]] = []
    for t, m in _tasks(metrics).items():
        pt = PAPER_TASK.get(t)
        c1 = (("dl_annealed", "beam"), ("ce", "greedy"))
        rows.append(_pair_claim("(1) DL-annealed (hard beam) beats CE (greedy)", t, m, _paper_pair(t, *c1), *c1))
        for obj in ("dl", "hinge"):
            c2 = ((f"{obj}_annealed", "beam"), (f"{obj}_alpha1", "beam"))
            rows.append(_pair_claim(f"(2) annealed α beats α = 1 ({'DL' if obj == 'dl' else 'hinge'}, hard beam)",
                                    t, m, _paper_pair(t, *c2), *c2))
        rows.append(_soft_claim(t, m, pt))
        rows.append(_ss_claim(t, m, pt))
        c5 = (("dss_k100", "greedy"), ("dss_always", "greedy"))
        p5 = (f"NER test F1: k=100 {TABLE3_2['dss_k100']:.2f} vs always {TABLE3_2['dss_always']:.2f}"
              + ("" if pt == "NER" else " (thesis Table 3.2 is NER only)"))
        rows.append(_pair_claim("(5) gentler decay is better: k = 100 beats always (greedy)", t, m, p5, *c5))
    return rows


def _soft_claim(task: str, m: Mapping[str, Any], paper_task: str | None) -> dict[str, str]:
    claim = "(3) soft-beam ≥ hard-beam decoding for the search-aware models"
    if paper_task:
        held = 0
        parts = []
        for v in SEARCH_AWARE:
            soft, hard = _paper_beam(task, v, "soft_beam"), _paper_beam(task, v, "beam")
            held += soft >= hard
            parts.append(f"{v} {soft:.2f} {'≥' if soft >= hard else '<'} {hard:.2f}")
        paper = (f"{paper_task} test, soft vs hard: " + "; ".join(parts)
                 + f" — holds for {held}/{len(SEARCH_AWARE)} (the paper's text: 'no large difference')")
    else:
        paper = "no paper counterpart"
    parts, why, oks = [], [], []
    for v in SEARCH_AWARE:
        soft, r1 = _testable(m, v, "test", "soft_beam")
        hard, r2 = _testable(m, v, "test", "beam")
        if soft is None or hard is None:
            why.append(r1 or r2)
            continue
        soft.name, hard.name = f"{v} soft", "hard"
        ok, text = _compare(soft, hard, strict=False)
        oks.append(ok)
        parts.append(text)
    if not oks:
        return _row(claim, task, paper, "; ".join(why), NOT_TESTABLE)
    ours = "; ".join(parts) + f" — holds for {sum(oks)}/{len(oks)}" + (f"; untested: {'; '.join(why)}" if why else "")
    return _row(claim, task, paper, ours, REPRODUCED if all(oks) else NOT_REPRODUCED)


def _ss_claim(task: str, m: Mapping[str, Any], paper_task: str | None) -> dict[str, str]:
    claim = "(4) relaxed SS > Bengio SS > CE (greedy)"
    if paper_task == "NER":
        paper = "NER F1: " + _paper_ss("NER")
    else:
        paper = ("no CCG column in the thesis; MT BLEU for reference only (not comparable): " + _paper_ss("MT")
                 if paper_task == "CCG" else "no paper counterpart")
    dss, why_d = _best_by_dev(m, SS_VARIANTS[3:])
    ss, why_s = _best_by_dev(m, SS_VARIANTS[1:3])
    ce, why_c = _testable(m, "ce", "test", "greedy")
    if dss is None or ss is None or ce is None:
        why = ([f"no usable α-soft variant ({'; '.join(why_d)})"] if dss is None else []) + \
              ([f"no usable Bengio variant ({'; '.join(why_s)})"] if ss is None else []) + \
              ([why_c] if ce is None else [])
        return _row(claim, task, paper, "; ".join(why), NOT_TESTABLE)
    ok1, t1 = _compare(dss, ss, strict=True)
    ok2, t2 = _compare(ss, ce, strict=True)
    return _row(claim, task, paper, f"{t1}; {t2} (test, best by dev)", REPRODUCED if ok1 and ok2 else NOT_REPRODUCED)


def findings_table(rows: Sequence[Mapping[str, str]]) -> str:
    """The findings as a Markdown table: claim, task, the paper's evidence, ours, verdict."""
    return _table(rows) if rows else "_No findings (no tasks)._\n"


# ---------------------------------------------------------------------------------------------
# figure
# one row of panels per paper table (the 2018 paper's Tables 1-2, the thesis's Tables 3.1 and 3.2)
CURVE_GROUPS = (("2018 Tables 1-2: search-aware", BEAM_VARIANTS),
                ("thesis Table 3.1: scheduled sampling", SS_VARIANTS),
                ("thesis Table 3.2: decay strength k", ("ce",) + DECAY_VARIANTS))
_CE_COLOR = "black"                  # the baseline, in every panel it appears in


def _curve_groups(curves: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The panels' rows: each paper table's variants that have a curve (a row with only the baseline is left
    out), then any other variants in rows of at most :data:`MAX_SERIES`."""
    rows = []
    for title, variants in CURVE_GROUPS:
        names = [v for v in variants if v in curves]
        if any(v != "ce" for v in names):
            rows.append((title, names))
    known = {v for _, vs in CURVE_GROUPS for v in vs}
    rest = [v for v in curves if v not in known]
    if "ce" in curves and not rows:
        rest.insert(0, "ce")
    for i in range(0, len(rest), MAX_SERIES):
        rows.append(("other variants", rest[i:i + MAX_SERIES]))
    return rows


def curves_figure(metrics: Mapping[str, Any], task: str) -> Figure:
    """Dev score (left column) and train loss (right column) per epoch, one row of panels per paper table
    (Tables 1-2's search-aware variants, Table 3.1's scheduled sampling, Table 3.2's decay strengths; other
    variants in further rows), at most :data:`MAX_SERIES` variants per panel, each named as the tables name it;
    Baseline CE is black wherever it appears, failed variants dashed and marked ✗. The dev-score panels share
    one y scale. The metrics keep one curve per variant (its best seed's), so no spread across seeds is drawn."""
    m = _task(metrics, task)
    curves = {v: c for v, c in (m.get("curves") or {}).items() if c}
    rows = _curve_groups(curves)
    n = max(len(rows), 1)
    fig, axes = plt.subplots(n, 2, figsize=(11.5, 3.1 * n + 0.6), dpi=110, squeeze=False, sharey="col")
    for (title, names), (ax1, ax2) in zip(rows, axes):
        palette = iter(plt.get_cmap("tab10").colors)
        for name in names:
            hist = curves[name]
            failed = bool((_variant(m, name) or {}).get("failed"))
            style = "--" if failed else "-"
            label = VARIANT_LABEL.get(name, name) + (" ✗" if failed else "")
            color = _CE_COLOR if name == "ce" else next(palette)
            ep = [h["epoch"] for h in hist]
            ax1.plot(ep, [h.get("dev_score", math.nan) for h in hist], style, marker="o", ms=3, label=label,
                     color=color)
            ax2.plot(ep, [h.get("train_loss", math.nan) for h in hist], style, marker="o", ms=3, color=color,
                     label=label)
        ax1.set_title(f"{title}: dev score", fontsize=9)
        ax2.set_title(f"{title}: train loss", fontsize=9)
        ax2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    if not rows:
        for ax in axes[0]:
            ax.text(0.5, 0.5, "no learning curves recorded", ha="center", va="center", transform=ax.transAxes)
    for ax1, ax2 in axes:
        ax1.set_ylabel(f"dev {_metric_name(m)} (%)")
        ax2.set_ylabel("train loss")
        for ax in (ax1, ax2):
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
    fig.suptitle(f"{task}: learning curves (each variant's best seed)", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# report
def _file_name(task: str) -> str:
    return f"curves_{re.sub(r'[^A-Za-z0-9_.-]', '_', task)}.png"


def readme(metrics: Mapping[str, Any]) -> str:
    """The report's Markdown."""
    tasks = _tasks(metrics)
    md = ["# Search-aware training of seq2seq taggers (Goyal et al. 2018; Goyal's thesis, ch. 3): ours beside "
          "the papers", "",
          "A seq2seq tagger trained with cross-entropy under teacher forcing (Baseline CE) is compared with "
          "training that sees the model's own decisions. Goyal, Dyer & Berg-Kirkpatrick (2018) relax beam "
          "search into a differentiable soft beam (a peaked softmax with inverse temperature α in place of "
          "the top-k argmax) and train through it with a direct loss (G̃DL: Hamming loss of the beam's "
          "output) or a max-margin loss (G̃hinge), with α fixed at 1 or annealed upwards; models are decoded "
          "greedily, with hard beam search or with the soft beam. Goyal's thesis (ch. 3) relaxes scheduled "
          "sampling: the decoder is fed the α-soft argmax (greedy) or a Gumbel-softmax sample of its previous "
          "prediction, mixed with the gold label with a probability that decays as an inverse sigmoid of the "
          "epoch with strength k, against Bengio et al.'s (2015) discontinuous scheduled sampling. Our tasks "
          "stand in for the papers': " + "; ".join(f"`{t}` — {n}" for t, n in TASK_NOTE.items()) + ". "
          "Other tasks are shown with our numbers only.", "",
          "Caveats: the corpora, label sets and model sizes differ from the papers', so only the *patterns* "
          "(which training wins, in which direction) compare, not the absolute numbers. Our numbers are means "
          "over seeds (± std when seeds > 1); the papers report the best of several random restarts chosen "
          "on dev. Configurations were tuned on dev. '—': not run; '✗': a run whose model did not learn.", "",
          "## Setup", "", *[f"- {_setup_line(t, m)}" for t, m in tasks.items()], ""]
    for t in tasks:
        pt = PAPER_TASK.get(t)
        title = {"NER": "Table 2 (NER)", "CCG": "Table 1 (CCG supertagging)"}.get(pt or "", "no paper table")
        md += [f"## Goyal et al. 2018, {title} — {t}", "", table_beam(metrics, t)]
    md += ["## Thesis Table 3.1 — differentiable scheduled sampling", "", table_ss(metrics),
           "## Thesis Table 3.2 — decay strength k of the scheduled-sampling schedule", "", table_decay(metrics),
           "## Findings", "",
           "Each directional claim of the papers, tested on our test scores by code (see "
           "`components/reports/goyal_2018.findings`).", "",
           findings_table(findings(metrics)),
           "## Training details (ours)", "", training_table(metrics),
           "## Learning curves", ""]
    for t in tasks:
        name = _file_name(t)
        md += [f"### {t}", "", f"![learning curves, {t}]({name})", ""]
    return "\n".join(md)


def write_report(metrics: Mapping[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write README.md and curves_<task>.png (one per task) into ``out_dir``, each atomically (a
    temporary file in the same folder, then ``os.replace``). Returns file name -> path."""
    tasks = _tasks(metrics)
    out = Path(out_dir)
    written: dict[str, str] = {}
    for t in tasks:
        name = _file_name(t)
        fig = curves_figure(metrics, t)
        try:
            with atomic_path(out / name) as tmp:
                fig.savefig(tmp, format="png")
        finally:
            close(fig)
        written[name] = str(out / name)
    write_text(out / "README.md", readme(metrics))
    written["README.md"] = str(out / "README.md")
    return written
