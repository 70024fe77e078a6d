"""The Goyal et al. 2018 / thesis ch. 3-4 findings (issue 50): every claim coded with its quote, stated
sizes judged as sizes, premises gating through ``presumes``, the speed claim set apart as hardware-bound,
selections made on dev and judged on test, intervals from the per-sentence statistics (never from
stored records), and the CE screen judged from its statistics too."""
from __future__ import annotations

import numpy as np
import pytest

from components.metrics.sentence_stats import Stats
from components.metrics.significance import paired_interval
from components.metrics.tagging import stats_score
from components.reports import kit
from components.reports.goyal_2018 import (CLAIMS, GAIN_CCG_VS_NER, MT_CLAIMS, SEARCH_AWARE, SOFT_HARD_MARGIN,
                                           SPEED_CLAIM, findings, screen_markdown, screen_verdicts)


def _var(greedy, beam=None, soft=None, *, seeds=1, failed=False, failure=""):
    beam = greedy if beam is None else beam
    soft = beam if soft is None else soft
    scores = {"greedy": greedy, "beam": beam, "soft_beam": soft}
    return {"objective": "seq_ce", "feed": "gold", "alpha": "none", "decay_k": None, "config": {}, "seeds": seeds,
            "dev": {k: v - 1.0 for k, v in scores.items()}, "test": scores, "dev_std": {k: 0.0 for k in scores},
            "test_std": {k: 0.0 for k in scores}, "epochs_run": 10.0, "best_epoch": 7.0, "seconds_per_epoch": 3.5,
            "failed": failed, "failure": failure}


def _task(variants, metric="accuracy"):
    return {"metric": metric, "n_labels": 13, "top_k_labels": 0, "beam_size": 4, "n_train": 2394,
            "variants": variants, "curves": {}}


def _good_ner(metric="accuracy"):
    """Every claim made for NER holds, by more than its stated size."""
    return _task({
        "ce": _var(50.0, 49.0, 49.5),
        "hinge_annealed": _var(48.0, 47.0, 47.5), "hinge_alpha1": _var(46.0, 45.0, 45.2),
        "dl_alpha1": _var(50.0, 51.0, 51.2), "dl_annealed": _var(52.0, 53.0, 53.2),
        "ss_greedy": _var(51.0), "ss_sample": _var(50.5),
        "dss_fixed_greedy": _var(52.0), "dss_fixed_sample": _var(51.5),
        "dss_annealed_greedy": _var(54.5), "dss_annealed_sample": _var(51.0),
        "dss_k100": _var(52.5), "dss_k10": _var(52.0), "dss_k1": _var(51.0), "dss_always": _var(50.0),
    }, metric)


def _good_ccg():
    """Every claim made for CCG holds by more than its stated size (CE beam +3 over greedy; DL +6)."""
    return _task({
        "ce": _var(80.0, 83.0, 82.9),
        "hinge_annealed": _var(83.0, 84.0, 84.2), "hinge_alpha1": _var(82.0, 83.5, 83.6),
        "dl_alpha1": _var(83.0, 84.5, 84.4), "dl_annealed": _var(85.0, 86.5, 86.4),
        "ss_greedy": _var(80.5), "ss_sample": _var(80.2),
        "dss_fixed_greedy": _var(81.0), "dss_fixed_sample": _var(80.9),
        "dss_annealed_greedy": _var(81.2), "dss_annealed_sample": _var(80.8),
    })


N, TOKENS = 300, 10


def _stats(scores, *, noise=0.0, seed=0, n=N, metric="accuracy", seeds=1):
    """Per-sentence statistics of each system ``variant/decoding`` -> score (%). Accuracy: ``[correct,
    tokens]``; span F1: ``[tp, predicted, gold]`` with ``predicted = gold = tokens`` (so F1 = tp / tokens).
    ``noise`` 0: every sentence has the same share of correct tokens (an interval of width ~0 around the
    true difference); > 0: each system's per-sentence count is drawn independently. ``seeds`` > 1: the
    runs of one system differ by a shift of ±``noise`` sentences' worth, the same for every system."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, acc in scores.items():
        runs = []
        for s in range(seeds):
            p = acc / 100.0
            if noise:
                correct = rng.binomial(TOKENS, p, size=n).astype(float)
            else:        # exact share: sentence i gets floor/ceil so that the total is p * n * TOKENS
                total = int(round(p * n * TOKENS)) + s
                correct = np.full(n, total // n, dtype=float)
                correct[: total % n] += 1
            cols = [correct, np.full(n, float(TOKENS))]
            if metric == "span_f1":
                cols.append(np.full(n, float(TOKENS)))
            runs.append(np.stack(cols, 1))
        out[name] = runs[0] if seeds == 1 else np.stack(runs)
    return Stats(("correct", "tokens") if metric == "accuracy" else ("tp", "predicted", "gold"), out)


def _scores(m):
    return {f"{v}/{d}": s for v, r in m["variants"].items() for d, s in r["test"].items()}


def _by(verdicts, task=None):
    return {v.claim.id: v for v in verdicts if task is None or v.scope == task}


def _run(**tasks):
    metrics = {"tasks": tasks}
    return findings(metrics, {t: _stats(_scores(m), metric=m["metric"]) for t, m in tasks.items()})


NER_CLAIMS = {"dl_annealed_beats_ce", "dl_annealed_beats_ce_beam", "annealed_beats_alpha1_dl",
              "annealed_beats_alpha1_hinge", "soft_equals_hard", "ce_beam_vs_greedy_ner", "dl_beats_hinge",
              "hinge_vs_ce_ner", "relaxed_ss_ranking", "dss_gain_over_ce", "dss_gain_over_ss", "gentler_decay_ranking",
              "similar_speed"}
CCG_CLAIMS = {"dl_annealed_beats_ce", "dl_annealed_beats_ce_beam", "annealed_beats_alpha1_dl",
              "annealed_beats_alpha1_hinge", "soft_equals_hard", "ce_beam_vs_greedy_ccg", "dl_beats_hinge",
              "hinge_vs_ce_ccg", "relaxed_ss_ranking", "similar_speed"}


# ---------------------------------------------------------------------------------------------
# the claims as coded
def _all_claims():
    return [c for spec in CLAIMS for c in spec.claims.values()] + [GAIN_CCG_VS_NER, SPEED_CLAIM, *MT_CLAIMS]


def test_every_claim_quotes_the_paper_and_states_its_size():
    for c in _all_claims():
        assert c.quote and ("Sec." in c.quote or "§" in c.quote or "Abstract" in c.quote or "Table" in c.quote), c.id
    claims = {(c.id, c.paper.source): c for c in _all_claims()}
    size = {cid: c.size for (cid, _), c in claims.items() if c.kind == "direction"}
    by_task = {(c.id, "CCG" if "Table 1" in c.paper.source else "NER"): c.size
               for spec in CLAIMS for c in spec.claims.values() if c.id == "dl_annealed_beats_ce"}
    assert by_task == {("dl_annealed_beats_ce", "CCG"): 5.45, ("dl_annealed_beats_ce", "NER"): 1.45}
    assert size["ce_beam_vs_greedy_ccg"] == 2.0 and size["ce_beam_vs_greedy_ner"] == 0.0
    assert size["dss_gain_over_ce"] == 3.05 and size["dss_gain_over_ss"] == 1.45
    assert size["dss_sample_gain_over_ce_mt"] == 1.45 and size["dss_sample_gain_over_ss_mt"] == 0.745
    # unquantified words ("substantially", "more pronounced", "always better") carry no size
    for cid in ("dl_annealed_beats_ce_beam", "dl_gain_larger_on_ccg", "annealed_beats_alpha1_dl", "dl_beats_hinge"):
        assert size[cid] == 0.0, cid
    # the thesis's "+1.5 F1 over standard scheduled sampling" is over Bengio et al.'s greedy variant (54.83)
    gain_ss = next(c for c in _all_claims() if c.id == "dss_gain_over_ss")
    assert (gain_ss.paper.a, gain_ss.paper.b) == (56.33, 54.83) and "+3.1" in gain_ss.quote
    assert GAIN_CCG_VS_NER.paper.delta == pytest.approx(5.47 - 1.23)
    # premises and hardware, as data
    presumes = {c.id: c.presumes for c in _all_claims() if c.presumes}
    assert presumes == {"hinge_vs_ce_ccg": ("ce_beam_vs_greedy_ccg",), "hinge_vs_ce_ner": ("ce_beam_vs_greedy_ner",)}
    assert [c.id for c in _all_claims() if c.hardware] == ["similar_speed"]


# ---------------------------------------------------------------------------------------------
# verdicts from constructed per-sentence statistics whose verdict is known
def test_claims_hold_where_the_statistics_say_so_and_fail_where_they_say_the_opposite():
    bad = _task({
        "ce": _var(90.0, 89.0, 89.0),
        "hinge_annealed": _var(88.0, 89.0, 86.0), "hinge_alpha1": _var(88.0, 90.0, 87.0),
        "dl_alpha1": _var(88.0, 90.0, 87.0), "dl_annealed": _var(88.0, 88.0, 85.0),
        "ss_greedy": _var(89.0), "ss_sample": _var(88.0),
        "dss_fixed_greedy": _var(89.5), "dss_fixed_sample": _var(89.0),
        "dss_annealed_greedy": _var(88.0), "dss_annealed_sample": _var(88.5),
    })
    verdicts = _run(ner=_good_ner(), greek_morph=bad)
    ner, morph = _by(verdicts, "ner"), _by(verdicts, "greek_morph")
    assert set(ner) == NER_CLAIMS and set(morph) == CCG_CLAIMS
    judged = {k: v.verdict for k, v in ner.items() if k != "similar_speed"}
    assert set(judged.values()) == {kit.REPRODUCED}, judged
    # the CCG stand-in: every claim the other way round; G̃hinge's claim rests on CE beam > greedy
    # there, which fails, so it is not testable (premise) rather than judged
    assert morph["hinge_vs_ce_ccg"].verdict == kit.NOT_TESTABLE and morph["hinge_vs_ce_ccg"].why == kit.PREMISE
    judged = {k: v.verdict for k, v in morph.items() if k not in ("hinge_vs_ce_ccg", "similar_speed")}
    assert set(judged.values()) == {kit.NOT_REPRODUCED}, judged
    # across the two tasks: CCG's gain −2 is not more pronounced than NER's +3
    gain = _by(verdicts, "greek_morph vs ner")["dl_gain_larger_on_ccg"]
    assert gain.verdict == kit.NOT_REPRODUCED and gain.interval.estimate == pytest.approx((88 - 90) - (53 - 50))
    # every verdict carries its interval (a ranking: one per part) and n
    for v in ner.values():
        if v.verdict != kit.NOT_TESTABLE:
            assert all(iv.n == N and iv.low <= iv.estimate <= iv.high for iv in v.intervals)
    d = ner["dl_annealed_beats_ce"]
    assert d.interval.estimate == pytest.approx(53.0 - 50.0) and d.claim.paper.a == 56.15 and d.claim.paper.b == 54.92
    assert [label for label, _ in ner["relaxed_ss_ranking"].parts] == ["relaxed − Bengio", "Bengio − CE"]
    assert len(ner["gentler_decay_ranking"].parts) == 3 and len(ner["soft_equals_hard"].parts) == 4
    rec = d.record()
    assert rec["claim"] == "dl_annealed_beats_ce" and rec["verdict"] == kit.REPRODUCED and rec["n"] == N
    assert rec["size"] == 1.45 and rec["scope_of_evidence"] == "this trained model (1 seed)"


def test_the_intervals_are_paired_intervals_of_the_test_statistics():
    m = _good_ner("span_f1")
    st = _stats(_scores(m), noise=1.0, metric="span_f1")
    d = _by(findings({"tasks": {"ner": m}}, {"ner": st}), "ner")["dl_annealed_beats_ce"]
    want = paired_interval(st["dl_annealed/beam"], st["ce/greedy"], stats_score("span_f1"))
    assert d.interval == want and d.interval.fingerprint == want.fingerprint


def test_findings_are_the_finalised_family():
    verdicts = _run(ner=_good_ner())
    assert all(v.adjusted for v in verdicts)                       # kit.finalise ran: Holm-adjusted words
    assert kit.finalise(verdicts) == verdicts
    c = kit.counts(verdicts)
    assert c["hardware_bound"] == 1                                # the speed claim: reported, not counted
    assert c["not_testable"] == 4                                  # CCG (no stand-in), CCG vs NER, MT twice
    assert sum(c[w.replace(" ", "_")] for w in kit.VERDICTS) == len(verdicts) - 1


# ---------------------------------------------------------------------------------------------
# stated sizes
@pytest.mark.parametrize("gain, want", [(1.0, kit.NOT_REPRODUCED), (2.0, kit.REPRODUCED)])
def test_a_gain_short_of_the_stated_size_is_not_reproduced(gain, want):
    m = _good_ner()
    m["variants"]["dl_annealed"]["test"]["beam"] = 50.0 + gain       # over CE greedy 50; the paper: "+1.5 F1"
    v = _by(_run(ner=m), "ner")["dl_annealed_beats_ce"]
    assert v.interval.low > 0 and v.verdict == want                 # the sign agrees either way


@pytest.mark.parametrize("beam, want", [(81.0, kit.NOT_REPRODUCED), (83.0, kit.REPRODUCED)])
def test_the_ccg_baseline_beam_gain_is_judged_against_2_points(beam, want):
    m = _good_ccg()
    m["variants"]["ce"]["test"]["beam"] = beam                      # over greedy 80: +1 or +3
    by = _by(_run(greek_morph=m), "greek_morph")
    assert by["ce_beam_vs_greedy_ccg"].verdict == want and by["ce_beam_vs_greedy_ccg"].interval.low > 0
    # the premise of G̃hinge's claim follows it
    assert (by["hinge_vs_ce_ccg"].why == kit.PREMISE) == (want != kit.REPRODUCED)


@pytest.mark.parametrize("dss, want_ce, want_ss", [(54.5, kit.REPRODUCED, kit.REPRODUCED),
                                                   (50.8, kit.NOT_REPRODUCED, kit.NOT_REPRODUCED),
                                                   (52.3, kit.NOT_REPRODUCED, kit.REPRODUCED)])
def test_the_thesis_gains_are_judged_against_3_1_and_1_5_f1(dss, want_ce, want_ss):
    m = _good_ner("span_f1")
    m["variants"]["ss_greedy"]["test"]["greedy"] = 50.0               # CE 50, Bengio greedy 50: equal gains
    m["variants"]["dss_annealed_greedy"]["test"]["greedy"] = dss
    by = _by(_run(ner=m), "ner")
    assert by["dss_gain_over_ce"].verdict == want_ce and by["dss_gain_over_ss"].verdict == want_ss
    assert by["dss_gain_over_ce"].interval.estimate == pytest.approx(dss - 50.0, abs=0.01)


def test_a_task_without_a_paper_counterpart_gets_directions_without_sizes():
    verdicts = _run(my_task=_good_ner())
    mine = _by(verdicts, "my_task")
    assert "ce_beam_vs_greedy_ner" not in mine and "hinge_vs_ce_ner" not in mine and "dss_gain_over_ce" not in mine
    assert mine["dl_annealed_beats_ce"].claim.size == 0.0 and mine["dl_annealed_beats_ce"].claim.paper.source == \
        "no paper counterpart"
    assert kit.judge_paper(mine["dl_annealed_beats_ce"].claim)[0] == kit.NOT_TESTABLE
    by = _by(verdicts)
    assert by["ce_beam_vs_greedy_ccg"].verdict == kit.NOT_TESTABLE and by["ce_beam_vs_greedy_ccg"].scope == "CCG stand-in"
    assert by["ce_beam_vs_greedy_ccg"].why == kit.NOT_RUN


# ---------------------------------------------------------------------------------------------
# premises, hardware, identical systems, not run
def test_hinge_on_ner_presumes_the_ce_model_is_worse_with_beam_search():
    m = _good_ner()
    assert _by(_run(ner=m), "ner")["hinge_vs_ce_ner"].verdict == kit.REPRODUCED       # CE beam 49 < greedy 50
    m["variants"]["ce"]["test"]["beam"] = 51.0                                       # now beam helps CE
    by = _by(_run(ner=m), "ner")
    assert by["ce_beam_vs_greedy_ner"].verdict == kit.NOT_REPRODUCED
    v = by["hinge_vs_ce_ner"]
    assert v.verdict == kit.NOT_TESTABLE and v.why == kit.PREMISE and "premise not met" in v.reason
    assert v.interval is not None                       # the evidence is kept, only not judged
    assert v.counted and v.final == kit.NOT_TESTABLE


def test_the_speed_claim_is_hardware_bound_and_kept_out_of_the_counts():
    verdicts = _run(ner=_good_ner(), greek_morph=_good_ccg())
    speed = [v for v in verdicts if v.claim.id == "similar_speed"]
    assert [v.scope for v in speed] == ["ner", "greek_morph"]
    assert all(v.verdict == kit.NOT_TESTABLE and v.why == kit.NOT_RUN and not v.counted for v in speed)
    assert "CPU" in speed[0].reason and kit.counts(verdicts)["hardware_bound"] == 2
    # no relaxed scheduled-sampling variant on a task: no speed claim there
    only_beam = _task({k: v for k, v in _good_ner()["variants"].items() if not k.startswith(("ss_", "dss_"))})
    assert "similar_speed" not in _by(_run(ner=only_beam), "ner")


def test_identical_systems_are_not_testable():
    m = _good_ner()
    m["variants"]["dl_annealed"]["test"]["soft_beam"] = m["variants"]["dl_annealed"]["test"]["beam"]
    v = _by(_run(ner=m), "ner")["soft_equals_hard"]
    assert v.verdict == kit.NOT_TESTABLE and v.why == kit.IDENTICAL and "dl_annealed soft − hard" in v.reason


def test_mt_claims_are_not_run():
    mt = {v.claim.id: v for v in _run(ner=_good_ner()) if v.scope == "MT"}
    assert set(mt) == {"dss_sample_gain_over_ce_mt", "dss_sample_gain_over_ss_mt"}
    assert all(v.verdict == kit.NOT_TESTABLE and v.why == kit.NOT_RUN and "translator" in v.reason for v in mt.values())


def test_failed_unselectable_and_missing_variants_are_not_testable_with_their_kind():
    m = _good_ner()
    m["variants"]["hinge_alpha1"].update(failed=True, failure="test accuracy 3.00 is not above the majority tag's")
    m["variants"]["dl_annealed"]["no_selectable_epoch"] = "replicate(s) [0]: α never left 1"
    del m["variants"]["ss_sample"], m["variants"]["ss_greedy"]
    verdicts = _by(_run(ner=m))
    for cid in ("dl_annealed_beats_ce", "annealed_beats_alpha1_dl", "dl_beats_hinge"):
        assert verdicts[cid].verdict == kit.NOT_TESTABLE and "annealed α had left 1" in verdicts[cid].reason
        assert verdicts[cid].why == kit.FAILED_RUN
    assert "did not learn" in verdicts["annealed_beats_alpha1_hinge"].reason
    assert verdicts["annealed_beats_alpha1_hinge"].why == kit.FAILED_RUN
    assert verdicts["soft_equals_hard"].verdict == kit.NOT_TESTABLE
    assert "ss_greedy not run" in verdicts["relaxed_ss_ranking"].reason and verdicts["relaxed_ss_ranking"].why == kit.NOT_RUN
    assert "dss_gain_over_ss" in verdicts and verdicts["dss_gain_over_ss"].why == kit.NOT_RUN
    assert verdicts["hinge_vs_ce_ner"].verdict == kit.REPRODUCED          # its sides are fine
    st = _stats(_scores(m))
    del st.systems["ce/greedy"]
    v = _by(findings({"tasks": {"ner": m}}, {"ner": st}))["dl_annealed_beats_ce"]
    assert "no per-sentence statistics for ce/greedy" in v.reason and "annealed α" in v.reason
    assert v.why == kit.FAILED_RUN                       # a failed side outranks a missing one
    v = _by(findings({"tasks": {"ner": m}}, {"ner": st}))["dss_gain_over_ce"]
    assert "no per-sentence statistics for ce/greedy" in v.reason and v.why == kit.NOT_RUN


# ---------------------------------------------------------------------------------------------
# selections on dev, judged on test
def test_groups_are_represented_by_their_best_on_dev_and_judged_on_test():
    m = _good_ner()
    # ss_sample best on dev but worst on test: the ranking must use it (and then fails its part)
    m["variants"]["ss_sample"]["dev"]["greedy"] = 99.0
    m["variants"]["ss_sample"]["test"]["greedy"] = 40.0
    v = _by(_run(ner=m))["relaxed_ss_ranking"]
    parts = dict(v.parts)
    assert parts["Bengio − CE"].estimate == pytest.approx(40.0 - 50.0)
    assert v.verdict == kit.NOT_REPRODUCED
    # a variant best on test but not on dev is never picked
    m = _good_ner()
    m["variants"]["dss_fixed_sample"]["test"]["greedy"] = 70.0
    parts = dict(_by(_run(ner=m))["relaxed_ss_ranking"].parts)
    assert parts["relaxed − Bengio"].estimate == pytest.approx(54.5 - 51.0)


# ---------------------------------------------------------------------------------------------
# the gain on CCG against the gain on NER, across the two tasks
def test_the_gain_is_more_pronounced_on_the_ccg_stand_in():
    ner, ccg = _good_ner("span_f1"), _good_ccg()       # NER: DL beam 53 − CE greedy 50; CCG: 95 − 80
    ccg["variants"]["dl_annealed"]["test"]["beam"] = 95.0
    stats = {"ner": _stats(_scores(ner), metric="span_f1", noise=1.0, n=200, seeds=3),
             "greek_morph": _stats(_scores(ccg), noise=1.0, seed=1, seeds=3)}
    verdicts = findings({"tasks": {"ner": ner, "greek_morph": ccg}}, stats)
    v = _by(verdicts, "greek_morph vs ner")["dl_gain_larger_on_ccg"]
    f1, acc = stats_score("span_f1"), stats_score("accuracy")
    gains = [float(acc(stats["greek_morph"]["dl_annealed/beam"][s].sum(0)) -
                   acc(stats["greek_morph"]["ce/greedy"][s].sum(0)) -
                   (f1(stats["ner"]["dl_annealed/beam"][s].sum(0)) - f1(stats["ner"]["ce/greedy"][s].sum(0))))
             for s in range(3)]
    assert v.interval.estimate == pytest.approx(np.mean(gains)) and v.interval.seeds == 3
    assert v.interval.n == 200 + N and v.verdict == kit.REPRODUCED
    # seeds that cannot be paired across the tasks: not testable, saying why
    stats["greek_morph"] = _stats(_scores(ccg), noise=1.0, seed=1)
    v = _by(findings({"tasks": {"ner": ner, "greek_morph": ccg}}, stats), "greek_morph vs ner")["dl_gain_larger_on_ccg"]
    assert v.verdict == kit.NOT_TESTABLE and "paired by seed" in v.reason and v.why == kit.OTHER
    # no CCG stand-in: not run
    v = _by(_run(ner=ner))["dl_gain_larger_on_ccg"]
    assert v.verdict == kit.NOT_TESTABLE and v.why == kit.NOT_RUN


# ---------------------------------------------------------------------------------------------
# equivalence and noise
def test_soft_hard_equivalence_gives_all_three_verdicts():
    m = _good_ner()

    def verdict(soft_minus_hard, noise=0.0, n=N):
        scores = _scores(m)
        for v in SEARCH_AWARE:
            scores[f"{v}/soft_beam"] = scores[f"{v}/beam"] + soft_minus_hard
        return _by(findings({"tasks": {"ner": m}}, {"ner": _stats(scores, noise=noise, n=n)}))["soft_equals_hard"]

    assert verdict(0.3).verdict == kit.REPRODUCED                     # inside ±1 point
    assert verdict(-4.0).verdict == kit.NOT_REPRODUCED                # outside, on either side
    assert verdict(4.0).verdict == kit.NOT_REPRODUCED
    assert verdict(0.0, noise=1.0, n=80).verdict == kit.INCONCLUSIVE  # too few sentences to tell
    assert SOFT_HARD_MARGIN == 1.0


def test_differences_on_noise_are_never_reproduced():
    m = _good_ner()
    flat = {k: 70.0 for k in _scores(m)}           # every system alike: only sampling noise differs
    verdicts = _by(findings({"tasks": {"ner": m}}, {"ner": _stats(flat, noise=1.0, n=60)}), "ner")
    judged = {k: v for k, v in verdicts.items() if v.verdict != kit.NOT_TESTABLE}
    assert len(judged) >= 10 and kit.REPRODUCED not in {v.verdict for v in judged.values()}
    # a claim with no size or margin cannot be ruled out by a null difference; one with a size may be
    # (the truth, 0, is short of it)
    open_ = {k: v.verdict for k, v in judged.items() if v.claim.kind == "direction" and not v.claim.size}
    assert len(open_) >= 6 and set(open_.values()) == {kit.INCONCLUSIVE}, open_


def test_paper_column_follows_the_same_rule():
    claims = {c.id: c for spec in CLAIMS for c in spec.claims.values()}
    assert kit.judge_paper(claims["soft_equals_hard"])[0] == kit.REPRODUCED          # NER's largest gap 0.85 < 1
    assert claims["ce_beam_vs_greedy_ner"].sign == -1
    assert kit.judge_paper(claims["ce_beam_vs_greedy_ner"])[0] == kit.REPRODUCED     # 51.34 < 54.92
    assert kit.judge_paper(claims["ce_beam_vs_greedy_ccg"])[0] == kit.REPRODUCED     # +2.07 beyond 2
    assert kit.judge_paper(claims["hinge_vs_ce_ner"])[0] == kit.REPRODUCED
    assert kit.judge_paper(claims["gentler_decay_ranking"])[0] == kit.REPRODUCED
    # the thesis's Table 3.1 gives +3.01 for its stated "+3.1": short of its own stated size
    assert kit.judge_paper(claims["dss_gain_over_ce"])[0] == kit.NOT_REPRODUCED


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="tasks"):
        findings({"ner": _good_ner()}, {})


# ---------------------------------------------------------------------------------------------
# the CE screen: intervals from its per-sentence statistics, not from the records it stored
def _screen():
    model = lambda g, b: {"encoder": "lstm", "greedy": g, "beam": b, "best_epoch": 3, "epochs_run": 4}  # noqa: E731
    bogus = {"estimate": 99.0, "low": 98.0, "high": 100.0, "confidence": 0.95, "n": 5, "seeds": 1, "resamples": 2000}
    gaps = {g: dict(bogus) for g in ("beam_minus_greedy", "bi_beam_minus_greedy", "bi_minus_uni")}
    return {"beam_size": 3, "max_train_sentences": 800, "epochs": 4, "skipped": {"cmudict": "not a tagging task"},
            "tasks": {"ner": {"metric": "accuracy", "n_test": N, "majority": 0.0,
                              "models": {"uni": model(30.0, 33.0), "bi": model(40.0, 40.5)}, "gaps": gaps},
                      "greek_morph_k400": {"metric": "accuracy", "n_test": N, "majority": 20.0,
                                           "models": {"uni": model(80.0, 80.0), "bi": model(80.8, 80.9)},
                                           "gaps": gaps}}}


def _screen_stats(screen, noise=0.0):
    return {t: _stats({"uni/greedy": r["models"]["uni"]["greedy"], "uni/beam": r["models"]["uni"]["beam"],
                       "bi/greedy": r["models"]["bi"]["greedy"], "bi/beam": r["models"]["bi"]["beam"]}, noise=noise)
            for t, r in screen["tasks"].items()}


def test_screen_verdicts_come_from_the_statistics_and_the_table_shows_them():
    screen = _screen()
    stats = _screen_stats(screen)
    v = screen_verdicts(screen, stats)
    assert v["ner"]["beam_minus_greedy"].verdict == kit.REPRODUCED and v["ner"]["bi_minus_uni"].verdict == kit.REPRODUCED
    assert v["ner"]["beam_minus_greedy"].interval.estimate == pytest.approx(3.0)      # not the stored 99
    assert v["ner"]["beam_minus_greedy"].interval == paired_interval(stats["ner"]["uni/beam"], stats["ner"]["uni/greedy"],
                                                                     stats_score("accuracy"))
    assert v["greek_morph_k400"]["beam_minus_greedy"].why == kit.IDENTICAL              # uni beam = greedy
    assert v["ner"]["premise"].verdict == kit.REPRODUCED
    assert v["greek_morph_k400"]["premise"].verdict == kit.NOT_TESTABLE
    md = screen_markdown(screen, stats)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert rows["ner"].endswith("| **reproduced** |") and "Δ +3.00" in rows["ner"]
    assert "cmudict" in md and "not a tagging task" in md and "bootstrap" not in md
    dull = _screen()
    dull["tasks"]["ner"]["models"]["uni"]["greedy"] = 0.0            # the majority tag's
    v = screen_verdicts(dull, _screen_stats(dull))["ner"]
    assert v["premise"].verdict == kit.NOT_TESTABLE and "uni CE model did not learn" in v["premise"].reason
    assert v["premise"].why == kit.FAILED_RUN
    assert "did not learn" in screen_markdown(dull, _screen_stats(dull))
    # no statistics for a task: not testable (not run), never the stored record
    v = screen_verdicts(screen, {"ner": stats["ner"]})["greek_morph_k400"]
    assert all(x.verdict == kit.NOT_TESTABLE and x.why == kit.NOT_RUN for x in v.values())
