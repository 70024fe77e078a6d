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
    assert sorted(seen) == [0.001, 0.01, 0.1]          # 6 trials asked of a 3-setting space: each once
    assert len(best.trials) == 3
    assert best.kept == 0.01 and best.score == 100.0
    failed = [t for t in best.trials if "did_not_learn" in t]
    assert [t["values"]["x.lr"] for t in failed] == [0.001]
    assert all(t["dev_score"] is None for t in failed)


@pytest.mark.parametrize("seed", range(40))
def test_the_settings_trained_are_distinct(seed):
    """Optuna's seeded TPE draws its first suggestions at random, with replacement: two trials over
    three values were one setting trained twice for 9 of these 40 seeds (and for 26 of the Goyal
    2018 study's 66 tuning studies). Each training must be a setting not trained before."""
    train, seen = _train(lambda lr: True)
    tune_in_trial("t", SPACE, 2, seed, train)
    assert len(seen) == 2 and len(set(seen)) == 2


def test_a_repeat_of_a_setting_that_did_not_learn_is_drawn_again():
    train, seen = _train(lambda lr: lr == 0.1)
    best = tune_in_trial("t", SPACE, 3, 1, train)
    assert sorted(seen) == [0.001, 0.01, 0.1] and best.kept == 0.1


def test_a_sampler_stuck_on_tried_settings_gets_the_next_untried_one(monkeypatch):
    import flows.tuning as tuning
    monkeypatch.setattr(tuning, "MAX_REDRAWS", 1)      # every repeat enqueues the next untried setting
    space = {"a": {"type": "choice", "values": [1, 2]}, "b": {"type": "randint", "low": 0, "high": 3}}
    seen = []
    best = tune_in_trial("t", space, 10, 3, lambda v, r, b: (seen.append((v["a"], v["b"])) or float(v["b"]), None))
    assert sorted(seen) == [(a, b) for a in (1, 2) for b in range(3)]   # the space's 6 settings, each once
    assert len(best.trials) == 6 and best.score == 2.0


def test_a_continuous_space_runs_every_trial_asked():
    space = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}
    seen = []
    tune_in_trial("t", space, 5, 0, lambda v, r, b: (seen.append(v["lr"]) or 1.0, None))
    assert len(seen) == 5 and len(set(seen)) == 5


def test_no_setting_learned_fails_naming_each():
    train, _ = _train(lambda lr: False)
    with pytest.raises(DidNotLearn, match=r"none of the 3 settings tuned on dev learned: .*lr 0\.\d+: did not learn"):
        tune_in_trial("t", SPACE, 3, 0, train)


def test_one_training_as_written_still_fails_when_it_did_not_learn():
    train, _ = _train(lambda lr: False)
    with pytest.raises(DidNotLearn, match="did not learn"):
        tune_in_trial("t", {}, 5, 0, lambda v, r, b: train({"x.lr": 0.5}, r, b))
