"""Run facts: what a run measured about itself — wall-clock times, throughputs, the host it ran on —
as opposed to its results, and the one rule that tells them apart by key.

DVC hashes every stage output, so an output holding a run fact changes on every run of the same
code and data: the stages depending on it re-run for nothing, and a committed ``dvc.lock`` never
matches another machine's outputs. So model folders, data, and the metrics files other stages read
hold results only; run facts go to MLflow and to ``metrics/timings/`` (no stage reads those). A
measurement whose reader needs it (the ``approx`` stage's decoding times, which the ``report``
stage tabulates and plots) stays a result of its stage.

A key names a run fact when, lower-cased, it is one of :data:`NAMES`, ends with one of
:data:`SUFFIXES` (``decode_seconds``, ``sweep_minutes``, ``naive_s``, ``ours_ms``,
``decode_tokens_per_s``), starts with one of :data:`PREFIXES` (``seconds_per_epoch``) or contains
one of :data:`INFIXES` (``decode_load_avg_start``). Ratios of times (``speedup``, ``mh_ratio``) are
results of the benchmarks that compute them, not run facts.
"""
from __future__ import annotations

from typing import Any, Mapping

NAMES = frozenset({"time", "times", "seconds", "minutes", "hours", "elapsed", "wall", "duration", "timestamp",
                   "date", "datetime", "host", "hostname", "machine", "platform", "pid"})
SUFFIXES = ("_seconds", "_minutes", "_hours", "_time", "_times", "_s", "_ms", "_us", "_per_s", "_per_second",
            "_per_sec", "_timestamp", "_date", "_datetime", "_host", "_hostname", "_pid")
PREFIXES = ("seconds_", "minutes_", "hours_", "time_", "elapsed_", "wall_", "host_", "hostname_")
INFIXES = ("load_avg",)


def is_run_fact(key: Any) -> bool:
    """Whether a mapping key names a run fact (module doc); a non-string key never does."""
    if not isinstance(key, str):
        return False
    k = key.lower()
    return k in NAMES or k.endswith(SUFFIXES) or k.startswith(PREFIXES) or any(i in k for i in INFIXES)


def split_run_facts(obj: Any) -> tuple[Any, dict[str, Any]]:
    """``obj`` (parsed JSON: mappings, lists, scalars) -> (``results``: ``obj`` without any key that
    names a run fact, at any depth; ``facts``: those keys' values, nested as they were, a list's
    element under its index as a string, parts without facts left out). ``obj`` is not modified."""
    if isinstance(obj, Mapping):
        results: dict[Any, Any] = {}
        facts: dict[str, Any] = {}
        for k, v in obj.items():
            if is_run_fact(k):
                facts[k] = v
                continue
            results[k], sub = split_run_facts(v)
            if sub:
                facts[k] = sub
        return results, facts
    if isinstance(obj, (list, tuple)):
        parts = [split_run_facts(v) for v in obj]
        return type(obj)(r for r, _ in parts), {str(i): f for i, (_, f) in enumerate(parts) if f}
    return obj, {}


def results_only(obj: Any) -> Any:
    """``obj`` without its run facts (:func:`split_run_facts`)."""
    return split_run_facts(obj)[0]


def run_fact_paths(obj: Any, prefix: str = "") -> list[str]:
    """The dotted path of every key of ``obj`` that names a run fact (list elements by index), in
    order: empty when ``obj`` holds results only."""
    out: list[str] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if is_run_fact(k):
                out.append(path)
            else:
                out += run_fact_paths(v, path)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += run_fact_paths(v, f"{prefix}.{i}" if prefix else str(i))
    return out
