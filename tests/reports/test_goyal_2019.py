import copy
import re
from pathlib import Path

import pytest

from components.metrics.significance import Interval
from components.reports.curves import close
from components.reports import kit
from components.reports.goyal_2019 import (BUCKETS, ENCODERS, INITS, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3,
                                           PAPER_TABLE3_1_MT, PAPER_TABLE4, PAPER_TABLE5, PAPER_TABLE6, ROWS,
                                           examples_section, length_figure, readme, table1, table_breakdown,
                                           table_length, table_mt, table_ss, table_tagging, tagging_figure,
                                           translator_figure, verdicts, write_report)
from tests.reports.figure_checks import assert_paper_ready, legend_labels, paper_series

SS = ("ce", "ss_greedy", "ss_sample", "dss_fixed_greedy", "dss_fixed_sample", "dss_annealed_greedy",
      "dss_annealed_sample")
EXAMPLE_OUTPUT = "In the beginning was the Word, and the Word was with God."


def _e(test, dev=None, *, std=0.0, seeds=1, failed=False):
    return {"dev": test - 1.0 if dev is None else dev, "test": test, "dev_std": std, "test_std": std,
            "seeds": seeds, "failed": failed}


def _logz(stats):
    return {**{k: stats[k] for k in ("train_mean", "train_var", "dev_mean", "dev_var")}, "dev_score": stats["score"]}


def _paper_like():
    """Our metrics set to the paper's numbers: every claim holds."""
    paper_tag = {"regular": PAPER_TABLE2, "self_normalised": PAPER_TABLE3}
    tagging = {
        "task": "greek_morph_k400", "metric": "accuracy", "n_labels": 401, "top_k_labels": 400, "beam_size": 5,
        "n_train": 6000, "seeds": 1,
        "log_z": {e: {i: _logz(PAPER_TABLE1["CCG"][i]) for i in INITS} for e in ENCODERS},
        "rows": {e: {i: {r: _e(paper_tag[i][e][r]) for r in ROWS} for i in INITS} for e in ENCODERS},
    }
    translation = {
        "metric": "bleu", "beam_size": 3, "src_vocab": 8000, "tgt_vocab": 6000, "n_train": 7000,
        "filtered": {"too_long": 12, "max_len": 50, "kept_books": ["MAT", "MRK"]},
        "signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0",
        "log_z": {i: _logz(PAPER_TABLE1["MT"][i]) for i in INITS},
        "rows": {i: {r: _e(PAPER_TABLE4[i][r]) for r in ROWS} for i in INITS},
        "ss": {v: _e(PAPER_TABLE3_1_MT[v]["test"], PAPER_TABLE3_1_MT[v]["dev"]) for v in SS},
        "breakdown": {r: {"bleu": 20.0 + k, "precisions": list(PAPER_TABLE5[r]["precisions"]), "bp": 0.95,
                          "ratio": PAPER_TABLE5[r]["ratio"]}
                      for k, r in enumerate(("pretrain_beam", "local", "global"))},
        "by_length": {r: dict(PAPER_TABLE6[r]) for r in ("pretrain_beam", "local", "global")}
                     | {"pretrain_greedy": {"0-20": 20.0, "20-30": 18.0, "30-40": None, "40-inf": None}},
        "examples": [{"verse_id": "JHN 1:1", "source": "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν",
                      "reference": "In the beginning was the Word, and the Word was with God",
                      "systems": {"self_normalised/global": EXAMPLE_OUTPUT,
                                  "self_normalised/local": "In the beginning was the word | with God.",
                                  "regular/pretrain_beam": "In beginning was word."}}],
    }
    return {"tagging": tagging, "translation": translation}


def _cells(line):
    """Cells of a Markdown table row, ignoring escaped pipes."""
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


def _assert_well_formed(md):
    block = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            counts = {_cells(b) for b in block}
            assert len(counts) == 1, block
            assert re.fullmatch(r"\|(---\|)+", block[1]), block[1]
            block = []


# ---------------------------------------------------------------------------------------------
# the paper's numbers
def test_paper_tables_parse_to_the_papers_numbers():
    assert PAPER_TABLE1["CCG"]["regular"] == {"train_mean": 21.08, "train_var": 9.57, "dev_mean": 21.96,
                                              "dev_var": 9.18, "score": 93.3}
    assert PAPER_TABLE1["CCG"]["self_normalised"]["dev_var"] == 0.08
    assert PAPER_TABLE1["MT"]["regular"]["train_var"] == 115.4 and PAPER_TABLE1["MT"]["regular"]["dev_var"] == 129.1
    assert PAPER_TABLE1["MT"]["self_normalised"] == {"train_mean": 0.65, "train_var": 0.18, "dev_mean": 0.7,
                                                     "dev_var": 0.29, "score": 26.63}
    assert PAPER_TABLE2["lstm"] == {"pretrain_greedy": 76.54, "pretrain_beam": 77.76, "local": 83.9, "global": 83.93}
    assert PAPER_TABLE2["blstm"] == {"pretrain_greedy": 92.59, "pretrain_beam": 93.29, "local": 93.76, "global": 93.73}
    assert PAPER_TABLE3["lstm"]["global"] == 85.50 and PAPER_TABLE3["lstm"]["local"] == 83.35
    assert PAPER_TABLE3["blstm"]["pretrain_greedy"] == 91.23 and PAPER_TABLE3["blstm"]["global"] == 92.63
    assert PAPER_TABLE4["regular"] == {"pretrain_greedy": 26.24, "pretrain_beam": 27.62, "local": 29.28,
                                       "global": 26.24}
    assert PAPER_TABLE4["self_normalised"] == {"pretrain_greedy": 25.42, "pretrain_beam": 26.63, "local": 27.71,
                                               "global": 29.27}
    # Table 1's scores are Table 4's pretrain-beam scores (the paper's text: "27.62 ... with beam search")
    assert PAPER_TABLE1["MT"]["regular"]["score"] == PAPER_TABLE4["regular"]["pretrain_beam"]
    assert PAPER_TABLE5["global"] == {"precisions": [65.0, 39.1, 23.2, 14.7], "ratio": 0.959}
    assert PAPER_TABLE5["local"]["ratio"] == 0.918 and PAPER_TABLE5["pretrain_beam"]["precisions"][0] == 63.5
    assert PAPER_TABLE6["pretrain_beam"] == dict(zip(BUCKETS, [29.36, 25.73, 24.71, 24.50]))
    assert PAPER_TABLE6["local"]["40-inf"] == 25.2 and PAPER_TABLE6["global"]["0-20"] == 33.21
    assert PAPER_TABLE3_1_MT["ce"] == {"dev": 20.35, "test": 19.11}
    assert PAPER_TABLE3_1_MT["dss_annealed_sample"] == {"dev": 21.36, "test": 20.60}
    assert set(PAPER_TABLE3_1_MT) == set(SS)


# ---------------------------------------------------------------------------------------------
# tables
def test_tagging_and_mt_tables():
    m = _paper_like()
    m["tagging"]["rows"]["lstm"]["regular"]["local"] = _e(84.0, std=0.31, seeds=3)
    m["tagging"]["rows"]["blstm"]["regular"]["global"]["failed"] = True
    del m["tagging"]["rows"]["blstm"]["regular"]["pretrain_beam"]
    md = table_tagging(m, "regular")
    assert "| locally normalized | `local` | 83.00 ± 0.31 | 84.00 ± 0.31 (83.90) | 92.76 | 93.76 (93.76) |" in md
    assert "| pretrain-beam | `pretrain_beam` | 76.76 | 77.76 (77.76) | — | — (93.29) |" in md
    assert "93.73 ✗ (93.73)" in md and "Not run: bidirectional / pretrain-beam" in md and "Table 2" in md
    sn = table_tagging(m, "self_normalised")
    assert "85.50 (85.50)" in sn and "Table 3" in sn
    with pytest.raises(KeyError):
        table_tagging(m, "other")
    mt = table_mt(m)
    assert "| globally normalized | `global` | 25.24 | 26.24 (26.24) | 28.27 | 29.27 (29.27) |" in mt
    ss = table_ss(m)
    assert "| α-soft annealed, sample | `dss_annealed_sample` | 21.36 (21.36) | 20.60 (20.60) |" in ss
    t1 = table1(m)
    assert ("| translation | CE | 24.70 (24.70) | 115.40 (115.40) | 25.80 (25.80) | 129.10 (129.10) | "
            "27.62 (27.62) |") in t1
    assert "greek_morph_k400 (unidirectional) | L2 (self-normalised) | 0.60 (0.60)" in t1
    bd = table_breakdown(m)
    assert ("| globally normalized | 22.00 | 65.00 (65.0) | 39.10 (39.1) | 23.20 (23.2) | 14.70 (14.7) | 0.950 | "
            "0.959 (0.959) |") in bd
    ln = table_length(m)
    assert "| pretrain-greedy | 20.00 (–) | 18.00 (–) | – (–) | – (–) |" in ln
    assert "| globally normalized | 33.21 (33.21) | 28.08 (28.08) | 26.75 (26.75) | 26.41 (26.41) |" in ln
    for t in (md, sn, mt, ss, t1, bd, ln, kit.table(verdicts(m, {})), examples_section(m)):
        _assert_well_formed(t)


def test_examples_section_escapes_pipes():
    md = examples_section(_paper_like())
    assert "### JHN 1:1" in md and EXAMPLE_OUTPUT in md and "word \\| with God" in md
    assert "globally normalized, self-normalised init (`self_normalised/global`)" in md
    _assert_well_formed(md)


# ---------------------------------------------------------------------------------------------
# figures and report
def _dots(ax):
    """label -> (xs, ys) of the axes' dot series (error-bar series and marker-only lines)."""
    out = {}
    for c in ax.containers:
        line = c.lines[0]
        out[c.get_label()] = (list(line.get_xdata()), list(line.get_ydata()))
    for ln in ax.lines:
        if not ln.get_label().startswith("_"):
            out[ln.get_label()] = (list(ln.get_xdata()), list(ln.get_ydata()))
    return out


def test_tagging_figure_is_dots_with_the_papers_numbers_as_their_own_series():
    m = _paper_like()
    m["tagging"]["rows"]["lstm"]["regular"]["local"] = _e(70.0, std=1.5, seeds=3)
    m["tagging"]["rows"]["blstm"]["self_normalised"]["global"] = _e(10.0, failed=True)
    fig = tagging_figure(m)
    try:
        assert_paper_ready(fig)
        assert len(fig.axes) == len(INITS)
        for ax, init, paper in zip(fig.axes, INITS, (PAPER_TABLE2, PAPER_TABLE3)):
            assert not ax.patches                                    # no bars: dots with intervals
            dots = _dots(ax)
            for e, name in (("lstm", "unidirectional"), ("blstm", "bidirectional")):
                assert paper_series(ax) and dots[f"paper (CCG), {name}"][1] == [paper[e][r] for r in ROWS]
                assert f"ours, {name}" in dots
            assert legend_labels(ax)[:2] == ["ours, unidirectional", "ours, bidirectional"]
        # spread: an error bar where seeds > 1, of the std
        (bars,) = [c for c in fig.axes[0].containers if c.get_label() == "ours, unidirectional"]
        seg = bars.lines[2][0].get_segments()[ROWS.index("local")]
        assert seg[0][1] == pytest.approx(68.5) and seg[1][1] == pytest.approx(71.5)
        assert "± std over 3 seeds" in fig.texts[0].get_text()
        # a run that did not train: hollow, and said so
        failed = _dots(fig.axes[1])["ours, bidirectional ✗ (did not train)"]
        assert failed[1] == [10.0]
    finally:
        close(fig)
    fig = tagging_figure({})
    try:
        assert "tagging not run" in fig.axes[0].texts[0].get_text() and paper_series(fig.axes[0])
        assert "no error bars" in fig.texts[0].get_text()
        assert_paper_ready(fig)
    finally:
        close(fig)


def test_length_figure_draws_ours_and_the_paper_as_separate_series():
    fig = length_figure(_paper_like())
    try:
        assert_paper_ready(fig)
        ax = fig.axes[0]
        assert len(ax.lines) == 4 + 3                # ours: 4 rows; paper: 3
        assert len(paper_series(ax)) == 3 and {ln.get_linestyle() for ln in ax.lines
                                                if "(paper)" in ln.get_label()} == {"--"}
    finally:
        close(fig)
    fig = length_figure({})
    try:
        assert_paper_ready(fig)
    finally:
        close(fig)


def test_write_report(tmp_path: Path):
    m = _paper_like()
    found = verdicts(m, {})                                           # no statistics: every claim not testable
    out = write_report(m, tmp_path / "report", found)
    assert set(out) == {"README.md", "tables_2_3.png", "table_6.png", "translator_curve.png"}
    for p in map(Path, out.values()):
        assert p.exists() and p.stat().st_size > 0 and p.parent == tmp_path / "report"
    assert Path(out["tables_2_3.png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.endswith(".tmp")]
    md = Path(out["README.md"]).read_text()
    for heading in ("## Setup", "## What the rows are", "## Table 1", "## Table 2", "## Table 3", "## Table 4",
                    "## Thesis Table 3.1", "## Table 5", "## Table 6", "## Findings", "## Example translations"):
        assert heading in md
    assert "| claim | task | paper | ours | verdict |" in md and kit.summary(found) in md
    assert {v.verdict for v in found} == {kit.NOT_TESTABLE}
    assert EXAMPLE_OUTPUT in md and "![" in md and "(tables_2_3.png)" in md and "(table_6.png)" in md
    assert "## The translator every translation row starts from" in md and "not run (no translator)" in md


def test_the_translator_section_shows_its_bleu_length_penalty_and_curve(tmp_path: Path):
    m = _paper_like()
    curve = [{"epoch": e, "train_loss": 6.0 - e, "dev_bleu": 1.0 + e} for e in range(1, 5)]
    bleu = lambda b, bp: {"bleu": b, "bp": bp, "signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}  # noqa: E731
    m["translation"]["translator"] = {"settings": "128-dim embeddings", "best_epoch": 4, "epochs": 4, "curve": curve,
                                      "beam_size": 5, "length_penalty": 1.25, "min_bleu": 5.0, "n_train": 6380,
                                      "dev_bleu_by_length_penalty": {"0": 5.9, "1.25": 7.0},
                                      "dev": {"greedy": bleu(5.56, 1.0), "beam": bleu(7.0, 1.0)},
                                      "test": {"greedy": bleu(3.6, 0.975), "beam": bleu(4.1, 0.98)}}
    out = write_report(m, tmp_path / "report")
    md = Path(out["README.md"]).read_text()
    assert "| dev | beam 5, length penalty 1.25 | 7.00 | 1.000 |" in md and "| test | greedy | 3.60 | 0.975 |" in md
    assert "(0: 5.90, 1.25: 7.00)" in md
    assert ("It trained on 6380 training verses and ran its whole budget of 4 epochs without early stopping firing, "
            "keeping epoch 4 (the best on dev BLEU): it was still improving when the budget ran out (a capped "
            "budget).") in md
    assert "Known cause: the translator every row starts from ran its whole epoch budget" in md
    assert "(translator_curve.png)" in md
    fig = translator_figure(m)
    try:
        loss, dev = fig.axes                                    # two panels, no twin axis
        assert loss.get_lines()[0].get_ydata().tolist() == [5.0, 4.0, 3.0, 2.0]
        assert dev.get_lines()[0].get_ydata().tolist() == [2.0, 3.0, 4.0, 5.0]
        assert_paper_ready(fig)
    finally:
        close(fig)
    assert "nrefs:1" in md and "kept_books: MAT, MRK" in md and "beam size 5 (paper: 5)" in md
    assert "patterns" in md
    _assert_well_formed(md)
    assert readme(copy.deepcopy(m)) == md


def test_a_translator_stopped_early_is_not_called_capped_and_the_caveat_counts_the_translation_verdicts(tmp_path):
    m = _paper_like()
    curve = [{"epoch": e, "train_loss": 6.0 - e, "dev_bleu": 1.0 + e} for e in range(1, 8)]
    m["translation"]["translator"] = {"settings": "256-dim embeddings", "best_epoch": 3, "epochs": 40, "curve": curve,
                                      "beam_size": 5, "length_penalty": 1.0, "min_bleu": 5.0, "n_train": 6380}
    found = verdicts(m, {})
    md = readme(m, found)
    assert ("It trained on 6380 training verses and stopped early on dev BLEU after epoch 7 of its 40, keeping "
            "epoch 3.") in md
    assert "capped budget" not in md and "Known cause" not in md
    mt = [v for v in kit.finalise(found) if v.scope.startswith("translation")]
    assert mt and f"The {len(mt)} translation verdicts: {len(mt)} claims counted, family-wise adjusted (Holm): " \
                  f"0 reproduced, 0 not reproduced, 0 inconclusive, {len(mt)} not testable" in md
    assert "Of the" not in md                                     # no counts formatted by hand
    # the paper's own BLEU (27-29) is not "barely translating"; below 10 BLEU is
    assert "barely translate" not in md and "far below the paper's" in md
    for i in INITS:
        for r in ROWS:
            m["translation"]["rows"][i][r]["test"] = 3.0 + 0.1 * ROWS.index(r)
    assert "barely translate at this scale (below 10 BLEU)" in readme(m, verdicts(m, {}))


def test_the_translation_caveat_counts_from_the_papers_whole_family():
    """The caveat's translation counts are the adjusted ones of the paper's family (Holm over every claim),
    not of the translation verdicts adjusted on their own: one translation verdict at p ≈ 0.01 among ten
    tagging ones at the same p is reproduced alone, inconclusive in the family of eleven."""
    m = _paper_like()
    iv = Interval(0.5, 0.5 - 1.96 * 0.196, 0.5 + 1.96 * 0.196, 0.95, 100, 3, 0, 0.196)
    claim = lambda i: kit.Claim(f"c{i}", f"claim {i}", "a", "b")                       # noqa: E731
    found = [kit.judge(claim(0), "translation (Greek→English)", iv)]
    found += [kit.judge(claim(i), "greek_morph_k400", iv) for i in range(1, 11)]
    assert found[0].verdict == kit.REPRODUCED and 0.005 < found[0].p < 0.05
    md = readme(m, found)
    assert ("The 1 translation verdicts: 1 claims counted, family-wise adjusted (Holm): 0 reproduced, "
            "0 not reproduced, 1 inconclusive, 0 not testable (per claim, before adjustment: 1 reproduced") in md
