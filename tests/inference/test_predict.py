"""``components.inference.predict``: tagging a user's sentences with a model folder gives exactly the
labels of the path the stages evaluate with, for every kind of tagging model and its methods; input
files are read with ``file:line`` errors; folders it cannot serve are refused, saying why.

The task and the models are tiny and built here (random weights: what matters is that two paths
agree, not what they predict). :func:`make_task` and :func:`make_model` serve the CLI and MLflow
model tests too."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from components.checkpoints import build
from components.config import ConfigError
from components.data.batching import TaggingDataset, decode_dataset
from components.data.store import write_tagged
from components.data.tasks import load_tagging_task
from components.data.types import FormatError, TaggedSentence
from components.data.vocab import build_label_vocab, build_vocab, write_vocabs
from components.energies.chain import FixedPotentials
from components.inference import predict as P
from components.inference.evaluate import evaluate_inference
from components.inference.registry import INFERENCE
from components.metrics.tagging import tagging_scores
from components.models.encoders import BLSTMConfig
from components.models.infnets import InfNetConfig
from components.models.seq2seq import Seq2SeqTaggerConfig
from components.recipes import recipe
from components.training.tagger import predict_tags

WORDS = ["the", "dog", "cat", "runs", "sleeps", "big", "a", "John", "Paris", "in", "loves", "Mary", "."]
TAGS = {"the": "DT", "a": "DT", "dog": "NN", "cat": "NN", "runs": "VBZ", "sleeps": "VBZ", "big": "JJ",
        "John": "NNP", "Paris": "NNP", "in": "IN", "loves": "VBZ", "Mary": "NNP", ".": "."}
TASK = "toy"


def sentences(n: int, seed: int) -> list[TaggedSentence]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = tuple(WORDS[j] for j in rng.integers(len(WORDS), size=int(rng.integers(1, 9))))
        out.append(TaggedSentence(words, tuple(TAGS[w] for w in words), sid=f"{seed}:{i}"))
    return out


def make_task(folder: Path, name: str = TASK) -> Path:
    """A prepared tagging task folder as ``prepare`` writes one: splits, vocabularies, meta.json."""
    folder.mkdir(parents=True, exist_ok=True)
    train, dev, test = sentences(40, 1), sentences(30, 2), sentences(10, 3)
    vocabs = {"word": build_vocab(w.lower() for s in train for w in s.words),
              "char": build_vocab(c for s in train for w in s.words for c in w),
              "label": build_label_vocab(train, dev + test)}
    write_vocabs(folder / "vocab.parquet", vocabs)
    for split, ss in (("train", train), ("dev", dev), ("test", test)):
        write_tagged(folder / f"{split}.parquet", ss)
    (folder / "meta.json").write_text(json.dumps({"task": name, "metric": "accuracy", "scheme": "keep",
                                                  "format": "word_tag"}))
    return folder


RECIPES = {
    "tagger": ("blstm", BLSTMConfig(hidden=6, embedding_dim=8, dropout=0.0)),
    "energy": ("blstm_crf", BLSTMConfig(hidden=6, embedding_dim=8, dropout=0.0)),
    "infnet": ("blstm", InfNetConfig(arch="blstm", hidden=6, embedding_dim=8)),
    "seq2seq": ("seq2seq", Seq2SeqTaggerConfig(hidden=6, embedding_dim=8, label_dim=4, dropout=0.0)),
}


def make_model(folder: Path, task_dir: Path, kind: str, *, seed: int = 0, **extra) -> Path:
    """A model folder of ``kind`` with random weights, built for the task's vocabularies."""
    task = load_tagging_task(task_dir)
    name, cfg = RECIPES[kind]
    rec = recipe(kind, name, cfg, task.sizes)
    torch.manual_seed(seed)
    module = build(rec)
    with torch.no_grad():              # weights of some spread, so that labels differ between tokens
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(module.state_dict(), folder / "model.pt")
    (folder / "model.json").write_text(json.dumps({"task": task.name if task.name == TASK else task.meta["task"],
                                                   "variant": name, "section": "test", "recipe": rec, **extra}))
    return folder


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return make_task(tmp_path_factory.mktemp("prepared") / TASK)


@pytest.fixture(scope="module")
def folders(task_dir, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    out = {kind: make_model(root / kind, task_dir, kind) for kind in RECIPES}
    out["seq2seq_k2"] = make_model(root / "seq2seq_k2", task_dir, "seq2seq", beam_size=2, decode_alpha=5.0)
    return out


def _dev(task_dir: Path) -> TaggingDataset:
    return load_tagging_task(task_dir).dev


# --- the stage's own labels --------------------------------------------------------------------

@pytest.mark.parametrize("method", ["viterbi", "gd", "gd_adam"])
def test_an_energy_tags_as_evaluate_inference_decodes(task_dir, folders, method):
    model = P.load_tagging_model(folders["energy"], task_dir)
    ds = _dev(task_dir)
    got = P.tag(model, [s.words for s in ds.sentences], method, seed=3)
    inf = INFERENCE.build(method, seed=3) if INFERENCE[method].meta.get("seeded") else INFERENCE.build(method)
    want = decode_dataset(ds, lambda b: inf(FixedPotentials.of(model.module, b), b).labels, model.labels)
    assert got == want
    if method == "viterbi":      # and the stage's score of those labels
        score = evaluate_inference(model.module, INFERENCE.build("viterbi"), ds, model.labels, "accuracy")["score"]
        assert tagging_scores("accuracy", [s.tags for s in ds.sentences], got)["score"] == pytest.approx(score)
    assert len({t for s in got for t in s}) > 1


def test_a_tagger_tags_as_predict_tags(task_dir, folders):
    model = P.load_tagging_model(folders["tagger"], task_dir)
    assert model.default_method == "argmax" and model.methods == ("argmax",)
    ds = _dev(task_dir)
    assert P.tag(model, [s.words for s in ds.sentences]) == predict_tags(model.module, ds, model.labels)


def test_an_inference_network_tags_as_the_infnet_method(task_dir, folders):
    model = P.load_tagging_model(folders["infnet"], task_dir)
    energy = P.load_tagging_model(folders["energy"], task_dir).module
    ds = _dev(task_dir)
    inf = INFERENCE.build("infnet", net=model.module)
    want = decode_dataset(ds, lambda b: inf(FixedPotentials.of(energy, b), b).labels, model.labels)
    assert P.tag(model, [s.words for s in ds.sentences]) == want


@pytest.mark.parametrize("folder, method, settings", [
    ("seq2seq", "greedy", {}), ("seq2seq", "beam", {"k": 3}), ("seq2seq", "soft_beam", {"k": 3, "alpha": 1.0}),
    ("seq2seq_k2", "beam", {"k": 2}), ("seq2seq_k2", "soft_beam", {"k": 2, "alpha": 5.0}),
])
def test_a_seq2seq_tagger_decodes_as_evaluate_decoding(task_dir, folders, folder, method, settings):
    """The decoding settings the search_aware stage recorded in model.json (beam_size, decode_alpha)."""
    model = P.load_tagging_model(folders[folder], task_dir)
    ds = _dev(task_dir)
    dec = INFERENCE.build_with(method, settings)
    want = decode_dataset(ds, lambda b: dec(model.module, b).labels, model.labels)
    assert P.tag(model, [s.words for s in ds.sentences], method) == want


def test_options_set_the_method_config_strictly(task_dir, folders):
    model = P.load_tagging_model(folders["energy"], task_dir)
    words = [s.words for s in _dev(task_dir).sentences]
    assert P.tag(model, words, "gd", options={"iterations": 3}) != []
    with pytest.raises(ConfigError, match="bogus"):
        P.tag(model, words, "gd", options={"bogus": 1})
    with pytest.raises(ConfigError, match="takes no settings"):
        P.tag(P.load_tagging_model(folders["tagger"], task_dir), words, options={"k": 2})


def test_a_method_the_kind_cannot_run_is_refused_naming_those_it_can(task_dir, folders):
    tagger = P.load_tagging_model(folders["tagger"], task_dir)
    with pytest.raises(ConfigError, match=r"a tagger model .* predicts with argmax .*needs ChainEnergy"):
        P.tag(tagger, [["the"]], "viterbi")
    energy = P.load_tagging_model(folders["energy"], task_dir)
    assert energy.methods == ("viterbi", "gd", "gd_adam")
    with pytest.raises(ConfigError, match=r"'infnet' needs net"):
        P.tag(energy, [["the"]], "infnet")


def test_unknown_words_and_case_are_handled_as_in_the_dataset(task_dir, folders):
    model = P.load_tagging_model(folders["energy"], task_dir)
    out = P.tag(model, [["THE", "zebra", "Dog"], ["x"]])
    assert [len(s) for s in out] == [3, 1]
    ds = TaggingDataset([TaggedSentence(("THE", "zebra", "Dog"), ("DT",) * 3)], model.vocabs)
    assert ds.words[0][1] == model.vocabs["word"].unk_id
    assert P.tag(model, []) == []
    with pytest.raises(ValueError, match="sentence 1: no tokens"):
        P.tag(model, [["a"], []])


# --- where the vocabularies come from ------------------------------------------------------------

def test_the_vocabularies_are_found_in_task_subfolder_then_prepared_dir(task_dir, folders, tmp_path):
    import shutil
    own = tmp_path / "own"
    shutil.copytree(folders["tagger"], own)
    with pytest.raises(FileNotFoundError, match=r"no task vocabularies .* \(--task-dir"):
        P.load_tagging_model(own, prepared_dir=tmp_path / "nowhere")
    assert P.load_tagging_model(own, prepared_dir=task_dir.parent).task_dir == task_dir
    (own / P.TASK_SUBDIR).mkdir()
    for f in P.TASK_FILES:
        shutil.copy(task_dir / f, own / P.TASK_SUBDIR / f)
    assert P.load_tagging_model(own, prepared_dir=tmp_path / "nowhere").task_dir == own / P.TASK_SUBDIR


def test_vocabularies_of_another_preparation_are_refused(task_dir, folders, tmp_path):
    other = tmp_path / TASK
    other.mkdir()
    (other / "meta.json").write_text((task_dir / "meta.json").read_text())
    vocabs = {"word": build_vocab(["a", "b"]), "char": build_vocab(["a"]), "label": build_vocab(["X"], specials=())}
    write_vocabs(other / "vocab.parquet", vocabs)
    with pytest.raises(ConfigError, match=r"vocabulary sizes n_words 4, .*but .*model.json was built with"):
        P.load_tagging_model(folders["tagger"], other)
    (other / "meta.json").write_text(json.dumps({"task": "pos"}))
    with pytest.raises(ConfigError, match=r"task 'pos', but .* was trained on 'toy'"):
        P.load_tagging_model(folders["tagger"], other)


def test_translator_folders_are_not_supported_yet(tmp_path, task_dir):
    (tmp_path / "model.json").write_text(json.dumps({"recipe": {"kind": "translator", "sizes": {}}}))
    (tmp_path / "model.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match="translator model; .* not supported yet"):
        P.load_tagging_model(tmp_path, task_dir)


# --- reading and writing files -------------------------------------------------------------------

def test_one_column_conll_text_and_tagged_conll_are_read(tmp_path):
    one = tmp_path / "one.conll"
    one.write_text("-DOCSTART-\n\nThe\ndog\n\n\nruns\n")
    assert [s.words for s in P.read_sentences(one)] == [("The", "dog"), ("runs",)]
    assert P.read_sentences(one)[1].sid == "one.conll:7"
    two = tmp_path / "two.conll"
    two.write_text("John\tB-PER\nSmith\tI-PER\n\nParis B-LOC\n")
    got = P.read_sentences(two, scheme="bioes")
    assert [(s.words, s.tags) for s in got] == [(("John", "Smith"), ("B-PER", "E-PER")), (("Paris",), ("S-LOC",))]
    text = tmp_path / "in.txt"
    text.write_text("The dog  runs\n\n  a\tcat \n")
    assert [s.words for s in P.read_sentences(text, "text")] == [("The", "dog", "runs"), ("a", "cat")]


@pytest.mark.parametrize("content, fmt, line, what", [
    ("The\ndog\tNN\n", "conll", 2, "2 columns; expected 1"),
    ("The\tDT\ndog\n", "conll", 2, "1 columns; expected 2"),
    ("The\u00a0dog\n", "conll", 1, r"U\+00A0"),
    ("ok\nbad\u00a0token here\n", "text", 2, r"U\+00A0"),
    ("a\rb\n", "conll", 1, "carriage return"),
])
def test_a_bad_line_names_the_file_and_line(tmp_path, content, fmt, line, what):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(FormatError, match=what) as e:
        P.read_sentences(path, fmt)
    assert e.value.line == line and str(e.value).startswith(f"{path}:{line}: ")


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    (tmp_path / "empty").write_text("\n\n")
    with pytest.raises(FormatError, match="no token found"):
        P.read_sentences(tmp_path / "empty")
    with pytest.raises(FormatError, match="no sentence found"):
        P.read_sentences(tmp_path / "empty", "text")
    with pytest.raises(FileNotFoundError, match="no such file"):
        P.read_sentences(tmp_path / "nope")
    with pytest.raises(ConfigError, match="--format 'xml'"):
        P.read_sentences(tmp_path / "empty", "xml")


def test_the_output_is_conll_that_reads_back(tmp_path):
    words, labels = [("The", "dog"), ("runs",)], [["DT", "NN"], ["VBZ"]]
    assert P.format_conll(words, labels) == "The\tDT\ndog\tNN\n\nruns\tVBZ\n\n"
    P.write_conll(tmp_path / "out.conll", words, labels)
    back = P.read_sentences(tmp_path / "out.conll")
    assert [s.words for s in back] == words and [list(s.tags) for s in back] == labels
    with pytest.raises(ValueError, match="sentence 0: 2 tokens but 1 labels"):
        P.format_conll(words, [["DT"], ["VBZ"]])


def test_the_pyfunc_predictor_takes_a_method_per_call(task_dir, folders, tmp_path):
    import shutil
    own = tmp_path / "own"
    shutil.copytree(folders["energy"], own)
    shutil.copytree(task_dir, own / P.TASK_SUBDIR)
    predict = P.predictor(own)
    model = P.load_tagging_model(own)
    words = [s.words for s in _dev(task_dir).sentences]
    assert predict(words) == P.tag(model, words, "viterbi")
    assert predict(words, "gd") == P.tag(model, words, "gd")
    with pytest.raises(ConfigError):
        P.predictor(own, method="argmax")
