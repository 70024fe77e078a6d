import json

import pytest

from components.data.store import read_tagged
from components.data.tasks import load_tagging_task
from components.tracking.mlflow_tracker import MlflowTracker
from flows.stages import prepare, train
from flows.stages.common import run_stage


def _runs(root):
    t = MlflowTracker("approxinfer/pipeline", tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exps = [e.experiment_id for e in t.client.search_experiments()]     # one experiment per study
    return {r.info.run_id: r for r in t.client.search_runs(exps)}


def test_prepare_then_two_trial_sweep(tiny_root):
    root, params = tiny_root
    m = run_stage("prepare", prepare.run, params, root)
    assert m["pos"]["train_sentences"] + m["pos"]["dev_sentences"] + m["pos"]["test_sentences"] == 60
    assert 0 < m["pos"]["glove_coverage"] < 1
    assert json.loads((root / "metrics" / "prepare.json").read_text())["ner"]["n_labels"] == 3  # O, S-PER, S-LOC (single-token entities)
    ner_train = read_tagged(root / "data/prepared/ner/train.parquet")
    assert any(t.startswith("S-") for s in ner_train for t in s.tags)          # BIO -> BIOES applied
    task = load_tagging_task(root / "data/prepared/pos")
    assert task.metric == "accuracy" and len(task.glove_ids) > 0

    import ray
    # epochs and learning rates a tiny tagger learns with whatever base.seed draws (checked at 13, 15, 16): a
    # trial that does not learn fails (the guard), and NER's span F1 on 6 dev sentences stays 0 for a while
    params["train"]["optim"].update(epochs=6)
    params["train"]["sweep"]["space"]["train.optim.lr"] = {"type": "loguniform", "low": 0.02, "high": 0.05}
    try:
        tm = run_stage("train", train.run, params, root)
    finally:
        ray.shutdown()
    for name in ("pos", "ner"):
        assert tm[name]["n_trials"] == 2 and tm[name]["n_failed"] == 0
        assert 0 <= tm[name]["test_score"] <= 100
        assert (root / "models/tagger" / name / "model.pt").exists()
        assert json.loads((root / "plots/train" / f"{name}.json").read_text())[0]["epoch"] == 1
    assert json.loads((root / "metrics" / "train.json").read_text())["pos"]["test_score"] == tm["pos"]["test_score"]

    runs = _runs(root)
    by_name = {}
    for r in runs.values():
        by_name.setdefault(r.info.run_name, []).append(r)
    stage = by_name["train"][0]
    assert stage.info.status == "FINISHED" and "pos.test_score" in stage.data.metrics
    for name in ("pos", "ner"):
        sweep = by_name[f"sweep/{name}"][0]
        assert sweep.data.tags["mlflow.parentRunId"] == stage.info.run_id
        assert sweep.data.metrics["test_score"] == pytest.approx(tm[name]["test_score"])
        children = [r for r in runs.values() if r.data.tags.get("mlflow.parentRunId") == sweep.info.run_id]
        assert len(children) == 2
        for c in children:
            assert c.info.status == "FINISHED" and c.data.tags["mlflow.source.name"] == "flows/stages/train.py"
            assert {"dev_score", "best_dev_score", "test_score"} <= set(c.data.metrics)
            assert "train.optim.lr" in c.data.params
        # the best model, logged on the sweep's run and registered under a stable name, with its signature
        assert sweep.data.tags["registered_model"] == f"models:/approxinfer-train-{name}/1"
        assert sweep.data.tags["mlflow.source.name"] == "flows/stages/train.py"
        import mlflow
        client = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
        version = client.get_model_version(f"approxinfer-train-{name}", "1")
        assert version.run_id == sweep.info.run_id and version.tags["task"] == name
    assert _runs(root) and runs[stage.info.run_id].data.tags["mlflow.source.name"] == "flows/stages/train.py"


def test_train_on_unprepared_task_is_a_clear_error(tiny_root):
    root, params = tiny_root
    params["train"]["tasks"] = ["nope"]
    with pytest.raises(FileNotFoundError, match="'nope' has not been prepared"):
        run_stage("train", train.run, params, root)


def test_user_corpus_with_given_split(tiny_root):
    root, params = tiny_root
    user = root / "data/user/conll2003"
    user.mkdir(parents=True)
    for part in ("train", "dev", "test"):
        (user / f"eng.{part}").write_text("-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nruns VBZ B-VP O\n\n"
                                          "Mary NNP B-NP B-PER\nsleeps VBZ B-VP O\n")
    params["prepare"]["tasks"] = {"conll2003": {"format": "conll", "split": "given", "scheme": "bioes",
                                                "metric": "span_f1", "train": "data/user/conll2003/eng.train",
                                                "dev": "data/user/conll2003/eng.dev",
                                                "test": "data/user/conll2003/eng.test"}}
    m = run_stage("prepare", prepare.run, params, root)
    assert m["conll2003"]["train_sentences"] == 2
    assert [s.tags for s in read_tagged(root / "data/prepared/conll2003/dev.parquet")] == [("S-PER", "O")] * 2
    params["prepare"]["tasks"]["conll2003"]["train"] = "data/user/missing.txt"
    with pytest.raises(FileNotFoundError, match="missing.txt: corpus file not found"):
        run_stage("prepare", prepare.run, params, root)


def test_train_energy_stage(tiny_root):
    from flows.stages import train_energy
    root, params = tiny_root
    params["prepare"]["tasks"] = {"ner": params["prepare"]["tasks"]["ner"]}
    run_stage("prepare", prepare.run, params, root)
    te = params["train_energy"]
    te.update(tasks=["ner"], max_train_sentences=0)
    te["optim"].update(epochs=6, batch_size=8)          # long enough to learn: the guard fails a model that did not
    te.setdefault("model", {})["hidden"] = 8
    te["sweep"].update(num_samples=1, resources={"cpu": 1, "gpu": 0},
                       space={"train_energy.optim.lr": {"type": "choice", "values": [0.05]}})
    import ray
    try:
        m = run_stage("train_energy", train_energy.run, params, root)
    finally:
        ray.shutdown()
    for energy in ("blstm_crf", "blstm_crf_plus"):
        r = m[f"ner-{energy}"]
        assert r["n_failed"] == 0 and 0 <= r["test_f1"] <= 100
        assert r["test_energy_pred"] <= r["test_energy_gold"] + 1e-6      # Viterbi is exact
        assert r["test_decode_tokens_per_s"] > 0
        assert (root / "models/energy/ner" / energy / "model.pt").exists()
    runs = _runs(root)
    names = {r.info.run_name for r in runs.values()}
    assert {"train_energy", "sweep/ner/blstm_crf", "sweep/ner/blstm_crf_plus"} <= names


def test_guard_fails_trials_with_a_broken_learning_rate(tiny_root):
    """A tiny sweep whose learning rate cannot move the weights: every trial fails as 'did not learn'
    (its MLflow run FAILED), and the stage fails loudly instead of writing a model."""
    import ray
    root, params = tiny_root
    run_stage("prepare", prepare.run, params, root)
    params["train"]["tasks"] = ["pos"]
    params["train"]["sweep"]["space"] = {"train.optim.lr": {"type": "loguniform", "low": 1e-14, "high": 1e-13}}
    try:
        with pytest.raises(RuntimeError, match="every trial failed.*did not learn"):
            run_stage("train", train.run, params, root)
    finally:
        ray.shutdown()
    assert not (root / "models/tagger/pos/model.pt").exists()
    trials = [r for r in _runs(root).values() if r.info.run_name.startswith("task_trial")]
    assert len(trials) == 2 and {r.info.status for r in trials} == {"FAILED"}, {r.info.run_name: r.info.status for r in _runs(root).values()}
