"""Crash-consistency harness: kill a small pipeline at random points, re-run it, check nothing is
half-done or silently worse (issue 30).

    python -m tests.reliability.crash_harness [--trials 12] [--seed 0] [--workdir .crash_harness]

The pipeline is two real stage processes run one after the other, ``train --task pos`` then
``train --task ner`` (each a two-trial Ray Tune / Optuna sweep of the BLSTM tagger, with
checkpoints every epoch), on a tiny project in the real raw formats (``make_project``). First it
runs once uninterrupted: the reference. Then each trial starts the pipeline afresh, waits a random
time, sends SIGINT, SIGTERM or SIGKILL (drawn at random) to the stage process running then, runs the
pipeline again to completion (the interrupted stage resumes its sweeps from ``.ray_results``) and
checks:

- the final metrics of both stages equal the reference's, every key but the timings, and the
  model files are byte-identical to the reference's (content-deterministic outputs);
- no MLflow run and no Optuna trial is left RUNNING anywhere in the project's stores;
- no process the killed stage had started (the local Ray head, its agents and workers) is alive
  30 s after the kill;
- a SIGINT / SIGTERM ended the stage with exit status 128 + the signal.

It prints one line per trial and a summary, and exits 1 if any check failed. The slow test
``tests/reliability/test_crash_consistency.py`` runs the same checks one kill at a time.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.tiny_project import write_raw

REPO = Path(__file__).resolve().parents[2]
TASKS = ("pos", "ner")
TIMING = ("stage_seconds",)


def make_project(root: Path, *, epochs: int = 12, trials: int = 2, concurrent: int = 2) -> Path:
    """A tiny project at ``root``: raw POS and NER files, GloVe stand-ins, ``params.yaml`` with a
    ``train`` sweep of ``trials`` Optuna trials; ``prepare`` is run here (in-process: its raw-file
    checksums are this project's own). -> ``root/params.yaml``."""
    from flows.stages import prepare
    from flows.stages.common import run_stage

    sums = write_raw(root, 80)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"].update(ocr_letters=False, snakes=False, cmudict=False, parallel=False)
    params["prepare"]["tasks"] = {k: params["prepare"]["tasks"][k] for k in TASKS}
    params["train"]["optim"].update(epochs=epochs, patience=epochs, batch_size=8)
    params["train"]["sweep"].update(num_samples=trials, max_concurrent=concurrent)
    params["train"]["sweep"]["resources"] = {"cpu": 1, "gpu": 0}
    params["train"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 0.001, "high": 0.01},
                                         "train.model.hidden": {"type": "choice", "values": [4, 8]}}
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    run_stage("prepare", lambda p, ctx: prepare.run(p, ctx, checksums=sums), params, root)
    return path


def stage_cmd(root: Path, task: str) -> list[str]:
    return [sys.executable, "-m", "flows.stages.train", "--task", task, "--params", str(root / "params.yaml"),
            "--root", str(root)]


def stage_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
            "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def run_pipeline(root: Path, timeout_s: float = 600) -> None:
    """Every stage to completion; a failure raises with its stderr."""
    for task in TASKS:
        p = subprocess.run(stage_cmd(root, task), cwd=REPO, env=stage_env(root), capture_output=True, text=True,
                           timeout=timeout_s)
        if p.returncode != 0:
            raise RuntimeError(f"train@{task} exited {p.returncode}:\n{p.stderr[-4000:]}")


def results(root: Path) -> dict[str, Any]:
    """What the pipeline produced: each stage's metrics without timings, and the SHA-256 of every
    file of its model folder."""
    out: dict[str, Any] = {}
    for task in TASKS:
        m = json.loads((root / "metrics" / "train" / f"{task}.json").read_text())
        out[f"metrics/{task}"] = {k: v for k, v in m.items() if k not in TIMING}
        model = root / "models" / "tagger" / task
        out[f"model/{task}"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(model.iterdir())}
    return out


def running_left(root: Path) -> dict[str, list[str]]:
    """MLflow runs and Optuna trials left RUNNING in the project's stores."""
    left: dict[str, list[str]] = {"runs": [], "trials": []}
    db = root / "mlflow.db"
    if db.exists():
        from mlflow.tracking import MlflowClient
        client = MlflowClient(f"sqlite:///{db}")
        exps = [e.experiment_id for e in client.search_experiments()]
        left["runs"] = [f"{r.info.run_name} ({r.data.tags.get('dvc.stage')})"
                        for r in client.search_runs(exps, "attributes.status = 'RUNNING'")] if exps else []
    odb = root / "optuna.db"
    if odb.exists():
        import optuna
        from optuna.trial import TrialState
        storage = optuna.storages.RDBStorage(f"sqlite:///{odb}")
        for s in storage.get_all_studies():
            left["trials"] += [f"{s.study_name}#{t.number}" for t in
                               storage.get_all_trials(s._study_id, deepcopy=False, states=(TrialState.RUNNING,))]
    return left


def stage_runs(root: Path, task: str) -> int:
    """How many MLflow runs of ``train@<task>`` the project's store holds (0 without a store)."""
    db = root / "mlflow.db"
    if not db.exists():
        return 0
    from mlflow.tracking import MlflowClient
    client = MlflowClient(f"sqlite:///{db}")
    exps = [e.experiment_id for e in client.search_experiments()]
    return len(client.search_runs(exps, f"attributes.run_name = 'train@{task}'")) if exps else 0


def descendants(pid: int) -> dict[int, float]:
    import psutil
    try:
        return {c.pid: c.create_time() for c in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {}


def still_alive(procs: dict[int, float]) -> list[str]:
    import psutil
    alive = []
    for pid, started in procs.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 0.02 and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{pid} {p.name()}")
        except psutil.Error:
            pass
    return alive


@dataclass
class Kill:
    signum: int
    at_s: float
    stage: str = ""
    exit_code: int | None = None
    problems: list[str] = field(default_factory=list)


def kill_pipeline(root: Path, signum: int, at_s: float, wait_gone_s: float = 30.0) -> Kill:
    """Start the pipeline, send ``signum`` to the stage process running ``at_s`` seconds in (none if it
    finished first), and check that the stage and everything it started are gone within ``wait_gone_s``."""
    k = Kill(signum, at_s)
    t0 = time.monotonic()
    for task in TASKS:
        runs_before = stage_runs(root, task)
        proc = subprocess.Popen(stage_cmd(root, task), cwd=REPO, env=stage_env(root), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        seen: dict[int, float] = {}
        while proc.poll() is None and time.monotonic() - t0 < at_s:
            seen.update(descendants(proc.pid))
            time.sleep(0.05)
        if proc.poll() is None:                  # the kill lands in this stage
            seen.update(descendants(proc.pid))
            k.stage = f"train@{task}"
            proc.send_signal(signum)
            try:
                _, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                k.problems.append(f"{signal.Signals(signum).name}: the stage did not stop within 120 s")
            k.exit_code = proc.returncode
            # a signal that lands after the stage finished (its metrics written), while Python shuts down
            # (it restores the default handlers then), kills it with the signal: nothing is half-done
            done = (root / "metrics" / "train" / f"{task}.json").exists() and proc.returncode == -signum
            # ... and one that lands while Python still imports the stage's modules, before the stage
            # installed its handlers, kills it too: it had not begun (no run of it was opened)
            early = proc.returncode == -signum and stage_runs(root, task) == runs_before
            if done:
                k.stage += " (after it finished)"
            elif early:
                k.stage += " (during start-up)"
                done = True
            if signum != signal.SIGKILL and proc.returncode != 128 + signum and not done:
                k.problems.append(f"exit status {proc.returncode}, expected {128 + signum}: {err[-1500:]}")
            deadline = time.monotonic() + wait_gone_s
            while still_alive(seen) and time.monotonic() < deadline:
                time.sleep(0.2)
            left = still_alive(seen)
            if left:
                k.problems.append(f"{len(left)} process(es) alive {wait_gone_s:.0f} s after the kill: {left}")
            # the reaper of a SIGKILLed stage closes its runs within a second or two of its death
            deadline = time.monotonic() + 15
            while any(running_left(root).values()) and time.monotonic() < deadline:
                time.sleep(0.5)
            return k
        _, err = proc.communicate()
        if proc.returncode != 0:
            k.problems.append(f"train@{task} failed before the kill: {err[-1500:]}")
            return k
    k.stage = "(finished before the kill)"
    return k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.reliability.crash_harness")
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=str(REPO / ".crash_harness"),
                    help="where the tiny projects are built (default: .crash_harness/ in the repository)")
    args = ap.parse_args(argv)
    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    template = work / "template"
    t_start = time.monotonic()
    make_project(template)
    ref_root = work / "reference"
    shutil.copytree(template, ref_root)
    t0 = time.monotonic()
    run_pipeline(ref_root)
    span = time.monotonic() - t0
    ref = results(ref_root)
    print(f"reference: the uninterrupted pipeline took {span:.0f} s", flush=True)
    rng = random.Random(args.seed)
    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
    counts = {s.name: 0 for s in signals}
    failed = 0
    for i in range(args.trials):
        signum = signals[i % 3] if i < 3 else rng.choice(signals)     # every signal at least once
        at = rng.uniform(1.0, 0.95 * span)
        root = work / f"trial{i:02d}"
        shutil.copytree(template, root)
        k = kill_pipeline(root, signum, at)
        try:
            run_pipeline(root)
            got = results(root)
            for key, want in ref.items():
                if got[key] != want:
                    diff = {x for x in set(want) | set(got[key]) if want.get(x) != got[key].get(x)}
                    k.problems.append(f"{key} differs from the uninterrupted run's: {sorted(diff)}")
        except RuntimeError as e:
            k.problems.append(f"the re-run failed: {e}")
        left = running_left(root)
        if any(left.values()):
            k.problems.append(f"left RUNNING after the re-run: {left}")
        counts[signal.Signals(signum).name] += 1
        failed += bool(k.problems)
        print(f"trial {i:2d}: {signal.Signals(signum).name:7s} at {at:5.1f} s in {k.stage or '-':14s} "
              f"exit {k.exit_code}: " + ("ok" if not k.problems else "FAILED\n    " + "\n    ".join(k.problems)),
              flush=True)
        if not k.problems:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{args.trials} kills ({', '.join(f'{n} {s}' for s, n in counts.items())}): {args.trials - failed} passed "
          f"every check, {failed} failed; {time.monotonic() - t_start:.0f} s in all", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
