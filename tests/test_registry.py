from dataclasses import dataclass
from pathlib import Path

import pytest

from components.config import ConfigError
from components.registry import NoConfig, Registry


@dataclass(frozen=True)
class _Cfg:
    a: int = 1
    b: float = 2.0


def test_register_build_and_strict_config():
    r = Registry("thing")
    r.register("x", _Cfg, lambda cfg, k=0: (cfg.a, cfg.b, k), kind="toy")

    @r.register("y", NoConfig)
    def make_y(cfg):
        """A y."""
        return "y"

    assert list(r) == ["x", "y"] and len(r) == 2 and r["y"].doc == "A y." and r["x"].meta == {"kind": "toy"}
    assert r.build("x") == (1, 2.0, 0)
    assert r.build("x", {"a": 3}, k=5) == (3, 2.0, 5)
    assert r.build("x", _Cfg(a=4)) == (4, 2.0, 0)
    with pytest.raises(ConfigError, match=r"sec\.x: unknown key\(s\) \['c'\]"):
        r.config("x", {"c": 1}, where="sec.x")
    with pytest.raises(ConfigError, match="expected an integer"):
        r.build("x", {"a": "no"})
    with pytest.raises(ConfigError, match="expected a mapping or a _Cfg"):
        r.config("x", NoConfig())
    with pytest.raises(KeyError, match=r"thing: unknown name 'z'; known: \['x', 'y'\]"):
        r["z"]
    with pytest.raises(ConfigError, match=r"train.objective: unknown thing \['z'\]"):
        r.check(["x", "z"], "train.objective")
    r.check("x", "fine")
    with pytest.raises(ValueError, match="already registered"):
        r.register("x", _Cfg, lambda cfg: None)
    with pytest.raises(TypeError, match="must be a dataclass"):
        r.register("w", dict, lambda cfg: None)


# --------------------------------------------------------------------------------------------
# lazy entries: a module is imported when its entry is built or its config read, not before
# --------------------------------------------------------------------------------------------

def test_a_lazy_entry_imports_its_module_only_when_built(tmp_path, monkeypatch):
    import sys
    (tmp_path / "lazy_entry_mod.py").write_text(
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\nclass Cfg:\n    k: int = 3\n"
        "def make(cfg, x=0):\n    return ('built', cfg.k, x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("lazy_entry_mod", None)
    reg = Registry("thing")
    reg.register("t", "Cfg", "lazy_entry_mod:make", doc="a lazy thing", kind="x")
    assert reg.names(kind="x") == ("t",) and reg["t"].doc == "a lazy thing" and reg["t"].module == "lazy_entry_mod"
    assert "lazy_entry_mod" not in sys.modules                      # names, docs and meta import nothing
    assert reg.build("t", {"k": 5}, x=1) == ("built", 5, 1)
    assert "lazy_entry_mod" in sys.modules
    with pytest.raises(ConfigError, match=r"thing.t.*unknown key|thing\.t.*nope"):
        reg.config("t", {"nope": 1})


def test_a_lazy_entry_that_names_a_missing_module_or_attribute_fails_clearly():
    reg = Registry("thing")
    reg.register("gone", "components.config:ConfigError", "components.no_such_module:make")
    reg.register("typo", NoConfig, "components.config:no_such_attr")
    with pytest.raises(ConfigError, match="thing.gone: cannot import module 'components.no_such_module'"):
        reg.build("gone")
    with pytest.raises(ConfigError, match="thing.typo: module 'components.config' has no attribute 'no_such_attr'"):
        reg.build("typo")
    with pytest.raises(TypeError, match="make must be 'module:attr'"):
        reg.register("bad", NoConfig, "components.config")


def test_the_project_registries_import_no_implementation():
    """Importing a registry module imports none of its entries' modules (a fresh interpreter)."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from components.inference.registry import INFERENCE\n"
            "from components.energies.registry import ENERGIES\n"
            "from components.training.registry import OBJECTIVES\n"
            "mods = {e.module for r in (INFERENCE, ENERGIES, OBJECTIVES) for e in r.values()}\n"
            "print(sorted(m for m in mods if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


def test_build_with_passes_each_entry_only_its_own_settings():
    from components.inference.registry import INFERENCE
    settings = {"k": 4, "alpha": 7.0}
    assert INFERENCE.build_with("beam", settings).cfg.k == 4
    soft = INFERENCE.build_with("soft_beam", settings)
    assert (soft.cfg.k, soft.cfg.alpha) == (4, 7.0)
    INFERENCE.build_with("greedy", settings)            # takes neither


# --------------------------------------------------------------------------------------------
# unknown names: a ConfigError naming the params key (issue 30, item 7)
# --------------------------------------------------------------------------------------------

def test_an_unknown_name_is_a_config_error_naming_where_and_the_known_names():
    from components.registry import UnknownName

    r = Registry("thing")
    r.register("x", _Cfg, lambda cfg: cfg.a)
    with pytest.raises(ConfigError) as e:
        r.config("nosuch", {}, where="sec.methods.nosuch")
    assert isinstance(e.value, KeyError) and isinstance(e.value, UnknownName)
    msg = str(e.value)
    assert msg.startswith("sec.methods.nosuch: unknown thing 'nosuch'; known: ['x']"), msg
    with pytest.raises(ConfigError, match=r"^sec.m: unknown thing 'nosuch'; known: \['x'\]"):
        r.entry("nosuch", "sec.m")
    with pytest.raises(ConfigError, match=r"^thing: unknown name 'nosuch'"):      # no key given: the family
        r.build("nosuch")
    assert "nosuch" not in r and r.get("nosuch") is None                        # still a KeyError for Mapping


def test_a_plugin_that_fails_to_import_names_where_and_the_import_error(tmp_path, monkeypatch):
    import sys
    (tmp_path / "broken_plugin_mod.py").write_text("def make(cfg):\n    return (\n")        # a SyntaxError
    (tmp_path / "needy_plugin_mod.py").write_text("import no_such_dependency_xyz\ndef make(cfg):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in ("broken_plugin_mod", "needy_plugin_mod"):
        sys.modules.pop(m, None)
    r = Registry("thing")
    with pytest.raises(ConfigError, match=r"^sec.m: thing 'broken_plugin_mod:make': cannot import module "
                                          r"'broken_plugin_mod' \(SyntaxError: "):
        r.config("broken_plugin_mod:make", {}, where="sec.m")
    with pytest.raises(ConfigError, match=r"^sec.m: .*cannot import module 'needy_plugin_mod' .*no_such_depend"):
        r.config("needy_plugin_mod:make", {}, where="sec.m")
    with pytest.raises(ConfigError, match=r"^sec.m: .*cannot import module 'no_such_plugin_mod_xyz'"):
        r.config("no_such_plugin_mod_xyz:make", {}, where="sec.m")
