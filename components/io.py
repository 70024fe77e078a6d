"""Atomic file output: write to a temporary file in the target folder, then ``os.replace``.
``npz_bytes``: arrays as ``.npz`` bytes that depend on the arrays only (no time of writing).

An interrupted stage never leaves a half-written artifact behind. A failed write (a full disk,
ENOSPC; a read-only folder) is re-raised as an ``OSError`` of the same errno whose message names
the destination file, not only the temporary file beside it. :func:`sqlite_lock` serialises the
processes that create or migrate one SQLite store.
"""
from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping


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


# the earliest time a zip member can carry (MS-DOS dates start in 1980)
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def npz_bytes(arrays: Mapping[str, Any], *, compressed: bool = True) -> bytes:
    """The bytes of an ``.npz`` holding ``arrays`` (``np.load`` reads it as ``np.savez`` wrote it),
    the same bytes for the same arrays on any CPython 3.11. ``np.savez`` forces the zip64 format on
    every member, whose local headers CPython 3.11.2 and 3.11.7 write differently, so the same
    statistics made different files on two installs: a new DVC hash, a changed ``dvc.lock``, the
    stages downstream re-run for nothing. Here every member has one fixed date and uses zip64 only
    when it needs it (2 GiB and more). Object arrays are refused (no pickles)."""
    import numpy as np

    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method, allowZip64=True) as zf:
        for name, value in arrays.items():
            a = np.asanyarray(value)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = method
            # the .npy header is at most a few KiB; deflate never grows a member by more than ~0.1 %
            with zf.open(info, "w", force_zip64=a.nbytes * 1.01 + 65_536 >= zipfile.ZIP64_LIMIT) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return buf.getvalue()


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
