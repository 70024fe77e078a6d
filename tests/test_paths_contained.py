"""Path containment (issue 30, item 6): no params value makes a stage write outside the repository.

``components.config.check_contained`` refuses, before any work, a path key that resolves outside the
repository root (``..``, an absolute path, a symbolic link inside the repository that points out)
unless it lies under a folder of ``base.external_paths``, and a task name that is not a plain name
(``../../../x`` would be a folder ``data/prepared/../../../x``). The repository root here is
``<tmp>/repo``; ``<tmp>/outside`` is its sibling, which must stay empty.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from components.config import (BaseConfig, ConfigError, check_contained, contained_path, load_params, resolve_scale,
                               set_dotted)
from components.tracking import NullTracker
from flows.stages import prepare
from flows.stages.common import StageContext
from flows.studies import apply_study_tasks

REPO = Path(__file__).resolve().parents[1]
WSJ = "The/DT cat/NN sleeps/VBZ ./.\nA/DT dog/NN runs/VBZ ./.\n" * 10


@pytest.fixture
def dirs(tmp_path):
    root, outside = tmp_path / "repo", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def nothing_in(folder: Path) -> bool:
    return not any(folder.rglob("*"))


def refused(params: dict, root: Path, key: str, *words: str) -> str:
    with pytest.raises(ConfigError) as e:
        check_contained(params, root)
    msg = str(e.value)
    assert msg.startswith(f"{key}:"), msg
    for w in words:
        assert w in msg, msg
    return msg


# --------------------------------------------------------------------------------------------
# path keys
# --------------------------------------------------------------------------------------------

def test_a_relative_out_dir_that_climbs_out_is_refused(dirs):
    root, outside = dirs
    msg = refused({"report": {"out_dir": "../outside/x"}}, root, "report.out_dir",
                  "'../outside/x'", str(outside / "x"), "base.external_paths")
    assert "outside the repository" in msg
    refused({"report": {"out_dir": "../../x"}}, root, "report.out_dir")
    assert nothing_in(outside)


def test_an_absolute_out_dir_outside_is_refused_inside_is_fine(dirs):
    root, outside = dirs
    refused({"report": {"out_dir": str(outside / "x")}}, root, "report.out_dir", str(outside / "x"))
    refused({"report": {"out_dir": "/tmp/x"}}, root, "report.out_dir", "/tmp/x")
    check_contained({"report": {"out_dir": str(root / "reports" / "x")}}, root)      # absolute, but inside
    check_contained({"report": {"out_dir": "reports/../reports/x"}}, root)


def test_a_symlink_inside_the_repository_pointing_out_is_refused(dirs):
    root, outside = dirs
    (root / "reports").mkdir()
    (root / "reports" / "link").symlink_to(outside, target_is_directory=True)
    refused({"report": {"out_dir": "reports/link/tu_gimpel"}}, root, "report.out_dir",
            "through a symbolic link", str(outside / "tu_gimpel"))
    refused({"train": {"models_dir": "reports/link"}}, root, "train.models_dir")


@pytest.mark.parametrize("key", ["base.prepared_dir", "base.raw_dir", "search_aware.models_dir", "report_goyal_2019.out_dir",
                                 "bench.report", "bench.ray.dir", "mcmc.traces", "cmlm.corpus", "approx.energy_dir",
                                 "report.approx_metrics", "headline.out_dir", "distil.out_dir"])
def test_every_kind_of_path_key_is_checked(dirs, key):
    root, _ = dirs
    refused(set_dotted({}, key, "../outside/y"), root, key)


def test_a_path_list_entry_is_named_by_its_index(dirs):
    root, _ = dirs
    refused({"x": {"out_paths": ["ok/a", "../outside/b"]}}, root, "x.out_paths[1]")


def test_an_external_location_is_accepted(dirs):
    root, outside = dirs
    params = {"base": {"external_paths": [str(outside)]}, "report": {"out_dir": str(outside / "reports")},
              "train": {"models_dir": "../outside/models"}}
    check_contained(params, root)
    # relative to the root works too; a sibling of the external folder is still refused
    check_contained({"base": {"external_paths": ["../outside"]}, "report": {"out_dir": "../outside/r"}}, root)
    (outside.parent / "elsewhere").mkdir()
    refused({"base": {"external_paths": [str(outside)]}, "report": {"out_dir": "../elsewhere"}}, root,
            "report.out_dir")


def test_external_paths_entries_must_name_something():
    with pytest.raises(ConfigError, match=r"external_paths\[0\]"):
        BaseConfig(external_paths=("",))


def test_read_only_inputs_may_lie_anywhere(dirs):
    root, outside = dirs
    check_contained({"base": {"plugin_dir": str(outside)},
                     "prepare": {"tasks": {"mine": {"format": "conll", "paths": [str(outside / "c.txt")],
                                                    "split": "random"}}}}, root)
    check_contained({"prepare": {"tasks": {"mine": {"format": "conll", "split": "given", "train": "/data/t.txt",
                                                    "dev": "../d.txt", "test": "/data/e.txt"}}}}, root)


def test_uris(dirs):
    root, outside = dirs
    assert contained_path("sqlite:///mlflow.db", root, "k") == root.resolve() / "mlflow.db"
    with pytest.raises(ConfigError, match=r"^k\.db: 'sqlite:///.*outside/m\.db' resolves to"):
        contained_path(f"sqlite:///{outside}/m.db", root, "k.db")
    assert contained_path(f"sqlite:///{outside}/m.db", root, "k", external=[str(outside)]) == outside / "m.db"
    assert contained_path("https://mlflow.example.org", root, "k") is None          # a server: not a local path
    assert contained_path("", root, "k") is None                                     # unset


# --------------------------------------------------------------------------------------------
# task names
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value, name", [
    ("prepare.tasks", {"../../../x": {"format": "conll"}}, "prepare.tasks"),
    ("search_aware.tasks", ["ner", "../x"], r"search_aware.tasks[1]"),
    ("train.tasks", [".."], "train.tasks[0]"),
    ("studies.tu_gimpel", ["pos", "a/b"], "studies.tu_gimpel[1]"),
    ("search_aware.beam_size", {"../x": 3}, "search_aware.beam_size"),
    ("search_aware.variants", {"..": {"objective": "seq_ce"}}, "search_aware.variants"),
    ("search_aware.variants.ce.tasks", ["."], "search_aware.variants.ce.tasks[0]"),
    ("infnets.energy_archs.blstm_crf_plus", {"/abs": ["cnn"]}, "infnets.energy_archs.blstm_crf_plus"),
])
def test_task_names_must_be_plain(dirs, key, value, name):
    root, _ = dirs
    refused(set_dotted({}, key, value), root, name, "not a plain name")


def test_plain_task_names_pass(dirs):
    root, _ = dirs
    check_contained({"prepare": {"tasks": {"conll2003": {}, "greek_morph_k400": {}, "pos.v2": {}, "ner-de": {}}},
                     "search_aware": {"tasks": ["ner", "greek_morph_k400"], "beam_size": {"ner": 3}}}, root)


# --------------------------------------------------------------------------------------------
# the prepare stage is safe by itself, before anything is written
# --------------------------------------------------------------------------------------------

def run_prepare(root: Path, tasks: dict, **base) -> dict:
    params = {"base": {"tracker": "null", **base},
              "prepare": {"tasks": tasks, "glove": False, "ocr_letters": False, "snakes": False,
                          "cmudict": False, "parallel": False}}
    ctx = StageContext(root=root, base=BaseConfig(tracker="null", **base), tracker=NullTracker(), run_id="",
                       stage="prepare")
    return functools.partial(prepare.run, checksums={})(params, ctx)


@pytest.fixture
def corpus(dirs):
    root, outside = dirs
    f = root / "data" / "user" / "wsj.txt"
    f.parent.mkdir(parents=True)
    f.write_text(WSJ)
    return root, outside, {"format": "word_tag", "paths": ["data/user/wsj.txt"]}


def test_prepare_refuses_a_task_key_that_climbs_out(corpus):
    root, outside, task = corpus
    with pytest.raises(ConfigError, match=r"^prepare.tasks: key '\.\./\.\./\.\./outside' is not a plain name"):
        run_prepare(root, {"../../../outside": task})
    assert nothing_in(outside) and not (root / "data" / "prepared").exists()


def test_prepare_refuses_a_prepared_dir_outside(corpus):
    root, outside, task = corpus
    with pytest.raises(ConfigError, match=r"^base.prepared_dir: '\.\./outside'"):
        run_prepare(root, {"pos": task}, prepared_dir="../outside")
    (root / "data" / "prepared").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"^base.prepared_dir: .*through a symbolic link"):
        run_prepare(root, {"pos": task})
    assert nothing_in(outside)


def test_prepare_writes_to_an_external_prepared_dir_when_allowed(corpus):
    root, outside, task = corpus
    m = run_prepare(root, {"pos": task}, prepared_dir=str(outside / "prepared"), external_paths=(str(outside),))
    assert m["pos"]["train_sentences"] > 0 and (outside / "prepared" / "pos" / "train.parquet").exists()


# --------------------------------------------------------------------------------------------
# the repository's own params pass, at every scale
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", ["default", "study", "paper"])
def test_the_repository_params_pass(scale):
    params = resolve_scale(set_dotted(load_params(REPO / "params.yaml"), "base.scale", scale))
    check_contained(params, REPO)
    check_contained(apply_study_tasks(params), REPO)         # as a stage sees them
