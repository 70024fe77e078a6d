"""``prepare`` verifies the SHA-256 of every raw file it reads that has a recorded sum (issue 14,
item 5): a raw file with one byte changed stops the stage with an error naming the file, both
sums and the way out (fetch again). The recorded sums are injected (``checksums=``), never
written to the real ``components/data/checksums.json``."""
from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path

import pytest

from components.config import BaseConfig
from components.data.fetch import FetchError
from components.data.prepare import RawFiles
from components.tracking import NullTracker
from flows.stages import prepare
from flows.stages.common import StageContext

WSJ = "The/DT cat/NN sleeps/VBZ ./.\nA/DT dog/NN runs/VBZ ./.\n" * 10


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def flip_one_byte(path: Path, needle: bytes) -> None:
    """Change one byte, as a disk or transfer error would: ``NN`` -> ``NO`` becomes a new label."""
    data = bytearray(path.read_bytes())
    data[data.index(needle) + len(needle) - 1] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def raw(tmp_path):
    """``<tmp>/data/raw/wsj_pos/tagged-en-wsj.txt`` and its recorded sum."""
    f = tmp_path / "data" / "raw" / "wsj_pos" / "tagged-en-wsj.txt"
    f.parent.mkdir(parents=True)
    f.write_text(WSJ)
    return tmp_path, {"wsj_pos/tagged-en-wsj.txt": sha(f.read_bytes())}


def run_prepare(root: Path, sums: dict[str, str], tasks: dict) -> dict:
    params = {"base": {"tracker": "null"},
              "prepare": {"tasks": tasks, "glove": False, "ocr_letters": False, "snakes": False,
                          "cmudict": False, "parallel": False}}
    ctx = StageContext(root=root, base=BaseConfig(tracker="null"), tracker=NullTracker(), run_id="", stage="prepare")
    return functools.partial(prepare.run, checksums=sums)(params, ctx)


POS_TASK = {"pos": {"format": "word_tag", "paths": ["data/raw/wsj_pos/tagged-en-wsj.txt"]}}


def test_raw_files_refuses_a_flipped_byte(raw):
    root, sums = raw
    f = root / "data/raw/wsj_pos/tagged-en-wsj.txt"
    flip_one_byte(f, b"cat/NN")
    files = RawFiles(root / "data" / "raw", sums)
    with pytest.raises(FetchError) as e:
        files.check(f)
    msg = str(e.value)
    assert str(f) in msg and "wsj_pos/tagged-en-wsj.txt" in msg
    assert sums["wsj_pos/tagged-en-wsj.txt"] in msg and sha(f.read_bytes()) in msg
    assert "dvc repro fetch" in msg
    assert files.verified == {}


def test_raw_files_hashes_each_file_once(raw, monkeypatch):
    root, sums = raw
    calls = []
    digest = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda f, name: calls.append(f.name) or digest(f, name))
    files = RawFiles(root / "data" / "raw", sums)
    for _ in range(3):
        assert files.file("wsj_pos/tagged-en-wsj.txt") == root / "data/raw/wsj_pos/tagged-en-wsj.txt"
    assert len(calls) == 1
    assert files.verified == sums and files.unverified == []


def test_raw_files_through_a_symlinked_raw_dir(raw, tmp_path_factory):
    root, sums = raw
    other = tmp_path_factory.mktemp("other")
    (other / "data").mkdir()
    (other / "data" / "raw").symlink_to(root / "data" / "raw")
    files = RawFiles(other / "data" / "raw", sums)
    files.check(other / "data/raw/wsj_pos/tagged-en-wsj.txt")
    assert files.verified == sums


def test_raw_files_lists_files_without_a_sum_as_unverified(raw):
    root, sums = raw
    user = root / "data" / "user" / "mine.txt"
    user.parent.mkdir(parents=True)
    user.write_text("a/DT\n")
    unrecorded = root / "data" / "raw" / "wsj_pos" / "extra.txt"
    unrecorded.write_text("b/NN\n")
    files = RawFiles(root / "data" / "raw", sums)
    assert files.check(user) == user and files.check(unrecorded) == unrecorded and files.check(user) == user
    assert files.unverified == [user, unrecorded] and files.verified == {}


def test_prepare_stage_refuses_a_changed_raw_file(raw):
    root, sums = raw
    flip_one_byte(root / "data/raw/wsj_pos/tagged-en-wsj.txt", b"dog/NN")
    with pytest.raises(FetchError, match=r"tagged-en-wsj\.txt: checksum mismatch .*dvc repro fetch"):
        run_prepare(root, sums, POS_TASK)
    assert not (root / "data" / "prepared" / "pos").exists()


def test_prepare_stage_reads_an_intact_raw_file(raw):
    root, sums = raw
    m = run_prepare(root, sums, POS_TASK)
    assert m["pos"]["train_sentences"] + m["pos"]["dev_sentences"] + m["pos"]["test_sentences"] == 20
    assert "unverified_files" not in m


def test_prepare_stage_reports_user_files_as_unverified(raw, caplog):
    root, sums = raw
    user = root / "data" / "user" / "mine.txt"
    user.parent.mkdir(parents=True)
    user.write_text(WSJ)
    tasks = {**POS_TASK, "mine": {"format": "word_tag", "paths": ["data/user/mine.txt"]}}
    with caplog.at_level(logging.WARNING, logger="flows.stages.prepare"):
        m = run_prepare(root, sums, tasks)
    assert m["unverified_files"] == 1
    assert "not verified" in caplog.text and "mine.txt" in caplog.text and "tagged-en-wsj.txt" not in caplog.text
