"""Tables 1-6 of Goyal, Dyer & Berg-Kirkpatrick, "An Empirical Investigation of Global and Local
Normalization for Recurrent Neural Sequence Models Using a Continuous Relaxation to Beam Search"
(NAACL 2019; ``papers/goyal-2019-global-vs-local-normalization.txt``) and the MT column of Table 3.1 of
Goyal's thesis (``papers/goyal-thesis-exposure-bias-label-bias-energy-models.txt``), with our runs of the
``normalisation`` stage beside the papers' numbers, the findings (the paper's claims as
:class:`components.reports.kit.Claim` data, :data:`TESTS`, each with its stated size, the paper's sentence and
its premises, judged by the kit from paired intervals over our per-sentence statistics,
``components.metrics.significance.paired_interval``), example translations and three figures.

Inputs: the ``normalisation`` stage's per-sentence statistics (``metrics/stats/normalisation/<name>.npz``,
:func:`load_stats_dir`: ``tagging`` and ``translation`` (test; systems "<encoder>/<init>/<row>" and
"<init>/<row>", "ss/<variant>"), ``translation_dev`` (dev), ``tagging_log_z`` / ``translation_log_z``
(each initialiser's per-sentence log Z on dev), ``translation_dev_source_length``; ``[seeds, n, d]`` with
several seeds) and its metrics (``metrics/normalisation.json``)::

    {"tagging": {"task", "metric": "accuracy" (percent), "n_labels", "top_k_labels", "beam_size", "n_train",
                 "seeds",
                 "log_z": {encoder: {init: {"train_mean", "train_var", "dev_mean", "dev_var", "dev_score",
                                             "failed" (optional: the model did not train)}}},
                 "rows": {encoder: {init: {row: {"dev", "test", "dev_std", "test_std", "seeds", "failed"}}}}},
     "translation": {"metric": "bleu", "beam_size", "src_vocab", "tgt_vocab", "n_train", "filtered", "signature",
                     "log_z": {init: {...as above}},
                     "rows": {init: {row: {...as above}}},
                     "ss": {variant: {"dev", "test", "dev_std", "test_std", "seeds", "failed"}},
                     "breakdown": {row: {"bleu", "precisions": [p1, p2, p3, p4] (percent), "bp", "ratio"}},
                     "by_length": {row: {"0-20", "20-30", "30-40", "40-inf": BLEU or None}},
                     "examples": [{"verse_id", "source", "reference", "systems": {"<init>/<row>": text}}]}}

Either section may be absent; its tables then say so and its claims are not testable, with the reason.

What maps to what:

* encoder ``lstm`` / ``blstm`` -> the paper's unidirectional / bidirectional tagging encoder (fixed attention:
  the i-th label sees the i-th encoder state only); init ``regular`` / ``self_normalised`` -> warm start from
  a teacher-forced CE model / from a CE + λ(log Z)² ("L2", self-normalised) model; rows ``pretrain_greedy``,
  ``pretrain_beam``, ``local``, ``global`` -> the paper's pretrain-greedy, pretrain-beam, locally normalized,
  globally normalized.
* tagging task ``greek_morph_k400`` (SBLGNT Greek morphology, 400 most frequent tags, accuracy) stands in for
  CCG supertagging (1,284 supertags); Greek->English New Testament verses (detokenised sacreBLEU) stand in
  for IWSLT'14 De->En. The corpora differ: the *patterns* compare, not the absolute numbers.
* thesis Table 3.1, MT column: Baseline CE, Bengio et al. (2015) greedy / sample, α-soft fixed / annealed
  greedy / sample -> ``ss`` variants ``ce``, ``ss_greedy``, ``ss_sample``, ``dss_fixed_greedy``,
  ``dss_fixed_sample``, ``dss_annealed_greedy``, ``dss_annealed_sample`` (all decoded greedily).

Public API: :data:`PAPER_TABLE1` ... :data:`PAPER_TABLE6`, :data:`PAPER_TABLE3_1_MT`, :func:`table1`,
:func:`table_tagging`, :func:`table_mt`, :func:`table_ss`, :func:`table_breakdown`, :func:`table_length`,
:data:`TESTS`, :func:`load_stats_dir`, :func:`verdicts`, :func:`examples_section`, :func:`tagging_figure`,
:func:`length_figure`, :func:`readme`, :func:`write_report`.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import numpy as np  # noqa: E402

from components.io import atomic_path, write_text  # noqa: E402
from components.metrics.bleu import DEFAULT_EDGES, bucket_labels, bucket_of  # noqa: E402
from components.metrics.significance import Interval, Stats, bleu_score, load_stats, paired_interval, ratio_score  # noqa: E402
from components.metrics.tagging import stats_score  # noqa: E402
from components.reports import kit  # noqa: E402
from components.reports.curves import close, learning_curve, legend_below  # noqa: E402
from components.reports.goyal_2018 import SS_VARIANTS, TABLE3_1, VARIANT_LABEL  # noqa: E402

ENCODERS = ("lstm", "blstm")
ENCODER_LABEL = {"lstm": "unidirectional", "blstm": "bidirectional"}
ENCODER_SHORT = {"lstm": "uni", "blstm": "bi"}
INITS = ("regular", "self_normalised")
INIT_LABEL = {"regular": "regular (CE) init", "self_normalised": "self-normalised init"}
INIT_SHORT = {"regular": "regular", "self_normalised": "SN"}
INIT_TABLE1 = {"regular": "CE", "self_normalised": "L2 (self-normalised)"}
ROWS = ("pretrain_greedy", "pretrain_beam", "local", "global")
ROW_LABEL = {"pretrain_greedy": "pretrain-greedy", "pretrain_beam": "pretrain-beam",
             "local": "locally normalized", "global": "globally normalized"}
ROW_SHORT = {"pretrain_greedy": "pretrain-greedy", "pretrain_beam": "pretrain-beam", "local": "local",
             "global": "global"}
# source-length buckets: keys that are valid MLflow metric names ("+" is not), labels as the paper prints them
BUCKETS = ("0-20", "20-30", "30-40", "40-inf")
BUCKET_LABEL = {"0-20": "0-20", "20-30": "20-30", "30-40": "30-40", "40-inf": "40+"}

LOGZ_STATS = ("train_mean", "train_var", "dev_mean", "dev_var")
SPLITS = ("dev", "test")
TAG_TASK = "greek_morph_k400"
MT_TASK = "translation"

# ---------------------------------------------------------------------------------------------
# The paper's numbers, transcribed exactly from its text.
# Table 1: "task|init|train mean|train var|dev mean|dev var|Acc/BLEU" (CE -> regular, L2 -> self_normalised)
_TABLE1 = """\
CCG|regular|21.08|9.57|21.96|9.18|93.3
CCG|self_normalised|0.6|0.29|0.26|0.08|91.9
MT|regular|24.7|115.4|25.8|129.1|27.62
MT|self_normalised|0.65|0.18|0.7|0.29|26.63"""
# Tables 2 (regular init) and 3 (self-normalised init), CCG accuracy: "row|unidirectional|bidirectional"
_TABLE2 = """\
pretrain_greedy|76.54|92.59
pretrain_beam|77.76|93.29
local|83.9|93.76
global|83.93|93.73"""
_TABLE3 = """\
pretrain_greedy|73.12|91.23
pretrain_beam|73.83|91.94
local|83.35|92.78
global|85.50|92.63"""
# Table 4, de-en BLEU: "row|regular|self-normalized"
_TABLE4 = """\
pretrain_greedy|26.24|25.42
pretrain_beam|27.62|26.63
local|29.28|27.71
global|26.24|29.27"""
# Table 5, dev, self-normalised init: "row|n-gram overlap p1/p2/p3/p4|length ratio"
_TABLE5 = """\
pretrain_beam|63.5/35.7/21.8/13.7|0.931
local|66.9/39.4/22.7/14.0|0.918
global|65.0/39.1/23.2/14.7|0.959"""
# Table 6, dev BLEU by source length, self-normalised init: "row|0-20|20-30|30-40|40+"
_TABLE6 = """\
pretrain_beam|29.36|25.73|24.71|24.50
local|32.35|26.95|25.39|25.2
global|33.21|28.08|26.75|26.41"""


def _lines(text: str) -> list[list[str]]:
    return [line.split("|") for line in text.splitlines() if line.strip()]


def _parse_table1(text: str) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for task, init, *cells in _lines(text):
        vals = [float(c) for c in cells]
        out.setdefault(task, {})[init] = {**dict(zip(LOGZ_STATS, vals[:4])), "score": vals[4]}
    return out


def _parse_columns(text: str, columns: Sequence[str]) -> dict[str, dict[str, float]]:
    """"row|v1|v2..." -> column -> row -> value."""
    out: dict[str, dict[str, float]] = {c: {} for c in columns}
    for row, *cells in _lines(text):
        for c, v in zip(columns, cells, strict=True):
            out[c][row] = float(v)
    return out


def _parse_table5(text: str) -> dict[str, dict[str, Any]]:
    return {row: {"precisions": [float(p) for p in prec.split("/")], "ratio": float(ratio)}
            for row, prec, ratio in _lines(text)}


def _parse_table6(text: str) -> dict[str, dict[str, float]]:
    return {row: dict(zip(BUCKETS, (float(c) for c in cells), strict=True)) for row, *cells in _lines(text)}


# "CCG" / "MT" -> init -> {"train_mean", "train_var", "dev_mean", "dev_var", "score"}
PAPER_TABLE1 = _parse_table1(_TABLE1)
# encoder -> row -> test accuracy (Table 2: regular init; Table 3: self-normalised init)
PAPER_TABLE2 = _parse_columns(_TABLE2, ENCODERS)
PAPER_TABLE3 = _parse_columns(_TABLE3, ENCODERS)
# init -> row -> test BLEU
PAPER_TABLE4 = _parse_columns(_TABLE4, INITS)
# row -> {"precisions": [p1, p2, p3, p4], "ratio"} (dev, self-normalised init)
PAPER_TABLE5 = _parse_table5(_TABLE5)
# row -> bucket -> dev BLEU (self-normalised init)
PAPER_TABLE6 = _parse_table6(_TABLE6)
# thesis Table 3.1, MT (IWSLT'14 De->En) column: variant -> {"dev", "test"} BLEU
PAPER_TABLE3_1_MT: dict[str, dict[str, float]] = copy.deepcopy(TABLE3_1["MT"])
_PAPER_TAGGING = {"regular": PAPER_TABLE2, "self_normalised": PAPER_TABLE3}


# ---------------------------------------------------------------------------------------------
# small helpers
def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _fmt(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(p)
    return d


def _section(metrics: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    if not isinstance(metrics, Mapping):
        raise ValueError("normalisation metrics: expected a dict with 'tagging' and/or 'translation'")
    sec = metrics.get(name)
    return sec if isinstance(sec, Mapping) else None


def _tag_task(metrics: Mapping[str, Any]) -> str:
    return str(_get(metrics, "tagging", "task") or TAG_TASK)


def _seeds(entry: Mapping[str, Any]) -> int:
    try:
        return int(entry.get("seeds", 1) or 1)
    except (TypeError, ValueError):
        return 1


def _ours_cell(entry: Any, split: str) -> str:
    """"83.90 ± 0.31" (std when seeds > 1), "83.90 ✗" for a run that did not train, "—" when not run."""
    if not isinstance(entry, Mapping):
        return "—"
    mean = _finite(entry.get(split))
    std = _finite(entry.get(f"{split}_std")) if _seeds(entry) > 1 else None
    s = _fmt(mean) + (f" ± {std:.2f}" if std is not None and mean is not None else "")
    return s + (" ✗" if entry.get("failed") else "")


def _with_paper(ours: str, paper: float | None, nd: int = 2) -> str:
    return f"{ours} ({_fmt(paper, nd)})"


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _failed_notes(entries: Mapping[str, Any]) -> list[str]:
    notes = []
    for name, e in entries.items():
        if isinstance(e, Mapping) and e.get("failed"):
            why = e.get("failure")
            notes.append(f"✗ {name} did not train" + (f": “{why}”." if why else "."))
    return notes


# ---------------------------------------------------------------------------------------------
# tables
def table1(metrics: Mapping[str, Any]) -> str:
    """Table 1 analog: mean and variance of the local log-normaliser log Z on train and dev, and the score,
    for the CE and the L2 (self-normalised) models, per tagging encoder and for MT; cells "ours (paper)"."""
    tag, mt = _section(metrics, "tagging"), _section(metrics, "translation")
    rows = []
    parts = [(f"{_tag_task(metrics)} ({ENCODER_LABEL[e]})", _get(tag, "log_z", e), "CCG") for e in ENCODERS]
    parts.append((MT_TASK, _get(mt, "log_z"), "MT"))
    for task, logz, ptask in parts:
        for init in INITS:
            ours = _get(logz, init)
            paper = PAPER_TABLE1[ptask][init]
            cells = [_with_paper(_fmt(_finite(_get(ours, k))), paper[k]) for k in LOGZ_STATS]
            cells.append(_with_paper(_fmt(_finite(_get(ours, "dev_score"))), paper["score"]))
            rows.append([task, INIT_TABLE1[init], *cells])
    md = _md_table(["task", "model", "train log Z mean", "train log Z var", "dev log Z mean", "dev log Z var",
                    "dev score (paper: test Acc/BLEU)"], rows)
    notes = ["Cells: ours (the paper's CCG / MT row). log Z is the local log-normaliser log Σ exp(score) at each "
             "decoder step under teacher forcing; the L2 model adds λ(log Z)² to the CE loss. Our score is the "
             "model's dev accuracy / BLEU; the paper's Acc/BLEU (93.3 / 91.9, 27.62 / 26.63) equals its "
             "pretrain-beam *test* scores, so it is the bidirectional tagger's (the paper does not say which "
             "encoder its CCG row uses; it is shown beside both of ours)."]
    if tag is None:
        notes.append("Tagging: not run (no `tagging` section in the metrics): —.")
    if mt is None:
        notes.append("Translation: not run (no `translation` section in the metrics): —.")
    return md + "\n" + "\n\n".join(notes) + "\n"


def table_tagging(metrics: Mapping[str, Any], init: str) -> str:
    """Table 2 (``init="regular"``) / Table 3 (``init="self_normalised"``) analog: accuracy of the four rows
    with the unidirectional and the bidirectional encoder, dev (ours) and test ("ours (paper)")."""
    if init not in INITS:
        raise KeyError(f"init {init!r}: expected one of {INITS}")
    tag = _section(metrics, "tagging")
    paper = _PAPER_TAGGING[init]
    rows, entries = [], {}
    for r in ROWS:
        cells = [ROW_LABEL[r], f"`{r}`"]
        for e in ENCODERS:
            entry = _get(tag, "rows", e, init, r)
            entries[f"{ENCODER_LABEL[e]} / {ROW_SHORT[r]}"] = entry
            cells += [_ours_cell(entry, "dev"), _with_paper(_ours_cell(entry, "test"), paper[e][r])]
        rows.append(cells)
    head = ["row", "key", *[f"{ENCODER_LABEL[e]} {s}" for e in ENCODERS for s in SPLITS]]
    which = "Table 2 (regular init)" if init == "regular" else "Table 3 (self-normalised init)"
    notes = [f"Accuracy (%), {INIT_LABEL[init]}. Test cells: ours (the paper's {which}, CCG supertagging test "
             "accuracy); dev cells: ours only (the paper reports one number per cell). Ours: mean over seeds "
             "± std when seeds > 1; —: not run; ✗: did not train."]
    notes += _status_notes(tag, "Tagging: not run (no `tagging` section in the metrics).", entries)
    return _md_table(head, rows) + "\n" + "\n\n".join(notes) + "\n"


def _status_notes(section: Mapping[str, Any] | None, absent: str, entries: Mapping[str, Any]) -> list[str]:
    """Notes on what did not run (the whole ``section``: ``absent``; else the missing entries) and
    what did not train."""
    if section is None:
        return [absent]
    missing = [k for k, v in entries.items() if not isinstance(v, Mapping)]
    return (["Not run: " + ", ".join(missing) + "."] if missing else []) + _failed_notes(entries)


def table_mt(metrics: Mapping[str, Any]) -> str:
    """Table 4 analog: BLEU of the four rows for the regular and the self-normalised initialisation, dev (ours)
    and test ("ours (paper)")."""
    mt = _section(metrics, "translation")
    rows, entries = [], {}
    for r in ROWS:
        cells = [ROW_LABEL[r], f"`{r}`"]
        for init in INITS:
            entry = _get(mt, "rows", init, r)
            entries[f"{INIT_SHORT[init]} / {ROW_SHORT[r]}"] = entry
            cells += [_ours_cell(entry, "dev"), _with_paper(_ours_cell(entry, "test"), PAPER_TABLE4[init][r])]
        rows.append(cells)
    head = ["row", "key", *[f"{INIT_LABEL[i]} {s}" for i in INITS for s in SPLITS]]
    notes = ["BLEU (detokenised sacreBLEU). Test cells: ours (the paper's Table 4, IWSLT'14 De→En test BLEU); "
             "dev cells: ours only. Ours: mean over seeds ± std when seeds > 1; —: not run; ✗: did not train."]
    notes += _status_notes(mt, "Translation: not run (no `translation` section in the metrics).", entries)
    return _md_table(head, rows) + "\n" + "\n\n".join(notes) + "\n"


def table_ss(metrics: Mapping[str, Any]) -> str:
    """Thesis Table 3.1 analog, MT column: Baseline CE, Bengio et al. (2015) scheduled sampling and the α-soft
    relaxations, decoded greedily; dev and test BLEU, cells "ours (thesis)"."""
    mt = _section(metrics, "translation")
    rows, entries = [], {}
    for v in SS_VARIANTS:
        entry = _get(mt, "ss", v)
        entries[v] = entry
        rows.append([VARIANT_LABEL[v], f"`{v}`",
                     *[_with_paper(_ours_cell(entry, s), PAPER_TABLE3_1_MT[v][s]) for s in SPLITS]])
    notes = ["BLEU, all decoded greedily. Cells: ours (the thesis's Table 3.1 MT column, IWSLT'14 De→En). Ours: "
             "mean over seeds ± std when seeds > 1; the thesis reports the random restart with the best dev "
             "score. —: not run; ✗: did not train."]
    notes += _status_notes(mt, "Translation: not run (no `translation` section in the metrics).", entries)
    return _md_table(["training procedure", "variant", "dev", "test"], rows) + "\n" + "\n\n".join(notes) + "\n"


def table_breakdown(metrics: Mapping[str, Any]) -> str:
    """Table 5 analog: BLEU's n-gram precisions, brevity penalty and length ratio (hypothesis / reference
    length) on dev for the self-normalised init; cells "ours (paper)" where the paper has the number."""
    mt = _section(metrics, "translation")
    ours = _get(mt, "breakdown") or {}
    rows = []
    for r in ROWS:
        o = ours.get(r) if isinstance(ours, Mapping) else None
        p = PAPER_TABLE5.get(r)
        if not isinstance(o, Mapping) and p is None:
            continue
        o = o if isinstance(o, Mapping) else {}
        prec = o.get("precisions") if isinstance(o.get("precisions"), Sequence) else []
        cells = [ROW_LABEL[r], _fmt(_finite(o.get("bleu")))]
        for n in range(4):
            mine = _fmt(_finite(prec[n]) if n < len(prec) else None)
            cells.append(_with_paper(mine, p["precisions"][n] if p else None, 1))
        cells += [_fmt(_finite(o.get("bp")), 3), _with_paper(_fmt(_finite(o.get("ratio")), 3),
                                                             p["ratio"] if p else None, 3)]
        rows.append(cells)
    md = _md_table(["row", "BLEU", "1-gram prec.", "2-gram prec.", "3-gram prec.", "4-gram prec.", "BP",
                    "length ratio"], rows)
    notes = ["Dev set, self-normalised init. Cells: ours (the paper's Table 5); BLEU and BP: ours only (the paper "
             "gives neither here). n-gram precisions in %; length ratio = hypothesis length / reference length "
             "(BP = exp(1 − 1/ratio) below 1)."]
    if mt is None:
        notes.append("Translation: not run (no `translation` section in the metrics).")
    elif not ours:
        notes.append("Not run: no BLEU breakdown recorded.")
    return md + "\n" + "\n\n".join(notes) + "\n"


def table_length(metrics: Mapping[str, Any]) -> str:
    """Table 6 analog: dev BLEU by source length (tokens) for the self-normalised init; cells "ours (paper)"."""
    mt = _section(metrics, "translation")
    ours = _get(mt, "by_length") or {}
    rows = []
    for r in ROWS:
        o = ours.get(r) if isinstance(ours, Mapping) else None
        p = PAPER_TABLE6.get(r)
        if not isinstance(o, Mapping) and p is None:
            continue
        o = o if isinstance(o, Mapping) else {}
        rows.append([ROW_LABEL[r], *[_with_paper(_fmt(_finite(o.get(b))), p[b] if p else None) for b in BUCKETS]])
    md = _md_table(["row", *[f"source length {BUCKET_LABEL[b]}" for b in BUCKETS]], rows)
    notes = ["Dev BLEU of the sentences whose source length falls in each bucket, self-normalised init. Cells: "
             "ours (the paper's Table 6); –: no sentence in the bucket / no number."]
    if mt is None:
        notes.append("Translation: not run (no `translation` section in the metrics).")
    elif not ours:
        notes.append("Not run: no BLEU by source length recorded.")
    return md + "\n" + "\n\n".join(notes) + "\n"


def examples_section(metrics: Mapping[str, Any], limit: int | None = None) -> str:
    """Each example verse: source, reference and every system's output, as a small Markdown table."""
    mt = _section(metrics, "translation")
    examples = [e for e in (_get(mt, "examples") or []) if isinstance(e, Mapping)]
    if not examples:
        return "_No example translations (translation not run or no examples recorded)._\n"
    out = []
    for ex in examples[:limit]:
        rows = [["source (Greek)", ex.get("source", "")], ["reference (English)", ex.get("reference", "")]]
        for key, text in (ex.get("systems") or {}).items():
            init, _, row = str(key).partition("/")
            label = (f"{ROW_LABEL.get(row, row)}, {INIT_LABEL.get(init, init)}" if row else str(key))
            rows.append([f"{label} (`{key}`)", text])
        out += [f"### {ex.get('verse_id', '?')}", "", _md_table(["", "text"], rows)]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# findings: the paper's claims as data (components.reports.kit), judged from paired intervals
#
# A side of a comparison is a system of a statistics file (``load_stats_dir``): "<encoder>/<init>/<row>"
# (tagging), "<init>/<row>" (translation), "ss/<variant>", "<encoder>/<init>" / "<init>" (log Z), or a
# combination the claim's wording asks for:
#   "mid:X+Y"      the midpoint of X and Y (accuracy: the mean of their per-token statistics, so its
#                  score is the mean of their scores): "closes at least half of the gap from X to Y"
#   "gain:X-Y"     X's and Y's statistics side by side, scored as score(X) − score(Y): an improvement
#   "best:X|Y|..." the system with the best mean dev score in the metrics (the paper's "best of", chosen
#                  on dev and judged on test)
#   "task:M+T"     (score "bleu_minus_tagging") translation system M and bidirectional tagging system T,
#                  their test sentences stacked as one set of items (each its own task's columns, zeros
#                  in the other's), scored as BLEU(M) − accuracy(T): the difference of two tasks' gains
# A claim's stated size is the kit's (:attr:`kit.Claim.size`), and its premises are the kit's too
# (:attr:`kit.Claim.presumes`, gated in :func:`kit.finalise`). Each part's interval is computed on the
# statistics' columns its score reads (:func:`_score`), so two claims count as the same evidence
# (the kit's fingerprint) exactly when they compare the same numbers.
TAGGING, TAG_LOG_Z, MT_TEST, MT_DEV, MT_LOG_Z, MT_LENGTHS = (
    "tagging", "tagging_log_z", "translation", "translation_dev", "translation_log_z", "translation_dev_source_length")
STATS_FILES = (TAGGING, TAG_LOG_Z, MT_TEST, MT_DEV, MT_LOG_Z, MT_LENGTHS)


def load_stats_dir(path: str | Path) -> dict[str, Stats]:
    """The ``normalisation`` stage's per-sentence statistics (``metrics/stats/normalisation/<name>.npz``,
    ``name`` in :data:`STATS_FILES`), those present."""
    path = Path(path)
    return {name: load_stats(path / f"{name}.npz") for name in STATS_FILES if (path / f"{name}.npz").is_file()}


@dataclass(frozen=True)
class Test:
    """How a claim is tested here: its parts (label, side a, side b: ``a − b`` is judged by the claim's
    rule against its stated size; one part = a plain comparison), the statistics file and the score."""
    claim: kit.Claim
    scope: str                       # "tagging", "tagging:lstm", "tagging:blstm", "translation", "both"
    parts: tuple[tuple[str, str, str], ...]
    file: str = TAGGING
    score: str = "metric"            # metric | bleu | length_ratio | p | log_z_mean | log_z_var | bleu_minus_tagging
    by_bucket: bool = False          # Table 6: each part on the dev sentences of its source-length bucket
    # Table 6's "especially so on long sentences": (long buckets, short buckets); the part's interval is
    # of (a − b on the long buckets' dev sentences) − (a − b on the short buckets')
    contrast: tuple[tuple[str, ...], tuple[str, ...]] = ()
    # true by construction where the translation initialiser's log Z was centred (`translation.centre_log_z`)
    centred: str = ""


def _claim(cid: str, text: str, a: str, b: str, paper: tuple[float, float], source: str, **kw) -> kit.Claim:
    return kit.Claim(cid, text, a, b, paper=kit.PaperEvidence(a=paper[0], b=paper[1], source=source), **kw)


def _tag(enc: str, init: str, row: str) -> str:
    return f"{enc}/{init}/{row}"


def _mt(init: str, row: str) -> str:
    return f"{init}/{row}"


_UNI_ROWS = [_tag("lstm", i, r) for i in INITS for r in ROWS]
_PREMISE = ("label bias from partial input: the unidirectional CE tagger is much worse than the bidirectional "
            "one (claim label_bias)")
_Q_LABEL_BIAS = ("Sec. 4.3.1: “The unidirectional encoder based tagging experiments suggest that conditioning on "
                 "partial input during decoding results in poor models when trained with cross entropy based "
                 "methods. Interestingly, all techniques improve upon this: (i) search-aware locally and globally "
                 "normalized models are able to train for accuracy directly […] and, (ii) the bidirectional tagging "
                 "model […] results in a much better performance.”")
_Q_INIT = ("Sec. 4.3.2: “Across all the results in Tables 2, 3 and 4, we observe that search-aware optimization "
           "for locally normalized models always improves upon the pre-trained locally normalized models used for "
           "initialization. But when the search-aware optimization for globally normalized models is initialized "
           "with locally normalized CE models, the improvement is not as pronounced and in the case of MT, the "
           "performance is actually hurt by the improper initialization […]. When the self-normalized models are "
           "used for initialization, optimization for globally normalized models always improves upon the "
           "pre-trained self-normalized model.”")
_Q_SN = ("Sec. 3.2.1: “We observe that L2 models are competitive performance-wise to the cross-entropy trained "
         "locally normalized models while resulting in a much smaller local log-normalizer on average.”")
_Q_MT_GLOBAL = ("Sec. 4.3.4: “For MT (table 4), […] we still observe that the globally normalized model improves "
                "significantly over the self-normalized pre-trained model and the search-aware locally normalized "
                "model. […] the globally normalized model, when initialized with a CE trained model, performs worse "
                "because of improper initialization of the search aware training. The self-normalized model starts "
                "off 1 BLEU point worse than the CE model point but global normalization, initialized with the "
                "self-normalized model improves the performance and is competitive with the best model for MT.”")
_Q_TABLE5 = ("Sec. 4.3.5: “We observe that the globally normalized model produces longer predictions than the "
             "locally normalized model. More interestingly, it seems to have better 3 and 4-gram overlap and "
             "slightly worse unigram and bigram overlap score than the locally normalized model.”")
_Q_TABLE6 = ("Sec. 4.3.5: “Moreover, in table 6, we observe that globally normalized models perform better on all "
             "the length ranges but especially so on long sentences.”")

C_LABEL_BIAS = _claim(
    "label_bias", "Conditioning on partial input gives poor CE models: the bidirectional CE tagger performs much "
    "better than the unidirectional one (greedy, regular init; “much better” taken as more than 3 points: the "
    "paper calls a 1.4-point gap “slightly worse” (Sec. 4.3.2, Table 1), so “much” is read as above twice that; "
    "its own gap is 16.05)", "bidirectional CE, greedy", "unidirectional CE, greedy", (92.59, 76.54), "Table 2",
    size=3.0, quote=_Q_LABEL_BIAS)
C_CLOSES_GAP = _claim(
    "closes_half_gap", "Search-aware training closes at least half of the uni→bi gap: the best unidirectional "
    "search-aware tagger (local or global, either init, chosen on dev) beats the midpoint of the uni and bi CE "
    "taggers (greedy, regular init) (the paper states that all techniques improve upon the poor unidirectional "
    "CE model; “at least half” is our reading of its numbers: its best, 85.50, closes 56% of the gap)",
    "best uni search-aware", "midpoint of uni and bi CE", (85.50, (76.54 + 92.59) / 2), "Tables 2–3",
    premise=_PREMISE, presumes=("label_bias",), quote=_Q_LABEL_BIAS)
C_LOCAL = _claim(
    "local_improves_on_init", "Search-aware optimization for locally normalized models always improves upon the "
    "pre-trained locally normalized models used for initialization (local vs its initialiser's beam decoding, "
    "every encoder and init)", "local", "pretrain-beam", (93.76, 93.29),
    "Tables 2–3 (the smallest of the four gains: bidirectional, regular init)", quote=_Q_INIT)
C_LOCAL_MT = dataclasses.replace(C_LOCAL, paper=kit.PaperEvidence(
    a=27.71, b=26.63, source="Table 4 (the smaller of the two gains: self-normalised init)"))
C_GLOBAL_SN = _claim(
    "global_sn_improves_on_init", "When the self-normalized models are used for initialization, optimization for "
    "globally normalized models always improves upon the pre-trained self-normalized model (global vs its "
    "initialiser's beam decoding)", "global (SN init)", "pretrain-beam (SN)", (92.63, 91.94),
    "Table 3 (the smaller of the two gains: bidirectional)", quote=_Q_INIT)
C_GLOBAL_SN_MT = dataclasses.replace(C_GLOBAL_SN, paper=kit.PaperEvidence(a=29.27, b=26.63, source="Table 4"))
C_GLOBAL_REG = _claim(
    "global_regular_less_pronounced", "Initialized with CE models, the improvement of the globally normalized "
    "model over its initialiser is not as pronounced as with self-normalized ones (gain = global − "
    "pretrain-beam of the same init; judged: gain (SN) − gain (regular))", "gain, SN init", "gain, regular init",
    (92.63 - 91.94, 93.73 - 93.29), "Tables 2–3 (the smaller difference: bidirectional, gains 0.69 vs 0.44)",
    quote=_Q_INIT)
C_GLOBAL_REG_MT = dataclasses.replace(C_GLOBAL_REG, paper=kit.PaperEvidence(
    a=29.27 - 26.63, b=26.24 - 27.62, source="Table 4 (gains +2.64 vs −1.38)"))
C_BI_MARGINAL_MT = _claim(
    "bidirectional_marginal_mt_pronounced", "The impact of search-aware optimization (local − pretrain-beam, same "
    "init) is marginal on the bidirectional tagger but much more pronounced on MT: the MT gain (BLEU) exceeds the "
    "bidirectional tagger's gain (accuracy points) at either init (both halves of the sentence as one contrast; "
    "the paper does not quantify “much more”, so the size is 0; the interval's n counts the MT and the tagging "
    "test sentences together)", "MT gain (local − pretrain-beam)", "bi tagger gain (local − pretrain-beam)",
    (27.71 - 26.63, 92.78 - 91.94),
    "Tables 3–4 (the smaller contrast: SN init, 1.08 BLEU vs 0.84 points; regular init 1.66 vs 0.47)",
    quote="Sec. 4.3.3: “Therefore, the impact of search-aware optimization on the bidirectional tagger is marginal. "
          "However, it is much more pronounced on the task of MT.”")
C_UNI_BEST = _claim(
    "global_sn_best_unidirectional", "The globally normalized model (warm started with a self-normalized model) "
    "performs the best among all the models in the unidirectional tagger case (against each other "
    "unidirectional row; presumes the label bias from partial input it is said to ameliorate)", "uni global (SN)",
    "every other uni row", (85.50, 83.93), "Tables 2–3 (the runner-up: global, regular init)", premise=_PREMISE,
    presumes=("label_bias",),
    quote="Sec. 4.3.4: “In the specific setup for tagging with the unidirectional encoder, globally normalized models "
          "are actually more expressive than the locally normalized models […]. The globally normalized model (warm "
          "started with a self-normalized model) performs the best among all the models in the unidirectional tagger "
          "case which indicates that it is ameliorating something beyond exposure bias […].”")
C_SN_WORSE = _claim(
    "sn_slightly_worse", "Self-normalized models perform slightly worse than CE-trained models (pretrain-beam, SN "
    "vs CE init)", "SN pretrain-beam", "CE pretrain-beam", (91.94, 93.29), "Tables 2–3", sign=-1,
    quote="Sec. 4.3.2: “We also observe that self-normalized models perform slightly worse than CE-trained models "
          "but search aware training for globally normalized models improves the performance significantly.”")
C_SN_COMPETITIVE = _claim(
    "sn_competitive", "L2 (self-normalised) models are competitive performance-wise with the CE models "
    "(pretrain-beam; “competitive” taken as within 2 points — the size from the paper's numbers: its gaps are "
    "1.4 accuracy and 0.99 BLEU)", "SN pretrain-beam", "CE pretrain-beam", (93.3 - 1.4, 93.3),
    "Table 1 (CCG: the bidirectional tagger's pretrain-beam)", kind="equivalence", margin=2.0, quote=_Q_SN)
C_LOG_Z = _claim(
    "sn_log_z_much_smaller", "L2 self-normalisation results in a much smaller local log-normalizer on average "
    "(|mean log Z| on dev, L2 vs CE; the paper does not quantify “much” — its Table 1 ratios are 85× (CCG) and "
    "37× (MT) but no threshold is stated — so the size is 0)", "|mean log Z|, L2", "|mean log Z|, CE",
    (0.26, 21.96), "Table 1 (CCG, dev)", sign=-1, quote=_Q_SN)
C_LOG_Z_VAR = _claim(
    "sn_log_z_lower_variance", "L2 self-normalisation lowers the variance of the local log-normalizer (dev)",
    "var log Z, L2", "var log Z, CE", (0.08, 9.18), "Table 1 (CCG, dev)", sign=-1,
    quote="Sec. 3.2.1: “In Table 1, we report the mean and variance of the local log normalizer on the two "
          "different tasks using L2-regularization (L2) based self normalization and no self normalization (CE).” "
          "(the lower variance is Table 1's numbers; the text states no more)")
C_MT_GLOBAL_REG_HURT = _claim(
    "mt_global_regular_hurt", "In MT, initialized with a CE model the globally normalized model's performance is "
    "actually hurt: it is below its initialiser and below the locally normalized model",
    "global (CE init)", "pretrain-beam / local (CE init)", (26.24, 27.62),
    "Table 4 (the smaller margin: against pretrain-beam)", sign=-1,
    quote=_Q_INIT + " " + _Q_MT_GLOBAL)
C_MT_GLOBAL_SN_LOCAL = _claim(
    "mt_global_sn_beats_local", "In MT, the globally normalized model (SN init) improves significantly over the "
    "search-aware locally normalized model (“significantly” not quantified: size 0)", "global (SN)", "local (SN)",
    (29.27, 27.71), "Table 4", quote=_Q_MT_GLOBAL)
C_MT_COMPETITIVE = _claim(
    "mt_global_sn_competitive_with_best", "Global normalization initialized with the self-normalized model is "
    "competitive with the best model for MT (the best: the best other Table 4 row by our dev BLEU, judged on test "
    "— the paper's is local, CE init; “competitive” taken as within 1 BLEU, the gap the paper calls the SN "
    "initialiser's “1 BLEU point worse” start)", "global (SN)", "the best other row (by dev)", (29.27, 29.28),
    "Table 4 (the best other row: local, CE init)", kind="equivalence", margin=1.0, quote=_Q_MT_GLOBAL)
C_MT_LONGER = _claim(
    "mt_global_longer", "The globally normalized model produces longer predictions than the locally normalized "
    "model (length ratio, dev, SN init)", "global (SN)", "local (SN)", (0.959, 0.918), "Table 5", quote=_Q_TABLE5)
C_MT_34 = _claim(
    "mt_global_better_3_4_gram", "The globally normalized model has better 3- and 4-gram overlap than the locally "
    "normalized model (n-gram precision, dev, SN init)", "global (SN)", "local (SN)", (23.2, 22.7),
    "Table 5 (3-gram; 4-gram 14.7 vs 14.0)", quote=_Q_TABLE5)
C_MT_12 = _claim(
    "mt_global_worse_1_2_gram", "The globally normalized model has slightly worse unigram and bigram overlap than "
    "the locally normalized model (n-gram precision, dev, SN init)", "global (SN)", "local (SN)",
    (39.1, 39.4), "Table 5 (bigram; unigram 65.0 vs 66.9)", sign=-1, quote=_Q_TABLE5)
C_MT_LENGTHS = _claim(
    "mt_global_better_every_length", "Globally normalized models perform better on all the length ranges (dev BLEU "
    "per source-length bucket, SN init, global vs local)", "global (SN)", "local (SN)", (33.21, 32.35),
    "Table 6 (the smallest gain: 0-20)", quote=_Q_TABLE6)
C_MT_LONG = _claim(
    "mt_global_especially_long", "…but especially so on long sentences: the gain of the globally over the locally "
    "normalized model (dev BLEU, SN init) is larger on long sources (30 tokens or more: Table 6's 30-40 and 40+ "
    "buckets pooled, our dev set having one 40+ verse) than on short ones (0-20); “especially” is not quantified, "
    "so the size is 0; presumes the gain on every length range", "gain on long sources", "gain on short sources",
    (26.41 - 25.2, 33.21 - 32.35), "Table 6 (gains: 40+ 1.21, 30-40 1.36, 0-20 0.86)",
    presumes=("mt_global_better_every_length",), quote=_Q_TABLE6)
C_SS = _claim(
    "thesis_dss_beats_ce_and_bengio", "Thesis Table 3.1 (MT): differentiable scheduled sampling (α-soft, best of "
    "four by dev) beats Baseline CE and Bengio et al.'s scheduled sampling (best of two by dev); all decoded "
    "greedily", "best α-soft", "CE / best Bengio", (20.60, 19.85),
    "thesis Table 3.1 (MT, test; against the better of the two: Bengio greedy)",
    quote="thesis Sec. 3.3.4: “All three approaches improve over the standard cross-entropy based seq2seq "
          "training. Moreover, both approaches using continuous relaxations (greedy and sample-based) outperform "
          "standard scheduled sampling (Bengio et al., 2015).”")

_BI_PRE = _tag("blstm", "regular", "pretrain_greedy")
_UNI_PRE = _tag("lstm", "regular", "pretrain_greedy")
_UNI_SEARCH = [_tag("lstm", i, r) for i in INITS for r in ("local", "global")]
_SN_GLOBAL_UNI = _tag("lstm", "self_normalised", "global")
_SN_GLOBAL_MT = _mt("self_normalised", "global")
_SS_DSS = ("dss_fixed_greedy", "dss_fixed_sample", "dss_annealed_greedy", "dss_annealed_sample")
_SS_BENGIO = ("ss_greedy", "ss_sample")
_CENTRED = ("the self-normalised initialiser starts from the translator with every raw score shifted by minus its "
            "mean log Z on training verses (`centre_log_z`; `normalisation.translation.centre_log_z: true`), so its "
            "mean log Z is about 0 before the L2 penalty does anything")


def _gain(init_rows: Callable[[str, str], str], init: str) -> str:
    return f"gain:{init_rows(init, 'global')}-{init_rows(init, 'pretrain_beam')}"


TESTS: tuple[Test, ...] = (
    Test(C_LABEL_BIAS, "tagging", (("bi − uni", _BI_PRE, _UNI_PRE),)),
    Test(C_CLOSES_GAP, "tagging", (("best − midpoint", "best:" + "|".join(_UNI_SEARCH), f"mid:{_UNI_PRE}+{_BI_PRE}"),)),
    Test(C_LOCAL, "tagging", tuple((f"{ENCODER_SHORT[e]}, {INIT_SHORT[i]}", _tag(e, i, "local"), _tag(e, i, "pretrain_beam"))
                                   for e in ENCODERS for i in INITS)),
    Test(C_LOCAL_MT, "translation", tuple((INIT_SHORT[i], _mt(i, "local"), _mt(i, "pretrain_beam")) for i in INITS),
         file=MT_TEST, score="bleu"),
    Test(C_GLOBAL_SN, "tagging", tuple((ENCODER_SHORT[e], _tag(e, "self_normalised", "global"),
                                        _tag(e, "self_normalised", "pretrain_beam")) for e in ENCODERS)),
    Test(C_GLOBAL_SN_MT, "translation", (("SN", _SN_GLOBAL_MT, _mt("self_normalised", "pretrain_beam")),),
         file=MT_TEST, score="bleu"),
    Test(C_GLOBAL_REG, "tagging", tuple((ENCODER_SHORT[e], _gain(lambda i, r, e=e: _tag(e, i, r), "self_normalised"),
                                         _gain(lambda i, r, e=e: _tag(e, i, r), "regular")) for e in ENCODERS)),
    Test(C_GLOBAL_REG_MT, "translation", (("gain SN − gain CE", _gain(_mt, "self_normalised"), _gain(_mt, "regular")),),
         file=MT_TEST, score="bleu"),
    Test(C_BI_MARGINAL_MT, "both", tuple((INIT_SHORT[i], f"task:{_mt(i, 'local')}+{_tag('blstm', i, 'local')}",
                                          f"task:{_mt(i, 'pretrain_beam')}+{_tag('blstm', i, 'pretrain_beam')}")
                                         for i in INITS), file=MT_TEST, score="bleu_minus_tagging"),
    Test(C_UNI_BEST, "tagging", tuple((f"vs {INIT_SHORT[s.split('/')[1]]} {ROW_SHORT[s.split('/')[2]]}", _SN_GLOBAL_UNI, s)
                                      for s in _UNI_ROWS if s != _SN_GLOBAL_UNI)),
    *(Test(C_SN_WORSE, f"tagging:{e}", (("SN − CE", _tag(e, "self_normalised", "pretrain_beam"),
                                          _tag(e, "regular", "pretrain_beam")),)) for e in ENCODERS),
    Test(dataclasses.replace(C_SN_WORSE, paper=kit.PaperEvidence(a=26.63, b=27.62, source="Table 4")), "translation",
         (("SN − CE", _mt("self_normalised", "pretrain_beam"), _mt("regular", "pretrain_beam")),), file=MT_TEST,
         score="bleu"),
    Test(C_SN_COMPETITIVE, "tagging:blstm", (("SN − CE", _tag("blstm", "self_normalised", "pretrain_beam"),
                                              _tag("blstm", "regular", "pretrain_beam")),)),
    Test(dataclasses.replace(C_SN_COMPETITIVE, paper=kit.PaperEvidence(a=26.63, b=27.62, source="Table 1 (MT)")),
         "translation", (("SN − CE", _mt("self_normalised", "pretrain_beam"), _mt("regular", "pretrain_beam")),),
         file=MT_TEST, score="bleu"),
    *(Test(C_LOG_Z, f"tagging:{e}", (("|L2| − |CE|", f"{e}/self_normalised", f"{e}/regular"),), file=TAG_LOG_Z,
           score="log_z_mean") for e in ENCODERS),
    Test(dataclasses.replace(C_LOG_Z, paper=kit.PaperEvidence(a=0.7, b=25.8, source="Table 1 (MT, dev)")),
         "translation", (("|L2| − |CE|", "self_normalised", "regular"),), file=MT_LOG_Z, score="log_z_mean",
         centred=_CENTRED),
    *(Test(C_LOG_Z_VAR, f"tagging:{e}", (("L2 − CE", f"{e}/self_normalised", f"{e}/regular"),), file=TAG_LOG_Z,
           score="log_z_var") for e in ENCODERS),
    Test(dataclasses.replace(C_LOG_Z_VAR, paper=kit.PaperEvidence(a=0.29, b=129.1, source="Table 1 (MT, dev)")),
         "translation", (("L2 − CE", "self_normalised", "regular"),), file=MT_LOG_Z, score="log_z_var"),
    Test(C_MT_GLOBAL_REG_HURT, "translation", (("vs pretrain-beam", _mt("regular", "global"), _mt("regular", "pretrain_beam")),
                                               ("vs local", _mt("regular", "global"), _mt("regular", "local"))),
         file=MT_TEST, score="bleu"),
    Test(C_MT_GLOBAL_SN_LOCAL, "translation", (("global − local", _SN_GLOBAL_MT, _mt("self_normalised", "local")),),
         file=MT_TEST, score="bleu"),
    Test(C_MT_COMPETITIVE, "translation", (("global SN − best other", _SN_GLOBAL_MT,
                                            "best:" + "|".join(_mt(i, r) for i in INITS for r in ROWS
                                                               if _mt(i, r) != _SN_GLOBAL_MT)),),
         file=MT_TEST, score="bleu"),
    Test(C_MT_LONGER, "translation", (("length ratio", _SN_GLOBAL_MT, _mt("self_normalised", "local")),),
         file=MT_DEV, score="length_ratio"),
    Test(C_MT_34, "translation", tuple((f"{n}-gram", _SN_GLOBAL_MT, _mt("self_normalised", "local"))
                                       for n in (3, 4)), file=MT_DEV, score="p"),
    Test(C_MT_12, "translation", tuple((f"{n}-gram", _SN_GLOBAL_MT, _mt("self_normalised", "local"))
                                       for n in (1, 2)), file=MT_DEV, score="p"),
    Test(C_MT_LENGTHS, "translation", tuple((BUCKET_LABEL[b], _SN_GLOBAL_MT, _mt("self_normalised", "local"))
                                            for b in BUCKETS), file=MT_DEV, score="bleu", by_bucket=True),
    Test(C_MT_LONG, "translation", (("30+ − 0-20", _SN_GLOBAL_MT, _mt("self_normalised", "local")),), file=MT_DEV,
         score="bleu", contrast=(("30-40", "40+"), ("0-20",))),
    Test(C_SS, "translation", (("best α-soft − CE", "best:" + "|".join(f"ss/{v}" for v in _SS_DSS), _mt("regular", "pretrain_greedy")),
                               ("best α-soft − best Bengio", "best:" + "|".join(f"ss/{v}" for v in _SS_DSS),
                                "best:" + "|".join(f"ss/{v}" for v in _SS_BENGIO))),
         file=MT_TEST, score="bleu"),
)


class _Untestable(Exception):
    """A side cannot be compared here; the message says why (kit.not_testable's reason), ``kind`` its
    kind of reason (:data:`kit.WHY`)."""

    def __init__(self, message: str, kind: str = kit.OTHER):
        super().__init__(message)
        self.kind = kind


def _score(test: Test, metric: str, part_label: str) -> tuple[Callable[[np.ndarray], np.ndarray], list[int] | None]:
    """The score function of a part (summed per-sentence statistics -> the number the claim compares) and
    the statistics' columns it reads (None: all of them)."""
    if test.score == "metric":
        return stats_score(metric), None
    if test.score == "bleu":
        return bleu_score(), None
    if test.score == "length_ratio":                  # hypothesis / reference length (sacrebleu's ratio)
        return ratio_score(1.0), [0, 1]
    if test.score == "p":                             # n-gram precision (%): correct_n / total_n
        n = int(part_label.split("-")[0])
        return ratio_score(), [2 + n - 1, 6 + n - 1]
    if test.score == "log_z_mean":                    # |mean log Z| over steps: [log_z_sum, steps]
        return (lambda s: np.abs(s[..., 0] / np.maximum(s[..., 1], 1e-12))), [0, 2]
    if test.score == "log_z_var":                     # variance of log Z over steps
        return (lambda s: s[..., 1] / np.maximum(s[..., 2], 1e-12)
                - (s[..., 0] / np.maximum(s[..., 2], 1e-12)) ** 2), None
    raise ValueError(f"unknown score {test.score!r}")


def _entry(metrics: Mapping[str, Any], test: Test, name: str) -> Mapping[str, Any] | None:
    """The metrics' entry of a system (its dev score and whether it trained)."""
    if test.file in (TAG_LOG_Z, MT_LOG_Z):
        enc, init = name.split("/") if "/" in name else (None, name)
        return _get(metrics, "tagging", "log_z", enc, init) if enc else _get(metrics, "translation", "log_z", init)
    if name.startswith("ss/"):
        return _get(metrics, "translation", "ss", name[3:])
    if test.file == TAGGING:
        return _get(metrics, "tagging", "rows", *name.split("/"))
    return _get(metrics, "translation", "rows", *name.split("/"))


def _label(test: Test, name: str) -> str:
    parts = name.split("/")
    if name.startswith("ss/"):
        return VARIANT_LABEL.get(parts[1], parts[1])
    if len(parts) == 3:
        return f"{ENCODER_SHORT.get(parts[0], parts[0])} {ROW_SHORT.get(parts[2], parts[2])} ({INIT_SHORT.get(parts[1], parts[1])})"
    if len(parts) == 2 and parts[1] in ROW_SHORT:
        return f"{ROW_SHORT[parts[1]]} ({INIT_SHORT.get(parts[0], parts[0])})"
    return f"the {INIT_TABLE1.get(parts[-1], parts[-1])} model" + (f" ({ENCODER_LABEL[parts[0]]})" if len(parts) == 2 else "")


def _system(metrics: Mapping[str, Any], stats: Stats, test: Test, name: str) -> np.ndarray:
    """A plain system's statistics, or :class:`_Untestable` when it did not run, did not learn or has no
    statistics."""
    entry = _entry(metrics, test, name)
    if not isinstance(entry, Mapping):
        raise _Untestable(f"{_label(test, name)} was not run", kit.NOT_RUN)
    if entry.get("failed"):
        why = entry.get("failure") or ""
        raise _Untestable(f"{_label(test, name)} did not learn" + (f": {why}" if why else ""), kit.FAILED_RUN)
    x = stats.get(name)
    if x is None:
        raise _Untestable(f"no per-sentence statistics for {_label(test, name)}", kit.NOT_RUN)
    return np.asarray(x, dtype=np.float64)


def _best_of(metrics: Mapping[str, Any], test: Test, names: Sequence[str]) -> str:
    """The system with the best mean dev score among those that ran and learned (the paper's choice by dev;
    the claim is then judged on test)."""
    usable = [(n, _finite(_get(_entry(metrics, test, n), "dev"))) for n in names
              if isinstance(_entry(metrics, test, n), Mapping) and not _entry(metrics, test, n).get("failed")]
    usable = [(n, d) for n, d in usable if d is not None]
    if not any(isinstance(_entry(metrics, test, n), Mapping) for n in names):
        raise _Untestable("not run: " + "; ".join(_label(test, n) for n in names)
                          + (" (thesis Table 3.1's variants: `normalisation.translation.ss`, set at paper scale only "
                             "— `scales/paper.yaml`; a run of the normalisation stage with them would test it)"
                             if names[0].startswith("ss/") else ""), kit.NOT_RUN)
    if not usable:
        raise _Untestable("none of " + "; ".join(_label(test, n) for n in names) + " learned", kit.FAILED_RUN)
    return max(usable, key=lambda x: x[1])[0]


def _task_pair(metrics: Mapping[str, Any], stats: Mapping[str, Stats], test: Test, rest: str) -> tuple[np.ndarray, str]:
    """"task:M+T": translation system M's and tagging system T's test statistics stacked as one set of items
    (``[seeds, n_M + n_T, d_M + d_T]``, each sentence its own task's columns and zeros in the other's)."""
    m, t = rest.split("+")
    if TAGGING not in stats:
        raise _Untestable(f"no per-sentence statistics ({TAGGING}.npz)", kit.NOT_RUN)
    tag_test = dataclasses.replace(test, file=TAGGING)
    xm = _system(metrics, stats[MT_TEST], test, m)
    xt = _system(metrics, stats[TAGGING], tag_test, t)
    xm, xt = (x if x.ndim == 3 else x[None] for x in (xm, xt))
    if xm.shape[0] != xt.shape[0]:
        raise _Untestable(f"the two tasks ran different numbers of seeds ({xm.shape[0]} and {xt.shape[0]})", kit.OTHER)
    k, (nm, dm), (nt, dt) = xm.shape[0], xm.shape[1:], xt.shape[1:]
    top = np.concatenate([xm, np.zeros((k, nm, dt))], axis=-1)
    bottom = np.concatenate([np.zeros((k, nt, dm)), xt], axis=-1)
    return np.concatenate([top, bottom], axis=-2), f"{_label(test, m)} and {_label(tag_test, t)}"


def _side(metrics: Mapping[str, Any], stats: Mapping[str, Stats], test: Test, spec: str) -> tuple[np.ndarray, str]:
    """A side's statistics and its name as printed (see the combinations above)."""
    kind, _, rest = spec.partition(":") if ":" in spec else ("", "", spec)
    if kind == "task":
        return _task_pair(metrics, stats, test, rest)
    st = stats[test.file]
    if kind == "best":
        name = _best_of(metrics, test, rest.split("|"))
        return _system(metrics, st, test, name), f"{_label(test, name)} (best by dev)"
    if kind == "mid":
        x, y = rest.split("+")
        return (0.5 * (_system(metrics, st, test, x) + _system(metrics, st, test, y)),
                f"midpoint of {_label(test, x)} and {_label(test, y)}")
    if kind == "gain":
        x, y = rest.split("-")
        return (np.concatenate([_system(metrics, st, test, x), _system(metrics, st, test, y)], axis=-1),
                f"{_label(test, x)} − {_label(test, y)}")
    return _system(metrics, st, test, spec), _label(test, spec)


def _bucket_rows(stats: Mapping[str, Stats], label: str, strict: bool = True) -> np.ndarray:
    """The dev sentences of a source-length bucket (Table 6's buckets, ``components.metrics.bleu``)."""
    if MT_LENGTHS not in stats:
        raise _Untestable("no source lengths of the dev sentences", kit.NOT_RUN)
    lengths = stats[MT_LENGTHS]["source"][..., 0]
    edges = list(DEFAULT_EDGES)
    want = bucket_labels(edges).index(label)
    rows = np.array([i for i, n in enumerate(lengths) if bucket_of(int(n), edges) == want], dtype=int)
    if strict and len(rows) < 2:
        raise _Untestable(f"fewer than 2 dev sentences of source length {label}", kit.OTHER)
    return rows


def _contrast(stats: Mapping[str, Stats], test: Test, sa: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Table 6's "especially on long sentences": ``a`` and ``b`` of the long buckets' sentences side by side
    as one side, of the short buckets' as the other, on the dev sentences of either (zeros in the columns of
    the group a sentence is not in): scored as score(left half) − score(right half), the interval is of
    (a − b on long) − (a − b on short)."""
    long_, short = ([r for lab in labels for r in _bucket_rows(stats, lab, strict=False)] for labels in test.contrast)
    for labels, rows in zip(test.contrast, (long_, short)):
        if len(rows) < 2:
            raise _Untestable(f"fewer than 2 dev sentences of source length {' or '.join(labels)}", kit.OTHER)
    rows = np.array(sorted(long_ + short), dtype=int)
    is_long = np.isin(rows, long_)[:, None].astype(float)
    a, b = sa[..., rows, :], sb[..., rows, :]
    return (np.concatenate([a * is_long, b * is_long], axis=-1),
            np.concatenate([a * (1 - is_long), b * (1 - is_long)], axis=-1))


def _interval(metrics: Mapping[str, Any], stats: Mapping[str, Stats], test: Test, label: str, a: str, b: str,
              metric: str) -> Interval:
    """The paired interval of ``a − b`` over the test (dev) sentences, and seeds where there are several,
    on the columns the part's score reads."""
    if test.file not in stats:
        raise _Untestable(f"no per-sentence statistics ({test.file}.npz)", kit.NOT_RUN)
    sa, _ = _side(metrics, stats, test, a)
    sb, _ = _side(metrics, stats, test, b)
    if test.score == "bleu_minus_tagging":
        dm, bleu, acc = len(stats[MT_TEST].columns), bleu_score(), stats_score(metric)
        return paired_interval(sa, sb, lambda s: bleu(s[..., :dm]) - acc(s[..., dm:]))
    base, cols = _score(test, metric, label)
    pick = (lambda x: x) if cols is None else (lambda x: x[..., cols])    # noqa: E731
    halves = a.startswith("gain:") or bool(test.contrast)
    if test.by_bucket:
        rows = _bucket_rows(stats, label)
        sa, sb = sa[..., rows, :], sb[..., rows, :]
    if test.contrast:
        sa, sb = _contrast(stats, test, sa, sb)
    if halves:                                                              # two systems side by side per item
        split = lambda x: np.concatenate([pick(x[..., :x.shape[-1] // 2]), pick(x[..., x.shape[-1] // 2:])], -1)  # noqa: E731
        sa, sb = split(sa), split(sb)
        d = sa.shape[-1] // 2
        score = lambda s: base(s[..., :d]) - base(s[..., d:])              # noqa: E731
    else:
        sa, sb, score = pick(sa), pick(sb), base
    return paired_interval(sa, sb, score)


def _scope(metrics: Mapping[str, Any], scope: str) -> str:
    if scope == "translation":
        return "translation (Greek→English)"
    task = _tag_task(metrics)
    if scope == "both":
        return f"translation (Greek→English) vs {task} (bidirectional)"
    return task + (f" ({ENCODER_LABEL[scope.split(':')[1]]})" if ":" in scope else "")


def _judge(metrics: Mapping[str, Any], stats: Mapping[str, Stats], test: Test) -> kit.Verdict:
    scope = _scope(metrics, test.scope)
    sections = {"translation": ("translation",), "both": ("translation", "tagging")}.get(test.scope, ("tagging",))
    absent = [s for s in sections if _section(metrics, s) is None]
    if absent:
        return kit.not_testable(test.claim, scope, f"{' and '.join(absent)} was not run", kit.NOT_RUN)
    claim = test.claim
    if test.centred and _get(metrics, "translation", "centre_log_z"):
        claim = dataclasses.replace(claim, by_construction=test.centred)
    metric = str(_get(metrics, "tagging", "metric") or "accuracy")
    try:
        parts, empty = [], []
        for label, a, b in test.parts:
            if test.by_bucket and MT_LENGTHS in stats and len(_bucket_rows(stats, label, strict=False)) < 2:
                empty.append(label)               # a bucket without sentences: no part to judge there
                continue
            parts.append((label, _interval(metrics, stats, test, label, a, b, metric)))
        if not parts:
            raise _Untestable("no source-length bucket has 2 or more dev sentences", kit.OTHER)
        if empty:
            return kit.judge_parts(claim, scope, parts, note=f"not judged (fewer than 2 dev sentences): "
                                   f"{', '.join(empty)}")
        if len(parts) == 1:
            label, a, b = test.parts[0]
            names = f"{_side(metrics, stats, test, a)[1]} vs {_side(metrics, stats, test, b)[1]}"
            if test.contrast:
                names += f" (dev, source length {' and '.join(test.contrast[0])} minus {' and '.join(test.contrast[1])})"
            return kit.judge(claim, scope, parts[0][1], note=names)
        return kit.judge_parts(claim, scope, parts)
    except _Untestable as e:
        return kit.not_testable(claim, scope, str(e), e.kind)


def verdicts(metrics: Mapping[str, Any], stats: Mapping[str, Stats]) -> list[kit.Verdict]:
    """Every claim of :data:`TESTS` judged on our per-sentence statistics (``stats``: :func:`load_stats_dir`),
    in order. A claim whose side was not run, did not learn (``failed`` in the metrics) or has no
    statistics is *not testable* with that reason and its kind; a claim's premises (``presumes``: the
    label bias from partial input, the gain on every length range) gate it in :func:`kit.finalise`,
    which every rendering and record applies to this full list."""
    if not isinstance(metrics, Mapping):
        raise ValueError("normalisation metrics: expected a dict with 'tagging' and/or 'translation'")
    return [_judge(metrics, stats, test) for test in TESTS]


# ---------------------------------------------------------------------------------------------
# figures
ENCODER_COLOR = {"lstm": "tab:blue", "blstm": "tab:orange"}


def tagging_figure(metrics: Mapping[str, Any]) -> Figure:
    """Tables 2 (regular init, left) and 3 (self-normalised init, right): test accuracy per row as dots, one
    series per encoder, ours filled (± std over seeds as error bars when seeds > 1; hollow: did not train) and
    the paper's CCG numbers as their own hollow-diamond series beside ours. Dots, not bars: the accuracies
    sit far above zero, and a bar's length would mean nothing."""
    tag = _section(metrics, "tagging")
    fig, axes = plt.subplots(1, len(INITS), figsize=(11, 4.6), dpi=110, sharey=True)
    any_dot, seeds = False, set()
    for ax, init in zip(axes, INITS):
        for k, e in enumerate(ENCODERS):
            shift = (k - (len(ENCODERS) - 1) / 2) * 0.36
            xs, hollow = [], []
            for j, r in enumerate(ROWS):
                entry = _get(tag, "rows", e, init, r)
                mean = _finite(_get(entry, "test"))
                if mean is None:
                    continue
                many = isinstance(entry, Mapping) and _seeds(entry) > 1
                seeds.add(_seeds(entry) if isinstance(entry, Mapping) else 1)
                std = _finite(_get(entry, "test_std")) if many else None
                (hollow if entry.get("failed") else xs).append((j + shift - 0.06, mean, std))
            for pts, face in ((xs, ENCODER_COLOR[e]), (hollow, "white")):
                if pts:
                    any_dot = True
                    ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                                yerr=[p[2] or 0.0 for p in pts] if any(p[2] for p in pts) else None,
                                fmt="o", ms=7, color=ENCODER_COLOR[e], mfc=face, capsize=3, ls="none",
                                label=f"ours, {ENCODER_LABEL[e]}" + (" ✗ (did not train)" if face == "white" else ""))
            paper = _PAPER_TAGGING[init][e]
            ax.plot([j + shift + 0.06 for j in range(len(ROWS))], [paper[r] for r in ROWS], "D", ms=6,
                    mfc="white", mec=ENCODER_COLOR[e], mew=1.5, ls="none", label=f"paper (CCG), {ENCODER_LABEL[e]}")
        ax.set_xticks(range(len(ROWS)), [ROW_LABEL[r] for r in ROWS], fontsize=8)
        ax.set_xlim(-0.6, len(ROWS) - 0.4)
        ax.set_title(f"{'Table 2' if init == 'regular' else 'Table 3'}: {INIT_LABEL[init]}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: not labels[i].startswith("ours"))     # ours, then paper
        legend_below(ax, ncol=2, fontsize=7, handles=[handles[i] for i in order], labels=[labels[i] for i in order])
    axes[0].set_ylabel("test accuracy (%)")
    if not any_dot:
        axes[0].text(0.5, 0.5, "tagging not run", ha="center", va="center", transform=axes[0].transAxes)
    spread = (f"error bars: ± std over {max(seeds)} seeds" if seeds and max(seeds) > 1
              else "one seed per cell: no error bars")
    fig.suptitle(f"{_tag_task(metrics)}: Tables 2 and 3 analog (filled: ours; hollow diamonds: the paper's CCG; "
                 f"{spread})", fontsize=9)
    fig.tight_layout()
    return fig


def length_figure(metrics: Mapping[str, Any]) -> Figure:
    """Table 6: dev BLEU by source-length bucket per row (self-normalised init), ours solid with dots, the paper's
    numbers as their own series (dashed, hollow squares), one colour per row."""
    by_len = _get(metrics, "translation", "by_length") if _section(metrics, "translation") else None
    fig, ax = plt.subplots(figsize=(6.5, 4.8), dpi=110)
    xs = range(len(BUCKETS))
    drawn = False
    for k, r in enumerate(ROWS):
        color = plt.get_cmap("tab10").colors[k]
        ours = [_finite(_get(by_len, r, b)) for b in BUCKETS]
        if any(v is not None for v in ours):
            drawn = True
            ax.plot(xs, [math.nan if v is None else v for v in ours], "o-", color=color, label=f"{ROW_LABEL[r]} (ours)")
        if r in PAPER_TABLE6:
            ax.plot(xs, [PAPER_TABLE6[r][b] for b in BUCKETS], "s--", color=color, mfc="white", alpha=0.8, ms=5,
                    label=f"{ROW_LABEL[r]} (paper)")
    if not drawn:
        ax.text(0.5, 0.5, "translation: no BLEU by length (not run)", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks(list(xs), [BUCKET_LABEL[b] for b in BUCKETS])
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel("dev BLEU")
    ax.set_title("Table 6 analog: BLEU by source length, self-normalised init (one run: no spread)", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        legend_below(ax, ncol=2, fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# report
def _setup_lines(metrics: Mapping[str, Any]) -> list[str]:
    tag, mt = _section(metrics, "tagging"), _section(metrics, "translation")
    out = []
    if tag is None:
        out.append("Tagging: not run.")
    else:
        k = tag.get("top_k_labels")
        out.append(f"Tagging: `{_tag_task(metrics)}` (SBLGNT Greek morphology in place of CCG supertagging with "
                   f"1,284 supertags), {tag.get('n_labels', '–')} labels (top-K kept: "
                   f"{'all' if k in (0, None) else k}), {tag.get('n_train', '–')} training sentences, beam size "
                   f"{tag.get('beam_size', '–')} (paper: 5), {tag.get('seeds', '–')} seed(s) per row; metric "
                   f"{tag.get('metric', 'accuracy')} (%).")
    if mt is None:
        out.append("Translation: not run.")
    else:
        seeds = sorted({_seeds(e) for e in [*(_get(mt, "rows", i, r) for i in INITS for r in ROWS),
                                            *((mt.get("ss") or {}).values())] if isinstance(e, Mapping)})
        seeds_s = "–" if not seeds else (str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}")
        out.append(f"Translation: Greek→English New Testament verses in place of IWSLT'14 De→En; "
                   f"{mt.get('n_train', '–')} training pairs; vocabulary {mt.get('src_vocab', '–')} source / "
                   f"{mt.get('tgt_vocab', '–')} target (paper: 32,000 output types); beam size "
                   f"{mt.get('beam_size', '–')} (paper: 3); {seeds_s} seed(s) per row; BLEU detokenised, "
                   f"sacreBLEU signature `{mt.get('signature', '–')}`.")
        filt = mt.get("filtered") or {}
        if filt:
            fmt = lambda v: ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)  # noqa: E731
            out.append("Translation data filtering: " + "; ".join(f"{k}: {fmt(v)}" for k, v in filt.items()) + ".")
    return out


_ROWS_EXPLAINED = [
    "**pretrain-greedy**: the warm-start model (teacher-forced cross-entropy, or for the self-normalised init "
    "cross-entropy plus λ(log Z)² at every step) decoded greedily, one best label/word at a time.",
    "**pretrain-beam**: the same warm-start model decoded with ordinary (hard) beam search.",
    "**locally normalized**: the warm-start model fine-tuned through the continuous relaxation of beam search "
    "(soft beam, Hamming-style direct loss) with per-step log-softmax scores; decoded by the soft beam with hard "
    "(argmax) backpointers.",
    "**globally normalized**: the same search-aware fine-tuning, but on the raw (unnormalised) successor scores, so "
    "the model can push every successor of a bad beam item down at once; it only starts sensibly from a "
    "self-normalised model, whose raw scores already behave like log-probabilities.",
    "**regular / self-normalised init**: which warm start the search-aware models start from (CE, or CE with the "
    "L2 penalty on log Z of Table 1).",
    "**unidirectional / bidirectional** (tagging): the encoder; the tagger attends only to the i-th encoder state "
    "for the i-th label, so with a unidirectional encoder label i sees words 1..i only — the partial-input "
    "setting in which local normalisation suffers label bias.",
    "**Thesis Table 3.1 rows**: Baseline CE; Bengio et al. (2015) scheduled sampling, feeding the model's own "
    "greedy choice or a sample in place of the gold word with a decaying probability; α-soft: the same with a "
    "differentiable soft argmax (or Gumbel-softmax sample), α fixed or annealed. All decoded greedily.",
]


def _translator_budget(t: Mapping[str, Any]) -> tuple[str, bool]:
    """(how the translator's training ended, as a sentence; whether its budget was capped). It ran
    its whole epoch budget without early stopping firing -- so dev BLEU had still improved within its
    patience -- exactly when its learning curve holds as many epochs as the budget: a capped budget."""
    curve, epochs, best, n = t.get("curve") or [], t.get("epochs"), t.get("best_epoch", "–"), t.get("n_train", "–")
    if not isinstance(epochs, (int, float)) or not curve:
        return f"It kept epoch {best} of {epochs if epochs is not None else '–'} (the best on dev BLEU) on {n} training verses.", False
    if len(curve) < epochs:
        return (f"It trained on {n} training verses and stopped early on dev BLEU after epoch {len(curve)} of its "
                f"{epochs:g}, keeping epoch {best}."), False
    return (f"It trained on {n} training verses and ran its whole budget of {epochs:g} epochs without early stopping "
            f"firing, keeping epoch {best} (the best on dev BLEU): it was still improving when the budget ran out "
            "(a capped budget)."), True


def _mt_caveat(metrics: Mapping[str, Any], found: Sequence[kit.Verdict]) -> list[str]:
    """What the translation rows' BLEU says about their claims: the range of their test BLEU against
    the paper's, the translation verdicts' counts, and the translator's capped budget where it was."""
    rows = _get(metrics, "translation", "rows")
    tests = [_finite(_get(rows, i, r, "test")) for i in INITS for r in ROWS] if isinstance(rows, Mapping) else []
    tests = [t for t in tests if t is not None]
    if not tests:
        return []
    quality = ("the models barely translate at this scale (below 10 BLEU), so differences between rows are a "
               "fraction of a BLEU point on output that is mostly wrong" if max(tests) < 10 else
               "far below the paper's, so differences between rows are measured on output that is often wrong")
    # the translation verdicts, taken from the paper's finalised family (premises, same evidence and Holm
    # applied over every claim), so their counts are the adjusted ones the findings print
    mt = [v for v in kit.finalise(found) if v.scope.startswith("translation")]
    counted = f" The {len(mt)} translation verdicts: {kit.summary(mt)}." if mt else ""
    t = _translator(metrics)
    capped = (" Known cause: the translator every row starts from ran its whole epoch budget and was still "
              "improving on dev (see its section above), a capped budget." if t and _translator_budget(t)[1] else "")
    return [f"Translation: our rows' test BLEU lies between {min(tests):.2f} and {max(tests):.2f} (the paper's "
            f"27–29): {quality}.{counted} An equivalence within a margin (“competitive”) is the easier to pass the "
            "smaller the rows' differences — see the intervals above and the example translations below."
            f"{capped} The log Z claims do not depend on translation quality.", ""]


def readme(metrics: Mapping[str, Any], found: Sequence[kit.Verdict] | None = None) -> str:
    """The report's Markdown; ``found``: the findings' verdicts (:func:`verdicts`; None: judged
    without per-sentence statistics, so every claim is not testable)."""
    judged = list(found) if found is not None else verdicts(metrics, {})
    md = ["# Global vs local normalisation in search-aware training (Goyal, Dyer & Berg-Kirkpatrick 2019): ours "
          "beside the paper", "",
          "The paper trains seq2seq models through a continuous relaxation of beam search, once with locally "
          "normalised (per-step softmax) scores and once with globally normalised (unnormalised) scores, warm-started "
          "either from a cross-entropy model or from a self-normalised one (log Z pushed to 0 with an L2 penalty), "
          "on CCG supertagging (unidirectional vs bidirectional encoder, to expose label bias from partial input) "
          "and IWSLT'14 German→English MT. We run the same design on Greek morphological tagging and Greek→English "
          "New Testament translation.", "",
          "Caveats: corpora, label sets, vocabularies and model sizes differ from the paper's, so only the "
          "*patterns* (which training wins, in which direction) compare, not the absolute numbers. Our numbers are "
          "means over seeds (± std when seeds > 1); the paper reports the best of ≥ 3 random restarts chosen on "
          "dev. "
          "'—': not run; '✗': a run that did not train.", "",
          "## Setup", "", *[f"- {s}" for s in _setup_lines(metrics)], "",
          "## What the rows are", "", *[f"- {s}" for s in _ROWS_EXPLAINED], "",
          "## Table 1 — self-normalisation: log Z of CE vs L2 models", "", table1(metrics),
          "## Table 2 — tagging, regular (CE) init", "", table_tagging(metrics, "regular"),
          "## Table 3 — tagging, self-normalised init", "", table_tagging(metrics, "self_normalised"),
          "![Tables 2 and 3: test accuracy per row, encoder and init](tables_2_3.png)", "",
          "## The translator every translation row starts from", "", translator_section(metrics),
          "## Table 4 — translation BLEU", "", table_mt(metrics),
          "## Thesis Table 3.1 — scheduled sampling, MT column", "", table_ss(metrics),
          "## Table 5 — BLEU breakdown (dev, self-normalised init)", "", table_breakdown(metrics),
          "## Table 6 — BLEU by source length (dev, self-normalised init)", "", table_length(metrics),
          "![Table 6: BLEU by source length](table_6.png)", "",
          kit.findings(judged), "",
          "How each claim is tested: the claims' sides are the systems of the `normalisation` stage's per-sentence "
          "statistics (`metrics/stats/normalisation/`; test sentences, dev for Tables 1, 5 and 6 as the paper); a "
          "claim with a stated size (“much better”, “competitive”) is judged against that size, which its text "
          "states with where it comes from (an adjective the paper does not quantify — “much smaller”, “much more "
          "pronounced”, “significantly”, “especially” — is judged with size 0, and its text says so); a claim of "
          "several comparisons (“always”, “the best among all”, “on all length ranges”) needs each of its parts; "
          "a “best” side is chosen on dev and judged on test; a claim that presumes another (the label bias "
          "from partial input; the gain on every length range) is not testable where that one is not reproduced. "
          "A model that did not learn (dev score at or below its floor) makes its claims not testable.", "",
          *_mt_caveat(metrics, judged),
          "## Example translations", "",
          "Example verses: the Greek source, the English reference and each system's output, to show what the BLEU "
          "differences mean.", "",
          examples_section(metrics)]
    return "\n".join(md)


def _translator(metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
    t = _get(metrics, "translation", "translator") if _section(metrics, "translation") else None
    return t if isinstance(t, Mapping) else None


def translator_section(metrics: Mapping[str, Any]) -> str:
    """The translator stage's model: settings, dev / test BLEU by greedy and beam search (sacrebleu's
    signature), and its learning curve (``translator_curve.png``)."""
    t = _translator(metrics)
    if t is None:
        return "Translation: not run (no translator).\n"
    rows = []
    for split in ("dev", "test"):
        for dec in ("greedy", "beam"):
            rows.append([split, dec if dec == "greedy" else f"beam {t.get('beam_size', '–')}, length penalty "
                         f"{_fmt(_finite(t.get('length_penalty')), 2)}", _fmt(_finite(_get(t, split, dec, "bleu"))),
                         _fmt(_finite(_get(t, split, dec, "bp")), 3)])
    sig = _get(t, "test", "beam", "signature") or "–"
    tried = t.get("dev_bleu_by_length_penalty") or {}
    tried_text = ", ".join(f"{lp}: {_fmt(_finite(v))}" for lp, v in tried.items()) or "–"
    lines = [f"The `translator` stage trains the paper's model (a BiLSTM encoder, an LSTM decoder with additive "
             f"attention) for small data (Sennrich & Zhang 2019): {t.get('settings', '–')}. {_translator_budget(t)[0]} "
             f"A translator under {t.get('min_bleu', '–')} dev BLEU fails its stage. Every translation row "
             "below fine-tunes it with the row's objective on "
             f"{_get(metrics, 'translation', 'n_train') or '–'} training verses: the initialisers for "
             f"{_get(metrics, 'translation', 'optim_epochs') or '–'} epoch(s) at lr "
             f"{_get(metrics, 'translation', 'optim_lr') or '–'}, search-aware training for "
             f"{_get(metrics, 'translation', 'finetune_epochs') or '–'} at lr "
             f"{_get(metrics, 'translation', 'finetune_lr') or '–'}, each row keeping its best epoch on dev as "
             "decoded for the row." + (" The self-normalised initialiser starts from the translator with every "
                                       "raw score shifted by minus its mean log Z on training verses (the softmax "
                                       "is unchanged; the L2 penalty then only has log Z's spread left to shrink)."
                                       if _get(metrics, 'translation', 'centre_log_z') else ""), "",
             _md_table(["split", "decoding", "BLEU", "brevity penalty"], rows),
             f"BLEU: sacrebleu `{sig}`; dev = Mark, test = John (the by-book split). The beam's length penalty "
             f"(Wu et al. 2016) was chosen on dev BLEU ({tried_text}); the rows below decode with the papers' plain "
             "beam.", "",
             "![The translator's learning curve: dev BLEU (greedy) per epoch](translator_curve.png)", ""]
    return "\n".join(lines)


def translator_figure(metrics: Mapping[str, Any]) -> Figure:
    """The translator's learning curve (train loss, dev BLEU per epoch), or a figure saying it was not run."""
    curve = (_translator(metrics) or {}).get("curve") or []
    history = [{"epoch": c["epoch"], "train_loss": c["train_loss"], "dev_score": c["dev_bleu"]} for c in curve]
    if history:
        return learning_curve(history, score_name="dev BLEU (greedy)", title="translator: learning curve")
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    ax.text(0.5, 0.5, "translator: no learning curve (not run)", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def write_report(metrics: Mapping[str, Any], out_dir: str | Path,
                 found: Sequence[kit.Verdict] | None = None) -> dict[str, str]:
    """Write README.md, tables_2_3.png, table_6.png and translator_curve.png into ``out_dir``, each
    atomically (a temporary file in the same folder, then ``os.replace``); ``found``: the findings'
    verdicts (:func:`verdicts`). Returns file name -> path."""
    out = Path(out_dir)
    text = readme(metrics, found)          # validates the input before anything is written
    written: dict[str, str] = {}
    for name, make in (("tables_2_3.png", tagging_figure), ("table_6.png", length_figure),
                       ("translator_curve.png", translator_figure)):
        fig = make(metrics)
        try:
            with atomic_path(out / name) as tmp:
                fig.savefig(tmp, format="png")
        finally:
            close(fig)
        written[name] = str(out / name)
    write_text(out / "README.md", text)
    written["README.md"] = str(out / "README.md")
    return written
