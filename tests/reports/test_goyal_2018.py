from collections import Counter
from pathlib import Path

import pytest
from matplotlib.figure import Figure

import numpy as np

from components.metrics.sentence_stats import Stats
from components.reports import kit
from components.reports.curves import MAX_SERIES, close
from components.reports.goyal_2018 import (BEAM_VARIANTS, DECAY_VARIANTS, SS_VARIANTS, TABLE1_2, TABLE3_1, TABLE3_2,
                                           VARIANT_LABEL, curves_figure, findings, table_beam, table_decay, table_ss,
                                           write_report)
from tests.reports.figure_checks import assert_paper_ready, legend_labels


def _var(greedy, beam=None, soft=None, *, seeds=1, std=0.0, failed=False, failure="", objective="seq_ce"):
    beam = greedy if beam is None else beam
    soft = beam if soft is None else soft
    scores = {"greedy": greedy, "beam": beam, "soft_beam": soft}
    stds = {k: std for k in scores}
    return {"objective": objective, "feed": "gold", "alpha": "none", "decay_k": None, "config": {"train.lr": 0.001},
            "seeds": seeds, "dev": {k: v - 1.0 for k, v in scores.items()}, "test": scores,
            "dev_std": stds, "test_std": stds, "epochs_run": 10.0, "best_epoch": 7.0, "seconds_per_epoch": 3.5,
            "failed": failed, "failure": failure}


def _curve(n=3, base=50.0):
    return [{"epoch": i + 1, "train_loss": 1.0 / (i + 1), "dev_score": base + i} for i in range(n)]


def _task(variants, metric="span_f1", curves=None):
    return {"metric": metric, "n_labels": 13, "top_k_labels": 0, "beam_size": 4, "n_train": 2394,
            "variants": variants, "curves": curves if curves is not None else {v: _curve() for v in variants}}


def _good_ner():
    """Every claim holds."""
    return _task({
        "ce": _var(50.0, 49.0, 49.5),
        "hinge_annealed": _var(48.0, 47.0, 47.5), "hinge_alpha1": _var(46.0, 45.0, 45.0),
        "dl_alpha1": _var(50.0, 51.0, 51.2), "dl_annealed": _var(52.0, 53.0, 53.0),
        "ss_greedy": _var(51.0), "ss_sample": _var(50.5),
        "dss_fixed_greedy": _var(52.0), "dss_fixed_sample": _var(51.5),
        "dss_annealed_greedy": _var(52.5), "dss_annealed_sample": _var(51.0),
        "dss_k100": _var(52.5), "dss_k10": _var(52.0), "dss_k1": _var(51.0), "dss_always": _var(50.0),
    })


def _bad_morph():
    """Every claim fails."""
    return _task({
        "ce": _var(90.0, 89.0, 89.0),
        "hinge_annealed": _var(88.0, 89.0, 86.0), "hinge_alpha1": _var(88.0, 90.0, 87.0),
        "dl_alpha1": _var(88.0, 90.0, 87.0), "dl_annealed": _var(88.0, 88.0, 85.0),
        "ss_greedy": _var(89.0), "ss_sample": _var(88.0),
        "dss_fixed_greedy": _var(89.5), "dss_fixed_sample": _var(89.0),
        "dss_annealed_greedy": _var(88.0), "dss_annealed_sample": _var(88.5),
        "dss_k100": _var(88.0), "dss_always": _var(89.0),
    }, metric="accuracy")


def _metrics(**tasks):
    return {"tasks": tasks}


# ---------------------------------------------------------------------------------------------
# the papers' numbers
def test_paper_tables_transcribed_exactly():
    t2, t1 = TABLE1_2["NER"], TABLE1_2["CCG"]
    assert t2["dl_annealed"]["test"] == {"greedy": None, "beam": 56.15, "soft_beam": 56.38}
    assert t2["dl_annealed"]["dev"] == {"greedy": None, "beam": 51.86, "soft_beam": 51.96}
    assert t2["ce"]["dev"] == {"greedy": 50.21, "beam": 46.22, "soft_beam": 47.50}
    assert t2["ce"]["test"] == {"greedy": 54.92, "beam": 51.34, "soft_beam": 52.78}
    assert t2["hinge_alpha1"]["test"] == {"greedy": None, "beam": 44.67, "soft_beam": 43.82}
    assert t1["ce"]["test"] == {"greedy": 80.35, "beam": 82.42, "soft_beam": 82.00}
    assert t1["dl_annealed"]["test"]["beam"] == 85.82 and t1["dl_alpha1"]["dev"]["beam"] == 83.23
    assert t1["hinge_annealed"]["test"] == {"greedy": None, "beam": 83.54, "soft_beam": 83.05}
    # the paper's text: "+5.5 accuracy points for supertagging", DL-annealed over greedy CE
    assert t1["dl_annealed"]["test"]["beam"] - t1["ce"]["test"]["greedy"] == pytest.approx(5.47)
    assert TABLE3_1["NER"]["dss_annealed_greedy"] == {"dev": 51.43, "test": 56.33}
    assert TABLE3_1["NER"]["ce"] == {"dev": 49.43, "test": 53.32}
    assert TABLE3_1["NER"]["ss_sample"] == {"dev": 50.90, "test": 54.60}
    assert TABLE3_1["MT"]["dss_annealed_sample"] == {"dev": 21.36, "test": 20.60}
    assert TABLE3_1["MT"]["ss_greedy"]["test"] - TABLE3_1["MT"]["ce"]["test"] == pytest.approx(0.74)
    assert TABLE3_2 == {"dss_k100": 56.33, "dss_k10": 55.88, "dss_k1": 55.30, "dss_always": 54.83}
    assert set(TABLE3_1["NER"]) == set(SS_VARIANTS) and set(TABLE1_2["NER"]) == set(BEAM_VARIANTS)


# ---------------------------------------------------------------------------------------------
# per-sentence statistics for the report (the findings' own tests: test_goyal_2018_findings.py)
N, TOKENS = 300, 10


def _stats(scores, *, noise=0.0, seed=0, n=N):
    """Per-sentence accuracy statistics [n, 2] for each system ``variant/decoding`` -> accuracy (%).
    ``noise`` 0: every sentence has the same share of correct tokens (an interval of width ~0 around
    the true difference); > 0: each system's per-sentence correct count is drawn independently
    (a difference of a few points then straddles zero)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, acc in scores.items():
        p = acc / 100.0
        if noise:
            correct = rng.binomial(TOKENS, p, size=n).astype(float)
        else:        # exact share: sentence i gets floor/ceil so that the total is p * n * TOKENS
            total = int(round(p * n * TOKENS))
            correct = np.full(n, total // n, dtype=float)
            correct[: total % n] += 1
        out[name] = np.stack([correct, np.full(n, float(TOKENS))], 1)
    return Stats(("correct", "tokens"), out)


def _sys_scores(m):
    """The statistics of every variant's test scores as the metrics give them."""
    return {f"{v}/{d}": s for v, r in m["variants"].items() for d, s in r["test"].items()}


def _acc(m):
    m["metric"] = "accuracy"
    return m


# ---------------------------------------------------------------------------------------------
# tables
def test_table_beam_ours_beside_paper_with_std_missing_and_failed():
    m = _good_ner()
    m["variants"]["dl_annealed"].update(seeds=3, test_std={"greedy": 0.1, "beam": 0.25, "soft_beam": 0.3})
    m["variants"]["hinge_alpha1"].update(failed=True, failure="loss diverged")
    del m["variants"]["dl_alpha1"]
    md = table_beam(_metrics(ner=m), "ner")
    assert "| Baseline CE | `ce` | 49.00 (50.21) | 50.00 (54.92) | 48.00 (46.22) | 49.00 (51.34) |" in md
    assert "53.00 ± 0.25 (56.15)" in md                                 # hard beam test, 3 seeds
    assert "51.00 ± 0.00 (–)" in md                                     # greedy dev: the paper's "-"
    assert "| G̃DL, α = 1 | `dl_alpha1` | — (–) | — (–) | — (49.88) |" in md
    assert "| ✗ (44.67) |" in md and "45.00" not in md.split("hinge_alpha1`")[1].split("\n")[0]
    assert "✗ ner / hinge_alpha1 did not learn: “loss diverged”" in md
    assert "ner: not run: dl_alpha1" in md
    morph = table_beam(_metrics(greek_morph=_bad_morph()), "greek_morph")
    assert "(85.82)" in morph and "Table 1" in morph
    own = table_beam(_metrics(my_task=_good_ner()), "my_task")
    assert "No paper counterpart" in own and "(54.92)" not in own
    with pytest.raises(KeyError):
        table_beam(_metrics(ner=m), "pos")


def test_table_ss_and_decay():
    morph = _bad_morph()
    del morph["variants"]["ss_sample"]
    md = table_ss(_metrics(ner=_good_ner(), greek_morph=morph))
    row = [line for line in md.splitlines() if "`dss_annealed_greedy`" in line][0]
    assert row == ("| α-soft annealed, greedy | `dss_annealed_greedy` | 51.50 (51.43) | 52.50 (56.33) | "
                   "87.00 | 88.00 | 21.28 | 20.18 |")
    assert "| Bengio et al. (2015), sample | `ss_sample` | 49.50 (50.90) | 50.50 (54.60) | — | — | 20.40 | 19.69 |" in md
    assert "greek_morph: not run: ss_sample" in md and "Greek→English" in md
    dec = table_decay(_metrics(ner=_good_ner(), greek_morph=_bad_morph()))
    assert "| 100 | `dss_k100` | 52.50 | 88.00 | 56.33 |" in dec
    assert "| 10 | `dss_k10` | 52.00 | — | 55.88 |" in dec
    assert "| always | `dss_always` | 50.00 | 89.00 | 54.83 |" in dec
    none = table_decay(_metrics(ner=_task({"ce": _var(50.0)})))
    assert "paper column only" in none and "| 1 | `dss_k1` | 55.30 |" in none
    assert all(v in dec for v in DECAY_VARIANTS)


# ---------------------------------------------------------------------------------------------
# figure and report
def test_curves_figure_is_small_multiples_one_row_per_paper_table():
    m = _good_ner()
    m["variants"]["dss_always"]["failed"] = True
    m["variants"]["my_variant"] = _var(40.0)
    m["curves"]["my_variant"] = _curve()
    fig = curves_figure(_metrics(ner=m), "ner")
    try:
        assert isinstance(fig, Figure)
        assert len(fig.axes) == 2 * 4                       # Tables 1-2, 3.1, 3.2, then the other variant
        assert_paper_ready(fig)
        rows = [fig.axes[i:i + 2] for i in range(0, len(fig.axes), 2)]
        for dev, loss in rows:
            assert len(dev.lines) == len(loss.lines) <= MAX_SERIES
            assert dev.get_legend() is None and loss.get_legend() is not None       # one legend per row
            assert [ln.get_label() for ln in dev.lines] == legend_labels(loss)
        shown = [legend_labels(loss) for _, loss in rows]
        assert shown[0] == [VARIANT_LABEL[v] for v in BEAM_VARIANTS]
        assert shown[1] == [VARIANT_LABEL[v] for v in SS_VARIANTS]
        assert shown[2] == [VARIANT_LABEL[v] for v in ("ce",) + DECAY_VARIANTS[:-1]] + ["always ✗"]
        assert shown[3] == ["my_variant"]
        # every variant is drawn once, except the baseline (one per paper table), black wherever it is
        drawn = Counter(ln.get_label() for dev, _ in rows for ln in dev.lines)
        assert drawn.pop("Baseline CE") == 3 and set(drawn.values()) == {1}
        ce = [ln for dev, loss in rows for ln in dev.lines + loss.lines if ln.get_label() == "Baseline CE"]
        assert len(ce) == 6 and {ln.get_color() for ln in ce} == {"black"}
        dashed = [ln for ln in rows[2][0].lines if ln.get_label() == "always ✗"]
        assert dashed[0].get_linestyle() == "--"
        # within a panel the colours differ
        for dev, _ in rows:
            assert len({ln.get_color() for ln in dev.lines}) == len(dev.lines)
        # the dev-score panels share one y scale
        assert len({tuple(dev.get_ylim()) for dev, _ in rows}) == 1
    finally:
        close(fig)
    fig = curves_figure(_metrics(ner=_task({"ce": _var(50.0)}, curves={})), "ner")
    try:
        assert "no learning curves recorded" in fig.axes[0].texts[0].get_text()
        assert_paper_ready(fig)
    finally:
        close(fig)
    # many variants no table names: rows of at most MAX_SERIES
    many = {f"v{i}": _var(40.0 + i) for i in range(MAX_SERIES + 3)}
    fig = curves_figure(_metrics(x=_task(many)), "x")
    try:
        assert [len(ax.lines) for ax in fig.axes] == [MAX_SERIES, MAX_SERIES, 3, 3]
        assert_paper_ready(fig)
    finally:
        close(fig)


def test_write_report_writes_readme_and_pngs(tmp_path: Path):
    metrics = _metrics(ner=_acc(_good_ner()), greek_morph=_bad_morph(), my_task=_acc(_task({"ce": _var(50.0)}, curves={})))
    stats = {t: _stats(_sys_scores(m)) for t, m in metrics["tasks"].items()}
    out = write_report(metrics, tmp_path / "report", stats)
    assert set(out) == {"README.md", "curves_ner.png", "curves_greek_morph.png", "curves_my_task.png"}
    for path in out.values():
        p = Path(path)
        assert p.exists() and p.stat().st_size > 0 and p.parent == tmp_path / "report"
    assert Path(out["curves_ner.png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.endswith(".tmp")]
    md = Path(out["README.md"]).read_text()
    for heading in ("# Search-aware training", "## Setup", "Table 2 (NER) — ner", "Table 1 (CCG supertagging)",
                    "## Thesis Table 3.1", "## Thesis Table 3.2", "## Findings", "## Learning curves"):
        assert heading in md
    assert "ner: beam size 4, top-K labels K = all (of 13), 2394 training sentences, 1 seed(s)" in md
    assert "![learning curves, ner](curves_ner.png)" in md
    assert "**not reproduced**" in md and "**reproduced**" in md and "claims counted, family-wise adjusted (Holm)" in md
    # the findings the README prints are the kit's on the full family, with the claims' quotes and sizes
    assert kit.summary(findings(metrics, stats)) in md
    assert "(stated size +5.45)" in md and "(stated size +2)" in md
    assert "+5.5 accuracy points gain for supertagging" in md and "timed on CPU cores" in md
