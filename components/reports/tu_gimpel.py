"""Tables 1, 3, 4 and 6 and Figure 2 of Tu & Gimpel (2019), ours beside the paper's numbers.

Input: the ``approx`` stage's metrics (task -> flat keys such as ``blstm_crf.cnn.infnet``).
Our tasks stand in for the paper's: ``pos`` (WSJ sample) for Twitter POS, ``ner`` (WNUT-16) for
CoNLL-2003 NER, ``greek_morph`` (SBLGNT morphology, ~1,000 labels) for CCG supertagging (400
labels). The corpora differ, so the comparison is of *patterns* (which method wins, how GD improves
with N, speed ratios), not of absolute numbers; energies are not comparable across corpora.
"""
from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

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
# Table 4 (BLSTM-CRF+)
TABLE4 = {"Twitter POS": {"local": 91.3, "infnet": 91.3, "gd": 90.8, "viterbi": 90.9},
          "NER": {"local": 90.5, "infnet": 90.8, "gd": 89.8, "viterbi": 91.6},
          "CCG": {"local": 94.1, "infnet": 94.2, "gd": 90.4, "viterbi": 94.3}}
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


# Table 6's tuned rows -> the INFERENCE method whose metrics fill them (approx.tuned)
TUNED_ROWS = {"tailored": "tailored_infnet", "warm start": "gd_warm_start"}


def _f(v: Any, fmt: str = "{:.1f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "–"


def _score(m: dict[str, Any], key: str) -> float | None:
    v = m.get(key)
    return v.get("score") if isinstance(v, dict) else None


def table1(results: dict[str, dict[str, Any]], energy: str = "blstm_crf") -> str:
    lines = ["| task (paper's) | row | " + " | ".join(f"{a} ours | {a} paper" for a in ARCHS) + " |",
             "|---|---|" + "---|---|" * len(ARCHS)]
    for task, m in results.items():
        paper = TABLE1.get(PAPER_TASK.get(task, ""), {})
        for row in ("local", "infnet"):
            cells = [f"{_f(_score(m, f'{energy}.{a}.{row}'))} | {_f(paper.get(row, (None,) * 3)[i])}"
                     for i, a in enumerate(ARCHS)]
            lines.append(f"| {task} ({PAPER_TASK.get(task, '?')}) | {row} | " + " | ".join(cells) + " |")
        gd = m.get(f"{energy}.gd_oracle", {}).get("oracle", {}).get("score")
        lines.append(f"| {task} | gradient descent (oracle N, lr) | {_f(gd)} | {_f(paper.get('gd'))} | | | | |")
        lines.append(f"| {task} | Viterbi | {_f(_score(m, f'{energy}.viterbi'))} | {_f(paper.get('viterbi'))} | | | | |")
    return "\n".join(lines) + "\n"


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
    lines = ["| task | arch | local ours | local paper | infnet+ ours | infnet+ paper | GD ours | GD paper | Viterbi ours | Viterbi paper |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for task, m in results.items():
        a = arch.get(task, "blstm")
        p = TABLE4.get(PAPER_TASK.get(task, ""), {})
        gd = m.get(f"{energy}.gd_oracle", {}).get("oracle", {}).get("score")
        lines.append(f"| {task} | {a} | {_f(_score(m, f'{energy}.{a}.local'))} | {_f(p.get('local'))} | "
                     f"{_f(_score(m, f'{energy}.{a}.infnet'))} | {_f(p.get('infnet'))} | {_f(gd)} | {_f(p.get('gd'))} | "
                     f"{_f(_score(m, f'{energy}.viterbi'))} | {_f(p.get('viterbi'))} |")
    return "\n".join(lines) + "\n"


def table6_rows(m: dict[str, Any], arch: str, energy: str = "blstm_crf_plus") -> dict[str, tuple[float, float] | None]:
    """Our (metric, mean energy) per Table 6 row."""
    rows: dict[str, tuple[float, float] | None] = {}
    vit = m.get(f"{energy}.viterbi", {})
    rows["gold"] = (100.0, vit.get("energy_gold")) if vit else None
    rows["viterbi"] = (vit.get("score"), vit.get("energy_pred")) if vit else None
    for n, r in m.get(f"{energy}.gd_oracle", {}).items():
        label = "gd oracle N" if n == "oracle" else f"gd {int(float(n))}"
        rows[label] = (r["score"], r["energy"])
    inf = m.get(f"{energy}.{arch}.infnet", {})
    if inf:
        rows["infnet"] = (inf["score"], inf.get("energy_relaxed"))
        rows["infnet discretized"] = (inf["score"], inf["energy_pred"])
    for kind, key in TUNED_ROWS.items():
        for n, r in m.get(f"{energy}.{key}", {}).items():
            rows[f"{kind} {n}"] = (r["score"], r["energy_pred"])
    return rows


def table6(results: dict[str, dict[str, Any]], arch: dict[str, str], energy: str = "blstm_crf_plus") -> str:
    tasks = list(results)
    head = "| row | " + " | ".join(f"{t} ours (score, E) | {PAPER_TASK.get(t, '?')} paper (score, E)" for t in tasks) + " |"
    lines = [head, "|---|" + "---|---|" * len(tasks)]
    ours = {t: table6_rows(results[t], arch.get(t, "blstm"), energy) for t in tasks}
    order = list(TABLE6) + sorted({r for t in tasks for r in ours[t]} - set(TABLE6), key=str)
    for row in order:
        cells = []
        for t in tasks:
            o = ours[t].get(row)
            p = TABLE6.get(row, {}).get(PAPER_TASK.get(t, ""))
            cells.append(f"{_f(o[0]) + ', ' + _f(o[1], '{:.2f}') if o else '–'} | "
                         f"{_f(p[0]) + ', ' + _f(p[1], '{:.2f}') if p else '–'}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figure2(results: dict[str, dict[str, Any]], arch: dict[str, str], energy: str = "blstm_crf_plus") -> Figure:
    """Accuracy / F1 against total inference time on the test set, one curve per method; GD labelled by N.
    GD's time at N iterations is N/20 times its measured time at 20 iterations (at the fastest batch size)."""
    tasks = list(results)
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.8), dpi=110, squeeze=False)
    for ax, t in zip(axes[0], tasks):
        m = results[t]
        n = m.get("n_test", 1)
        a = arch.get(t, "blstm")
        vit = m.get(f"{energy}.viterbi", {})
        if vit:
            ax.plot([vit["decode_seconds"]], [vit["score"]], "k*", ms=12, label="Viterbi")
        gd_speed = m.get("speed", {}).get("gd", {}).get("fastest")
        gd = {k: v for k, v in m.get(f"{energy}.gd_oracle", {}).items() if k != "oracle"}
        if gd_speed and gd:
            xs = [float(k) / 20 * n / gd_speed for k in gd]
            ys = [v["score"] for v in gd.values()]
            ax.plot(xs, ys, "o-", label="GD (oracle lr)")
            for x, y, k in zip(xs, ys, gd):
                ax.annotate(f"N={int(float(k))}", (x, y), fontsize=7, textcoords="offset points", xytext=(3, -8))
        inf = m.get(f"{energy}.{a}.infnet")
        if inf:
            ax.plot([inf["decode_seconds"]], [inf["score"]], "s", label=f"infnet+ ({a})")
        for (kind, key), marker in zip(TUNED_ROWS.items(), ("^-", "v-")):
            rows = m.get(f"{energy}.{key}", {})
            if rows:
                ax.plot([r["decode_seconds"] for r in rows.values()], [r["score"] for r in rows.values()], marker,
                        label=kind)
        ax.set_xscale("log")
        ax.set_xlabel("total inference time on test (s, log)")
        ax.set_ylabel("F1" if m.get("metric") == "span_f1" else "accuracy")
        ax.set_title(f"{t} (paper: {PAPER_TASK.get(t, '?')})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def spearman_table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| task | method | rho (word ppl) ours | paper | rho (label ppl) ours | paper |", "|---|---|---|---|---|---|"]
    paper = {"infnet": (0.282, 0.195), "gd": (0.122, 0.064)}        # Twitter POS, BLSTM infnet
    for t, m in results.items():
        sp = m.get("spearman", {})
        for meth in ("infnet", "gd"):
            p = paper[meth] if t == "pos" else (None, None)
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


def report(results: dict[str, dict[str, Any]], arch: dict[str, str], methods: Any = (),
           energies: tuple[str, ...] = ("blstm_crf", "blstm_crf_plus")) -> tuple[str, Figure]:
    md = ["# Approximate inference benchmark (Tu & Gimpel 2019): ours beside the paper", "",
          __doc__.split("\n\n", 1)[1].strip(), "",
          "## Table 1 — test results, BLSTM-CRF energy", "", table1(results),
          "## Table 3 — speed (examples/s); paper: GPU, batch size 10", "", table3(results),
          "## Table 4 — test results, BLSTM-CRF+ energy", "", table4(results, arch),
          "## Table 6 — approximate inference on the BLSTM-CRF+ energy (score, mean energy)", "", table6(results, arch),
          "## Section 6.2 — Spearman's rho of search error with LM perplexity (BLSTM-CRF energy)", "",
          spearman_table(results),
          *(["## Further inference methods (`approx.methods`), against exact Viterbi", "",
             methods_table(results, methods, energies)] if methods else []),
          "## Figure 2 — accuracy against total inference time", "", "![figure 2](figure2.png)", ""]
    return "\n".join(md), figure2(results, arch)
