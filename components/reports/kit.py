"""The report kit's claims and verdicts: a paper's claim as data, judged from an interval, counted once.

One vocabulary for every paper (issues 27, 50):

- *reproduced* — the confidence interval of our difference lies beyond the claim's stated size on
  the claimed side (beyond zero when the claim states no size), or inside the stated margin (for an
  equivalence claim);
- *not reproduced* — it lies on the other side of the size (the claimed size is ruled out, even when
  the sign agrees), or entirely outside the margin (equivalence);
- *inconclusive* — it straddles the size: the data cannot tell (a sign on noise is not a verdict);
- *not testable* — with its kind of reason (:data:`WHY`): a side not run, identical systems, true by
  construction, a failed premise, a failed run.

Intervals come from :func:`components.metrics.significance.paired_interval` (seeds and items as
crossed random factors; chains nested in items), so a verdict keeps its nominal 5% error rate under
the design that was run. A verdict from **one seed** speaks for *this trained model* only: it is
labelled so and never counted as evidence about the method (:attr:`Verdict.one_model`).

A shape or ranking claim (a peak at T = 1; a > b > c) is a conjunction of comparisons judged part by
part (:func:`judge_parts`): reproduced when every part is (an intersection-union test, no
adjustment needed), not reproduced when some part is at the Bonferroni level over the parts.

**Counting evidence once** (:func:`finalise`, which every rendering and record calls): a claim whose
premise (:attr:`Claim.presumes`) is not reproduced in the same scope becomes *not testable
(premise)*; two verdicts on the same arrays (the intervals' fingerprints) form one group counted
once; claims timed on hardware unlike the paper's (:attr:`Claim.hardware`) are reported but kept out
of the totals; and the verdicts that remain form the paper's family, adjusted by Holm's step-down
procedure (Holm 1979) on the two-sided p-values of the same t statistics as the intervals
(:func:`p_values`): a verdict keeps its direction when its Holm-adjusted p is below 0.05, else it is
*inconclusive* after adjustment. The counts a README or headline quotes are the adjusted ones.

:func:`findings` renders the section every report prints (the rule, :func:`summary`, :func:`table`),
:func:`forest_plot` draws our intervals beside the paper's effect and stated size, and
:func:`write_verdicts` writes the machine-readable verdict file.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Sequence

from components.io import atomic_path, write_json
from components.metrics.significance import Interval
from components.reports.curves import plt

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE = "reproduced", "not reproduced", "inconclusive", "not testable"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE)
# the kinds of reason a claim is not testable (Verdict.why)
NOT_RUN, IDENTICAL, BY_CONSTRUCTION, PREMISE, FAILED_RUN, OTHER = (
    "not run", "identical systems", "by construction", "premise", "failed run", "other")
WHY = (NOT_RUN, IDENTICAL, BY_CONSTRUCTION, PREMISE, FAILED_RUN, OTHER)
ALPHA = 0.05                 # the family-wise error rate of the Holm adjustment (two-sided 95% intervals)


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

    @property
    def delta(self) -> float | None:
        """The paper's own difference ``a - b`` (None when a side has no number)."""
        return None if self.a is None or self.b is None else self.a - self.b


@dataclass(frozen=True)
class Claim:
    """A paper's claim about two sides ``a`` and ``b`` of a comparison (``a``, ``b``: their names).

    ``size``: a direction claim's stated magnitude, in the units of ``a - b`` ("improves by 2
    points": 2; "1–2 orders of magnitude" on a log10 ratio: 1): the interval must lie beyond
    ``sign * size``. ``quote``: the paper's sentence and its section. ``hardware``: a speed claim
    timed on hardware unlike the paper's (reported, not counted). ``presumes``: ids of premise
    claims that must be reproduced in the same scope for this one to be testable.
    ``by_construction``: why the claim holds by construction here (then it is not testable)."""
    id: str
    text: str
    a: str
    b: str
    kind: Literal["direction", "equivalence"] = "direction"
    sign: int = 1                         # direction: the claimed sign of a - b
    margin: float = 0.0                   # equivalence: |a - b| < margin (in the score's units)
    paper: PaperEvidence = field(default_factory=PaperEvidence)
    premise: str = ""                     # what the claim presumes of the task, in words (a stand-in's screen checks it)
    size: float = 0.0
    quote: str = ""
    hardware: bool = False
    presumes: tuple[str, ...] = ()
    by_construction: str = ""

    def __post_init__(self):
        if self.kind not in ("direction", "equivalence"):
            raise ValueError(f"claim {self.id}: kind must be direction or equivalence, got {self.kind!r}")
        if self.kind == "direction" and self.sign not in (1, -1):
            raise ValueError(f"claim {self.id}: sign must be +1 or -1, got {self.sign}")
        if self.kind == "equivalence" and not self.margin > 0:
            raise ValueError(f"claim {self.id}: an equivalence claim needs a margin > 0, got {self.margin}")
        if self.kind == "direction" and not (math.isfinite(self.size) and self.size >= 0):
            raise ValueError(f"claim {self.id}: size must be a finite number >= 0, got {self.size}")
        if isinstance(self.presumes, str):
            raise ValueError(f"claim {self.id}: presumes must be a tuple of claim ids, got the string {self.presumes!r}")

    @property
    def threshold(self) -> float:
        """The value of ``a - b`` the claim is judged against (0 for a plain direction claim)."""
        return self.sign * self.size if self.kind == "direction" else 0.0


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict on one scope (a task), with the evidence it rests on. :func:`finalise` fills
    the family fields (``p``, ``adjusted``, ``counted``, ``group``)."""
    claim: Claim
    scope: str
    verdict: str
    interval: Interval | None = None
    reason: str = ""                      # not testable: why; otherwise a note (a stand-in's premise, ...)
    parts: tuple[tuple[str, Interval], ...] = ()     # a shape / conjunction claim: each part's interval
    why: str = ""                         # not testable: its kind (WHY)
    p_reproduced: float | None = None     # one-sided p of "beyond the size" (the intersection over parts)
    p_not: float | None = None            # one-sided p of "short of the size" (Bonferroni over parts)
    adjusted: str = ""                    # the Holm-adjusted verdict ("" before finalise)
    p_adjusted: float | None = None
    counted: bool = True                  # False: same evidence as another verdict, or hardware-bound
    group: str = ""                       # the evidence group (same arrays); "" when alone
    one_model_apart: bool = False         # set apart: one trained model per side where the paper has several seeds

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.verdict == NOT_TESTABLE and self.why not in WHY:
            raise ValueError(f"claim {self.claim.id}: a not-testable verdict needs a kind of reason in {WHY}, "
                             f"got {self.why!r}")

    @property
    def intervals(self) -> tuple[Interval, ...]:
        return tuple(iv for _, iv in self.parts) if self.parts else ((self.interval,) if self.interval else ())

    @property
    def one_model(self) -> bool:
        """The verdict rests on one trained model per side: it speaks for that model, not the method."""
        ivs = self.intervals
        return bool(ivs) and all(iv.one_model for iv in ivs)

    @property
    def p(self) -> float | None:
        """The two-sided p-value of the verdict's direction (what Holm adjusts)."""
        if self.p_reproduced is None or self.p_not is None:
            return None
        return min(1.0, 2 * min(self.p_reproduced, self.p_not))

    @property
    def final(self) -> str:
        """The verdict the counts use: the adjusted one once finalised."""
        return self.adjusted or self.verdict

    def evidence(self) -> str:
        """The interval and n behind the verdict (each part's, for a shape claim), or the reason it
        could not be judged."""
        scope = " (this trained model only: 1 seed)" if self.one_model else ""
        if self.parts:
            text = "; ".join(f"{label}: {iv}" for label, iv in self.parts)
            return text + scope + (f"; {self.reason}" if self.reason else "")
        if self.interval is None:
            return self.reason or "—"
        return str(self.interval) + scope + (f"; {self.reason}" if self.reason else "")

    def settle(self) -> str:
        """What would settle an inconclusive verdict (empty for a decided one)."""
        if self.verdict != INCONCLUSIVE:
            return ""
        c = self.claim
        ivs = self.intervals
        if not ivs:
            return ""
        # the part furthest from decided: an interval that straddles (the weakest link of a conjunction)
        straddle = [iv for iv in ivs if rule(c, iv.low, iv.high) == INCONCLUSIVE] or list(ivs)
        worst = max(straddle, key=lambda iv: _gap_factor(c, iv))
        notes = []
        d = c.paper.delta
        if d is not None and not (worst.low <= d <= worst.high) and len(ivs) == 1:
            notes.append(f"the paper's effect (Δ {d:+.2f}) is ruled out")
        if _points_against(c, worst):
            notes.append("the estimate points against the claim")
        else:
            f = _gap_factor(c, worst)
            notes.append("no amount of data would settle it at this estimate" if not math.isfinite(f) else
                         f"about {f:.1f}× the data (seeds and test items alike) would settle it if the estimate held")
        return "; ".join(notes)

    def record(self) -> dict:
        """The verdict as plain data: claim, scope, estimate, interval, n, seeds, verdict, the adjusted
        verdict, the reason and what would settle it (one row of :func:`write_verdicts`)."""
        out: dict = {"claim": self.claim.id, "scope": self.scope, "verdict": self.verdict}
        if self.interval is not None:
            iv = self.interval
            out.update(estimate=round(iv.estimate, 6), low=round(iv.low, 6), high=round(iv.high, 6), n=iv.n,
                       seeds=iv.seeds, units=iv.units)
        if self.parts:
            out["parts"] = {label: [round(iv.estimate, 6), round(iv.low, 6), round(iv.high, 6)] for label, iv in self.parts}
            out.update(n=min(iv.n for _, iv in self.parts), seeds=min(iv.seeds for _, iv in self.parts))
        if self.claim.kind == "direction" and self.claim.size:
            out["size"] = self.claim.threshold
        if self.adjusted:
            out["adjusted"] = self.adjusted
        if self.p is not None:
            out["p"] = round(self.p, 6)
        if self.p_adjusted is not None:
            out["p_adjusted"] = round(self.p_adjusted, 6)
        if self.why:
            out["why"] = self.why
        if self.reason:
            out["reason"] = self.reason
        if not self.counted:
            out["counted"] = False
        if self.one_model_apart:
            out["set_apart"] = "one trained model per side (1 seed) in a paper with several seeds"
        if self.group:
            out["group"] = self.group
        if self.claim.hardware:
            out["hardware"] = True
        if self.one_model:
            out["scope_of_evidence"] = "this trained model (1 seed)"
        settle = self.settle()
        if settle:
            out["settle"] = settle
        return out


def _oriented(claim: Claim, low: float, high: float) -> tuple[float, float]:
    return (low, high) if claim.sign > 0 else (-high, -low)


def _points_against(claim: Claim, iv: Interval) -> bool:
    if claim.kind == "equivalence":
        return abs(iv.estimate) >= claim.margin
    return claim.sign * iv.estimate <= claim.size


def _gap_factor(claim: Claim, iv: Interval) -> float:
    """How many times more data would make ``iv`` decide ``claim`` if its estimate held."""
    if claim.kind == "equivalence":
        edge = claim.margin if iv.estimate >= 0 else -claim.margin
        return iv.width_for(edge)
    return iv.width_for(claim.threshold)


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
    lo, hi = _oriented(claim, low, high)
    if lo > claim.size:
        return REPRODUCED
    if hi < claim.size:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def p_values(claim: Claim, iv: Interval) -> tuple[float, float]:
    """One-sided p-values ``(p_reproduced, p_not)`` from the interval's own t statistic: "the
    difference lies beyond the size" (inside the margin) and "it lies short of the size" (outside
    the margin). The interval rule says *reproduced* exactly when ``p_reproduced < (1 - confidence) / 2``."""
    if claim.kind == "equivalence":
        m = claim.margin
        return (max(iv.p_value(-m, "greater"), iv.p_value(m, "less")),
                min(iv.p_value(m, "greater"), iv.p_value(-m, "less")))
    t = claim.threshold
    if claim.sign > 0:
        return iv.p_value(t, "greater"), iv.p_value(t, "less")
    return iv.p_value(t, "less"), iv.p_value(t, "greater")


def _identical(claim: Claim, scope: str, labels: Sequence[str], note: str) -> Verdict:
    which = f" ({', '.join(labels)})" if labels else ""
    return Verdict(claim, scope, NOT_TESTABLE, None, "identical systems: the two sides gave the same numbers on every "
                   f"test item{which}" + (f"; {note}" if note else ""), why=IDENTICAL)


def judge(claim: Claim, scope: str, interval: Interval | None, *, missing: str = "", note: str = "",
          why: str = NOT_RUN) -> Verdict:
    """Our verdict on ``claim`` in ``scope`` from the interval of our ``a - b`` (None: not testable,
    ``missing`` says why and ``why`` its kind). Identical systems and claims true by construction
    are not testable."""
    if claim.by_construction:
        return Verdict(claim, scope, NOT_TESTABLE, interval, f"true by construction: {claim.by_construction}",
                       why=BY_CONSTRUCTION)
    if interval is None:
        return Verdict(claim, scope, NOT_TESTABLE, None, missing or "a side was not run", why=why)
    if interval.identical:
        return _identical(claim, scope, (), note)
    p_rep, p_not = p_values(claim, interval)
    return Verdict(claim, scope, rule(claim, interval.low, interval.high), interval, note,
                   p_reproduced=p_rep, p_not=p_not)


def judge_parts(claim: Claim, scope: str, parts: "list[tuple[str, Interval | None]]", *, missing: str = "",
                note: str = "", why: str = NOT_RUN) -> Verdict:
    """A claim that is a conjunction of comparisons, each judged by the claim's rule — a shape (a
    peak at T = 1: T1 − T0.5 > 0 and T1 − T2 > 0), a ranking (a > b > c), "robust across settings"
    (an equivalence at each). *Reproduced* when every part is; *not reproduced* when a part is at
    the Bonferroni level over the parts; else *inconclusive*; *not testable* when a part has no
    interval (``missing`` says why) or compares identical systems."""
    if not parts:
        raise ValueError(f"claim {claim.id}: judge_parts needs at least one part")
    if claim.by_construction:
        return Verdict(claim, scope, NOT_TESTABLE, None, f"true by construction: {claim.by_construction}",
                       why=BY_CONSTRUCTION)
    absent = [label for label, iv in parts if iv is None]
    if absent:
        return Verdict(claim, scope, NOT_TESTABLE, None, missing or f"not run: {', '.join(absent)}", why=why)
    same = [label for label, iv in parts if iv.identical]              # type: ignore[union-attr]
    if same:
        return _identical(claim, scope, same, note)
    ps = [p_values(claim, iv) for _, iv in parts]                        # type: ignore[arg-type]
    conf = min(iv.confidence for _, iv in parts)                         # type: ignore[union-attr]
    p_rep = max(p for p, _ in ps)
    p_not = min(1.0, len(ps) * min(q for _, q in ps))
    tail = (1 - conf) / 2
    verdict = REPRODUCED if p_rep < tail else NOT_REPRODUCED if p_not < tail else INCONCLUSIVE
    return Verdict(claim, scope, verdict, None, note, tuple(parts),     # type: ignore[arg-type]
                   p_reproduced=p_rep, p_not=p_not)


def not_testable(claim: Claim, scope: str, why: str, kind: str = OTHER) -> Verdict:
    """A claim this study cannot test here, and why (``kind``: one of :data:`WHY`)."""
    return Verdict(claim, scope, NOT_TESTABLE, None, why, why=kind)


def finalise(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The paper's verdicts as a family (module doc): premises gate, same evidence is grouped and
    counted once, hardware-bound claims are set apart, and Holm adjusts the rest. Idempotent."""
    out = list(verdicts)
    if out and all(v.adjusted for v in out):
        return out
    # 1. premises: a claim presuming another is not testable where that one is not reproduced
    by_scope: dict[tuple[str, str], Verdict] = {(v.claim.id, v.scope): v for v in out}
    by_id: dict[str, list[Verdict]] = {}
    for v in out:
        by_id.setdefault(v.claim.id, []).append(v)
    for i, v in enumerate(out):
        for pid in v.claim.presumes:
            if pid not in by_id:
                raise ValueError(f"claim {v.claim.id}: presumes {pid!r}, which no verdict of this report judges")
            pv = by_scope.get((pid, v.scope))
            if pv is None and len(by_id[pid]) == 1:
                pv = by_id[pid][0]                                     # a scope-free premise
            if pv is None:
                raise ValueError(f"claim {v.claim.id}: its premise {pid!r} has no verdict in scope {v.scope!r}")
            if pv.verdict != REPRODUCED and v.verdict != NOT_TESTABLE:
                out[i] = Verdict(v.claim, v.scope, NOT_TESTABLE, v.interval,
                                 f"premise not met: {pv.claim.text!r} is {pv.verdict} here", v.parts, why=PREMISE)
                break
    # 2. the same evidence, counted once
    first: dict[tuple[str, ...], int] = {}
    for i, v in enumerate(out):
        if v.verdict == NOT_TESTABLE:
            continue
        # the same arrays scored the same way: the fingerprint, and the estimate and se (which differ
        # when two claims read different scores of one file); either side first
        key = tuple(sorted(f"{iv.fingerprint}:{abs(iv.estimate):.9g}:{iv.se:.9g}" if iv.fingerprint else ""
                           for iv in v.intervals))
        if not key or not all(key):
            continue
        if key in first:
            j = first[key]
            group = out[j].group or f"{out[j].claim.id}@{out[j].scope}"
            out[j] = dataclasses.replace(out[j], group=group)
            out[i] = dataclasses.replace(v, group=group, counted=False)
        else:
            first[key] = i
    # 3. where the paper has evidence about its methods (several seeds), a verdict resting on one
    # trained model per side speaks for that model only: set apart, never counted as evidence about
    # the method (with one seed everywhere, the default scale, the counts are those models' and say so)
    method = any(v.intervals and not v.one_model for v in out)
    if method:
        out = [dataclasses.replace(v, counted=False, one_model_apart=True)
               if (v.one_model and v.counted and v.verdict != NOT_TESTABLE) else v for v in out]
    # 4. Holm over the counted, testable, not hardware-bound verdicts (and, apart, over the one-model ones)
    adjusted_p: dict[int, float] = {}
    apart = [i for i, v in enumerate(out) if v.one_model_apart and not v.claim.hardware and v.p is not None]
    counted = [i for i, v in enumerate(out) if v.counted and not v.claim.hardware and v.p is not None]
    for family in (counted, apart):
        order = sorted(family, key=lambda i: out[i].p)                 # type: ignore[arg-type,return-value]
        m, running = len(order), 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * out[i].p))    # type: ignore[operator]
            adjusted_p[i] = running
    for i, v in enumerate(out):
        if i in adjusted_p:
            pa = adjusted_p[i]
            word = v.verdict if (v.verdict != INCONCLUSIVE and pa < ALPHA) else INCONCLUSIVE
            out[i] = dataclasses.replace(v, adjusted=word, p_adjusted=pa, counted=v.counted and not v.claim.hardware)
        else:
            out[i] = dataclasses.replace(v, adjusted=v.verdict, counted=v.counted and not v.claim.hardware)
    return out


def counts(verdicts: Sequence[Verdict], *, adjusted: bool = True) -> dict[str, int]:
    """How many counted verdicts of each word (``not_reproduced``, ... as metric names), family-wise
    adjusted by default; ``hardware_bound`` and ``same_evidence`` count what was set apart, and
    ``one_model`` how many rest on one trained model per side (counted only where every verdict of the
    paper does: the default scale's demonstration; set apart where the paper has several seeds)."""
    vs = finalise(verdicts)
    counted = [v for v in vs if v.counted]
    word = (lambda v: v.final) if adjusted else (lambda v: v.verdict)
    out = {w.replace(" ", "_"): sum(1 for v in counted if word(v) == w) for w in VERDICTS}
    out["hardware_bound"] = sum(1 for v in vs if v.claim.hardware)
    out["same_evidence"] = sum(1 for v in vs if not v.counted and not v.claim.hardware and not v.one_model_apart)
    # one seed: counted where the whole paper has one seed (the default scale), else set apart
    out["one_model"] = sum(1 for v in vs if v.one_model and v.verdict != NOT_TESTABLE and not v.claim.hardware
                           and (v.counted or v.one_model_apart))
    return out


def summary(verdicts: Sequence[Verdict]) -> str:
    """One line: "12 claims counted (Holm-adjusted): 5 reproduced, 2 not reproduced, 4 inconclusive,
    1 not testable; apart: ..."."""
    vs = finalise(verdicts)
    c, raw = counts(vs), counts(vs, adjusted=False)
    n = sum(c[w.replace(" ", "_")] for w in VERDICTS)
    text = (f"{n} claims counted, family-wise adjusted (Holm): "
            + ", ".join(f"{c[w.replace(' ', '_')]} {w}" for w in VERDICTS)
            + " (per claim, before adjustment: "
            + ", ".join(f"{raw[w.replace(' ', '_')]} {w}" for w in VERDICTS) + ")")
    one_apart = sum(1 for v in vs if v.one_model_apart and not v.claim.hardware)
    apart = []
    if c["same_evidence"]:
        apart.append(f"{c['same_evidence']} resting on the same evidence as a counted one")
    if c["hardware_bound"]:
        apart.append(f"{c['hardware_bound']} timed on hardware unlike the paper's")
    if one_apart:
        apart.append(f"{one_apart} resting on one trained model per side (1 seed), which speak for those models, "
                     "not for the methods")
    if apart:
        text += "; set apart: " + ", ".join(apart)
    if c["one_model"] and not one_apart:
        text += (f"; all {c['one_model']} judged verdicts rest on one trained model per side (1 seed): they speak "
                 "for those models, not for the methods")
    return text


RULE_TEXT = (
    "Each verdict rests on a 95% interval of our difference that keeps its nominal rate under the design "
    "run (training seeds and test items as crossed random factors, chains nested in their source sentence; "
    "`components/metrics/significance.py`, calibrated by simulation in its tests): *reproduced* when the "
    "interval lies beyond the claim's stated size on the claimed side (beyond zero when it states none; inside "
    "the margin, for an equivalence), *not reproduced* when it lies short of the size (the claimed size is ruled "
    "out, even if the sign agrees; outside the margin), *inconclusive* when it straddles. With one seed the "
    "interval holds no training-seed variation and the verdict speaks for the trained models only: where the paper "
    "has several seeds such verdicts are reported but not counted. The "
    "*adjusted* column applies Holm's step-down adjustment over the paper's counted verdicts (p-values from the "
    "same t statistics); verdicts resting on the same arrays are counted once, claims timed on hardware unlike "
    "the paper's are reported but not counted, and a claim whose premise is not reproduced is not testable. "
    "The paper column applies the same rule where the paper gives a spread or an interval.")


def findings(verdicts: Sequence[Verdict], title: str = "Findings") -> str:
    """The findings section every report prints: its title, the rule, the counts and the table."""
    vs = finalise(verdicts)
    return f"## {title}\n\n{RULE_TEXT}\n\n{summary(vs)}.\n\n" + table(vs)


def table(verdicts: Sequence[Verdict]) -> str:
    """The findings as a Markdown table: claim, task, the paper (its numbers and its own verdict by
    the rule), ours (the interval and n), the verdict, the adjusted verdict and what would settle it."""
    vs = finalise(verdicts)

    def esc(s: object) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    lines = ["| claim | task | paper | ours | verdict | adjusted | to settle |", "|---|---|---|---|---|---|---|"]
    for v in vs:
        pv, ptext = judge_paper(v.claim)
        paper = f"{v.claim.paper.source + ': ' if v.claim.paper.source else ''}{ptext} ({pv})"
        text = v.claim.text + (f" (stated size {v.claim.threshold:+g})" if v.claim.kind == "direction" and v.claim.size else "")
        if v.claim.quote:
            text += f" — {v.claim.quote}"
        adj = v.final if v.counted else ("not counted: hardware unlike the paper's" if v.claim.hardware
                                         else f"{v.final}; not counted: one trained model (1 seed)" if v.one_model_apart
                                         else f"not counted: same evidence as {v.group}")
        word = v.verdict + (f" ({v.why})" if v.verdict == NOT_TESTABLE else "")
        lines.append(f"| {esc(text)} | {esc(v.scope)} | {esc(paper)} | {esc(v.evidence())} | **{esc(word)}** | "
                     f"{esc(adj)} | {esc(v.settle())} |")
    return "\n".join(lines) + "\n"


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
    if claim.kind == "equivalence":
        holds = abs(d) < claim.margin
    else:
        holds = d * claim.sign > claim.size
    return (REPRODUCED if holds else NOT_REPRODUCED,
            f"Δ {d:+.2f} (point estimates only: no interval in the paper)")


def records(verdicts: Sequence[Verdict]) -> list[dict]:
    """Every verdict of the family as plain data (:meth:`Verdict.record`), finalised."""
    return [v.record() for v in finalise(verdicts)]


def write_verdicts(path, verdicts: Sequence[Verdict], *, paper: str, scale: str) -> None:
    """The machine-readable verdict file of one paper at one scale (atomically): the counts (adjusted
    and per claim) and one row per verdict (:meth:`Verdict.record`)."""
    vs = finalise(verdicts)
    write_json(path, {"paper": paper, "scale": scale, "counts": counts(vs),
                      "counts_per_claim": counts(vs, adjusted=False), "verdicts": records(vs)})


def forest_plot(verdicts: Sequence[Verdict], title: str = ""):
    """Our intervals beside the paper's effect and the claim's stated size, one row per judged
    comparison (a conjunction: one row per part). Claims differ in units (points, nats, BLEU, log10
    ratios), so each row is drawn in units of its own interval's half-width, centred where the
    claim's threshold (its size, or zero) sits: the verdict reads off where the bar lies against the
    line at 0 (the threshold) — beyond it, reproduced; short of it, not; across it, inconclusive."""
    rows = []
    for v in finalise(verdicts):
        c = v.claim
        parts = v.parts or ((("", v.interval),) if v.interval is not None else ())
        for label, iv in parts:
            half = (iv.high - iv.low) / 2
            if not half > 0:
                continue
            orient = c.sign if c.kind == "direction" else 1
            t = c.threshold
            scaled = lambda x: orient * (x - t) / half        # noqa: E731
            d = c.paper.delta
            rows.append((f"{c.id} · {v.scope}" + (f" · {label}" if label else ""), scaled(iv.estimate),
                         None if d is None or v.parts else scaled(d), v.final))
    height = max(3.0, 0.26 * len(rows) + 1.8)
    fig, ax = plt.subplots(figsize=(12, height))
    colour = {REPRODUCED: "tab:green", NOT_REPRODUCED: "tab:red", INCONCLUSIVE: "tab:gray"}
    for y, (label, est, paper, word) in enumerate(reversed(rows)):
        c = colour.get(word, "black")
        if abs(est) <= 11:
            ax.errorbar([est], [y], xerr=[[1.0], [1.0]], fmt="o", color=c, ms=4, capsize=2)
        else:                                                 # far off the scale: an arrow at the edge, its value
            edge = math.copysign(11.5, est)
            ax.plot([edge], [y], marker=">" if est > 0 else "<", color=c, ms=6)
            ax.annotate(f"{est:+.0f}", (edge, y), textcoords="offset points", xytext=(-14 if est > 0 else 6, 3),
                        fontsize=6, color=c)
        if paper is not None and math.isfinite(paper):
            ax.plot([max(min(paper, 12), -12)], [y], marker="x", color="black", ms=5)
    ax.axvline(0, color="black", lw=0.8)
    labels = [r[0] if len(r[0]) <= 80 else r[0][:77] + "…" for r in reversed(rows)]
    ax.set_yticks(range(len(rows)), labels, fontsize=6)
    ax.set_xlim(-12, 12)
    ax.set_xlabel("(our difference − the claim's threshold) / half-width of our 95% interval; the claimed side "
                  "is right\nbars, after Holm: green reproduced, red not reproduced, grey inconclusive,\n"
                  "black not testable (premise, ...); ×: the paper's own Δ", fontsize=8)
    ax.set_title(title or "Claims: our intervals against the claimed size", fontsize=9)
    fig.subplots_adjust(left=0.38, right=0.98, top=1 - 0.45 / height, bottom=1.1 / height)
    return fig


def write_findings(out_dir, verdicts: Sequence[Verdict], *, paper: str, scale: str) -> dict:
    """What every report stage writes beside its README: ``verdicts.json`` (:func:`write_verdicts`)
    and ``forest.png`` (:func:`forest_plot`), atomically; returns the stage's metrics — the adjusted
    ``findings`` counts, the per-claim ones and every verdict's record."""
    out = Path(out_dir)
    vs = finalise(verdicts)
    write_verdicts(out / "verdicts.json", vs, paper=paper, scale=scale)
    fig = forest_plot(vs, f"{paper} ({scale} scale): our intervals against each claim's threshold")
    with atomic_path(out / "forest.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return {"findings": counts(vs), "findings_per_claim": counts(vs, adjusted=False), "verdicts": records(vs)}
