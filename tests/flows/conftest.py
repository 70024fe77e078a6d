"""A tiny project root in the real raw formats, for stage smoke tests."""
from __future__ import annotations

import pytest
import yaml

from tests.tiny_project import write_raw


@pytest.fixture
def tiny_root(tmp_path, monkeypatch):
    # prepare checks raw files against their recorded SHA-256: record these stand-ins' own sums
    sums = write_raw(tmp_path, 60)
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
