"""End to end: prepare -> train_energy -> infnets -> approx -> report on the tiny corpus (slow: several
Ray sweeps). The GD grid and tailoring grid are cut to a few points; the assertions are the
study's invariants, which hold at any scale."""
import json

import pytest

from flows.stages import approx, infnets, prepare, report, train_energy
from flows.stages.common import run_stage


@pytest.mark.slow
def test_approx_study_end_to_end(tiny_root):
    import ray
    root, params = tiny_root
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root)
    for section in ("train_energy", "infnets"):
        params[section].update(tasks=["pos"], max_train_sentences=0)
        # long enough to learn: the did-not-learn guard fails a model that did not (one epoch did not)
        params[section]["optim"].update(epochs=4, min_epochs=0, batch_size=8)
        params[section]["sweep"]["space"] = {f"{section}.optim.lr": {"type": "choice", "values": [0.05]}}
        params[section]["sweep"].update(num_samples=1, resources={"cpu": 1, "gpu": 0})
    params["train_energy"].setdefault("model", {})["hidden"] = 4
    params["infnets"].setdefault("infnet", {})["hidden"] = 4
    params["approx"].update(tasks=["pos"], max_test_sentences={"pos": 5}, max_dev_sentences=4, speed_batch_sizes=[10],
                            shard_size=4, lm_epochs=1, resources={"cpu": 1, "gpu": 0},
                            tuned={"tailored_infnet": {"rows_key": "n_steps", "rows": [2], "tune_key": "lr",
                                                       "values": [0.01]},
                                   "gd_warm_start": {"rows_key": "iterations", "rows": [2], "tune_key": "lr",
                                                     "values": [1.0]}})
    params["approx"]["gd"].update(checkpoints=[2, 5], max_iterations={})
    try:
        run_stage("train_energy", train_energy.run, params, root)
        run_stage("infnets", infnets.run, params, root)
        m = run_stage("approx", approx.run, params, root, task="pos")["pos"]
    finally:
        ray.shutdown()
    vit = m["blstm_crf_plus.viterbi"]
    assert vit["energy_pred"] <= vit["energy_gold"] + 1e-6
    for n, row in m["blstm_crf_plus.gd_oracle"].items():
        assert row["search_error"] >= -1e-5                           # nothing beats exact inference
    assert m["blstm_crf_plus.gd_oracle"]["oracle"]["score"] >= max(
        r["score"] for k, r in m["blstm_crf_plus.gd_oracle"].items() if k != "oracle") - 1e-9
    for key in ("blstm_crf.cnn.infnet", "blstm_crf.seq2seq.local", "blstm_crf_plus.cnn.infnet"):
        assert m[key]["search_error"] >= -1e-5
    # the label-free selections: the lowest energy over the whole grid is at most every per-N choice's
    # (per sentence a minimum over a superset), nothing beats Viterbi, and the dev-tuned pair is on the grid
    low = m["blstm_crf_plus.gd_min_energy"]
    assert set(low) == {"2.0", "5.0", "all"}
    assert low["all"]["energy"] <= min(low["2.0"]["energy"], low["5.0"]["energy"]) + 1e-9
    assert all(r["search_error"] >= -1e-5 for r in low.values())
    tuned = m["blstm_crf_plus.gd_dev_tuned"]
    assert tuned["N"] in (2.0, 5.0) and tuned["lr"] in params["approx"]["gd"]["lrs"] and tuned["search_error"] >= -1e-5
    assert set(m["blstm_crf_plus.gd_init_std"]) == {"0.01", "1.0"}
    assert m["blstm_crf_plus.gd_init_std"]["0.01"]["min_energy"] == low["all"]
    assert set(m["speed"]) == {"viterbi", "gd", "cnn", "blstm", "seq2seq"}
    for energy in ("blstm_crf", "blstm_crf_plus"):                    # approx.methods, under both energies
        assert m[f"{energy}.gd_adam"]["search_error"] >= -1e-5
    assert set(m["blstm_crf_plus.tailored_infnet"]) == {"2"} and m["blstm_crf_plus.gd_warm_start"]["2"]["lr"] == 1.0
    run_stage("report", report.run, params, root)
    md = (root / "reports/tu_gimpel/README.md").read_text()
    assert "Table 6" in md and "| pos | blstm_crf_plus | gd_adam |" in md and (root / "reports/tu_gimpel/figure2.png").stat().st_size > 0
    assert json.loads((root / "metrics/approx/pos.json").read_text())["pos"]["n_test"] == m["n_test"]
