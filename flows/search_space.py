"""Search spaces of the sweeps, in one dialect: dotted ``params.yaml`` keys.

A search space names dotted ``params.yaml`` keys (``train.optim.lr``), so a trial's config and
``dvc exp run -S train.optim.lr=...`` speak the same names; each trial applies its values onto
the full params dict and loads its sections strictly. An entry is ``{type: choice, values: [...]}``
or ``{type: loguniform | uniform | randint, low, high}`` (:data:`SPACE_TYPES`; a ``randint``'s
``high`` is exclusive). Before Ray starts, :func:`check_sweep_space` checks every value a sweep
can give a key against the stage's strict config; :func:`build_space` turns a space into Ray Tune
distributions, and :func:`first_suggestion` draws, in the driver, the first suggestion a seeded
searcher makes over them.

A space of ``choice`` and ``randint`` entries alone is finite (:func:`space_size` settings,
:func:`finite_settings`; a setting is told apart by :func:`setting_key`): a search of it trains
distinct settings, and a space smaller than the trials asked is tried in full
(:func:`distinct_trials`). Optuna's samplers draw with replacement, and TPE's first
``TPE_STARTUP_TRIALS`` draws are random ones, so a Ray-level sweep of such a space with
``1 < num_samples <= TPE_STARTUP_TRIALS``, or one that tries every setting, draws without
replacement instead (:func:`sweep_sampler`: a seeded :class:`DistinctSampler`);
``flows.tuning.tune_in_trial`` redraws a repeated suggestion in its own Optuna loop.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterator

from optuna.exceptions import ExperimentalWarning
from optuna.samplers import BruteForceSampler

from components.config import ConfigError, get_dotted, set_dotted

if TYPE_CHECKING:                    # annotations only: flows.sweeps imports this module
    from flows.sweeps import SweepConfig

SPACE_TYPES = ("choice", "loguniform", "uniform", "randint")
TPE_STARTUP_TRIALS = 10     # optuna.samplers.TPESampler's n_startup_trials: its first 10 draws are random


def build_space(space: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """params-declared space -> Ray Tune distributions. Every key must exist in params."""
    from ray import tune
    out = {}
    for key, spec in space.items():
        get_dotted(params, key)     # a typo in a sweep key is an error, not a no-op
        kind = spec.get("type")
        try:
            if kind == "loguniform":
                out[key] = tune.loguniform(float(spec["low"]), float(spec["high"]))
            elif kind == "uniform":
                out[key] = tune.uniform(float(spec["low"]), float(spec["high"]))
            elif kind == "randint":
                out[key] = tune.randint(int(spec["low"]), int(spec["high"]))
            elif kind == "choice":
                out[key] = tune.choice(list(spec["values"]))
            else:
                raise ConfigError(f"sweep space {key!r}: type {kind!r} is not one of loguniform, uniform, randint, choice")
        except KeyError as e:
            raise ConfigError(f"sweep space {key!r}: missing {e.args[0]!r} for type {kind!r}") from e
    return out


def space_values(spec: Any, where: str, types: tuple[str, ...] = SPACE_TYPES) -> list[Any]:
    """The values of one space entry to check: a choice's values, a range's two bounds (a
    ``randint``'s upper bound is exclusive, so its largest value is ``high - 1``)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in types:
        raise ConfigError(f"{where}: type {kind!r} is not one of {', '.join(types)}")
    if kind == "choice":
        if not spec.get("values"):
            raise ConfigError(f"{where}: choice needs a non-empty 'values'")
        keys = [setting_key(v) for v in spec["values"]]
        if len(set(keys)) < len(keys):      # a search of the space would train a value twice
            raise ConfigError(f"{where}: choice lists a value twice: {spec['values']}")
        return list(spec["values"])
    cast = int if kind == "randint" else float
    try:
        low, high = cast(spec["low"]), cast(spec["high"])
    except KeyError as e:
        raise ConfigError(f"{where}: {kind} needs {e.args[0]!r}") from None
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {kind} bounds must be numbers, got {spec}") from None
    if not low < high or (kind == "loguniform" and low <= 0):
        raise ConfigError(f"{where}: need 0 < low < high for loguniform, low < high otherwise; got {spec}")
    return [low, high - 1] if kind == "randint" else [low, high]


def _loaded_at(cfg: Any, parts: list[str]) -> Any:
    """The value at ``parts`` below a loaded config (``None`` where the path leaves it: the strict
    load of a value there then names the unknown key)."""
    for part in parts:
        if isinstance(cfg, dict):
            cfg = cfg.get(part)
        elif dataclasses.is_dataclass(cfg):
            cfg = getattr(cfg, part, None)
        else:
            return None
    return cfg


def check_sweep_space(space: dict[str, Any], params: dict[str, Any], section: str,
                      load: Callable[[dict[str, Any]], Any], *, where: str | None = None) -> None:
    """Before Ray starts: every key of the space (``where``, default ``<section>.sweep.space``) is
    a setting of the stage's own section — a leaf of params, or a key params leaves at its
    default, which the section's strict config then accepts or rejects — and every value the
    sweep can give it (a choice's values, a range's bounds) passes that config,
    ``load(params with that value)``."""
    where = where or f"{section}.sweep.space"
    for key, spec in space.items():
        if not key.startswith(f"{section}."):
            raise ConfigError(f"{where}: key {key!r} is not a setting of the '{section}' section; "
                              f"a sweep varies only its own stage's settings")
        try:
            current = get_dotted(params, key)
        except ConfigError:              # at its default: the loaded config says what it is
            current = _loaded_at(load(params), key.split(".")[1:])
        if isinstance(current, dict) or dataclasses.is_dataclass(current):
            raise ConfigError(f"{where}: key {key!r} is a section, not a setting")
        for value in space_values(spec, f"{where}.{key}"):
            try:
                load(set_dotted(params, key, value))
            except ConfigError as e:
                raise ConfigError(f"{where}.{key}: the value {value!r} is not valid: {e}") from None


def suggest(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One Optuna suggestion over ``space`` (checked by :func:`check_sweep_space`), in its key
    order: dotted params key -> value (apply with :func:`with_values`)."""
    out = {}
    for key, spec in space.items():
        if spec["type"] == "choice":
            out[key] = trial.suggest_categorical(key, list(spec["values"]))
        elif spec["type"] == "randint":
            out[key] = trial.suggest_int(key, int(spec["low"]), int(spec["high"]) - 1)
        else:
            out[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), log=spec["type"] == "loguniform")
    return out


def setting_key(values: Any) -> str:
    """A setting (dotted key -> value), or one value, as text: two are the same when their keys are."""
    return json.dumps(values, sort_keys=True, default=str)


def space_size(space: dict[str, dict[str, Any]]) -> int | None:
    """How many distinct settings ``space`` holds (1 when empty), or None when it is continuous."""
    n = 1
    for spec in space.values():
        if spec["type"] == "choice":
            n *= len({setting_key(v) for v in spec["values"]})
        elif spec["type"] == "randint":
            n *= max(0, int(spec["high"]) - int(spec["low"]))
        else:
            return None
    return n


def distinct_trials(space: dict[str, dict[str, Any]], trials: int) -> int:
    """How many distinct settings a search of ``space`` asked for ``trials`` trains: ``trials``, or
    every setting of a finite space that holds fewer; one when the space is empty."""
    size = space_size(space) if space else 1
    return min(trials, size) if size is not None else trials


def finite_settings(space: dict[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every setting of a finite ``space``, in its key and value order."""
    axes = [[(k, v) for v in (spec["values"] if spec["type"] == "choice"
                              else range(int(spec["low"]), int(spec["high"])))] for k, spec in space.items()]
    for combo in itertools.product(*axes):
        yield dict(combo)


class DistinctSampler(BruteForceSampler):
    """Optuna's ``BruteForceSampler``: each suggestion a setting no trial of the study has, finished or
    RUNNING (so concurrent asks get distinct settings), in a seeded random order — without its
    ``study.stop()`` once the space is exhausted, which raises outside ``Study.optimize`` (Ray's
    ``OptunaSearch`` asks and tells). A study asked for more trials than the space holds gets
    repeats; :func:`distinct_trials` asks for no more. Defined here, at module level: Ray pickles
    the searcher and its sampler."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        pass


def sweep_sampler(space: dict[str, dict[str, Any]], num_samples: int, seed: int) -> DistinctSampler | None:
    """The Optuna sampler of a Ray-level sweep of ``num_samples`` trials over ``space``: a
    :class:`DistinctSampler` seeded with ``seed`` when the space is finite, ``num_samples > 1``, and
    either ``num_samples <= TPE_STARTUP_TRIALS`` (where TPE's draws would be random ones, with
    replacement) or ``num_samples`` is every setting of the space (a sweep that tries it in full:
    :func:`distinct_trials`); else None (also for an empty space: nothing is drawn), meaning
    ``OptunaSearch``'s own ``TPESampler(seed=seed)``, as a one-trial sweep has it."""
    size = space_size(space) if space else None
    if size is None or num_samples <= 1 or (num_samples > TPE_STARTUP_TRIALS and num_samples < size):
        return None
    with warnings.catch_warnings():      # BruteForceSampler is marked experimental
        warnings.simplefilter("ignore", ExperimentalWarning)
        return DistinctSampler(seed=seed)


def with_values(params: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` with each dotted key of ``values`` set: what a trial loads its config from."""
    for key, value in values.items():
        params = set_dotted(params, key, value)
    return params


def check_metric(cfg: SweepConfig, reported: tuple[str, ...], where: str) -> None:
    """``cfg.metric`` must be one the trainable reports."""
    if cfg.metric not in reported:
        raise ConfigError(f"{where}.metric: {cfg.metric!r} is not reported by this stage's trials; "
                          f"choose one of {list(reported)}")


def first_suggestion(cfg: SweepConfig, params: dict[str, Any], seed: int) -> dict[str, Any]:
    """The config of the one trial of ``run_sweep(cfg=cfg, seed=seed)`` with ``cfg.num_samples == 1``.

    That trial gets the first suggestion of a fresh ``OptunaSearch(seed=seed)`` (a seeded
    ``TPESampler``, as :func:`sweep_sampler` leaves it for one trial; its first draw is a seeded
    random one) over ``build_space(cfg.space)``; the same searcher is asked here, in the driver, so
    that many such one-trial sweeps can run as one grid with the values they had. An empty space
    gives ``{}`` (no searcher, as in ``run_sweep``).
    """
    import optuna
    from ray.tune.search.optuna import OptunaSearch
    space = build_space(cfg.space, params)
    if not space:
        return {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)     # no "new study created in memory" line per call
    searcher = OptunaSearch(metric=cfg.metric, mode=cfg.mode, seed=seed)
    searcher.set_search_properties(cfg.metric, cfg.mode, space)     # as the Tuner does with param_space
    return searcher.suggest("first")
