"""Findings tables: each directional claim of a paper, the paper's evidence, ours, and a verdict
computed from our metrics — never typed (DESIGN.md, convention 11).

A study's report module builds its rows with :func:`row` (or :func:`compare` for "a beats b" claims
on means with an optional spread over seeds) and renders them with :func:`table`. Verdicts:

- ``reproduced``: the claim holds on our numbers;
- ``not reproduced``: it does not;
- ``not testable here``: a side is missing (not run, failed, or the task has no counterpart), with
  the reason in the "ours" column.

When both sides of a comparison carry a spread over seeds (sample std, n > 1) and the difference is
within the pooled std ``sqrt((s_a² + s_b²) / 2)``, the text says "within noise"; the verdict still
follows the sign (a reader sees both).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE = "reproduced", "not reproduced", "not testable here"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a name, our mean, and its sample std over ``n`` runs (None: one run)."""
    name: str
    mean: float
    std: float | None = None
    n: int = 1

    def __str__(self) -> str:
        spread = f" ± {self.std:.2f} (n={self.n})" if self.std is not None and self.n > 1 else ""
        return f"{self.name} {self.mean:.2f}{spread}"


def row(claim: str, scope: str, paper: str, ours: str, verdict: str) -> dict[str, str]:
    """One findings row. ``scope`` is the task (or "all tasks")."""
    if verdict not in VERDICTS:
        raise ValueError(f"findings: verdict must be one of {VERDICTS}, got {verdict!r}")
    return {"claim": claim, "task": scope, "paper": paper, "ours": ours, "verdict": verdict}


def finite(v: object) -> float | None:
    """``v`` as a float when it is a finite number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def noise_note(a: Side, b: Side) -> str:
    """" (within noise: pooled std 0.40)" when both sides have spreads and |Δ| is within it, else ""."""
    if a.std is None or b.std is None or a.n < 2 or b.n < 2:
        return ""
    pooled = math.sqrt((a.std ** 2 + b.std ** 2) / 2)
    return f" (within noise: pooled std {pooled:.2f})" if abs(a.mean - b.mean) <= pooled else ""


def holds(a: float, b: float, relation: str) -> bool:
    """``a <relation> b`` for relation in ``>``, ``>=``, ``<``, ``<=``."""
    ops = {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}
    if relation not in ops:
        raise ValueError(f"findings: relation must be one of {sorted(ops)}, got {relation!r}")
    return ops[relation]


_NEGATE = {">": "≤", ">=": "<", "<": "≥", "<=": ">"}
_SHOW = {">": ">", ">=": "≥", "<": "<", "<=": "≤"}


def relate(a: float, b: float, relation: str) -> tuple[bool, str]:
    """(``a <relation> b``, the symbol to print between them: the relation when it holds, its
    negation otherwise)."""
    ok = holds(a, b, relation)
    return ok, _SHOW[relation] if ok else _NEGATE[relation]


def compare(claim: str, scope: str, paper: str, a: Side | None, b: Side | None, relation: str = ">",
            missing: str = "") -> dict[str, str]:
    """The row of the claim "a <relation> b": reproduced when it holds on our means; not testable when
    a side is None (``missing`` says why)."""
    if a is None or b is None:
        return row(claim, scope, paper, missing or "a side was not run", NOT_TESTABLE)
    ok, sym = relate(a.mean, b.mean, relation)
    text = f"{a} {sym} {b} (Δ {a.mean - b.mean:+.2f}){noise_note(a, b)}"
    return row(claim, scope, paper, text, REPRODUCED if ok else NOT_REPRODUCED)


def combine(claim: str, scope: str, paper: str, parts: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Several sub-rows of one claim as one row: not testable when every part is; otherwise
    reproduced when every testable part is (the texts joined, the untestable ones said)."""
    testable = [p for p in parts if p["verdict"] != NOT_TESTABLE]
    text = "; ".join(p["ours"] for p in parts)
    if not testable:
        return row(claim, scope, paper, text or "nothing to compare", NOT_TESTABLE)
    ok = all(p["verdict"] == REPRODUCED for p in testable)
    return row(claim, scope, paper, text, REPRODUCED if ok else NOT_REPRODUCED)


def table(rows: Sequence[Mapping[str, str]]) -> str:
    """The findings as a Markdown table: claim, task, the paper's evidence, ours, verdict."""
    def esc(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    lines = ["| claim | task | paper | ours | verdict |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(esc(r[k]) for k in ("claim", "task", "paper", "ours")) + f" | **{r['verdict']}** |")
    return "\n".join(lines) + "\n"


def counts(rows: Sequence[Mapping[str, str]]) -> dict[str, int]:
    """How many rows have each verdict, keyed ``reproduced``, ``not_reproduced``, ``not_testable_here``
    (metric names for dvc metrics and MLflow)."""
    return {v.replace(" ", "_"): sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
