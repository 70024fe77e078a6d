import copy

import torch

from components.training.loop import FitState, TrainConfig, fit


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(64, 3, generator=g)
    y = (X @ torch.tensor([1.0, -2.0, 0.5]) > 0).long()
    return X, y


def _setup():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    X, y = _problem()
    batches = lambda epoch: [(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    loss = lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1])
    evaluate = lambda m: {"score": float((m(X).argmax(-1) == y).float().mean())}
    return model, batches, loss, evaluate


def test_resume_from_state_equals_uninterrupted_training():
    cfg = TrainConfig(lr=0.05, epochs=4, patience=10)
    model, batches, loss, evaluate = _setup()
    full = fit(model, loss, batches, 4, evaluate, cfg)
    full_weights = copy.deepcopy(model.state_dict())

    model2, batches, loss, evaluate = _setup()
    half = fit(model2, loss, batches, 4, evaluate, TrainConfig(lr=0.05, epochs=2, patience=10))
    saved = FitState.from_dict(copy.deepcopy(half.to_dict()))      # what a checkpoint holds
    model3, batches, loss, evaluate = _setup()
    resumed = fit(model3, loss, batches, 4, evaluate, cfg, state=saved)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in full.history]
    for k in full_weights:
        torch.testing.assert_close(model3.state_dict()[k], full_weights[k], rtol=0, atol=0)


def test_early_stopping_keeps_best_weights():
    model, batches, loss, evaluate = _setup()
    scores = iter([0.5, 0.9, 0.8, 0.7, 0.6, 0.95])
    snapshots = []

    def ev(m):
        snapshots.append(copy.deepcopy(m.state_dict()))
        return {"score": next(scores)}

    state = fit(model, loss, batches, 4, ev, TrainConfig(lr=0.05, epochs=6, patience=2))
    assert state.epoch == 4 and state.best_epoch == 2 and state.best_score == 0.9
    for k, v in snapshots[1].items():
        torch.testing.assert_close(model.state_dict()[k], v)


def test_non_finite_loss_is_an_error():
    model, batches, _, evaluate = _setup()
    bad = lambda m, b: m(b[0]).sum() * float("nan")
    try:
        fit(model, bad, batches, 4, evaluate, TrainConfig(epochs=1))
    except FloatingPointError as e:
        assert "epoch 1, batch 0" in str(e)
    else:
        raise AssertionError("expected FloatingPointError")


def test_min_epochs_holds_off_early_stopping():
    """A flat start (NER at 0 F1) would stop after ``patience`` epochs; ``min_epochs`` trains on
    until the score moves, then patience applies again."""
    def run(min_epochs):
        model, batches, loss, _ = _setup()
        scores = iter([0.0, 0.0, 0.0, 0.0, 0.6, 0.7, 0.65, 0.6, 0.5, 0.4])
        return fit(model, loss, batches, 4, lambda m: {"score": next(scores)},
                   TrainConfig(lr=0.05, epochs=10, patience=2, min_epochs=min_epochs))
    assert run(0).epoch == 3 and run(0).best_score == 0.0
    state = run(5)
    assert state.epoch == 8 and state.best_epoch == 6 and state.best_score == 0.7
