"""Tables 1-6 of Goyal, Dyer & Berg-Kirkpatrick, "An Empirical Investigation of Global and Local
Normalization for Recurrent Neural Sequence Models Using a Continuous Relaxation to Beam Search"
(NAACL 2019; ``papers/goyal-2019-global-vs-local-normalization.txt``) and the MT column of Table 3.1 of
Goyal's thesis (``papers/goyal-thesis-exposure-bias-label-bias-energy-models.txt``), with our runs of the
``normalisation`` stage beside the papers' numbers, a findings table whose verdicts are computed from
the numbers, example translations and two figures.

Input: the ``normalisation`` stage's metrics (``metrics/normalisation.json``)::

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

Either section may be absent; its tables then say "not run" and its findings get that verdict.

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
:func:`findings`, :func:`findings_table`, :func:`examples_section`, :func:`tagging_figure`,
:func:`length_figure`, :func:`readme`, :func:`write_report`.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from components.io import atomic_path, write_text  # noqa: E402
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


def bucket_key(label: str) -> str:
    """The key of a bucket labelled as :func:`components.metrics.bleu.bleu_by_source_length` labels it
    ("40+" -> "40-inf")."""
    return label.replace("+", "-inf")
LOGZ_STATS = ("train_mean", "train_var", "dev_mean", "dev_var")
SPLITS = ("dev", "test")
TAG_TASK = "greek_morph_k400"
MT_TASK = "translation"

# thresholds of the findings (see :func:`findings`)
LABEL_BIAS_MIN_GAP = 3.0      # claim 1: "≪" = bidirectional ahead by at least this many points
GAP_CLOSED_MIN = 0.5          # claim 2: search-aware training closes at least half of the gap
LOGZ_FAR_BELOW = 0.25         # claim 7: |mean log Z| of the L2 model at most this fraction of CE's
COST_MAX_POINTS = 2.0         # claim 7: "small cost": the score drops by at most this many points ...
COST_MAX_RELATIVE = 0.10      # ... and at most this fraction of CE's score

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive (within noise)"
NOT_RUN, DID_NOT_TRAIN = "not run", "did not train"
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_RUN, DID_NOT_TRAIN)

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
# findings: comparisons that know the seeds' noise
class _Side:
    """One number of a comparison: a name, a score and (seeds > 1) its std over seeds."""

    def __init__(self, name: str, score: float, std: float | None = None):
        self.name, self.score, self.std = name, score, std

    def __str__(self) -> str:
        return f"{self.name} {_fmt(self.score)}" + (f" ± {self.std:.2f}" if self.std is not None else "")


def _pooled(sides: Sequence[_Side]) -> float | None:
    """The seeds' std of the runs involved: root mean square of the stds known (None when none is)."""
    stds = [s.std for s in sides if s.std is not None]
    return math.sqrt(sum(s * s for s in stds) / len(stds)) if stds else None


def _judge(margin: float, sides: Sequence[_Side], strict: bool = True) -> tuple[str, str]:
    """Verdict of "margin > 0" (or ≥ 0): inconclusive when |margin| ≤ the pooled std of ``sides`` (> 0)."""
    noise = _pooled(sides)
    if noise is not None and noise > 0 and abs(margin) <= noise:
        return INCONCLUSIVE, f" (within noise: |Δ| ≤ pooled std {noise:.2f})"
    return (HOLDS if (margin > 0 if strict else margin >= 0) else DOES_NOT_HOLD), ""


def _rel(a: float, b: float) -> str:
    return ">" if a > b else "<" if a < b else "="


def _compare(a: _Side, b: _Side, strict: bool = True) -> tuple[str, str]:
    """The claim a > b (a ≥ b when not strict): verdict and "a 29.27 > b 27.71 (Δ +1.56)"."""
    verdict, note = _judge(a.score - b.score, [a, b], strict)
    return verdict, f"{a} {_rel(a.score, b.score)} {b} (Δ {a.score - b.score:+.2f}){note}"


def _combine(verdicts: Sequence[str]) -> str:
    """All must hold: one clear failure fails the claim; else one within-noise comparison makes it inconclusive."""
    if DOES_NOT_HOLD in verdicts:
        return DOES_NOT_HOLD
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else HOLDS


def _missing(verdicts: Sequence[str]) -> str:
    return DID_NOT_TRAIN if DID_NOT_TRAIN in verdicts else NOT_RUN


def _key_name(key: tuple[str, ...]) -> str:
    if key[0] == "tag":
        return f"{ENCODER_SHORT[key[1]]} {ROW_SHORT[key[3]]} ({INIT_SHORT[key[2]]})"
    if key[0] == "mt":
        return f"{ROW_SHORT[key[2]]} ({INIT_SHORT[key[1]]})"
    return key[1]


_Got = tuple[_Side | None, str, str]    # (side, verdict when missing, why missing)


class _Ours:
    """Our numbers, read from the metrics; keys ("tag", encoder, init, row), ("mt", init, row), ("ss", variant)."""

    def __init__(self, metrics: Mapping[str, Any]):
        self.tag, self.mt = _section(metrics, "tagging"), _section(metrics, "translation")

    def side(self, key: tuple[str, ...], split: str = "test") -> _Got:
        name = _key_name(key)
        sec = self.tag if key[0] == "tag" else self.mt
        if sec is None:
            return None, NOT_RUN, f"{'tagging' if key[0] == 'tag' else 'translation'} not run"
        entry = _get(sec, "ss", key[1]) if key[0] == "ss" else _get(sec, "rows", *key[1:])
        if not isinstance(entry, Mapping):
            return None, NOT_RUN, f"{name} not run"
        if entry.get("failed"):
            why = entry.get("failure")
            return None, DID_NOT_TRAIN, f"{name} did not train" + (f" ({why})" if why else "")
        mean = _finite(entry.get(split))
        if mean is None:
            return None, NOT_RUN, f"{name} has no {split} score"
        std = _finite(entry.get(f"{split}_std")) if _seeds(entry) > 1 else None
        return _Side(name, mean, std), "", ""

    def log_z(self, key: tuple[str, ...]) -> tuple[dict[str, dict[str, float]] | None, str]:
        """init -> {train_mean, train_var, dev_mean, dev_var, score}; key ("tag", encoder) or ("mt",)."""
        sec = self.tag if key[0] == "tag" else self.mt
        if sec is None:
            return None, f"{'tagging' if key[0] == 'tag' else 'translation'} not run"
        lz = _get(sec, "log_z", *key[1:])
        out = {}
        for init in INITS:
            stats = {k: _finite(_get(lz, init, k)) for k in LOGZ_STATS}
            stats["score"] = _finite(_get(lz, init, "dev_score"))
            if any(v is None for v in stats.values()):
                return None, f"log Z of the {INIT_TABLE1[init]} model not recorded"
            if _get(lz, init, "failed"):
                return None, f"the {INIT_TABLE1[init]} model did not train"
            out[init] = stats
        return out, ""

    def breakdown(self, row: str) -> _BreakdownGot:
        sec = self.mt
        if sec is None:
            return None, NOT_RUN, "translation not run"
        entry = _get(sec, "rows", "self_normalised", row)
        if isinstance(entry, Mapping) and entry.get("failed"):
            return None, DID_NOT_TRAIN, f"{_key_name(('mt', 'self_normalised', row))} did not train"
        b = _get(sec, "breakdown", row)
        prec = _get(b, "precisions")
        ratio = _finite(_get(b, "ratio"))
        if not isinstance(prec, Sequence) or len(prec) < 4 or ratio is None \
                or any(_finite(p) is None for p in prec[:4]):
            return None, NOT_RUN, f"no BLEU breakdown for {ROW_SHORT[row]} (SN)"
        return {"precisions": [float(p) for p in prec[:4]], "ratio": ratio}, "", ""


_BreakdownGot = tuple[dict[str, Any] | None, str, str]


class _Paper:
    """The paper's numbers with the same interface (no std; no dev score for Tables 2-4)."""

    def side(self, key: tuple[str, ...], split: str = "test") -> _Got:
        name = _key_name(key)
        if key[0] == "ss":
            return _Side(name, PAPER_TABLE3_1_MT[key[1]][split]), "", ""
        if split != "test":
            return None, NOT_RUN, f"the paper has no {split} score for {name}"
        if key[0] == "tag":
            return _Side(name, _PAPER_TAGGING[key[2]][key[1]][key[3]]), "", ""
        return _Side(name, PAPER_TABLE4[key[1]][key[2]]), "", ""

    def log_z(self, key: tuple[str, ...]) -> tuple[dict[str, dict[str, float]] | None, str]:
        return PAPER_TABLE1["CCG" if key[0] == "tag" else "MT"], ""

    def breakdown(self, row: str) -> _BreakdownGot:
        return PAPER_TABLE5[row], "", ""


_Source = _Ours | _Paper
_Result = tuple[str, str]                # (verdict, text)


def _need(src: _Source, keys: Sequence[tuple[str, ...]]) -> tuple[list[_Side], _Result | None]:
    """The sides of ``keys``, or (not run / did not train, why) when any is unusable."""
    got = [src.side(k) for k in keys]
    bad = [g for g in got if g[0] is None]
    if bad:
        return [], (_missing([g[1] for g in bad]), "; ".join(g[2] for g in bad))
    return [g[0] for g in got], None


def _best(src: _Source, keys: Sequence[tuple[str, ...]]) -> tuple[_Side | None, str, str]:
    """The usable key with the best dev score (the best test score when any lacks a dev score): its test side."""
    usable, missing = [], []
    for k in keys:
        side, verdict, why = src.side(k)
        if side is None:
            missing.append((verdict, why))
            continue
        dev = src.side(k, "dev")[0]
        usable.append((dev.score if dev is not None else None, side))
    if not usable:
        return None, _missing([m[0] for m in missing]), "; ".join(m[1] for m in missing)
    by_dev = all(d is not None for d, _ in usable)
    best = max(usable, key=lambda x: x[0] if by_dev else x[1].score)[1]
    return best, "", "by dev" if by_dev else "by test"


def _claim1(src: _Source) -> _Result:
    sides, bad = _need(src, [("tag", "blstm", "regular", "pretrain_greedy"),
                             ("tag", "lstm", "regular", "pretrain_greedy")])
    if bad:
        return bad
    bi, uni = sides
    gap = bi.score - uni.score
    verdict, note = _judge(gap - LABEL_BIAS_MIN_GAP, sides, strict=False)
    return verdict, (f"{uni} vs {bi}: gap {gap:+.2f} (“≪”: ≥ {LABEL_BIAS_MIN_GAP:.2f} points){note}")


def _gap_fraction(src: _Source, init: str) -> str:
    best, _, _ = _best(src, [("tag", "lstm", init, r) for r in ("local", "global")])
    uni = src.side(("tag", "lstm", init, "pretrain_greedy"))[0]
    bi = src.side(("tag", "blstm", init, "pretrain_greedy"))[0]
    if best is None or uni is None or bi is None or bi.score <= uni.score:
        return f"{INIT_SHORT[init]} –"
    return f"{INIT_SHORT[init]} {best.name.split()[1]} {100 * (best.score - uni.score) / (bi.score - uni.score):.0f}%"


def _claim2(src: _Source) -> _Result:
    sides, bad = _need(src, [("tag", "lstm", "regular", "pretrain_greedy"),
                             ("tag", "blstm", "regular", "pretrain_greedy")])
    if bad:
        return bad
    uni, bi = sides
    best, verdict, why = _best(src, [("tag", "lstm", i, r) for i in INITS for r in ("local", "global")])
    if best is None:
        return verdict, f"no usable unidirectional search-aware row ({why})"
    gap = bi.score - uni.score
    closed = best.score - uni.score
    threshold = uni.score + GAP_CLOSED_MIN * gap
    verdict, note = _judge(best.score - threshold, [best, uni, bi], strict=False)
    frac = f"{100 * closed / gap:.0f}%" if gap > 0 else "n/a (no gap)"
    per_init = ", ".join(_gap_fraction(src, i) for i in INITS)
    return verdict, (f"best uni search-aware ({why}): {best}; {uni} → {bi}: gap {gap:+.2f}, closed {closed:+.2f} "
                     f"= {frac} (needs ≥ {100 * GAP_CLOSED_MIN:.0f}%: ≥ {threshold:.2f}){note}; "
                     f"per init against its own initialiser's gap: {per_init}")


def _claim3(src: _Source) -> _Result:
    sides, bad = _need(src, [("tag", "lstm", i, r) for i in ("self_normalised", "regular")
                             for r in ("global", "local")])
    if bad:
        return bad
    g_sn, l_sn, g_reg, l_reg = sides
    d_sn, d_reg = g_sn.score - l_sn.score, g_reg.score - l_reg.score
    v1, t1 = _compare(g_sn, l_sn)
    v2, n2 = _judge(d_sn - d_reg, sides)
    return _combine([v1, v2]), (f"{t1}; global − local: SN {d_sn:+.2f} {_rel(d_sn, d_reg)} regular {d_reg:+.2f} "
                                f"({g_reg.score:.2f} vs {l_reg.score:.2f}){n2}")


def _pairs(src: _Source, pairs: Sequence[tuple[tuple[str, ...], tuple[str, ...]]], strict: bool = True) -> _Result:
    """Every a > b among the pairs that can be tested; the untested ones are listed."""
    verdicts, texts, missing = [], [], []
    for a, b in pairs:
        sides, bad = _need(src, [a, b])
        if bad:
            missing.append(bad)
            continue
        v, t = _compare(*sides, strict=strict)
        verdicts.append(v)
        texts.append(t)
    if not verdicts:
        return _missing([m[0] for m in missing]), "; ".join(m[1] for m in missing)
    held = sum(v == HOLDS for v in verdicts)
    text = "; ".join(texts) + f" — holds for {held}/{len(verdicts)}"
    return _combine(verdicts), text + (f"; untested: {'; '.join(m[1] for m in missing)}" if missing else "")


def _claim4_tag(src: _Source) -> _Result:
    return _pairs(src, [(("tag", e, i, "local"), ("tag", e, i, "pretrain_beam")) for e in ENCODERS for i in INITS])


def _claim4_mt(src: _Source) -> _Result:
    return _pairs(src, [(("mt", i, "local"), ("mt", i, "pretrain_beam")) for i in INITS])


def _claim_all(src: _Source, pairs: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]) -> _Result:
    """Every a > b must hold (all sides required)."""
    sides, bad = _need(src, [k for p in pairs for k in p])
    if bad:
        return bad
    results = [_compare(sides[2 * i], sides[2 * i + 1]) for i in range(len(pairs))]
    return _combine([r[0] for r in results]), "; ".join(r[1] for r in results)


def _claim5(src: _Source) -> _Result:
    g = ("mt", "regular", "global")
    return _claim_all(src, [(("mt", "regular", "local"), g), (("mt", "regular", "pretrain_beam"), g)])


def _claim6(src: _Source) -> _Result:
    g = ("mt", "self_normalised", "global")
    return _claim_all(src, [(g, ("mt", "self_normalised", "local")), (g, ("mt", "self_normalised", "pretrain_beam"))])


def _claim7(src: _Source, key: tuple[str, ...]) -> _Result:
    lz, why = src.log_z(key)
    if lz is None:
        return (DID_NOT_TRAIN if why.endswith("did not train") else NOT_RUN), why
    ce, sn = lz["regular"], lz["self_normalised"]
    fails, parts = [], []
    for split in ("train", "dev"):
        m_ce, m_sn = ce[f"{split}_mean"], sn[f"{split}_mean"]
        v_ce, v_sn = ce[f"{split}_var"], sn[f"{split}_var"]
        parts.append(f"{split} mean {m_ce:.2f} → {m_sn:.2f}, var {v_ce:.2f} → {v_sn:.2f}")
        if not abs(m_sn) <= LOGZ_FAR_BELOW * abs(m_ce):
            fails.append(f"{split} |mean| not ≤ {LOGZ_FAR_BELOW:g} × CE's")
        if not v_sn < v_ce:
            fails.append(f"{split} variance not lower")
    drop = ce["score"] - sn["score"]
    allowed = min(COST_MAX_POINTS, COST_MAX_RELATIVE * ce["score"])
    parts.append(f"score {ce['score']:.2f} → {sn['score']:.2f} (cost {drop:+.2f}, small: ≤ {allowed:.2f})")
    if drop > allowed:
        fails.append("cost not small")
    text = "log Z " + "; ".join(parts) + (f" — fails: {', '.join(fails)}" if fails else "")
    return (DOES_NOT_HOLD if fails else HOLDS), text


def _claim8(src: _Source) -> _Result:
    got = {r: src.breakdown(r) for r in ("global", "local")}
    bad = [g for g in got.values() if g[0] is None]
    if bad:
        return _missing([g[1] for g in bad]), "; ".join(g[2] for g in bad)
    g, loc = got["global"][0], got["local"][0]
    checks = [("length ratio", g["ratio"], loc["ratio"], 3),
              ("3-gram prec.", g["precisions"][2], loc["precisions"][2], 2),
              ("4-gram prec.", g["precisions"][3], loc["precisions"][3], 2)]
    verdicts = [HOLDS if a > b else DOES_NOT_HOLD for _, a, b, _ in checks]
    text = "; ".join(f"{n}: global {_fmt(a, nd)} {_rel(a, b)} local {_fmt(b, nd)}" for n, a, b, nd in checks)
    return _combine(verdicts), text + " (dev, SN init; no std recorded)"


def _claim9(src: _Source) -> _Result:
    dss, v1, w1 = _best(src, [("ss", v) for v in SS_VARIANTS[3:]])
    ss, v2, w2 = _best(src, [("ss", v) for v in SS_VARIANTS[1:3]])
    ce, v3, w3 = src.side(("ss", "ce"))
    if dss is None or ss is None or ce is None:
        bad = [(v, f"{what}: {w}") for s, v, w, what in ((dss, v1, w1, "no usable α-soft variant"),
                                                         (ss, v2, w2, "no usable Bengio variant"),
                                                         (ce, v3, w3, "no CE baseline")) if s is None]
        return _missing([b[0] for b in bad]), "; ".join(b[1] for b in bad)
    r1, r2 = _compare(dss, ce, strict=False), _compare(dss, ss, strict=False)
    return _combine([r1[0], r2[0]]), f"{r1[1]}; {r2[1]} (test; best of each family {w1})"


_CLAIMS: list[tuple[str, str, Callable[[_Source], _Result]]] = [
    ("(1) label bias from partial input: unidirectional CE ≪ bidirectional CE (pretrain-greedy, regular init)",
     "tag", _claim1),
    (f"(2) search-aware training closes ≥ {100 * GAP_CLOSED_MIN:.0f}% of the uni→bi gap (best uni local/global, "
     "either init, vs pretrain-greedy, regular init)", "tag", _claim2),
    ("(3) global beats local only under self-normalised init (unidirectional): global − local (SN) > 0 and > "
     "global − local (regular)", "tag", _claim3),
    ("(4) search-aware locally normalised training beats its initialiser's beam decoding (every encoder / init)",
     "tag", _claim4_tag),
    ("(4) search-aware locally normalised training beats its initialiser's beam decoding (every init)", "mt",
     _claim4_mt),
    ("(5) MT, regular init: global is hurt: global < local and < pretrain-beam", "mt", _claim5),
    ("(6) MT, self-normalised init: global is best: global > local and > pretrain-beam", "mt", _claim6),
    ("(7) self-normalisation drives log Z toward 0 (|mean| far below CE's, lower variance) at a small cost in "
     "score", "tag:lstm", lambda s: _claim7(s, ("tag", "lstm"))),
    ("(7) self-normalisation drives log Z toward 0 (|mean| far below CE's, lower variance) at a small cost in "
     "score", "tag:blstm", lambda s: _claim7(s, ("tag", "blstm"))),
    ("(7) self-normalisation drives log Z toward 0 (|mean| far below CE's, lower variance) at a small cost in "
     "score", "mt", lambda s: _claim7(s, ("mt",))),
    ("(8) MT, SN init: global gives longer outputs (length ratio) and better 3-/4-gram precision than local",
     "mt", _claim8),
    ("(9) thesis Table 3.1 MT: α-soft scheduled sampling (best of four) ≥ Baseline CE and ≥ Bengio et al. "
     "(best of two)", "mt", _claim9),
]


def findings(metrics: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per claim (claims 4 and 7 once per task / encoder), verdict computed from our test scores:
    "holds", "does not hold", "inconclusive (within noise)", "not run" or "did not train".

    1. uni pretrain-greedy (regular) ≪ bi pretrain-greedy (regular): the gap is ≥ ``LABEL_BIAS_MIN_GAP`` points.
    2. the best unidirectional search-aware row (local / global, either init; chosen by dev) − uni
       pretrain-greedy (regular) ≥ ``GAP_CLOSED_MIN`` × (bi − uni pretrain-greedy, regular); ``ours`` also
       gives the fraction each init closes of its own initialiser's gap (the paper's 46% / 68%).
    3. unidirectional, global − local > 0 under SN init and > global − local under regular init.
    4. local > pretrain-beam for every encoder × init (tagging) / every init (MT) that ran.
    5. MT regular init: global < local and global < pretrain-beam.
    6. MT SN init: global > local and global > pretrain-beam.
    7. per tagging encoder and MT: |mean log Z| of the L2 model ≤ ``LOGZ_FAR_BELOW`` × CE's on train and dev,
       its variance lower on both, and its (dev) score at most min(``COST_MAX_POINTS``,
       ``COST_MAX_RELATIVE`` × CE's) below CE's.
    8. MT SN init, dev: length ratio, 3-gram and 4-gram precision all higher for global than for local.
    9. thesis Table 3.1 MT: the best α-soft variant (by dev) ≥ CE and ≥ the best Bengio variant (by dev), on test.

    Noise: with seeds > 1 a side has a std; when the margin of a comparison is within the pooled std of the
    runs involved (root mean square of their stds), that comparison is "inconclusive (within noise)". A claim
    of several comparisons fails when one clearly fails, else is inconclusive when one is. A row that is
    missing is "not run", one marked failed "did not train". ``paper`` gives the same test on the paper's
    numbers (and says when they do not pass it)."""
    ours, paper = _Ours(metrics), _Paper()
    tag_task = _tag_task(metrics)
    rows = []
    for claim, where, fn in _CLAIMS:
        task = MT_TASK if where == "mt" else tag_task
        if where.startswith("tag:"):
            task += f" ({ENCODER_LABEL[where[4:]]})"
        pv, pt = fn(paper)
        ptask = "MT (IWSLT'14 De→En)" if where == "mt" else "CCG"
        if fn is _claim9:
            ptask = "thesis MT"
        paper_text = f"{ptask}: {pt}" + ("" if pv == HOLDS else f" ({pv} in the paper)")
        ov, ot = fn(ours)
        rows.append({"claim": claim, "task": task, "paper": paper_text, "ours": ot, "verdict": ov})
    return rows


def findings_table(rows: Sequence[Mapping[str, str]]) -> str:
    """The findings as a Markdown table: claim, task, the paper's evidence, ours, verdict."""
    if not rows:
        return "_No findings._\n"
    return _md_table(["claim", "task", "paper", "ours", "verdict"],
                     [[r["claim"], r["task"], r["paper"], r["ours"], f"**{r['verdict']}**"] for r in rows])


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


def readme(metrics: Mapping[str, Any]) -> str:
    """The report's Markdown."""
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
          "## Findings", "",
          "Each claim of the paper, tested by code on our test scores (`components/reports/goyal_2019.findings`); "
          "the paper column runs the same test on the paper's numbers. A comparison whose margin is within the "
          "pooled std over seeds of the runs involved is *inconclusive (within noise)*; a claim of several "
          f"comparisons needs all of them. Thresholds: “≪” = a gap of ≥ {LABEL_BIAS_MIN_GAP:g} points; "
          f"log Z “far below” = |mean| ≤ {LOGZ_FAR_BELOW:g} × CE's; a “small cost” = at most "
          f"min({COST_MAX_POINTS:g} points, "
          f"{100 * COST_MAX_RELATIVE:g}% of CE's score).", "",
          findings_table(findings(metrics)),
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
             f"attention) for small data (Sennrich & Zhang 2019): {t.get('settings', '–')}. It stopped early on dev "
             f"BLEU at epoch {t.get('best_epoch', '–')} of {t.get('epochs', '–')} on {t.get('n_train', '–')} training "
             f"verses; a translator under {t.get('min_bleu', '–')} dev BLEU fails its stage. Every translation row "
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


def write_report(metrics: Mapping[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write README.md, tables_2_3.png, table_6.png and translator_curve.png into ``out_dir``, each
    atomically (a temporary file in the same folder, then ``os.replace``). Returns file name -> path."""
    out = Path(out_dir)
    text = readme(metrics)          # validates the input before anything is written
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
