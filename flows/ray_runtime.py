"""The Ray runtime of the sweeps and sharded maps, and what a trial calls inside it.

Ray starts locally (token auth off, no dashboard) unless ``RAY_ADDRESS`` names a cluster; each
worker runs :func:`quiet_worker` at setup. Per-trial resources come from params (``gpu: auto``
gives each trial one GPU when the Ray cluster offers GPUs; :func:`trial_resources`). A trial draws one
bar per epoch on a terminal (:func:`epoch_bar`), while a driver writing a log prints one line per
finished trial instead (:func:`trial_lines`); a trial's last report carries its files in its
checkpoint (:func:`report_final`), and the best trial's checkpoint is copied to a DVC-tracked
folder by the caller (:func:`copy_checkpoint`).
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

from components import CPU_NUMERICS
from components.config import ConfigError, ResourcesConfig
from flows import progress


def init_ray(num_cpus: int | None = None) -> None:
    import ray
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    progress.export_mode()           # the workers draw per-epoch bars only if the driver does
    # per-epoch checkpoints of small models are cheap; the snapshot-frequency warning is noise here
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    address = os.environ.get("RAY_ADDRESS")
    # a cluster's workers were started by `ray start`, not by this process: they get the pinned CPU
    # numerics (components.CPU_NUMERICS) from here, so their runs match a local run's exactly
    env = {"worker_process_setup_hook": "flows.ray_runtime.quiet_worker",
           "env_vars": {key: os.environ[key] for key in CPU_NUMERICS}}
    from flows.lifecycle import StageInterrupted, interrupted, reinstall_signal_handlers, signals_deferred
    # a signal while Ray starts is recorded, not raised (a start cut short leaves its agents running);
    # the stage stops right after, through its usual path (its Ray shut down, then exit 128 + signal)
    with _stage_keeps_sigterm(), signals_deferred("Ray starts"):
        if address:
            ray.init(address=address, log_to_driver=True, runtime_env=env)
        else:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True,
                     configure_logging=True, logging_level="WARNING", runtime_env=env)
    reinstall_signal_handlers()      # in case a handler was replaced by a path _stage_keeps_sigterm missed
    if interrupted() is not None:
        raise StageInterrupted(interrupted())


@contextlib.contextmanager
def _stage_keeps_sigterm() -> Iterator[None]:
    """In a stage process (its handlers installed), ``ray.init`` must not replace the stage's SIGTERM
    handler: Ray sets its own (``sys.exit``) at the start of ``ray.init``, so a SIGTERM in the 1-3 s
    of the start exited 15 and left Ray's agents running (found by the crash harness). Ray installs
    it through ``ray._private.utils.set_sigterm_handler``, made a no-op here while Ray starts."""
    from flows.lifecycle import handlers_installed
    if not handlers_installed():
        yield
        return
    import ray._private.utils as ray_utils
    original = ray_utils.set_sigterm_handler
    ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = original


def quiet_worker() -> None:
    """Ray worker setup: no INFO line per saved checkpoint (one per epoch of every trial)."""
    for name in ("ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)


def shutdown_ray() -> None:
    """End the local Ray session (its workers) if this process started one. Ray's shutdown resets
    SIGTERM to the default action below Python's table (its core worker uninstalls its failure
    handler): the stage's handlers are set again once it returns (a SIGTERM during the shutdown
    itself still ends the process: ``run_stage`` writes its outputs before)."""
    import sys
    if "ray" in sys.modules:
        import ray
        if ray.is_initialized():
            ray.shutdown()
            from flows.lifecycle import reinstall_signal_handlers
            reinstall_signal_handlers()


def trial_resources(res: ResourcesConfig, cluster_gpus: float | None = None) -> dict[str, float]:
    """What one trial or shard asks Ray for. ``gpu: auto`` is one GPU when the Ray cluster offers
    any (``cluster_gpus``, by default ``ray.cluster_resources()``: the GPUs of every node, so a
    CPU-only head still gives its GPU workers their GPUs), none otherwise. The driver's own
    ``torch.cuda`` plays no part: on a cluster it is the head's, not the workers'."""
    gpu = res.gpu
    if gpu == "auto":
        if cluster_gpus is None:
            import ray
            init_ray()
            cluster_gpus = float(ray.cluster_resources().get("GPU", 0.0))
        gpu = 1.0 if cluster_gpus > 0 else 0.0
    elif isinstance(gpu, str):
        raise ConfigError(f"sweep.resources.gpu: expected a number or 'auto', got {gpu!r}")
    return {"cpu": float(res.cpu), "gpu": float(gpu)}


def trial_lines(name: str, total: int) -> Any:
    """A Ray Tune callback printing one line per finished or failed trial (``flows.progress``),
    for logs, where Tune's status tables and per-epoch bars are switched off."""
    from ray import tune

    class _TrialLines(tune.Callback):
        def __init__(self):
            self.done = 0

        def _line(self, trials: list[Any], trial: Any, what: str) -> None:
            self.done += 1
            r = trial.last_result or {}
            shown = {k: r[k] for k in ("best_dev_score", "nll", "loss") if isinstance(r.get(k), (int, float))}
            note = ", ".join(f"{k}={v:.4g}" for k, v in shown.items())
            progress.line(f"sweep {name}: {self.done}/{total} trials done, {trial.trial_id} {what}"
                          f" after {r.get('time_total_s', 0.0):.0f} s" + (f" ({note})" if note else ""))

        def on_trial_complete(self, iteration, trials, trial, **info):
            self._line(trials, trial, "finished")

        def on_trial_error(self, iteration, trials, trial, **info):
            self._line(trials, trial, "FAILED")

    return _TrialLines()


def epoch_bar(label: str) -> Callable[[int, int, float], None]:
    """An ``on_batch(i, n, loss)`` callback drawing one ``tqdm_ray`` bar per epoch (in a trial) on
    a terminal; nothing when the driver's output is a log (``flows.progress``: the sweep prints one
    line per finished trial instead)."""
    from ray.experimental.tqdm_ray import tqdm
    bar: dict[str, Any] = {}
    if not progress.interactive():
        return lambda i, n, loss: None

    def on_batch(i: int, n: int, loss: float) -> None:
        if i == 1:
            bar["tqdm"] = tqdm(total=n, desc=f"{label} epoch")
        bar["tqdm"].update(1)
        if i == n:
            bar["tqdm"].close()
    return on_batch


def report_final(metrics: dict[str, Any], files: dict[str, str | bytes]) -> None:
    """A trial's last ``tune.report``, with ``files`` (name -> text, or bytes such as
    :func:`tensor_bytes`) in its checkpoint: a stage reads them back from
    ``SweepResult.trials[i]["checkpoint"]``, never from the trial folder (a file a reused actor
    writes there does not survive)."""
    import tempfile
    from ray import tune
    with tempfile.TemporaryDirectory() as d:
        for name, content in files.items():
            if isinstance(content, bytes):
                (Path(d) / name).write_bytes(content)
            else:
                (Path(d) / name).write_text(content)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def tensor_bytes(state: Any) -> bytes:
    """``torch.save(state)`` as bytes (a model's weights for :func:`report_final`)."""
    import io
    import torch
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def copy_checkpoint(src: Path, dest: Path) -> None:
    """Replace ``dest`` by a copy of the checkpoint folder ``src`` (copy, then rename)."""
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
