import copy
from pathlib import Path

import pytest

from components.reports.curves import close
from tests.reports.test_goyal_2019 import _assert_well_formed  # one Markdown-table check for every report
from components.reports import kit
from components.reports.goyal_mlm import (PAPER_SEC6_6,
                                          PAPER_TABLE6_1, PAPER_TABLE6_2, PAPER_TABLE6_3, PAPER_TABLE6_4,
                                          PAPER_TABLE6_5, PAPER_TABLE6_6, figure_6_1,
                                          figure_6_2, figure_6_3, figure_6_4, readme, report_verdicts, table_6_1, table_6_2, table_6_3, table_6_4, table_6_5, table_6_6,
                                          table_figure_6_1, table_figure_6_2, table_mixing, write_report,
                                          cmlm_curve_text, figure_cmlm_curve, known_causes, EXACT_CLAIMS)
from tests.reports.figure_checks import assert_paper_ready, legend_labels, paper_series

SYNTH = ("p-1k", "p-10k", "h-1k", "h-10k", "h-1k+", "h-10k+")
BURN, SWEEPS = 7, 26


# ---------------------------------------------------------------------------------------------
# synthetic metrics: every claim holds
def _obj(nll, sd=0.01, failed=False):
    return {"nll": nll, "nll_sd": sd, "neg_pll": nll - 1.0, "neg_mlm": nll - 0.9, "epochs": 20, "failed": failed}


def _exact():
    table = []
    for k, row in enumerate(SYNTH):
        base = 5.0 + 0.1 * k
        table.append({"row": row, "data": "palindrome" if row.startswith("p") else "hmm_low", "train_size": 1000,
                      "true": base - 0.2, "seeds": 3,
                      "by_objective": {"ll": _obj(base + 0.01), "pll": _obj(base + 0.11), "mlm": _obj(base + 0.81)}})
    table.append({"row": "phoneme", "data": "phoneme", "train_size": 9000, "true": None, "seeds": 3,
                  "by_objective": {"pll": _obj(9.5), "mlm": _obj(11.25)}})
    figure = {"data": "hmm_low", "true": 5.0, "dpll": {"pretrain_size": 10000, "nll": 6.8},
              "sizes": [30, 100, 300, 1000],
              "nll": {"pll": [6.5, 6.0, 5.6, 5.3], "kl": [5.6, 5.5, 5.4, 5.2], "kl_pl": [5.55, 5.45, 5.35, 5.15]},
              "sd": {m: [0.05] * 4 for m in ("pll", "kl", "kl_pl")}, "seeds": 2}
    return {"table": table, "figure": figure,
            "settings": {"phoneme_max_len": 3, "paper_phoneme_max_len": 6, "length": 5, "vocab": 5, "hidden": 64}}


def _flat(v, n=BURN + SWEEPS):
    return [v + (0.01 if i % 2 else -0.01) for i in range(n)]


def _ramp(a, b, n=BURN + SWEEPS):
    return [a + (b - a) * i / (n - 1) for i in range(n)]


def _r(group, scheme, value=None, *, e_norm=40.0, bleu=20.0, accept=0.9, novel=0.1, block="single", curve=None,
       bleu_final=None):
    return {"group": group, "value": value, "scheme": scheme, "block": block, "e_norm": e_norm, "accept": accept,
            "novel": novel, "bleu": bleu, "bleu_best": bleu + 1.0,
            "bleu_final": bleu if bleu_final is None else bleu_final,
            "curve": curve or {"e_norm": _flat(e_norm), "bleu": _flat(bleu), "accept": _flat(accept),
                               "novel": _flat(novel)},
            "rhat": {"median": 1.02, "max": 1.2, "frac_below_1_1": 0.9}, "ess_bulk": {"median": 55.0, "min": 12.0},
            "seconds": 12.5, "proposals": 1234, "forward_passes": 5678}


def _mcmc():
    deg_curve = {"e_norm": _ramp(50.0, 90.0), "bleu": _ramp(18.0, 6.0), "accept": [1.0] * (BURN + SWEEPS),
                 "novel": _flat(0.4)}
    runs = [_r("main", "raw", e_norm=41.0, bleu=21.0, accept=0.88, novel=0.12),
            _r("main", "norm", e_norm=39.0, bleu=20.5, accept=0.9, novel=0.14),
            _r("main", "deg", e_norm=70.0, bleu=12.0, accept=1.0, novel=0.38, curve=deg_curve)]
    for k, t in enumerate((2.0, 1.5, 1.0, 0.8, 0.5)):
        runs += [_r("temperature", "norm", t, e_norm=40.0 - k, novel=0.05 - 0.005 * k, bleu=20.0 + k),
                 _r("temperature", "deg", t, e_norm=90.0 - 8 * k, novel=0.9 - 0.2 * k, bleu=8.0 + 3 * k)]
    for k, p in enumerate((1.0, 0.99, 0.95, 0.9, 0.8)):
        runs += [_r("nucleus", "norm", p, novel=0.14 - 0.02 * k), _r("nucleus", "deg", p, novel=0.4 - 0.07 * k)]
    runs += [_r("block", s, block="annealed", novel=n, e_norm=e, bleu=b)
             for s, n, e, b in (("deg", 0.8, 80.0, 9.0), ("raw", 0.4, 38.0, 22.0), ("norm", 0.42, 37.0, 21.5))]
    for k, step in enumerate((0.02, 0.04, 0.06)):
        runs += [_r("anneal", "norm", step, e_norm=30.0 - k, accept=0.5 - 0.05 * k, bleu=23.0 - k),
                 _r("anneal", "raw", step, e_norm=31.0 - k, accept=0.7 - 0.05 * k, bleu=24.0 - k)]
    runs += [_r("full", "deg", bleu=18.0), _r("full", "norm", bleu=22.0), _r("full", "raw", bleu=22.5)]
    return {"model": {"dev_masked_loss": 2.1, "dev_unigram_loss": 5.3, "dev_length_accuracy": 0.41, "n_train": 7000,
                      "src_vocab": 8000, "tgt_vocab": 6000},
            "settings": {"chains": 5, "burn_in": BURN, "sweeps": SWEEPS, "sentences": 8, "max_source_len": 20,
                         "full_sentences": 100},
            "runs": runs,
            "baselines": {"mask_predict": {"bleu": 20.0, "iterations": 10, "length_candidates": 1},
                          "warm_start": {"bleu": 15.5}}}


def _runs(m, group, scheme):
    return [r for r in m["runs"] if r["group"] == group and r["scheme"] == scheme]


# ---------------------------------------------------------------------------------------------
def test_paper_numbers_are_transcribed():
    assert PAPER_TABLE6_1["p-1k"] == {"true": 5.32, "nll": {"ll": 6.74, "pll": 7.01, "mlm": 7.71},
                                      "neg_pll": 5.74, "neg_mlm": 5.87}
    assert PAPER_TABLE6_1["h-10k+"]["nll"]["mlm"] == 6.88 and PAPER_TABLE6_1["h-1k"]["neg_mlm"] == 4.46
    assert PAPER_TABLE6_1["phoneme"] == {"true": None, "nll": {"ll": None, "pll": 14.58, "mlm": 18.20},
                                         "neg_pll": 13.31, "neg_mlm": 13.12}
    assert PAPER_TABLE6_2[2.0] == {"norm": {"e_norm": 12.87, "novel": 0.03, "bleu": 25.91},
                                   "deg": {"e_norm": 32.46, "novel": 1.0, "bleu": 14.53}}
    assert PAPER_TABLE6_2[0.5]["deg"] == {"e_norm": 17.65, "novel": 0.04, "bleu": 26.12}
    assert PAPER_TABLE6_3[0.9]["deg"] == {"e_norm": 18.57, "novel": 0.10, "bleu": 23.25}
    assert PAPER_TABLE6_3[0.99]["norm"]["bleu"] == 24.95
    assert PAPER_TABLE6_4 == {"deg": {"e_norm": 31.18, "novel": 0.77, "bleu": 9.03},
                              "raw": {"e_norm": 8.08, "novel": 0.40, "bleu": 27.12},
                              "norm": {"e_norm": 8.17, "novel": 0.41, "bleu": 26.78}}
    assert PAPER_TABLE6_5[0.04]["norm"] == {"e_norm": 3245.65, "accept": 0.45, "bleu_best": 27.58}
    assert PAPER_TABLE6_5[0.06]["raw"] == {"e_norm": 2146.34, "accept": 0.58, "bleu_best": 27.21}
    assert PAPER_TABLE6_6["mask_predict"] == {"de_en": 29.27, "ro_en": 29.95}
    assert PAPER_TABLE6_6["raw"] == {"de_en": 30.12, "ro_en": 30.86} and PAPER_TABLE6_6["warm_start"]["ro_en"] == 24.38
    assert PAPER_SEC6_6["raw"] == {"accept": 0.9, "novel": 0.11} and PAPER_SEC6_6["norm"]["novel"] == 0.13


def test_tables_show_ours_beside_the_thesis():
    ex, m = _exact(), _mcmc()
    t1 = table_6_1(ex)
    assert "5.01 ± 0.01 (6.74)" in t1 and "5.11 ± 0.01 (7.01)" in t1 and "5.81 ± 0.01 (7.71)" in t1
    assert "4.80 (5.32)" in t1 and "11.25 ± 0.01 (18.20)" in t1 and "up to length 3 (thesis: 6)" in t1
    f1 = table_figure_6_1(ex)
    assert "| 30 | 6.50 ± 0.05 | 5.60 ± 0.05 | 5.55 ± 0.05 |" in f1 and "6.80" in f1
    f2 = table_figure_6_2(m)
    assert "0.88 (0.90)" in f2 and "0.38 (0.36)" in f2 and "70.00" in f2
    t2 = table_6_2(m)
    assert "| 2 | 40.00 (12.87) | 0.05 (0.03) | 20.00 (25.91) |" in t2 and "(32.46)" in t2
    assert "0.40 (0.36)" in table_6_3(m) and "40.00 (18.23)" in table_6_3(m)
    t4 = table_6_4(m)
    assert "38.00 (8.08)" in t4 and "0.42 (0.41)" in t4 and "0.12 (0.11)" in t4 and "annealed" in t4
    t5 = table_6_5(m)
    assert "| norm | 0.02 | 30.00 (3277.60) | 0.50 (0.52) | 24.00 (29.16) |" in t5 and "0.60 (0.58)" in t5
    t6 = table_6_6(m)
    assert "| Raw Score Energy | 22.50 |" in t6 and "30.12" in t6 and "15.50" in t6 and "1 length candidate" in t6
    mix = table_mixing(m)
    assert mix.count("| 1.020 |") == len(m["runs"]) and "5678" in mix
    for md in (t1, f1, f2, t2, t4, t5, t6, mix, kit.table(report_verdicts(ex, m))):
        _assert_well_formed(md)


def test_figures_draw_with_and_without_data():
    ex, m = _exact(), _mcmc()
    fig = figure_6_1(ex)
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "log"
        assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"PL-only", "TRUE", "DPLL (10000)"}
        assert legend_labels(ax)[:3] == ["PL-only", "KL projection", "KL projection + PL"]     # data first
        assert "± sd over 2 seeds" in ax.get_title()
        (pl,) = [c for c in ax.containers if c.get_label() == "PL-only"]
        seg = pl.lines[2][0].get_segments()[0]                       # the error bar: ± the seeds' sd
        assert seg[0][1] == pytest.approx(6.45) and seg[1][1] == pytest.approx(6.55)
        assert_paper_ready(fig)
    finally:
        close(fig)
    fig = figure_6_2(m)
    try:
        assert [len(a.lines) for a in fig.axes] == [3, 3]
        assert len(fig.axes[0].lines[0].get_xdata()) == BURN + SWEEPS
        assert_paper_ready(fig)
    finally:
        close(fig)
    fig = figure_6_4(m)
    try:
        assert len(fig.axes) == 2 * 3                                # a row per scheme: accept, E_norm, BLEU
        for row, s in zip((fig.axes[:3], fig.axes[3:]), ("norm", "raw")):
            accept, e_norm, bleu = row
            ours = [f"{s}, step {v}" for v in ("0.02", "0.04", "0.06")]
            assert [ln.get_label() for ln in e_norm.lines] == ours == [ln.get_label() for ln in bleu.lines]
            assert paper_series(accept, "thesis") == [f"thesis (Table 6.5), {o}" for o in ours]
            thesis = [ln.get_ydata()[0] for ln in accept.lines if ln.get_label().startswith("thesis")]
            assert thesis == [PAPER_TABLE6_5[v][s]["accept"] for v in (0.02, 0.04, 0.06)]
            assert len({ln.get_color() for ln in e_norm.lines}) == 3 and len({ln.get_linestyle() for ln in e_norm.lines}) == 3
        assert_paper_ready(fig)
    finally:
        close(fig)
    for make, arg in ((figure_6_1, None), (figure_6_2, None), (figure_6_3, None), (figure_6_4, None),
                      (figure_6_3, m), (figure_cmlm_curve, None)):
        fig = make(arg)
        try:
            assert_paper_ready(fig)
        finally:
            close(fig)


def test_bleu_panels_show_the_spread_across_chains_where_the_runs_have_it():
    m = _mcmc()
    for r in m["runs"]:
        r["chains"], r["bleu_chain_sd"] = 5, 1.5
    fig = figure_6_2(m)
    try:
        e_norm, bleu = fig.axes
        assert not e_norm.containers                        # the metrics keep no per-chain E_norm
        bars = bleu.containers
        assert len(bars) == 3 and all(c.lines[0].get_xdata()[0] > BURN + SWEEPS for c in bars)
        (raw,) = [c for c in bars if c.lines[0].get_color() == "tab:red"]
        seg = raw.lines[2][0].get_segments()[0]
        assert raw.lines[0].get_ydata()[0] == 21.0 and seg[0][1] == pytest.approx(19.5) and seg[1][1] == pytest.approx(22.5)
        assert "right: sampling-sweep mean ± sd over 5 chains" in legend_labels(bleu)
        assert_paper_ready(fig)
    finally:
        close(fig)
    for r in m["runs"]:
        r["chains"] = 1                                      # one chain: no spread to show
    fig = figure_6_2(m)
    try:
        assert not fig.axes[1].containers
    finally:
        close(fig)


def test_write_report(tmp_path: Path):
    ex, m = _exact(), _mcmc()
    out = write_report(ex, m, tmp_path / "report")
    assert set(out) == {"README.md", "figure_6_1.png", "figure_6_2.png", "figure_6_3.png", "figure_6_4.png",
                        "cmlm_curve.png"}
    for name, p in out.items():
        assert isinstance(p, Path) and p.parent == tmp_path / "report" and p.stat().st_size > 0
        if name.endswith(".png"):
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.endswith(".tmp")]
    md = out["README.md"].read_text()
    for heading in ("## What was run", "## Table 6.1", "## Figure 6.1", "## Figure 6.2", "## Table 6.2",
                    "## Table 6.3", "## Table 6.4", "## Table 6.5", "## Table 6.6", "## Mixing", "## Findings"):
        assert heading in md
    for png in ("figure_6_1.png", "figure_6_2.png", "figure_6_3.png", "figure_6_4.png", "cmlm_curve.png"):
        assert f"({png})" in md
    assert "No learning curve of the CMLM was recorded" in md        # _mcmc() has no model.curve
    assert "Greek→English New Testament" in md and "patterns" in md and "burn_in: 7" in md
    assert "| claim | task | paper | ours | verdict |" in md           # the kit's findings table
    _assert_well_formed(md)
    assert readme(copy.deepcopy(ex), copy.deepcopy(m)) == md
    # nothing run: still writes every file
    out2 = write_report(None, None, tmp_path / "empty")
    assert all(p.exists() for p in out2.values())
    assert {v.verdict for v in report_verdicts(None, None)} == {kit.NOT_TESTABLE}


def test_an_unknown_scheme_is_listed_with_the_callers_label_and_a_default_colour(tmp_path: Path):
    m = _mcmc()
    m["runs"] += [_r("main", "walk", e_norm=45.0), _r("block", "walk", block="annealed"), _r("full", "walk"),
                  _r("temperature", "walk", 1.0)]
    # the thesis's claims: its schemes only
    assert [v.record() for v in report_verdicts(_exact(), m)] == [v.record() for v in report_verdicts(_exact(), _mcmc())]
    labels = {"walk": "a new sampler"}
    assert "| a new sampler | 45.00 |" in table_figure_6_2(m, labels)
    assert "| walk | 45.00 |" in table_figure_6_2(m)                      # no label given: the scheme's name
    assert "| a new sampler |" in table_6_4(m, labels) and "| a new sampler |" in table_6_6(m, labels)
    assert "walk E_norm ↓" in table_6_2(m) and "walk E_norm ↓" not in table_6_3(m)
    assert "| walk |" in table_mixing(m)
    fig = figure_6_2(m, labels)
    try:
        lines = {ln.get_label(): ln.get_color() for ln in fig.axes[0].get_lines()}
        assert "a new sampler" in lines and lines["a new sampler"] not in {"tab:red", "tab:blue", "tab:gray"}
    finally:
        close(fig)
    out = write_report(_exact(), m, tmp_path / "report", labels)
    assert "a new sampler" in out["README.md"].read_text()


# ---------------------------------------------------------------------------------------------
# starts (Figure 6.2's random start beside the main group) and the CMLM's learning curve
WARM = {"init": "warm", "start_noise": 0.2}
UNIFORM = {"init": "uniform", "start_noise": 0.0}


def _with_random_start(m):
    for r in m["runs"]:
        if r["group"] == "main":
            r["config"] = dict(WARM)
    m["runs"] += [_r("random_start", "raw", e_norm=43.0) | {"config": dict(UNIFORM)},
                  _r("random_start", "norm", e_norm=42.0) | {"config": dict(UNIFORM)},
                  _r("random_start", "deg", e_norm=91.0, bleu=4.0) | {"config": dict(UNIFORM)}]
    return m


def test_figure_6_2_shows_the_random_start_rows_and_says_how_each_run_started():
    m = _with_random_start(_mcmc())
    f2 = table_figure_6_2(m)
    _assert_well_formed(f2)
    assert "| MH, E_raw (raw) | 41.00 |" in f2 and "| MH, E_raw (raw), random start | 43.00 |" in f2
    assert "| degenerate Gibbs (deg), random start | 91.00 | 4.00 |" in f2
    assert f2.index("| degenerate Gibbs (deg) |") < f2.index("| MH, E_raw (raw), random start |")
    assert "| warm + noise 0.2 |" in f2 and "| uniform random, shared |" in f2
    assert "main: the warm start" in f2 and "probability 0.2" in f2
    assert "random start: one uniform random sequence per sentence, shared by its chains, no perturbation" in f2
    # with no random_start runs: no such rows, and a start not recorded says so
    plain = table_figure_6_2(_mcmc())
    assert "random start" not in plain.split("\n\n")[0] and "main: not recorded" in plain
    fig = figure_6_2(m)
    try:
        assert [len(a.lines) for a in fig.axes] == [3, 3, 3, 3]       # a row per start: main, then random start
        main, random = fig.axes[0].get_lines(), fig.axes[2].get_lines()
        assert {ln.get_label(): ln.get_linestyle() for ln in main}["degenerate Gibbs (deg)"] == "-"
        assert {ln.get_label(): ln.get_linestyle() for ln in random}["degenerate Gibbs (deg), random start"] == "--"
        assert "random_start group (start: uniform random, shared)" == fig.axes[2].get_title()
        assert fig.axes[0].get_ylim() == fig.axes[2].get_ylim()            # one E_norm scale for both starts
        assert_paper_ready(fig)
    finally:
        close(fig)
    # Figure 6.2's "deg degrades" reads the random start (the thesis's chains share one random start) when it ran
    scope = {v.claim.id: v.scope for v in report_verdicts(_exact(), m)}
    assert scope["deg_degrades"].startswith("random_start group")
    assert {v.claim.id: v.scope for v in report_verdicts(_exact(), _mcmc())}["deg_degrades"].startswith("main group")


CURVE = [{"epoch": 1, "dev_token_loss": 5.0, "dev_unigram_loss": 5.5, "dev_bleu": 0.5},
         {"epoch": 2, "dev_token_loss": 3.5, "dev_unigram_loss": 5.4, "dev_bleu": 4.0},
         {"epoch": 3, "dev_token_loss": 3.0, "dev_unigram_loss": 5.4, "dev_bleu": None},
         {"epoch": 4, "dev_token_loss": 3.25, "dev_unigram_loss": 5.4, "dev_bleu": 6.5}]


def test_cmlm_learning_curve_figure_and_text(tmp_path: Path):
    m = _mcmc()
    m["model"]["curve"] = copy.deepcopy(CURVE)
    text = cmlm_curve_text(m)
    assert "(4 epoch(s))" in text and "5.00 (epoch 1) → 3.25 (epoch 4)" in text
    assert "best 3.00 at epoch 3, against the unigram loss 5.40 there (gain 2.40 nats)" in text
    assert "Dev BLEU (mask-predict) 0.50 (epoch 1) → 6.50 (epoch 4); best 6.50." in text
    assert "capped budget" not in text                       # the best epoch (3) is not the last: it stopped early
    m["model"]["curve"][-1]["dev_token_loss"] = 2.5          # now the last epoch is the best: the budget ran out
    assert "still falling when the 4-epoch budget ran out (a capped budget)" in cmlm_curve_text(m)
    m["model"]["curve"][-1]["dev_token_loss"] = 3.25
    fig = figure_cmlm_curve(m)
    try:
        ax, ax_b = fig.axes                                  # loss and BLEU side by side, no twin axis
        assert [list(ln.get_xdata()) for ln in ax.get_lines()] == [[1, 2, 3, 4], [1, 2, 3, 4]]
        assert list(ax.get_lines()[0].get_ydata()) == [5.0, 3.5, 3.0, 3.25]
        assert list(ax_b.get_lines()[0].get_xdata()) == [1, 2, 4]            # no BLEU at epoch 3
        assert legend_labels(ax) == ["dev masked-token loss", "dev unigram loss (no context)"]
        assert legend_labels(ax_b) == ["dev BLEU (mask-predict)"]
        assert_paper_ready(fig)
    finally:
        close(fig)
    # old metrics: no dev_bleu at all -> one axis, and the text says so
    for e in m["model"]["curve"]:
        del e["dev_bleu"]
    assert "No per-epoch dev BLEU was recorded." in cmlm_curve_text(m)
    fig = figure_cmlm_curve(m)
    try:
        assert len(fig.axes) == 1 and len(fig.axes[0].get_lines()) == 2
    finally:
        close(fig)
    # absent: a sentence, and a figure that says so
    for absent in (None, {}, {"model": {"dev_masked_loss": 2.0}}, {"model": {"curve": None}}):
        assert "No learning curve of the CMLM was recorded" in cmlm_curve_text(absent)
        fig = figure_cmlm_curve(absent)
        try:
            assert not fig.axes[0].get_lines() and "not recorded" in fig.axes[0].texts[0].get_text()
        finally:
            close(fig)
    # the report: the figure beside the others, referenced in the README; the model line leaves the curve out
    m = _with_random_start(_mcmc())
    m["model"]["curve"] = copy.deepcopy(CURVE)
    out = write_report(_exact(), m, tmp_path / "report")
    assert out["cmlm_curve.png"].parent == out["figure_6_2.png"].parent
    assert out["cmlm_curve.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = out["README.md"].read_text()
    assert "![CMLM learning curve](cmlm_curve.png)" in md and "gain 2.40 nats" in md
    assert "dev_token_loss" not in md.split("## Table 6.1")[0]
    assert "| MH, E_norm (norm), random start |" in md.split("## Figure 6.2")[1].split("## Table 6.2")[0]
    _assert_well_formed(md)


def test_known_causes_name_the_samplers_budget_and_count_their_inconclusive_verdicts():
    m = _mcmc()
    found = report_verdicts(_exact(), m, {})                     # no statistics: every claim not testable
    mc = [v for v in found if v.claim.id not in EXACT_CLAIMS]
    assert mc and len(mc) < len(found)
    text = known_causes(m, found)
    assert text.startswith(f"Known causes (Sec. 6.6-6.8): 0 of the samplers' {len(mc)} counted verdicts are "
                           "inconclusive after the family-wise adjustment.")
    assert f"rest on 8 source sentences of at most 20 tokens (100 in Table 6.6's full-set group) × 5 chains, " \
           f"{SWEEPS} sweeps after a burn-in of {BURN}" in text
    assert "capped budget" not in text                           # no learning curve recorded
    exact = [v for v in found if v.claim.id in EXACT_CLAIMS]
    # two of the samplers' verdicts made inconclusive: counted (the full list passed, the subset taken inside)
    undecided = [kit.Verdict(v.claim, v.scope, kit.INCONCLUSIVE) if i < 2 else v for i, v in enumerate(mc)]
    assert f"2 of the samplers' {len(mc)} counted verdicts are inconclusive" in known_causes(m, exact + undecided)
    # three reproduced at p = 0.02 each: inconclusive after Holm over the three (0.06), so counted as undecided
    held = [kit.Verdict(v.claim, v.scope, kit.REPRODUCED, p_reproduced=0.01, p_not=0.99) if i < 3 else v
            for i, v in enumerate(mc)]
    assert sum(v.verdict == kit.INCONCLUSIVE for v in held) == 0
    assert f"3 of the samplers' {len(mc)} counted verdicts are inconclusive" in known_causes(m, exact + held)
    m["model"]["curve"] = [{"epoch": 1, "dev_token_loss": 5.0}, {"epoch": 2, "dev_token_loss": 4.0}]
    m["model"]["test_bleu_mask_predict"] = 4.71
    assert "still improving when its epoch budget ran out (its learning curve above: a capped budget); it " \
           "translates at 4.71 test BLEU (mask-predict)." in known_causes(m, found)
    assert known_causes(m, found) in readme(_exact(), m, verdicts=found)
    assert known_causes(None, found) == "" and known_causes(m, [v for v in found if v.claim.id in EXACT_CLAIMS]) == ""
