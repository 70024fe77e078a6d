"""The translation chain at tiny sizes: ``translator`` (a small-data attention translator, its
did-not-learn guard) -> ``distil`` (the training verses translated: one target per training
source, the splits kept, no dev or test verse used to train)."""
import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from components.config import ConfigError
from flows.stages import distil, translator
from flows.stages.common import run_stage
from tests.flows.test_normalisation_stage import _parallel


def tiny_translator(params, **over):
    """A translator that learns the tiny word-for-word corpus of ``_parallel`` in a few seconds."""
    t = params.setdefault("translator", {})
    t.update(data={"src_vocab_size": 40, "tgt_vocab_size": 30}, beam_size=2, min_bleu=1.0, eval_batch_size=16,
             model={"embedding_dim": 16, "hidden": 16, "attention_dim": 16, "dropout": 0.0, "word_dropout": 0.0,
                    "output_dropout": 0.0, "tie_embeddings": True},
             train={"optim": {"lr": 0.02, "epochs": 15, "patience": 15, "batch_size": 8},
                    "objective": {"label_smoothing": 0.1}},
             sweep={"num_samples": 1, "max_concurrent": 1, "metric": "best_dev_bleu", "mode": "max",
                    "max_failures": 0, "resources": {"cpu": 1, "gpu": 0}})
    t.update(over)
    return params


def _run(name, fn, params, root):
    import ray
    try:
        return run_stage(name, fn, params, root)
    finally:
        ray.shutdown()


def test_translator_then_distil_write_one_target_per_training_source_and_keep_the_splits(tiny_root, one_thread):
    root, params = tiny_root
    params = tiny_translator(params)
    _parallel(root)
    m = _run("translator", translator.run, params, root)
    assert m["dev"]["beam"]["bleu"] >= 1.0 and m["test"]["beam"]["signature"].startswith("nrefs:1")
    assert [c["epoch"] for c in m["curve"]] == list(range(1, m["epochs"] + 1))      # the learning curve
    assert all(0.0 <= c["dev_bleu"] <= 100.0 for c in m["curve"])
    folder = root / "models/translator"
    assert (folder / "vocab/tgt.model").exists() and (folder / "model.pt").exists()
    assert json.loads((folder / "model.json").read_text())["recipe"]["kind"] == "translator"
    # the beam's length penalty: the dev-best of those tried, recorded for the distil stage
    tried = m["dev_bleu_by_length_penalty"]
    assert len(tried) == len(translator.TranslatorStageConfig().length_penalties)
    assert m["dev"]["beam"]["bleu"] == pytest.approx(max(tried.values()))
    assert json.loads((folder / "decoding.json").read_text()) == {"beam_size": 2, "length_penalty": m["length_penalty"]}

    d = _run("distil", distil.run, params, root)
    prepared, out = root / "data/prepared/greek_english", root / "data/distilled/greek_english"
    src = pq.read_table(prepared / "train.parquet").to_pydict()
    got = pq.read_table(out / "train.parquet").to_pydict()
    assert got["verse_id"] == src["verse_id"]                    # one target per training source, in order
    assert got["source"] == src["source"]                        # sources unchanged
    assert d["verses"] == len(src["verse_id"]) == d["translated"]
    assert any(t != s for t, s in zip(got["target"], src["target"]))   # the targets are the translator's
    for split in ("dev", "test"):                                # dev and test: the human references, untouched
        assert (out / f"{split}.parquet").read_bytes() == (prepared / f"{split}.parquet").read_bytes()
    held_out = set(pq.read_table(prepared / "dev.parquet").column("verse_id").to_pylist()) | \
        set(pq.read_table(prepared / "test.parquet").column("verse_id").to_pylist())
    assert not held_out & set(got["verse_id"])                  # no dev or test verse trains the CMLM
    meta = json.loads((out / "meta.json").read_text())
    assert meta["verses"] == len(src["verse_id"]) and 0.0 <= meta["train_bleu_vs_references"] <= 100.0
    assert meta["length_penalty"] == m["length_penalty"] and meta["beam_size"] == 2 and meta["decoder"] == "beam"

    params["distil"] = {"decoder": "greedy"}                    # the teacher's greedy translations instead
    _run("distil", distil.run, params, root)
    greedy = pq.read_table(out / "train.parquet").to_pydict()
    assert greedy["verse_id"] == src["verse_id"] and greedy["source"] == src["source"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["decoder"] == "greedy" and "length_penalty" not in meta
    from components.checkpoints import load
    from components.data.translation import load_translation_task
    from components.inference.registry import INFERENCE
    from components.inference.evaluate_translation import translate
    whole = replace(translator.load_config(params).data, max_source_len=distil.UNLIMITED,
                    max_target_len=distil.UNLIMITED, max_train_pairs=0, max_dev_pairs=0)
    task = load_translation_task(prepared, folder / "vocab", whole, seed=0)
    hyps, _ = translate(load(folder, device="cpu", expect="translator"), INFERENCE.build_with("greedy", {}),
                        task.train, task.tgt_vocab, batch_size=8, device="cpu")
    by_verse = dict(zip(task.train.verse_ids, hyps))
    mismatch = [(v, t, by_verse[v]) for v, t in zip(src["verse_id"], greedy["target"]) if t != by_verse[v].split()]
    assert not mismatch, mismatch[:3]


def test_a_translator_under_its_bleu_bar_fails_the_stage(tiny_root, one_thread):
    root, params = tiny_root
    params = tiny_translator(params, min_bleu=99.0)
    params["translator"]["train"]["optim"].update(epochs=1)
    _parallel(root)
    with pytest.raises(RuntimeError, match="did not learn"):
        _run("translator", translator.run, params, root)
    assert not (root / "models/translator/model.pt").exists()
    assert not (root / "metrics/translator.json").exists()


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.update(min_bleu=-1), "min_bleu"),
    (lambda t: t["model"].update(word_dropout=1.0), "word_dropout"),
    (lambda t: t["train"]["objective"].update(label_smoothing=1.0), "label_smoothing"),
    (lambda t: t["sweep"].update(space={"translator.train.optim.lrr": {"type": "choice", "values": [1]}}),
     "unknown key"),
    (lambda t: t["sweep"].update(metric="dev_loss"), "metric"),
])
def test_bad_translator_settings_fail_before_work(tiny_root, edit, match):
    root, params = tiny_root
    params = tiny_translator(params)
    edit(params["translator"])
    with pytest.raises((ConfigError, ValueError), match=match):
        translator.load_config(params)


def test_distil_without_a_translator_is_a_clear_error(tiny_root):
    root, params = tiny_root
    params = tiny_translator(params)
    _parallel(root)
    with pytest.raises(FileNotFoundError, match="models/translator"):
        run_stage("distil", distil.run, params, root)


def test_translator_tuning_is_an_optuna_study_kept_in_the_project_storage(tiny_root, one_thread):
    """With a sweep space the translator's trials are an Optuna study on dev BLEU in the project's
    study storage (what `make dashboard` shows and a re-run resumes), the best trial's model kept."""
    import optuna

    from flows.study_storage import study_storage_url
    root, params = tiny_root
    params = tiny_translator(params, min_bleu=0.0)
    params["translator"]["train"]["optim"].update(epochs=2)
    params["translator"]["sweep"].update(num_samples=2, max_concurrent=2, space={
        "translator.train.optim.lr": {"type": "choice", "values": [0.01, 0.02]}})
    _parallel(root)
    m = _run("translator", translator.run, params, root)
    assert set(m["best_config"]) == {"translator.train.optim.lr"}
    studies = optuna.get_all_study_summaries(study_storage_url(root))
    assert len(studies) == 1 and studies[0].n_trials == 2
    done = [t for t in optuna.load_study(study_name=studies[0].study_name, storage=study_storage_url(root)).trials
            if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 2 and max(t.value for t in done) == pytest.approx(max(c["dev_bleu"] for c in m["curve"]))


def _kill_the_trial_after(root, epochs: int, seen: dict) -> None:
    """Watch the translator trial's ``result.json``: once it holds ``epochs`` epochs, kill the trial's
    worker process (a lost worker, as a preempted node or an OOM kill leaves it), once; keep the
    file's lines seen last in ``seen["lines"]`` (the stage removes its Ray folder when it succeeds)."""
    import psutil
    import time
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not seen.get("stop"):
        files = list((root / ".ray_results").glob("translator/*/*/result.json"))
        if files:
            try:
                lines = [json.loads(x) for x in files[0].read_text().splitlines() if x.strip()]
            except (OSError, ValueError):        # mid-write, or removed
                lines = seen.get("lines", [])
            seen["lines"] = lines
            if not seen.get("killed") and sum("epoch" in x for x in lines) >= epochs:
                workers = [c for c in psutil.Process().children(recursive=True)
                           if c.name().startswith("ray::ImplicitFunc")]
                if workers:
                    workers[0].kill()
                    seen["killed"] = True
        time.sleep(0.01)


def test_a_lost_translator_trial_resumes_from_its_last_epoch_and_ends_as_an_uninterrupted_one(tiny_root, one_thread,
                                                                                              tmp_path_factory):
    """The study translator trains for an hour or more: its trial checkpoints every epoch, so Tune's
    retry of a lost worker (and the re-run of a stopped stage, which restores the sweep) continues
    from the last finished epoch rather than from the start, and ends with the uninterrupted run's
    model and metrics. Without the per-epoch state the retry would report epoch 1 again."""
    import hashlib
    import shutil
    import threading
    root, params = tiny_root
    params = tiny_translator(params)
    params["translator"]["train"]["optim"].update(epochs=40, patience=40)
    params["translator"]["sweep"].update(max_failures=1)
    _parallel(root)
    clean = tmp_path_factory.mktemp("clean") / "p"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns("mlflow.db", ".ray_results"))

    def untimed(x):
        if isinstance(x, dict):
            return {k: untimed(v) for k, v in x.items() if "seconds" not in k and "minutes" not in k}
        return [untimed(v) for v in x] if isinstance(x, list) else x

    def outputs(r, m):
        folder = r / "models/translator"
        files = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest()
                 for n in ("model.pt", "decoded.json", "decoding.json")}
        return untimed(m), files, untimed(json.loads((folder / "model.json").read_text()))

    seen: dict = {}
    watcher = threading.Thread(target=_kill_the_trial_after, args=(root, 5, seen), daemon=True)
    watcher.start()
    try:
        m = _run("translator", translator.run, params, root)
    finally:
        seen["stop"] = True
        watcher.join()
    assert seen.get("killed"), "the trial finished before its worker could be killed"
    epochs = [int(x["epoch"]) for x in seen["lines"] if "epoch" in x]
    assert epochs == list(range(1, 41)), epochs       # each epoch once: continued, never started again
    ref = _run("translator", translator.run, params, clean)
    assert outputs(root, m) == outputs(clean, ref)
