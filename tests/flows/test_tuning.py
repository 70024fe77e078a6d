"""flows.tuning.tune_in_trial: a tuned setting that did not learn is discarded, not fatal."""
from __future__ import annotations

import pytest

from components.training.guard import DidNotLearn
from flows.tuning import tune_in_trial

SPACE = {"x.lr": {"type": "choice", "values": [0.1, 0.01, 0.001]}}


def _train(learns):
    seen = []

    def train(values, report, on_batch):
        seen.append(values["x.lr"])
        if not learns(values["x.lr"]):
            raise DidNotLearn(f"lr {values['x.lr']}: did not learn")
        return 1.0 / values["x.lr"], values["x.lr"]
    return train, seen


def test_a_setting_that_did_not_learn_is_a_failed_trial_and_the_study_goes_on():
    train, seen = _train(lambda lr: lr != 0.001)
    best = tune_in_trial("t", SPACE, 6, 0, train)
    assert len(best.trials) == 6 and len(seen) == 6
    assert best.kept != 0.001 and best.score == max(1 / lr for lr in seen if lr != 0.001)
    failed = [t for t in best.trials if "did_not_learn" in t]
    assert failed, "the seeded sampler should have tried lr 0.001 in 6 trials"
    assert [t["values"]["x.lr"] for t in failed] == [lr for lr in seen if lr == 0.001]
    assert all(t["dev_score"] is None for t in failed)


def test_no_setting_learned_fails_naming_each():
    train, _ = _train(lambda lr: False)
    with pytest.raises(DidNotLearn, match=r"none of the 3 settings tuned on dev learned: .*lr 0\.\d+: did not learn"):
        tune_in_trial("t", SPACE, 3, 0, train)


def test_one_training_as_written_still_fails_when_it_did_not_learn():
    train, _ = _train(lambda lr: False)
    with pytest.raises(DidNotLearn, match="did not learn"):
        tune_in_trial("t", {}, 5, 0, lambda v, r, b: train({"x.lr": 0.5}, r, b))
