"""Bring your own: a user's CoNLL corpus declared once (``prepare.tasks`` + the study's one task
list) runs through prepare -> train -> train_energy -> infnets -> approx -> report, with an
inference method from a module outside the project named in params; a bad line in the corpus
fails ``prepare`` naming ``file:line``; editing a module in ``base.plugin_dir`` makes ``dvc
status`` report exactly the stages that can build plug-ins."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from components.data.types import FormatError
from flows.stages import approx, infnets, prepare, report, train, train_energy
from flows.stages.common import run_stage

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "my_methods.py"
METHOD = "my_methods:UnaryArgmax"
WORDS = ["the", "dog", "cat", "runs", "sleeps", "big", "a", "john", "paris", "in", "loves", "mary", "berlin"]
TAGS = {"john": "B-PER", "mary": "B-PER", "paris": "B-LOC", "berlin": "B-LOC"}
PLUGIN_STAGES = {"prepare", "train_energy", "infnets", "approx", "scaling", "search_aware", "screen",
                 "normalisation", "mlm_exact", "mcmc"}


def _write_corpus(folder: Path, seed: int = 0) -> dict[str, Path]:
    """A small CoNLL corpus (``word<TAB>tag``, blank line between sentences) in three files."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in (("train", 48), ("dev", 12), ("test", 12)):
        sents = [[WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(2, 8))] for _ in range(n)]
        path = folder / f"{split}.conll"
        path.write_text("\n\n".join("\n".join(f"{w}\t{TAGS.get(w, 'O')}" for w in s) for s in sents) + "\n")
        out[split] = path
    return out


def _declare(params: dict, files: dict[str, Path], root: Path) -> None:
    """The one declaration of the corpus, and its name in the study's task list."""
    params["prepare"]["tasks"] = {"mine": {
        "format": "conll", "split": "given", "scheme": "bioes", "metric": "span_f1",
        **{k: str(p.relative_to(root)) for k, p in files.items()}}}
    params["studies"] = {"tu_gimpel": ["mine"]}
    for section in ("train", "train_energy", "infnets", "approx"):
        params[section].pop("tasks", None)


@pytest.mark.slow
def test_a_user_corpus_declared_once_runs_to_the_report_with_a_plugin_method(tiny_root, tmp_path_factory):
    import ray
    root, params = tiny_root
    files = _write_corpus(root / "data" / "user" / "mine")
    _declare(params, files, root)
    plugins = tmp_path_factory.mktemp("outside_the_project")            # a module outside the project
    shutil.copy(PLUGIN, plugins / "my_methods.py")
    sys.modules.pop("my_methods", None)
    params["base"]["plugin_dir"] = str(plugins)
    for section in ("train", "train_energy", "infnets"):
        params[section]["optim"].update(epochs=6, batch_size=8, lr=0.02)
        params[section]["sweep"].update(num_samples=1, resources={"cpu": 1, "gpu": 0})
    params["train_energy"].setdefault("model", {})["hidden"] = 8
    params["infnets"].setdefault("infnet", {})["hidden"] = 8
    params["approx"].update(max_test_sentences={"mine": 8}, max_dev_sentences=4, speed_batch_sizes=[10],
                            shard_size=4, lm_epochs=1, resources={"cpu": 1, "gpu": 0}, gd_init_stds=[],
                            methods={METHOD: {"temperature": 1.0}},
                            tuned={"tailored_infnet": {"rows_key": "n_steps", "rows": [2], "tune_key": "lr",
                                                       "values": [0.01]},
                                   "gd_warm_start": {"rows_key": "iterations", "rows": [2], "tune_key": "lr",
                                                     "values": [1.0]}})
    params["approx"]["gd"].update(checkpoints=[2, 5], max_iterations={})

    summary = run_stage("prepare", prepare.run, params, root)["mine"]
    assert summary["train_sentences"] == 48 and summary["dev_sentences"] == 12 and summary["test_sentences"] == 12
    try:
        trained = run_stage("train", train.run, params, root, task="mine")
        energies = run_stage("train_energy", train_energy.run, params, root, task="mine")
        run_stage("infnets", infnets.run, params, root, task="mine")
        m = run_stage("approx", approx.run, params, root, task="mine")["mine"]
    finally:
        ray.shutdown()
    assert (root / "models/tagger/mine/model.pt").is_file() and "mine" in json.dumps(trained)
    assert (root / "models/energy/mine/blstm_crf_plus/model.pt").is_file() and energies
    for energy in ("blstm_crf", "blstm_crf_plus"):                    # the plug-in, under both energies
        row = m[f"{energy}.{METHOD}"]
        assert row["search_error"] >= -1e-5                           # nothing beats exact Viterbi
        assert row["energy_pred"] >= m[f"{energy}.viterbi"]["energy_pred"] - 1e-5
    run_stage("report", report.run, params, root)
    md = (root / "reports/tu_gimpel/README.md").read_text()
    assert f"| mine | blstm_crf_plus | {METHOD} |" in md


def test_a_bad_line_in_a_user_corpus_fails_prepare_naming_the_file_and_line(tiny_root):
    root, params = tiny_root
    files = _write_corpus(root / "data" / "user" / "mine")
    lines = files["dev"].read_text().splitlines()
    lines[4] = "paris\tB-LOC\textra"                                 # a 3-column line in a 2-column file
    files["dev"].write_text("\n".join(lines) + "\n")
    _declare(params, files, root)
    with pytest.raises(FormatError, match=r"data/user/mine/dev\.conll:5\b"):
        run_stage("prepare", prepare.run, params, root)
    assert not (root / "data/prepared/mine").exists()


def test_editing_a_plugin_module_makes_dvc_status_report_the_stages_that_build_plugins(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(clone)], check=True)
    dvc = [sys.executable, "-m", "dvc", "status", "--json"]

    def mentioning_plugins() -> set[str]:
        out = subprocess.run(dvc, cwd=clone, check=True, capture_output=True, text=True).stdout
        # the root pipeline's stages (a scale's own pipeline, study/dvc.yaml, lists the same plug-in folder
        # as ../plugins, and its stages not yet run report every dep)
        return {name.split("@")[0] for name, changes in json.loads(out).items()
                if ":" not in name
                and any("plugins" in (c.get("changed deps") or {}) for c in changes if isinstance(c, dict))}

    assert mentioning_plugins() == set()                              # the committed lock records plugins/
    shutil.copy(PLUGIN, clone / "plugins" / "my_methods.py")
    assert mentioning_plugins() == PLUGIN_STAGES
