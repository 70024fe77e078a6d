"""A tiny project root in the real raw formats, for stage smoke tests."""
from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

WORDS = ["the", "dog", "cat", "runs", "sleeps", "big", "a", "john", "paris", "in", "loves", "mary"]
POS = {"the": "DT", "a": "DT", "dog": "NN", "cat": "NN", "runs": "VBZ", "sleeps": "VBZ", "big": "JJ",
       "john": "NNP", "paris": "NNP", "in": "IN", "loves": "VBZ", "mary": "NNP"}
NER = {"john": "B-PER", "mary": "B-PER", "paris": "B-LOC"}


@pytest.fixture
def tiny_root(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    raw = tmp_path / "data" / "raw"
    sents = [[WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(1, 8))] for _ in range(60)]
    (raw / "wsj_pos").mkdir(parents=True)
    (raw / "wsj_pos" / "tagged-en-wsj.txt").write_text(
        "\n".join(" ".join(f"{w}/{POS[w]}" for w in s) for s in sents) + "\n")
    (raw / "wnut16").mkdir()
    (raw / "wnut16" / "ner.txt").write_text(
        "\n\n".join("\n".join(f"{w}\t{NER.get(w, 'O')}" for w in s) for s in sents) + "\n")
    (raw / "glove50").mkdir()
    vocab = WORDS[:8]
    np.save(raw / "glove50" / "glove_6B_50d_emb.npy", rng.standard_normal((len(vocab), 50)).astype(np.float32))
    pq.write_table(pa.table({"index": vocab}), raw / "glove50" / "glove_6B_index.parquet")
    (tmp_path / "data" / "user").mkdir()
    # prepare checks raw files against their recorded SHA-256: record these stand-ins' own sums
    sums = {p.relative_to(raw).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in raw.rglob("*") if p.is_file()}
    monkeypatch.setattr("flows.stages.prepare.load_checksums", lambda: sums)
    params = yaml.safe_load(open("params.yaml"))
    params["prepare"].update(ocr_letters=False, snakes=False, cmudict=False, parallel=False)
    params["prepare"]["tasks"] = {k: params["prepare"]["tasks"][k] for k in ("pos", "ner")}
    params["train"]["optim"].update(epochs=2, batch_size=8)
    params["train"]["sweep"].update(num_samples=2, max_concurrent=2)
    params["train"]["sweep"]["resources"] = {"cpu": 1, "gpu": 0}
    params["train"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 0.001, "high": 0.01},
                                         "train.model.hidden": {"type": "choice", "values": [4, 8]}}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    return tmp_path, params
