"""Tables 1 and 2 of Goyal, Dyer & Berg-Kirkpatrick, "A Continuous Relaxation of Beam Search for
End-to-end Training of Neural Sequence Models" (AAAI 2018;
``papers/goyal-2018-continuous-relaxation-of-beam-search.txt``) and Tables 3.1 and 3.2 of Goyal's
thesis, ch. 3 "differentiable scheduled sampling"
(``papers/goyal-thesis-exposure-bias-label-bias-energy-models.txt``), with our runs beside the papers'
numbers, a findings table whose verdicts are computed from the numbers, and learning curves.

Input: the ``search_aware`` stage's metrics (``metrics/search_aware.json``)::

    {"tasks": {task: {"metric": "span_f1" | "accuracy" (percent), "n_labels", "top_k_labels" (0 = all),
                      "beam_size", "n_train", "n_test", "majority_baseline",
                      "variants": {variant: {"objective", "feed", "alpha", "decay_k", "config", "seeds",
                                             "dev" / "test" / "dev_std" / "test_std":
                                                 {"greedy", "beam", "soft_beam"},
                                             "epochs_run", "best_epoch", "seconds_per_epoch",
                                             "failed", "failure", ["no_selectable_epoch"]}},
                      "curves": {variant: [{"epoch", "train_loss", "dev_score"}, ...]}}}}

and its per-sentence test statistics (``metrics/stats/search_aware/<task>.npz``, read with
``components.metrics.significance.load_stats``; systems ``<variant>/<decoding>``), from which the
report kit (:mod:`components.reports.kit`) judges every claim of :data:`CLAIMS` (and
:data:`GAIN_CCG_VS_NER`, :data:`MT_CLAIMS`, :data:`SPEED_CLAIM`) with the interval of
:func:`components.metrics.significance.paired_interval` (training seeds and test sentences). A claim
with a stated size ("+5.5 accuracy points") carries it as :attr:`kit.Claim.size`, read as the paper
rounded it (the smallest value that rounds to the stated one: +5.5 → 5.45, the paper's own 5.47
meets it); a claim resting on
another ("G̃hinge performs poorly because its CE warm start is worse with beam search") names it in
:attr:`kit.Claim.presumes`; the thesis's speed claim is ``hardware=True`` (timed on CPU cores here);
the kit applies all three in :func:`kit.finalise`. A group ("Bengio et al.'s scheduled sampling") is
its variant best on *dev*, judged on test. ``failed`` (the stage's did-not-learn guard) and
``no_selectable_epoch`` (an annealed run with no epoch where α had left 1) make a variant's claims
*not testable (failed run)*.

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
``greek_morph`` (SBLGNT morphology, all its tags; the CE screen's pick) or ``greek_morph_k400`` (its
top 400) stands in for CCG supertagging (1,284 supertags, accuracy). The thesis has no CCG column: its
second column is MT (IWSLT De->En, BLEU), shown for reference only. Any other task is reported with our numbers and no paper's.
The corpora differ, so the comparison is of *patterns* (which training wins, in which direction),
not of absolute numbers.

Public API: :data:`PAPER_TASK`, :data:`TABLE1_2`, :data:`TABLE3_1`, :data:`TABLE3_2`, :data:`SS_VARIANTS`,
:data:`VARIANT_LABEL`, :data:`SEARCH_AWARE`, :data:`CLAIMS`, :data:`GAIN_CCG_VS_NER`, :data:`MT_CLAIMS`,
:data:`SPEED_CLAIM`, :data:`SOFT_HARD_MARGIN`, :func:`table_beam`,
:func:`table_ss`, :func:`table_decay`, :func:`findings` (-> the kit's verdicts, finalised), :func:`curves_figure`,
:func:`readme`, :func:`write_report`; the CE screen's :func:`screen_verdicts` and :func:`screen_markdown`.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import numpy as np  # noqa: E402

from components.io import atomic_path, write_text  # noqa: E402
from components.metrics.significance import Interval, paired_interval  # noqa: E402
from components.metrics.tagging import stats_score  # noqa: E402
from components.reports import kit  # noqa: E402
from components.reports.curves import MAX_SERIES, close  # noqa: E402

# our task -> the papers' task
PAPER_TASK = {"ner": "NER", "greek_morph": "CCG", "greek_morph_k400": "CCG"}
TASK_NOTE = {
    "ner": "WNUT-16 Twitter NER (span F1) in place of the papers' CoNLL-2003 German NER",
    "greek_morph": "SBLGNT Greek morphology, all 1,025 tags (accuracy) in place of CCG supertagging (1,284 labels): "
                   "of the CE screen's candidates the one where CE + beam beats greedy (reports/stand_in_screen)",
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
    """"56.20 ± 0.31"; "✗" for a model that did not learn (no table cell: its score is in the
    footnote), "—" when not run."""
    v = _variant(m, variant)
    if v is None:
        return "—"
    if v.get("failed"):
        return "✗"
    mean, std = _score(m, variant, split, decoding)
    s = _fmt(mean) + (f" ± {std:.2f}" if std is not None and mean is not None else "")
    return s


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
                notes.append(f"✗ {t} / {v} did not learn: “{r.get('failure') or 'no reason recorded'}”.")
            if r is not None and r.get("no_selectable_epoch"):
                notes.append(f"{t} / {v}: no epoch where the annealed α had left 1 — the kept model is not an "
                             f"annealed one ({r['no_selectable_epoch']}); its claims are not testable.")
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
# findings: the papers' claims as data, the systems each pairs, judged by the report kit
# A system is (variant, decoding); a group (several variants, one decoding) is the group's variant with
# the best *dev* score under that decoding (the thesis's Table 3.1 reports "the best performing
# configuration ... on the validation set"), judged on the *test* statistics: a selection is never
# made on test.
System = tuple[str, str]
Group = tuple[tuple[str, ...], str]

#: "soft and hard beam decoding do not differ much": the margin of the equivalence, in score points.
#: The paper calls its own soft - hard gaps "not a large difference"; the largest of them on a test set
#: is 0.85 F1 (NER, G̃hinge α = 1: 43.82 vs 44.67; CCG's largest is 0.51), so differences below
#: 1 point are what the paper treats as "not large".
SOFT_HARD_MARGIN = 1.0
#: "similar speeds" (thesis §3.3.4): the margin of the equivalence on log10 of the seconds-per-epoch
#: ratio. The thesis gives no number; 0.1 (a factor of 1.26) is our reading of "similar".
SPEED_MARGIN = 0.1
PREMISE = ("search errors of the CE model matter on the task (the CE screen's beam − greedy and bi − uni gaps; "
           "reports/stand_in_screen/README.md)")
_G18 = "Goyal et al. 2018, Sec. 4 (Results; the same sentence in the thesis, §4.6)"
_TH33 = "thesis §3.3.4 (Results)"
_UNITS_NER = "the size is in span F1 points (%) on ner, mapped 1:1 to the papers' CoNLL NER F1 points"
_UNITS_CCG = ("the size is in tag-accuracy points (%) on the Greek morphology stand-in, mapped 1:1 to CCG supertag "
              "accuracy points")
_UNITS = ("sizes in our score's points, 1:1: span F1 (%) on ner for the papers' CoNLL NER F1, tag accuracy (%) "
          "on the Greek morphology stand-in for CCG supertag accuracy")


def _p(task: str, variant: str, decoding: str) -> float | None:
    return TABLE1_2[task][variant]["test"][decoding]


def _ss_best(group: Sequence[str]) -> str:
    """The thesis's best-by-dev variant of a Table 3.1 group (NER)."""
    return max(group, key=lambda v: TABLE3_1["NER"][v]["dev"])


@dataclass(frozen=True)
class ClaimSpec:
    """A claim of the papers and the systems it pairs: ``parts`` (label, a, b), each side a system
    or a group; one part is a comparison (:func:`kit.judge`), several a conjunction (:func:`kit.judge_parts`).
    ``claims``: the claim as coded for each paper task it is made for (its paper numbers differ)."""
    claims: Mapping[str, kit.Claim]                       # paper task ("NER", "CCG") -> claim
    parts: tuple[tuple[str, System | Group, System | Group], ...]
    needs_variants: tuple[str, ...] = ()                  # judged on a task only where one of these ran


def _beam_claim(cid: str, text: str, a: System, b: System, *, sign: int = 1, tasks=("NER", "CCG"),
                premise: str = PREMISE, size: Mapping[str, float] | None = None, quote: str | Mapping[str, str] = "",
                presumes: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, kit.Claim]:
    src = {"NER": "2018 Table 2 (test)", "CCG": "2018 Table 1 (test)"}
    return {t: kit.Claim(f"{cid}" + (f"_{t.lower()}" if len(tasks) == 1 else ""), text, f"{a[0]} ({DECODING_LABEL[a[1]]})",
                         f"{b[0]} ({DECODING_LABEL[b[1]]})", sign=sign,
                         paper=kit.PaperEvidence(_p(t, *a), _p(t, *b), source=src[t]), premise=premise,
                         size=(size or {}).get(t, 0.0), quote=quote if isinstance(quote, str) else quote[t],
                         presumes=(presumes or {}).get(t, ()))
            for t in tasks}


def _largest_soft_hard(task: str) -> str:
    return max(SEARCH_AWARE, key=lambda v: abs(_p(task, v, "soft_beam") - _p(task, v, "beam")))


def _ss_claim(cid: str, text: str, a: str, b: str, size: float, quote: str, task: str = "NER") -> kit.Claim:
    """A thesis Table 3.1 claim between two named variants, greedy decoding (``task``: "NER" or "MT")."""
    unit = "F1" if task == "NER" else "BLEU"
    ta, tb = TABLE3_1[task][a]["test"], TABLE3_1[task][b]["test"]
    return kit.Claim(cid, text, f"{a} (greedy)", f"{b} (greedy)", size=size, quote=quote,
                     paper=kit.PaperEvidence(ta, tb, source=f"thesis Table 3.1, {task} test {unit}"))


_RELAXED_SS, _BENGIO_SS = SS_VARIANTS[3:], SS_VARIANTS[1:3]
_DSS_QUOTE = ("\"The best results for NER were obtained with the relaxed greedy decoder with annealed α which yielded an "
              "F1 gain of +3.1 over the standard seq2seq baseline and a gain of +1.5 F1 over standard scheduled "
              f"sampling.\" ({_TH33}). The thesis names the variant (no selection is made here); its Table 3.1 gives "
              "+3.01 (56.33 − 53.32) over CE and +1.50 over Bengio et al.'s greedy variant (54.83; +1.73 over the "
              "sample variant), so \"standard scheduled sampling\" is the greedy one; " + _UNITS_NER + ".")
_MT_QUOTE = ("\"For MT, we obtain the best results with the relaxed sample-based decoder, which yielded a gain of +1.5 "
             "BLEU over standard seq2seq and a gain of +0.75 BLEU over standard scheduled sampling.\" "
             f"({_TH33}; Table 3.1: 20.60 − 19.11 = +1.49, 20.60 − 19.85 = +0.75 over Bengio et al.'s greedy variant). "
             "Sizes in BLEU points.")
CLAIMS: tuple[ClaimSpec, ...] = (
    ClaimSpec(_beam_claim("dl_annealed_beats_ce", "G̃DL with annealed α (hard beam) improves on the CE baseline decoded "
                          "greedily by the stated points (+5.5 accuracy on CCG, +1.5 F1 on NER)", ("dl_annealed", "beam"),
                          ("ce", "greedy"), size={"CCG": 5.45, "NER": 1.45},
                          quote="\"our approach G̃DL,α shows significant improvements over the locally normalized CE "
                                "baseline with greedy decoding for both the tasks (+5.5 accuracy points gain for "
                                f"supertagging and +1.5 F1 points for NER)\" ({_G18}). Its tables give +5.47 (CCG, hard "
                                "beam) and +1.23 (NER, hard beam; +1.46 with the soft beam); " + _UNITS + "."),
              (("dl_annealed beam − ce greedy", ("dl_annealed", "beam"), ("ce", "greedy")),)),
    ClaimSpec(_beam_claim("dl_annealed_beats_ce_beam", "G̃DL makes the model search-aware: annealed G̃DL beats the CE "
                          "model it was warm-started from, both decoded by hard beam", ("dl_annealed", "beam"), ("ce", "beam"),
                          quote="\"optimizing this new training objective yields substantially better results on two "
                                "sequence tasks (Named Entity Recognition and CCG Supertagging) when compared with both "
                                "cross entropy trained greedy decoding and cross entropy trained beam decoding baselines\" "
                                "(Goyal et al. 2018, Abstract). \"Substantially\" is not quantified: no size."),
              (("dl_annealed beam − ce beam", ("dl_annealed", "beam"), ("ce", "beam")),)),
    ClaimSpec(_beam_claim("annealed_beats_alpha1_dl", "annealing α always results in better performance than a constant "
                          "α = 1 (G̃DL, hard beam)", ("dl_annealed", "beam"), ("dl_alpha1", "beam"),
                          quote="\"annealing α always results in better performance than training with a constant "
                                f"α = 1.0 for both G̃DL,α and G̃hinge,α\" ({_G18})."),
              (("dl_annealed − dl_alpha1 (beam)", ("dl_annealed", "beam"), ("dl_alpha1", "beam")),)),
    ClaimSpec(_beam_claim("annealed_beats_alpha1_hinge", "annealing α always results in better performance than a "
                          "constant α = 1 (G̃hinge, hard beam)", ("hinge_annealed", "beam"), ("hinge_alpha1", "beam"),
                          quote="\"annealing α always results in better performance than training with a constant "
                                f"α = 1.0 for both G̃DL,α and G̃hinge,α\" ({_G18})."),
              (("hinge_annealed − hinge_alpha1 (beam)", ("hinge_annealed", "beam"), ("hinge_alpha1", "beam")),)),
    ClaimSpec({t: kit.Claim("soft_equals_hard", "no large difference when the soft beam is used for decoding compared "
                            f"to hard beam search (every search-aware model; equivalence, margin ±{SOFT_HARD_MARGIN:g} "
                            "point: the paper's largest soft − hard gap is 0.85)",
                            "soft beam", "hard beam", kind="equivalence", margin=SOFT_HARD_MARGIN,
                            paper=kit.PaperEvidence(_p(t, _largest_soft_hard(t), "soft_beam"),
                                                    _p(t, _largest_soft_hard(t), "beam"),
                                                    source=f"2018 Table {'2' if t == 'NER' else '1'}, "
                                                           f"{_largest_soft_hard(t)} (its largest soft − hard gap)"),
                            quote="\"we did not observe a large difference when our soft approximation is used for "
                                  f"decoding compared to hard beam search decoding\" ({_G18}).")
               for t in ("NER", "CCG")},
              tuple((f"{v} soft − hard", (v, "soft_beam"), (v, "beam")) for v in SEARCH_AWARE)),
    ClaimSpec(_beam_claim("ce_beam_vs_greedy", "the CE baseline improves with beam search over greedy decoding by "
                          "2 accuracy points (CCG)", ("ce", "beam"), ("ce", "greedy"), tasks=("CCG",),
                          premise="this is the premise itself", size={"CCG": 2.0},
                          quote="\"For supertagging, we observe that the baseline cross entropy trained model improves "
                                "its predictions with beam search decoding compared to greedy decoding by 2 accuracy "
                                f"points\" ({_G18}; Table 1: +2.07); " + _UNITS_CCG + "."),
              (("ce beam − ce greedy", ("ce", "beam"), ("ce", "greedy")),)),
    ClaimSpec(_beam_claim("ce_beam_vs_greedy", "the CE baseline yields worse performance with beam search than with "
                          "greedy decoding (NER)", ("ce", "beam"), ("ce", "greedy"), sign=-1, tasks=("NER",),
                          premise="this is the premise itself",
                          quote="\"The pretrained CE baseline model yields worse performance when beam search is done "
                                f"instead of greedy locally normalized decoding.\" ({_G18}). No size stated."),
              (("ce beam − ce greedy", ("ce", "beam"), ("ce", "greedy")),)),
    ClaimSpec(_beam_claim("dl_beats_hinge", "the direct loss G̃DL performs better than the approximate max-margin "
                          "G̃hinge (annealed α, hard beam)", ("dl_annealed", "beam"), ("hinge_annealed", "beam"),
                          quote={"CCG": "\"Both the optimization schemes proposed in this paper improve upon the baseline "
                                        "with soft direct loss optimization (G̃DL,α), performing better than the "
                                        f"approximate max-margin approach.\" ({_G18}, on supertagging).",
                                 "NER": "\"For NER, we observe that optimizing G̃DL,α outperforms all the other "
                                        f"approaches\" ({_G18})."}),
              (("dl_annealed − hinge_annealed (beam)", ("dl_annealed", "beam"), ("hinge_annealed", "beam")),)),
    # G̃hinge's direction follows how its CE warm start fares with beam search (the paper's own account):
    # it improves where CE beam beats greedy (CCG), it performs poorly where CE beam is worse (NER).
    ClaimSpec(_beam_claim("hinge_vs_ce", "both search-aware objectives improve upon the CE baseline: G̃hinge (annealed "
                          "α, hard beam) beats CE greedy (CCG), warm-started from a CE model that beam search helps",
                          ("hinge_annealed", "beam"), ("ce", "greedy"), tasks=("CCG",),
                          presumes={"CCG": ("ce_beam_vs_greedy_ccg",)},
                          quote="\"beam search is already helpful for this task, even without search-aware training. "
                                "Both the optimization schemes proposed in this paper improve upon the baseline\" "
                                f"({_G18}, on supertagging). Presumes the CE model's beam − greedy gain on the task, as "
                                "the paper explains G̃hinge's result by its warm start's behaviour with beam search."),
              (("hinge_annealed beam − ce greedy", ("hinge_annealed", "beam"), ("ce", "greedy")),)),
    ClaimSpec(_beam_claim("hinge_vs_ce", "the approximate max-margin approach G̃hinge performs poorly on NER: below "
                          "the CE baseline decoded greedily, warm-started from a CE model that beam search hurts",
                          ("hinge_annealed", "beam"), ("ce", "greedy"), sign=-1, tasks=("NER",),
                          presumes={"NER": ("ce_beam_vs_greedy_ner",)},
                          quote="\"we also observe that the approximate max-margin approach (G̃hinge,α) performs poorly "
                                "here. [...] Because we also warm started with a pre-trained model that results in a "
                                "worse performance with beam search decode than with greedy decode, we observe the "
                                f"adverse effect of this deficiency.\" ({_G18}, on NER). Presumes the CE model's "
                                "beam < greedy on the task."),
              (("hinge_annealed beam − ce greedy", ("hinge_annealed", "beam"), ("ce", "greedy")),)),
    ClaimSpec({t: kit.Claim("relaxed_ss_ranking", "relaxed scheduled sampling > Bengio et al.'s scheduled sampling "
                            "> CE (greedy decoding; each group represented by its variant best on dev, judged on test)",
                            "relaxed SS (best by dev)", "Bengio SS (best by dev)",
                            paper=(kit.PaperEvidence(TABLE3_1["NER"][_ss_best(_RELAXED_SS)]["test"],
                                                     TABLE3_1["NER"][_ss_best(_BENGIO_SS)]["test"],
                                                     source=f"thesis Table 3.1: {_ss_best(_RELAXED_SS)} vs "
                                                            f"{_ss_best(_BENGIO_SS)} (> ce "
                                                            f"{TABLE3_1['NER']['ce']['test']:.2f})")
                                   if t == "NER" else kit.PaperEvidence(source="the thesis has no CCG column")),
                            premise=PREMISE,
                            quote="\"All three approaches improve over the standard cross-entropy based seq2seq "
                                  "training. Moreover, both approaches using continuous relaxations (greedy and "
                                  f"sample-based) outperform standard scheduled sampling (Bengio et al., 2015).\" ({_TH33}; "
                                  "stated for NER and MT).")
               for t in ("NER", "CCG")},
              (("relaxed − Bengio", (_RELAXED_SS, "greedy"), (_BENGIO_SS, "greedy")),
               ("Bengio − CE", (_BENGIO_SS, "greedy"), ("ce", "greedy"))),
              needs_variants=_RELAXED_SS + _BENGIO_SS),
    ClaimSpec({"NER": _ss_claim("dss_gain_over_ce", "relaxed greedy scheduled sampling with annealed α improves on "
                                "the CE baseline by +3.1 F1 (greedy decoding)", "dss_annealed_greedy", "ce", 3.05,
                                _DSS_QUOTE)},
              (("dss_annealed_greedy − ce", ("dss_annealed_greedy", "greedy"), ("ce", "greedy")),),
              needs_variants=("dss_annealed_greedy",)),
    ClaimSpec({"NER": _ss_claim("dss_gain_over_ss", "relaxed greedy scheduled sampling with annealed α improves on "
                                "Bengio et al.'s scheduled sampling (greedy) by +1.5 F1 (greedy decoding)",
                                "dss_annealed_greedy", "ss_greedy", 1.45, _DSS_QUOTE)},
              (("dss_annealed_greedy − ss_greedy", ("dss_annealed_greedy", "greedy"), ("ss_greedy", "greedy")),),
              needs_variants=("dss_annealed_greedy", "ss_greedy")),
    ClaimSpec({"NER": kit.Claim("gentler_decay_ranking", "a gradual decay of the gold-feed probability consistently "
                                "compares favourably to more aggressive decay: k = 100 > 10 > 1 > always (greedy)",
                                "k = 100", "always",
                                paper=kit.PaperEvidence(TABLE3_2["dss_k100"], TABLE3_2["dss_always"],
                                                        source="thesis Table 3.2 (56.33 > 55.88 > 55.30 > 54.83)"),
                                quote="\"as shown in Table 3.2, we observe that a gradual decay of mixing probability "
                                      f"consistently compared favorably to more aggressive decay schedules\" ({_TH33}).")},
              tuple((f"{VARIANT_LABEL[a]} − {VARIANT_LABEL[b]}", (a, "greedy"), (b, "greedy"))
                    for a, b in zip(DECAY_VARIANTS, DECAY_VARIANTS[1:])),
              needs_variants=DECAY_VARIANTS),
)

#: "The improvement is more pronounced on the supertagging task": a difference of two tasks' gains (the
#: CCG stand-in's accuracy gain minus NER's F1 gain, as the paper compares them), judged on the two
#: tasks' statistics side by side (:func:`_cross_task_interval`).
GAIN_CCG_VS_NER = kit.Claim(
    "dl_gain_larger_on_ccg", "the gain of G̃DL (annealed α, hard beam) over CE greedy is more pronounced on "
    "supertagging (accuracy points) than on NER (F1 points)", "CCG gain", "NER gain",
    paper=kit.PaperEvidence(_p("CCG", "dl_annealed", "beam") - _p("CCG", "ce", "greedy"),
                            _p("NER", "dl_annealed", "beam") - _p("NER", "ce", "greedy"),
                            source="2018 Tables 1 and 2 (test): +5.47 vs +1.23"),
    quote="\"(+5.5 accuracy points gain for supertagging and +1.5 F1 points for NER). The improvement is more "
          f"pronounced on the supertagging task\" ({_G18}). \"More pronounced\" is not quantified: no size; the "
          "paper compares accuracy points with F1 points directly, and so do we.")
GAIN_PAIR: tuple[System, System] = (("dl_annealed", "beam"), ("ce", "greedy"))

#: the thesis's MT column (Table 3.1): no scheduled-sampling MT model is trained here
MT_CLAIMS = (
    _ss_claim("dss_sample_gain_over_ce_mt", "relaxed sample-based scheduled sampling (annealed α) improves on the CE "
              "baseline by +1.5 BLEU (MT)", "dss_annealed_sample", "ce", 1.45, _MT_QUOTE, task="MT"),
    _ss_claim("dss_sample_gain_over_ss_mt", "relaxed sample-based scheduled sampling (annealed α) improves on Bengio "
              "et al.'s scheduled sampling by +0.75 BLEU (MT)", "dss_annealed_sample", "ss_greedy", 0.745, _MT_QUOTE,
              task="MT"),
)
MT_NEEDS = ("not run: needs the thesis's MT runs — a seq2seq translator trained with CE, Bengio et al.'s scheduled "
            "sampling (greedy) and the α-soft sample-based relaxation with annealed α, decoded greedily, with "
            "per-sentence BLEU statistics of its test set (e.g. the Greek→English translator of the goyal_2019 study); "
            "the search_aware stage trains taggers only")

#: the thesis's speed claim; timed here on CPU cores, not on the thesis's GPU (reported, not counted)
SPEED_CLAIM = kit.Claim(
    "similar_speed", f"all the models train at similar speeds: α-soft relaxed scheduled sampling vs CE, seconds per "
    f"epoch (equivalence on the log10 ratio, margin ±{SPEED_MARGIN:g}: the thesis gives no number)",
    "α-soft relaxed SS", "Baseline CE", kind="equivalence", margin=SPEED_MARGIN, hardware=True,
    paper=kit.PaperEvidence(source="thesis §3.3.4 (no numbers)"),
    quote="\"Practically, we observed that on GPU hardware, all the models for both the tasks had similar speeds which "
          f"suggests that our approach leads to accuracy gains without compromising run-time.\" ({_TH33}).")
SPEED_NEEDS = ("not run: the stage records only each variant's mean seconds per epoch over seeds (no per-seed, "
               "per-epoch times to form an interval); it needs ce and the α-soft variants timed side by side "
               "(the bench stage's protocol), and our runs are timed on CPU cores, the thesis's on a GPU")


def _unusable(m: Mapping[str, Any], variant: str) -> tuple[str, str]:
    """Why ``variant`` cannot be a side on this task, and its kind (:data:`kit.WHY`): not run, did not
    learn, or an annealed run with no epoch where its α had left its start (("", "") when it can)."""
    v = _variant(m, variant)
    if v is None:
        return f"{variant} not run", kit.NOT_RUN
    if v.get("failed"):
        return f"{variant} did not learn ({v.get('failure') or 'no reason recorded'})", kit.FAILED_RUN
    if v.get("no_selectable_epoch"):
        return (f"{variant}: no epoch where the annealed α had left 1 (the annealed model does not exist; "
                f"{v.get('no_selectable_epoch')})", kit.FAILED_RUN)
    return "", ""


@dataclass(frozen=True)
class _Side:
    """One side of a comparison: its per-sentence test statistics and name, or why there are none."""
    stats: np.ndarray | None
    name: str = ""
    why: str = ""
    kind: str = ""


def _side(m: Mapping[str, Any], stats: Any, side: System | Group) -> _Side:
    """The per-sentence test statistics of a system, or of a group's variant best on *dev* (the
    selection is made on the dev scores; the comparison on the test statistics)."""
    names, decoding = side
    group = (names,) if isinstance(names, str) else tuple(names)
    usable, why, kinds = [], [], []
    for v in group:
        reason, kind = _unusable(m, v)
        if reason:
            why.append(reason)
            kinds.append(kind)
            continue
        dev = _score(m, v, "dev", decoding)[0]
        usable.append((dev if dev is not None else -math.inf, v))
    if not usable:
        return _Side(None, "", "; ".join(why), kit.FAILED_RUN if kit.FAILED_RUN in kinds else kit.NOT_RUN)
    variant = max(usable, key=lambda x: x[0])[1]          # the first on a tie
    name = f"{variant}/{decoding}"
    arr = stats.get(name) if stats is not None else None
    if arr is None:
        return _Side(None, name, f"no per-sentence statistics for {name}", kit.NOT_RUN)
    return _Side(np.asarray(arr, dtype=np.float64), name)


def _interval(m: Mapping[str, Any], stats: Any, a: System | Group, b: System | Group
              ) -> tuple[Interval | None, str, str, str]:
    """The interval (:func:`~components.metrics.significance.paired_interval`, seeds and test sentences)
    of ``a - b``, the pair's names, and why not with its kind."""
    sa, sb = _side(m, stats, a), _side(m, stats, b)
    if sa.stats is None or sb.stats is None:
        failed = [s for s in (sa, sb) if s.stats is None]
        kind = kit.FAILED_RUN if any(s.kind == kit.FAILED_RUN for s in failed) else kit.NOT_RUN
        return None, "", "; ".join(s.why for s in failed), kind
    if sa.stats.shape != sb.stats.shape:
        return None, "", (f"{sa.name} and {sb.name} have statistics of shapes {sa.stats.shape} and "
                          f"{sb.stats.shape} (different seeds)"), kit.OTHER
    score = stats_score(m.get("metric", "accuracy"))
    return paired_interval(sa.stats, sb.stats, score), f"{sa.name} vs {sb.name}", "", ""


def _cross_task_interval(ma: Mapping[str, Any], sta: Any, mb: Mapping[str, Any], stb: Any,
                         pair: tuple[System, System]) -> tuple[Interval | None, str, str, str]:
    """The interval of (task a's gain) − (task b's gain), each gain ``score(pair[0]) − score(pair[1])``
    in its own task's score, from the two tasks' statistics side by side: each task's items keep their
    own columns (zeros in the other's), so one :func:`paired_interval` over the union of the items
    (seeds paired by index: the per-seed differences of gains carry both tasks' seed variation) scores
    ``score_a(x_a) − score_b(x_b)`` of each system and differences them. Returns (interval, note, why, its kind)."""
    sides = []
    for m, st in ((ma, sta), (mb, stb)):
        s1, s2 = _side(m, st, pair[0]), _side(m, st, pair[1])
        bad = [s for s in (s1, s2) if s.stats is None]
        if bad:
            kind = kit.FAILED_RUN if any(s.kind == kit.FAILED_RUN for s in bad) else kit.NOT_RUN
            return None, "", "; ".join(s.why for s in bad), kind
        sides.append((s1.stats, s2.stats, stats_score(m.get("metric", "accuracy"))))
    (a1, a2, fa), (b1, b2, fb) = sides
    if a1.ndim == 2:
        a1, a2 = a1[None], a2[None]
    if b1.ndim == 2:
        b1, b2 = b1[None], b2[None]
    if a1.shape[0] != b1.shape[0]:
        return (None, "", f"the two tasks ran {a1.shape[0]} and {b1.shape[0]} seeds: their gains cannot be paired by "
                "seed", kit.OTHER)
    da = a1.shape[-1]

    def joined(x: np.ndarray, y: np.ndarray) -> np.ndarray:          # [k, na + nb, da + db]
        out = np.zeros((x.shape[0], x.shape[1] + y.shape[1], da + y.shape[-1]))
        out[:, :x.shape[1], :da] = x
        out[:, x.shape[1]:, da:] = y
        return out

    def score(s: np.ndarray) -> np.ndarray:
        return fa(s[..., :da]) - fb(s[..., da:])

    iv = paired_interval(joined(a1, b1), joined(a2, b2), score)
    return iv, f"{a1.shape[1]} + {b1.shape[1]} test sentences of the two tasks", "", ""


def _claims_for(spec: ClaimSpec, pt: str | None) -> list[kit.Claim]:
    """The claims of ``spec`` made for paper task ``pt``; a task with no paper counterpart gets the
    claims both papers' tasks share, with no paper numbers and no stated size (a size is the paper
    task's, in its units)."""
    if pt is not None:
        return [spec.claims[pt]] if pt in spec.claims else []
    if set(spec.claims) != {"NER", "CCG"}:
        return []
    c = spec.claims["NER"]
    return [dataclasses.replace(c, paper=kit.PaperEvidence(source="no paper counterpart"), size=0.0, presumes=(),
                                quote=(c.quote + " " if c.quote else "") + "No paper counterpart here: the direction only.")]


def findings(metrics: Mapping[str, Any], stats: Mapping[str, Any]) -> list[kit.Verdict]:
    """Every claim of :data:`CLAIMS` on every task it is made for, :data:`GAIN_CCG_VS_NER` across the
    two papers' tasks, the thesis's MT claims (:data:`MT_CLAIMS`) and its speed claim
    (:data:`SPEED_CLAIM`), judged by the kit from :func:`~components.metrics.significance.paired_interval`
    over the test sentences (and seeds) of the per-sentence statistics ``stats`` (task ->
    :class:`~components.metrics.significance.Stats`, systems ``<variant>/<decoding>``); the paper's
    full list, finalised by :func:`kit.finalise` (premises, same evidence, Holm).

    A task with a paper counterpart (:data:`PAPER_TASK`) gets the claims made for it; any other task the
    claims of both papers' tasks, with no paper numbers and no size. A claim whose side did not run
    is *not testable (not run)*; one whose side did not learn (the stage's guard) or, for an annealed
    variant, has no epoch where α had left 1, *not testable (failed run)*. A claim made for the CCG
    task when no CCG stand-in ran is *not testable* once, and so is the MT column (no MT runs).
    """
    out: list[kit.Verdict] = []
    tasks = _tasks(metrics)
    for t, m in tasks.items():
        pt = PAPER_TASK.get(t)
        st = stats.get(t)
        for spec in CLAIMS:
            claims = _claims_for(spec, pt)
            if spec.needs_variants and not any(_variant(m, v) for v in spec.needs_variants):
                continue                                     # the table's variants are not run on this task
            for claim in claims:
                if st is None:
                    out.append(kit.not_testable(claim, t, "no per-sentence statistics for the task", kit.NOT_RUN))
                    continue
                parts, names, why, kinds = [], [], [], []
                for label, a, b in spec.parts:
                    iv, pair, reason, kind = _interval(m, st, a, b)
                    parts.append((label, iv))
                    names.append(pair)
                    if reason:
                        why.append(reason)
                        kinds.append(kind)
                if why:
                    kind = next((k for k in (kit.FAILED_RUN, kit.OTHER) if k in kinds), kit.NOT_RUN)
                    out.append(kit.not_testable(claim, t, "; ".join(dict.fromkeys(why)), kind))
                elif len(parts) == 1:
                    out.append(kit.judge(claim, t, parts[0][1], note=names[0]))
                else:
                    out.append(kit.judge_parts(claim, t, parts))
    ccg = [t for t in tasks if PAPER_TASK.get(t) == "CCG"]
    ner = [t for t in tasks if PAPER_TASK.get(t) == "NER"]
    if not ccg:
        ce_ccg = next(s.claims["CCG"] for s in CLAIMS if s.claims.get("CCG") is not None
                      and s.claims["CCG"].id == "ce_beam_vs_greedy_ccg")
        out.append(kit.not_testable(ce_ccg, "CCG stand-in", "no CCG stand-in task is run at this scale "
                                    "(scales/study.yaml adds greek_morph, the CE screen's pick)", kit.NOT_RUN))
    if not ccg or not ner:
        out.append(kit.not_testable(GAIN_CCG_VS_NER, "CCG stand-in vs NER", "not run: needs a CCG stand-in and the ner "
                                    "task in one run, with the same seeds (scales/study.yaml runs both)", kit.NOT_RUN))
    for c in ccg:
        for n in ner:
            scope = f"{c} vs {n}"
            if stats.get(c) is None or stats.get(n) is None:
                out.append(kit.not_testable(GAIN_CCG_VS_NER, scope, "no per-sentence statistics for a task", kit.NOT_RUN))
                continue
            iv, note, why, kind = _cross_task_interval(tasks[c], stats[c], tasks[n], stats[n], GAIN_PAIR)
            out.append(kit.judge(GAIN_CCG_VS_NER, scope, iv, missing=why, note=note, why=kind or kit.NOT_RUN))
    for claim in MT_CLAIMS:
        out.append(kit.not_testable(claim, "MT", MT_NEEDS, kit.NOT_RUN))
    for t, m in tasks.items():
        if any(_variant(m, v) for v in _RELAXED_SS + DECAY_VARIANTS):      # an α-soft relaxation ran here
            out.append(kit.not_testable(SPEED_CLAIM, t, SPEED_NEEDS, kit.NOT_RUN))
    return kit.finalise(out)


# ---------------------------------------------------------------------------------------------
# the CE screen of stand-in tasks (flows/stages/screen.py; components.training.screen)
#: the premises the screen checks, as claims the kit judges on the per-sentence statistics
SCREEN_CLAIMS = {
    "beam_minus_greedy": kit.Claim("screen_beam_helps", "CE + beam beats CE greedy (unidirectional encoder)",
                                   "CE beam", "CE greedy",
                                   paper=kit.PaperEvidence(82.42, 80.35, source="2018 Table 1, CCG (bidirectional)"),
                                   quote="\"For supertagging, we observe that the baseline cross entropy trained model "
                                         "improves its predictions with beam search decoding compared to greedy "
                                         f"decoding by 2 accuracy points\" ({_G18}); the screen asks only for a gain."),
    "bi_beam_minus_greedy": kit.Claim("screen_beam_helps_bi", "CE + beam beats CE greedy (bidirectional encoder)",
                                      "CE beam", "CE greedy",
                                      paper=kit.PaperEvidence(82.42, 80.35, source="2018 Table 1, CCG"),
                                      quote="\"beam search is already helpful for this task, even without search-aware "
                                            f"training\" ({_G18}, on supertagging)."),
    "bi_minus_uni": kit.Claim("screen_label_bias", "a bidirectional encoder beats a unidirectional one (CE greedy)",
                              "bidirectional", "unidirectional",
                              paper=kit.PaperEvidence(92.59, 76.54, source="2019 Table 2, CCG pretrain-greedy"),
                              quote="Goyal, Dyer & Berg-Kirkpatrick 2019, Table 2 (CCG): the bidirectional CE model "
                                    "greedy 92.59 vs the unidirectional 76.54."),
}
#: each gap's systems in ``metrics/stats/screen/<task>.npz``: (a, b) of a − b
SCREEN_GAPS = {"beam_minus_greedy": ("uni/beam", "uni/greedy"), "bi_beam_minus_greedy": ("bi/beam", "bi/greedy"),
               "bi_minus_uni": ("bi/greedy", "uni/greedy")}

#: the premise as one conjunction: CE beam − greedy > 0 and bi − uni > 0 (unidirectional CE model)
SCREEN_PREMISE = kit.Claim("screen_premise", "search has something to fix: CE beam − greedy > 0 and bi − uni > 0",
                           "gaps", "0", paper=kit.PaperEvidence(source="2018 Table 1; 2019 Table 2 (CCG)"),
                           quote="the stand-in's premise (issue 27): the papers' CCG numbers show beam search helping "
                                 "the CE model and a large bidirectional − unidirectional gap (label bias).")


def screen_verdicts(screen: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, dict[str, kit.Verdict]]:
    """task -> gap (and ``premise``, the conjunction of the unidirectional beam − greedy and bi − uni
    gaps) -> the kit's verdict, from :func:`~components.metrics.significance.paired_interval` on the
    screen's per-sentence test statistics ``stats`` (task -> :class:`~components.metrics.significance.Stats`,
    ``metrics/stats/screen/<task>.npz``: systems ``uni/greedy``, ``uni/beam``, ``bi/greedy``, ``bi/beam``)
    of ``screen`` (``metrics/screen.json``). One trained model per encoder: the kit labels the verdicts so."""
    out: dict[str, dict[str, kit.Verdict]] = {}
    for t, r in (screen.get("tasks") or {}).items():
        st = stats.get(t)
        missing = ("no per-sentence statistics of the screen for the task" if st is None else
                   "; ".join(f"no per-sentence statistics for {s}" for s in dict.fromkeys(
                       x for pair in SCREEN_GAPS.values() for x in pair) if st.get(s) is None))
        if missing:
            out[t] = {g: kit.not_testable(c, t, missing, kit.NOT_RUN) for g, c in SCREEN_CLAIMS.items()}
            out[t]["premise"] = kit.not_testable(SCREEN_PREMISE, t, missing, kit.NOT_RUN)
            continue
        score = stats_score(r.get("metric", "accuracy"))
        ivs = {g: paired_interval(st[a], st[b], score) for g, (a, b) in SCREEN_GAPS.items()}
        out[t] = {g: kit.judge(c, t, ivs[g]) for g, c in SCREEN_CLAIMS.items()}
        dull = [e for e in ("uni", "bi") if not r["models"][e]["greedy"] > r["majority"]]
        if dull:      # a CE model no better than tagging everything with the majority tag: nothing to screen
            why = (f"the {', '.join(dull)} CE model did not learn (greedy {r['models'][dull[0]]['greedy']:.2f} is not "
                   f"above the majority tag's {r['majority']:.2f})")
            out[t] = {g: kit.not_testable(v.claim, t, why, kit.FAILED_RUN) for g, v in out[t].items()}
            out[t]["premise"] = kit.not_testable(SCREEN_PREMISE, t, why, kit.FAILED_RUN)
            continue
        out[t]["premise"] = kit.judge_parts(SCREEN_PREMISE, t, [("beam − greedy (uni)", ivs["beam_minus_greedy"]),
                                                                ("bi − uni", ivs["bi_minus_uni"])])
    return out


def screen_markdown(screen: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    """The screen's table: per task, CE greedy / beam (uni- and bidirectional), the gaps with their
    intervals and the kit's verdict on each, and on the premise (both uni gaps above 0)."""
    verdicts = screen_verdicts(screen, stats)
    lines = ["# CE screen of stand-in tasks for search-aware training", "",
             "Each candidate tagging task: a cross-entropy seq2seq tagger (the `search_aware` stage's `ce` model and "
             "objective) trained with a unidirectional (uni) and a bidirectional (bi) encoder, same seed and batches, "
             f"decoded on test greedily and by hard beam (k = {screen.get('beam_size', '–')}); at most "
             f"{screen.get('max_train_sentences') or 'all'} training sentences, {screen.get('epochs', '–')} epochs. "
             "Gaps: 95% intervals over the test sentences from their per-sentence statistics "
             "(`components/metrics/significance.py`: `paired_interval`; one trained model per encoder, so each "
             "speaks for that model); the verdict is the kit's on the premise (interval above 0: reproduced). The "
             "papers: CE beam − greedy +2.07 on CCG (2018 Table 1, bidirectional; −3.58 F1 on NER), bi − uni +16.05 "
             "on CCG (2019 Table 2, CE greedy). Search-aware training has something to fix on a task where both uni "
             "gaps are clearly positive: the premise column is the kit's verdict on the two together (reproduced: "
             "both intervals above 0).", "",
             "| task | metric | n test | majority tag | uni greedy | uni beam | bi greedy | bi beam | "
             "beam − greedy (uni) | beam − greedy (bi) | bi − uni (greedy) | premise |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, r in (screen.get("tasks") or {}).items():
        u, b = r["models"]["uni"], r["models"]["bi"]
        v = verdicts[t]
        cell = lambda g: f"{r['gaps'][g]['estimate']:+.2f} **{v[g].verdict}**" if v[g].interval is None \
            else f"{v[g].interval} **{v[g].verdict}**"  # noqa: E731
        lines.append(f"| {t} | {'F1' if r['metric'] == 'span_f1' else 'accuracy'} | {r['n_test']} | "
                     f"{r['majority']:.2f} | {u['greedy']:.2f} | {u['beam']:.2f} | {b['greedy']:.2f} | {b['beam']:.2f} | "
                     f"{cell('beam_minus_greedy')} | {cell('bi_beam_minus_greedy')} | {cell('bi_minus_uni')} | "
                     f"**{v['premise'].verdict}** |")
    skipped = screen.get("skipped") or {}
    notes = [f"- `{t}`: skipped: {why}." for t, why in skipped.items()]
    notes += [f"- `{t}`: {v['premise'].reason}." for t, v in verdicts.items() if v["premise"].verdict == kit.NOT_TESTABLE]
    return "\n".join(lines) + "\n" + ("\nNotes:\n\n" + "\n".join(notes) + "\n" if notes else "")


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


def readme(metrics: Mapping[str, Any], stats: Mapping[str, Any], verdicts: Sequence[kit.Verdict] | None = None) -> str:
    """The report's Markdown (``verdicts``: :func:`findings` of ``metrics`` and ``stats`` unless given)."""
    tasks = _tasks(metrics)
    verdicts = findings(metrics, stats) if verdicts is None else list(verdicts)
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
          "on dev. Configurations were tuned on dev. '—': not run; '✗': a model that did not learn (its test "
          "score under the decoding it is trained for is not above the majority-tag baseline's, or its dev score "
          "is 0): it is no table cell, and every claim that needs it is *not testable*.", "",
          "## Setup", "", *[f"- {_setup_line(t, m)}" for t, m in tasks.items()], ""]
    for t in tasks:
        pt = PAPER_TASK.get(t)
        title = {"NER": "Table 2 (NER)", "CCG": "Table 1 (CCG supertagging)"}.get(pt or "", "no paper table")
        md += [f"## Goyal et al. 2018, {title} — {t}", "", table_beam(metrics, t)]
    md += ["## Thesis Table 3.1 — differentiable scheduled sampling", "", table_ss(metrics),
           "## Thesis Table 3.2 — decay strength k of the scheduled-sampling schedule", "", table_decay(metrics),
           kit.findings(verdicts),
           "Claims coded from the papers' text and tables (`components/reports/goyal_2018.CLAIMS`), each with "
           "the sentence it comes from. A claim that states a size (\"+5.5 accuracy points\", \"+3.1 F1\") is "
           "judged against it in our score's points (span F1 on ner, tag accuracy on the Greek morphology "
           "stand-in, 1:1): an interval short of the size is *not reproduced* even when the sign agrees. Groups "
           "(relaxed SS, Bengio SS) are represented by their variant best on dev, as the thesis reports, and "
           "judged on test. G̃hinge's claims presume the CE baseline's beam − greedy claim on the same task (the "
           "paper explains G̃hinge's result by its warm start's behaviour with beam search): where that is not "
           "reproduced they are not testable (premise). The thesis's MT claims are not testable here (no MT "
           "model is trained with scheduled sampling), and its speed claim is timed on CPU cores, not its GPU "
           "(set apart from the counts). The claims that search-aware training improves on CE presume "
           + PREMISE + "; on a stand-in where the CE model's beam − greedy and bi − uni gaps are near zero they "
           "say little about the papers.", "",
           "## Training details (ours)", "", training_table(metrics),
           "## Learning curves", ""]
    for t in tasks:
        name = _file_name(t)
        md += [f"### {t}", "", f"![learning curves, {t}]({name})", ""]
    return "\n".join(md)


def write_report(metrics: Mapping[str, Any], out_dir: str | Path, stats: Mapping[str, Any],
                 verdicts: Sequence[kit.Verdict] | None = None) -> dict[str, str]:
    """Write README.md and curves_<task>.png (one per task) into ``out_dir``, each atomically (a
    temporary file in the same folder, then ``os.replace``). ``stats``: task -> per-sentence statistics
    (:func:`findings`). Returns file name -> path."""
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
    write_text(out / "README.md", readme(metrics, stats, verdicts))
    written["README.md"] = str(out / "README.md")
    return written
