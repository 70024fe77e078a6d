from components.reports.curves import close
from components.reports.tu_gimpel import TABLE6, report, table6_rows


def _metrics():
    row = lambda s, e: {"score": s, "energy_pred": e, "energy_gold": e + 3, "decode_seconds": 0.5, "energy_relaxed": e + 1}
    m = {"n_test": 10, "metric": "accuracy",
         "blstm_crf_plus.viterbi": row(90.0, -100.0), "blstm_crf.viterbi": row(88.0, -90.0),
         "blstm_crf_plus.gd_oracle": {"5.0": {"score": 80.0, "energy": -95.0}, "oracle": {"score": 85.0, "energy": -97.0}},
         "blstm_crf_plus.cnn.infnet": row(91.0, -99.0), "blstm_crf_plus.cnn.local": row(89.5, -98.0),
         "blstm_crf_plus.tailored_infnet": {"3": row(91.5, -99.5)}, "blstm_crf_plus.gd_warm_start": {"3": row(90.5, -99.9)},
         "speed": {"gd": {"bs10": 5.0, "fastest": 9.0}, "viterbi": {"bs10": 50.0, "fastest": 90.0}},
         "spearman": {"infnet.words": 0.3}}
    for a in ("cnn", "blstm", "seq2seq"):
        for mode in ("local", "infnet"):
            m[f"blstm_crf.{a}.{mode}"] = row(87.0, -89.0)
    return m


def test_report_has_every_table_with_paper_numbers_beside_ours():
    md, fig = report({"pos": _metrics()}, {"pos": "cnn"})
    close(fig)
    for title in ("Table 1", "Table 3", "Table 4", "Table 6", "Section 6.2", "Figure 2"):
        assert title in md
    assert "| pos (Twitter POS) | local | 87.0 | 89.6 |" in md          # ours, then the paper's CNN local
    assert "| pos | cnn | 89.5 | 91.3 | 91.0 | 91.3 | 85.0 | 90.8 | 90.0 | 90.9 |" in md
    assert "| gd 10 | – | 89.2, -161.69 |" in md                         # a paper row we did not run
    assert "| tailored 3 | 91.5, -99.50 | 91.0, -162.59 |" in md


def test_table6_rows_and_paper_table():
    rows = table6_rows(_metrics(), "cnn")
    assert rows["viterbi"] == (90.0, -100.0) and rows["gd 5"] == (80.0, -95.0)
    assert rows["gd oracle N"] == (85.0, -97.0) and rows["infnet discretized"] == (91.0, -99.0)
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
