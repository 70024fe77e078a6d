"""Tag token sequences with a trained model folder: the library side of ``approxinfer predict``.

A *tagging model* is a model folder (:mod:`components.checkpoints`: ``model.pt`` + ``model.json``
with its recipe) together with the vocabularies of the task it was trained on (``meta.json`` and
``vocab.parquet`` of ``data/prepared/<task>/``). The vocabularies are found, in this order, in the
folder given as ``task_dir``, in the model folder's own ``task/`` subfolder (:data:`TASK_SUBDIR`:
where an MLflow model bundle carries them, see :mod:`components.tracking.models`), and in
``<prepared_dir>/<task>`` for the ``task`` its ``model.json`` names.

Which inference methods a folder supports depends on its recipe's kind (:func:`methods_for`):

============  =====================================================  ===================
kind          methods                                                default
============  =====================================================  ===================
``tagger``    ``argmax`` (the softmax tagger's per-position argmax)  ``argmax``
``energy``    the ``INFERENCE`` entries for a ``ChainEnergy`` that   ``viterbi``
              need no other trained input: ``viterbi``, ``gd``,
              ``gd_adam``
``infnet``    ``infnet`` (the network's per-position argmax)         ``infnet``
``seq2seq``   the ``StepScorer`` decoders: ``greedy``, ``beam``,     ``greedy``
              ``soft_beam`` (``k`` / ``alpha`` from ``model.json``'s
              ``beam_size`` / ``decode_alpha`` when it records them)
============  =====================================================  ===================

Every path goes through :func:`components.data.batching.decode_dataset` with the decode function
the stages evaluate with (:func:`components.inference.evaluate.evaluate_inference` for an energy —
the method sees the ``FixedPotentials`` of the batch; ``components.training.tagger.predict_tags``
for a tagger; ``evaluate_decoding`` for a step scorer), so on the same sentences the labels are
exactly the stage's. A method's settings come from its own frozen config (``options``, read
strictly: an unknown key is an error naming it); a seeded method (``gd``) takes ``seed``.

Inputs (:func:`read_sentences`): ``conll`` — one token a line, a blank line between sentences,
the word in the first column; a file with two or more columns is read by the project's CoNLL
reader (:func:`components.data.readers.read_conll`), its last column kept as gold tags (scored by
the caller when wanted); ``text`` — one sentence a line, tokens separated by spaces or TABs.
Malformed input raises :class:`~components.data.types.FormatError` naming ``file:line``.
Output (:func:`format_conll`): ``token<TAB>label`` lines, a blank line after each sentence.

Translator folders (``kind: translator``) are not supported yet: :func:`load_tagging_model`
refuses them with a ConfigError saying so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn

from components.checkpoints import load
from components.config import ConfigError
from components.data.batching import TaggingDataset, decode_dataset
from components.data.readers import _blocks, _check_spaces, _nonblank_lines, _split_columns, read_conll
from components.data.types import FormatError, TaggedSentence
from components.data.vocab import Vocab, read_vocabs
from components.energies.chain import FixedPotentials
from components.inference.inference_net import infnet_logits
from components.inference.registry import INFERENCE
from components.io import write_text

TASK_SUBDIR = "task"                        # a self-contained model folder's copy of the task's vocabularies
TASK_FILES = ("meta.json", "vocab.parquet")
FORMATS = ("conll", "text")
#: ``module:attribute`` of :func:`predictor`, for the MLflow pyfunc wrapper
#: (``components.tracking.models.log_model(..., loader=PYFUNC_LOADER)``)
PYFUNC_LOADER = "components.inference.predict:predictor"

_OWN = {"tagger": ("argmax",), "infnet": ("infnet",)}
DEFAULT_METHOD = {"tagger": "argmax", "infnet": "infnet", "energy": "viterbi", "seq2seq": "greedy"}


def methods_for(kind: str) -> tuple[str, ...]:
    """The method names ``tag`` accepts for a model of recipe kind ``kind`` (see the module doc)."""
    if kind in _OWN:
        return _OWN[kind]
    if kind == "energy":
        return tuple(n for n in INFERENCE.names(needs="ChainEnergy") if not INFERENCE[n].meta.get("inputs"))
    if kind == "seq2seq":
        return INFERENCE.names(needs="StepScorer")
    raise ConfigError(f"model kind {kind!r}: predict supports tagging models ({', '.join(DEFAULT_METHOD)}); "
                      f"translator folders are not supported yet")


@dataclass
class TaggingModel:
    """A loaded tagging model: the module (eval mode), its ``model.json`` and the task's vocabularies."""
    folder: Path
    kind: str
    module: nn.Module
    info: dict[str, Any]                    # model.json
    vocabs: dict[str, Vocab]
    task_meta: dict[str, Any]
    task_dir: Path
    device: str = "cpu"
    features: tuple[str, ...] = field(default=())

    @property
    def task(self) -> str:
        return str(self.info.get("task") or self.task_meta.get("task") or self.task_dir.name)

    @property
    def labels(self) -> Vocab:
        return self.vocabs["label"]

    @property
    def methods(self) -> tuple[str, ...]:
        return methods_for(self.kind)

    @property
    def default_method(self) -> str:
        return DEFAULT_METHOD[self.kind]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def find_task_dir(folder: str | Path, task_dir: str | Path | None = None, *,
                  prepared_dir: str | Path = "data/prepared") -> Path:
    """Where the vocabularies of the model in ``folder`` are (see the module doc), or a
    FileNotFoundError naming every place looked in."""
    folder = Path(folder)
    if task_dir is not None:
        task_dir = Path(task_dir)
        missing = [f for f in TASK_FILES if not (task_dir / f).exists()]
        if missing:
            raise FileNotFoundError(f"{task_dir}: not a prepared tagging task folder (no {', '.join(missing)})")
        return task_dir
    places = [folder / TASK_SUBDIR]
    info_path = folder / "model.json"
    task = _read_json(info_path).get("task") if info_path.exists() else None
    if task:
        places.append(Path(prepared_dir) / str(task))
    for p in places:
        if all((p / f).exists() for f in TASK_FILES):
            return p
    raise FileNotFoundError(f"{folder}: no task vocabularies ({' and '.join(TASK_FILES)}) in "
                            + " or ".join(str(p) for p in places)
                            + ("" if task else f" ({info_path} names no 'task')")
                            + "; give the prepared task folder (--task-dir data/prepared/<task>)")


def load_tagging_model(folder: str | Path, task_dir: str | Path | None = None, *, device: str = "cpu",
                       prepared_dir: str | Path = "data/prepared") -> TaggingModel:
    """The model in ``folder`` with its task's vocabularies; checks they are the ones it was built
    with (vocabulary sizes) and that the task has no per-token feature columns (not supported)."""
    folder = Path(folder)
    info_path = folder / "model.json"
    if not info_path.exists():
        raise FileNotFoundError(f"{folder}: no model.json (not a trained model folder)")
    info = _read_json(info_path)
    rec = info.get("recipe")
    if not isinstance(rec, dict):
        raise ConfigError(f"{info_path}: no 'recipe' (saved by an older version; re-run the stage that trained it)")
    kind = rec.get("kind")
    if kind == "translator":
        raise ConfigError(f"{folder}: a translator model; predicting with translator folders (--format text) is "
                          f"not supported yet: predict tags with tagger, energy, infnet and seq2seq folders")
    methods_for(str(kind))                      # an unknown kind fails here, naming the supported ones
    tdir = find_task_dir(folder, task_dir, prepared_dir=prepared_dir)
    meta = _read_json(tdir / "meta.json")
    if info.get("task") and meta.get("task") and info["task"] != meta["task"]:
        raise ConfigError(f"{tdir}/meta.json: task {meta['task']!r}, but {info_path} was trained on {info['task']!r}")
    features = tuple(meta.get("features", ()))
    if features:
        raise ConfigError(f"{tdir}/meta.json: task {meta.get('task')!r} has per-token feature columns "
                          f"{list(features)}; predicting with input features is not supported yet")
    vocabs = read_vocabs(tdir / "vocab.parquet")
    missing = [k for k in ("word", "char", "label") if k not in vocabs]
    if missing:
        raise ConfigError(f"{tdir}/vocab.parquet: no {', '.join(missing)} vocabulary")
    sizes = rec.get("sizes") or {}
    have = {"n_words": len(vocabs["word"]), "n_chars": len(vocabs["char"]), "n_labels": len(vocabs["label"])}
    wrong = {k: (sizes.get(k), v) for k, v in have.items() if sizes.get(k) != v}
    if wrong:
        raise ConfigError(f"{tdir}/vocab.parquet: vocabulary sizes "
                          + ", ".join(f"{k} {v[1]}" for k, v in wrong.items())
                          + f", but {info_path} was built with "
                          + ", ".join(f"{k} {v[0]}" for k, v in wrong.items())
                          + " (the model was trained on another preparation of the task)")
    module = load(folder, device)
    return TaggingModel(folder, str(kind), module, info, vocabs, meta, tdir, device, features)


def check_method(model: TaggingModel, method: str | None) -> str:
    """``method`` (or the kind's default) if ``model`` supports it; else a ConfigError naming those it does."""
    method = method or model.default_method
    if method not in model.methods:
        why = ""
        if method in INFERENCE:
            need = INFERENCE[method].meta
            why = (f" ({method!r} needs {' and '.join(need.get('inputs', ())) or need.get('needs')}, which a "
                   f"{model.kind} folder does not provide)")
        raise ConfigError(f"--method {method!r}: a {model.kind} model ({model.folder}) predicts with "
                          f"{', '.join(model.methods)}{why}")
    return method


def _decoder(model: TaggingModel, method: str, options: Mapping[str, Any] | None,
             seed: int) -> Callable[[Any], torch.Tensor]:
    """``decode(batch) -> label ids [B, N]``, as the stage that evaluates such a model decodes."""
    options = dict(options or {})
    net = model.module
    if model.kind in _OWN:
        if options:
            raise ConfigError(f"--option: method {method!r} takes no settings, got {sorted(options)}")
        if model.kind == "infnet":
            return lambda b: infnet_logits(net, b).argmax(-1)
        return lambda b: net(b.words, b.mask, b.chars).argmax(-1)
    entry = INFERENCE[method]
    settings: dict[str, Any] = {}
    if model.kind == "seq2seq":      # the decoding settings the search_aware stage used, where recorded
        fields = set(entry.config.__dataclass_fields__)
        recorded = {"k": model.info.get("beam_size"), "alpha": model.info.get("decode_alpha")}
        settings = {k: v for k, v in recorded.items() if k in fields and v is not None}
    cfg = INFERENCE.config(method, {**settings, **options}, where=f"--option (method {method!r})")
    inf = entry.make(cfg, seed=seed) if entry.meta.get("seeded") else entry.make(cfg)
    if model.kind == "seq2seq":
        return lambda b: inf(net, b).labels
    return lambda b: inf(FixedPotentials.of(net, b), b).labels


def tag(model: TaggingModel, sentences: Sequence[Sequence[str]], method: str | None = None, *,
        options: Mapping[str, Any] | None = None, seed: int = 0, batch_size: int = 64) -> list[list[str]]:
    """The labels of every token sequence in ``sentences`` (same order, same lengths)."""
    method = check_method(model, method)
    decode = _decoder(model, method, options, seed)
    if not sentences:
        return []
    dummy = model.labels.tokens[0]
    tagged = []
    for i, s in enumerate(sentences):
        words = tuple(str(w) for w in s)
        if not words:
            raise ValueError(f"sentence {i}: no tokens")
        tagged.append(TaggedSentence(words, (dummy,) * len(words), sid=str(i)))
    ds = TaggingDataset(tagged, model.vocabs, features=())
    model.module.eval()
    with torch.no_grad():
        return decode_dataset(ds, decode, model.labels, batch_size=batch_size, device=model.device)


def read_sentences(path: str | Path, fmt: str = "conll", *, scheme: str = "keep") -> list[TaggedSentence]:
    """The sentences of a user's file (see the module doc). Sentences of a one-column CoNLL file or a
    text file have no gold tags (``tags`` = ``words``); a CoNLL file with a tag column keeps it as
    ``tags``, rewritten as BIOES when ``scheme="bioes"`` (a task prepared so)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected one of {FORMATS}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if fmt == "text":
        out = []
        for n, line in _nonblank_lines(path):
            _check_spaces(path, n, line, "tokens")
            words = tuple(line.replace("\t", " ").split(" "))
            words = tuple(w for w in words if w)
            out.append(TaggedSentence(words, words, sid=f"{path.name}:{n}"))
        if not out:
            raise FormatError(path, None, "no sentence found in the file (expected one sentence a line)")
        return out
    n_cols = None
    for block in _blocks(path):
        for n, line in block:
            _check_spaces(path, n, line, "columns")
            cols = _split_columns(line)
            if cols[0] == "-DOCSTART-":
                continue
            n_cols = len(cols)
            break
        if n_cols is not None:
            break
    if n_cols is None:
        raise FormatError(path, None, "no token found in the file (expected one token a line, a blank line "
                                      "between sentences)")
    if n_cols > 1:
        return read_conll(path, scheme=scheme)    # word first, gold tag last
    out, first = [], 0
    for block in _blocks(path):
        words: list[str] = []
        for n, line in block:
            _check_spaces(path, n, line, "columns")
            cols = _split_columns(line)
            if cols[0] == "-DOCSTART-":
                continue
            if len(cols) != 1:
                raise FormatError(path, n, f"{len(cols)} columns; expected 1 like the file's first token line "
                                           "(a token a line)")
            if not words:
                first = n
            words.append(cols[0])
        if words:
            out.append(TaggedSentence(tuple(words), tuple(words), sid=f"{path.name}:{first}"))
    return out


def format_conll(sentences: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> str:
    """``token<TAB>label`` lines, a blank line after each sentence."""
    if len(sentences) != len(labels):
        raise ValueError(f"{len(sentences)} sentences but {len(labels)} label sequences")
    parts = []
    for i, (words, labs) in enumerate(zip(sentences, labels)):
        if len(words) != len(labs):
            raise ValueError(f"sentence {i}: {len(words)} tokens but {len(labs)} labels")
        parts.append("".join(f"{w}\t{t}\n" for w, t in zip(words, labs)) + "\n")
    return "".join(parts)


def write_conll(path: str | Path, sentences: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> None:
    """:func:`format_conll` written atomically to ``path``."""
    write_text(path, format_conll(sentences, labels))


def predictor(folder: str | Path, *, method: str | None = None,
              device: str = "cpu") -> Callable[..., list[list[str]]]:
    """``predict(token_lists, method=None) -> label lists`` for a self-contained model folder (its
    vocabularies in ``folder/task/``): what the MLflow pyfunc wrapper calls
    (:data:`PYFUNC_LOADER`). ``method`` is the default; each call may name another."""
    model = load_tagging_model(folder, device=device)
    default = check_method(model, method)

    def predict(sentences: Sequence[Sequence[str]], method: str | None = None) -> list[list[str]]:
        return tag(model, sentences, method or default)
    return predict
