"""A trained model's *recipe*: what rebuilds it before its weights are loaded (see
:mod:`components.checkpoints`, which reads recipes). Kept apart from the builders so that a stage
describing the model it trains does not depend on every model family's code."""
from __future__ import annotations

import dataclasses
from typing import Any

KINDS = ("energy", "infnet", "tagger", "seq2seq", "translator")


def recipe(kind: str, name: str, config: Any, sizes: dict[str, int], prefix: str = "") -> dict[str, Any]:
    """The recipe of a model (``config`` a dataclass or a mapping)."""
    if kind not in KINDS:
        raise ValueError(f"recipe: kind must be one of {KINDS}, got {kind!r}")
    cfg = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    return {"kind": kind, "name": name, "config": cfg, "sizes": dict(sizes), "prefix": prefix}


