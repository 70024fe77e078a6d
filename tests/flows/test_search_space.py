"""flows.search_space: the finite-space helpers (``space_size``, ``distinct_trials``, ``finite_settings``,
``setting_key``) and ``sweep_sampler``, the sampler of a Ray-level sweep: over a finite space with a few
trials it draws settings without replacement, also with trials outstanding, and telling it the last one
does not stop the study (which raises outside ``Study.optimize``)."""
from __future__ import annotations

import inspect
import pickle
import warnings

import optuna
import pytest

from flows.search_space import (TPE_STARTUP_TRIALS, DistinctSampler, distinct_trials, finite_settings, setting_key,
                                space_size, sweep_sampler)
from flows.study_storage import optuna_distributions

LRS = {"x.lr": {"type": "choice", "values": [0.1, 0.01, 0.001]}}
GRID = {"x.a": {"type": "choice", "values": ["p", "q"]}, "x.b": {"type": "randint", "low": 1, "high": 4}}   # 6
CONTINUOUS = {**LRS, "x.drop": {"type": "uniform", "low": 0.0, "high": 0.5}}


@pytest.fixture(autouse=True)
def _quiet():
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_space_size_counts_distinct_settings_and_none_for_a_continuous_space():
    assert space_size({}) == 1
    assert space_size(LRS) == 3 and space_size(GRID) == 6
    assert space_size({"x.a": {"type": "choice", "values": [1, 1, 2]}}) == 2      # a repeated value counts once
    assert space_size({"x.b": {"type": "randint", "low": 3, "high": 3}}) == 0
    assert space_size(CONTINUOUS) is None
    assert space_size({"x.lr": {"type": "loguniform", "low": 1e-3, "high": 1e-1}}) is None


def test_distinct_trials_is_the_trials_asked_or_the_whole_smaller_space():
    assert distinct_trials(LRS, 2) == 2 and distinct_trials(LRS, 3) == 3 and distinct_trials(LRS, 5) == 3
    assert distinct_trials(GRID, 20) == 6
    assert distinct_trials(CONTINUOUS, 20) == 20
    assert distinct_trials({}, 5) == 1


def test_finite_settings_lists_every_setting_in_key_and_value_order():
    assert list(finite_settings(LRS)) == [{"x.lr": 0.1}, {"x.lr": 0.01}, {"x.lr": 0.001}]
    assert list(finite_settings(GRID)) == [{"x.a": a, "x.b": b} for a in ("p", "q") for b in (1, 2, 3)]
    assert list(finite_settings({})) == [{}]


def test_setting_key_ignores_key_order_and_tells_values_apart():
    assert setting_key({"a": 1, "b": 0.5}) == setting_key({"b": 0.5, "a": 1})
    assert setting_key({"a": 1}) != setting_key({"a": 2}) and setting_key({"a": 1}) != setting_key({"b": 1})
    assert setting_key({"a": 1e-3}) == setting_key({"a": 0.001})
    assert setting_key(0.5) == "0.5"                   # one value (space_size counts a choice's values so)


def test_the_startup_trials_are_tpes_own():
    default = inspect.signature(optuna.samplers.TPESampler).parameters["n_startup_trials"].default
    assert TPE_STARTUP_TRIALS == default == 10


@pytest.mark.parametrize("space, num_samples, distinct", [
    (LRS, 2, True), (LRS, 3, True), (GRID, 6, True), (GRID, 10, True),
    (LRS, 1, False),                          # one trial: OptunaSearch's own TPE (first_suggestion's)
    (GRID, 11, True),                         # more trials than settings: every setting (distinct_trials: 6)
    ({**GRID, "x.c": {"type": "randint", "low": 0, "high": 2}}, 12, True),     # 12 trials: every setting
    ({**GRID, "x.c": {"type": "randint", "low": 0, "high": 3}}, 11, False),    # beyond TPE's start-up: 11 of 18
    ({**GRID, "x.c": {"type": "randint", "low": 0, "high": 3}}, 10, True),     # 10 of 18: TPE's draws random
    (CONTINUOUS, 2, False), (CONTINUOUS, 5, False),
    ({}, 2, False),                           # nothing is drawn
])
def test_sweep_sampler_is_distinct_exactly_where_stated(space, num_samples, distinct):
    sampler = sweep_sampler(space, num_samples, seed=0)
    assert (type(sampler) is DistinctSampler) if distinct else sampler is None
    if distinct:
        assert isinstance(sampler, optuna.samplers.BruteForceSampler)


def _ask_tell(sampler, space, order):
    """Drive a study in ask/tell mode, as Ray's OptunaSearch does: ``order`` is a list of "ask" / "tell"
    (tell the oldest outstanding trial) -> the settings asked, in order."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    dists = optuna_distributions(space)
    outstanding, asked = [], []
    for step in order:
        if step == "ask":
            trial = study.ask(dists)
            outstanding.append(trial)
            asked.append(setting_key(trial.params))
        else:
            trial = outstanding.pop(0)
            study.tell(trial, float(len(asked)))
    return asked, study


@pytest.mark.parametrize("space", [LRS, GRID])
@pytest.mark.parametrize("seed", range(5))
def test_k_asks_of_a_k_setting_space_are_its_k_settings_also_with_two_outstanding(space, seed):
    k = space_size(space)
    # two asks before any tell (two concurrent Ray trials), then ask one as each finishes
    order = ["ask", "ask"] + ["tell", "ask"] * (k - 2) + ["tell", "tell"]
    asked, study = _ask_tell(sweep_sampler(space, k, seed), space, order)     # the last tell does not raise
    assert sorted(asked) == sorted(setting_key(s) for s in finite_settings(space))
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * k


def test_all_k_asked_before_any_tell_are_distinct():
    asked, _ = _ask_tell(sweep_sampler(GRID, 6, 3), GRID, ["ask"] * 6 + ["tell"] * 6)
    assert len(set(asked)) == 6


def test_brute_force_samplers_own_after_trial_would_stop_the_study_and_raise():
    """Why DistinctSampler exists: BruteForceSampler stops an exhausted study, which raises in ask/tell."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        plain = optuna.samplers.BruteForceSampler(seed=0)
    with pytest.raises(RuntimeError, match="Study.stop` is supposed to be invoked inside an objective function"):
        _ask_tell(plain, LRS, ["ask", "tell"] * 3)


def test_the_distinct_sampler_is_deterministic_for_a_seed_and_survives_pickling():
    order = ["ask", "ask", "tell", "ask", "tell", "tell"]
    runs = {seed: _ask_tell(sweep_sampler(GRID, 3, seed), GRID, order)[0] for seed in range(8)}
    assert all(_ask_tell(sweep_sampler(GRID, 3, seed), GRID, order)[0] == runs[seed] for seed in runs)
    assert len({tuple(a) for a in runs.values()}) > 1                      # the seed steers the order
    restored = pickle.loads(pickle.dumps(sweep_sampler(GRID, 3, 5)))      # Ray pickles the searcher
    assert type(restored) is DistinctSampler and _ask_tell(restored, GRID, order)[0] == runs[5]


def test_a_choice_that_lists_a_value_twice_is_an_error():
    """A space whose choice repeats a value would train that value twice (the distinct sampler draws
    positions): rejected before any work, naming the key."""
    from components.config import ConfigError
    from flows.search_space import space_values
    assert space_values({"type": "choice", "values": [0.1, 0.01]}, "s.lr") == [0.1, 0.01]
    with pytest.raises(ConfigError, match=r"s\.lr: choice lists a value twice"):
        space_values({"type": "choice", "values": [0.1, 0.1, 0.01]}, "s.lr")
