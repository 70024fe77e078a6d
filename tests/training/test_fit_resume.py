"""A fit interrupted after any epoch and resumed from its saved ``FitState`` trains exactly as an
uninterrupted fit (issue 30): the checkpoint carries the weights, the optimiser, the scheduler, the
early-stopping counters and every random generator the epochs draw from (dropout draws from torch's
global generator; the loss here also draws from Python's ``random`` and NumPy's)."""
from __future__ import annotations

import io
import random

import numpy as np
import pytest
import torch
from torch import nn

from components.training.loop import FitState, TrainConfig, fit, rng_state, set_rng_state

CFG = TrainConfig(lr=0.05, epochs=6, patience=6, lr_patience=2, lr_factor=0.5)


def _setup(device: str = "cpu"):
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 3)).to(device)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(64, 4, generator=g).to(device)
    y = ((X[:, 0] + X[:, 1] > 0).long() + (X[:, 2] > 1).long()).to(device)
    batches = lambda epoch: [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]

    def loss(m, b):       # a loss that draws from every global generator a training step may use
        noise = random.random() * 1e-3 + float(np.random.rand()) * 1e-3
        return nn.functional.cross_entropy(m(b[0]), b[1]) + noise

    def evaluate(m):
        return {"score": float((m(X).argmax(-1) == y).float().mean())}
    return model, batches, loss, evaluate


def _run(state: FitState | None = None, epochs: int = CFG.epochs, device: str = "cpu"):
    model, batches, loss, evaluate = _setup(device)
    if state is not None:      # a restarted process: every generator somewhere else (CUDA's too)
        random.seed(123), np.random.seed(123), torch.manual_seed(123)
    cfg = TrainConfig(**{**CFG.__dict__, "epochs": epochs})
    return model, fit(model, loss, batches, 4, evaluate, cfg, state=state)


def _saved(state: FitState) -> FitState:
    """Through the bytes a checkpoint holds, read back as the trials read it (weights_only)."""
    buf = io.BytesIO()
    torch.save(state.to_dict(), buf)
    buf.seek(0)
    return FitState.from_dict(torch.load(buf, weights_only=True))


@pytest.mark.parametrize("stop_after", [1, 3, 5])
def test_a_resumed_fit_equals_an_uninterrupted_one(stop_after):
    ref_model, ref = _run()
    _, first = _run(epochs=stop_after)
    model, resumed = _run(state=_saved(first))
    assert resumed.history == ref.history
    assert (resumed.best_epoch, resumed.best_score, resumed.epoch) == (ref.best_epoch, ref.best_score, ref.epoch)
    for (k, a), b in zip(model.state_dict().items(), ref_model.state_dict().values()):
        assert torch.equal(a, b), k


def test_without_the_random_state_a_resume_differs():
    """The test above can fail: the same resume with the generators' state dropped gives other numbers."""
    _, ref = _run()
    _, first = _run(epochs=2)
    state = _saved(first)
    state.rng_state = None
    _, resumed = _run(state=state)
    assert [h["train_loss"] for h in resumed.history] != [h["train_loss"] for h in ref.history]


def test_rng_state_round_trips_every_generator():
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    saved = rng_state()
    want = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(_saved(FitState(rng_state=saved)).rng_state)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == want


def test_a_checkpoint_holds_no_timing():
    _, state = _run(epochs=2)
    assert len(state.seconds) == 2
    saved = state.to_dict()
    assert "seconds" not in saved and all("seconds" not in k for h in saved["history"] for k in h)


def test_a_resumed_state_saves_to_the_same_bytes():
    """A checkpoint of the resumed fit is byte-identical to the uninterrupted fit's (DVC hashes it)."""
    _, ref = _run()
    _, first = _run(epochs=3)
    _, resumed = _run(state=_saved(first))

    def raw(state):
        buf = io.BytesIO()
        torch.save(state.to_dict(), buf)
        return buf.getvalue()
    assert raw(resumed) == raw(ref)


@pytest.mark.gpu
def test_a_resumed_fit_on_cuda_equals_an_uninterrupted_one():
    """Dropout on a CUDA device draws from the device's generator: the checkpoint carries it."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    torch.use_deterministic_algorithms(True, warn_only=True)
    ref_model, ref = _run(device="cuda")
    _, first = _run(epochs=3, device="cuda")
    saved = _saved(first)
    assert "cuda" in saved.rng_state
    model, resumed = _run(state=saved, device="cuda")
    assert resumed.history == ref.history
    for (k, a), b in zip(model.state_dict().items(), ref_model.state_dict().values()):
        assert torch.equal(a, b), k
    again = _saved(first)                        # (fit continued `saved` in place)
    again.rng_state.pop("cuda")                  # without the device's generator: other dropout masks
    _, other = _run(state=again, device="cuda")
    assert [h["train_loss"] for h in other.history] != [h["train_loss"] for h in ref.history]


def test_a_fit_resumed_after_its_last_epoch_saves_the_same_state():
    """A run stopped after its last epoch but before its final save (an interrupt or a crash there)
    resumes with no epoch left to train: its saved state must equal the uninterrupted run's. Before,
    ``model_state`` aliased the live weights, which fit then reset to the best epoch's, so the
    uninterrupted run saved the best weights as its last and the resumed one the last epoch's."""
    def scores():        # the best dev score at epoch 2 of 5: the last epoch's weights are not the best
        return iter([0.5, 0.9, 0.6, 0.4, 0.3])

    checkpoints = []

    def run(state=None, epochs=5):
        model, batches, loss, _ = _setup()
        it = scores()
        for _ in range(state.epoch if state is not None else 0):
            next(it)
        cfg = TrainConfig(**{**CFG.__dict__, "epochs": epochs, "lr_patience": 0})
        return fit(model, loss, batches, 4, lambda m: {"score": next(it)}, cfg, state=state,
                   on_epoch=lambda st, rec: checkpoints.append(_saved(st)))    # what a trial's checkpoint holds

    ref = run()
    assert ref.best_epoch == 2 and ref.epoch == 5
    resumed = run(state=checkpoints[-1])              # the last epoch's checkpoint, read back
    assert all(torch.equal(resumed.model_state[k], ref.model_state[k]) for k in ref.model_state)

    def raw(state):
        buf = io.BytesIO()
        torch.save(state.to_dict(), buf)
        return buf.getvalue()
    assert raw(resumed) == raw(ref)
