"""params.yaml states the study design and what differs from the defaults (DESIGN.md, convention 4).

Each stage's frozen dataclass holds its defaults, and those are the default scale. A key of a section
below whose deletion leaves what the stage loads unchanged restates a default, and fails here unless
``KEPT`` names it (or a key above it) with the reason it stays. A scale's override fails when it
restates the default-scale value, or when it rewrites a nested config as a whole mapping (write
``optim.epochs: 50``, not the whole ``optim``: only what differs).

A scale may write a nested config as a mapping of only the keys that differ (it reads onto the
default, ``components.config._onto_default``); each of its keys is judged like a dotted leaf.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from components.config import (BaseConfig, from_dict, get_dotted, load_params, load_section, resolve_scale,
                               scale_overrides, set_dotted)
from components.data.translation import TranslationConfig
from components.models.mlm import CMLMConfig
from flows.sections import SECTIONS as SECTION_CLASSES, section_class

ROOT = Path(__file__).resolve().parent.parent
PARAMS = load_params(ROOT / "params.yaml")

SECTIONS: dict[str, type] = {section: section_class(section) for section in SECTION_CLASSES}

# Other stages read part of a section with a plain class, over that class's own defaults (not the
# section config's): bench reads cmlm.model and cmlm.data, mcmc reads cmlm.data. A key there stays
# while deleting it would change what they read.
CROSS_READS: dict[str, list[tuple[str, type]]] = {
    "cmlm": [("data", TranslationConfig), ("model", CMLMConfig)],
}

# Keys kept although they equal their default, and why. A key keeps everything below it.
KEPT = {
    # the seed every seed derives from (DESIGN.md 4), and the run-time switches every stage's DVC
    # params list, so that `dvc exp run -S base.scale=study` (or base.device=cuda) re-runs them
    "base.seed", "base.scale", "base.device", "base.plugin_dir",
    # paths dvc.yaml interpolates (${...}): DVC reads them from params.yaml
    "base.raw_dir", "base.prepared_dir",
    "train.models_dir", "train.plots_dir", "train_energy.models_dir", "train_energy.plots_dir",
    "infnets.energy_dir", "infnets.models_dir", "infnets.plots_dir", "approx.energy_dir", "approx.infnet_dir",
    "translator.models_dir", "distil.out_dir", "report.approx_metrics", "report.approx_stats", "report.out_dir", "headline.out_dir", "screen.stats_dir",
    "report_shevchenko_osokin.out_dir", "report_goyal_2018.out_dir", "report_stand_in_screen.out_dir",
    "report_goyal_2019.out_dir", "report_goyal_mlm.out_dir", "bench.report", "bench.oracle.task", "bench.oracle.energy",
    "bench.oracle.energy_dir", "bench.beam.task", "mlm_exact.cell.phoneme_dir",
    # task lists: dvc.yaml's foreach (one stage per task); the task catalogue prepare reads
    "studies.tu_gimpel", "prepare.tasks",
    # study design: the corpora, the energies, objectives, architectures and methods compared, and
    # the grids they are compared over (registry names here also select a stage's code deps)
    "fetch.corpora", "screen.tasks",
    "train_energy.energies", "train_energy.objective",
    "infnets.energies", "infnets.archs", "infnets.modes", "infnets.energy_archs",
    "approx.energy", "approx.table1_energy", "approx.archs", "approx.modes", "approx.arch", "approx.gd.lrs",
    "approx.gd.checkpoints", "approx.gd_init_stds", "approx.methods", "approx.tuned",
    "approx.speed_batch_sizes", "approx.speed_methods",
    "bench.kernels.labels", "bench.kernels.baselines", "bench.beam.train_ks",
    "mlm_exact.sources", "mlm_exact.train_sizes", "mlm_exact.objectives", "mlm_exact.seeds",
    "mlm_exact.phonemes.objectives", "mlm_exact.projection.sources", "mlm_exact.projection.train_sizes",
    "mlm_exact.projection.objectives",
    "mcmc.schemes", "mcmc.groups",
    "search_aware.models_dir", "search_aware.plots_dir", "normalisation.models_dir", "normalisation.plots_dir",
    "search_aware.tasks", "search_aware.variants", "scaling.tune.space",
}


def _swept() -> set[str]:
    """Keys a sweep space names, at any scale: the sweep checks them against params.yaml
    (``check_sweep_space``), so they stay."""
    out: set[str] = set()
    for scale in ["default", *(PARAMS.get("scales") or {})]:
        params = resolve_scale(set_dotted(PARAMS, "base.scale", scale))
        for section in SECTIONS:
            space = ((params.get(section) or {}).get("sweep") or {}).get("space") or {}
            out |= set(space)
    return out


SWEPT = _swept()


def _views(section: str) -> Callable[[dict[str, Any]], list[Any]]:
    """What the stages read of ``section`` in ``params``: the section's config, and the parts other
    stages read with a plain class (an error counts as a value: a key they need is not a default)."""
    def read(params: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for load in [lambda: load_section(SECTIONS[section], section, params)] + [
                (lambda k=k, c=c: from_dict(c, (params.get(section) or {})[k], where=f"{section}.{k}"))
                for k, c in CROSS_READS.get(section, [])]:
            try:
                out.append(load())
            except Exception as e:              # noqa: BLE001 - a missing or invalid key is a difference
                out.append(f"{type(e).__name__}: {e}")
        return out
    return read


def _get(params: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        params = params[part]
    return params


def _without(params: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``params`` less the key at ``path`` (a tuple: keys of a sweep space hold dots)."""
    out = copy.deepcopy(params)
    del _get(out, path[:-1])[path[-1]]
    return out


def _kept(key: str) -> bool:
    return key in SWEPT or any(key == k or key.startswith(k + ".") for k in KEPT)


def restated(section: str, params: dict[str, Any] = PARAMS) -> list[str]:
    """Keys of ``section`` (top-down) whose deletion changes nothing any stage reads."""
    read = _views(section)
    want = read(params)
    out: list[str] = []
    todo = [(section, k) for k in params[section]]
    while todo:
        path = todo.pop(0)
        key = ".".join(path)
        if _kept(key):
            continue
        value = _get(params, path)
        if any(k.startswith(key + ".") for k in KEPT | SWEPT):
            todo += [(*path, k) for k in value]     # a kept key below: judge the others one by one
        elif read(_without(params, path)) == want:
            out.append(key)
        elif isinstance(value, dict):               # needed as a whole: some key below may not be
            todo += [(*path, k) for k in value]
    return out


@pytest.mark.parametrize("section", [s for s in SECTIONS if s in PARAMS])
def test_no_section_restates_a_default(section):
    bad = restated(section)
    assert not bad, (f"params.yaml restates the dataclass defaults of {bad}: delete them (and from dvc.yaml's "
                     f"params lists), or name them in KEPT with the reason they stay")


def _config_at(params: dict[str, Any], section: str, key: str) -> Any:
    """The part of the loaded config that the dotted ``key`` (below ``section``) sets."""
    node: Any = load_section(SECTIONS[section], section, params)
    for part in key.split(".")[1:]:
        node = getattr(node, part) if dataclasses.is_dataclass(node) else node[part]
    return node


def scale_restated(scale: str, params: dict[str, Any] = PARAMS) -> list[str]:
    """Overrides of ``scales.<scale>`` (of the sections above) that restate the default scale."""
    default = set_dotted(params, "base.scale", "default")
    read = {s: _views(s) for s in SECTIONS}
    bad = []
    todo = list(scale_overrides(params["scales"][scale], f"scales.{scale}"))
    while todo:
        key, value = todo.pop(0)
        section = key.split(".")[0]
        if section not in SECTIONS:
            continue
        if isinstance(value, dict) and dataclasses.is_dataclass(_config_at(default, section, key)):
            todo += [(f"{key}.{k}", v) for k, v in value.items()]     # a partial mapping: each key on its own
        elif read[section](set_dotted(default, key, value)) == read[section](default):
            bad.append(f"{key} (the default scale's value)")
    return bad


@pytest.mark.parametrize("scale", [s for s in (PARAMS.get("scales") or {})])
def test_scale_overrides_state_only_what_differs(scale):
    bad = scale_restated(scale, PARAMS)
    assert not bad, f"scales.{scale} restates: {bad}"


def test_kept_keys_exist():
    """An entry of KEPT that params.yaml no longer has is stale."""
    missing = []
    for key in sorted(KEPT):
        try:
            get_dotted(PARAMS, key)
        except Exception:                       # noqa: BLE001
            missing.append(key)
    assert not missing, f"KEPT names keys params.yaml does not have: {missing}"


def test_every_dvc_interpolation_is_a_params_key_and_kept():
    """A ``${section.key}`` in dvc.yaml must be in params.yaml (DVC reads it there), so KEPT names it."""
    def strings(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [x for k, v in node.items() for x in strings(k) + strings(v)]
        if isinstance(node, list):
            return [x for v in node for x in strings(v)]
        return [node] if isinstance(node, str) else []

    found = strings(yaml.safe_load((ROOT / "dvc.yaml").read_text()))
    keys = {k for text in found for k in re.findall(r"\$\{([^}]+)\}", text) if k.split(".")[0] != "item"}
    assert keys, "dvc.yaml interpolates no params"
    for key in sorted(keys):
        get_dotted(PARAMS, key)                 # raises when params.yaml lacks it
        assert key.split(".")[0] not in SECTIONS or _kept(key), f"dvc.yaml interpolates {key}: name it in KEPT"


def test_the_check_catches_a_restated_default():
    """The check itself: a restated default is caught, at any depth; a kept or a differing key is not."""
    assert "approx.batch_size" in restated("approx", set_dotted(PARAMS, "approx.batch_size", 32))
    assert "train.optim.grad_clip" in restated("train", set_dotted(PARAMS, "train.optim.grad_clip", 5.0))
    assert "bench.timing" in restated("bench", set_dotted(PARAMS, "bench.timing", {"max_seconds": 15.0}))
    assert not restated("bench", set_dotted(PARAMS, "bench.timing", {"max_seconds": 16.0}))
    # cmlm.data is also read by bench and mcmc over TranslationConfig's defaults
    assert restated("cmlm", set_dotted(PARAMS, "cmlm.data.len_b", 5)) == ["cmlm.data.len_b"]
    assert not restated("cmlm")
    assert "approx.gd.momentum" in restated("approx", set_dotted(PARAMS, "approx.gd.momentum", 0.9))
    # a scale's override of the default scale's value is caught, as a dotted leaf or inside a mapping
    study = PARAMS["scales"]["study"]
    for block, caught in [({"optim.epochs": 25}, "train.optim.epochs (the default scale's value)"),
                          ({"optim": {"epochs": 40, "patience": 4}}, "train.optim.patience (the default scale's value)")]:
        params = set_dotted(PARAMS, "scales.study.train", {**study["train"], **block})
        assert any(b.startswith(caught) for b in scale_restated("study", params)), caught
    ok = set_dotted(PARAMS, "scales.study.train", {**study["train"], "optim": {"epochs": 40}})
    assert not scale_restated("study", ok)            # a mapping of only what differs
    assert not scale_restated("study")
