"""Input checks (issue 30, item 7): invisible characters, overlong sentences, an unknown-word rate
that says the wrong file was read, misspelled task keys, unknown registry names, a failed write.

Each is refused (or warned about) with a message that says where: ``file:line`` for a corpus, the
dotted params key for a setting, the destination file for a write.
"""
from __future__ import annotations

import errno
import functools
import json
import logging
from pathlib import Path

import pytest

from components import io
from components.config import BaseConfig, ConfigError, from_dict, load_params
from components.data import readers as R
from components.data.prepare import PrepareConfig
from components.data.types import FormatError
from components.tracking import NullTracker
from flows.stages import prepare, search_aware
from flows.stages.common import StageContext

REPO = Path(__file__).resolve().parents[2]
CONLLU_ROW = "{i}\t{w}\t{w}\t{t}\t{t}\t_\t0\troot\t_\t_"
SBLGNT_HEADER = "id\taltId\ttext\tstrongs\tgloss\tgloss2\tlemma\tpos\tmorph"
SBLGNT_ROW = "n{v}{k:03d}\t\t{w}\tG1\t\t\t{w}\tnoun\t{t}"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p


def expect(fn, path: Path, line: int, *words: str, error=FormatError, **kw) -> FormatError:
    with pytest.raises(error) as e:
        fn(path, **kw)
    msg = str(e.value)
    assert e.value.line == line and f"{path}:{line}:" in msg, msg
    for w in words:
        assert w in msg, msg
    return e.value


# --------------------------------------------------------------------------------------------
# 1. invisible format characters (Unicode Cf) at file:line
# --------------------------------------------------------------------------------------------

def conll(*sents: list[tuple[str, str]]) -> str:
    return "\n".join("\n".join(f"{w}\t{t}" for w, t in s) + "\n" for s in sents)


INVISIBLE = [("\u200b", "ZERO WIDTH SPACE"), ("\u200c", "ZERO WIDTH NON-JOINER"), ("\u200d", "ZERO WIDTH JOINER"),
             ("\u2060", "WORD JOINER"), ("\ufeff", "ZERO WIDTH NO-BREAK SPACE"), ("\u00ad", "SOFT HYPHEN")]


@pytest.mark.parametrize("char, name", INVISIBLE, ids=[f"U+{ord(c):04X}" for c, _ in INVISIBLE])
def test_an_invisible_character_in_a_word_is_an_error_at_its_line(tmp_path, char, name):
    p = write(tmp_path, "c.txt", conll([("EU", "B-ORG"), ("rejects", "O")], [("Pe" + char + "ter", "B-PER")]))
    e = expect(R.read_conll, p, 4, f"U+{ord(char):04X} ({name}) at character 3", "invisible format character")
    assert "1 in the file" in str(e)


def test_a_bom_in_the_middle_of_a_file_is_refused_one_at_its_start_is_not(tmp_path):
    first, second = conll([("EU", "B-ORG"), ("rejects", "O")]), conll([("Peter", "B-PER"), ("said", "O")])
    p = write(tmp_path, "start.txt", "\ufeff" + first)
    assert R.read_conll(p)[0].words == ("EU", "rejects")            # the leading BOM is not part of the word
    p = write(tmp_path, "cat.txt", "\ufeff" + first + "\ufeff" + second)      # two files concatenated
    expect(R.read_conll, p, 3, "U+FEFF", "at character 1", "byte-order mark inside a file")   # Peter's line
    p = write(tmp_path, "twice.txt", "\ufeff\ufeff" + first)
    expect(R.read_conll, p, 1, "U+FEFF")


@pytest.mark.parametrize("name, read, text, line", [
    ("conllu", R.read_conllu, "# sent_id = a\n" + CONLLU_ROW.format(i=1, w="Bu\u200bnu", t="PRON") + "\n", 2),
    ("word_tag", R.read_word_tag, "The/DT cat/NN\na/DT d\u2060og/NN\n", 2),
    ("ccg", R.read_ccg, "Pierre|NNP|N/N\nVin\u200dken|NNP|N\n", 2),
    ("ark", R.read_ark_twitter, "ikr\t!\n\nsmh\ufeff\tG\n", 3),
    ("sblgnt", R.read_sblgnt,
     SBLGNT_HEADER + "\n" + SBLGNT_ROW.format(v="40001001", k=1, w="Βί\u200cβλος", t="N-NSF") + "\n", 2),
    ("cmudict", R.read_cmudict, "a AH0\nb\u200b B IY1\n", 2),
])
def test_every_text_reader_refuses_invisible_characters(tmp_path, name, read, text, line):
    expect(read, write(tmp_path, f"{name}.txt", text), line, "invisible format character")


def test_the_real_corpora_hold_no_invisible_characters():
    """The check refuses nothing the pipeline reads today (the raw files, when fetched)."""
    raw = REPO / "data" / "raw"
    files = [raw / "wnut16/ner.txt", raw / "wsj_pos/tagged-en-wsj.txt", raw / "turkish_ud/web.conllu"]
    files = [f for f in files if f.exists()]
    if not files:
        pytest.skip("raw corpora not fetched")
    for f in files:
        R._read_lines(f)


# --------------------------------------------------------------------------------------------
# 2. the sentence-length cap (prepare.max_sentence_tokens)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, read, text, line", [
    ("conll", R.read_conll, conll([("a", "O")] * 2, [("b", "O")] * 4), 4),
    ("conllu", R.read_conllu, "\n".join(CONLLU_ROW.format(i=i, w="w", t="X") for i in range(1, 2)) + "\n\n"
     + "# sent_id = long\n" + "\n".join(CONLLU_ROW.format(i=i, w="w", t="X") for i in range(1, 5)) + "\n", 3),
    ("word_tag", R.read_word_tag, "a/DT b/NN\n" + "c/NN " * 4 + "\n", 2),
    ("ccg", R.read_ccg, "a|DT|NP\n" + "c|NN|N " * 4 + "\n", 2),
    ("ark", R.read_ark_twitter, "a\tN\n\n" + "b\tV\n" * 4, 3),
    ("sblgnt", R.read_sblgnt, SBLGNT_HEADER + "\n" + SBLGNT_ROW.format(v="40001001", k=1, w="α", t="N") + "\n"
     + "\n".join(SBLGNT_ROW.format(v="40001002", k=k, w="β", t="N") for k in range(1, 5)) + "\n", 3),
])
def test_every_tagging_reader_caps_a_sentence_at_its_first_line(tmp_path, name, read, text, line):
    p = write(tmp_path, f"{name}.txt", text)
    e = expect(read, p, line, "a sentence of 4 tokens starts here; expected at most 3", error=R.SentenceTooLong,
               max_tokens=3)
    assert e.n_tokens == 4
    assert len(read(p, max_tokens=4)) == 2 and len(read(p)) == 2        # at the cap, and no cap, both read


def test_the_cap_is_a_positive_number():
    with pytest.raises(ConfigError, match=r"prepare.max_sentence_tokens: must be > 0"):
        from_dict(PrepareConfig, {"max_sentence_tokens": 0}, where="prepare")
    with pytest.raises(ConfigError, match=r"prepare.max_unknown_rate: must be in \[0, 1\]"):
        from_dict(PrepareConfig, {"max_unknown_rate": 1.5}, where="prepare")
    assert PrepareConfig().max_sentence_tokens == 512


def run_prepare(root: Path, tasks: dict, **prepare_keys) -> dict:
    params = {"base": {"tracker": "null"},
              "prepare": {"tasks": tasks, "glove": False, "ocr_letters": False, "snakes": False,
                          "cmudict": False, "parallel": False, **prepare_keys}}
    ctx = StageContext(root=root, base=BaseConfig(tracker="null"), tracker=NullTracker(), run_id="", stage="prepare")
    return functools.partial(prepare.run, checksums={})(params, ctx)


def test_prepare_refuses_a_100000_token_sentence_naming_file_line_and_key(tmp_path):
    text = "".join(f"s{i} O\nw{i} B-PER\n\n" for i in range(30)) + "".join(f"t{i} O\n" for i in range(100_000))
    f = write(tmp_path, "long.txt", text)
    task = {"ner": {"format": "conll", "paths": [str(f)], "scheme": "bioes", "metric": "span_f1"}}
    with pytest.raises(FormatError) as e:
        run_prepare(tmp_path, task)
    msg = str(e.value)
    assert msg.startswith(f"{f}:91: prepare.tasks.ner: the sentence has 100,000 tokens"), msg
    assert "prepare.max_sentence_tokens (512)" in msg and "prepare.max_sentence_tokens=100000" in msg
    assert not (tmp_path / "data" / "prepared").exists()
    m = run_prepare(tmp_path, task, max_sentence_tokens=100_000)       # the way out the message gives
    assert m["ner"]["train_tokens"] + m["ner"]["dev_tokens"] + m["ner"]["test_tokens"] == 100_060


# --------------------------------------------------------------------------------------------
# 3. a held-out split of unknown words is warned about and counted
# --------------------------------------------------------------------------------------------

def given_task(folder: Path, test_text: str) -> dict:
    """A word_tag task with its own train/dev/test files in ``folder``; the test file holds ``test_text``."""
    train = "The/DT cat/NN sleeps/VBZ ./.\nA/DT dog/NN runs/VBZ ./.\n" * 5
    folder.mkdir(exist_ok=True)
    files = {k: write(folder, f"{k}.txt", t) for k, t in
             (("train", train), ("dev", "The/DT dog/NN sleeps/VBZ ./.\n"), ("test", test_text))}
    return {"format": "word_tag", "split": "given", **{k: str(v) for k, v in files.items()}}


def test_a_test_set_of_unknown_words_warns(tmp_path, caplog):
    tasks = {"pos": given_task(tmp_path / "pos", "Der/DT Hund/NN schläft/VBZ heute/RB\n"),   # German: all unknown
             "ok": given_task(tmp_path / "ok", "A/DT cat/NN runs/VBZ\n")}
    with caplog.at_level(logging.WARNING, logger="flows.stages.prepare"):
        m = run_prepare(tmp_path, tasks)
    assert m["pos"]["test_unknown_word_rate"] == 1.0
    assert m["pos"]["unknown_rate_warnings"] == 1 and m["ok"]["unknown_rate_warnings"] == 0
    assert m["unknown_rate_warnings"] == 1
    warned = [r.getMessage() for r in caplog.records if "max_unknown_rate" in r.getMessage()]
    assert len(warned) == 1 and "prepare pos:" in warned[0] and "test split" in warned[0] and "100.0%" in warned[0]
    meta = json.loads((tmp_path / "data/prepared/pos/meta.json").read_text())
    assert meta["unknown_rate_warnings"] == 1


def test_no_warning_below_the_threshold(tmp_path, caplog):
    tasks = {"pos": given_task(tmp_path / "pos", "Der/DT Hund/NN schläft/VBZ heute/RB\n")}
    with caplog.at_level(logging.WARNING, logger="flows.stages.prepare"):
        m = run_prepare(tmp_path, tasks, max_unknown_rate=1.0)
    assert m["pos"]["unknown_rate_warnings"] == 0 and "unknown_rate_warnings" not in m
    assert "max_unknown_rate" not in caplog.text


# --------------------------------------------------------------------------------------------
# 4. search_aware's per-task maps name tasks
# --------------------------------------------------------------------------------------------

def sa_params(**section) -> dict:
    return {"prepare": {"tasks": {"ner": {}, "greek_morph_k400": {}}},
            "search_aware": {"tasks": ["ner"], "variants": {"ce": {"objective": "seq_ce"}}, **section}}


@pytest.mark.parametrize("key", ["beam_size", "max_train_sentences"])
def test_a_misspelled_task_in_a_per_task_map_is_refused(key):
    with pytest.raises(ConfigError) as e:
        search_aware.load_config(sa_params(**{key: {"ner": 3, "nerr": 5}}))
    msg = str(e.value)
    assert msg.startswith(f"search_aware.{key}.nerr: 'nerr' is not a task"), msg
    assert "['ner']" in msg and "greek_morph_k400" in msg


def test_a_per_task_map_may_name_a_declared_task_a_scale_adds():
    cfg = search_aware.load_config(sa_params(beam_size={"ner": 3, "greek_morph_k400": 5}))
    assert cfg.beam_size == {"ner": 3, "greek_morph_k400": 5}
    cfg = search_aware.load_config(load_params(REPO / "params.yaml"))        # the repository's own
    assert set(cfg.beam_size) <= set(load_params(REPO / "params.yaml")["prepare"]["tasks"])


# --------------------------------------------------------------------------------------------
# 5. an unknown registry name is a ConfigError naming the params key
# --------------------------------------------------------------------------------------------

def test_an_unknown_approx_method_names_approx_methods():
    from components.inference.study_config import ApproxStudyConfig
    from flows.stages import approx

    with pytest.raises(ConfigError) as e:
        approx._validate(ApproxStudyConfig(methods={"nosuch": {}}))
    msg = str(e.value)
    assert msg.startswith("approx.methods.nosuch: unknown inference method 'nosuch'; known: ["), msg
    assert "'gd_adam'" in msg and "'viterbi'" in msg


# --------------------------------------------------------------------------------------------
# 6. a failed write names its destination
# --------------------------------------------------------------------------------------------

def test_a_full_disk_names_the_destination(tmp_path, monkeypatch):
    dest = tmp_path / "metrics" / "prepare.json"
    io.write_json(dest, {"old": 1})

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    for write_it in (lambda: io.write_json(dest, {"new": 2}), lambda: io.write_text(dest, "new")):
        with pytest.raises(OSError) as e:
            write_it()
        assert e.value.errno == errno.ENOSPC
        assert f"cannot write {dest}: No space left on device" in str(e.value), str(e.value)
    monkeypatch.undo()
    assert json.loads(dest.read_text()) == {"old": 1}                       # untouched
    assert sorted(p.name for p in dest.parent.iterdir()) == ["prepare.json"]   # no temporary file left


def test_a_failed_rename_keeps_its_errno_and_class(tmp_path, monkeypatch):
    import os

    def denied(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(src), None, str(dst))

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError, match=r"cannot write .*out\.txt: Permission denied") as e:
        io.write_text(tmp_path / "out.txt", "x")
    assert e.value.errno == errno.EACCES
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
