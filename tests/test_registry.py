from dataclasses import dataclass

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
