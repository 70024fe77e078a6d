"""flows.progress: one plain line per finished item in a log, a live bar only when asked for."""
import pytest

from flows import progress
from flows.progress import ENV, Progress


def test_line_mode_prints_one_line_per_item(monkeypatch, capsys):
    monkeypatch.setenv(ENV, "line")
    with Progress(3, "demo shards", unit="shard") as p:
        p.update()
        p.update(note="last two")
        p.update()
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("demo shards: 1/3 shards done (")
    assert lines[1].startswith("demo shards: 2/3 shards done (") and lines[1].endswith(": last two")
    assert "\r" not in err


def test_bar_mode_draws_a_bar(monkeypatch, capsys):
    monkeypatch.setenv(ENV, "bar")
    with Progress(2, "demo", unit="trial") as p:
        p.update()
        p.update()
    err = capsys.readouterr().err
    assert "2/2" in err and "demo: 1/2 trials done" not in err


def test_default_follows_the_terminal_and_export_fixes_it(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False)
    assert progress.interactive() is False
    progress.export_mode()
    assert progress.os.environ[ENV] == "line"
    monkeypatch.setenv(ENV, "bar")
    assert progress.interactive() is True


def test_unknown_mode_is_an_error(monkeypatch):
    monkeypatch.setenv(ENV, "fancy")
    with pytest.raises(ValueError, match="APPROXINFER_PROGRESS='fancy'"):
        progress.interactive()
