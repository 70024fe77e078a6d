"""The Tu & Gimpel findings on the report kit: per-sentence statistics constructed so that each
verdict is known (a clear win, a clear loss, a straddle, an equivalence inside / outside / across its
margin, a gain short of its stated size, identical systems, a failed premise), and the verdict objects
checked (never the Markdown)."""
import numpy as np
import pytest

from components.metrics.correlation import spearman
from components.metrics.significance import Stats
from components.metrics.tagging import stats_columns
from components.reports import kit
from components.reports.curves import close
from components.reports.tu_gimpel import (ENERGY_MARGIN_FRACTION, SCORE_MARGIN, TaskData, energy_margin, findings,
                                          report)

E1, EP = "blstm_crf", "blstm_crf_plus"
ARCHS = ("cnn", "blstm", "seq2seq")
NS = (5, 10, 20, 30, 40, 50, 100, 500, 1000)
STEPS = ("3", "5", "10")

# per-task score levels (probability that a token / gold span is right) of every system
LEVELS = {
    "pos": {f"{E1}.cnn.local": .80, f"{E1}.cnn.infnet": .90, f"{E1}.blstm.local": .70, f"{E1}.blstm.infnet": .75,
            f"{E1}.seq2seq.local": .75, f"{E1}.seq2seq.infnet": .80, f"{E1}.viterbi": .85, f"{E1}.gd_oracle": .84,
            f"{EP}.cnn.local": .95, f"{EP}.cnn.infnet": .95, f"{EP}.viterbi": .90, f"{EP}.gd_oracle": .90,
            **{f"{EP}.gd_oracle.{n}": .90 for n in NS},
            **{f"{EP}.tailored_infnet.{s}": .95 for s in STEPS}, **{f"{EP}.gd_warm_start.{s}": .95 for s in STEPS}},
    "ner": {f"{E1}.cnn.local": .30, f"{E1}.cnn.infnet": .35, f"{E1}.blstm.local": .40, f"{E1}.blstm.infnet": .50,
            f"{E1}.seq2seq.local": .45, f"{E1}.seq2seq.infnet": .55, f"{E1}.viterbi": .70, f"{E1}.gd_oracle": .20,
            f"{EP}.seq2seq.local": .50, f"{EP}.seq2seq.infnet": .60, f"{EP}.viterbi": .80, f"{EP}.gd_oracle": .40,
            **{f"{EP}.gd_oracle.{n}": .40 for n in NS},
            **{f"{EP}.tailored_infnet.{s}": .65 for s in STEPS}, **{f"{EP}.gd_warm_start.{s}": .70 for s in STEPS}},
}
ARCH = {"pos": "cnn", "ner": "seq2seq", "greek_morph_k400": "blstm"}
# the POS equivalence claims whose two sides share levels and uniforms: bit-identical systems in _data
IDENTICAL_POS = {"T4.pos.infnet=local", "T4.pos.gd≈viterbi", "T6.pos.gd20_acc≈viterbi"}
# the claims judged from CPU timings (the paper timed on a GPU): reported, kept out of the counts
HARDWARE = {"T3.gd_slowest", "T3.cnn_orders_faster", "T3.blstm_2-4x_seq2seq", "T3.viterbi>seq2seq_small_L",
            "T3.ccg_viterbi_4-5x_slower", "F2.ccg.infnet_faster", "F2.ccg.gd_more_time", "F2.ccg.tailor_warm_between",
            "F2.ccg.warm_faster_than_tailored"}
CCG_ONLY = {"T3.ccg_viterbi_4-5x_slower", "T1.ccg.cnn_struggles", "T1.ccg.seq2seq_infnet>viterbi", "T4.ccg.close",
            "T4.ccg.gd<viterbi", "T6.ccg.gd_needs_more_iterations", "T6.ccg.gd_4pts_below", "T6.ccg.infnet_energy<gd",
            "T6.ccg.discretise_lowers", "F2.ccg.infnet_faster", "F2.ccg.gd_more_time", "F2.ccg.gd_plateau",
            "F2.ccg.tailor_warm_between", "F2.ccg.warm_faster_than_tailored"}


def _score_stats(task, n, rng, levels, independent=()):
    """Per-sentence statistics: every system judges the same tokens / spans with shared uniforms (a
    higher level wins on every sentence: a clear difference); ``independent`` systems draw their own."""
    size = rng.integers(3, 8, size=n)
    u = rng.random((n, 8))
    out = {}
    for name, p in levels.items():
        uu = rng.random((n, 8)) if name in independent else u
        right = ((uu < p) & (np.arange(8) < size[:, None])).sum(1).astype(float)
        out[name] = (np.stack([right, size], 1) if task == "pos" else np.stack([right, size, size], 1)).astype(float)
    return out


def _values(task, n, rng):
    """Per-sentence energies as [value, 1] (Viterbi lowest, gold 10 above it) and perplexities; the
    search error of the BLSTM infnet follows both perplexities closely, GD's loosely."""
    a = ARCH[task]
    v = -100 + rng.normal(0, 5, n)
    ppl_w, ppl_l = rng.gamma(2.0, 50.0, n), rng.gamma(2.0, 5.0, n)
    rank = lambda x: np.argsort(np.argsort(x)) / n                                    # noqa: E731
    e = {f"energy:{EP}.viterbi": v, f"energy:{EP}.gold": v + 10, f"energy:{E1}.viterbi": v, f"energy:{E1}.gold": v + 10,
         f"energy:{E1}.blstm.infnet": v + rank(ppl_w) + rank(ppl_l) + rng.normal(0, .1, n),
         f"energy:{E1}.gd_oracle": v + .3 * (rank(ppl_w) + rank(ppl_l)) + rng.normal(0, .2, n),
         f"energy:{EP}.{a}.infnet": v + (1.0 if task == "pos" else .2), f"relaxed:{EP}.{a}.infnet": v + .5,
         **{f"energy:{EP}.gd_oracle.{n_}": v + (3.0 if n_ <= 10 else .1) for n_ in NS},
         **{f"energy:{EP}.tailored_infnet.{s}": v + .15 for s in STEPS},
         **{f"energy:{EP}.gd_warm_start.{s}": v + .05 for s in STEPS},
         "ppl:words": ppl_w, "ppl:labels": ppl_l}
    return {k: np.stack([x, np.ones(n)], 1) for k, x in e.items()}


def _speed(rng, **bs10):
    base = {"cnn": 1000.0, "blstm": 100.0, "seq2seq": 40.0, "viterbi": 60.0, "gd": 5.0, **bs10}
    return {k: {"bs10": x, "fastest": x, "bs10_repeats": list(x * (1 + rng.normal(0, .02, 8)))} for k, x in base.items()}


def _nudge(x, k=0):
    """``x`` ([n, d] statistics) with one more right token on one sentence and one fewer on another
    (the ``k``-th such pair, so that two nudged systems differ): the same totals, no longer
    bit-identical to the system it was equal to."""
    x = x.copy()
    up = int(np.flatnonzero(x[:, 0] < x[:, 1])[k])
    down = int(np.flatnonzero((x[:, 0] > 0) & (np.arange(len(x)) != up))[k])
    x[up, 0] += 1
    x[down, 0] -= 1
    return x


def _data(task, n=300, seed=0, levels=None, independent=(), speed=None, drop=(), nudge=()):
    rng = np.random.default_rng(seed)
    lv = {**LEVELS[task], **(levels or {})}
    metric = "span_f1" if task == "ner" else "accuracy"
    m = {"n_test": n, "metric": metric, "n_labels": 44,
         "speed": speed if speed is not None else _speed(rng),
         f"{EP}.gd_oracle": {f"{float(x)}": {"score": 1.0, "energy": -1.0} for x in NS},
         f"{EP}.tailored_infnet": {s: {"score": 1.0, "energy_pred": -1.0, "decode_seconds": 1.0} for s in STEPS},
         f"{EP}.gd_warm_start": {s: {"score": 1.0, "energy_pred": -1.0, "decode_seconds": 1.0} for s in STEPS}}
    st = {k: (_nudge(v, list(nudge).index(k)) if k in nudge else v)
          for k, v in _score_stats(task, n, rng, lv, independent).items() if k not in drop}
    vals = {k: v for k, v in _values(task, n, rng).items() if k.split(":", 1)[1] not in drop}
    return m, TaskData(m, Stats(stats_columns(metric), st), Stats(("value", "count"), vals))


def _judge(task="pos", **kw):
    m, d = _data(task, **kw)
    return {v.claim.id: v for v in findings({task: m}, {task: d}, ARCH) if v.scope.startswith(task)}


def test_every_claim_reproduced_on_paper_like_statistics():
    for task in ("pos", "ner"):
        got = _judge(task)
        # the POS equivalences compare bit-identical systems here: not testable, found by the kit itself
        want = {k: (kit.NOT_TESTABLE if k in IDENTICAL_POS else kit.REPRODUCED) for k in got}
        assert {k: v.verdict for k, v in got.items()} == want, task
        for k, v in got.items():                    # every verdict carries its evidence: an interval or its parts
            assert v.interval is not None or v.parts or (v.why == kit.IDENTICAL and k in IDENTICAL_POS)
            assert v.claim.quote and '"' in v.claim.quote, k          # the paper's sentence, quoted
            assert v.claim.hardware == (k in HARDWARE), k
    # nudged apart (the same totals, two sentences changed), the equivalences are inside their margin
    nudged = _judge("pos", nudge=(f"{EP}.cnn.infnet", f"{EP}.gd_oracle", f"{EP}.gd_oracle.20"))
    assert {k: nudged[k].verdict for k in IDENTICAL_POS} == {k: kit.REPRODUCED for k in IDENTICAL_POS}
    assert len(_judge("pos")) == 20 and len(_judge("ner")) == 21
    m, d = _data("pos")
    verdicts = findings({"pos": m}, {"pos": d}, ARCH)
    ccg = [v for v in verdicts if v.claim.id in CCG_ONLY]             # no CCG stand-in: every CCG claim not run
    assert {v.claim.id for v in ccg} == CCG_ONLY and len(ccg) == len(CCG_ONLY)
    assert all(v.verdict == kit.NOT_TESTABLE and v.why == kit.NOT_RUN and "greek_morph" in v.reason for v in ccg)
    rec = {"findings": kit.counts(verdicts), "findings_per_claim": kit.counts(verdicts, adjusted=False),
           "verdicts": kit.records(verdicts)}
    # counted: 13 POS claims reproduced (4 more are speeds, set apart), 3 identical and 9 CCG not testable
    assert rec["findings"] == {"reproduced": 13, "not_reproduced": 0, "inconclusive": 0, "not_testable": 12,
                               "hardware_bound": 4 + 5, "same_evidence": 0, "one_model": 13}
    assert rec["findings_per_claim"] == rec["findings"]
    assert len(rec["verdicts"]) == 20 + len(CCG_ONLY) and {"claim", "scope", "verdict", "adjusted"} <= set(rec["verdicts"][0])


def test_both_greek_morphology_tasks_stand_for_ccg():
    """greek_morph_k400 (the study's CCG stand-in: the 400 most frequent tags, as the paper cut CCG) and
    greek_morph are judged against the paper's CCG: the L = 400 speed claim replaces the small-L one,
    the CCG claims are judged on the task, and no CCG not-testable verdict is added."""
    m, d = _data("pos")
    for task in ("greek_morph_k400", "greek_morph"):
        verdicts = findings({task: m}, {task: d}, ARCH)
        ids = [v.claim.id for v in verdicts]
        assert ids.count("T3.ccg_viterbi_4-5x_slower") == 1 and "T3.viterbi>seq2seq_small_L" not in ids, task
        assert CCG_ONLY <= set(ids) and all(v.scope.startswith(task) for v in verdicts), task
        ccg = next(v for v in verdicts if v.claim.id == "T3.ccg_viterbi_4-5x_slower")
        assert ccg.verdict != kit.NOT_TESTABLE and ccg.scope.startswith(task), task


# the CCG stand-in's systems: Table 1 (seq2seq infnet above Viterbi, CNN infnet below the others), Table 4
# (local, BLSTM infnet+ and Viterbi within the margin; GD well below), GD at N = 20 / 40 below N = 500 / 1000
CCG_LEVELS = {f"{E1}.cnn.local": .70, f"{E1}.cnn.infnet": .72, f"{E1}.blstm.local": .80, f"{E1}.blstm.infnet": .85,
              f"{E1}.seq2seq.local": .82, f"{E1}.seq2seq.infnet": .90, f"{E1}.viterbi": .86, f"{E1}.gd_oracle": .60,
              f"{EP}.blstm.local": .95, f"{EP}.blstm.infnet": .95, f"{EP}.viterbi": .95, f"{EP}.gd_oracle": .80,
              f"{EP}.gd_oracle.20": .50, f"{EP}.gd_oracle.40": .70, **{f"{EP}.gd_oracle.{n}": .85 for n in (500, 1000)},
              **{f"{EP}.tailored_infnet.{s}": .95 for s in STEPS}, **{f"{EP}.gd_warm_start.{s}": .95 for s in STEPS}}


def _ccg(levels=None, nudge=(f"{EP}.blstm.local", f"{EP}.viterbi", f"{EP}.gd_oracle.1000")):
    """Statistics of the CCG stand-in: accuracy, the BLSTM infnet+, GD's energy still falling at N = 40, the
    discretised network's energy below GD's; the Table 4 systems and GD at N = 500 / 1000 nudged apart;
    Viterbi 5 times slower than seq2seq (L = 400)."""
    task, n = "greek_morph_k400", 300
    speed = _speed(np.random.default_rng(3), viterbi=8.0, gd=2.0)
    m, d = _data("pos", n=n, levels={**CCG_LEVELS, **(levels or {})}, nudge=nudge, speed=speed)
    rng = np.random.default_rng(7)
    v = -400 + rng.normal(0, 5, n)
    vals = {**d.values.systems,
            **{f"energy:{EP}.{k}": np.stack([v + x, np.ones(n)], 1) for k, x in
               (("blstm.infnet", .2), ("gd_oracle.20", 9.0), ("gd_oracle.40", 4.0), ("gd_oracle.500", 2.0),
                ("gd_oracle.1000", 1.9), ("viterbi", 0.0), ("gold", 3.0))},
            f"relaxed:{EP}.blstm.infnet": np.stack([v + .6, np.ones(n)], 1)}
    return task, m, TaskData(m, d.stats, Stats(d.values.columns, vals))


def test_the_ccg_claims_on_the_stand_in():
    task, m, d = _ccg()
    got = {v.claim.id: v for v in findings({task: m}, {task: d}, ARCH)}
    judged = CCG_ONLY - {"F2.ccg.tailor_warm_between", "F2.ccg.warm_faster_than_tailored"}
    assert {k: got[k].verdict for k in judged} == {k: kit.REPRODUCED for k in judged}
    for k in ("F2.ccg.tailor_warm_between", "F2.ccg.warm_faster_than_tailored"):    # needs timing repeats of the tuned rows
        assert got[k].verdict == kit.NOT_TESTABLE and got[k].why == kit.NOT_RUN and "repeats" in got[k].reason
        assert got[k].claim.hardware
    # GD 10 points below Viterbi at N = 1000: beyond the stated 4; 2 points below: the sign agrees, the size does not
    assert got["T6.ccg.gd_4pts_below"].claim.threshold == -4.0
    assert all(iv.high < -4 for _, iv in got["T6.ccg.gd_4pts_below"].parts)
    task, m, d = _ccg(levels={f"{EP}.gd_oracle.1000": .93})
    short = {v.claim.id: v for v in findings({task: m}, {task: d}, ARCH)}["T6.ccg.gd_4pts_below"]
    assert short.verdict == kit.NOT_REPRODUCED and all(-4 < iv.low and iv.high < 0 for _, iv in short.parts)
    # GD converged by N = 500: N = 1000 gives the same outputs, so the plateau is not testable (identical)
    task, m, d = _ccg(nudge=(f"{EP}.blstm.local", f"{EP}.viterbi"))
    vals = dict(d.values.systems)
    vals[f"energy:{EP}.gd_oracle.1000"] = vals[f"energy:{EP}.gd_oracle.500"]
    d = TaskData(m, d.stats, Stats(d.values.columns, vals))
    plateau = {v.claim.id: v for v in findings({task: m}, {task: d}, ARCH)}["F2.ccg.gd_plateau"]
    assert plateau.verdict == kit.NOT_TESTABLE and plateau.why == kit.IDENTICAL
    assert "converged by N = 500 on 300 of 300" in plateau.reason


@pytest.mark.parametrize("task, claim, levels, also", [
    ("pos", "T1.infnet>local", {f"{E1}.blstm.infnet": .60}, ()),                    # one architecture loses
    ("pos", "T1.seq2seq>blstm", {f"{E1}.blstm.infnet": .85}, ()),
    ("pos", "T1.pos.cnn_infnet>local,viterbi", {f"{E1}.viterbi": .95}, ()),
    ("pos", "T4.pos.local,infnet>viterbi", {f"{EP}.viterbi": .99}, ("T4.pos.gd≈viterbi", "T6.pos.gd20_acc≈viterbi")),
    ("pos", "T6.pos.infnet_acc>gd", {f"{EP}.gd_oracle.30": .99}, ()),
    ("ner", "T1.ner.viterbi_best", {f"{E1}.gd_oracle": .90}, ()),
    ("ner", "T1.ner.cnn_struggles", {f"{E1}.cnn.infnet": .90}, ("T1.ner.viterbi_best",)),
    ("ner", "T4.ner.gd<viterbi", {f"{EP}.gd_oracle": .95}, ()),
    ("ner", "T6.ner.tailor_warm_f1>infnet", {f"{EP}.tailored_infnet.5": .50}, ()),  # one step below infnet+
])
def test_a_clear_loss_is_not_reproduced_and_touches_only_its_claims(task, claim, levels, also):
    got = _judge(task, levels=levels)
    assert got[claim].verdict == kit.NOT_REPRODUCED
    # (the POS equivalences of bit-identical systems are not testable throughout: not this test's concern)
    assert {k for k, v in got.items() if v.verdict != kit.REPRODUCED and v.why != kit.IDENTICAL} == {claim, *also}


def test_a_difference_on_noise_is_inconclusive():
    # seq2seq and BLSTM networks of equal skill, drawn independently: the interval straddles zero
    got = _judge("pos", n=120, levels={f"{E1}.seq2seq.infnet": .75}, independent=(f"{E1}.seq2seq.infnet",))
    v = got["T1.seq2seq>blstm"]
    assert v.verdict == kit.INCONCLUSIVE and v.interval.low < 0 < v.interval.high


def test_equivalence_gives_all_three_verdicts():
    claim = "T4.pos.gd≈viterbi"
    same = _judge("pos")[claim]                                          # identical outputs: not testable
    assert same.verdict == kit.NOT_TESTABLE and same.why == kit.IDENTICAL and same.claim.margin == SCORE_MARGIN
    close_ = _judge("pos", nudge=(f"{EP}.gd_oracle",))[claim]           # two sentences changed: inside the margin
    assert close_.verdict == kit.REPRODUCED and -SCORE_MARGIN < close_.interval.low < 0 < close_.interval.high < SCORE_MARGIN
    far = _judge("pos", levels={f"{EP}.gd_oracle": .70})[claim]         # 20 points below: outside
    assert far.verdict == kit.NOT_REPRODUCED and far.interval.high <= -SCORE_MARGIN
    # Viterbi's outputs with a few sentences changed (4 better by a token, 1 worse): the interval reaches
    # past the margin on one side and inside it on the other
    m, d = _data("pos", n=100)
    gd = d.stats[f"{EP}.viterbi"].copy()
    gd[:4, 0] = np.minimum(gd[:4, 0] + 1, gd[:4, 1])
    gd[4:5, 0] = np.maximum(gd[4:5, 0] - 1, 0)
    stats = Stats(d.stats.columns, {**d.stats.systems, f"{EP}.gd_oracle": gd})
    noisy = {v.claim.id: v for v in findings({"pos": m}, {"pos": TaskData(m, stats, d.values)}, ARCH)}[claim]
    assert noisy.verdict == kit.INCONCLUSIVE and noisy.interval.low < SCORE_MARGIN < noisy.interval.high


def test_energy_claims_and_their_margin():
    m, d = _data("pos")
    margin = energy_margin(d.values, EP)
    assert margin == pytest.approx(ENERGY_MARGIN_FRACTION * 10)          # gold sits 10 above Viterbi
    got = _judge("pos")
    assert got["T6.pos.gd20_energy≈viterbi"].claim.margin == pytest.approx(margin)
    assert got["T6.warm_lowest"].verdict == kit.REPRODUCED and len(got["T6.warm_lowest"].parts) == 3
    # discretising lowers the energy on NER (the other side of the POS claim)
    assert _judge("ner")["T6.ner.discretise_lowers"].verdict == kit.REPRODUCED


def test_speed_claims_use_the_interleaved_repeats():
    rng = np.random.default_rng(1)
    got = _judge("pos", speed=_speed(rng, gd=50.0))                      # GD faster than seq2seq (40)
    v = got["T3.gd_slowest"]
    assert v.verdict == kit.NOT_REPRODUCED and dict(v.parts)["GD vs seq2seq"].n == 8 and dict(v.parts)["GD vs seq2seq"].seeds == 1
    got = _judge("pos", speed=_speed(rng, blstm=60.0))                   # BLSTM 1.5x seq2seq: below "2-4 times"
    assert got["T3.blstm_2-4x_seq2seq"].verdict == kit.NOT_REPRODUCED
    assert got["T3.blstm_2-4x_seq2seq"].interval.low > 0                 # faster, but short of the stated 2x
    assert got["T3.cnn_orders_faster"].verdict == kit.REPRODUCED          # CNN 1000 vs 60: >= 10x
    # "1-2 orders of magnitude" is at least 10x (size 1 on the log10 ratio): 5x faster is not reproduced
    slow_cnn = _judge("pos", speed=_speed(rng, cnn=500.0))["T3.cnn_orders_faster"]
    assert slow_cnn.claim.size == 1.0 and slow_cnn.verdict == kit.NOT_REPRODUCED
    assert 0 < dict(slow_cnn.parts)["cnn vs blstm"].low and dict(slow_cnn.parts)["cnn vs blstm"].high < 1
    assert _judge("pos", speed=_speed(rng))["T3.blstm_2-4x_seq2seq"].claim.size == pytest.approx(np.log10(2))
    # a speed claim we do not reproduce names the device as its known cause; a reproduced one does not
    assert "paper timed on a GPU" in got["T3.blstm_2-4x_seq2seq"].evidence()
    assert "GPU" not in got["T3.cnn_orders_faster"].evidence()
    sp = _speed(rng)
    sp["viterbi"]["bs10_repeats"] = list(np.array(sp["seq2seq"]["bs10_repeats"]) * (1 + rng.normal(0, .05, 8)))
    assert _judge("pos", speed=sp)["T3.viterbi>seq2seq_small_L"].verdict == kit.INCONCLUSIVE   # equal speeds
    sp = _speed(rng)
    del sp["gd"]["bs10_repeats"]                                         # timed once: no interval
    v = _judge("pos", speed=sp)["T3.gd_slowest"]
    assert v.verdict == kit.NOT_TESTABLE and "repeats" in v.reason


def test_speed_claims_timed_on_cpu_are_reported_but_not_counted():
    """The paper timed on a GPU, this run on CPU cores: a speed verdict stands in the table, and the counts
    set it apart (hardware_bound) — a speed claim not reproduced does not count against the paper."""
    rng = np.random.default_rng(2)
    m, d = _data("pos", speed=_speed(rng, gd=50.0, blstm=60.0))
    verdicts = findings({"pos": m}, {"pos": d}, ARCH)
    speed = [v for v in kit.finalise(verdicts) if v.claim.id.startswith("T3.") and v.scope.startswith("pos")]
    assert {v.claim.id for v in speed} == HARDWARE - CCG_ONLY and all(v.claim.hardware for v in speed)
    assert {v.claim.id for v in speed if v.verdict == kit.NOT_REPRODUCED} == {"T3.gd_slowest", "T3.blstm_2-4x_seq2seq"}
    assert not any(v.counted for v in speed)
    c = kit.counts(verdicts)
    assert c["not_reproduced"] == 0 and c["hardware_bound"] == 9


def test_spearman_claims_from_rank_statistics():
    m, d = _data("pos")
    got = _judge("pos")
    pos, amort = got["S6.2.rho>0"], got["S6.2.rho_infnet>gd"]
    assert pos.verdict == kit.REPRODUCED and amort.verdict == kit.REPRODUCED
    vals = d.values
    se = vals[f"energy:{E1}.blstm.infnet"][:, 0] - vals[f"energy:{E1}.viterbi"][:, 0]
    rho = spearman(vals["ppl:words"][:, 0], se)
    assert dict(pos.parts)["infnet words"].estimate == pytest.approx(rho)     # the estimate is Spearman's rho
    # GD's search error anti-correlated with the perplexities: rho > 0 not reproduced
    m, d = _data("pos")
    v = dict(d.values.systems)
    v[f"energy:{E1}.gd_oracle"] = v[f"energy:{E1}.viterbi"] - np.stack([v["ppl:words"][:, 0], np.zeros(300)], 1)
    got = {x.claim.id: x for x in findings({"pos": m}, {"pos": TaskData(m, d.stats, Stats(d.values.columns, v))}, ARCH)}
    assert got["S6.2.rho>0"].verdict == kit.NOT_REPRODUCED
    # "the correlations are higher for the inference network" speaks of those positive correlations: its
    # premise failed, so once the family is finalised it is not testable (premise), whatever its own interval
    amort = got["S6.2.rho_infnet>gd"]
    assert amort.claim.presumes == ("S6.2.rho>0",) and amort.verdict == kit.REPRODUCED
    final = {x.claim.id: x for x in kit.finalise(list(got.values()))}["S6.2.rho_infnet>gd"]
    assert final.verdict == kit.NOT_TESTABLE and final.why == kit.PREMISE


def test_the_ner_f1_gains_presume_the_energy_gains_and_meet_their_stated_size():
    """"The improvements in energy are sometimes joined by improvements in accuracy, notably for NER where
    the gains range from 0.4 to 0.7 in F1": a gain below 0.4 at a step is not reproduced, and where the
    energy improvement (its premise) is not reproduced the claim is not testable."""
    got = _judge("ner")
    v = got["T6.ner.tailor_warm_f1>infnet"]
    assert v.claim.size == 0.4 and v.claim.presumes == ("T6.tailor_warm<infnet",) and v.verdict == kit.REPRODUCED
    assert got["T4.ner.infnet>local"].claim.size == pytest.approx(0.3)
    m, d = _data("ner")
    vals = dict(d.values.systems)
    for s in STEPS:                       # tailoring and warm starting raise the energy above infnet+'s
        for k in ("tailored_infnet", "gd_warm_start"):
            vals[f"energy:{EP}.{k}.{s}"] = vals[f"energy:{EP}.seq2seq.infnet"] + 1.0
    verdicts = kit.finalise(findings({"ner": m}, {"ner": TaskData(m, d.stats, Stats(d.values.columns, vals))}, ARCH))
    got = {x.claim.id: x for x in verdicts if x.scope.startswith("ner")}
    assert got["T6.tailor_warm<infnet"].verdict == kit.NOT_REPRODUCED
    assert got["T6.ner.tailor_warm_f1>infnet"].verdict == kit.NOT_TESTABLE
    assert got["T6.ner.tailor_warm_f1>infnet"].why == kit.PREMISE


def test_gd_against_itself_after_it_converged_says_so():
    """GD's energy at N = 50 against N = 10 when GD had converged by N = 10: bit-identical, not testable
    (identical systems); converged on all but one sentence, the verdict's reason says the comparison is
    nearly vacuous."""
    m, d = _data("pos")
    vals = dict(d.values.systems)
    vals[f"energy:{EP}.gd_oracle.50"] = vals[f"energy:{EP}.gd_oracle.10"]
    same = {x.claim.id: x for x in findings({"pos": m}, {"pos": TaskData(m, d.stats, Stats(d.values.columns, vals))},
                                            ARCH)}["T6.gd_10<50_energy"]
    assert same.verdict == kit.NOT_TESTABLE and same.why == kit.IDENTICAL and "converged by N = 10 on 300 of 300" in same.reason
    one = vals[f"energy:{EP}.gd_oracle.10"].copy()
    one[0, 0] -= 0.5
    vals[f"energy:{EP}.gd_oracle.50"] = one
    near = {x.claim.id: x for x in findings({"pos": m}, {"pos": TaskData(m, d.stats, Stats(d.values.columns, vals))},
                                            ARCH)}["T6.gd_10<50_energy"]
    assert near.verdict == kit.INCONCLUSIVE and "converged by N = 10 on 299 of 300" in near.reason
    assert "nearly vacuous" in near.reason
    assert "converged" not in _judge("pos")["T6.gd_10<50_energy"].reason        # GD still improving: no note


def test_missing_statistics_make_claims_not_testable_with_the_reason():
    got = _judge("pos", drop=(f"{EP}.gd_oracle",))
    v = got["T4.pos.gd≈viterbi"]
    assert v.verdict == kit.NOT_TESTABLE and "gd_oracle not run" in v.reason
    m, _ = _data("ner")
    got = {x.claim.id: x for x in findings({"ner": m}, None, ARCH)}      # metrics predate the statistics files
    assert got["T4.ner.gd<viterbi"].verdict == kit.NOT_TESTABLE and "per-sentence" in got["T4.ner.gd<viterbi"].reason
    assert got["T3.gd_slowest"].verdict == kit.REPRODUCED                 # speed needs only the metrics


def test_report_prints_the_kit_findings_from_given_verdicts():
    m, d = _data("pos")
    verdicts = findings({"pos": m}, {"pos": d}, ARCH)
    md, fig = report({"pos": m}, ARCH, verdicts=verdicts)
    close(fig)
    assert kit.summary(verdicts) in md


def test_report_stage_writes_findings_and_verdicts(tmp_path):
    """The report stage reads metrics/approx/<task>.json and metrics/stats/approx/, and writes the kit's
    counts and records into its metrics."""
    import json

    import yaml

    from components.metrics.significance import save_stats
    from components.tracking.base import NullTracker
    from flows.stages import report as stage
    from flows.stages.common import run_stage

    m, d = _data("pos", n=60)
    (tmp_path / "metrics/approx").mkdir(parents=True)
    (tmp_path / "metrics/approx/pos.json").write_text(json.dumps({"pos": m}))
    save_stats(tmp_path / "metrics/stats/approx/pos.npz", d.stats.systems, d.stats.columns)
    save_stats(tmp_path / "metrics/stats/approx/pos.values.npz", d.values.systems, d.values.columns)
    params = yaml.safe_load(open("params.yaml"))
    params["studies"]["tu_gimpel"] = ["pos"]
    params["approx"].pop("tasks", None)
    with pytest.raises(FileNotFoundError, match=r"metrics/train_energy/pos\.json: no training metrics for 'pos'"):
        run_stage("report", stage.run, params, tmp_path, tracker=NullTracker())
    (tmp_path / "metrics/train_energy").mkdir(parents=True)
    (tmp_path / "metrics/infnets").mkdir(parents=True)
    (tmp_path / "metrics/train_energy/pos.json").write_text(json.dumps(
        {"pos-blstm_crf": {"best_epoch": 20.0, "epochs_run": 20.0}}))        # stopped by its cap
    (tmp_path / "metrics/infnets/pos.json").write_text(json.dumps(
        {"pos-blstm_crf.cnn.infnet": {"best_epoch": 5.0, "epochs_run": 8.0}}))
    out = run_stage("report", stage.run, params, tmp_path, tracker=NullTracker())
    written = json.loads((tmp_path / "metrics/report.json").read_text())
    f = out["findings"]
    assert written["findings"] == f == kit.counts(findings({"pos": m}, {"pos": d}, ARCH))
    assert written["findings_per_claim"] == kit.counts(findings({"pos": m}, {"pos": d}, ARCH), adjusted=False)
    assert sum(f[w.replace(" ", "_")] for w in kit.VERDICTS) + f["hardware_bound"] + f["same_evidence"] == \
        len(written["verdicts"]) == 20 + len(CCG_ONLY)
    assert f["reproduced"] == 13 and f["hardware_bound"] == 9 and f["not_testable"] == 3 + 9
    md = (tmp_path / "reports/tu_gimpel/README.md").read_text()
    assert "pos: 1 of 2 trainings (1 model)" in md and "| pos | blstm_crf | 1 of 1 | (20, 20) |" in md


def test_models_still_improving_at_their_epoch_cap_are_named_as_a_capped_budget():
    """A model whose best dev epoch is its last ran out of epochs (early stopping ends `patience`
    epochs after the best): the findings name it as a known cause, per task and replicate."""
    from components.reports.tu_gimpel import budget_note, budget_table, still_improving
    training = {"pos": {"pos-blstm_crf": {"best_epoch": 30.0, "epochs_run": 30.0,
                                          "replicates": {"1": {"best_epoch": 12.0, "epochs_run": 17.0},
                                                         "2": {"best_epoch": 30.0, "epochs_run": 30.0}}},
                        "pos-blstm_crf.cnn.local": {"best_epoch": 9.0, "epochs_run": 14.0}},
                "ner": {"ner-blstm_crf": {"best_epoch": 8.0, "epochs_run": 13.0}}}
    assert still_improving(training) == {"pos": [("blstm_crf", 2, 3)]}
    note = budget_note(training)
    assert "capped budget" in note and "pos: 2 of 4 trainings (1 model)" in note and "ner" not in note
    assert "| pos | blstm_crf | 2 of 3 | (30, 30), (12, 17), (30, 30) |" in budget_table(training)
    assert budget_note({"ner": training["ner"]}) == "" and budget_note(None) == ""
    assert "stopped early" in budget_table({"ner": training["ner"]})
    m, d = _data("pos")
    md, _ = report({"pos": m}, ARCH, stats={"pos": d}, training=training)
    assert "Known cause, a capped budget" in md and "## Training budgets" in md
    md0, _ = report({"pos": m}, ARCH, stats={"pos": d})
    assert "capped budget" not in md0 and "## Training budgets" not in md0
