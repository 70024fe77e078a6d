"""Suite-wide settings: local Ray without auth or usage stats, no MLflow telemetry, quiet logs."""
import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture
def one_thread():
    # Tiny tensors: one intra-op thread is fastest; idle OpenMP workers spinning on a busy 2-core
    # machine cost 10-100x in wall time (one run of the inference tests took 258 s with two threads).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
