"""The report kit's claims and verdicts: a paper's claim as data, judged from an interval.

One vocabulary for every paper (issue 27):

- *reproduced* — the confidence interval of our difference lies on the claimed side of zero (for a
  direction claim) or inside the stated margin (for an equivalence claim);
- *not reproduced* — it lies on the other side of zero (direction), or entirely outside the margin
  (equivalence);
- *inconclusive* — it straddles: the data cannot tell (a sign on noise is not a verdict);
- *not testable* — a side is missing; the reason is part of the verdict.

A shape or ranking claim (a peak at T = 1; a > b > c; "robust across settings") is a conjunction of
comparisons judged part by part (:func:`judge_parts`). :func:`findings` renders the section every
report prints (the rule, :func:`summary`, :func:`table`); :meth:`Verdict.record` is a verdict as data.

A :class:`Claim` holds the claim's text, its kind (``direction``: ``a - b`` has ``sign`` +1 or -1;
``equivalence``: ``|a - b| < margin``) and the paper's own numbers (:class:`PaperEvidence`); the
paper column is judged by the same rule where the paper gives what the rule needs (an interval, or
a standard deviation over its runs) and says so where it gives only point estimates.
:func:`judge` turns an :class:`~components.metrics.significance.Interval` into a :class:`Verdict`,
which prints its interval and n beside the word.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from components.metrics.significance import Interval

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE = "reproduced", "not reproduced", "inconclusive", "not testable"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE)


@dataclass(frozen=True)
class PaperEvidence:
    """What the paper reports for the two sides: point estimates, and — when it gives them — a
    spread (a standard deviation over ``runs`` runs per side) or its own interval of the difference."""
    a: float | None = None
    b: float | None = None
    sd_a: float | None = None
    sd_b: float | None = None
    runs: int = 1
    interval: tuple[float, float] | None = None
    source: str = ""                      # "Table 3.2", "Sec. 6.7", ...


@dataclass(frozen=True)
class Claim:
    """A paper's claim about two sides ``a`` and ``b`` of a comparison (``a``, ``b``: their names)."""
    id: str
    text: str
    a: str
    b: str
    kind: Literal["direction", "equivalence"] = "direction"
    sign: int = 1                         # direction: the claimed sign of a - b
    margin: float = 0.0                   # equivalence: |a - b| < margin (in the score's units)
    paper: PaperEvidence = field(default_factory=PaperEvidence)
    premise: str = ""                     # what the claim presumes of the task (a stand-in's screen checks it)

    def __post_init__(self):
        if self.kind not in ("direction", "equivalence"):
            raise ValueError(f"claim {self.id}: kind must be direction or equivalence, got {self.kind!r}")
        if self.kind == "direction" and self.sign not in (1, -1):
            raise ValueError(f"claim {self.id}: sign must be +1 or -1, got {self.sign}")
        if self.kind == "equivalence" and not self.margin > 0:
            raise ValueError(f"claim {self.id}: an equivalence claim needs a margin > 0, got {self.margin}")


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict on one scope (a task), with the evidence it rests on."""
    claim: Claim
    scope: str
    verdict: str
    interval: Interval | None = None
    reason: str = ""                      # not testable: why; otherwise a note (a stand-in's premise, ...)
    parts: tuple[tuple[str, Interval], ...] = ()     # a shape / conjunction claim: each part's interval

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def evidence(self) -> str:
        """The interval and n behind the verdict (each part's, for a shape claim), or the reason it
        could not be judged."""
        if self.parts:
            text = "; ".join(f"{label}: {iv}" for label, iv in self.parts)
            return text + (f"; {self.reason}" if self.reason else "")
        if self.interval is None:
            return self.reason or "—"
        return str(self.interval) + (f"; {self.reason}" if self.reason else "")

    def record(self) -> dict:
        """The verdict as plain data (for a metrics file): claim id, scope, verdict, interval, n."""
        out: dict = {"claim": self.claim.id, "scope": self.scope, "verdict": self.verdict}
        if self.interval is not None:
            iv = self.interval
            out.update(estimate=round(iv.estimate, 6), low=round(iv.low, 6), high=round(iv.high, 6), n=iv.n,
                       seeds=iv.seeds)
        if self.parts:
            out["parts"] = {label: [round(iv.estimate, 6), round(iv.low, 6), round(iv.high, 6)] for label, iv in self.parts}
        if self.reason:
            out["reason"] = self.reason
        return out


def rule(claim: Claim, low: float, high: float) -> str:
    """The verdict of ``claim`` for an interval ``[low, high]`` of ``a - b`` (module doc)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"claim {claim.id}: not an interval: [{low}, {high}]")
    if claim.kind == "equivalence":
        if -claim.margin < low and high < claim.margin:
            return REPRODUCED
        if low >= claim.margin or high <= -claim.margin:
            return NOT_REPRODUCED
        return INCONCLUSIVE
    lo, hi = (low, high) if claim.sign > 0 else (-high, -low)
    if lo > 0:
        return REPRODUCED
    if hi < 0:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def judge(claim: Claim, scope: str, interval: Interval | None, *, missing: str = "", note: str = "") -> Verdict:
    """Our verdict on ``claim`` in ``scope`` from the interval of our ``a - b`` (None: not testable,
    ``missing`` says why)."""
    if interval is None:
        return Verdict(claim, scope, NOT_TESTABLE, None, missing or "a side was not run")
    return Verdict(claim, scope, rule(claim, interval.low, interval.high), interval, note)


def judge_parts(claim: Claim, scope: str, parts: "list[tuple[str, Interval | None]]", *, missing: str = "",
                note: str = "") -> Verdict:
    """A claim that is a conjunction of comparisons, each judged by the claim's rule — a shape (a
    peak at T = 1: T1 − T0.5 > 0 and T1 − T2 > 0), a ranking (a > b > c), "robust across settings"
    (an equivalence at each). *Reproduced* when every part is, *not reproduced* when any part is,
    else *inconclusive*; *not testable* when a part has no interval (``missing`` says why)."""
    if not parts:
        raise ValueError(f"claim {claim.id}: judge_parts needs at least one part")
    absent = [label for label, iv in parts if iv is None]
    if absent:
        return Verdict(claim, scope, NOT_TESTABLE, None, missing or f"not run: {', '.join(absent)}")
    words = [rule(claim, iv.low, iv.high) for _, iv in parts]          # type: ignore[union-attr]
    verdict = (NOT_REPRODUCED if NOT_REPRODUCED in words else
               REPRODUCED if all(w == REPRODUCED for w in words) else INCONCLUSIVE)
    return Verdict(claim, scope, verdict, None, note, tuple(parts))     # type: ignore[arg-type]


def not_testable(claim: Claim, scope: str, why: str) -> Verdict:
    """A claim this study cannot test here, and why (a stand-in whose premise fails, a side not run)."""
    return Verdict(claim, scope, NOT_TESTABLE, None, why)


def judge_paper(claim: Claim) -> tuple[str, str]:
    """The paper column: (verdict, its evidence) by the same rule, from the paper's own interval, or
    from its runs' standard deviations (a normal 95% interval of the difference of means); with
    point estimates only, the rule cannot be applied and the text says so."""
    p = claim.paper
    if p.interval is not None:
        low, high = p.interval
        return rule(claim, low, high), f"paper's interval [{low:+.2f}, {high:+.2f}]"
    if p.a is None or p.b is None:
        return NOT_TESTABLE, "the paper gives no number for a side"
    d = p.a - p.b
    if p.sd_a is not None and p.sd_b is not None and p.runs > 1:
        half = 1.96 * math.sqrt((p.sd_a ** 2 + p.sd_b ** 2) / p.runs)
        return rule(claim, d - half, d + half), f"Δ {d:+.2f} ± {half:.2f} (paper's sd over {p.runs} runs)"
    holds = (abs(d) < claim.margin) if claim.kind == "equivalence" else (d * claim.sign > 0)
    return (REPRODUCED if holds else NOT_REPRODUCED,
            f"Δ {d:+.2f} (point estimates only: no interval in the paper)")


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    """How many verdicts of each word (``not_reproduced``, ... as metric names)."""
    return {v.replace(" ", "_"): sum(1 for x in verdicts if x.verdict == v) for v in VERDICTS}


def summary(verdicts: list[Verdict]) -> str:
    """One line: "12 claims: 5 reproduced, 2 not reproduced, 4 inconclusive, 1 not testable"."""
    c = counts(verdicts)
    return f"{len(verdicts)} claims: " + ", ".join(f"{c[v.replace(' ', '_')]} {v}" for v in VERDICTS)


def findings(verdicts: list[Verdict], title: str = "Findings") -> str:
    """The findings section every report prints: its title, the rule, the counts and the table."""
    return (f"## {title}\n\n"
            "Each verdict rests on a 95% paired-bootstrap interval of our difference (test sentences "
            "resampled, and seeds where there are several): *reproduced* when the interval lies on the "
            "claimed side of zero (inside the margin, for an equivalence), *not reproduced* when it lies on "
            "the other side (outside the margin), *inconclusive* when it straddles. The paper column applies "
            "the same rule where the paper gives a spread or an interval.\n\n"
            f"{summary(verdicts)}.\n\n" + table(verdicts))


def table(verdicts: list[Verdict]) -> str:
    """The findings as a Markdown table: claim, task, the paper (its numbers and its own verdict
    by the rule), ours (the interval and n), verdict."""
    def esc(s: object) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    lines = ["| claim | task | paper | ours | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        pv, ptext = judge_paper(v.claim)
        paper = f"{v.claim.paper.source + ': ' if v.claim.paper.source else ''}{ptext} ({pv})"
        lines.append(f"| {esc(v.claim.text)} | {esc(v.scope)} | {esc(paper)} | {esc(v.evidence())} | **{v.verdict}** |")
    return "\n".join(lines) + "\n"
