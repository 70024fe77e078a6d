"""RunMetrics: a Tune result logged to a run in one batch, as Ray's callback would key it."""
import math
import pickle

from components.tracking.mlflow_tracker import MlflowTracker, RunMetrics


def test_a_result_is_logged_flattened_and_filtered(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker("rm", tracking_uri=uri)
    with tracker.start_run("trial") as run_id:
        pass
    logger = pickle.loads(pickle.dumps(RunMetrics(uri)))          # Tune saves its callbacks
    result = {"best_dev_score": 0.5, "training_iteration": 3, "done": False, "nan": math.nan,
              "hostname": "box", "config": {"train.optim.lr": 0.01}, "info": {"a": 1, "b": {"c": 2.5}}}
    assert logger.log(run_id, result, step=3, skip=("config",)) == 5
    logger.log(run_id, {"best_dev_score": 0.75}, step=4)
    run = tracker.client.get_run(run_id)
    assert run.data.metrics == {"best_dev_score": 0.75, "training_iteration": 3.0, "done": 0.0,
                                "info/a": 1.0, "info/b/c": 2.5}
    hist = tracker.client.get_metric_history(run_id, "best_dev_score")
    assert [(m.step, m.value) for m in hist] == [(3, 0.5), (4, 0.75)]
