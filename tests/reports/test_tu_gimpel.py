import pytest

from components.reports.curves import close
from components.reports.tu_gimpel import (FAIL, GD_DEV, GD_MIN, GD_ORACLE, MARK_NOTE, TABLE6, WARN,
                                          infnet_flags, init_std_table, report, table4, table6, table6_rows)
from tests.reports.figure_checks import assert_paper_ready, legend_labels


def _row(s, e):
    return {"score": s, "energy_pred": e, "energy_gold": e + 3, "decode_seconds": 0.5, "energy_relaxed": e + 1}


def _gd(s, e):
    return {"score": s, "energy": e, "relaxed_energy": e + 0.5, "search_error": 0.1}


def _metrics():
    """Older metrics (no honest GD keys); every claim testable on them holds."""
    m = {"n_test": 10, "metric": "accuracy", "n_labels": 44,
         "blstm_crf_plus.viterbi": _row(90.0, -100.0), "blstm_crf.viterbi": _row(88.0, -90.0),
         "blstm_crf_plus.gd_oracle": {"5.0": _gd(80.0, -95.0), "oracle": _gd(85.0, -97.0)},
         "blstm_crf.gd_oracle": {"5.0": _gd(84.0, -88.0), "oracle": _gd(86.0, -89.0)},
         "blstm_crf_plus.cnn.infnet": _row(91.0, -99.0), "blstm_crf_plus.cnn.local": _row(89.5, -98.0),
         "blstm_crf_plus.tailored_infnet": {"3": _row(91.5, -99.5), "10": _row(91.6, -99.6)},
         "blstm_crf_plus.gd_warm_start": {"3": _row(90.5, -99.9), "10": _row(90.6, -99.95)},
         "speed": {"gd": {"bs10": 5.0, "fastest": 9.0}, "viterbi": {"bs10": 50.0, "fastest": 90.0},
                   "cnn": {"bs10": 500.0}, "blstm": {"bs10": 100.0}, "seq2seq": {"bs10": 60.0}},
         "spearman": {"infnet.words": 0.3, "infnet.labels": 0.2, "gd.words": 0.1, "gd.labels": 0.05}}
    for a in ("cnn", "blstm", "seq2seq"):
        m[f"blstm_crf.{a}.local"] = _row(87.0, -89.0)
        m[f"blstm_crf.{a}.infnet"] = _row(88.0, -89.5)
    return m


def _honest(m=None):
    """``_metrics()`` with the honest GD keys (label-free per N and overall, dev-tuned, other init stds)."""
    m = _metrics() if m is None else m
    for e in ("blstm_crf", "blstm_crf_plus"):
        m[f"{e}.gd_min_energy"] = {"5": _gd(80.0, -95.0), "10": _gd(82.0, -96.0), "20": _gd(83.0, -96.5),
                                   "all": _gd(84.0, -96.6)}
        m[f"{e}.gd_dev_tuned"] = {**_gd(85.5, -96.4), "N": 20.0, "lr": 0.5, "dev_score": 84.0}
    m["blstm_crf_plus.gd_init_std"] = {
        "1.0": {"oracle": _gd(70.0, -90.0), "min_energy": _gd(69.0, -91.0),
                "dev_tuned": {**_gd(68.0, -90.5), "N": 50.0, "lr": 1.0, "dev_score": 67.0}},
        "0.01": {"oracle": _gd(85.0, -97.0), "min_energy": _gd(84.0, -96.6),
                 "dev_tuned": {**_gd(85.5, -96.4), "N": 20.0, "lr": 0.5, "dev_score": 84.0}}}
    return m


# ----------------------------------------------------------------------------------------------- tables

def test_report_has_every_table_with_paper_numbers_beside_ours():
    md, fig = report({"pos": _metrics()}, {"pos": "cnn"})
    close(fig)
    for title in ("## Findings", "Table 1", "Table 3", "Table 4", "Table 6",
                  "GD initialisation (init_std)", "Section 6.2", "Figure 2"):
        assert title in md
    assert "| pos (Twitter POS) | local | 87.0 | 89.6 |" in md          # ours, then the paper's CNN local
    assert f"| pos | {GD_ORACLE} | 86.0 | 89.1 | | | | |" in md          # oracle GD labelled as the paper's protocol
    assert "| infnet+ | 91.0 | 91.3 |" in md and "| arch | cnn | cnn |" in md
    assert f"| {GD_ORACLE} | 85.0 | 90.8 |" in md
    assert "| gd 10, oracle lr (paper's protocol) | – | 89.2, -161.69 |" in md   # a paper row we did not run
    assert "| tailored 3 | 91.5, -99.50 | 91.0, -162.59 |" in md


def test_report_renders_without_the_honest_gd_keys():
    md, fig = report({"pos": _metrics()}, {"pos": "cnn"})
    close(fig)
    assert f"| pos | {GD_DEV} | – | – | | | | |" in md and f"| pos | {GD_MIN} | – | – | | | | |" in md
    assert f"| {GD_DEV} | – | – |" in md and f"| {GD_MIN} | – | – |" in md       # Table 4
    assert "min energy" not in table6({"pos": _metrics()}, {"pos": "cnn"}) and "Dev-tuned (N, lr)" not in md
    assert "GD initialisation (init_std)" in md and "Not run" in md
    # an empty gd_min_energy / init-std dict, as a half-written record might hold, renders too
    m = _metrics()
    m["blstm_crf_plus.gd_min_energy"], m["blstm_crf_plus.gd_init_std"] = {}, {"0.01": {}}
    md, fig = report({"pos": m}, {"pos": "cnn"})
    close(fig)
    assert "| pos | 0.01 | – | – | – | – | – | – | – |" in md


def test_report_renders_the_honest_gd_rows_beside_the_oracle():
    md, fig = report({"pos": _honest()}, {"pos": "cnn"})
    close(fig)
    # Table 1 (BLSTM-CRF energy) and Table 4 (BLSTM-CRF+): dev-tuned with its (N, lr), lowest energy
    assert f"| pos | {GD_DEV} | 85.5 (N=20, lr=0.5) | – | | | | |" in md
    assert f"| pos | {GD_MIN} | 84.0 | – | | | | |" in md
    assert f"| {GD_DEV} | 85.5 (N=20, lr=0.5) | – |" in md and f"| {GD_MIN} | 84.0 | – |" in md
    # Table 6: label-free rows per N right after the oracle rows of the same N, then the whole-grid selections
    t6 = table6({"pos": _honest()}, {"pos": "cnn"})
    lines = [ln.split(" | ")[0].lstrip("| ") for ln in t6.splitlines() if ln.startswith("| ")]
    i = lines.index("gd 5, oracle lr (paper's protocol)")
    assert lines[i + 1] == "gd 5, lowest-energy lr (no labels)"
    assert lines.index("gd 10, lowest-energy lr (no labels)") == lines.index("gd 10, oracle lr (paper's protocol)") + 1
    assert lines.index(GD_ORACLE) < lines.index(GD_MIN) < lines.index(GD_DEV) < lines.index("infnet")
    assert "| gd 20, lowest-energy lr (no labels) | 83.0, -96.50 | – |" in t6
    assert f"| {GD_DEV} | 85.5, -96.40 | – |" in t6 and "Dev-tuned (N, lr): pos (N=20, lr=0.5)." in t6
    # init-std table: sorted by std, the three selections with the dev-tuned (N, lr)
    t = init_std_table({"pos": _honest()})
    assert t.index("| pos | 0.01 |") < t.index("| pos | 1 |")
    assert "| pos | 1 | 70.0 | -90.00 | 69.0 | -91.00 | 68.0 | -90.50 | N=50, lr=1 |" in t
    assert "| pos | 0.01 | 85.0 | -97.00 | 84.0 | -96.60 | 85.5 | -96.40 | N=20, lr=0.5 |" in md


def test_table6_rows_and_paper_table():
    rows = table6_rows(_honest(), "cnn")
    assert rows["viterbi"] == (90.0, -100.0) and rows["gd 5"] == (80.0, -95.0)
    assert rows["gd oracle N"] == (85.0, -97.0) and rows["infnet discretized"] == (91.0, -99.0)
    assert rows["gd 10 min energy"] == (82.0, -96.0) and rows["gd min energy"] == (84.0, -96.6)
    assert rows["gd dev-tuned"] == (85.5, -96.4)
    assert "gd min energy" not in table6_rows(_metrics(), "cnn")
    assert TABLE6["warm start 10"]["CCG"] == (94.4, -482.78) and TABLE6["gd 100"]["NER"] is None


def test_further_methods_table_lists_every_configured_method():
    m = _metrics()
    m["blstm_crf_plus.gd_adam"] = {"score": 89.0, "energy_pred": -99.2, "search_error": 0.8}
    md, fig = report({"pos": m}, {"pos": "cnn"}, ("gd_adam",), ("blstm_crf_plus",))
    close(fig)
    assert "| pos | blstm_crf_plus | viterbi | 90.0 | -100.00 | 0.000 |" in md
    assert "| pos | blstm_crf_plus | gd_adam | 89.0 | -99.20 | 0.800 |" in md
    md, fig = report({"pos": m}, {"pos": "cnn"})
    close(fig)
    assert "gd_adam" not in md                                         # only when approx.methods has it


# ----------------------------------------------------------------------------------------------- markers

def test_infnet_flags_mark_networks_that_did_not_minimise_the_energy():
    m = _metrics()
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == ()                       # -99 below local's -98
    m["blstm_crf_plus.cnn.infnet"] = _row(58.0, -97.0)                          # above local's -98
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == (WARN,)
    m["blstm_crf_plus.cnn.infnet"] = _row(0.0, -99.0)
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == (FAIL,)
    m["blstm_crf_plus.cnn.infnet"] = _row(0.0, -97.0)
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == (FAIL, WARN)
    m["blstm_crf_plus.cnn.infnet"] = _row(58.0, -98.0)                          # equal energy: not above
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == ()
    del m["blstm_crf_plus.cnn.local"]                                           # no baseline: nothing to say
    m["blstm_crf_plus.cnn.infnet"] = _row(58.0, -50.0)
    assert infnet_flags(m, "blstm_crf_plus", "cnn") == ()
    assert infnet_flags(m, "blstm_crf_plus", "seq2seq") == ()                   # not run


def test_markers_and_footnote_in_the_tables():
    md, fig = report({"pos": _metrics()}, {"pos": "cnn"})
    close(fig)
    assert WARN not in md and FAIL not in md and MARK_NOTE not in md            # nothing to mark
    m = _metrics()
    m["blstm_crf_plus.cnn.infnet"] = _row(58.0, -97.0)
    m["blstm_crf.blstm.infnet"] = _row(0.0, -89.5)
    md, fig = report({"pos": m}, {"pos": "cnn"})
    close(fig)
    assert "| infnet+ | 58.0 ⚠ | 91.3 |" in md                                 # Table 4
    assert "| infnet discretized | 58.0, -97.00 ⚠ |" in md                      # Table 6
    assert "| 0.0 ✗ did not learn | 89.5 |" in md                               # Table 1, BLSTM column
    assert "88.0 | 89.9 |" in md                                                 # the CNN infnet stays unmarked
    assert md.count(MARK_NOTE) >= 3                                              # Table 1, 4 and 6
    assert MARK_NOTE not in table4({"pos": _metrics()}, {"pos": "cnn"})


def test_yardstick_table_compares_viterbi_with_the_best_local_baseline():
    from components.reports.tu_gimpel import yardstick_table
    m = {"e.viterbi": {"score": 40.0}, "e.cnn.local": {"score": 30.0}, "e.blstm.local": {"score": 45.5},
         "e.cnn.infnet": {"score": 99.0}, "f.viterbi": {"score": 90.0}, "f.cnn.local": {"score": 80.0}}
    md = yardstick_table({"ner": m}, ("e", "f", "g"))
    assert "| ner | e | 40.0 | 45.5 (blstm; test: no dev scores) | -5.5 | weaker than its local baseline by 5.5 |" in md
    assert "| ner | f | 90.0 | 80.0 (cnn; test: no dev scores) | +10.0 | a yardstick |" in md
    assert "| ner | g | – | – | – | not run |" in md
    # with the training stages' dev scores, the best baseline is chosen on dev and compared on test
    training = {"ner": {"ner-e.cnn.local": {"best_dev_score": 50.0}, "ner-e.blstm.local": {"best_dev_score": 41.0},
                        "ner-f.cnn.local": {"best_dev_score": 70.0}}}
    md = yardstick_table({"ner": m}, ("e", "f"), training)
    assert "| ner | e | 40.0 | 30.0 (cnn; dev) | +10.0 | a yardstick |" in md
    assert "| ner | f | 90.0 | 80.0 (cnn; dev) | +10.0 | a yardstick |" in md


# ----------------------------------------------------------------------------------------------- figure 2
def _dense_gd(m):
    """GD at N = 5 ... 1000 (most of them crowded on a log time axis), tailored / warm start by step."""
    grid = (5, 10, 20, 30, 40, 50, 100, 500, 1000)
    for key in ("gd_oracle", "gd_min_energy"):
        m[f"blstm_crf_plus.{key}"] = {str(float(n)): _gd(80.0 + 0.01 * n, -95.0) for n in grid}
    m["blstm_crf_plus.tailored_infnet"] = {"10": {**_row(91.6, -99.6), "decode_seconds": 2.0},
                                           "3": {**_row(91.5, -99.5), "decode_seconds": 0.7},
                                           "5": {**_row(91.2, -99.5), "decode_seconds": 1.1}}
    return m, grid


def test_figure2_labels_gd_points_without_overlap_and_names_methods_as_the_tables_do():
    (pos, grid), (ner, _) = _dense_gd(_metrics()), _dense_gd(_metrics())
    ner["metric"] = "span_f1"
    md, fig = report({"pos": pos, "ner": ner}, {"pos": "cnn", "ner": "cnn"})
    try:
        assert_paper_ready(fig)                    # no two N labels (or legends, tick labels) overlap
        assert len(fig.axes) == 2
        for ax in fig.axes:
            shown = [t.get_text() for t in ax.texts]
            assert shown and set(shown) <= {f"N={n}" for n in grid} and len(set(shown)) == len(shown)
            assert {"N=5", "N=1000"} <= set(shown)
            assert legend_labels(ax) == ["Viterbi", "GD, oracle lr (paper's protocol)",
                                         "GD, lowest-energy lr (no labels)", "infnet+ (cnn)",
                                         "tailored (3, 5, 10 steps)", "warm start (3, 10 steps)"]
            (tailored,) = [ln for ln in ax.lines if ln.get_label().startswith("tailored")]
            assert list(tailored.get_xdata()) == [0.7, 1.1, 2.0]            # in step order, not the dict's
            for t in ax.texts:                                              # each label sits on its own point
                n = float(t.get_text()[2:])
                assert t.xy[1] == pytest.approx(80.0 + 0.01 * n)
        assert fig.axes[1].get_ylabel() == "F1" and fig.axes[0].get_ylabel() == "accuracy"
        assert "one run per point" in fig.texts[0].get_text()
    finally:
        close(fig)
