"""Strict configuration: a ``params.yaml`` section becomes a frozen dataclass.

Each component owns a frozen dataclass with its defaults; flows compose them. The loader rejects
unknown keys (a typo in ``params.yaml`` is an error, not a silently ignored setting), checks value
types against the annotations, and recurses into nested dataclasses. Sweep spaces and
``dvc exp run -S`` both address values by dotted keys (``train.model.hidden``), resolved here by
:func:`set_dotted` / :func:`get_dotted`.
"""
from __future__ import annotations

import copy
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A params section that does not match its dataclass (unknown key, wrong type)."""


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: params file not found")
    with open(path) as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    return data


def _check_type(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, where=where)
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            try:
                return _check_type(value, arm, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {value!r} matches none of {tp}")
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{where}: expected null, got {value!r}")
    if origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        raise ConfigError(f"{where}: expected one of {typing.get_args(tp)}, got {value!r}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(tp)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_check_type(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if origin is tuple and args:
            if len(args) != len(value):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            return tuple(_check_type(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        inner = args[0] if args else Any
        return origin(_check_type(v, inner, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        kt, vt = typing.get_args(tp) or (Any, Any)
        return {_check_type(k, kt, where): _check_type(v, vt, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


def from_dict(cls: type[T], data: dict[str, Any] | None, *, where: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``; missing keys take the defaults.

    Raises :class:`ConfigError` for an unknown key or a value of the wrong type, naming the
    dotted key (``where``) so the user can find it in ``params.yaml``.
    """
    where = where or cls.__name__
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(fields)}")
    kwargs = {name: _check_type(value, hints[name], f"{where}.{name}") for name, value in data.items()}
    missing = [n for n, f in fields.items() if n not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: missing required key(s) {missing}")
    return cls(**kwargs)


def load_section(cls: type[T], section: str, params: dict[str, Any] | str | Path = "params.yaml") -> T:
    """``params[section]`` as a ``cls`` (strict)."""
    if not isinstance(params, dict):
        params = load_params(params)
    return from_dict(cls, params.get(section), where=section)


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``{"a.b.c": value}`` (lists stay values); used to log params."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def get_dotted(d: dict[str, Any], key: str) -> Any:
    cur: Any = d
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise ConfigError(f"params key {key!r}: {part!r} not found")
        cur = cur[part]
    return cur


def set_dotted(d: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``d`` with the dotted ``key`` set; the key's parent must exist."""
    out = copy.deepcopy(d)
    parts = key.split(".")
    cur = out
    for i, part in enumerate(parts[:-1]):
        if not isinstance(cur.get(part), dict):
            cur[part] = {} if part not in cur else cur[part]
            if not isinstance(cur[part], dict):
                raise ConfigError(f"params key {key!r}: {'.'.join(parts[:i + 1])!r} is not a section")
        cur = cur[part]
    cur[parts[-1]] = value
    return out


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """The ``base`` section: keys every stage shares."""
    seed: int = 13
    device: str = "auto"              # auto | cpu | cuda | cuda:N
    scale: str = "default"            # default | paper (a key of the top-level ``scales`` section)
    tracker: typing.Literal["mlflow", "null"] = "mlflow"
    experiment: str = "approxinfer"
    raw_dir: str = "data/raw"
    prepared_dir: str = "data/prepared"
    threads: int = 0                  # torch intra-op threads; 0 = torch's default


@dataclasses.dataclass(frozen=True)
class ResourcesConfig:
    """What one trial or shard asks the scheduler for (interpreted by ``flows``)."""
    cpu: float = 1.0
    gpu: float | str = "auto"          # a number, or "auto": 1 when CUDA is visible to the driver


def resolve_scale(params: dict[str, Any]) -> dict[str, Any]:
    """Apply ``scales[<base.scale>]`` (a mapping of dotted keys to values) on top of the defaults.

    ``base.scale: default`` leaves ``params`` as written; ``dvc exp run -S base.scale=paper``
    switches every stage to the papers' settings recorded under ``scales.paper``.
    """
    scale = (params.get("base") or {}).get("scale", "default")
    if scale == "default":
        return params
    scales = params.get("scales") or {}
    if scale not in scales:
        raise ConfigError(f"base.scale: {scale!r} is not a key of the 'scales' section (known: {sorted(scales)})")
    out = params
    for key, value in (scales[scale] or {}).items():
        if "." in key:
            get_dotted(out, key.rsplit(".", 1)[0])     # the override's parent must exist: a typo is an error
        out = set_dotted(out, key, value)
    return out


def resolve_device(device: str) -> str:
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"base.device: {device!r} requested but CUDA is not available")
    return device
