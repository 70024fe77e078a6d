from dataclasses import dataclass, field
from typing import Literal

import pytest

from components.config import (BaseConfig, ConfigError, flatten, from_dict, get_dotted, load_params,
                               load_section, resolve_scale, set_dotted)


@dataclass(frozen=True)
class Inner:
    hidden: int = 10
    lr: float = 0.1


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    mode: Literal["a", "b"] = "a"
    sizes: tuple[int, ...] = (1, 2)
    frac: tuple[float, float] = (0.5, 0.5)
    inner: Inner = Inner()
    tasks: dict[str, Inner] = field(default_factory=dict)
    gpu: float | str = "auto"


def test_defaults_and_nested():
    cfg = from_dict(Outer, {"inner": {"hidden": 3}, "tasks": {"t": {"lr": 1}}, "sizes": [4]})
    assert cfg.inner == Inner(hidden=3, lr=0.1)
    assert cfg.tasks["t"].lr == 1.0 and isinstance(cfg.tasks["t"].lr, float)
    assert cfg.sizes == (4,)
    assert from_dict(Outer, None) == Outer()


@pytest.mark.parametrize("data, where", [
    ({"nme": "y"}, "unknown key(s) ['nme']"),
    ({"inner": {"hiden": 3}}, "sec.inner: unknown key(s) ['hiden']"),
    ({"inner": {"hidden": 3.5}}, "sec.inner.hidden: expected an integer"),
    ({"inner": {"hidden": True}}, "sec.inner.hidden: expected an integer"),
    ({"mode": "c"}, "sec.mode: expected one of"),
    ({"frac": [0.5]}, "sec.frac: expected 2 values"),
    ({"tasks": {"t": {"bad": 1}}}, "sec.tasks.t: unknown key(s) ['bad']"),
    ({"name": 3}, "sec.name: expected str"),
    ({"gpu": [1]}, "sec.gpu"),
])
def test_strict_errors_name_the_key(data, where):
    with pytest.raises(ConfigError) as e:
        from_dict(Outer, data, where="sec")
    assert where in str(e.value)


def test_frozen():
    cfg = from_dict(Outer, {})
    with pytest.raises(Exception):
        cfg.name = "z"  # type: ignore[misc]


def test_load_section_and_params_file(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("base:\n  seed: 5\n  scale: paper\nscales:\n  paper:\n    base.seed: 7\n")
    params = load_params(p)
    assert load_section(BaseConfig, "base", params).seed == 5
    assert load_section(BaseConfig, "base", resolve_scale(params)).seed == 7
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_params(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "missing.yaml")


def test_unknown_scale_is_an_error():
    with pytest.raises(ConfigError, match="scales"):
        resolve_scale({"base": {"scale": "huge"}, "scales": {"paper": {}}})


def test_dotted_keys():
    d = {"train": {"optim": {"lr": 1}}}
    e = set_dotted(d, "train.optim.lr", 2)
    assert get_dotted(e, "train.optim.lr") == 2 and get_dotted(d, "train.optim.lr") == 1
    with pytest.raises(ConfigError, match="'lrr' not found"):
        get_dotted(d, "train.optim.lrr")
    assert flatten(e) == {"train.optim.lr": 2}


def test_a_partial_nested_mapping_reads_onto_the_sections_default_instance():
    import dataclasses as dc

    from components.config import from_dict
    from components.training.loop import TrainConfig

    @dc.dataclass(frozen=True)
    class Section:
        optim: TrainConfig = TrainConfig(lr=0.01, epochs=15, patience=4)
        other: TrainConfig = dc.field(default_factory=lambda: TrainConfig(epochs=2))

    cfg = from_dict(Section, {"optim": {"lr": 0.5}, "other": {"batch_size": 7}})
    assert (cfg.optim.lr, cfg.optim.epochs, cfg.optim.patience) == (0.5, 15, 4)     # not TrainConfig's 10 / 3
    assert (cfg.other.epochs, cfg.other.batch_size) == (2, 7)
    with pytest.raises(ConfigError, match=r"optim: unknown key\(s\) \['lrr'\]"):
        from_dict(Section, {"optim": {"lrr": 0.5}})


def test_a_scale_may_override_a_key_left_at_its_default():
    params = {"base": {"scale": "study"}, "train": {"epochs": 3},
              "scales": {"study": {"train": {"optim.lr": 0.5}, "base.seed": 1}}}
    out = resolve_scale(params)
    assert out["train"] == {"epochs": 3, "optim": {"lr": 0.5}} and out["base"]["seed"] == 1
    with pytest.raises(ConfigError, match="'trian' not found"):      # a section that does not exist
        resolve_scale({"base": {"scale": "study"}, "scales": {"study": {"trian.optim.lr": 0.5}}})


def test_the_scale_files_beside_params_yaml_are_its_scales_section(tmp_path):
    (tmp_path / "scales").mkdir()
    (tmp_path / "params.yaml").write_text("base:\n  scale: study\ntrain:\n  optim: {lr: 0.1}\n")
    (tmp_path / "scales" / "study.yaml").write_text("train:\n  optim.lr: 0.5\n")
    (tmp_path / "scales" / "default.yaml").write_text("train: {}\n")
    params = load_params(tmp_path / "params.yaml")
    assert params["scales"] == {"study": {"train": {"optim.lr": 0.5}}, "default": {"train": {}}}
    assert resolve_scale(params)["train"]["optim"]["lr"] == 0.5
    (tmp_path / "params.yaml").write_text("base:\n  scale: study\nscales:\n  study: {}\n")
    with pytest.raises(ConfigError, match="keep the scales in one place"):
        load_params(tmp_path / "params.yaml")
    (tmp_path / "scales" / "study.yaml").write_text("train:\n  a: 1\n  a: 2\n")
    (tmp_path / "params.yaml").write_text("base:\n  scale: study\n")
    with pytest.raises(ConfigError, match=r"study\.yaml:3: duplicate key 'a'"):
        load_params(tmp_path / "params.yaml")
