import math

import pytest

from components.reports.curves import close
from components.reports.findings import NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, counts
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
    paths = write_report(only_stage, tmp_path / "rep")
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
    paths = write_report(recs, tmp_path)
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
    s = summary(_records())
    assert s["ocr/marginal_ce/stage"]["n"] == 2 and s["ocr/marginal_ce/stage"]["mean"] == pytest.approx(97.2)
    assert s["ocr/marginal_ce/joint/sigmoid"]["n"] == 1
    assert s["ocr/marginal_ce/fixed_alpha/alpha_0.25"]["mean"] == pytest.approx(97.2)
    assert set(s["greek_pos/ssvm/joint"]) == {"mean", "std", "n", "minutes"}
    assert len(s) == len(aggregate(_records())) + 1                       # + the findings counts
    assert s["findings"] == counts(findings(_records()))
    assert sum(s["findings"].values()) == len(findings(_records())) and s["findings"][REPRODUCED] == 4


# ---------------------------------------------------------------------------------------------
# findings
def _find(rows, claim, task="ocr, Cross-entropy"):
    """The one row whose claim starts with ``claim`` for ``task``."""
    hits = [r for r in rows if r["claim"].startswith(claim) and r["task"] == task]
    assert len(hits) == 1, (claim, task, [(r["claim"], r["task"]) for r in rows])
    return hits[0]


def _runs(procedure, scores, ratios=None, **kw):
    """One run per score (seed = index); ``ratios``: each run's final ratio (history [1, final])."""
    return [_rec(procedure, s, seed=i, history=_hist([1.0, ratios[i]]) if ratios else [], **kw)
            for i, s in enumerate(scores)]


def test_findings_on_the_fixture():
    rows = findings(_records())
    one = _find(rows, "(1)")
    assert one["verdict"] == REPRODUCED
    assert one["paper"] == "OCR, Tables 1, 2: joint 96.5 ± 0.2 < stage 97.2 ± 0.1"
    assert one["ours"] == "joint 96.50 ± 0.50 (n=3) < stage 97.20 ± 0.28 (n=2) (Δ -0.70)"   # |Δ| > pooled 0.41
    online = _find(rows, "(2) online")
    assert online["verdict"] == REPRODUCED and online["paper"] == "OCR, Table 2: online 97.3 ± 0.1 > joint 96.5 ± 0.2"
    assert _find(rows, "(2) offline scaling")["verdict"] == NOT_TESTABLE
    assert "no offline runs" in _find(rows, "(2) offline scaling")["ours"]
    assert _find(rows, "(2) TEMP")["verdict"] == NOT_TESTABLE
    ratio = _find(rows, "(3)")                             # joint finals 16, 20, 12 vs stage finals 1.6, 1.5
    assert ratio["verdict"] == REPRODUCED and "joint 15.7, stage 1.55" in ratio["ours"]
    interior = _find(rows, "(4) a sweet spot")             # grid 0.25, 1, 4: best 0.25 is the low end
    assert interior["verdict"] == NOT_REPRODUCED and "at an end" in interior["ours"]
    alpha1 = _find(rows, "(4) scaling matters")            # α = 0.25 (97.2) beats the fixed α = 1 run (96.4)
    assert alpha1["verdict"] == REPRODUCED and alpha1["ours"].startswith("α = 0.25 97.20 ± 0.14 (n=2) > α = 1 96.40")
    # greek_pos has joint runs only: every claim is not testable, with the reason; the paper row is a stand-in
    greek = [r for r in rows if r["task"].startswith("greek_pos")]
    assert {r["verdict"] for r in greek} == {NOT_TESTABLE}
    g1 = _find(rows, "(1)", "greek_pos, Structured SVM")
    assert g1["ours"] == "no stage runs for greek_pos / Structured SVM (base activation)"
    assert g1["paper"].startswith("Chunking (stand-in: a different task), Table 2: joint 87.6 ± 0.6 < stage 89.2")
    assert _find(rows, "(2) the scaling fixes", "greek_pos, Structured SVM")["verdict"] == NOT_TESTABLE
    assert _find(rows, "(4) a sweet spot", "greek_pos")["ours"] == "no fixed-α runs for greek_pos"
    assert _find(rows, "(1)", "my_task, Log-likelihood")["paper"] == "no paper row for this task"


def test_finding_joint_vs_stage_both_ways():
    worse = findings(_runs("stage", [97.0, 97.2]) + _runs("joint", [96.0, 96.2]))
    assert _find(worse, "(1)")["verdict"] == REPRODUCED
    better = findings(_runs("stage", [96.0, 96.2]) + _runs("joint", [97.0, 97.2]))
    row = _find(better, "(1)")
    assert row["verdict"] == NOT_REPRODUCED and "joint 97.10 ± 0.14 (n=2) ≥ stage 96.10" in row["ours"]
    # a gap inside the seeds' spread is flagged, and the verdict still follows the sign
    noisy = _find(findings(_runs("stage", [96.0, 98.0]) + _runs("joint", [95.5, 97.5])), "(1)")
    assert noisy["verdict"] == REPRODUCED and "within noise" in noisy["ours"]
    assert "within noise" not in _find(worse, "(1)")["ours"]
    # only the sigmoid ablation ran: the base-activation claim has no joint side
    sig = findings(_runs("stage", [97.0]) + _runs("joint", [96.0], act="sigmoid"))
    assert _find(sig, "(1)")["verdict"] == NOT_TESTABLE


def test_finding_scaling_fixes_and_temp_both_ways():
    base = _runs("stage", [97.0, 97.2]) + _runs("joint", [96.0, 96.2])
    rows = findings(base + _runs("online", [97.1, 97.3]) + _runs("offline", [95.0, 95.2])
                    + _runs("temperature", [96.1, 96.3]))
    assert _find(rows, "(2) online")["verdict"] == REPRODUCED
    assert _find(rows, "(2) offline scaling")["verdict"] == NOT_REPRODUCED
    assert _find(rows, "(2) offline (reg)")["verdict"] == NOT_TESTABLE
    assert _find(rows, "(2) TEMP")["verdict"] == REPRODUCED              # TEMP 96.2 < stage 97.1
    assert _find(rows, "(2) TEMP")["paper"] == "OCR, Table 4: TEMP 96.5 ± 0.2 < stage 97.2 ± 0.1"
    fixed_by_temp = findings(base + _runs("temperature", [97.5, 97.7]))
    assert _find(fixed_by_temp, "(2) TEMP")["verdict"] == NOT_REPRODUCED
    none = _find(fixed_by_temp, "(2) the scaling fixes")             # no fix ran: one not-testable row
    assert none["verdict"] == NOT_TESTABLE and "no online, offline or offline (reg) runs" in none["ours"]
    assert not [r for r in fixed_by_temp if r["claim"].startswith("(2) online")]


def test_finding_ratio_divergence_both_ways():
    stage = _runs("stage", [97.0, 97.2], ratios=[2.0, 2.0])
    diverging = findings(stage + _runs("joint", [96.0, 96.2], ratios=[50.0, 200.0]))
    row = _find(diverging, "(3)")
    assert row["verdict"] == REPRODUCED and "joint 100, stage 2" in row["ours"]          # geometric means
    assert "premise: joint 96.10" in row["ours"]
    stable = _find(findings(stage + _runs("joint", [96.0, 96.2], ratios=[1.0, 1.5])), "(3)")
    assert stable["verdict"] == NOT_REPRODUCED
    # joint does not underperform: the premise fails, so nothing to test
    premise = _find(findings(stage + _runs("joint", [97.5, 97.7], ratios=[50.0, 200.0])), "(3)")
    assert premise["verdict"] == NOT_TESTABLE and "premise does not hold" in premise["ours"]
    no_hist = _find(findings(_runs("stage", [97.0]) + _runs("joint", [96.0])), "(3)")
    assert no_hist["verdict"] == NOT_TESTABLE and "history" in no_hist["ours"]
    assert _find(findings(_runs("joint", [96.0], ratios=[9.0])), "(3)")["verdict"] == NOT_TESTABLE


def _fixed(scores_by_alpha):
    return [r for a, scores in scores_by_alpha.items() for r in _runs("fixed_alpha", scores, alpha=a)]


def test_finding_interior_alpha_both_ways():
    rows = findings(_fixed({0.0625: [80.0], 0.25: [97.0, 97.2], 1.0: [96.0], 16.0: [70.0]}))
    assert _find(rows, "(4) a sweet spot")["verdict"] == REPRODUCED
    assert "best α = 0.25 97.10" in _find(rows, "(4) a sweet spot")["ours"]
    assert _find(rows, "(4) scaling matters")["verdict"] == REPRODUCED
    edge = findings(_fixed({0.0625: [80.0], 0.25: [90.0], 1.0: [96.0], 16.0: [97.0]}))
    assert _find(edge, "(4) a sweet spot")["verdict"] == NOT_REPRODUCED                # best at the high end
    one_best = findings(_fixed({0.25: [90.0], 1.0: [97.0], 4.0: [91.0]}))
    assert _find(one_best, "(4) a sweet spot")["verdict"] == REPRODUCED                 # interior, but α = 1 …
    assert _find(one_best, "(4) scaling matters")["verdict"] == NOT_REPRODUCED          # … so scaling does not help
    assert _find(one_best, "(4) scaling matters")["ours"].startswith("α = 4 91.00 ≤ α = 1 97.00")   # best α ≠ 1
    # no fixed α = 1 run: α = 1 is the plain joint run
    vs_joint = findings(_fixed({0.25: [97.0], 4.0: [95.0]}) + _runs("joint", [97.5]))
    assert _find(vs_joint, "(4) scaling matters")["verdict"] == NOT_REPRODUCED
    assert "joint (α = 1) 97.50" in _find(vs_joint, "(4) scaling matters")["ours"]
    assert _find(vs_joint, "(4) a sweet spot")["verdict"] == NOT_TESTABLE              # 2 values: no interior
    missing = findings(_runs("stage", [97.0]) + _runs("joint", [96.0]))
    assert _find(missing, "(4) a sweet spot", "ocr")["verdict"] == NOT_TESTABLE
    assert _find(missing, "(4) scaling matters", "ocr")["verdict"] == NOT_TESTABLE


def test_readme_has_the_findings_table():
    md = readme(_records())
    section = md.split("## Findings (generated from the runs)\n\n", 1)[1].split("\n## ", 1)[0]
    assert "| claim | task | paper | ours | verdict |" in section
    assert "| (1) joint training underperforms stage training: joint < stage | ocr, Cross-entropy |" in section
    assert section.count("| **reproduced** |") == counts(findings(_records()))[REPRODUCED]
    assert md.index("## Findings") < md.index("## Table 1")


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
    paths = write_report(plain, tmp_path)
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
