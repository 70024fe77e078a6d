"""The report kit's verdict rule (issue 27): verdicts are objects; every verdict carries its
interval; a claim whose interval straddles zero is inconclusive; an equivalence claim with a margin
gives each of the three verdicts on constructed intervals; the paper column follows the same rule."""
from __future__ import annotations

import pytest

from components.metrics.significance import Interval
from components.reports.kit import (INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, Claim, PaperEvidence,
                                    counts, findings, judge, judge_paper, judge_parts, not_testable, rule, summary,
                                    table)


def _iv(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, low, high, 0.95, 240)


BEATS = Claim("dl>ce", "DL-annealed beats CE", "dl_annealed", "ce", sign=1)
SAME = Claim("soft~hard", "soft and hard beam decoding do not differ much", "soft", "hard",
             kind="equivalence", margin=1.0)


@pytest.mark.parametrize("low, high, want", [(0.3, 2.0, REPRODUCED), (-2.0, -0.1, NOT_REPRODUCED),
                                             (-0.5, 2.1, INCONCLUSIVE), (0.0, 1.0, INCONCLUSIVE)])
def test_a_direction_claim(low, high, want):
    v = judge(BEATS, "ner", _iv(low, high))
    assert v.verdict == want and v.interval.low == low
    assert "n = 240" in v.evidence() and "95% CI" in v.evidence()


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
    assert counts(vs) == {"reproduced": 1, "not_reproduced": 0, "inconclusive": 1, "not_testable": 1}
    lines = table(vs).splitlines()
    assert len(lines) == 2 + len(vs) and lines[2].endswith("**reproduced** |")


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
    assert summary(vs) == "2 claims: 1 reproduced, 0 not reproduced, 0 inconclusive, 1 not testable"
    assert summary(vs) in text and table(vs) in text
