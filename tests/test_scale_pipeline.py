"""The study scale's own pipeline (study/dvc.yaml, flows/scale_pipeline.py), the params overlays it
runs with, the folder-rooted paths, and the RUN.md each paper's run writes (flows/run_record.py)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from components.config import (ConfigError, check_contained, load_params, load_params_files, merge_params,
                               project_root, resolve_scale)
from components.reports.run_record import CODE_DEFAULT, RunFacts, Setting, StageTime, render
from components.tracking.base import store_root
from flows import run_record, scale_pipeline
from flows.scale_pipeline import PAPERS, ROOT

STUDY = ROOT / "study"


@pytest.fixture(scope="module")
def study() -> dict:
    return yaml.safe_load((STUDY / "dvc.yaml").read_text())["stages"]


@pytest.fixture(scope="module")
def merged() -> dict:
    return scale_pipeline.merged_params("study")[1]


def test_generated_file_is_current():
    assert (STUDY / "dvc.yaml").read_text() == scale_pipeline.scale_pipeline("study"), \
        "study/dvc.yaml is stale: run python -m flows.scale_pipeline"


def test_each_paper_is_one_target_ending_in_its_report_stage(study):
    from flows.studies import REPORTS, STUDIES
    assert PAPERS == REPORTS and all(stage in STUDIES[paper] for paper, stage in REPORTS.items())
    for paper, final in PAPERS.items():
        assert scale_pipeline.target(paper) == f"study/dvc.yaml:{final}"
        assert final in study
        assert f"flows.run_record --paper {paper}" in study[final]["cmd"]
        assert study[final]["cmd"].startswith(f"python -m flows.stages.{final} --params ../params.yaml --params params.yaml && ")
    with pytest.raises(ConfigError, match="not one of"):
        scale_pipeline.target("tu_gimpel_2018")


def test_chains_stop_at_the_shared_data_stages(merged):
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    chains = scale_pipeline.chains(stages, merged)
    assert chains["goyal_mlm"] == ["translator", "distil", "mlm_exact", "cmlm", "mcmc", "report_goyal_mlm"]
    assert chains["goyal_2019"] == ["translator", "normalisation", "report_goyal_2019"]
    assert chains["tu_gimpel"] == ["train_energy", "infnets", "approx", "report"]
    assert chains["shevchenko_osokin"] == ["scaling", "report_shevchenko_osokin"]
    assert chains["goyal_2018"] == ["search_aware", "report_goyal_2018"]
    for chain in chains.values():
        assert not set(chain) & set(scale_pipeline.SHARED)


def _bodies(study):
    for name, st in study.items():
        yield name, st.get("do", st)


def _path(entry):
    return entry if isinstance(entry, str) else next(iter(entry))


def test_every_path_is_a_study_product_or_the_projects(study):
    """Nothing a study stage writes lies outside study/, and every dep is either the project's
    (../) or a product of a study stage: a study never reads the default's models or metrics."""
    products = [_path(o) for _, b in _bodies(study) for o in (b.get("outs") or []) + (b.get("plots") or [])]
    assert products and not any(p.startswith("../") or p.startswith("/") for p in products)
    assert all(p.split("/")[0] in {"metrics", "models", "plots", "reports", "data"} for p in products)
    # the project's own files: tracked by git, or outputs of the root pipeline's stages (dvc.lock),
    # which a clean checkout has not built yet
    import subprocess
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    root_outs = [o["path"] for st in yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"].values()
                 for o in st.get("outs") or []]
    for name, body in _bodies(study):
        for dep in body["deps"]:
            if dep.startswith("../"):
                d = dep[3:].replace("${item}", "pos")
                assert (any(t == d or t.startswith(d + "/") for t in tracked)
                        or any(d == o or d.startswith(o + "/") for o in root_outs)), (name, dep)
                assert not any(dep[3:].split("/")[0] == d for d in ("metrics", "models", "plots", "reports")), \
                    (name, dep, "a study stage must not read the default's products")
            else:
                assert any(dep == p or dep.startswith(p + "/") or p.startswith(dep + "/") for p in products), (name, dep)


def test_params_entries_name_keys_their_files_hold(study):
    """DVC reads each listed key from the file it is listed under: the overlay's own keys from
    study/params.yaml, the rest from ../params.yaml, and whole sections of ../scales/study.yaml."""
    overlay = load_params(STUDY / "params.yaml")
    project = yaml.safe_load((ROOT / "params.yaml").read_text())
    scale = yaml.safe_load((ROOT / "scales" / "study.yaml").read_text())
    from components.config import get_dotted
    for name, body in _bodies(study):
        for entry in body.get("params") or []:
            (f, keys), = entry.items()
            source = {"params.yaml": overlay, "../params.yaml": project, "../scales/study.yaml": scale}[f]
            for k in keys:
                get_dotted(source, k)          # raises for a key the file does not hold


def test_overlay_runs_every_stage_at_the_study_scale(merged):
    assert merged["base"]["scale"] == "study"
    assert merged["base"]["prepared_dir"] == "../data/prepared"
    assert merged["studies"]["tu_gimpel"] == ["pos", "ner", "greek_morph_k400"]
    # the study's own settings (scales/study.yaml) are applied on top
    assert merged["search_aware"]["seeds"] == [0, 1, 2]
    assert merged["normalisation"]["seeds"] == [0, 1, 2]
    assert merged["scaling"]["seeds"] == [0, 1, 2]


def test_load_params_files_merges_overlays(tmp_path):
    (tmp_path / "scales").mkdir()
    (tmp_path / "params.yaml").write_text("base: {seed: 1, scale: default}\ntrain: {optim: {lr: 0.1, epochs: 3}, tasks: [a, b]}\n")
    (tmp_path / "scales" / "study.yaml").write_text("train: {optim.epochs: 30}\n")
    (tmp_path / "over").mkdir()
    (tmp_path / "over" / "params.yaml").write_text("base: {scale: study}\ntrain: {optim: {lr: 0.5}, tasks: [c]}\n")
    p = load_params_files([tmp_path / "params.yaml", tmp_path / "over" / "params.yaml"])
    assert p["base"] == {"seed": 1, "scale": "study"}
    assert p["train"]["optim"] == {"lr": 0.5, "epochs": 3}
    assert p["train"]["tasks"] == ["c"]                        # a list is replaced, not merged
    assert resolve_scale(p)["train"]["optim"]["epochs"] == 30   # the project's scale files still apply
    assert merge_params({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
    with pytest.raises(ConfigError):
        load_params_files([])
    with pytest.raises(ConfigError, match="not found"):
        load_params_files([tmp_path / "params.yaml", tmp_path / "nope.yaml"])


def test_project_root_and_store_root(tmp_path):
    (tmp_path / "repo" / ".dvc").mkdir(parents=True)
    (tmp_path / "repo" / "study").mkdir()
    assert project_root(tmp_path / "repo" / "study") == (tmp_path / "repo").resolve()
    assert project_root(tmp_path / "repo") == (tmp_path / "repo").resolve()
    assert project_root(tmp_path) == tmp_path.resolve()                       # no project: itself
    # a study stage's runs go to the project's one store
    assert store_root(tmp_path / "repo" / "study") == (tmp_path / "repo").resolve()
    # a DVC temporary workspace's study folder still logs to the main repository
    tmp_ws = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "abc"
    (tmp_ws / ".dvc").mkdir(parents=True)
    (tmp_ws / "study").mkdir()
    assert store_root(tmp_ws / "study") == (tmp_path / "repo").resolve()


def test_check_contained_with_a_scale_folder(tmp_path):
    repo = tmp_path / "repo"
    (repo / "study").mkdir(parents=True)
    ok = {"base": {"prepared_dir": "../data/prepared", "raw_dir": "../data/raw"}, "train": {"models_dir": "models/x"}}
    check_contained(ok, repo / "study", repo)
    with pytest.raises(ConfigError, match="outside the repository"):
        check_contained(ok, repo / "study")                     # the folder alone: ../data is outside it
    bad = {"base": {"prepared_dir": "../../elsewhere"}}
    with pytest.raises(ConfigError, match=r"base\.prepared_dir: '\.\./\.\./elsewhere' resolves to .*elsewhere"):
        check_contained(bad, repo / "study", repo)


def _facts(**kw) -> RunFacts:
    base = dict(paper="goyal_2018", scale="study", command="make study PAPER=goyal_2018", commit="abc123",
                dirty=(), date="2026-11-27 20:00", machine={"CPU cores available": 2}, device="cpu (no GPU)",
                stages=(StageTime("search_aware", 125.0, "2026-11-27 19:59"), StageTime("screen", None)),
                settings=(Setting("search_aware.seeds", [0, 1, 2], CODE_DEFAULT, "scales/study.yaml"),
                          Setting("base.scale", "study", "default", "study/params.yaml")),
                findings={"reproduced": 3, "not_reproduced": 1, "inconclusive": 6, "not_testable": 1})
    base.update(kw)
    return RunFacts(**base)


def test_run_md_renders_every_fact():
    text = render(_facts())
    assert "make study PAPER=goyal_2018" in text and "`abc123`" in text and "as committed" in text
    assert "3 reproduced / 1 not reproduced / 6 inconclusive / 1 not testable (11 claims" in text
    assert "| search_aware | 2.1 min | 2026-11-27 19:59 |" in text
    assert "| screen | not run here" in text and "(the stages run here)" in text
    assert "| `search_aware.seeds` | [0, 1, 2] | (its default in code) | `scales/study.yaml` |" in text
    assert "| `base.scale` | study | default | `study/params.yaml` |" in text
    dirty = render(_facts(dirty=("flows/x.py",)))
    assert "Uncommitted changes" in dirty and "`flows/x.py`" in dirty and "as committed" not in dirty


def test_run_record_reads_each_stages_timings(tmp_path, merged):
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    (tmp_path / "metrics" / "timings" / "approx").mkdir(parents=True)
    (tmp_path / "metrics" / "timings" / "approx" / "pos.json").write_text(json.dumps({"stage_seconds": 61.5}))
    (tmp_path / "metrics" / "timings" / "report.json").write_text(json.dumps({"stage_seconds": 2.0}))
    times = run_record.stage_times(tmp_path, stages, ["approx", "report"], merged)
    assert [t.name for t in times] == ["approx@pos", "approx@ner", "approx@greek_morph_k400", "report"]
    assert [t.seconds for t in times] == [61.5, None, None, 2.0]


def test_run_record_lists_the_overlay_and_the_scales_overrides(merged):
    files = [ROOT / "params.yaml", STUDY / "params.yaml"]
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    raw = load_params(files[0])
    got = {s.key: s for s in run_record.settings(files, raw, stages, ["translator", "normalisation"], "study", ROOT)}
    assert got["base.scale"].value == "study" and got["base.scale"].default == "default"
    assert got["base.scale"].source == "study/params.yaml"
    assert got["normalisation.seeds"].value == [0, 1, 2] and got["normalisation.seeds"].source == "scales/study.yaml"
    assert "translator.train.optim" in got              # the translator's section: normalisation reads it too
    assert not any(k.startswith("search_aware.") for k in got)   # a section no stage of the chain reads
    # a key params.yaml does not set shows its section dataclass's default, not a placeholder
    assert got["normalisation.seeds"].default == [0]
    assert got["translator.train.optim"].default not in (CODE_DEFAULT, None)


def test_code_default_reads_the_section_dataclass():
    from flows.sections import SECTIONS, code_default, section_class
    assert all(dataclasses.is_dataclass(section_class(s)) for s in SECTIONS)
    assert code_default("normalisation.seeds") == [0]
    assert code_default("scaling.ocr.sigmoid") == []          # the dataclass's (); params.yaml sets its own
    with pytest.raises(KeyError):
        code_default("scaling.no_such_key")
    with pytest.raises(KeyError):
        code_default("no_such_section.key")



def test_a_report_or_kit_edit_reruns_report_stages_only(study):
    """Only the report stages (and the headline, root only) depend on the report kit or a paper's
    report module: a report or kit edit never re-runs a compute stage, at either scale
    (``components/reports/curves.py``, the learning-curve figures, is the training loops' too)."""
    from flows.studies import REPORTS
    reports = set(REPORTS.values()) | {"report_stand_in_screen", "headline"}
    root = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for prefix, stages in (("", root), ("../", study)):
        for name, body in _bodies(stages):
            uses = {d[len(prefix):] for d in body.get("deps") or []
                    if isinstance(d, str) and d.startswith(f"{prefix}components/reports/")}
            assert name in reports or uses <= {"components/reports/curves.py"}, (prefix, name, uses)
        assert set(REPORTS.values()) <= set(stages)
