"""Persistent Optuna storage of the sweeps' studies.

Optuna studies are persistent. An Optuna-driven sweep (a params space, not a ``grid``:
:func:`flows.sweeps.run_sweep`) keeps its study in an RDB storage: the SQLite file ``optuna.db``
beside the MLflow store (``store_root`` of the project root: the main repository also for DVC's
temporary experiment workspaces), or the storage URL in ``APPROXINFER_OPTUNA_STORAGE`` (e.g.
``postgresql://...`` on a cluster). The study is ``<sweep name>-<settings>`` (e.g.
``train-pos-3fa1b2c4``): the sweep's name (stage, task, variant) and the first 8 hex digits of the
fingerprint of its settings (sweep config, params, seed), so sweeps of other settings — e.g.
queued DVC experiments running at once — never share a study. No study is ever deleted: a fresh
run of a sweep whose study already holds trials starts ``<study>-run2`` (then ``-run3``, ...) beside
it (:func:`run_study`), and a resumed one continues the latest. Each Optuna trial records its Ray
trial id (user attribute ``ray_trial_id``, set by :func:`study_searcher`) and its MLflow run id
(``mlflow_run_id``); the trial's MLflow run is tagged ``optuna_study`` and
``optuna_trial_number``, and the sweep's parent run ``optuna_study``. Only the driver writes the
storage; a SQLite file is created (schema included) under an exclusive lock ``optuna.db.lock``, so
stages starting together in several processes do not race, and waits up to a minute for a writer.
A study records the process running it (user attribute ``approxinfer.driver``, set by
:func:`run_study`): a trial left RUNNING by a driver that is gone is marked FAIL by
:func:`fail_orphan_trials` (``flows.reaper``), and a trial that an interrupted sweep marked FAIL and
its resume then finished is recorded as a new COMPLETE trial with the same parameters (attribute
``resumes_trial``), since Optuna never reopens a finished trial.
``make dashboard`` serves the storage with optuna-dashboard; ``python -m flows.study`` drives a
study of a task sweep stage without Ray.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from components.config import ConfigError
from components.io import sqlite_lock
from components.tracking.base import store_root
from flows.search_space import space_values

log = logging.getLogger(__name__)

STUDY_STORAGE_ENV = "APPROXINFER_OPTUNA_STORAGE"
STUDY_DB = "optuna.db"
RAY_TRIAL_ATTR = "ray_trial_id"            # Optuna trial user attribute: the Ray trial it ran as
MLFLOW_RUN_ATTR = "mlflow_run_id"          # Optuna trial user attribute: the trial's MLflow run
STUDY_TAG = "optuna_study"                 # MLflow tag: the study of a trial run / a sweep's parent run
TRIAL_NUMBER_TAG = "optuna_trial_number"   # MLflow tag: the trial's number in its study
DRIVER_ATTR = "approxinfer.driver"         # Optuna study user attribute: the process running it (flows.reaper)
RESUMES_ATTR = "resumes_trial"             # Optuna trial user attribute: the FAILed trial it finished


def study_storage_url(root: str | Path = ".") -> str:
    """``APPROXINFER_OPTUNA_STORAGE`` if set, else ``sqlite:///<store_root(root)>/optuna.db``
    (beside the embedded MLflow store)."""
    env = os.environ.get(STUDY_STORAGE_ENV, "").strip()
    return env or f"sqlite:///{store_root(root) / STUDY_DB}"


def shown_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        import sqlalchemy
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def open_study_storage(url: str) -> Any:
    """An ``optuna.storages.RDBStorage`` at ``url`` (schema created if new, under the SQLite lock)."""
    import optuna
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {}   # wait for a writer
    source = STUDY_STORAGE_ENV if os.environ.get(STUDY_STORAGE_ENV, "").strip() else "the default"
    try:
        with sqlite_lock(url):
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as e:
        raise ConfigError(f"Optuna storage {shown_url(url)!r} ({source}; set {STUDY_STORAGE_ENV} to another "
                          f"database URL): cannot open it: {type(e).__name__}: {e}") from e


def study_name(name: str, settings: str) -> str:
    """A pipeline sweep's study: ``<sweep name>-<first 8 hex digits of its settings' fingerprint>``."""
    return f"{name}-{settings[:8]}"


def run_study(storage: Any, stem: str, resume: bool, driver: str | None = None, mode: str = "max") -> str:
    """The study a pipeline sweep runs in, never deleting one: a fresh sweep takes ``stem`` (its
    name and settings, :func:`study_name`) if no study of that name holds a trial, else the first
    free ``<stem>-run<k>`` (k = 2, 3, ...), so a forced re-run with the same settings starts a new
    study beside the earlier ones — the same seeded sampler from no trials, hence the same
    suggestions — and the dashboard keeps listing them all. A resumed sweep continues the latest
    study of ``stem`` (the one its interrupted run started). ``driver`` (``flows.reaper.driver_id``)
    is recorded on the study as the process running it (the study is created if new, in direction
    ``mode``: the searcher then loads it)."""
    names = {s.study_name: s for s in storage.get_all_studies()}
    taken = [stem] + [f"{stem}-run{k}" for k in range(2, len(names) + 3)]
    existing = [n for n in taken if n in names]
    chosen = None
    if resume and existing:
        chosen = existing[-1]
    for n in taken if chosen is None else ():
        if n not in names or not storage.get_all_trials(names[n]._study_id, deepcopy=False):
            chosen = n               # a new name, or an empty study of it (a run stopped before its first trial)
            break
    if chosen is None:
        raise AssertionError("unreachable: more names than studies")
    if driver is not None:
        from optuna.study import StudyDirection
        try:
            study_id = storage.get_study_id_from_name(chosen)
        except KeyError:
            direction = StudyDirection.MAXIMIZE if mode == "max" else StudyDirection.MINIMIZE
            study_id = storage.create_new_study([direction], chosen)
        storage.set_study_user_attr(study_id, DRIVER_ATTR, driver)
    return chosen


def fail_running_trials(storage: Any, study: str) -> int:
    """Mark every RUNNING trial of ``study`` FAIL -> how many (a sweep stopped by a signal)."""
    from optuna.trial import TrialState
    study_id = storage.get_study_id_from_name(study)
    n = 0
    for t in storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        n += 1
    return n


def fail_orphan_trials(storage: Any, alive: Any) -> list[tuple[str, int]]:
    """Mark FAIL the RUNNING trials of every study whose recorded driver (``DRIVER_ATTR``) is not
    ``alive(driver)`` -> ``(study, trial number)`` of each. Studies without a driver (a user's own
    ``flows.study`` studies, older runs) are left alone."""
    from optuna.trial import TrialState
    closed = []
    for s in storage.get_all_studies():
        driver = s.user_attrs.get(DRIVER_ATTR)
        if not driver or alive(driver):
            continue
        for t in storage.get_all_trials(s._study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            closed.append((s.study_name, t.number))
    return closed


def optuna_distributions(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A params-declared space -> Optuna distributions, as ``OptunaSearch`` converts
    ``build_space``'s (a ``randint``'s ``high`` is exclusive), for a driver without Ray."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    out: dict[str, Any] = {}
    for key, spec in space.items():
        values = space_values(spec, f"sweep space {key!r}")
        kind = spec["type"]
        if kind == "choice":
            out[key] = CategoricalDistribution(values)
        elif kind == "randint":
            out[key] = IntDistribution(values[0], values[1])
        else:
            out[key] = FloatDistribution(values[0], values[1], log=kind == "loguniform")
    return out


def trial_number(storage: Any, study: str, ray_trial_id: str) -> int | None:
    """The number, in ``study``, of the Optuna trial suggested for Ray trial ``ray_trial_id``."""
    study_id = storage.get_study_id_from_name(study)
    for t in storage.get_all_trials(study_id, deepcopy=False):
        if t.user_attrs.get(RAY_TRIAL_ATTR) == ray_trial_id:
            return t.number
    return None


def set_trial_attr(storage: Any, study: str, number: int, key: str, value: Any) -> None:
    """Set user attribute ``key`` of trial ``number`` of ``study`` (nothing if it is finished)."""
    study_id = storage.get_study_id_from_name(study)
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
    if storage.get_trial(trial_id).state.is_finished():
        return       # a trial an interrupted sweep marked FAIL, resumed: its outcome becomes a new trial
    storage.set_trial_user_attr(trial_id, key, value)


def study_searcher(*, metric: str, mode: str, seed: int, study: str, storage: Any, sampler: Any = None) -> Any:
    """A seeded ``OptunaSearch`` over the RDB ``storage``'s study ``study`` that records each Ray
    trial id on its Optuna trial (user attribute ``ray_trial_id``), so the trial's MLflow run can be
    tagged with its trial number — also after a resume, when the mapping lives only in the storage.
    ``sampler``: an Optuna sampler, seeded already (``flows.search_space.sweep_sampler``), or None
    for ``OptunaSearch``'s own ``TPESampler(seed=seed)``.
    (Ray pickles the searcher with cloudpickle, which carries this class by value.)"""
    from ray.tune.search.optuna import OptunaSearch

    class StudySearch(OptunaSearch):
        def suggest(self, trial_id: str) -> dict | None:
            config = super().suggest(trial_id)
            ot_trial = self._ot_trials.get(trial_id)     # OptunaSearch's Ray trial id -> Optuna trial
            if config is not None and ot_trial is not None:
                ot_trial.set_user_attr(RAY_TRIAL_ATTR, trial_id)
            return config

        def _closed(self, trial_id: str) -> Any:
            """The stored Optuna trial of Ray trial ``trial_id`` if it is finished already (an
            interrupted sweep marked it FAIL; Tune resumed it), else None."""
            ot_trial = self._ot_trials.get(trial_id)
            if ot_trial is None or trial_id in self._completed_trials:
                return None
            frozen = self._ot_study._storage.get_trial(ot_trial._trial_id)
            return frozen if frozen.state.is_finished() else None

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            if self._closed(trial_id) is None:
                super().on_trial_result(trial_id, result)

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
            frozen = self._closed(trial_id)
            if frozen is None:
                return super().on_trial_complete(trial_id, result, error)
            value = (result or {}).get(self.metric)
            if value is not None and not error:       # the resumed trial's outcome, as a trial of its own
                import optuna
                self._ot_study.add_trial(optuna.trial.create_trial(
                    params=frozen.params, distributions=frozen.distributions, value=value,
                    user_attrs={**frozen.user_attrs, RESUMES_ATTR: frozen.number}))
            self._completed_trials.add(trial_id)

    # OptunaSearch ignores ``seed`` beside a sampler, with a warning: the sampler carries its seed
    return StudySearch(metric=metric, mode=mode, seed=seed if sampler is None else None, sampler=sampler,
                       study_name=study, storage=storage)
