"""The same code and data give the same outputs (issue 30, item 5).

DVC hashes every output of a stage: a wall time, a throughput or a host fact written into one makes
its hash change on every run, re-runs the stages that depend on it for nothing, and keeps a
committed ``dvc.lock`` from ever matching. Run facts (``components.metrics.run_facts``) go to
MLflow and to ``metrics/timings/`` only; model folders and the metrics files stages read hold
results. Checked here: the rule that tells them apart, the training loops' records, the stages'
dev evaluations, ``run_stage``'s split, and (slow) the real ``train`` and ``train_energy`` stages
run twice on a tiny project: byte-identical outputs.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import random
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from components.metrics.run_facts import is_run_fact, results_only, run_fact_paths, split_run_facts
from components.tracking.base import NullTracker
from components.training.loop import TrainConfig, fit
from flows.stages.common import run_stage


# -- the rule ------------------------------------------------------------------------------------

# keys the stages and benchmarks write today, by what they are
FACTS = ["stage_seconds", "sweep_minutes", "tune_minutes", "sampling_minutes", "stage_minutes", "train_seconds",
         "train_minutes", "eval_seconds", "decode_seconds", "decode_sentences_per_s", "decode_tokens_per_s",
         "seconds_per_epoch", "tuning_seconds", "naive_s", "fast_s", "ce_s", "beam_k3_s", "matmul_s", "wall_s",
         "L400.viterbi.ours_ms", "naive_proposals_per_s", "instances_per_s", "elapsed_s", "minutes", "seconds",
         "times", "machine", "load_avg_start", "decode_load_avg_start", "hostname", "pid", "timestamp"]
RESULTS = ["score", "accuracy", "test_score", "best_dev_score", "train_loss", "dev_score", "lr", "epoch",
           "n_tokens", "energy_pred", "speedup", "mh_ratio", "decode_ratio_k5", "train_ratio_k3",
           "L400.viterbi.speedup_vs_pytorch_crf", "speedup_q1", "rounds", "converged", "bs10", "fastest_bs",
           "updates", "status", "candidates", "n_labels", "alpha", "best_epoch", "epochs_run", "signature",
           "min_temperature", "hamming", "unk_source_rate_dev", "length_scale", "decode_alpha"]


@pytest.mark.parametrize("key", FACTS)
def test_a_duration_a_rate_or_a_host_fact_is_a_run_fact(key):
    assert is_run_fact(key) and is_run_fact(key.upper())


@pytest.mark.parametrize("key", RESULTS)
def test_a_result_is_not_a_run_fact(key):
    assert not is_run_fact(key)


def test_split_keeps_the_structure_and_loses_nothing():
    metrics = {"pos": {"test_score": 90.0, "test_decode_seconds": 0.2, "config": {"lr": 0.1}},
               "table": [{"row": "a", "by_objective": {"ll": {"nll": 1.0, "train_seconds": 3.0}}}, {"row": "b"}],
               "sweep_minutes": 1.5, "runs": 4, 7: "non-string key"}
    original = copy.deepcopy(metrics)
    results, facts = split_run_facts(metrics)
    assert metrics == original                                   # not modified
    assert results == {"pos": {"test_score": 90.0, "config": {"lr": 0.1}},
                       "table": [{"row": "a", "by_objective": {"ll": {"nll": 1.0}}}, {"row": "b"}],
                       "runs": 4, 7: "non-string key"}
    assert facts == {"pos": {"test_decode_seconds": 0.2}, "sweep_minutes": 1.5,
                     "table": {"0": {"by_objective": {"ll": {"train_seconds": 3.0}}}}}
    assert results_only(metrics) == results and run_fact_paths(results) == []
    assert run_fact_paths(metrics) == ["pos.test_decode_seconds", "table.0.by_objective.ll.train_seconds",
                                       "sweep_minutes"]
    assert split_run_facts(3.0) == (3.0, {}) and split_run_facts([1, 2]) == ([1, 2], {})


# -- the training loops keep run facts out of what they save ----------------------------------------

def _state_bytes(state) -> bytes:
    buf = io.BytesIO()
    torch.save(state.to_dict(), buf)
    return buf.getvalue()


def _fit_once():
    """A tiny fit as a trial runs it: every global generator a FitState records seeded first."""
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(48, 3, generator=g)
    y = (X @ torch.tensor([1.0, -2.0, 0.5]) > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 2))
    seen = []
    state = fit(model, lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
                lambda epoch: [(X[i:i + 16], y[i:i + 16]) for i in range(0, 48, 16)], 3,
                lambda m: {"score": float((m(X).argmax(-1) == y).float().mean())},
                TrainConfig(lr=0.05, epochs=3, patience=5), on_epoch=lambda s, r: seen.append(r))
    return state, seen


def test_a_fit_saves_the_same_state_every_run_and_reports_its_timings_apart():
    a, seen = _fit_once()
    b, _ = _fit_once()
    assert run_fact_paths(a.history) == [] and run_fact_paths(a.to_dict()) == []
    assert _state_bytes(a) == _state_bytes(b)                    # what state.pt holds: byte-identical
    # the epoch's wall time still reaches Tune and MLflow (on_epoch's record)
    assert [r["train_seconds"] > 0 for r in seen] == [True] * 3
    assert results_only(seen) == a.history


def test_train_cmlm_keeps_its_epoch_times_out_of_the_history_it_saves():
    from components.training.cmlm import CMLMTrainConfig, train_cmlm
    from tests.training.test_cmlm import copy_task, model
    seen = []
    cfg = CMLMTrainConfig(epochs=2, batch_size=16, lr=3e-3, warmup_steps=0)
    a = train_cmlm(model(), copy_task(32, 16), cfg, seed=3, on_epoch=seen.append)
    b = train_cmlm(model(), copy_task(32, 16), cfg, seed=3)
    # train.json of models/cmlm: {"best_epoch", "best", "stats", "history"}
    saved = lambda r: json.dumps({"best_epoch": r.best_epoch, "best": r.best, "stats": r.stats, "history": r.history})
    assert run_fact_paths(json.loads(saved(a))) == [] and saved(a) == saved(b)
    assert len(a.seconds) == len(a.history) == 2 and all(s > 0 for s in a.seconds)
    assert [r["train_seconds"] for r in seen] == a.seconds and results_only(seen) == a.history


# -- the stages' dev evaluations (each epoch's record, saved in the model folder) -------------------

def _tiny_energy():
    from components.data.batching import TaggingDataset
    from components.data.types import TaggedSentence
    from components.data.vocab import build_label_vocab, build_vocab
    from components.energies.registry import ENERGIES
    from components.models.encoders import BLSTMConfig
    sents = [TaggedSentence(("a", "b", "c"), ("X", "Y", "X")), TaggedSentence(("b",), ("Y",)),
             TaggedSentence(("c", "a"), ("X", "X"))]
    vocabs = {"word": build_vocab(w for s in sents for w in s.words),
              "char": build_vocab(c for s in sents for w in s.words for c in w),
              "label": build_label_vocab(sents)}
    sizes = {"n_words": len(vocabs["word"]), "n_chars": len(vocabs["char"]), "n_labels": len(vocabs["label"])}
    torch.manual_seed(0)
    energy = ENERGIES.build("blstm_crf", BLSTMConfig(hidden=4), **sizes).eval()
    task = SimpleNamespace(vocabs=vocabs, metric="accuracy")
    return energy, task, TaggingDataset(sents, vocabs), sizes


def test_train_energy_and_infnets_dev_evaluations_hold_results_only():
    from components.models.infnets import InfNetConfig, build_infnet
    from components.training.infnet import NetUnderEnergy
    from flows.stages import infnets, train_energy
    energy, task, ds, sizes = _tiny_energy()
    cfg = SimpleNamespace(eval_batch_size=2)
    net = NetUnderEnergy(build_infnet(InfNetConfig(arch="cnn", hidden=4), **sizes), energy)
    for evaluate, model, variant in ((train_energy._evaluate, energy, "blstm_crf"),
                                     (infnets._evaluate, net, "blstm_crf.cnn.infnet")):
        dev = evaluate(model, cfg, variant, task, ds, "dev", "cpu")
        test = evaluate(model, cfg, variant, task, ds, "test", "cpu")
        assert run_fact_paths(dev) == [] and "score" in dev
        assert test["decode_tokens_per_s"] > 0 and results_only(test) == dev    # the test speed: for MLflow


# -- run_stage: results to metrics/<stage>.json, run facts to metrics/timings/ ----------------------

def _stage_module(name: str, *, keeps: bool):
    """A stage module ``name`` whose run returns results and run facts."""
    mod = types.ModuleType(name)

    def run(params, ctx):
        return {"pos": {"test_score": 90.0, "test_decode_seconds": 0.25}, "machine": {"cpu": "x86"},
                "sweep_minutes": 0.5}
    run.__module__ = name
    mod.run = run
    if keeps:
        mod.TIMINGS_ARE_RESULTS = True
    return mod


def test_run_stage_writes_run_facts_apart_from_results(tmp_path, monkeypatch):
    mod = _stage_module("tests_det_stage", keeps=False)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    params = {"base": {"tracker": "null"}, "demo": {"tasks": ["pos"]}}
    m = run_stage("demo", mod.run, params, tmp_path, tracker=NullTracker(), task="pos")
    assert m["pos"]["test_decode_seconds"] == 0.25 and m["stage_seconds"] >= 0        # returned (and logged) whole
    assert json.loads((tmp_path / "metrics/demo/pos.json").read_text()) == {"pos": {"test_score": 90.0}}
    timings = json.loads((tmp_path / "metrics/timings/demo/pos.json").read_text())
    assert timings == {"pos": {"test_decode_seconds": 0.25}, "machine": {"cpu": "x86"}, "sweep_minutes": 0.5,
                       "stage_seconds": m["stage_seconds"]}


def test_a_stage_whose_timings_are_results_keeps_them_but_not_its_stage_seconds(tmp_path, monkeypatch):
    mod = _stage_module("tests_det_stage_keeps", keeps=True)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    m = run_stage("demo", mod.run, {"base": {"tracker": "null"}, "demo": {}}, tmp_path, tracker=NullTracker())
    written = json.loads((tmp_path / "metrics/demo.json").read_text())
    assert written == {k: v for k, v in m.items() if k != "stage_seconds"}
    assert json.loads((tmp_path / "metrics/timings/demo.json").read_text()) == {"stage_seconds": m["stage_seconds"]}


# -- the real stages, twice ---------------------------------------------------------------------------

def _digests(root: Path, *parts: str) -> dict[str, str]:
    out = {}
    for part in parts:
        for p in sorted((root / part).rglob("*")):
            if p.is_file():
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _facts_in_models(root: Path) -> dict[str, list[str]]:
    """Every file under models/ that holds a run fact -> the paths of its keys (JSON files, and the
    history and metadata a saved FitState holds)."""
    found = {}
    for p in sorted((root / "models").rglob("*")):
        if p.suffix == ".json":
            obj = json.loads(p.read_text())
        elif p.name == "state.pt":
            obj = {k: v for k, v in torch.load(p, weights_only=True).items() if k in ("history", "epoch", "best_score")}
        else:
            continue
        if run_fact_paths(obj):
            found[p.relative_to(root).as_posix()] = run_fact_paths(obj)
    return found


@pytest.mark.slow
def test_train_and_train_energy_twice_give_byte_identical_outputs(tiny_root):
    from flows.stages import prepare, train, train_energy
    root, params = tiny_root
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root)
    params["train"]["tasks"] = ["pos"]
    te = params["train_energy"]
    te.update(tasks=["pos"], energies=["blstm_crf"], max_train_sentences=0)
    te["optim"].update(epochs=3, batch_size=8)
    te.setdefault("model", {})["hidden"] = 8
    te["sweep"].update(num_samples=1, resources={"cpu": 1, "gpu": 0},
                       space={"train_energy.optim.lr": {"type": "choice", "values": [0.05]}})
    outs = ("models", "metrics/train.json", "metrics/train_energy.json", "plots")
    import ray
    try:
        digests = []
        for _ in range(2):
            run_stage("train", train.run, params, root)
            run_stage("train_energy", train_energy.run, params, root)
            digests.append(_digests(root, *outs))
    finally:
        ray.shutdown()
    assert digests[0] == digests[1]
    assert {"models/tagger/pos/model.pt", "models/energy/pos/blstm_crf/model.pt",
            "models/energy/pos/blstm_crf/state.pt"} <= set(digests[0])
    assert _facts_in_models(root) == {}
    for stage in ("train", "train_energy"):                      # the metrics: results; their timings beside
        assert run_fact_paths(json.loads((root / f"metrics/{stage}.json").read_text())) == []
        assert json.loads((root / f"metrics/timings/{stage}.json").read_text())["stage_seconds"] > 0
    energy_timings = json.loads((root / "metrics/timings/train_energy.json").read_text())
    assert energy_timings["pos-blstm_crf"]["test_decode_tokens_per_s"] > 0


# -- .npz outputs ----------------------------------------------------------------------------------

def _local_header_versions(data: bytes) -> list[int]:
    """The "version needed to extract" of each member's local header (45: zip64, 20: plain)."""
    import struct
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [struct.unpack_from("<H", data, info.header_offset + 4)[0] for info in zf.infolist()]


def test_npz_bytes_depend_on_the_arrays_only(monkeypatch):
    """``np.savez`` writes every member as zip64, whose local header CPython 3.11.2 and 3.11.7 fill
    differently (the same statistics, two files); ``components.io.npz_bytes`` writes plain members
    with a fixed date: the same bytes at any time, and ``np.load`` reads them back."""
    import time

    from components.io import npz_bytes

    arrays = {"system:greedy": np.arange(12, dtype=np.float64).reshape(3, 4), "__columns__": np.array(["a", "b"]),
              "ids": np.array([3, 1, 2], dtype=np.int32)}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    assert set(_local_header_versions(buf.getvalue())) == {45}      # numpy's: zip64, interpreter-dependent

    def at(t, compressed):
        monkeypatch.setattr(time, "time", lambda: t)
        return npz_bytes(arrays, compressed=compressed)

    for compressed in (True, False):
        first = at(1.7e9, compressed)
        assert first == at(1.7e9 + 86_400, compressed)
        assert set(_local_header_versions(first)) == {20}
        with np.load(io.BytesIO(first), allow_pickle=False) as z:
            assert list(z.files) == list(arrays)
            for name, a in arrays.items():
                assert z[name].dtype == a.dtype and np.array_equal(z[name], a)
    assert len(at(0.0, True)) < len(at(0.0, False))
    with pytest.raises(ValueError, match="pickle"):
        npz_bytes({"objects": np.array([{"a": 1}], dtype=object)})


def test_save_stats_writes_the_same_bytes_twice(tmp_path, monkeypatch):
    import time

    from components.metrics.significance import load_stats, save_stats

    stats = {"beam": np.ones((4, 2)), "greedy": np.zeros((3, 4, 2))}
    monkeypatch.setattr(time, "time", lambda: 1.7e9)
    save_stats(tmp_path / "a.npz", stats, ("correct", "tokens"))
    monkeypatch.setattr(time, "time", lambda: 1.7e9 + 3_600)
    save_stats(tmp_path / "b.npz", stats, ("correct", "tokens"))
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert load_stats(tmp_path / "b.npz").columns == ("correct", "tokens")
