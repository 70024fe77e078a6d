"""Tables 1, 3, 4 and 6 and Figure 2 of Tu & Gimpel (2019), ours beside the paper's numbers, and a
findings table whose verdicts are computed from our metrics.

Input: the ``approx`` stage's metrics (task -> flat keys such as ``blstm_crf.cnn.infnet``).
Our tasks stand in for the paper's: ``pos`` (WSJ sample) for Twitter POS, ``ner`` (WNUT-16) for
CoNLL-2003 NER, ``greek_morph`` (SBLGNT morphology, ~1,000 labels) for CCG supertagging (400
labels). The corpora differ, so the comparison is of *patterns* (which method wins, how GD improves
with N, speed ratios), not of absolute numbers; energies are not comparable across corpora.

Gradient descent (GD) is reported three ways. The paper's protocol picks the iteration count N and
the learning rate per test sentence by that sentence's accuracy or F1 (an oracle that reads the test
labels: a bound, not a decoder); beside it stand two honest selections that a user could run: one
(N, lr) tuned on dev for every test sentence, and per sentence the (N, lr) of lowest energy (no
labels at all).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from components.reports.curves import annotate_apart, legend_below  # noqa: E402
from components.reports.findings import (NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, Side, combine,  # noqa: E402
                                         compare, counts, finite, relate, row, table)

PAPER_TASK = {"pos": "Twitter POS", "ner": "NER", "greek_morph": "CCG"}
ARCHS = ("cnn", "blstm", "seq2seq")

# Table 1 (BLSTM-CRF): task -> row -> arch (or the single value)
TABLE1 = {
    "Twitter POS": {"local": (89.6, 88.0, 88.9), "infnet": (89.9, 89.5, 89.7), "gd": 89.1, "viterbi": 89.2},
    "NER": {"local": (79.9, 85.0, 85.3), "infnet": (82.2, 85.4, 86.1), "gd": 84.4, "viterbi": 87.2},
    "CCG": {"local": (90.6, 92.2, 92.7), "infnet": (91.3, 92.8, 92.9), "gd": 89.0, "viterbi": 92.4},
}
# Table 3: examples/sec (GPU, batch size 10)
TABLE3 = {"Twitter POS": {"cnn": 12500, "blstm": 1250, "seq2seq": 357, "viterbi": 500, "gd": 20},
          "NER": {"cnn": 10000, "blstm": 1000, "seq2seq": 294, "viterbi": 360, "gd": 23},
          "CCG": {"cnn": 6666, "blstm": 1923, "seq2seq": 1000, "viterbi": 232, "gd": 16}}
# label-set sizes of the paper's tasks (Sec. 6.1: "for CCG, which has L = 400")
PAPER_LABELS = {"CCG": 400}
# Table 4 (BLSTM-CRF+)
TABLE4 = {"Twitter POS": {"local": 91.3, "infnet": 91.3, "gd": 90.8, "viterbi": 90.9},
          "NER": {"local": 90.5, "infnet": 90.8, "gd": 89.8, "viterbi": 91.6},
          "CCG": {"local": 94.1, "infnet": 94.2, "gd": 90.4, "viterbi": 94.3}}
TABLE4_ARCH = {"Twitter POS": "cnn", "NER": "seq2seq", "CCG": "blstm"}
# Table 6 (BLSTM-CRF+): row -> task -> (metric, energy)
_T6 = """gold|100,-159.65|100,-230.63|100,-480.07
viterbi|90.9,-163.20|91.6,-231.53|94.3,-483.09
gd 10|89.2,-161.69|81.9,-227.92|65.1,-412.81
gd 20|90.8,-163.06|89.1,-231.17|74.6,-414.81
gd 30|90.8,-163.02|89.6,-231.30|83.0,-447.64
gd 40|90.7,-163.03|89.8,-231.34|88.6,-471.52
gd 50|90.8,-163.04|89.8,-231.35|90.0,-476.56
gd 100|||90.1,-476.98
gd 500|||90.1,-476.99
gd 1000|||90.1,-476.99
infnet|91.3,-162.07|90.8,-231.19|94.2,-481.32
infnet discretized|91.3,-160.87|90.8,-231.34|94.2,-481.95
tailored 3|91.0,-162.59|91.3,-231.32|94.3,-481.91
tailored 5|90.9,-162.81|91.2,-231.37|94.3,-482.23
tailored 10|91.3,-162.85|91.5,-231.39|94.3,-482.56
warm start 3|91.4,-163.06|91.4,-231.42|94.4,-482.62
warm start 5|91.2,-163.12|91.4,-231.45|94.4,-482.64
warm start 10|91.2,-163.15|91.5,-231.46|94.4,-482.78"""
TABLE6: dict[str, dict[str, tuple[float, float] | None]] = {}
for _line in _T6.splitlines():
    _row, *_cells = _line.split("|")
    TABLE6[_row] = {t: (tuple(float(v) for v in c.split(",")) if c else None)
                    for t, c in zip(("Twitter POS", "NER", "CCG"), _cells)}
# Sec. 6.2 (Twitter POS, BLSTM infnet, BLSTM-CRF energy): method -> (rho words, rho labels)
SPEARMAN = {"infnet": (0.282, 0.195), "gd": (0.122, 0.064)}


# Table 6's tuned rows -> the INFERENCE method whose metrics fill them (approx.tuned)
TUNED_ROWS = {"tailored": "tailored_infnet", "warm start": "gd_warm_start"}

# the three GD selections: metrics key suffix / entry -> row label
GD_ORACLE = "GD, oracle (N, lr) per sentence from test labels — the paper's protocol"
GD_DEV = "GD, dev-tuned (N, lr)"
GD_MIN = "GD, lowest energy per sentence (no labels)"

# markers of inference networks that did not minimise the energy (see :func:`infnet_flags`)
WARN, FAIL = "⚠", "✗"
MARK_NOTE = ("⚠ energy above its local baseline: the network did not minimise E (test mean energy of its "
             "discretised outputs above that of the local baseline of the same architecture). "
             "✗ did not learn: its score is 0.")
# largest rise of GD's mean energy between consecutive N still counted as "not rising" (float noise)
RISE_TOL = 1e-6


def _f(v: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "–"


def _entry(m: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``m[key]`` when it is a dict, else ``{}`` (absent in older metrics)."""
    v = m.get(key)
    return v if isinstance(v, dict) else {}


def _score(m: Mapping[str, Any], key: str) -> float | None:
    v = m.get(key)
    return v.get("score") if isinstance(v, dict) else None


def per_n(d: Mapping[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """The numeric keys of a per-N (or per-step, per-std) dict as ``(value, entry)``, sorted by value;
    the summary keys (``"oracle"``, ``"all"``) and non-dict entries are left out."""
    out = []
    for k, v in d.items():
        try:
            n = float(k)
        except (TypeError, ValueError):
            continue
        if isinstance(v, dict):
            out.append((n, v))
    return sorted(out, key=lambda t: t[0])


def gd_selections(m: Mapping[str, Any], energy: str) -> list[tuple[str, dict[str, Any]]]:
    """The three GD selections on ``energy`` as ``(row label, entry)`` (entry ``{}`` when not run):
    the paper's oracle, dev-tuned, lowest energy per sentence."""
    return [(GD_ORACLE, _entry(_entry(m, f"{energy}.gd_oracle"), "oracle")),
            (GD_DEV, _entry(m, f"{energy}.gd_dev_tuned")),
            (GD_MIN, _entry(_entry(m, f"{energy}.gd_min_energy"), "all"))]


def _nlr(r: Mapping[str, Any]) -> str:
    """" (N=20, lr=0.5)" for a dev-tuned entry, "" when it has no (N, lr)."""
    n, lr = finite(r.get("N")), finite(r.get("lr"))
    return f" (N={n:g}, lr={lr:g})" if n is not None and lr is not None else ""


def infnet_flags(m: Mapping[str, Any], energy: str, arch: str) -> tuple[str, ...]:
    """Markers of the inference network ``{energy}.{arch}.infnet``: :data:`FAIL` when its score is 0,
    :data:`WARN` when its test mean energy ``energy_pred`` is above that of its local baseline
    ``{energy}.{arch}.local`` (the network did not minimise the energy it was trained on)."""
    inf, loc = _entry(m, f"{energy}.{arch}.infnet"), _entry(m, f"{energy}.{arch}.local")
    flags = []
    if finite(inf.get("score")) == 0.0:
        flags.append(FAIL)
    e_inf, e_loc = finite(inf.get("energy_pred")), finite(loc.get("energy_pred"))
    if e_inf is not None and e_loc is not None and e_inf > e_loc:
        flags.append(WARN)
    return tuple(flags)


def _marked(text: str, flags: Sequence[str]) -> str:
    return text + (f" {FAIL} did not learn" if FAIL in flags else "") + (f" {WARN}" if WARN in flags else "")


def _with_marks_note(md: str) -> str:
    """``md`` with :data:`MARK_NOTE` below it when a cell carries a marker."""
    return md + (f"\n{MARK_NOTE}\n" if WARN in md or FAIL in md else "")


def table1(results: dict[str, dict[str, Any]], energy: str = "blstm_crf") -> str:
    lines = ["| task (paper's) | row | " + " | ".join(f"{a} ours | {a} paper" for a in ARCHS) + " |",
             "|---|---|" + "---|---|" * len(ARCHS)]
    for task, m in results.items():
        paper = TABLE1.get(PAPER_TASK.get(task, ""), {})
        for row_ in ("local", "infnet"):
            cells = []
            for i, a in enumerate(ARCHS):
                ours = _f(_score(m, f"{energy}.{a}.{row_}"))
                if row_ == "infnet":
                    ours = _marked(ours, infnet_flags(m, energy, a))
                cells.append(f"{ours} | {_f(paper.get(row_, (None,) * 3)[i])}")
            lines.append(f"| {task} ({PAPER_TASK.get(task, '?')}) | {row_} | " + " | ".join(cells) + " |")
        for label, r in gd_selections(m, energy):
            p = paper.get("gd") if label == GD_ORACLE else None
            lines.append(f"| {task} | {label} | {_f(r.get('score'))}{_nlr(r)} | {_f(p)} | | | | |")
        lines.append(f"| {task} | Viterbi | {_f(_score(m, f'{energy}.viterbi'))} | {_f(paper.get('viterbi'))} | | | | |")
    return _with_marks_note("\n".join(lines) + "\n")


def table3(results: dict[str, dict[str, Any]]) -> str:
    cols = ARCHS + ("viterbi", "gd")
    lines = ["| task | batch | " + " | ".join(f"{c} ours | {c} paper" for c in cols) + " |",
             "|---|---|" + "---|---|" * len(cols)]
    for task, m in results.items():
        sp, paper = m.get("speed", {}), TABLE3.get(PAPER_TASK.get(task, ""), {})
        for which in ("bs10", "fastest"):
            cells = [f"{_f(sp.get(c, {}).get(which), '{:.0f}')} | {_f(paper.get(c) if which == 'bs10' else None, '{:.0f}')}"
                     for c in cols]
            lines.append(f"| {task} | {'10' if which == 'bs10' else 'fastest'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table4(results: dict[str, dict[str, Any]], arch: dict[str, str], energy: str = "blstm_crf_plus") -> str:
    """Table 4 in the paper's layout: one row per method, ours beside the paper's per task."""
    tasks = list(results)
    lines = ["| row | " + " | ".join(f"{t} ours | {PAPER_TASK.get(t, '?')} paper" for t in tasks) + " |",
             "|---|" + "---|---|" * len(tasks)]
    cells: dict[str, list[str]] = {k: [] for k in ("arch", "local", "infnet+", GD_ORACLE, GD_DEV, GD_MIN, "Viterbi")}
    for t, m in results.items():
        a = arch.get(t, "blstm")
        p = TABLE4.get(PAPER_TASK.get(t, ""), {})
        cells["arch"].append(f"{a} | {TABLE4_ARCH.get(PAPER_TASK.get(t, ''), '–')}")
        cells["local"].append(f"{_f(_score(m, f'{energy}.{a}.local'))} | {_f(p.get('local'))}")
        cells["infnet+"].append(f"{_marked(_f(_score(m, f'{energy}.{a}.infnet')), infnet_flags(m, energy, a))} | "
                                f"{_f(p.get('infnet'))}")
        for label, r in gd_selections(m, energy):
            cells[label].append(f"{_f(r.get('score'))}{_nlr(r)} | {_f(p.get('gd') if label == GD_ORACLE else None)}")
        cells["Viterbi"].append(f"{_f(_score(m, f'{energy}.viterbi'))} | {_f(p.get('viterbi'))}")
    lines += [f"| {k} | " + " | ".join(v) + " |" for k, v in cells.items()]
    return _with_marks_note("\n".join(lines) + "\n")


def table6_rows(m: dict[str, Any], arch: str, energy: str = "blstm_crf_plus") -> dict[str, tuple[float, float] | None]:
    """Our (metric, mean energy) per Table 6 row. GD rows: ``gd N`` (oracle lr per sentence, the paper's
    protocol), ``gd N min energy`` (lowest-energy lr per sentence), ``gd oracle N`` / ``gd min energy``
    ((N, lr) per sentence), ``gd dev-tuned`` (one (N, lr) from dev)."""
    rows: dict[str, tuple[float, float] | None] = {}
    vit = m.get(f"{energy}.viterbi", {})
    rows["gold"] = (100.0, vit.get("energy_gold")) if vit else None
    rows["viterbi"] = (vit.get("score"), vit.get("energy_pred")) if vit else None
    for n, r in m.get(f"{energy}.gd_oracle", {}).items():
        label = "gd oracle N" if n == "oracle" else f"gd {int(float(n))}"
        rows[label] = (r["score"], r["energy"])
    mine = _entry(m, f"{energy}.gd_min_energy")
    for n, r in per_n(mine):
        rows[f"gd {int(n)} min energy"] = (r.get("score"), r.get("energy"))
    if _entry(mine, "all"):
        rows["gd min energy"] = (mine["all"].get("score"), mine["all"].get("energy"))
    dev = _entry(m, f"{energy}.gd_dev_tuned")
    if dev:
        rows["gd dev-tuned"] = (dev.get("score"), dev.get("energy"))
    inf = m.get(f"{energy}.{arch}.infnet", {})
    if inf:
        rows["infnet"] = (inf["score"], inf.get("energy_relaxed"))
        rows["infnet discretized"] = (inf["score"], inf["energy_pred"])
    for kind, key in TUNED_ROWS.items():
        for n, r in m.get(f"{energy}.{key}", {}).items():
            rows[f"{kind} {n}"] = (r["score"], r["energy_pred"])
    return rows


_GD_N = re.compile(r"gd (\d+)( min energy)?")


def _t6_order(keys: set[str]) -> list[str]:
    """Table 6's rows in reading order: gold, Viterbi, GD per N (oracle then lowest-energy lr), the
    whole-grid GD selections, infnet, instance-tailored and warm start by step, then anything else."""
    ns = sorted({int(mt.group(1)) for k in keys if (mt := _GD_N.fullmatch(k))})
    known = ["gold", "viterbi", *[r for n in ns for r in (f"gd {n}", f"gd {n} min energy")],
             "gd oracle N", "gd min energy", "gd dev-tuned", "infnet", "infnet discretized"]
    for kind in TUNED_ROWS:
        steps = [k for k in keys if k.startswith(kind + " ")]
        known += sorted(steps, key=lambda k: (_num(k.rsplit(" ", 1)[1]), k))
    return [k for k in known if k in keys] + sorted(keys - set(known))


def _num(s: str) -> float:
    """``s`` as a number for sorting; non-numbers sort last."""
    try:
        return float(s)
    except ValueError:
        return float("inf")


def _t6_label(key: str) -> str:
    mt = _GD_N.fullmatch(key)
    if mt:
        return f"gd {mt.group(1)}, " + ("lowest-energy lr (no labels)" if mt.group(2) else "oracle lr (paper's protocol)")
    return {"gd oracle N": GD_ORACLE, "gd min energy": GD_MIN, "gd dev-tuned": GD_DEV}.get(key, key)


def table6(results: dict[str, dict[str, Any]], arch: dict[str, str], energy: str = "blstm_crf_plus") -> str:
    tasks = list(results)
    head = "| row | " + " | ".join(f"{t} ours (score, E) | {PAPER_TASK.get(t, '?')} paper (score, E)" for t in tasks) + " |"
    lines = [head, "|---|" + "---|---|" * len(tasks)]
    ours = {t: table6_rows(results[t], arch.get(t, "blstm"), energy) for t in tasks}
    for key in _t6_order(set(TABLE6) | {r for t in tasks for r in ours[t]}):
        cells = []
        for t in tasks:
            o = ours[t].get(key)
            p = TABLE6.get(key, {}).get(PAPER_TASK.get(t, ""))
            mine = _f(o[0]) + ", " + _f(o[1], "{:.2f}") if o else "–"
            if o and key.startswith("infnet"):
                mine = _marked(mine, infnet_flags(results[t], energy, arch.get(t, "blstm")))
            cells.append(f"{mine} | {_f(p[0]) + ', ' + _f(p[1], '{:.2f}') if p else '–'}")
        lines.append(f"| {_t6_label(key)} | " + " | ".join(cells) + " |")
    notes = ["", "GD rows: *oracle lr* picks the learning rate per test sentence by its accuracy / F1 (the paper's "
             "protocol, which reads the test labels); *lowest-energy lr* picks it by the lowest energy (no labels)."]
    dev = [f"{t}{_nlr(_entry(results[t], f'{energy}.gd_dev_tuned'))}" for t in tasks
           if _nlr(_entry(results[t], f"{energy}.gd_dev_tuned"))]
    if dev:
        notes.append(f"Dev-tuned (N, lr): {'; '.join(dev)}.")
    return _with_marks_note("\n".join(lines + notes) + "\n")


def init_std_table(results: dict[str, dict[str, Any]], energy: str = "blstm_crf_plus") -> str:
    """GD's grid repeated at other initialisation scales ``z_0 ~ N(0, std^2)`` (``{energy}.gd_init_std``):
    per task and std, the oracle / lowest-energy / dev-tuned selections' score and mean energy."""
    lines = ["| task | init std | oracle score | oracle E | lowest-energy score | lowest-energy E | dev-tuned score | "
             "dev-tuned E | dev-tuned (N, lr) |", "|---|---|---|---|---|---|---|---|---|"]
    for t, m in results.items():
        for std, d in per_n(_entry(m, f"{energy}.gd_init_std")):
            o, mn, dv = _entry(d, "oracle"), _entry(d, "min_energy"), _entry(d, "dev_tuned")
            lines.append(f"| {t} | {std:g} | {_f(o.get('score'))} | {_f(o.get('energy'), '{:.2f}')} | "
                         f"{_f(mn.get('score'))} | {_f(mn.get('energy'), '{:.2f}')} | {_f(dv.get('score'))} | "
                         f"{_f(dv.get('energy'), '{:.2f}')} | {_nlr(dv).strip(' ()') or '–'} |")
    if len(lines) == 2:
        return "Not run (`approx.gd_init_stds` is empty, or the metrics predate it).\n"
    return "\n".join(lines) + "\n"


def figure2(results: dict[str, dict[str, Any]], arch: dict[str, str], energy: str = "blstm_crf_plus") -> Figure:
    """Accuracy / F1 against total inference time on the test set, one panel per task, one series per method
    (named as Tables 4 and 6 name them); GD's points labelled by N where the label has room (oracle lr per
    sentence, and lowest-energy lr when run); tailored / warm start ordered by their step count.
    GD's time at N iterations is N/20 times its measured time at 20 iterations (at the fastest batch size).
    Every point is one run (the metrics hold no seeds), so no spread is drawn; the paper's Figure 2 is a plot
    of GPU times on other corpora and is left out (its numbers are in Tables 3, 4 and 6)."""
    tasks = list(results)
    fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(5.2 * max(len(tasks), 1), 4.9), dpi=110,
                             squeeze=False)
    labelled: list[tuple[Any, list[tuple[float, float, str]]]] = []
    for ax, t in zip(axes[0], tasks):
        m = results[t]
        n = m.get("n_test", 1)
        a = arch.get(t, "blstm")
        vit = m.get(f"{energy}.viterbi", {})
        if vit:
            ax.plot([vit["decode_seconds"]], [vit["score"]], "k*", ms=12, label="Viterbi")
        gd_speed = m.get("speed", {}).get("gd", {}).get("fastest")
        points: list[tuple[float, float, str]] = []
        for key, style, color, name in (("gd_oracle", "o-", "tab:blue", "GD, oracle lr (paper's protocol)"),
                                        ("gd_min_energy", "o--", "tab:orange", "GD, lowest-energy lr (no labels)")):
            gd = per_n(_entry(m, f"{energy}.{key}"))
            if gd_speed and gd:
                xs = [k / 20 * n / gd_speed for k, _ in gd]
                ys = [v.get("score") for _, v in gd]
                ax.plot(xs, ys, style, color=color, ms=4, label=name)
                if key == "gd_oracle":
                    points = [(x, y, f"N={int(k)}") for x, y, (k, _) in zip(xs, ys, gd) if y is not None]
        inf = m.get(f"{energy}.{a}.infnet")
        if inf:
            ax.plot([inf["decode_seconds"]], [inf["score"]], "s", color="tab:green", label=f"infnet+ ({a})")
        for (kind, key), marker, color in zip(TUNED_ROWS.items(), ("^-", "v-"), ("tab:red", "tab:purple")):
            rows = per_n(_entry(m, f"{energy}.{key}"))
            if rows:
                steps = ", ".join(f"{k:g}" for k, _ in rows)
                ax.plot([r["decode_seconds"] for _, r in rows], [r["score"] for _, r in rows], marker, color=color,
                        ms=5, label=f"{kind} ({steps} steps)")
        ax.set_xscale("log")
        ax.set_xlabel("total inference time on test (s, log)")
        ax.set_ylabel("F1" if m.get("metric") == "span_f1" else "accuracy")
        ax.set_title(f"{t} (paper: {PAPER_TASK.get(t, '?')})", fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            legend_below(ax, ncol=2, fontsize=7)
        labelled.append((ax, points))
    if not tasks:
        axes[0][0].text(0.5, 0.5, "no approx results", ha="center", va="center", transform=axes[0][0].transAxes)
    fig.suptitle(f"Figure 2 analog: score against total test inference time ({energy}; one run per point)",
                 fontsize=10)
    fig.tight_layout()
    for ax, points in labelled:              # after the layout: the labels must not move off their points
        annotate_apart(ax, points)
    return fig


def spearman_table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| task | method | rho (word ppl) ours | paper | rho (label ppl) ours | paper |", "|---|---|---|---|---|---|"]
    for t, m in results.items():
        sp = m.get("spearman", {})
        for meth in ("infnet", "gd"):
            p = SPEARMAN[meth] if t == "pos" else (None, None)
            lines.append(f"| {t} | {meth} | {_f(sp.get(f'{meth}.words'), '{:.3f}')} | {_f(p[0], '{:.3f}')} | "
                         f"{_f(sp.get(f'{meth}.labels'), '{:.3f}')} | {_f(p[1], '{:.3f}')} |")
    return "\n".join(lines) + "\n"


def methods_table(results: dict[str, dict[str, Any]], methods: Any, energies: tuple[str, ...]) -> str:
    """The methods of ``approx.methods`` (one config each; no counterpart in the paper) beside
    Viterbi: score, mean energy of the outputs, mean search error E(y) - E(y_viterbi)."""
    lines = ["| task | energy | method | score | mean energy | search error |", "|---|---|---|---|---|---|"]
    for t, m in results.items():
        for e in energies:
            for meth in ("viterbi", *methods):
                r = m.get(f"{e}.{meth}")
                if r:
                    lines.append(f"| {t} | {e} | {meth} | {_f(r.get('score'))} | {_f(r.get('energy_pred'), '{:.2f}')} | "
                                 f"{_f(r.get('search_error', 0.0 if meth == 'viterbi' else None), '{:.3f}')} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# findings: each directional claim of the paper, judged on our metrics (DESIGN.md, convention 11)

CLAIM_INFNET = "inference networks score at least as well as their local baselines (BLSTM-CRF, Table 1)"
CLAIM_INFNET_PLUS = "infnet+ scores at least as well as its local baseline (BLSTM-CRF+, Table 4)"
CLAIM_ORDER = ("energy ordering on BLSTM-CRF+ (Table 6): Viterbi ≤ warm start < instance-tailored < infnet+ "
               "(discretised; largest step of each)")
CLAIM_GD_N = "GD's mean energy falls with N, never rising (label-free lr per sentence, BLSTM-CRF+, Table 6)"
CLAIM_GD_SLOW = "GD is the slowest method (examples/s at batch size 10, Table 3)"
CLAIM_FAST = "inference networks are faster than Viterbi on the largest label set (batch size 10, Sec. 6.1)"
CLAIM_RHO_POS = "Spearman's ρ of search error with LM perplexity is positive, words and labels (Sec. 6.2)"
CLAIM_RHO_AMORT = "ρ is higher for inference networks than for GD, words and labels (Sec. 6.2)"
CLAIM_GD_VIT = "GD with honest (dev-tuned) N, lr does not beat Viterbi (BLSTM-CRF+, Table 4)"

def _scope(task: str) -> str:
    return f"{task} ({PAPER_TASK[task]})" if task in PAPER_TASK else task


NO_PAPER = "no counterpart in the paper"


def _side(name: str, v: Any) -> Side | None:
    x = finite(v)
    return Side(name, x) if x is not None else None


def _plus_archs(m: Mapping[str, Any], task: str, arch: Mapping[str, str] | None, energy: str) -> list[str]:
    """The BLSTM-CRF+ infnet architectures of a task: ``arch[task]`` when given, else those with metrics."""
    if arch and task in arch:
        return [arch[task]]
    return [a for a in ARCHS if _entry(m, f"{energy}.{a}.infnet")]


def _infnet_vs_local(m: Mapping[str, Any], energy: str, a: str, claim: str, scope: str) -> dict[str, str]:
    flags = infnet_flags(m, energy, a)
    mark = "".join(f" {f}" for f in flags)
    return compare(claim, scope, "", _side(f"{a} infnet{mark}", _score(m, f"{energy}.{a}.infnet")),
                   _side(f"{a} local", _score(m, f"{energy}.{a}.local")), ">=",
                   missing=f"{a}: infnet or local not run")


def _claim_infnet(task: str, m: Mapping[str, Any], energy: str) -> dict[str, str]:
    p = TABLE1.get(PAPER_TASK.get(task, ""))
    paper = ("infnet vs local: " + ", ".join(f"{a} {p['infnet'][i]} vs {p['local'][i]}" for i, a in enumerate(ARCHS))
             if p else NO_PAPER)
    return combine(CLAIM_INFNET, _scope(task), paper,
                   [_infnet_vs_local(m, energy, a, CLAIM_INFNET, _scope(task)) for a in ARCHS])


def _claim_infnet_plus(task: str, m: Mapping[str, Any], energy: str, archs: Sequence[str]) -> dict[str, str]:
    p = TABLE4.get(PAPER_TASK.get(task, ""))
    paper = f"infnet+ {p['infnet']} vs local {p['local']}" if p else NO_PAPER
    if not archs:
        return row(CLAIM_INFNET_PLUS, _scope(task), paper, "infnet+ not run", NOT_TESTABLE)
    return combine(CLAIM_INFNET_PLUS, _scope(task), paper,
                   [_infnet_vs_local(m, energy, a, CLAIM_INFNET_PLUS, _scope(task)) for a in archs])


def _last_step(m: Mapping[str, Any], key: str) -> tuple[float, dict[str, Any]] | None:
    steps = per_n(_entry(m, key))
    return steps[-1] if steps else None


def _claim_order(task: str, m: Mapping[str, Any], energy: str, archs: Sequence[str]) -> dict[str, str]:
    pt = PAPER_TASK.get(task, "")
    if pt:
        e = {r: TABLE6[r][pt][1] for r in ("viterbi", "warm start 10", "tailored 10", "infnet discretized")}
        paper = (f"Viterbi {e['viterbi']:.2f} ≤ warm start (10) {e['warm start 10']:.2f} < tailored (10) "
                 f"{e['tailored 10']:.2f} < infnet+ {e['infnet discretized']:.2f}")
    else:
        paper = NO_PAPER
    warm, tail = _last_step(m, f"{energy}.gd_warm_start"), _last_step(m, f"{energy}.tailored_infnet")
    a = archs[0] if archs else None
    chain = [("Viterbi", _entry(m, f"{energy}.viterbi").get("energy_pred")),
             (f"warm start ({warm[0]:g})" if warm else "warm start", warm[1].get("energy_pred") if warm else None),
             (f"tailored ({tail[0]:g})" if tail else "tailored", tail[1].get("energy_pred") if tail else None),
             (f"infnet+ ({a})" if a else "infnet+", _entry(m, f"{energy}.{a}.infnet").get("energy_pred") if a else None)]
    missing = [name for name, v in chain if finite(v) is None]
    if missing:
        return row(CLAIM_ORDER, _scope(task), paper, f"not run: {', '.join(missing)}", NOT_TESTABLE)
    text, ok = f"{chain[0][0]} {finite(chain[0][1]):.2f}", True
    for (_, a_v), (b_name, b_v), relation in zip(chain, chain[1:], ("<=", "<", "<")):
        good, sym = relate(finite(a_v), finite(b_v), relation)
        ok &= good
        text += f" {sym} {b_name} {finite(b_v):.2f}"
    return row(CLAIM_ORDER, _scope(task), paper, text, REPRODUCED if ok else NOT_REPRODUCED)


def _claim_gd_n(task: str, m: Mapping[str, Any], energy: str) -> dict[str, str]:
    pt = PAPER_TASK.get(task, "")
    gd = [(int(k.split()[1]), v[pt][1]) for k, v in TABLE6.items() if _GD_N.fullmatch(k) and pt and v[pt]]
    paper = (f"oracle lr: mean E at N={gd[0][0]} → {gd[-1][0]}: {gd[0][1]:.2f} → {gd[-1][1]:.2f}" if gd
             else NO_PAPER)
    es = [(n, e) for n, r in per_n(_entry(m, f"{energy}.gd_min_energy")) if (e := finite(r.get("energy"))) is not None]
    if len(es) < 2:
        return row(CLAIM_GD_N, _scope(task), paper, "lowest-energy GD per N not run (needs two N or more)", NOT_TESTABLE)
    rises = [(n1, e1 - e0) for (_, e0), (n1, e1) in zip(es, es[1:])]
    n_worst, worst = max(rises, key=lambda t: t[1])
    ok = es[-1][1] < es[0][1] and worst <= RISE_TOL
    text = (f"mean E at N={es[0][0]:g} → {es[-1][0]:g}: {es[0][1]:.3f} → {es[-1][1]:.3f} "
            f"(Δ {es[-1][1] - es[0][1]:+.3f}); largest step-to-step change {worst:+.2e} (at N={n_worst:g}, "
            f"tolerance {RISE_TOL:g})")
    return row(CLAIM_GD_N, _scope(task), paper, text, REPRODUCED if ok else NOT_REPRODUCED)


def _bs10(m: Mapping[str, Any]) -> dict[str, float]:
    sp = m.get("speed")
    sp = sp if isinstance(sp, dict) else {}
    out = {k: finite(v.get("bs10")) for k, v in sp.items() if isinstance(v, dict)}
    return {k: v for k, v in out.items() if v is not None}


def _claim_gd_slow(task: str, m: Mapping[str, Any]) -> dict[str, str]:
    p = TABLE3.get(PAPER_TASK.get(task, ""))
    paper = (f"GD {p['gd']} vs " + ", ".join(f"{k} {v}" for k, v in p.items() if k != "gd") if p else NO_PAPER)
    sp = _bs10(m)
    others = {k: v for k, v in sp.items() if k != "gd"}
    if "gd" not in sp or not others:
        return row(CLAIM_GD_SLOW, _scope(task), paper, "speed of GD or of the other methods not measured", NOT_TESTABLE)
    faster = [k for k, v in others.items() if not sp["gd"] < v]
    text = f"GD {sp['gd']:.0f} vs " + ", ".join(f"{k} {v:.0f}" for k, v in others.items())
    text += f"; GD not slower than {', '.join(faster)}" if faster else ""
    return row(CLAIM_GD_SLOW, _scope(task), paper, text, NOT_REPRODUCED if faster else REPRODUCED)


def _claim_fast(results: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    p = TABLE3["CCG"]
    paper = (f"CCG (L = {PAPER_LABELS['CCG']}): " + ", ".join(f"{a} {p[a]}" for a in ARCHS) + f" vs Viterbi {p['viterbi']}")
    sized = [(finite(m.get("n_labels")), t) for t, m in results.items() if finite(m.get("n_labels")) is not None]
    if not sized:
        return row(CLAIM_FAST, "all tasks", paper, "no task records n_labels", NOT_TESTABLE)
    n_labels, task = max(sized)
    scope = f"{_scope(task)}, L = {n_labels:g}"
    sp = _bs10(results[task])
    archs = [a for a in ARCHS if a in sp]
    if "viterbi" not in sp or not archs:
        return row(CLAIM_FAST, scope, paper, "speed of Viterbi or of the inference networks not measured", NOT_TESTABLE)
    parts = [relate(sp[a], sp["viterbi"], ">") for a in archs]
    text = ", ".join(f"{a} {sp[a]:.0f} {sym} Viterbi {sp['viterbi']:.0f} ({sp[a] / sp['viterbi']:.1f}×)"
                     for a, (_, sym) in zip(archs, parts))
    return row(CLAIM_FAST, scope, paper, text, REPRODUCED if all(ok for ok, _ in parts) else NOT_REPRODUCED)


def _rho_paper(task: str) -> str:
    (iw, il), (gw, gl) = SPEARMAN["infnet"], SPEARMAN["gd"]
    text = f"infnet words {iw}, labels {il}; GD words {gw}, labels {gl}"
    return text if task == "pos" else f"Twitter POS only: {text}"


def _rho(m: Mapping[str, Any]) -> dict[str, float | None]:
    sp = m.get("spearman")
    sp = sp if isinstance(sp, dict) else {}
    return {f"{meth}.{k}": finite(sp.get(f"{meth}.{k}")) for meth in ("infnet", "gd") for k in ("words", "labels")}


def _claim_rho_pos(task: str, m: Mapping[str, Any]) -> dict[str, str]:
    rho = _rho(m)
    have = {k: v for k, v in rho.items() if v is not None}
    if not have:
        return row(CLAIM_RHO_POS, _scope(task), _rho_paper(task), "Spearman's ρ not computed", NOT_TESTABLE)
    text = ", ".join(f"{k} {v:.3f}" for k, v in have.items())
    missing = [k for k, v in rho.items() if v is None]
    text += f" (not computed: {', '.join(missing)})" if missing else ""
    ok = all(v > 0 for v in have.values())
    return row(CLAIM_RHO_POS, _scope(task), _rho_paper(task), text, REPRODUCED if ok else NOT_REPRODUCED)


def _claim_rho_amort(task: str, m: Mapping[str, Any]) -> dict[str, str]:
    rho, parts = _rho(m), []
    for k in ("words", "labels"):
        i, g = rho[f"infnet.{k}"], rho[f"gd.{k}"]
        if i is None or g is None:
            parts.append(row(CLAIM_RHO_AMORT, _scope(task), "", f"{k}: ρ not computed", NOT_TESTABLE))
            continue
        ok, sym = relate(i, g, ">")
        parts.append(row(CLAIM_RHO_AMORT, _scope(task), "", f"{k}: infnet {i:.3f} {sym} GD {g:.3f}",
                         REPRODUCED if ok else NOT_REPRODUCED))
    return combine(CLAIM_RHO_AMORT, _scope(task), _rho_paper(task), parts)


def _claim_gd_vit(task: str, m: Mapping[str, Any], energy: str) -> dict[str, str]:
    p = TABLE4.get(PAPER_TASK.get(task, ""))
    paper = f"GD (oracle) {p['gd']} vs Viterbi {p['viterbi']}" if p else NO_PAPER
    dev = _entry(m, f"{energy}.gd_dev_tuned")
    return compare(CLAIM_GD_VIT, _scope(task), paper, _side(f"GD dev-tuned{_nlr(dev)}", dev.get("score")),
                   _side("Viterbi", _score(m, f"{energy}.viterbi")), "<=",
                   missing="dev-tuned GD not run (metrics predate it)" if not dev else "Viterbi not run")


def findings(results: Mapping[str, Mapping[str, Any]], arch: Mapping[str, str] | None = None,
             energies: tuple[str, str] = ("blstm_crf", "blstm_crf_plus")) -> list[dict[str, str]]:
    """One row per claim of the paper (per task where it applies), its verdict computed from ``results``
    (task -> the ``approx`` metrics). ``arch``: the BLSTM-CRF+ infnet architecture per task (Table 4;
    default: every architecture with metrics); ``energies``: (Table 1's energy, Tables 4/6's energy)."""
    if not isinstance(results, Mapping):
        raise TypeError(f"findings: results must map task -> metrics, got {type(results).__name__}")
    e1, e_plus = energies
    archs = {t: _plus_archs(m, t, arch, e_plus) for t, m in results.items()}
    rows: list[dict[str, str]] = []
    rows += [_claim_infnet(t, m, e1) for t, m in results.items()]
    rows += [_claim_infnet_plus(t, m, e_plus, archs[t]) for t, m in results.items()]
    rows += [_claim_order(t, m, e_plus, archs[t]) for t, m in results.items()]
    rows += [_claim_gd_n(t, m, e_plus) for t, m in results.items()]
    rows += [_claim_gd_slow(t, m) for t, m in results.items()]
    rows.append(_claim_fast(results))
    rows += [_claim_rho_pos(t, m) for t, m in results.items()]
    rows += [_claim_rho_amort(t, m) for t, m in results.items()]
    rows += [_claim_gd_vit(t, m, e_plus) for t, m in results.items()]
    return rows


def findings_counts(results: Mapping[str, Mapping[str, Any]], arch: Mapping[str, str] | None = None,
                    energies: tuple[str, str] = ("blstm_crf", "blstm_crf_plus")) -> dict[str, int]:
    """How many findings have each verdict (for the stage to log)."""
    return counts(findings(results, arch, energies))


def yardstick_table(results: Mapping[str, Mapping[str, Any]], energies: Sequence[str]) -> str:
    """Is each energy a yardstick? Viterbi's test score under it against the best local baseline
    (token-CE network, no energy) trained for it: the paper's energies beat their local baselines
    (Tables 1 and 4), and a search error is only worth measuring against an energy that does."""
    lines = ["| task | energy | Viterbi | best local baseline | Δ | verdict |", "|---|---|---|---|---|---|"]
    for t, m in results.items():
        for e in energies:
            vit = _score(m, f"{e}.viterbi")
            local = {k.split(".")[1]: _score(m, k) for k in m if k.startswith(f"{e}.") and k.endswith(".local")}
            local = {a: v for a, v in local.items() if v is not None}
            if vit is None or not local:
                lines.append(f"| {t} | {e} | {_f(vit)} | – | – | not run |")
                continue
            a = max(local, key=local.get)
            d = vit - local[a]
            lines.append(f"| {t} | {e} | {vit:.1f} | {local[a]:.1f} ({a}) | {d:+.1f} | "
                         f"{'a yardstick' if d >= 0 else f'weaker than its local baseline by {-d:.1f}'} |")
    return "\n".join(lines) + "\n"


def report(results: dict[str, dict[str, Any]], arch: dict[str, str], methods: Any = (),
           energies: tuple[str, ...] = ("blstm_crf", "blstm_crf_plus")) -> tuple[str, Figure]:
    pair = (energies[0], energies[-1]) if energies else ("blstm_crf", "blstm_crf_plus")
    md = ["# Approximate inference benchmark (Tu & Gimpel 2019): ours beside the paper", "",
          __doc__.split("\n\n", 1)[1].strip(), "",
          "## Findings (generated from the metrics)", "",
          "Each directional claim of the paper, tested by code on our metrics (`components/reports/tu_gimpel.findings`): "
          "*not testable here* means a side was not run.", "",
          _with_marks_note(table(findings(results, arch, pair))),
          "## The energies as yardsticks — Viterbi against the best local baseline", "",
          "An energy whose exact argmax scores below a plain token-CE tagger trained on the same sentences is a "
          "weak yardstick for approximate inference. The plain BLSTM-CRF energies keep GloVe frozen and have no "
          "character features (dropout 0.5); the BLSTM-CRF+ energies fine-tune the embeddings and add them.", "",
          yardstick_table(results, pair),
          "## Table 1 — test results, BLSTM-CRF energy", "", table1(results, pair[0]),
          "## Table 3 — speed (examples/s); paper: GPU, batch size 10", "", table3(results),
          "## Table 4 — test results, BLSTM-CRF+ energy", "", table4(results, arch, pair[1]),
          "## Table 6 — approximate inference on the BLSTM-CRF+ energy (score, mean energy)", "", table6(results, arch, pair[1]),
          "## GD initialisation (init_std) — the GD grid at other starts z0 ~ N(0, std²), BLSTM-CRF+ energy", "",
          init_std_table(results, pair[1]),
          "## Section 6.2 — Spearman's rho of search error with LM perplexity (BLSTM-CRF energy)", "",
          spearman_table(results),
          *(["## Further inference methods (`approx.methods`), against exact Viterbi", "",
             methods_table(results, methods, energies)] if methods else []),
          "## Figure 2 — accuracy against total inference time", "", "![figure 2](figure2.png)", ""]
    return "\n".join(md), figure2(results, arch, pair[1])
