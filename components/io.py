"""Atomic file output: write to a temporary file in the target folder, then ``os.replace``.

An interrupted stage never leaves a half-written artifact behind. A failed write (a full disk,
ENOSPC; a read-only folder) is re-raised as an ``OSError`` of the same errno whose message names
the destination file, not only the temporary file beside it. :func:`sqlite_lock` serialises the
processes that create or migrate one SQLite store.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


def _write_error(e: OSError, path: Path, tmp: Path | None) -> OSError:
    """``e`` as an ``OSError`` of the same errno (so the same subclass) naming the destination."""
    detail = e.strerror or str(e)
    if e.filename is not None and (tmp is None or str(e.filename) != str(tmp)) and str(e.filename) != str(path):
        detail += f" ({e.filename})"
    if e.errno is None:
        return OSError(f"cannot write {path}: {detail}")
    return OSError(e.errno, f"cannot write {path}: {detail}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``. An
    ``OSError`` (creating the folder, writing, renaming) is re-raised naming ``path``."""
    path = Path(path)
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as e:
        raise _write_error(e, path, tmp_path) from e
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


def write_json(path: str | Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=float) + "\n")


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def sqlite_lock(url: str) -> Iterator[None]:
    """An exclusive lock ``<db>.lock`` beside a ``sqlite:///`` file for the block (parallel
    processes creating or migrating one SQLite store: the MLflow store, the Optuna studies);
    nothing for a server URL."""
    if not url.startswith("sqlite:///"):
        yield
        return
    db = Path(url[len("sqlite:///"):])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
