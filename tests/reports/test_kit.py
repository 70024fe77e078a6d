"""The report kit's verdict rule (issue 27): verdicts are objects; every verdict carries its
interval; a claim whose interval straddles zero is inconclusive; an equivalence claim with a margin
gives each of the three verdicts on constructed intervals; the paper column follows the same rule."""
from __future__ import annotations

import pytest

from components.metrics.significance import Interval
from components.reports.kit import (INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, Claim, PaperEvidence,
                                    counts, judge, judge_paper, rule, table)


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
