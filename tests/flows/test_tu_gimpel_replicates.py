"""Replicates of the Tu & Gimpel chain (``seeds`` of ``train_energy``, ``infnets`` and ``approx``):
replicate k > 0 retrains the configuration replicate 0's sweep chose from other initial weights and
batch orders on the same training sentences, beside replicate 0's model (``.../replicate<k>/``);
``approx`` evaluates every trained model on each replicate and stores those systems as
``[seeds, n, d]``, GD as ``[n, d]``; a replicate list that is not a subset of the stage before is a
clear error naming the key and the folder."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from components.config import BaseConfig, ConfigError, load_section
from components.data.tasks import load_tagging_task
from components.inference.study_config import ApproxStudyConfig
from components.inference.study_config import replicate_folder as approx_replicate_folder
from components.metrics.significance import load_stats
from components.metrics.tagging import stats_score
from components.seeds import seed_for
from components.tracking import NullTracker
from components.training.infnet import variant_name
from flows import task_sweeps
from flows.stages import approx, infnets, prepare, report, train_energy
from flows.stages.common import StageContext, run_stage, stage_params
from flows.task_sweeps import replicate_folder, train_one

E1, EP = "blstm_crf", "blstm_crf_plus"


def _prepare_pos(tiny_root):
    root, params = tiny_root
    params["prepare"]["tasks"] = {"pos": params["prepare"]["tasks"]["pos"]}
    run_stage("prepare", prepare.run, params, root, tracker=NullTracker())
    return root, params


def _recording(spec):
    """``spec`` whose builder (the stage's own) also records each call: its seed, the replicate it was
    asked for, and the model's initial weights."""
    calls = []

    def build(cfg, variant, task, seed, root, **kw):
        model = spec.build(cfg, variant, task, seed, root, **kw)
        calls.append({"seed": seed, "replicate": kw.get("replicate", 0),
                      "weights": {k: v.detach().clone() for k, v in model.state_dict().items()}})
        return model
    return dataclasses.replace(spec, build=build), calls


def _net_weights(model) -> dict[str, torch.Tensor]:
    net = getattr(model, "net", model)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _differ(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    assert a.keys() == b.keys()
    # the frozen GloVe rows are the same in every replicate; the trained weights are not
    return any(not torch.equal(a[k], b[k]) for k in a)


def _save(folder, model, spec, cfg, variant, task, state=None):
    """A model folder as the stage writes it (``model.pt`` and ``model.json`` with the recipe)."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), folder / "model.pt")
    (folder / "model.json").write_text(json.dumps({"recipe": spec.recipe(cfg, variant, task)}))


def test_layouts_agree():
    for k in range(4):
        assert replicate_folder("models/energy/pos/x", k) == approx_replicate_folder("models/energy/pos/x", k)
    assert str(replicate_folder("m/pos/x", 0)) == "m/pos/x" and str(replicate_folder("m/pos/x", 2)) == "m/pos/x/replicate2"


def test_a_replicate_retrains_with_other_init_and_order_on_the_same_sentences(tiny_root):
    """train_one: replicate 0 keeps the seed names it always had; replicate 1 names every training seed
    with "replicate1" — other initial and trained weights — on the same capped training subsample.
    An infnets replicate trains against the energy of its own replicate."""
    root, params = _prepare_pos(tiny_root)
    te = params["train_energy"]
    te.update(tasks=["pos"], energies=[E1], max_train_sentences=20, seeds=[0, 1])
    te["optim"].update(epochs=3, batch_size=8, lr=0.05)          # the "selected" value every replicate trains with
    te.setdefault("model", {})["hidden"] = 8
    params = stage_params(params)
    base = load_section(BaseConfig, "base", params).seed
    spec, calls = _recording(train_energy.SPEC)
    tasks, models = [], []
    for k in (0, 1):
        model, state, test, task = train_one(spec, "pos", E1, params, root, replicate=k, on_task=tasks.append)
        models.append((model, state, task))
        assert test["score"] > 0
    assert [c["seed"] for c in calls] == [seed_for(base, "train_energy", "pos", "model"),
                                          seed_for(base, "train_energy", "pos", "replicate1", "model")]
    assert _differ(calls[0]["weights"], calls[1]["weights"])                   # other initial weights
    assert _differ(_net_weights(models[0][0]), _net_weights(models[1][0]))     # other trained weights
    assert len(tasks[0].train) == len(tasks[1].train) == 20                    # the same capped subsample
    assert [s.words for s in tasks[0].train.sentences] == [s.words for s in tasks[1].train.sentences]

    # the energies where the stage puts them; an infnets replicate builds on its own replicate's energy
    cfg = load_section(train_energy.SPEC.config, "train_energy", params)
    for k, (model, state, task) in enumerate(models):
        _save(replicate_folder(root / cfg.models_dir / "pos" / E1, k), model, train_energy.SPEC, cfg, E1, task)
    inf = params["infnets"]
    inf.update(tasks=["pos"], energies=[E1], archs=["cnn"], modes=["infnet"], energy_archs={},
               max_train_sentences=20, seeds=[0, 1])
    inf["optim"].update(epochs=3, min_epochs=0, batch_size=8, lr=0.05)
    inf.setdefault("infnet", {})["hidden"] = 8
    spec, calls = _recording(infnets.SPEC)
    variant = variant_name(E1, "cnn", "infnet")
    nets, itasks = [], []
    for k in (0, 1):
        net, _, _, task = train_one(spec, "pos", variant, params, root, replicate=k, on_task=itasks.append)
        nets.append(net)
        energy = torch.load(replicate_folder(root / cfg.models_dir / "pos" / E1, k) / "model.pt", weights_only=True)
        assert all(torch.equal(v, energy[n]) for n, v in net.energy.state_dict().items())    # energy k
    assert [c["replicate"] for c in calls] == [0, 1]
    assert [c["seed"] for c in calls] == [seed_for(base, "infnets", "pos", "model"),
                                          seed_for(base, "infnets", "pos", "replicate1", "model")]
    assert _differ(_net_weights(nets[0]), _net_weights(nets[1]))
    assert [s.words for s in itasks[0].train.sentences] == [s.words for s in tasks[0].train.sentences]


def test_train_energy_and_infnets_stages_write_replicates_beside_replicate_0(tiny_root):
    """The stages: replicate 1 of every (task, variant) retrains the sweep's chosen values, its model
    in ``replicate1/`` beside replicate 0's files and its test metrics under ``replicates.1``."""
    import ray
    root, params = _prepare_pos(tiny_root)
    for section in ("train_energy", "infnets"):
        params[section].update(tasks=["pos"], energies=[E1], max_train_sentences=0, seeds=[0, 1])
        params[section]["optim"].update(epochs=3, batch_size=8)
        params[section]["sweep"].update(num_samples=1, resources={"cpu": 1, "gpu": 0})
    params["train_energy"].setdefault("model", {})["hidden"] = 8
    params["train_energy"]["sweep"]["space"] = {"train_energy.optim.lr": {"type": "choice", "values": [0.05]}}
    params["infnets"].update(archs=["cnn"], modes=["infnet"], energy_archs={})
    params["infnets"]["optim"].update(min_epochs=0)
    params["infnets"].setdefault("infnet", {})["hidden"] = 8
    params["infnets"]["sweep"]["space"] = {"infnets.optim.lr": {"type": "choice", "values": [0.05]},
                                           "infnets.lam": {"type": "choice", "values": [0.5, 2.0]}}
    try:
        te = run_stage("train_energy", train_energy.run, params, root, tracker=NullTracker())
        inf = run_stage("infnets", infnets.run, params, root, tracker=NullTracker())
    finally:
        ray.shutdown()
    for m, folder, key in ((te, root / "models/energy/pos" / E1, f"pos-{E1}"),
                           (inf, root / "models/infnet/pos" / variant_name(E1, "cnn", "infnet"),
                            f"pos-{variant_name(E1, 'cnn', 'infnet')}")):
        r0, r1 = (json.loads((replicate_folder(folder, k) / "model.json").read_text()) for k in (0, 1))
        assert r1["config"] == r0["config"] and r1["replicate"] == 1 and "replicate" not in r0   # the chosen values
        assert (replicate_folder(folder, 1) / "history.json").exists()
        w0, w1 = (torch.load(replicate_folder(folder, k) / "model.pt", weights_only=True) for k in (0, 1))
        assert _differ(w0, w1)
        assert set(m[key]["replicates"]) == {"1"} and m[key]["replicates"]["1"]["test_score"] > 0
        assert {k for k in m[key] if k.startswith("config.")} == {f"config.{k}" for k in r0["config"]}
        written = json.loads((root / f"metrics/{'train_energy' if m is te else 'infnets'}.json").read_text())
        # the keys replicate 0's metrics have (the run facts, decoding times, in metrics/timings/ as its are)
        rep1 = written[key]["replicates"]["1"]
        assert set(rep1) == {k for k in written[key] if k.startswith(task_sweeps.KEPT_METRICS)}
        assert rep1 == {k: m[key]["replicates"]["1"][k] for k in rep1}
    # the infnet of replicate 1 was trained against the energy of replicate 1 (its state holds the energy)
    net1 = torch.load(root / "models/infnet/pos" / variant_name(E1, "cnn", "infnet") / "replicate1/model.pt",
                      weights_only=True)
    e1 = torch.load(root / "models/energy/pos" / E1 / "replicate1/model.pt", weights_only=True)
    assert all(torch.equal(net1[f"energy.{k}"], v) for k, v in e1.items())


# --- approx ------------------------------------------------------------------------------------

def _faked_sweeps_ctx(monkeypatch, fake, params, root, stage):
    """``task_sweeps.run_sweep`` replaced by ``fake`` (no Ray, no object store) -> the stage's context,
    inside an open stage run of a NullTracker (a context manager)."""
    import contextlib

    from ray import tune

    @contextlib.contextmanager
    def ctx():
        monkeypatch.setattr(task_sweeps, "run_sweep", fake)
        monkeypatch.setattr(tune, "with_parameters", lambda f, **kw: f)     # no object store
        tracker = NullTracker()
        with tracker.start_run(stage) as run_id:
            yield StageContext(root=root, base=load_section(BaseConfig, "base", params), tracker=tracker,
                               run_id=run_id, stage=stage)
    return ctx()


def _untrained_models(root, params, seeds):
    """Energies and networks for approx on every replicate of ``seeds``, built by the stages' own
    builders and saved as they save them (untrained: approx evaluates whatever models it is given)."""
    params = stage_params(params)
    tcfg = load_section(train_energy.SPEC.config, "train_energy", params)
    icfg = load_section(infnets.SPEC.config, "infnets", params)
    task = load_tagging_task(root / "data/prepared/pos")
    for k in seeds:
        for e in (E1, EP):
            model = train_energy.SPEC.build(tcfg, e, task, seed_for(1, "test", e, k), root)
            _save(replicate_folder(root / tcfg.models_dir / "pos" / e, k), model, train_energy.SPEC, tcfg, e, task)
            for mode in ("local", "infnet"):
                v = variant_name(e, "cnn", mode)
                net = infnets.SPEC.build(icfg, v, task, seed_for(1, "test", v, k), root, **({"replicate": k} if k else {}))
                _save(replicate_folder(root / icfg.models_dir / "pos" / v, k), net, infnets.SPEC, icfg, v, task)


def _approx_params(params, seeds):
    params["train_energy"].setdefault("model", {})["hidden"] = 4
    params["infnets"].setdefault("infnet", {})["hidden"] = 4
    params["approx"].update(tasks=["pos"], seeds=list(seeds), archs=["cnn"], max_test_sentences={"pos": 6},
                            max_dev_sentences=4, speed_batch_sizes=[10], shard_size=50, lm_epochs=1, gd_init_stds=[],
                            resources={"cpu": 1, "gpu": 0}, methods={"gd_adam": {"lr": 0.1, "iterations": 5}},
                            tuned={"tailored_infnet": {"rows_key": "n_steps", "rows": [2], "tune_key": "lr",
                                                       "values": [0.01]},
                                   "gd_warm_start": {"rows_key": "iterations", "rows": [2], "tune_key": "lr",
                                                     "values": [1.0]}})
    params["approx"]["gd"].update(checkpoints=[2, 5], lrs=[1.0, 10.0], max_iterations={})
    return params


REPLICATED = [f"{e}.{s}" for e in (E1, EP) for s in ("viterbi", "gd_adam", "cnn.local", "cnn.infnet")]


def test_approx_with_two_replicates_writes_seeds_n_d_for_trained_systems_and_n_d_for_gd(tiny_root):
    """Also: adding a replicate leaves replicate 0's results as they were (its metrics, every [n, d]
    system, and the [0] slice of every replicated one)."""
    import ray

    from components.metrics.run_facts import results_only
    root, params = _prepare_pos(tiny_root)
    _untrained_models(root, params, (0, 1))
    try:
        alone = run_stage("approx", approx.run, _approx_params(params, (0,)), root, tracker=NullTracker(), task="pos")["pos"]
        st0 = load_stats(root / "metrics/stats/approx/pos.npz")
        vals0 = load_stats(root / "metrics/stats/approx/pos.values.npz")
        m = run_stage("approx", approx.run, _approx_params(params, (0, 1)), root, tracker=NullTracker(), task="pos")["pos"]
    finally:
        ray.shutdown()
    n = m["n_test"]
    st = load_stats(root / "metrics/stats/approx/pos.npz")
    vals = load_stats(root / "metrics/stats/approx/pos.values.npz")
    d = len(st.columns)
    assert "replicates" not in alone
    same = lambda x: {k: v for k, v in results_only(x).items() if k not in ("speed", "replicates")}   # noqa: E731
    assert same(m) == same(alone)
    for old, new in ((st0, st), (vals0, vals)):
        assert set(new.systems) == set(old.systems)
        for k, v in old.systems.items():
            assert v.ndim == 2 and np.array_equal(new[k][0] if new[k].ndim == 3 else new[k], v), k
    for system in REPLICATED:
        assert st[system].shape == (2, n, d), system
        assert vals[f"energy:{system}"].shape == (2, n, 2), system
        # replicate 0's numbers stay where they were; replicate 1's under replicates.1, from its own models
        assert stats_score(m["metric"])(st[system][0].sum(0)) == pytest.approx(m[system]["score"])
        assert stats_score(m["metric"])(st[system][1].sum(0)) == pytest.approx(m["replicates"]["1"][system]["score"])
        assert np.mean(vals[f"energy:{system}"][0, :, 0]) == pytest.approx(m[system]["energy_pred"])
    for e in (E1, EP):
        assert vals[f"energy:{e}.gold"].shape == (2, n, 2)
        assert not np.array_equal(vals[f"energy:{e}.gold"][0], vals[f"energy:{e}.gold"][1])    # another energy
        # search errors of replicate 1 are measured against replicate 1's Viterbi: exact inference is a bound
        assert m["replicates"]["1"][f"{e}.cnn.infnet"]["search_error"] >= -1e-5
    single = [s for s in st.systems if s not in REPLICATED]
    assert {f"{EP}.gd_oracle", f"{EP}.gd_min_energy", f"{EP}.gd_dev_tuned", f"{EP}.gd_oracle.2",
            f"{EP}.tailored_infnet.2", f"{EP}.gd_warm_start.2"} <= set(single)
    for s in single:
        assert st[s].shape == (n, d), s
    assert vals["ppl:words"].shape == (n, 2) and vals[f"energy:{EP}.gd_oracle"].shape == (n, 2)
    assert set(m["replicates"]) == {"1"} and set(m["replicates"]["1"]) == set(REPLICATED)

    # the report reads them: replicated pairs resample 2 seeds, a pair with GD uses replicate 0 and says so
    from components.reports import tu_gimpel
    # the models here are untrained stand-ins: the training stages' metrics (best and last epochs) are written
    # as those stages would, for the report's budget note
    for stage, key in (("train_energy", f"pos-{E1}"), ("infnets", f"pos-{E1}.cnn.infnet")):
        (root / "metrics" / stage).mkdir(parents=True, exist_ok=True)
        (root / "metrics" / stage / "pos.json").write_text(json.dumps({key: {"best_epoch": 3.0, "epochs_run": 5.0}}))
    run_stage("report", report.run, params, root, tracker=NullTracker())
    written = json.loads((root / "metrics/report.json").read_text())
    by_claim = {v["claim"]: v for v in written["verdicts"] if v["scope"].startswith("pos")}
    assert by_claim["T4.pos.gd≈viterbi"]["seeds"] == 1 and "replicate 0 of 2" in by_claim["T4.pos.gd≈viterbi"]["reason"]
    data = tu_gimpel.TaskData(m, st, vals)
    v = {x.claim.id: x for x in tu_gimpel.findings({"pos": m}, {"pos": data}, {"pos": "cnn"})}
    assert {iv.seeds for _, iv in v["T4.pos.local,infnet>viterbi"].parts} == {2}
    md = (root / "reports/tu_gimpel/README.md").read_text()
    assert "## Replicates" in md and "replicate 0 of 2" in md


def test_infnets_seeds_must_be_a_subset_of_train_energy_seeds(tmp_path, monkeypatch):
    from components.config import load_params, resolve_scale
    params = resolve_scale(load_params("params.yaml"))
    params["infnets"].update(tasks=["a"], seeds=[0, 1])
    (tmp_path / "data/prepared/a").mkdir(parents=True)
    (tmp_path / "data/prepared/a/meta.json").write_text("{}")
    for e in (E1, EP):                                  # replicate 0's energies only
        (tmp_path / "models/energy/a" / e).mkdir(parents=True)
        (tmp_path / "models/energy/a" / e / "model.pt").write_bytes(b"")
    monkeypatch.setattr(task_sweeps, "run_sweep", lambda *a, **k: pytest.fail("no sweep may start"))
    tracker = NullTracker()
    with tracker.start_run("infnets") as run_id:
        ctx = StageContext(root=tmp_path, base=load_section(BaseConfig, "base", params), tracker=tracker, run_id=run_id,
                           stage="infnets")
        with pytest.raises(ConfigError, match=r"infnets.seeds: replicate 1 trains against the energy in "
                                              r".*models/energy/a/blstm_crf/replicate1, which does not exist: "
                                              r"infnets.seeds \[0, 1\] must be a subset of train_energy.seeds"):
            infnets.run(params, ctx)
        (tmp_path / "models/energy/a" / E1 / "replicate1").mkdir()
        (tmp_path / "models/energy/a" / E1 / "replicate1/model.pt").write_bytes(b"")
        with pytest.raises(ConfigError, match=r"models/energy/a/blstm_crf_plus/replicate1, which does not exist"):
            infnets.run(params, ctx)


def test_approx_seeds_must_be_a_subset_of_infnets_seeds(tiny_root):
    root, params = _prepare_pos(tiny_root)
    params = _approx_params(params, (0, 1))
    _untrained_models(root, params, (0,))
    with pytest.raises(ConfigError, match=r"approx.seeds: replicate 1 evaluates the model in .*models/energy/pos/"
                                          r"blstm_crf/replicate1, which does not exist: approx.seeds \[0, 1\] must be "
                                          r"a subset of infnets.seeds"):
        run_stage("approx", approx.run, params, root, tracker=NullTracker(), task="pos")
    # the energies of replicate 1 alone: its networks are missing (infnets did not train replicate 1)
    params2 = stage_params(params)
    tcfg = load_section(train_energy.SPEC.config, "train_energy", params2)
    task = load_tagging_task(root / "data/prepared/pos")
    for e in (E1, EP):
        _save(replicate_folder(root / "models/energy/pos" / e, 1), train_energy.SPEC.build(tcfg, e, task, 3, root),
              train_energy.SPEC, tcfg, e, task)
    with pytest.raises(ConfigError, match=r"approx.seeds: replicate 1 evaluates the model in .*models/infnet/pos/"
                                          r"blstm_crf.cnn.local/replicate1.*\(run infnets with replicate 1\)"):
        run_stage("approx", approx.run, params, root, tracker=NullTracker(), task="pos")
    assert not (root / "metrics/stats/approx/pos.npz").exists()


@pytest.mark.parametrize("seeds, error", [([1, 2], r"seeds: must list replicate 0 first"),
                                          ([0, 1, 1], r"seeds: lists a replicate twice"),
                                          ([], r"seeds: must not be empty"), ([0, -1], r"seeds\[1\]: must be >= 0")])
def test_replicate_lists_are_checked(seeds, error):
    from components.config import load_params, resolve_scale
    params = resolve_scale(load_params("params.yaml"))
    for section, cls in (("train_energy", train_energy.SPEC.config), ("infnets", infnets.SPEC.config),
                         ("approx", ApproxStudyConfig)):
        params[section]["seeds"] = seeds
        with pytest.raises(ConfigError, match=rf"^{section}\.{error}"):
            load_section(cls, section, params)


def test_a_replicate_that_did_not_learn_fails_the_stage_naming_it(tmp_path, monkeypatch):
    """Replicates run as one grid after every sweep, each with its sweep's chosen values and under its
    sweep's parent run; one that did not learn fails the stage (no model folder written)."""
    from flows.sweeps import SweepResult
    from tests.flows.test_task_sweeps_grid import _fake_root
    params = _fake_root(tmp_path, ["a", "b"])
    params["train_energy"].update(seeds=[0, 2], energies=[E1])
    grids = []

    def fake(trainable, *, name, cfg, params, seed, tracker, parent_run_id, storage, tags, grid, trial_tags,
             allow_errors=False):
        grids.append((name, grid, [trial_tags({"run": el}) for el in grid]))
        rows = []
        for i, el in enumerate(grid):
            trial = tmp_path / "ray" / name / str(i)
            (trial / "ckpt").mkdir(parents=True)
            bad = el.get("replicate") == 2 and el["task"] == "b"
            rows.append({"config": {"run": el}, "error": "DidNotLearn('no gain on dev')" if bad else "",
                         "metrics": {} if bad else {"best_dev_score": 50.0 + i, "test_score": 60.0},
                         "path": str(trial), "checkpoint": None if bad else str(trial / "ckpt")})
        return SweepResult(best_config={}, best_metrics={}, best_checkpoint=None, trials=rows)

    with _faked_sweeps_ctx(monkeypatch, fake, params, tmp_path, "train_energy") as ctx:
        with pytest.raises(RuntimeError, match=r"train_energy: 1 replicate\(s\) failed .*: b/blstm_crf replicate 2: "
                                               r"DidNotLearn\('no gain on dev'\)"):
            task_sweeps.run_task_sweeps("flows.stages.train_energy:SPEC", params, ctx)
    assert not (tmp_path / "models/energy").exists()
    (name0, grid0, _), (name2, grid2, tags2) = grids
    assert name0 == "train_energy-a+b" and name2 == "train_energy-a+b-replicates"
    assert [(el["task"], el["replicate"], el["config"]) for el in grid2] == [(el["task"], 2, el["config"]) for el in grid0]
    parents = {r["name"]: r["id"] for r in ctx.tracker.runs}
    assert [t["mlflow.parentRunId"] for t in tags2] == [parents[f"sweep/{t}/{E1}"] for t in ("a", "b")]
    assert tags2[1]["sweep"] == f"train_energy-b-{E1}-replicate2" and tags2[1]["replicate"] == "2"


# --- per-variant sweep spaces ----------------------------------------------------------------------

def test_a_local_variants_space_leaves_lambda_out_and_an_infnet_variants_keeps_it():
    """In local mode the objective is token cross-entropy alone: lambda has no effect, so a sweep over it
    would train the same network once per lambda."""
    from components.config import load_params, resolve_scale
    params = resolve_scale(load_params("params.yaml"))
    params["infnets"]["sweep"]["space"]["infnets.anneal_lambda"] = {"type": "choice", "values": [False, True]}
    cfg = load_section(infnets.SPEC.config, "infnets", params)
    assert {"infnets.optim.lr", "infnets.lam", "infnets.anneal_lambda"} == set(cfg.sweep.space)
    local, infnet = (task_sweeps.variant_space(infnets.SPEC, cfg, variant_name(E1, "cnn", m))
                     for m in ("local", "infnet"))
    assert local == {"infnets.optim.lr": cfg.sweep.space["infnets.optim.lr"]}
    assert infnet == cfg.sweep.space
    # a spec without the hook: every variant searches sweep.space
    assert task_sweeps.variant_space(train_energy.SPEC, cfg, E1) is cfg.sweep.space


def test_sweeps_of_several_trials_search_each_variants_space_and_replicates_keep_its_choice(tmp_path, monkeypatch):
    """With num_samples > 1 each (task, variant)'s run_sweep gets its variant's space (a local network's
    without lambda); its replicates retrain the values its sweep chose, so a local replicate's config has
    no lambda and loads with lambda as configured."""
    from components.config import load_params, resolve_scale
    from flows.search_space import with_values
    from flows.sweeps import SweepResult
    params = resolve_scale(load_params("params.yaml"))
    params["infnets"].update(tasks=["a"], seeds=[0, 1], energies=[E1], archs=["cnn"], energy_archs={})
    params["infnets"]["sweep"]["num_samples"] = 2
    (tmp_path / "data/prepared/a").mkdir(parents=True)
    (tmp_path / "data/prepared/a/meta.json").write_text("{}")
    (tmp_path / "models/energy/a" / E1 / "replicate1").mkdir(parents=True)
    (tmp_path / "models/energy/a" / E1 / "replicate1/model.pt").write_bytes(b"")
    spaces, replicate_grid = {}, []

    class Stop(Exception):
        pass

    def fake(trainable, *, name, cfg, params, seed, tracker, parent_run_id, storage, tags, grid=None, trial_tags=None,
             allow_errors=False):
        if grid is not None:                       # the replicates: what they would train, then stop
            replicate_grid.extend(grid)
            raise Stop
        spaces[name] = cfg.space
        config = {k: spec["values"][-1] for k, spec in cfg.space.items()}    # the trial's "chosen" values
        (tmp_path / name).mkdir()
        row = {"config": config, "error": "", "metrics": {"best_dev_score": 1.0}, "path": str(tmp_path / name),
               "checkpoint": str(tmp_path / name)}
        return SweepResult(best_config=config, best_metrics=row["metrics"], best_checkpoint=None, trials=[row])

    with _faked_sweeps_ctx(monkeypatch, fake, params, tmp_path, "infnets") as ctx:
        with pytest.raises(Stop):
            infnets.run(params, ctx)
    full = params["infnets"]["sweep"]["space"]
    local, infnet = variant_name(E1, "cnn", "local"), variant_name(E1, "cnn", "infnet")
    assert spaces == {f"infnets-a-{local}": {"infnets.optim.lr": full["infnets.optim.lr"]},
                      f"infnets-a-{infnet}": full}
    logged = {r["name"]: r["params"] for r in ctx.tracker.runs}           # each parent run logs the space it searched
    assert "space.infnets.lam" not in logged[f"sweep/a/{local}"] and "space.infnets.lam" in logged[f"sweep/a/{infnet}"]
    configs = {el["variant"]: el["config"] for el in replicate_grid}
    assert configs == {local: {"infnets.optim.lr": full["infnets.optim.lr"]["values"][-1]},
                       infnet: {"infnets.optim.lr": full["infnets.optim.lr"]["values"][-1],
                                "infnets.lam": full["infnets.lam"]["values"][-1]}}
    lam = load_section(infnets.SPEC.config, "infnets", params).lam
    loaded = load_section(infnets.SPEC.config, "infnets", with_values(params, configs[local]))
    assert loaded.lam == lam and loaded.optim.lr == configs[local]["infnets.optim.lr"]
