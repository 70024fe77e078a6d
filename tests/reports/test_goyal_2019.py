import copy
import re
from pathlib import Path

import pytest

from components.reports.curves import close
from components.reports.goyal_2019 import (BUCKETS, DID_NOT_TRAIN, DOES_NOT_HOLD, ENCODERS, HOLDS, INCONCLUSIVE, INITS,
                                           NOT_RUN, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE3_1_MT,
                                           PAPER_TABLE4, PAPER_TABLE5, PAPER_TABLE6, ROWS, VERDICTS, examples_section,
                                           findings, findings_table, length_figure, readme, table1, table_breakdown,
                                           table_length, table_mt, table_ss, table_tagging, tagging_figure, translator_figure,
                                           write_report)
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


def _row(rows, prefix, task_part=""):
    hits = [r for r in rows if r["claim"].startswith(prefix) and task_part in r["task"]]
    assert len(hits) == 1, (prefix, task_part, [r["task"] for r in hits])
    return hits[0]


def _verdict(metrics, prefix, task_part=""):
    return _row(findings(metrics), prefix, task_part)["verdict"]


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


def test_every_claim_holds_in_the_paper_and_on_paper_like_numbers():
    rows = findings(_paper_like())
    assert len(rows) == 12
    assert all(set(r) == {"claim", "task", "paper", "ours", "verdict"} for r in rows)
    assert [r["verdict"] for r in rows] == [HOLDS] * 12
    assert not any("in the paper)" in r["paper"] for r in rows)     # the paper passes its own claims
    c2 = _row(rows, "(2)")
    # the paper's text: the regular-init local model closes 46% of the gap, the SN global one 68% (of its own)
    assert "regular global 46%" in c2["paper"] and "SN global 68%" in c2["paper"] and "56%" in c2["paper"]
    assert "76.54" in _row(rows, "(1)")["paper"] and "92.59" in _row(rows, "(1)")["paper"]
    assert "29.27" in _row(rows, "(6)")["paper"] and "0.959" in _row(rows, "(8)")["paper"]


# ---------------------------------------------------------------------------------------------
# each verdict flips
def _set(m, path, value):
    d = m
    for p in path[:-1]:
        d = d[p]
    d[path[-1]] = value


FLIPS = [
    ("(1)", "", [(("tagging", "rows", "lstm", "regular", "pretrain_greedy"), _e(91.0))]),
    ("(2)", "", [(("tagging", "rows", "lstm", i, r), _e(80.0)) for i in INITS for r in ("local", "global")]),
    ("(3)", "", [(("tagging", "rows", "lstm", "self_normalised", "global"), _e(83.0))]),
    ("(4)", "greek", [(("tagging", "rows", "blstm", "self_normalised", "local"), _e(91.0))]),
    ("(4)", "translation", [(("translation", "rows", "regular", "local"), _e(27.0))]),
    ("(5)", "", [(("translation", "rows", "regular", "global"), _e(28.0))]),
    ("(6)", "", [(("translation", "rows", "self_normalised", "global"), _e(27.0))]),
    ("(7)", "unidirectional", [(("tagging", "log_z", "lstm", "self_normalised", "dev_mean"), 10.0)]),
    ("(7)", "bidirectional", [(("tagging", "log_z", "blstm", "self_normalised", "train_var"), 50.0)]),
    ("(7)", "translation", [(("translation", "log_z", "self_normalised", "dev_score"), 20.0)]),
    ("(8)", "", [(("translation", "breakdown", "global", "ratio"), 0.9)]),
    ("(9)", "", [(("translation", "ss", v), _e(19.0, 22.0)) for v in SS[3:]]),
]


@pytest.mark.parametrize("prefix,task,changes", FLIPS, ids=[f"{p}{t}" for p, t, _ in FLIPS])
def test_each_claim_flips(prefix, task, changes):
    m = _paper_like()
    assert _verdict(m, prefix, task) == HOLDS
    for path, value in changes:
        _set(m, path, value)
    rows = findings(m)
    assert _row(rows, prefix, task)["verdict"] == DOES_NOT_HOLD
    # the change touches only its own claim (and claims that share the same numbers)
    assert sum(r["verdict"] == DOES_NOT_HOLD for r in rows) <= 2


def test_claim_thresholds_are_from_the_numbers():
    m = _paper_like()
    _set(m, ("tagging", "rows", "lstm", "regular", "pretrain_greedy"), _e(89.0))     # gap 3.59 ≥ 3
    assert _verdict(m, "(1)") == HOLDS
    # a small cost: SN dev score 1.5 below CE holds, 2.5 below does not
    _set(m, ("translation", "log_z", "self_normalised", "dev_score"), 27.62 - 1.5)
    assert _verdict(m, "(7)", "translation") == HOLDS
    _set(m, ("translation", "log_z", "self_normalised", "dev_score"), 27.62 - 2.5)
    r7 = _row(findings(m), "(7)", "translation")
    assert r7["verdict"] == DOES_NOT_HOLD and "cost not small" in r7["ours"]
    # claim 2: reports the fraction of the gap closed
    m = _paper_like()
    for i in INITS:
        _set(m, ("tagging", "rows", "lstm", i, "global"), _e(80.0))
        _set(m, ("tagging", "rows", "lstm", i, "local"), _e(80.0))
    _set(m, ("tagging", "rows", "lstm", "regular", "local"), _e(84.6))                 # 50.2% of 16.05
    c2 = _row(findings(m), "(2)")
    assert c2["verdict"] == HOLDS and "= 50%" in c2["ours"] and "uni local (regular) 84.60" in c2["ours"]
    # claim 8: global must beat local on the ratio and on the 3- and 4-gram precisions
    m = _paper_like()
    m["translation"]["breakdown"]["global"]["precisions"][3] = 13.0
    assert _verdict(m, "(8)") == DOES_NOT_HOLD


# ---------------------------------------------------------------------------------------------
# noise
def test_within_noise_is_inconclusive():
    m = _paper_like()
    for r in ("global", "local", "pretrain_beam"):
        m["translation"]["rows"]["self_normalised"][r].update(seeds=3, test_std=1.0)
    _set(m, ("translation", "rows", "self_normalised", "global"), _e(27.9, std=1.0, seeds=3))
    row = _row(findings(m), "(6)")               # global − local = +0.19 ≤ 1.0; global − beam = +1.27 > 1.0
    assert row["verdict"] == INCONCLUSIVE and "within noise" in row["ours"] and "± 1.00" in row["ours"]
    # the sign against the claim, still within noise: inconclusive, not "does not hold"
    _set(m, ("translation", "rows", "self_normalised", "global"), _e(27.5, std=1.0, seeds=3))
    assert _verdict(m, "(6)") == INCONCLUSIVE
    # outside the noise again
    _set(m, ("translation", "rows", "self_normalised", "global"), _e(25.0, std=1.0, seeds=3))
    assert _verdict(m, "(6)") == DOES_NOT_HOLD
    # a std recorded with one seed is not a std
    for r in ("global", "local", "pretrain_beam"):
        m["translation"]["rows"]["self_normalised"][r].update(seeds=1)
    _set(m, ("translation", "rows", "self_normalised", "global"), _e(27.9, std=1.0, seeds=1))
    assert _verdict(m, "(6)") == HOLDS


def test_within_noise_for_threshold_and_difference_claims():
    m = _paper_like()
    _set(m, ("tagging", "rows", "lstm", "regular", "pretrain_greedy"), _e(88.5, std=2.0, seeds=3))
    _set(m, ("tagging", "rows", "blstm", "regular", "pretrain_greedy"), _e(92.59, std=2.0, seeds=3))
    assert _verdict(m, "(1)") == INCONCLUSIVE               # gap 4.09: 1.09 above the 3-point bar, std 2
    m = _paper_like()
    for i in INITS:
        for r in ("global", "local"):
            m["tagging"]["rows"]["lstm"][i][r].update(seeds=5, test_std=2.5)
    assert _verdict(m, "(3)") == INCONCLUSIVE               # SN global − local = +2.15 ≤ std 2.5
    m = _paper_like()
    for v in SS:
        m["translation"]["ss"][v].update(seeds=3, test_std=2.0)
    assert _verdict(m, "(9)") == INCONCLUSIVE


# ---------------------------------------------------------------------------------------------
# missing and failed
def test_missing_sections_are_not_run_without_crashing():
    m = _paper_like()
    del m["translation"]
    rows = findings(m)
    tag = [r for r in rows if r["task"] != "translation"]
    mt = [r for r in rows if r["task"] == "translation"]
    assert [r["verdict"] for r in tag] == [HOLDS] * 6 and [r["verdict"] for r in mt] == [NOT_RUN] * 6
    assert all("translation not run" in r["ours"] for r in mt if not r["claim"].startswith("(7)"))
    assert "not run" in table_mt(m) and "not run" in table_ss(m) and "not run" in table_breakdown(m)
    assert "not run" in table_length(m) and "not run" in examples_section(m)
    m = _paper_like()
    del m["tagging"]
    assert {r["verdict"] for r in findings(m) if r["task"] != "translation"} == {NOT_RUN}
    assert "Tagging: not run" in table_tagging(m, "regular") and "Tagging: not run" in table1(m)
    rows = findings({})
    assert {r["verdict"] for r in rows} == {NOT_RUN} and len(rows) == 12
    md = readme({})
    assert "Tagging: not run." in md and "Translation: not run." in md
    _assert_well_formed(md)
    with pytest.raises(ValueError):
        findings([1, 2])


def test_missing_and_failed_rows():
    m = _paper_like()
    del m["translation"]["rows"]["self_normalised"]["local"]
    r6 = _row(findings(m), "(6)")
    assert r6["verdict"] == NOT_RUN and "local (SN) not run" in r6["ours"]
    m["translation"]["rows"]["self_normalised"]["global"]["failed"] = True
    m["translation"]["rows"]["self_normalised"]["global"]["failure"] = "loss diverged"
    rows = findings(m)
    assert _row(rows, "(6)")["verdict"] == DID_NOT_TRAIN
    assert "global (SN) did not train (loss diverged)" in _row(rows, "(6)")["ours"]
    assert _row(rows, "(8)")["verdict"] == DID_NOT_TRAIN
    # claim 4 is tested on the pairs that ran; the rest are listed
    c4 = _row(rows, "(4)", "translation")
    assert c4["verdict"] == HOLDS and "holds for 1/1" in c4["ours"] and "untested" in c4["ours"]
    del m["translation"]["rows"]["regular"]["local"]
    assert _row(findings(m), "(4)", "translation")["verdict"] == NOT_RUN
    # claim 2 needs only one usable search-aware row
    m = _paper_like()
    for i in INITS:
        for r in ("local", "global"):
            m["tagging"]["rows"]["lstm"][i][r]["failed"] = True
    assert _verdict(m, "(2)") == DID_NOT_TRAIN
    m["tagging"]["rows"]["lstm"]["regular"]["local"]["failed"] = False
    c2 = _row(findings(m), "(2)")
    assert c2["verdict"] == DOES_NOT_HOLD and "46%" in c2["ours"]          # 83.90: 46% of the gap
    # log Z missing: not run
    m = _paper_like()
    del m["tagging"]["log_z"]["blstm"]
    assert _verdict(m, "(7)", "bidirectional") == NOT_RUN and _verdict(m, "(7)", "unidirectional") == HOLDS
    # no Bengio variant
    m = _paper_like()
    del m["translation"]["ss"]["ss_greedy"], m["translation"]["ss"]["ss_sample"]
    r9 = _row(findings(m), "(9)")
    assert r9["verdict"] == NOT_RUN and "no usable Bengio variant" in r9["ours"]
    assert all(r["verdict"] in VERDICTS for r in findings(m))


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
    for t in (md, sn, mt, ss, t1, bd, ln, findings_table(findings(m)), examples_section(m)):
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
    m["translation"]["rows"]["regular"]["global"] = _e(28.0)          # claim 5 no longer holds
    out = write_report(m, tmp_path / "report")
    assert set(out) == {"README.md", "tables_2_3.png", "table_6.png", "translator_curve.png"}
    for p in map(Path, out.values()):
        assert p.exists() and p.stat().st_size > 0 and p.parent == tmp_path / "report"
    assert Path(out["tables_2_3.png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.endswith(".tmp")]
    md = Path(out["README.md"]).read_text()
    for heading in ("## Setup", "## What the rows are", "## Table 1", "## Table 2", "## Table 3", "## Table 4",
                    "## Thesis Table 3.1", "## Table 5", "## Table 6", "## Findings", "## Example translations"):
        assert heading in md
    assert "| claim | task | paper | ours | verdict |" in md
    assert "**holds**" in md and "**does not hold**" in md
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
    assert "(0: 5.90, 1.25: 7.00)" in md and "epoch 4 of 4 on 6380 training verses" in md
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


def test_log_z_claim_of_a_model_that_did_not_train_draws_no_verdict():
    from components.reports.goyal_2019 import DID_NOT_TRAIN, HOLDS, MT_TASK, findings

    def claim7(failed: bool) -> str:
        m = {"translation": {"log_z": {
            "regular": {"train_mean": 10.0, "train_var": 1.0, "dev_mean": 9.0, "dev_var": 1.0, "dev_score": 20.0,
                        "failed": failed},
            "self_normalised": {"train_mean": 0.1, "train_var": 0.1, "dev_mean": 0.1, "dev_var": 0.1,
                                "dev_score": 19.5, "failed": False}}}}
        (row,) = [r for r in findings(m) if r["claim"].startswith("(7)") and r["task"] == MT_TASK]
        return row["verdict"]

    assert claim7(False) == HOLDS
    assert claim7(True) == DID_NOT_TRAIN
