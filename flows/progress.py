"""Progress of long work as people read it: a live bar on a terminal, one plain line per finished
item (trial, shard, task) when the output goes to a log file or a pipe.

``interactive()`` decides once per process: ``APPROXINFER_PROGRESS=bar`` or ``=line`` forces a mode,
otherwise a terminal on stderr means bars. The driver exports its decision (``export_mode``) before
Ray starts, so trials and tasks — whose output Ray forwards through pipes, never a terminal —
follow the driver: per-epoch bars inside trials on a terminal, nothing per epoch in a log.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from tqdm.auto import tqdm

ENV = "APPROXINFER_PROGRESS"
MODES = ("bar", "line")


def interactive() -> bool:
    """True for live bars, False for one line per finished item."""
    mode = os.environ.get(ENV, "").strip().lower()
    if mode:
        if mode not in MODES:
            raise ValueError(f"{ENV}={mode!r}: expected one of {MODES}")
        return mode == "bar"
    return sys.stderr.isatty()


def export_mode() -> None:
    """Fix this process's mode in the environment, so that the Ray workers it starts inherit it."""
    os.environ[ENV] = "bar" if interactive() else "line"


def line(text: str) -> None:
    """One progress line (printed above any live bar on a terminal)."""
    tqdm.write(text, file=sys.stderr)
    sys.stderr.flush()


class Progress:
    """``with Progress(total, desc, unit) as p: ... p.update(note=...)``: a tqdm bar on a terminal,
    else one line per ``update`` — ``<desc>: 3/8 shards done (41 s)[: note]``."""

    def __init__(self, total: int, desc: str, unit: str = "item"):
        self.total, self.desc, self.unit = total, desc, unit
        self.done = 0
        self._t0 = time.perf_counter()
        self._bar: Any = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr) if interactive() else None

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            if note:
                self._bar.set_postfix_str(note, refresh=False)
        else:
            line(f"{self.desc}: {self.done}/{self.total} {self.unit}s done ({time.perf_counter() - self._t0:.0f} s)"
                 + (f": {note}" if note else ""))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
