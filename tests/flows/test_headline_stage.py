"""The ``headline`` stage on the committed detailed metrics, copied into a temporary project root:
one small file per study whose numbers are the detailed metrics' own; a missing input is an error
naming it, unless none of its study's stages is in the pipeline."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from components.config import ConfigError, load_params
from components.reports import headline as H
from components.reports import kit
from components.tracking import NullTracker
from flows.stages import headline
from flows.stages.common import run_stage, stage_params
from flows.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]


def _params() -> dict:
    params = load_params(ROOT / "params.yaml")
    params.setdefault("headline", {})
    return params


def _tasks(params: dict) -> tuple[str, ...]:
    return tuple(stage_params(params)["approx"]["tasks"])


@pytest.fixture
def root(tmp_path):
    """A project root holding a copy of every detailed metrics file a headline reads."""
    for study in H.HEADLINES:
        for p in H.input_paths(study, _tasks(_params())):
            (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / p, tmp_path / p)
    return tmp_path


def _run(root: Path, params: dict | None = None) -> tuple[dict, NullTracker]:
    tracker = NullTracker()
    return run_stage("headline", headline.run, params or _params(), root, tracker=tracker), tracker


def _read(root: Path, study: str) -> dict:
    return json.loads((root / "metrics/headline" / f"{study}.json").read_text())


def test_one_small_numeric_file_per_study_with_the_detailed_metrics_numbers(root):
    metrics, tracker = _run(root)
    tasks = _tasks(_params())
    assert sorted(p.name for p in (root / "metrics/headline").iterdir()) == sorted(f"{s}.json" for s in H.HEADLINES)
    for study in H.HEADLINES:
        got = _read(root, study)
        assert 0 < len(got) <= 20, study
        assert metrics["keys"][study] == len(got)
        for k, v in got.items():
            assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), (study, k, v)
            assert "second" not in k and "minute" not in k, (study, k)
        # each number is the one at its source in the detailed file (or the documented count)
        data = {p: json.loads((root / p).read_text()) for p in H.input_paths(study, tasks if study == "tu_gimpel" else ())}
        approx = stage_params(_params())["approx"]
        design = {"tasks": tasks, "energy": approx["energy"], "arch": approx["arch"]} if study == "tu_gimpel" else {}
        picks = H.build(study, data, **design)
        assert got == H.values(picks)
        for k, p in picks.items():
            if p.path is not None and k in got:
                assert got[k] == H.lookup(json.loads((root / p.file).read_text()), p.path), (study, k)
    assert tracker.runs[0]["metrics"]["tu_gimpel.tu_gimpel.reproduced"] == _read(root, "tu_gimpel")["tu_gimpel.reproduced"]


def test_spot_checks_against_the_detailed_files(root):
    _run(root)
    load = lambda p: json.loads((root / p).read_text())  # noqa: E731
    tg, approx = _read(root, "tu_gimpel"), load("metrics/approx/pos.json")["pos"]
    assert tg["pos.viterbi_acc"] == approx["blstm_crf_plus.viterbi"]["score"]
    assert tg["pos.gd_oracle_search_error"] == approx["blstm_crf_plus.gd_oracle"]["oracle"]["search_error"]
    assert tg["pos.infnet_search_error"] == approx["blstm_crf_plus.cnn.infnet_search_error"]
    found = load("metrics/report.json")["findings"]
    assert {k[len("tu_gimpel."):]: v for k, v in tg.items() if k.startswith("tu_gimpel.")} == \
        {w.replace(" ", "_"): found[w.replace(" ", "_")] for w in kit.VERDICTS}
    so, res = _read(root, "shevchenko_osokin"), load("metrics/report_shevchenko_osokin.json")["results"]
    assert so["ocr.joint"] == res["ocr/marginal_ce/joint"]["mean"]
    best = max(("online", "offline", "offline_reg"), key=lambda f: res[f"ocr/marginal_ce/{f}"]["dev"])   # on dev
    assert so["ocr.best_scaled"] == res[f"ocr/marginal_ce/{best}"]["mean"]
    g18, sa = _read(root, "goyal_2018"), load("metrics/search_aware.json")["tasks"]["ner"]["variants"]
    assert g18["ner.ce_greedy_f1"] == sa["ce"]["test"]["greedy"]
    assert g18["ner.search_aware_beam_f1"] in {sa[v]["test"]["beam"] for v in ("dl_alpha1", "dl_annealed",
                                                                             "hinge_alpha1", "hinge_annealed")}
    g19 = _read(root, "goyal_2019")
    assert g19["translator.test_bleu"] == load("metrics/translator.json")["test"]["beam"]["bleu"]
    rows = load("metrics/normalisation.json")["translation"]["rows"]
    assert g19["mt.sn.global_bleu"] == rows["self_normalised"]["global"]["test"]
    # every study's verdict counts are its report stage's (one per word of the kit's vocabulary)
    for study, file in (("goyal_2018", "report_goyal_2018"), ("goyal_2019", "report_goyal_2019"),
                        ("goyal_mlm", "report_goyal_mlm"), ("shevchenko_osokin", "report_shevchenko_osokin")):
        counts = load(f"metrics/{file}.json")["findings"]
        assert {k[len(study) + 1:]: v for k, v in _read(root, study).items() if k.startswith(f"{study}.")} == \
            {w.replace(" ", "_"): counts[w.replace(" ", "_")] for w in kit.VERDICTS}, study
    mlm, mcmc = _read(root, "goyal_mlm"), load("metrics/mcmc.json")
    main_raw = next(r for r in mcmc["runs"] if r["name"] == "main/raw")
    assert (mlm["main.mh_raw.e_norm"], mlm["main.mh_raw.bleu_mean"]) == (main_raw["e_norm"], main_raw["bleu"])
    assert mlm["cmlm.test_bleu"] == load("metrics/cmlm.json")["test_bleu_mask_predict"]["bleu"]
    pipe = _read(root, "pipeline")
    assert pipe["cpu.mh_speedup"] == load("metrics/bench.json")["mcmc"]["cpu"]["mh_ratio"]
    assert pipe["prepared_tasks"] == sum(isinstance(v, dict) for v in load("metrics/prepare.json").values())


def test_the_tu_gimpel_tasks_come_from_studies_tu_gimpel(root):
    params = _params()
    params["studies"]["tu_gimpel"] = ["pos"]
    (root / "metrics/approx/ner.json").unlink()              # not read: ner is not in the list
    _run(root, params)
    keys = _read(root, "tu_gimpel")
    assert {k.split(".")[0] for k in keys} == {"pos", "tu_gimpel"}


@pytest.mark.parametrize("missing, stage", [("metrics/mcmc.json", "mcmc"), ("metrics/approx/ner.json", "approx@ner"),
                                            ("metrics/report.json", "report"),
                                            ("metrics/report_goyal_2019.json", "report_goyal_2019")])
def test_a_missing_input_is_an_error_naming_it_and_nothing_is_written(root, missing, stage):
    (root / missing).unlink()
    with pytest.raises(FileNotFoundError, match=missing.replace(".", r"\.") + rf".*`dvc repro {stage}`"):
        _run(root)
    assert not (root / "metrics/headline").exists()


def test_a_study_with_no_stage_in_the_pipeline_gets_no_headline(root):
    stages = [s for study, ss in STUDIES.items() if study != "goyal_mlm" for s in ss]
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {s: {"cmd": f"python -m flows.stages.{s}"} for s in stages}}))
    for p in H.input_paths("goyal_mlm"):
        (root / p).unlink()
    metrics, _ = _run(root)
    assert metrics["skipped"] == ["goyal_mlm"]
    assert not (root / "metrics/headline/goyal_mlm.json").exists()
    assert (root / "metrics/headline/goyal_2019.json").exists()


def test_a_study_still_in_the_pipeline_must_have_its_inputs(root):
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"mcmc": {"cmd": "python -m flows.stages.mcmc"}}}))
    (root / "metrics/distil.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"metrics/distil\.json"):
        _run(root)


def test_unreadable_input_and_bad_config_are_errors_naming_them(root):
    (root / "metrics/report_shevchenko_osokin.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"metrics/report_shevchenko_osokin\.json: not readable as JSON"):
        _run(root)
    params = _params()
    params["headline"] = {"max_keys": 5}
    (root / "metrics/report_shevchenko_osokin.json").write_text(json.dumps({"results": {}}))
    with pytest.raises(ValueError, match=r"headline pipeline: \d+ keys, more than 5"):
        _run(root, params)
    params["headline"] = {"out": "x"}
    with pytest.raises(ConfigError, match="out"):
        _run(root, params)
    assert not (root / "metrics/headline").exists()
