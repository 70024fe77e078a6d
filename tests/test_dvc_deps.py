"""dvc.yaml lists what each stage imports, and the code keeps DESIGN.md's layering.

The closure is static (``flows/dvc_deps.py``: an ``ast`` walk over every import, lazy ones
too, with each package's ``__init__``, plus the modules of the registry entries a stage builds).
When a test here fails after code moved, regenerate the code deps with ``python -m flows.dvc_deps
--write`` and review the diff (``python -m flows.dvc_deps <stage>`` prints one stage's closure, with
the import chain of each missing file). The layering rules are tested in ``tests/test_layering.py``.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.config import ConfigError, get_dotted
from flows import dvc_deps as D

STAGES = D.load_stages()
CODE_STAGES = sorted(n for n, st in STAGES.items() if D.stage_module(st) is not None)
PARAMS = yaml.safe_load((D.ROOT / "params.yaml").read_text())


def test_dvc_yaml_has_code_stages():
    assert "prepare" in CODE_STAGES and "train" in CODE_STAGES


@pytest.mark.parametrize("stage", CODE_STAGES)
def test_stage_deps_cover_every_imported_file(stage):
    missing = D.missing_deps(STAGES[stage])
    assert not missing, (
        f"dvc.yaml stage {stage!r}: deps miss {len(missing)} imported file(s):\n"
        + "\n".join(f"  {f}   (via {' -> '.join(chain)})" for f, chain in missing.items())
        + "\nregenerate with `python -m flows.dvc_deps --write`")


@pytest.mark.parametrize("stage", CODE_STAGES)
def test_stage_code_deps_are_all_imported(stage):
    stale = D.stale_deps(STAGES[stage])
    assert not stale, (f"dvc.yaml stage {stage!r}: code deps {stale} are imported by nothing the stage runs; "
                       f"regenerate with `python -m flows.dvc_deps --write`")


@pytest.mark.parametrize("stage", CODE_STAGES)
def test_stage_params_match_the_sections_it_loads(stage):
    """Each section the stage module loads is listed (whole or some of its keys), and no other."""
    read = D.sections_read(D.module_file(D.stage_module(STAGES[stage])))
    listed = {k.split(".")[0] for k in D.param_keys(STAGES[stage])} - {"base", "studies"}
    assert read <= listed, f"dvc.yaml stage {stage!r}: params list nothing of the sections {sorted(read - listed)} it loads"
    assert listed <= read, f"dvc.yaml stage {stage!r}: params list sections {sorted(listed - read)} it never loads"


@pytest.mark.parametrize("stage", CODE_STAGES)
def test_stage_params_exist_and_include_its_section(stage):
    keys = D.param_keys(STAGES[stage])
    for key in keys:
        try:
            get_dotted(PARAMS, key)
        except ConfigError:
            pytest.fail(f"dvc.yaml stage {stage!r}: params key {key!r} is not in params.yaml")
    if stage in PARAMS:
        assert any(k == stage or k.startswith(stage + ".") for k in keys), \
            f"dvc.yaml stage {stage!r}: params list nothing of its own section {stage!r}"
    if D.scale_sections(STAGES[stage]):
        assert "base.scale" in keys, f"dvc.yaml stage {stage!r}: lists its scale's file but not base.scale"


SCALES = D.load_scales()


def test_every_scale_file_has_a_block_for_every_section_a_stage_lists():
    """DVC fails a stage whose listed key is missing from the params file, whatever the scale."""
    listed = {sec for st in STAGES.values() for sec in D.scale_sections(st)}
    assert set(SCALES) >= {"default", "study", "paper"}
    for scale, blocks in SCALES.items():
        assert listed <= set(blocks), f"scales/{scale}.yaml lacks the blocks {sorted(listed - set(blocks))} (write `{{}}`)"
    assert not any(SCALES["default"].values()), "scales/default.yaml overrides something: the default is params.yaml"


@pytest.mark.parametrize("stage", CODE_STAGES)
def test_stage_params_list_exactly_the_scale_blocks_of_its_sections(stage):
    """The scale file's block of a section the stage reads is listed (an edit of it re-runs the
    stage; `dvc params diff` shows the values the scale uses), and no other block (an edit of
    another study's block leaves the stage alone)."""
    keys = D.param_keys(STAGES[stage])
    if "base.scale" not in keys:
        pytest.skip(f"stage {stage!r} reads no scale-dependent setting")
    sections = {k.split(".")[0] for k in keys} - {"base", "studies"}
    want = {sec for blocks in SCALES.values() for sec in sections if (blocks or {}).get(sec)}
    listed = set(D.scale_sections(STAGES[stage]))
    assert listed == want, (f"dvc.yaml stage {stage!r}: lists {sorted(listed)} of scales/${{base.scale}}.yaml, "
                            f"expected {sorted(want)} (the sections it reads that some scale overrides)")


# --------------------------------------------------------------------------------------------
# the closure computation itself, on a small fake project
# --------------------------------------------------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


FAKE = {
    "components/__init__.py": "",
    "components/a/__init__.py": "from components.a.reg import R\n",
    "components/a/reg.py": "import numpy\nfrom ..util import helper\n",
    "components/a/lazy.py": "def f():\n    from . import late\n",
    "components/a/late.py": "",
    "components/a/unused.py": "",
    "components/a/table.json": "{}",
    "components/a/reads.py": "from pathlib import Path\nP = Path(__file__).with_name('table.json')\n",
    "components/util.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import components.a.unused\n",
    "flows/__init__.py": "",
    "flows/stages/__init__.py": "",
    "flows/stages/common.py": "import components.a.reads\n",
    "flows/stages/one.py": "from flows.stages.common import x\ndef run():\n    from components.a import lazy\n",
    "flows/stages/two.py": "from flows.stages import one\nimport mlflow\nimport ray\n",
    "components/b.py": "from flows import stages\nimport ray.tune\n",
    "dvc.yaml": "stages:\n  one:\n    cmd: python -m flows.stages.one\n    deps:\n      - data/x\n"
                "      - components/a\n      - flows/stages/one.py\n      - components/b.py\n"
                "    outs:\n      - out\n  other:\n    cmd: echo hi\n",
}


def test_closure_follows_lazy_relative_and_package_imports(tmp_path):
    root = _tree(tmp_path, FAKE)
    got = {D._rel(f, root) for f in D.closure([root / "flows/stages/one.py"], root)}
    assert got == {"flows/stages/one.py", "flows/stages/common.py",            # empty __init__ files run nothing
                   "components/a/__init__.py", "components/a/reg.py",
                   "components/util.py", "components/a/lazy.py", "components/a/late.py",
                   "components/a/reads.py", "components/a/table.json"}    # not unused.py (TYPE_CHECKING only)


def test_missing_stale_and_suggested_deps(tmp_path):
    root = _tree(tmp_path, FAKE)
    st = D.load_stages(root)
    assert D.stage_module(st["other"]) is None and D.stage_closure(st["other"], root) == {}
    one = st["one"]
    assert set(D.missing_deps(one, root)) == {"flows/stages/common.py", "components/util.py"}
    assert D.missing_deps(one, root)["components/util.py"] == ("flows.stages.one", "components.a",
                                                               "components.a.reg", "components.util")
    assert D.stale_deps(one, root) == ["components/b.py"]
    # components/a has an unused module, so its files are listed one by one
    assert D.suggested_deps(one, root) == sorted([
        "components/a/__init__.py", "components/a/lazy.py", "components/a/late.py",
        "components/a/reads.py", "components/a/reg.py", "components/a/table.json", "components/util.py",
        "flows/stages/common.py", "flows/stages/one.py"])
    (root / "components/a/unused.py").unlink()
    assert "components/a" in D.suggested_deps(one, root)
    D.rewrite_dvc_yaml([], root)
    st = D.load_stages(root)
    assert D.dep_paths(st["one"])[0] == "data/x" and not D.missing_deps(st["one"], root)
    assert not D.stale_deps(st["one"], root)
    assert (root / "dvc.yaml").read_text().endswith("    outs:\n      - out\n  other:\n    cmd: echo hi\n")


@pytest.mark.parametrize("stage", [s for s in CODE_STAGES if "--task" in STAGES[s]["cmd"]])
def test_per_task_stage_params_list_every_key_of_its_section_but_tasks(stage):
    """A ``foreach`` stage over ``<stage>.tasks`` lists the rest of its section key by key: editing
    the task list adds or drops stages without re-running the others, and every other key still
    re-runs them all (a key missing here would be a change that re-runs nothing)."""
    keys = set(D.param_keys(STAGES[stage]))
    want = {f"{stage}.{k}" for k in PARAMS[stage] if k != "tasks"}
    assert want <= keys and f"{stage}.tasks" not in keys and stage not in keys, \
        f"dvc.yaml stage {stage!r}: params should list {sorted(want - keys)} and not the whole section"


# --------------------------------------------------------------------------------------------
# lazy registries, docstring-only packages and the flow-list writer
# --------------------------------------------------------------------------------------------

REG_TREE = {
    "components/__init__.py": '"""doc only: runs nothing"""\n',
    "components/registry.py": "class Registry:\n    pass\n",
    "components/m/__init__.py": '"""doc only"""\n',
    "components/m/reg.py": ("from components.registry import Registry\nR = Registry('thing')\n"
                            "R.register('a', 'CfgA', 'components.m.impl_a:make', kind='x')\n"
                            "R.register('b', 'CfgB', 'components.m.impl_b:make', kind='y')\n"
                            "R.register('c', 'CfgC', 'components.m.impl_c:make', kind='x')\n"),
    "components/m/impl_a.py": "import components.m.helper\n",
    "components/m/impl_b.py": "",
    "components/m/impl_c.py": "",
    "components/m/helper.py": "",
    "flows/__init__.py": "",
    "flows/stages/__init__.py": "",
    "flows/stages/by_params.py": "from components.m.reg import R\n",
    "flows/stages/by_literal.py": "from components.m.reg import R\nR.build('b')\n",
    "flows/stages/by_meta.py": "from components.m.reg import R\nX = R.names(kind='x')\n",
    "params.yaml": "by_params:\n  methods: {a: {lr: 1}}\n",
    "dvc.yaml": ("stages:\n  by_params:\n    cmd: python -m flows.stages.by_params\n    deps:\n      - data/x\n"
                 "    params:\n      - by_params\n"
                 "  by_literal:\n    cmd: python -m flows.stages.by_literal\n    deps: [flows/stages/by_literal.py]\n"
                 "  by_meta:\n    cmd: python -m flows.stages.by_meta\n    deps: [\"data/${item}\",\n"
                 "           flows/stages/by_meta.py]\n    outs:\n      - out\n"),
}


def _files(stage: str, root: Path) -> set[str]:
    return {D._rel(f, root) for f in D.stage_closure(D.load_stages(root)[stage], root)}


def test_a_stage_depends_on_the_registry_entries_it_builds_and_no_other(tmp_path):
    root = _tree(tmp_path, REG_TREE)
    base = {"components/registry.py", "components/m/reg.py"}       # the empty __init__ files run nothing
    # named in its params: entry a and what a imports
    assert _files("by_params", root) == base | {"flows/stages/by_params.py", "components/m/impl_a.py",
                                                "components/m/helper.py"}
    # named by a literal in its code
    assert _files("by_literal", root) == base | {"flows/stages/by_literal.py", "components/m/impl_b.py"}
    # selected by constant meta
    assert _files("by_meta", root) == base | {"flows/stages/by_meta.py", "components/m/impl_a.py",
                                              "components/m/helper.py", "components/m/impl_c.py"}


def test_docstring_only_packages_are_no_deps_but_packages_with_code_are(tmp_path):
    root = _tree(tmp_path, REG_TREE)
    assert D.runs_nothing(root / "components/__init__.py") and D.runs_nothing(root / "components/m/__init__.py")
    assert D.runs_nothing(root / "flows/__init__.py")                 # empty
    assert not D.runs_nothing(root / "components/m/reg.py")            # a module, not a package
    assert "components/__init__.py" not in _files("by_params", root)


def test_write_gives_flow_lists_that_yaml_reads_back(tmp_path):
    root = _tree(tmp_path, REG_TREE)
    D.rewrite_dvc_yaml([], root)
    text = (root / "dvc.yaml").read_text()
    assert all(len(line) <= D.WIDTH for line in text.splitlines())
    st = D.load_stages(root)
    for name in st:
        assert not D.missing_deps(st[name], root) and not D.stale_deps(st[name], root), name
    assert D.dep_paths(st["by_meta"])[0] == "data/${item}"          # quoted: "{" is a YAML flow indicator
    assert D.dep_paths(st["by_params"])[0] == "data/x"
    assert "    outs:\n      - out\n" in text
    assert D.rewrite_dvc_yaml([], root) == []                         # idempotent


def test_the_real_dvc_yaml_is_short_enough_to_read():
    """The experiment's shape fits a few screens: generated deps are flow lists (issue 25: <= 450 lines;
    470 since issue 30, when every stage came to run its reaper, the study storage it closes trials in
    and the run-facts split: about one more line of deps per stage; 510 since issue 27: the stand-in
    screen stage and every scoring stage's per-sentence statistics, the report kit's inputs; 560 since
    issue 50: every paper's report, and the screen's table, a stage of its own; 570 with each report's
    verdicts.json and forest.png)."""
    assert len((D.ROOT / "dvc.yaml").read_text().splitlines()) <= 570
