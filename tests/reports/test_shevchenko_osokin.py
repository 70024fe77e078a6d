import math

import pytest

from components.reports.curves import close
from components.reports import kit
from components.reports.shevchenko_osokin import (COLUMN_LABEL, OBJECTIVE_LABEL, OBJECTIVES, PAPER, PROCEDURES,
                                                  MissingRecords, aggregate, best_fixed_alpha, figure1a, figure1b,
                                                  figure1c, findings, online_alpha, paper_cell, readme, summary,
                                                  table1, table2, write_report)
from components.training.registry import OBJECTIVES as TRAINING_OBJECTIVES
from tests.reports.figure_checks import assert_paper_ready, legend_labels, paper_series
from components.training.studies import PROCEDURES as STUDY_PROCEDURES


def _hist(ratios, phases=None, alpha=1.0):
    phases = phases or ["joint"] * len(ratios)
    return [{"epoch": i + 1, "phase": p, "ratio": r, "alpha": alpha, "dev_score": 90.0 + i, "train_loss": 1.0 / (i + 1),
             "lr": 1e-3} for i, (r, p) in enumerate(zip(ratios, phases))]


def _rec(procedure, score, *, task="ocr", objective="marginal_ce", act="relu", alpha=1.0, fold=0, seed=0,
         minutes=10.0, train=None, history=None):
    r = {"task": task, "objective": objective, "procedure": procedure, "last_activation": act, "alpha": alpha,
         "fold": fold, "seed": seed, "test_score": score, "train_minutes": minutes, "epochs": 6,
         "history": history if history is not None else _hist([1.0, 2.0, 4.0])}
    if train is not None:
        r["train_score"] = train
    return r


STAGE_PHASES = ["unary"] * 3 + ["pairwise"] * 3 + ["joint"] * 3


def _online_hist(ratios, alphas, losses):
    """An online run's history: per epoch the selected alpha and (down, selected, up) subset losses."""
    h = _hist(ratios)
    for rec, a, (down, at, up) in zip(h, alphas, losses):
        rec.update(alpha=a, subset_loss=at, subset_loss_down=down, subset_loss_up=up)
    return h


ONLINE_LOSSES = [(1.7, 1.3, 1.5), (0.9, 0.8, 1.0), (0.6, 0.5, 0.7)]


def _records():
    return [
        _rec("stage", 97.0, seed=0, minutes=40.0, train=99.0,
             history=_hist([2, 4, 8, 3, 2, 1.5, 1.5, 1.5, 1.6], STAGE_PHASES)),
        _rec("stage", 97.4, seed=1, minutes=44.0, train=99.4,
             history=_hist([2, 4, 9, 3, 2, 1.4, 1.5, 1.5, 1.5], STAGE_PHASES)),
        _rec("joint", 96.0, seed=0, minutes=20.0, history=_hist([1, 4, 16])),
        _rec("joint", 96.5, seed=1, minutes=22.0, history=_hist([1, 5, 20])),
        _rec("joint", 97.0, seed=2, minutes=math.nan, history=_hist([1, 3, 12])),
        _rec("joint", 97.1, act="sigmoid", history=_hist([1, 1.2, 1.3])),
        _rec("unary", 91.0, minutes=5.0),
        _rec("online", 97.3, alpha=0.25, history=_online_hist([1, 0.5, 0.5], [1.0, 0.5, 0.25], ONLINE_LOSSES)),
        _rec("online", 97.1, alpha=0.5, seed=1, history=_hist([1, 0.6, 0.55])),
        _rec("fixed_alpha", 97.1, alpha=0.25, history=_hist([0.25, 0.4, 0.5])),
        _rec("fixed_alpha", 97.3, alpha=0.25, seed=1, history=_hist([0.25, 0.45, 0.5])),
        _rec("fixed_alpha", 96.4, alpha=1.0),
        _rec("fixed_alpha", 95.0, alpha=4.0),
        _rec("joint", 88.0, task="greek_pos", objective="ssvm"),
        _rec("stage", 50.0, task="my_task", objective="nll"),
    ]


def _row(rows, **key):
    hits = [r for r in rows if all(r[k] == v for k, v in key.items())]
    assert len(hits) == 1, (key, hits)
    return hits[0]


def test_aggregate_by_hand():
    rows = aggregate(_records())
    stage = _row(rows, task="ocr", procedure="stage")
    assert stage["n"] == 2 and stage["mean"] == pytest.approx(97.2)
    assert stage["std"] == pytest.approx(math.sqrt(0.08))          # (0.2² + 0.2²) / (2 - 1)
    assert stage["minutes"] == pytest.approx(42.0) and stage["train_mean"] == pytest.approx(99.2)
    assert stage["folds"] == [0] and stage["seeds"] == [0, 1]
    joint = _row(rows, task="ocr", procedure="joint", last_activation="relu")
    assert joint["n"] == 3 and joint["mean"] == pytest.approx(96.5) and joint["std"] == pytest.approx(0.5)
    assert joint["minutes"] == pytest.approx(21.0)                 # the NaN minutes are left out of the mean
    assert math.isnan(joint["train_mean"])                         # no train_score given
    unary = _row(rows, procedure="unary")
    assert unary["n"] == 1 and math.isnan(unary["std"])            # single run: std is NaN
    fixed = [r for r in rows if r["procedure"] == "fixed_alpha"]   # one row per fixed alpha
    assert [r["alpha"] for r in fixed] == [0.25, 1.0, 4.0] and fixed[0]["mean"] == pytest.approx(97.2)
    assert _row(rows, procedure="joint", last_activation="sigmoid")["n"] == 1
    assert [r["task"] for r in rows][0] == "ocr" and rows[-1]["task"] == "my_task"
    assert best_fixed_alpha(_records()) == 0.25


def test_the_best_fixed_alpha_is_chosen_on_dev_not_on_test():
    recs = [r for r in _records() if r["procedure"] != "fixed_alpha"]
    recs += [_rec("fixed_alpha", 97.3, alpha=0.25, history=[dict(h, dev_score=90.0) for h in _hist([0.3, 0.4])]),
             _rec("fixed_alpha", 95.0, alpha=4.0, history=[dict(h, dev_score=95.0) for h in _hist([1.0, 2.0])])]
    assert best_fixed_alpha(recs) == 4.0                  # the best dev (95 > 90), though the worse test score
    fig = figure1a(recs)
    try:
        assert "best α by dev, ours = 4" in legend_labels(fig.axes[0])
    finally:
        close(fig)
    no_dev = [dict(r, history=[{k: v for k, v in h.items() if k != "dev_score"} for h in r["history"]])
              for r in recs]
    assert best_fixed_alpha(no_dev) is None               # never falls back to the test score


def test_paper_table2_ocr_transcribed_exactly():
    expected = {  # Table 2 of the paper, OCR rows: (mean, std, minutes) for stage, joint, online, offline, reg
        "marginal_ce": [(97.2, 0.1, 41), (96.5, 0.2, 23), (97.3, 0.1, 27), (97.2, 0.1, 23), (97.1, 0.2, 23)],
        "ssvm": [(97.0, 0.3, 43), (96.4, 0.4, 23), (97.0, 0.2, 27), (97.0, 0.3, 23), (96.9, 0.4, 23)],
        "nll": [(97.2, 0.1, 42), (96.5, 0.3, 23), (97.2, 0.1, 27), (97.1, 0.1, 23), (97.1, 0.2, 23)],
        "mean_field_ce": [(97.1, 0.1, 50), (96.6, 0.2, 26), (97.1, 0.1, 30), (97.1, 0.1, 26), (97.0, 0.1, 27)],
    }
    cols = ("stage", "joint", "online", "offline", "offline_reg")
    assert set(PAPER["table2"]["OCR"]) == set(expected)
    for obj, cells in expected.items():
        assert [tuple(PAPER["table2"]["OCR"][obj][c]) for c in cols] == cells, obj
    assert tuple(PAPER["table2"]["Chunking"]["mean_field_ce"]["stage"]) == (89.3, 0.3, 104)
    assert tuple(PAPER["table2"]["Bin. segm."]["gcrf_ce"]["online"]) == (86.6, 0.2, 45)


def test_paper_other_tables():
    assert PAPER["table1"]["ssvm"]["joint"][:2] == (96.4, 0.4)
    assert PAPER["table1"]["nll"]["stage"][:2] == (97.2, 0.1)
    assert PAPER["chunking_bilstm"]["marginal_ce"]["joint"].mean == 94.9
    assert PAPER["chunking_bilstm"]["ssvm"]["stage"].mean == 94.6
    assert [PAPER["unary"][t][:2] for t in ("OCR", "Chunking", "Bin. segm.")] == [(91.8, 0.2), (86.2, 0.4), (84.1, 0.2)]
    assert PAPER["table4_temp"]["OCR"]["mean_field_ce"][:2] == (96.7, 0.1)
    assert PAPER["table4_temp"]["Chunking"]["ssvm"][:2] == (87.7, 0.5)
    assert PAPER["table4_temp"]["Bin. segm."]["gcrf_ce"][:2] == (85.7, 0.3)
    assert PAPER["table3_sgd"]["Chunking"]["ssvm"]["joint"][:2] == (87.5, 0.6)
    assert paper_cell("greek_pos", "nll", "stage").mean == 89.4          # compared against Chunking
    assert paper_cell("snakes", "gcrf_ce", "unary").mean == 84.1
    assert paper_cell("my_task", "nll", "stage") is None


def test_table2_ours_beside_paper():
    md = table2(_records())
    ocr_ce = next(line for line in md.splitlines() if line.startswith("| ocr (paper: OCR) | Cross-entropy |"))
    cells = [c.strip() for c in ocr_ce.strip("|").split("|")]
    assert cells[2:6] == ["97.2 ± 0.3, 42 (n=2)", "97.2 ± 0.1, 41", "96.5 ± 0.5, 21 (n=3)", "96.5 ± 0.2, 23"]
    assert cells[6:8] == ["97.2 ± 0.1, 10 (n=2)", "97.3 ± 0.1, 27"]     # online
    assert cells[8:] == ["–", "97.2 ± 0.1, 23", "–", "97.1 ± 0.2, 23"]  # no offline runs: '–'
    assert "TEMP" not in md                                              # no temperature runs
    assert "| ocr (paper: OCR) | 91.0 ± –, 5.0 (n=1) | 91.8 ± 0.2 |" in md   # unary row, single run
    assert "greek_pos (vs paper's Chunking: different task†) | Structured SVM | – | 89.2 ± 0.5, 97 | 88.0" in md
    assert "Greek New Testament POS" in md
    assert "| my_task (no paper row) | Log-likelihood | 50.0 ± –, 10 (n=1) | – |" in md
    assert "ocr: 1 fold(s) × 3 seed(s)" in md


def test_table2_temperature_column():
    md = table2(_records() + [_rec("temperature", 96.6, alpha=0.5)])
    assert "TEMP ours | TEMP paper" in md and "| 96.6 ± –, 10 (n=1) | 96.5 ± 0.2 |" in md


def test_table1_columns_and_sigmoid():
    md = table1(_records())
    assert "| Cross-entropy | 97.2 ± 0.3 (n=2) | 97.2 ± 0.1 | 96.5 ± 0.5 (n=3) | 96.5 ± 0.2 | 97.1 ± – (n=1) | – |" in md
    assert "| Structured SVM | – | 97.0 ± 0.3 | – | 96.4 ± 0.4 | – | – |" in md
    assert "stage (sigmoid)" not in md                                   # no stage sigmoid runs


def test_missing_records_are_dashes_not_crashes(tmp_path):
    assert table2([]) == "_No run records._\n"
    assert "| Cross-entropy | – | 97.2 ± 0.1 | – | 96.5 ± 0.2 |" in table1([])
    only_stage = [_rec("stage", 97.0, history=[])]
    md = table2(only_stage)
    assert md.count("| – |") >= 1
    for fig in (figure1a, figure1b, figure1c, online_alpha):
        with pytest.raises(MissingRecords):
            fig(only_stage)
    paths = write_report(only_stage, tmp_path / "rep", findings(only_stage, {}))
    assert set(paths) == {"README.md"}
    readme = paths["README.md"].read_text()
    assert readme.count("_Skipped:") == 4 and "figure1a: no 'fixed_alpha' runs" in readme
    assert not list((tmp_path / "rep").glob("*.tmp")) and not list((tmp_path / "rep").glob(".*"))


def test_figures_render_and_report_is_written(tmp_path):
    recs = _records()
    for make in (figure1a, figure1b, figure1c):
        fig = make(recs)
        assert fig.axes[0].get_xscale() == ("log" if make is figure1a else "linear")
        close(fig)
    fig = figure1c(recs)
    vlines = sorted(ln.get_xdata()[0] for ln in fig.axes[0].lines
                    if len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1] and ln.get_linestyle() == "--")
    assert vlines == [3.5, 6.5]                                          # unary -> pairwise -> joint
    close(fig)
    fig = figure1b(recs)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["joint, α = 1 (ReLU) (n=3)", "joint, best fixed α = 0.25 (n=2)",
                      "joint, sigmoid last activation (n=1)", "online scaling (n=2)"]
    assert fig.axes[0].get_yscale() == "log"
    close(fig)
    paths = write_report(recs, tmp_path, findings(recs, {}))
    assert set(paths) == {"README.md", "figure1a.png", "figure1b.png", "figure1c.png", "online_alpha.png"}
    for name in ("figure1a.png", "figure1b.png", "figure1c.png", "online_alpha.png"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in paths["README.md"].read_text()
    readme = paths["README.md"].read_text()
    for title in ("Table 1", "Table 2", "Sec. 6.1", "Figure 1", "97.2 ± 0.1, 41", "Unary predictors alone"):
        assert title in readme
    assert "_Skipped" not in readme


def test_bad_records_get_clear_errors():
    with pytest.raises(ValueError, match=r"run record 0 .*missing key\(s\) \['test_score'\]"):
        aggregate([{k: v for k, v in _rec("joint", 1.0).items() if k != "test_score"}])
    with pytest.raises(ValueError, match="procedure='two_stage'"):
        aggregate([_rec("two_stage", 1.0)])
    with pytest.raises(ValueError, match="needs a positive 'alpha'"):
        aggregate([_rec("fixed_alpha", 1.0, alpha=0.0)])


def test_names_are_the_registries_and_every_name_has_a_label():
    study = tuple(n for n, e in TRAINING_OBJECTIVES.items() if e.meta["structure"] != "steps")
    assert OBJECTIVES == study and PROCEDURES == tuple(STUDY_PROCEDURES)
    assert set(OBJECTIVE_LABEL) == set(study)
    assert set(COLUMN_LABEL) == set(STUDY_PROCEDURES)
    for table in ("table1", "table2", "table3_sgd", "table4", "chunking_bilstm"):
        objs = PAPER[table] if table in ("table1", "chunking_bilstm") else {o for row in PAPER[table].values() for o in row}
        assert set(objs) <= set(study), table
    with pytest.raises(ValueError, match="objective='hinge'"):
        aggregate([_rec("joint", 1.0, objective="hinge")])


def test_summary_keys_and_values():
    vs = findings(_records(), {})
    s = summary(_records(), vs)
    assert s["ocr/marginal_ce/stage"]["n"] == 2 and s["ocr/marginal_ce/stage"]["mean"] == pytest.approx(97.2)
    assert s["ocr/marginal_ce/joint/sigmoid"]["n"] == 1
    assert s["ocr/marginal_ce/fixed_alpha/alpha_0.25"]["mean"] == pytest.approx(97.2)
    assert set(s["greek_pos/ssvm/joint"]) == {"mean", "std", "n", "minutes", "dev"}
    assert s["ocr/marginal_ce/stage"]["dev"] == pytest.approx(98.0)          # each run's best dev of its last phase
    assert len(s) == len(aggregate(_records())) + 1                       # + the findings counts
    words = [w.replace(" ", "_") for w in kit.VERDICTS]
    assert s["findings"] == kit.counts(vs) and sum(s["findings"][w] for w in words) == sum(v.counted for v in vs)
    assert s["findings"]["hardware_bound"] == 1                            # "two times faster": set apart
    # no per-item statistics: every claim but Fig. 1c's (one ratio per epoch and run, 2 stage runs here) is
    # not testable, and says so
    judged = [v for v in vs if v.verdict != kit.NOT_TESTABLE]
    assert [v.claim.id for v in judged] == ["stage_ratio_phases"] and judged[0].verdict == kit.REPRODUCED
    assert all("no per-item statistics" in v.reason or "not run" in v.reason or "premise" in v.reason
               or "by design" in v.reason for v in vs if v.verdict == kit.NOT_TESTABLE)


def test_readme_has_the_findings_section_of_the_kit():
    vs = findings(_records(), {})
    md = readme(_records(), vs)
    assert kit.findings(vs) in md                        # the kit renders the findings section
    assert md.index("## Findings") < md.index("## Table 1")
    assert "the smallest joint–stage gap of that paper row" in md


def test_online_alpha_figure_plots_the_subset_losses_and_the_selected_alpha(tmp_path):
    recs = _records()
    fig = online_alpha(recs)
    ax, ax2 = fig.axes
    curves = {ln.get_label(): list(ln.get_ydata()) for ln in ax.lines}
    assert curves == {"L(D) at α / 2": [d for d, _, _ in ONLINE_LOSSES], "L(D) at selected α": [a for _, a, _ in ONLINE_LOSSES],
                      "L(D) at 2 α": [u for _, _, u in ONLINE_LOSSES]}
    assert list(ax.lines[0].get_xdata()) == [1.0, 2.0, 3.0]
    assert list(ax2.lines[0].get_ydata()) == [1.0, 0.5, 0.25] and ax2.get_yscale() == "log"
    assert "seed 0" in ax.get_title()                   # the first online run (fold, seed), not seed 1's
    close(fig)
    # online runs without subset losses (or none at all) give no figure, and the README says why
    plain = [r for r in recs if r["procedure"] != "online"] + [_rec("online", 97.0, history=_hist([1, 1, 1]))]
    with pytest.raises(MissingRecords, match="online_alpha"):
        online_alpha(plain)
    paths = write_report(plain, tmp_path, findings(plain, {}))
    assert "online_alpha.png" not in paths and "online_alpha: no 'online' runs" in paths["README.md"].read_text()


def test_figures_keep_the_figure_rules_and_show_the_spread_over_runs():
    recs = _records()
    fig = figure1a(recs)
    try:
        assert_paper_ready(fig)
        ax = fig.axes[0]
        assert paper_series(ax) == ["unary, paper (91.8 ± 0.2)", "stage, paper (97.2 ± 0.1)", "best α, paper ≈ 0.25"]
        assert legend_labels(ax)[0].startswith("joint, fixed α (mean ± sd")          # the data before the references
        (fixed,) = [c for c in ax.containers if c.get_label().startswith("joint, fixed α")]
        seg = fixed.lines[2][0].get_segments()[0]                                    # α = 0.25: 97.1, 97.3
        assert seg[0][1] == pytest.approx(97.2 - math.sqrt(0.02)) and seg[1][1] == pytest.approx(97.2 + math.sqrt(0.02))
        assert "stage, ours (97.2 ± 0.3, n=2)" in legend_labels(ax)
        assert len(ax.patches) == 1                     # the stage band (2 runs); the one unary run has none
        assert "± sample std over runs" in ax.get_title()
    finally:
        close(fig)
    fig = figure1b(recs)
    try:
        assert_paper_ready(fig)
        ax = fig.axes[0]
        assert len(ax.lines) == 4 and len(ax.collections) == 3      # a band per series with more than one run
        assert len({ln.get_linestyle() for ln in ax.lines}) == 4
        assert "min-max over runs" in ax.get_title()
    finally:
        close(fig)
    fig = figure1c(recs)
    try:
        assert_paper_ready(fig)
        ax = fig.axes[0]
        assert len(ax.collections) == 1 and len(ax.patches) == 2        # stage runs' range; the final ratios' ranges
        assert any("band: range over 2 runs" in t for t in legend_labels(ax))
    finally:
        close(fig)
    recs.append(_rec("online", 97.0, alpha=0.5, seed=2,
                     history=_online_hist([1, 0.5, 0.5], [2.0, 1.0, 0.5], ONLINE_LOSSES)))
    fig = online_alpha(recs)
    try:
        assert_paper_ready(fig)
        loss, alpha = fig.axes
        assert alpha.get_position().y1 < loss.get_position().y0         # stacked, not twinned
        assert "range over 2 online runs" in legend_labels(alpha)
        (band,) = alpha.collections
        ys = band.get_paths()[0].vertices[:, 1]
        assert ys.min() == pytest.approx(0.25) and ys.max() == pytest.approx(2.0)
    finally:
        close(fig)
