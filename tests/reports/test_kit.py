"""The report kit's verdict rule (issues 27, 50): verdicts are objects; every verdict carries its
interval; a claim whose interval straddles its size is inconclusive and one whose interval lies short
of its stated size is not reproduced; an equivalence claim with a margin gives each of the three
verdicts; identical systems, true-by-construction claims and failed premises are not testable; the
same evidence is counted once, hardware-bound claims apart, and Holm adjusts the family."""
from __future__ import annotations

import pytest

from components.metrics.significance import Interval
import json
import math

import numpy as np

from components.metrics.sentence_stats import mean_score
from components.metrics.significance import paired_interval
from components.reports import kit
from components.reports.kit import (INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, Claim, PaperEvidence,
                                    counts, findings, finalise, judge, judge_paper, judge_parts, not_testable, rule,
                                    summary, table)


def _iv(low: float, high: float, seeds: int = 3, fp: str = "") -> Interval:
    """A constructed interval with the normal quantile's se (many df)."""
    return Interval((low + high) / 2, low, high, 0.95, 240, seeds, se=(high - low) / (2 * 1.959963984540054),
                    fingerprint=fp or f"{low}:{high}")


BEATS = Claim("dl>ce", "DL-annealed beats CE", "dl_annealed", "ce", sign=1)
SAME = Claim("soft~hard", "soft and hard beam decoding do not differ much", "soft", "hard",
             kind="equivalence", margin=1.0)


@pytest.mark.parametrize("low, high, want", [(0.3, 2.0, REPRODUCED), (-2.0, -0.1, NOT_REPRODUCED),
                                             (-0.5, 2.1, INCONCLUSIVE), (0.0, 1.0, INCONCLUSIVE)])
def test_a_direction_claim(low, high, want):
    v = judge(BEATS, "ner", _iv(low, high))
    assert v.verdict == want and v.interval.low == low
    assert "n = 240" in v.evidence() and "95% CI" in v.evidence()
    # the p-values come from the same statistic: reproduced exactly when p_reproduced < 0.025
    assert (v.p_reproduced < 0.025) == (want == REPRODUCED) and (v.p_not < 0.025) == (want == NOT_REPRODUCED)


def test_a_claimed_decrease_flips_the_sides():
    worse = Claim("x", "beam hurts CE on NER", "ce_beam", "ce_greedy", sign=-1)
    assert rule(worse, -2.0, -0.5) == REPRODUCED and rule(worse, 0.5, 2.0) == NOT_REPRODUCED
    assert rule(worse, -0.5, 0.5) == INCONCLUSIVE


def test_an_equivalence_claim_gives_all_three_verdicts():
    assert judge(SAME, "greek", _iv(-0.4, 0.7)).verdict == REPRODUCED            # inside the margin
    assert judge(SAME, "greek", _iv(1.2, 3.0)).verdict == NOT_REPRODUCED         # wholly outside
    assert judge(SAME, "greek", _iv(-3.0, -1.0)).verdict == NOT_REPRODUCED
    assert judge(SAME, "greek", _iv(0.2, 1.6)).verdict == INCONCLUSIVE           # crosses the margin
    with pytest.raises(ValueError, match="margin > 0"):
        Claim("e", "t", "a", "b", kind="equivalence")


def test_a_missing_side_is_not_testable_with_its_reason():
    v = judge(BEATS, "greek", None, missing="the CE model did not learn")
    assert v.verdict == NOT_TESTABLE and v.evidence() == "the CE model did not learn"


def test_the_paper_column_uses_the_same_rule_when_the_paper_allows():
    with_sd = Claim("c", "t", "a", "b", paper=PaperEvidence(a=56.3, b=54.8, sd_a=0.5, sd_b=0.5, runs=5))
    assert judge_paper(with_sd)[0] == REPRODUCED                                  # 1.5 ± 0.62
    noisy = Claim("c", "t", "a", "b", paper=PaperEvidence(a=56.3, b=54.8, sd_a=2.0, sd_b=2.0, runs=3))
    assert judge_paper(noisy)[0] == INCONCLUSIVE
    points = Claim("c", "t", "a", "b", paper=PaperEvidence(a=56.33, b=54.83, source="Table 3.2"))
    verdict, text = judge_paper(points)
    assert verdict == REPRODUCED and "point estimates only" in text
    # the paper's own numbers fail "soft >= hard" yet pass the equivalence as stated
    soft_hard = Claim("s", "t", "soft", "hard", kind="equivalence", margin=1.0, paper=PaperEvidence(a=91.8, b=92.1))
    assert judge_paper(soft_hard)[0] == REPRODUCED


def test_counts_and_table_come_from_the_verdict_objects():
    vs = [judge(BEATS, "ner", _iv(0.3, 2.0)), judge(BEATS, "pos", _iv(-1, 1)), judge(SAME, "ner", None)]
    assert counts(vs) == {"reproduced": 1, "not_reproduced": 0, "inconclusive": 1, "not_testable": 1,
                          "hardware_bound": 0, "same_evidence": 0, "one_model": 0}
    lines = table(vs).splitlines()
    assert len(lines) == 2 + len(vs) and "| **reproduced** | reproduced |" in lines[2]


PEAK = Claim("peak", "novel rate peaks at T = 1", "T=1", "T≠1")


def test_a_shape_claim_is_judged_part_by_part():
    both = judge_parts(PEAK, "mt", [("T1−T0.5", _iv(0.5, 2.0)), ("T1−T2", _iv(0.1, 1.0))])
    assert both.verdict == REPRODUCED and "T1−T2" in both.evidence() and both.interval is None
    one_open = judge_parts(PEAK, "mt", [("T1−T0.5", _iv(0.5, 2.0)), ("T1−T2", _iv(-0.2, 1.0))])
    assert one_open.verdict == INCONCLUSIVE
    one_wrong = judge_parts(PEAK, "mt", [("T1−T0.5", _iv(-2.0, -0.5)), ("T1−T2", _iv(-0.2, 1.0))])
    assert one_wrong.verdict == NOT_REPRODUCED
    missing = judge_parts(PEAK, "mt", [("T1−T0.5", _iv(0.5, 2.0)), ("T1−T2", None)])
    assert missing.verdict == NOT_TESTABLE and "T1−T2" in missing.reason
    rec = both.record()
    assert rec["verdict"] == REPRODUCED and set(rec["parts"]) == {"T1−T0.5", "T1−T2"}


def test_records_and_findings_come_from_the_verdicts():
    vs = [judge(BEATS, "ner", _iv(0.3, 2.0)), not_testable(SAME, "pos", "the premise fails on pos")]
    assert vs[0].record()["low"] == 0.3 and vs[1].record()["reason"] == "the premise fails on pos"
    text = findings(vs)
    assert summary(vs).startswith("2 claims counted, family-wise adjusted (Holm): 1 reproduced, 0 not reproduced, "
                                  "0 inconclusive, 1 not testable")
    assert summary(vs) in text and table(vs) in text


# -- issue 50: sizes, identical systems, by construction, premises, evidence once, Holm -----------

BY_TWO = Claim("by2", "improves by 2 points", "new", "old", size=2.0, paper=PaperEvidence(a=92.0, b=89.5))


@pytest.mark.parametrize("low, high, want", [(2.3, 4.0, REPRODUCED), (0.4, 1.6, NOT_REPRODUCED), (1.0, 3.0, INCONCLUSIVE),
                                             (-1.0, 0.5, NOT_REPRODUCED)])
def test_a_stated_size_is_what_the_interval_is_judged_against(low, high, want):
    """0.4–1.6 agrees in sign but rules the claimed 2 points out: not reproduced."""
    assert judge(BY_TWO, "pos", _iv(low, high)).verdict == want
    lower = Claim("x", "10x fewer", "log10 new", "log10 old", sign=-1, size=1.0)     # "an order of magnitude"
    assert rule(lower, -2.0, -1.2) == REPRODUCED and rule(lower, -0.9, -0.5) == NOT_REPRODUCED
    with pytest.raises(ValueError, match="size"):
        Claim("bad", "t", "a", "b", size=-1.0)


def test_the_paper_column_applies_the_size_too():
    assert judge_paper(BY_TWO)[0] == REPRODUCED
    assert judge_paper(Claim("c", "t", "a", "b", size=3.0, paper=PaperEvidence(a=92.0, b=89.5)))[0] == NOT_REPRODUCED


def test_identical_systems_and_claims_true_by_construction_are_not_testable():
    a = np.stack([np.arange(30.0), np.ones(30)], -1)[None].repeat(3, 0)
    v = judge(BEATS, "ner", paired_interval(a, a.copy(), mean_score))
    assert v.verdict == NOT_TESTABLE and v.why == kit.IDENTICAL and "identical systems" in v.reason
    part = judge_parts(PEAK, "mt", [("x", _iv(0.5, 2.0)), ("y", paired_interval(a, a.copy(), mean_score))])
    assert part.verdict == NOT_TESTABLE and part.why == kit.IDENTICAL
    built = Claim("z", "much smaller mean log Z", "global", "local", by_construction="the initialiser is centred")
    w = judge(built, "mt", _iv(1.0, 2.0))
    assert w.verdict == NOT_TESTABLE and w.why == kit.BY_CONSTRUCTION and "centred" in w.reason
    with pytest.raises(ValueError, match="kind of reason"):
        kit.Verdict(BEATS, "x", NOT_TESTABLE, why="because")


def test_a_failed_premise_gates_every_claim_that_presumes_it():
    premise = Claim("gap", "the label-bias gap exists", "bi", "uni")
    fix = Claim("fix", "global closes half the gap", "global", "local", presumes=("gap",))
    vs = [judge(premise, "tag", _iv(-0.5, 1.0)), judge(fix, "tag", _iv(0.5, 1.0)),
          judge(premise, "mt", _iv(0.5, 1.0)), judge(fix, "mt", _iv(0.5, 1.0))]
    out = {(v.claim.id, v.scope): v for v in finalise(vs)}
    assert out["fix", "tag"].verdict == NOT_TESTABLE and out["fix", "tag"].why == kit.PREMISE
    assert "inconclusive" in out["fix", "tag"].reason
    assert out["fix", "mt"].verdict == REPRODUCED
    with pytest.raises(ValueError, match="presumes 'nope'"):
        finalise([judge(Claim("c", "t", "a", "b", presumes=("nope",)), "x", _iv(0.5, 1.0))])


def test_the_same_evidence_counts_once_and_hardware_bound_claims_apart():
    twin = Claim("twin", "the same comparison, said again", "new", "old")
    speed = Claim("fast", "GD is slower", "gd", "viterbi", hardware=True)
    vs = finalise([judge(BEATS, "ner", _iv(0.3, 2.0, fp="same")), judge(twin, "ner", _iv(0.3, 2.0, fp="same")),
                   judge(speed, "ner", _iv(1.0, 3.0))])
    assert [v.counted for v in vs] == [True, False, False] and vs[1].group == "dl>ce@ner"
    c = counts(vs)
    assert c["reproduced"] == 1 and c["same_evidence"] == 1 and c["hardware_bound"] == 1
    assert "timed on hardware unlike the paper's" in summary(vs) and "same evidence as dl>ce@ner" in table(vs)


def test_holm_adjusts_the_family_and_the_counts_use_it():
    """Ten claims each just past p = 0.05/2 one-sided: every one reproduced alone, none after Holm;
    one overwhelming claim survives."""
    z = 2.2                                               # two-sided p = 0.028
    weak = [judge(Claim(f"c{i}", "t", "a", "b"), "x", Interval(z, z - 1.96, z + 1.96, 0.95, 500, 3, se=1.0,
                                                                 fingerprint=f"w{i}")) for i in range(10)]
    strong = judge(Claim("s", "t", "a", "b"), "x", Interval(10.0, 8.04, 11.96, 0.95, 500, 3, se=1.0, fingerprint="s"))
    vs = finalise(weak + [strong])
    assert all(v.verdict == REPRODUCED for v in vs)
    assert [v.adjusted for v in vs[:10]] == [INCONCLUSIVE] * 10 and vs[10].adjusted == REPRODUCED
    assert counts(vs)["reproduced"] == 1 and counts(vs, adjusted=False)["reproduced"] == 11
    assert vs[10].p_adjusted == pytest.approx(11 * vs[10].p)
    # Holm is monotone: adjusted p never decreases along the sorted p-values
    ps = sorted((v.p, v.p_adjusted) for v in vs)
    assert all(x[1] <= y[1] for x, y in zip(ps, ps[1:]))


def test_a_conjunction_is_reproduced_only_when_every_part_is_and_refuted_at_the_bonferroni_level():
    # one part just below zero at 95% (p_not ~ 0.02 one-sided) but not at 97.5%: with 2 parts not refuted
    edge = Interval(-1.1, -2.0, -0.05, 0.95, 240, 3, se=0.4974, fingerprint="e")
    v = judge_parts(PEAK, "mt", [("a", _iv(0.5, 2.0)), ("b", edge)])
    assert v.verdict == INCONCLUSIVE and v.p_not == pytest.approx(2 * edge.p_value(0.0, "less"))


def test_one_seed_verdicts_speak_for_the_trained_model():
    v = judge(BEATS, "ner", _iv(0.3, 2.0, seeds=1))
    assert v.one_model and "this trained model only" in v.evidence()
    assert v.record()["scope_of_evidence"] == "this trained model (1 seed)" and counts([v])["one_model"] == 1


def test_an_inconclusive_verdict_says_what_would_settle_it():
    v = judge(BY_TWO, "pos", _iv(1.0, 5.0))                # estimate 3, half-width 2, one unit past the size
    assert "4.0× the data" in v.settle()
    against = judge(BEATS, "pos", _iv(-2.0, 0.5))
    assert "points against the claim" in against.settle()
    ruled_out = judge(Claim("c", "t", "a", "b", paper=PaperEvidence(a=10.0, b=1.0)), "pos", _iv(-0.5, 2.0))
    assert "paper's effect (Δ +9.00) is ruled out" in ruled_out.settle()
    assert judge(BEATS, "ner", _iv(0.3, 2.0)).settle() == ""


def test_the_verdict_file_and_the_forest_plot(tmp_path):
    vs = [judge(BY_TWO, "pos", _iv(1.0, 5.0)), judge(BEATS, "ner", _iv(0.3, 2.0)), judge(SAME, "x", None),
          judge_parts(PEAK, "mt", [("a", _iv(0.5, 2.0)), ("b", _iv(0.1, 1.0))])]
    kit.write_verdicts(tmp_path / "verdicts.json", vs, paper="demo", scale="study")
    data = json.loads((tmp_path / "verdicts.json").read_text())
    assert data["paper"] == "demo" and data["scale"] == "study" and len(data["verdicts"]) == 4
    row = data["verdicts"][0]
    assert {"claim", "scope", "estimate", "low", "high", "n", "seeds", "verdict", "adjusted", "settle"} <= set(row)
    assert row["size"] == 2.0 and data["counts"]["inconclusive"] == 1
    fig = kit.forest_plot(vs, "demo")
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 4                  # 2 single intervals and 2 parts; the untestable has no bar
    assert all(math.isfinite(t) for t in ax.get_xlim())


def test_write_findings_writes_the_files_every_report_stage_writes(tmp_path):
    vs = [judge(BY_TWO, "pos", _iv(1.0, 5.0)), judge(BEATS, "ner", _iv(0.3, 2.0))]
    m = kit.write_findings(tmp_path, vs, paper="demo", scale="default")
    assert (tmp_path / "forest.png").stat().st_size > 1000 and (tmp_path / "verdicts.json").is_file()
    assert m["findings"]["reproduced"] == 1 and len(m["verdicts"]) == 2 and m["verdicts"][0]["adjusted"] == INCONCLUSIVE


def test_one_seed_verdicts_are_set_apart_where_the_paper_has_several_seeds():
    """Study scale: a verdict on one trained model per side is never counted as evidence about the
    method; at the default scale (one seed everywhere) the counts are those models' and say so."""
    multi = judge(BEATS, "ner", _iv(0.3, 2.0, seeds=3, fp="m"))
    single = judge(Claim("one", "t", "a", "b"), "ner", _iv(0.3, 2.0, seeds=1, fp="s"))
    vs = finalise([multi, single])
    assert vs[0].counted and not vs[1].counted and vs[1].adjusted == REPRODUCED
    c = counts(vs)
    assert c["reproduced"] == 1 and c["one_model"] == 1
    assert "1 resting on one trained model per side" in summary(vs) and "not counted: one trained model" in table(vs)
    only = finalise([judge(Claim("one", "t", "a", "b"), "ner", _iv(0.3, 2.0, seeds=1))])
    assert only[0].counted and counts(only)["reproduced"] == 1 and "all 1 judged verdicts" in summary(only)
