"""DESIGN.md layering, on the real tree and on planted violations (``flows.dvc_deps.layering_violations``).

Inside components imports go down the floors ``data, structures -> models -> energies -> inference
-> training`` (bench on top; metrics, tracking and reports at the side, reports importing no
registry), no components package imports another that imports it back, and no function-level import
in components dodges a cycle.
"""
from __future__ import annotations

import pytest

from flows import dvc_deps as D
from tests.test_dvc_deps import _tree


CLEAN = {
    "components/__init__.py": "",
    "components/config.py": "",
    "components/models/__init__.py": "",
    "components/models/net.py": "import components.config\n",
    "components/inference/__init__.py": "",
    "components/inference/search.py": "from components.models.net import x\n",
    "components/training/__init__.py": "",
    "components/training/fit.py": "from components.inference.search import y\n",
    "components/reports/__init__.py": "",
    "components/reports/paper.py": "from components.io import atomic_path\n",
    "flows/__init__.py": "",
    "flows/stages/__init__.py": "",
    "flows/stages/common.py": "import ray\n",
    "flows/stages/one.py": "from flows.stages.common import x\nimport components.training.fit\n",
}


def test_a_clean_tree_has_no_violation(tmp_path):
    root = _tree(tmp_path, CLEAN)
    assert D.layering_violations(root) == [] and D.package_cycles(root) == []


@pytest.mark.parametrize("plant, expect", [
    ({"components/models/net.py": "from components.inference.search import y\n"},
     "components/models/net.py:1: imports components.inference.search: back-arrow: models (floor 1) imports inference"),
    ({"components/inference/search.py": "def f():\n    from components.training.fit import z\n"},
     "components/inference/search.py:2: imports components.training.fit: a function-level import in components"),
    ({"components/reports/paper.py": "from components.training.registry import OBJECTIVES\n"},
     "components/reports/paper.py:1: imports components.training.registry: reports is at the side"),
    ({"flows/stages/two.py": "from flows.stages import one\n"},
     "flows/stages/two.py:1: imports flows.stages.one: a stage module imports another stage"),
    ({"components/models/net.py": "import mlflow\n"}, "components/models/net.py:1: imports mlflow: only components/tracking"),
    ({"components/models/net.py": "import ray.tune\n"}, "components/models/net.py:1: imports ray.tune: only flows/ imports ray"),
    ({"components/models/net.py": "from flows import stages\n"}, "components/models/net.py:1: imports flows: components never"),
])
def test_a_planted_violation_is_caught(tmp_path, plant, expect):
    root = _tree(tmp_path, {**CLEAN, **plant})
    v = D.layering_violations(root)
    assert any(x.startswith(expect) for x in v), v


def test_a_planted_package_cycle_is_caught(tmp_path):
    root = _tree(tmp_path, {**CLEAN, "components/models/net.py": "from components.training import fit\n"})
    assert ("models", "training") in D.package_cycles(root)


def test_the_project_keeps_its_layering():
    v = D.layering_violations()
    assert not v, "\n".join(v)


def test_no_components_package_imports_one_that_imports_it_back():
    assert D.package_cycles() == []
