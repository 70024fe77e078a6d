"""Strict configuration: a ``params.yaml`` section becomes a frozen dataclass.

Each component owns a frozen dataclass with its defaults; flows compose them. The loader rejects
unknown keys (a typo in ``params.yaml`` is an error, not a silently ignored setting), checks value
types against the annotations, and recurses into nested dataclasses. Every config range-checks
its values in ``__post_init__`` with :func:`check_range` (positive sizes and epochs, fractions in
[0, 1], known devices, ...), and :func:`from_dict` reports a failure under its full dotted key
(``train.optim.batch_size: must be > 0, got 0``), so a bad value fails at load time, before Ray or
any model starts. :func:`load_params` rejects a key repeated in one mapping (YAML would keep the
last one silently). Sweep spaces and ``dvc exp run -S`` both address values by dotted keys
(``train.model.hidden``), resolved here by :func:`set_dotted` / :func:`get_dotted`.
:func:`check_contained` refuses, before any work, a path key that resolves outside the repository
(unless under ``base.external_paths``) and a task name that is not a plain name.
"""
from __future__ import annotations

import copy
import dataclasses
import fnmatch
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A params section that does not match its dataclass (unknown key, wrong type, out of range).

    ``key``/``detail``: set by :func:`field_error` for a value a config's ``__post_init__`` rejects,
    so :func:`from_dict` can re-raise it under the full dotted key (``train.optim.batch_size``).
    """

    def __init__(self, message: str, *, key: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.key, self.detail = key, detail


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first_line: int, section: str):
        super().__init__(key, line, first_line, section)
        self.key, self.line, self.first_line, self.section = key, line, first_line, section


class _StrictLoader(yaml.SafeLoader):
    """``yaml.safe_load`` semantics, except that a mapping (at any depth) may not repeat a key:
    YAML would keep the last one silently. Keys merged in by ``<<`` may still be overridden."""

    def construct_document(self, node: yaml.Node) -> Any:
        self._sections: dict[int, str] = {}
        todo: list[tuple[yaml.Node, str]] = [(node, "")]
        while todo:                                  # the dotted path of every mapping, for the message
            n, path = todo.pop()
            if isinstance(n, yaml.MappingNode):
                self._sections[id(n)] = path
                for k, v in n.value:
                    name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                    todo.append((v, f"{path}.{name}" if path else str(name)))
            elif isinstance(n, yaml.SequenceNode):
                todo.extend((v, f"{path}[{i}]") for i, v in enumerate(n.value))
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    hash(key)
                except TypeError:
                    continue                         # the base class reports an unhashable key
                line = key_node.start_mark.line + 1
                if key in first:
                    raise _DuplicateKey(key, line, first[key], getattr(self, "_sections", {}).get(id(node), ""))
                first[key] = line
        return super().construct_mapping(node, deep=deep)


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """The params file as a mapping of sections; a duplicate key at any depth is an error. The
    scale files beside it (``scales/<scale>.yaml``) become its ``scales`` section."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: params file not found")
    with open(path) as f:
        try:
            data = yaml.load(f, Loader=_StrictLoader)
        except _DuplicateKey as e:
            where = f" in section {e.section!r}" if e.section else " at the top level"
            raise ConfigError(f"{path}:{e.line}: duplicate key {e.key!r}{where} (first at line {e.first_line}); "
                              f"YAML would silently keep the last one") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    scale_files = sorted((path.parent / SCALES_DIR).glob("*.yaml"))
    if scale_files:
        if "scales" in data:
            raise ConfigError(f"{path}: a 'scales' section and the scale files {path.parent / SCALES_DIR}/*.yaml; "
                              f"keep the scales in one place (the files)")
        data["scales"] = {f.stem: load_params(f) for f in scale_files}
    return data


# the scale files beside params.yaml: scales/<scale>.yaml, read by load_params as the "scales" section
SCALES_DIR = "scales"


def merge_params(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` on top: mappings merge key by key, any other value replaces."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_params(out[key], value)
        else:
            out[key] = value
    return out


def load_params_files(paths: typing.Sequence[str | Path]) -> dict[str, Any]:
    """The params files ``paths`` in order, each on top of the ones before (:func:`merge_params`);
    the first is the project's ``params.yaml`` with its scale files. A later file is an overlay that
    sets only what differs, such as ``study/params.yaml`` (the study scale's pipeline)."""
    if not paths:
        raise ConfigError("no params file given")
    params = load_params(paths[0])
    for path in paths[1:]:
        params = merge_params(params, load_params(path))
    return params


def project_root(path: str | Path = ".") -> Path:
    """The DVC project that holds ``path``: the nearest folder at or above it with a ``.dvc`` folder
    (``path`` itself, resolved, when there is none). A scale's pipeline (``study/``) writes its
    products under its own folder and reads the project's data; both lie inside this root."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if (folder / ".dvc").is_dir():
            return folder
    return path


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


def _onto_default(f: dataclasses.Field, value: Any) -> Any:
    """A mapping given for a field whose default is a config instance is read on top of that
    instance (its keys over the instance's values), not of the nested class's own defaults: a
    section's ``optim: TrainConfig = TrainConfig(lr=0.01, epochs=15)`` stays 15 epochs when params
    (or a scale) set only ``optim.lr``."""
    if not isinstance(value, dict):
        return value
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    else:
        return value
    if not dataclasses.is_dataclass(default) or isinstance(default, type):
        return value
    return _merged(default, value)


def _merged(default: Any, value: dict[str, Any]) -> dict[str, Any]:
    """``value``'s keys over the config instance ``default``'s, recursively: a nested mapping reads
    onto the instance's nested config (``procedure: {unary: {epochs: 30}}`` keeps the task's own
    unary phase otherwise)."""
    out = {g.name: getattr(default, g.name) for g in dataclasses.fields(default) if g.init}
    for k, v in value.items():
        cur = out.get(k)
        if isinstance(v, dict) and dataclasses.is_dataclass(cur) and not isinstance(cur, type):
            out[k] = _merged(cur, v)
        else:
            out[k] = v
    return out


def from_dict(cls: type[T], data: dict[str, Any] | None, *, where: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``; missing keys take the defaults (a nested
    config's missing keys those of the field's default instance: :func:`_onto_default`).

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
    kwargs = {name: _check_type(_onto_default(fields[name], value), hints[name], f"{where}.{name}")
              for name, value in data.items()}
    missing = [n for n, f in fields.items() if n not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: missing required key(s) {missing}")
    try:
        return cls(**kwargs)
    except ConfigError as e:                        # a range check of __post_init__: give the full key
        if e.key is not None:
            raise ConfigError(f"{where}.{e.key}: {e.detail}") from None
        if str(e).startswith(where):
            raise
        raise ConfigError(f"{where}: {e}") from None
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from e


def field_error(cfg: Any, key: str, detail: str, *, message: str | None = None) -> ConfigError:
    """The error for field ``key`` of config ``cfg``: ``Cls.key: detail`` (or ``message``, a config's
    own wording) when the config is built directly; ``from_dict`` re-raises it as
    ``<dotted section>.key: detail``."""
    return ConfigError(message or f"{type(cfg).__name__}.{key}: {detail}", key=key, detail=detail)


def _interval(spec: str) -> tuple[float, float, bool, bool, str]:
    lo, hi = (x.strip() for x in spec[1:-1].split(","))
    lo_v, hi_v, lo_in, hi_in = float(lo), float(hi), spec[0] == "[", spec[-1] == "]"
    if hi_v == math.inf:
        text = f"{'>=' if lo_in else '>'} {lo}"
    else:
        text = f"in {spec}"
    return lo_v, hi_v, lo_in, hi_in, text


def check_range(cfg: Any, *, positive: typing.Iterable[str] = (), nonnegative: typing.Iterable[str] = (),
                within: dict[str, str] | None = None, nonempty: typing.Iterable[str] = (),
                ordered: typing.Iterable[tuple[str, str, str]] = ()) -> None:
    """The range checks of a config's ``__post_init__``; each failure is a :func:`field_error`.

    ``positive``: finite and > 0; ``nonnegative``: finite and >= 0; ``within``: field -> interval
    such as ``"[0, 1)"`` or ``"[4, inf)"``; a tuple or list field is checked item by item
    (``key[i]``), a mapping value by value (``key.name``); ``None`` passes (an optional field).
    ``nonempty``: a tuple/list/mapping with at least one item. ``ordered``: ``(a, "<" | "<=", b)``.
    """
    rules = [(n, "(0, inf)") for n in positive] + [(n, "[0, inf)") for n in nonnegative] + list((within or {}).items())
    for name, spec in rules:
        lo, hi, lo_in, hi_in, text = _interval(spec)
        value = getattr(cfg, name)
        items = (value.items() if isinstance(value, dict) else
                 ((f"[{i}]", v) for i, v in enumerate(value)) if isinstance(value, (tuple, list)) else [("", value)])
        for suffix, v in items:
            key = f"{name}.{suffix}" if isinstance(value, dict) else f"{name}{suffix}"
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise field_error(cfg, key, f"must be a number {text}, got {v!r}")
            ok = (lo <= v if lo_in else lo < v) and (v <= hi if hi_in else v < hi)
            if not ok:
                raise field_error(cfg, key, f"must be {text}, got {v!r}")
    for name in nonempty:
        if len(getattr(cfg, name)) == 0:
            raise field_error(cfg, name, "must not be empty")
    for a, op, b in ordered:
        va, vb = getattr(cfg, a), getattr(cfg, b)
        if not (va < vb if op == "<" else va <= vb):
            raise field_error(cfg, a, f"must be {op} {b} ({vb!r}), got {va!r}")


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
    # a folder of the user's plug-in modules (registry entries named "module:attribute"), put on
    # sys.path and PYTHONPATH by every stage; the stages that can build plug-ins depend on it in dvc.yaml
    plugin_dir: str = "plugins"
    # folders outside the repository that path keys may name (absolute, or relative to the repository
    # root, e.g. ["/scratch/me/approxinfer"]): :func:`check_contained` refuses any other path key
    # (outputs, models, data; base.plugin_dir and the corpus files of prepare.tasks excepted) that
    # resolves outside the repository, so `-S report.out_dir=../../x` cannot write elsewhere by accident.
    # Set it with `dvc exp run -S 'base.external_paths=["/scratch/me"]'`; () = nothing outside
    external_paths: tuple[str, ...] = ()

    def __post_init__(self):
        check_range(self, nonnegative=("seed", "threads"))
        for i, e in enumerate(self.external_paths):
            if not e.strip():
                raise field_error(self, f"external_paths[{i}]", f"must name a folder, got {e!r}")
        if not (isinstance(self.device, str) and _DEVICE.fullmatch(self.device)):
            raise field_error(self, "device", f"must be auto, cpu, cuda or cuda:N (N >= 0), got {self.device!r}")


_DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


@dataclasses.dataclass(frozen=True)
class ResourcesConfig:
    """What one trial or shard asks the scheduler for (interpreted by ``flows``)."""
    cpu: float = 1.0
    gpu: float | str = "auto"          # a number, or "auto": 1 when the Ray cluster has GPUs, else 0

    def __post_init__(self):
        check_range(self, positive=("cpu",))
        if isinstance(self.gpu, str):
            if self.gpu != "auto":
                raise field_error(self, "gpu", f"must be a number >= 0 or 'auto', got {self.gpu!r}")
        else:
            check_range(self, nonnegative=("gpu",))


def scale_overrides(block: dict[str, Any] | None, where: str = "scales") -> list[tuple[str, Any]]:
    """A scale's overrides as (dotted params key, value) pairs, in order. A key without a dot whose
    value is a mapping is a *section block*: its keys are dotted keys relative to that section
    (``train: {optim.epochs: 30}`` = ``train.optim.epochs: 30``), so that a stage's DVC params can list
    just ``scales.<scale>.<section>`` of the sections it reads; a dotted key is a key of its own."""
    out: list[tuple[str, Any]] = []
    for key, value in (block or {}).items():
        if "." not in key:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key}: a section block must map dotted keys to values, got {value!r}")
            out += [(f"{key}.{k}", v) for k, v in value.items()]
        else:
            out.append((key, value))
    return out


def resolve_scale(params: dict[str, Any]) -> dict[str, Any]:
    """Apply ``scales[<base.scale>]`` (section blocks or dotted keys, :func:`scale_overrides`) on top
    of the defaults.

    ``base.scale: default`` leaves ``params`` as written; ``dvc exp run -S base.scale=study`` (or
    ``paper``) switches every stage to the settings recorded in ``scales/study.yaml``
    (``scales/paper.yaml``), which :func:`load_params` reads as ``scales.study`` (``scales.paper``).
    """
    scale = (params.get("base") or {}).get("scale", "default")
    if scale == "default":
        return params
    scales = params.get("scales") or {}
    if scale not in scales:
        raise ConfigError(f"base.scale: {scale!r} is not a key of the 'scales' section (known: {sorted(scales)})")
    out = params
    for key, value in scale_overrides(scales[scale], f"scales.{scale}"):
        # the section must exist; a key below it may be at its default (absent from params.yaml):
        # the section's strict config rejects a typo when the stage loads it
        get_dotted(out, key.split(".", 1)[0])
        out = set_dotted(out, key, value)
    return out


def resolve_device(device: str) -> str:
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"base.device: {device!r} requested but CUDA is not available")
    return device


# -- path containment --------------------------------------------------------------------------------
# Every params key whose value is a path — its last part named like a path (:data:`_PATH_KEY`:
# raw_dir, prepared_dir, models_dir, plots_dir, report_dir, out_dir, energy_dir, model_dir, ...;
# bench's report and dir; report.approx_metrics; prepare.tasks.<task>.paths; mcmc.traces; cmlm.corpus)
# — must resolve inside the repository, or under a folder of base.external_paths: an output written
# elsewhere escapes DVC, git and the next `dvc repro`. The rule goes by name, so a new output key
# (``*_dir``, ``*_path``, ``*_file``, ...) is checked the day it is added. Read-only inputs the user
# brings may lie anywhere (:data:`READ_ONLY_PATH_KEYS`). Names that become folders — task names,
# variant names — must be plain names (:data:`_NAME`).

_PATH_KEY = re.compile(r"(?:^|_)(?:dir|dirs|path|paths|file|files|out|report|metrics|db|uri|root)$|^(?:traces|corpus)$")

#: dotted-key patterns (fnmatch) of path keys that are only read and may name any folder: the
#: user's plug-in modules and corpus files (``prepare.tasks.<task>.{train,dev,test}`` are read too,
#: and not path-named); the allow-list itself
READ_ONLY_PATH_KEYS = ("base.plugin_dir", "prepare.tasks.*.paths", "base.external_paths")

#: dotted-key patterns whose list entries, or mapping keys, are task or variant names: they become
#: folder and file names (``data/prepared/<task>``, ``models/search_aware/<task>/<variant>``)
NAME_KEYS = ("prepare.tasks", "studies.*", "*.tasks", "*.variants", "*.beam_size", "*.max_train_sentences",
             "*.max_test_sentences", "*.max_iterations", "*.arch", "infnets.energy_archs.*")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

#: a value of a path key that names a server (``http://``, ``s3://``, ...), not a local path
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def check_name(name: Any, where: str, what: str = "") -> None:
    """A task (or variant) name is a plain name: letters, digits, ``_``, ``.``, ``-``, starting with
    a letter or digit (so no ``/``, no ``.`` or ``..``): it becomes a folder name. ``what``: a word
    before the name in the message (``"key "`` for a mapping's key)."""
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise ConfigError(f"{where}: {what}{name!r} is not a plain name; a task or variant name becomes a folder "
                          f"name (data/prepared/<task>, ...), so it must be letters, digits, '_', '.' or '-', "
                          f"starting with a letter or digit (no '/', not '.' or '..')")


def _local_path(value: str) -> str | None:
    """The file-system path a path value names: a ``sqlite:///`` or ``file://`` URI's path, ``None``
    for a server URL or an empty value (unset)."""
    for scheme in ("sqlite:///", "file://"):
        if value.startswith(scheme):
            return value[len(scheme):]
    if not value or _URL.match(value):
        return None
    return value


def contained_path(value: str, root: Path, where: str, external: typing.Sequence[str | Path] = (),
                   within: Path | None = None) -> Path | None:
    """``value`` (relative to ``root``, or absolute) resolved, ``..`` and symbolic links followed;
    a :class:`ConfigError` naming ``where`` if it lies outside ``within`` (default ``root``: the
    repository) and outside every folder of ``external`` (``base.external_paths``; relative ones are
    relative to ``root``). ``None`` for a value that names no local path (empty, a server URL)."""
    local = _local_path(value)
    if local is None:
        return None
    root = Path(root).resolve()
    resolved = (root / local).resolve()
    inside = root if within is None else Path(within).resolve()
    if resolved.is_relative_to(inside):
        return resolved
    if any(resolved.is_relative_to((root / e).resolve()) for e in external):
        return resolved
    how = (" through a symbolic link" if Path(os.path.normpath(root / local)).is_relative_to(inside) else "")
    raise ConfigError(
        f"{where}: {value!r} resolves{how} to {resolved}, outside the repository {inside}; what the pipeline writes "
        f"and reads back must stay inside it. To use a location outside the repository on purpose, list it (or a "
        f"folder above it) in base.external_paths, e.g. dvc exp run -S 'base.external_paths=[\"{resolved}\"]'")


def _matches(key: str, patterns: typing.Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def check_contained(params: dict[str, Any], root: str | Path, within: str | Path | None = None) -> None:
    """Refuse, before any work, a params set that would write outside the repository ``root``.

    ``params``: the full params of a run, after ``base.scale`` is applied (the ``scales`` section
    itself is not read). Every string value of a path key (see the comment above
    :data:`_PATH_KEY`; list entries too) must resolve — after joining with ``root`` and following
    ``..`` and symbolic links — inside ``within`` (default ``root``; a scale's folder such as
    ``study/`` is a ``root`` inside the repository ``within``) or under a folder of ``base.external_paths``, except
    the read-only inputs of :data:`READ_ONLY_PATH_KEYS`; a ``sqlite:///`` or ``file://`` value is
    checked as its path, a server URL (``https://``, ``s3://``) is not a local path. Every task and
    variant name (:data:`NAME_KEYS`: keys of ``prepare.tasks``, entries of ``<stage>.tasks`` and
    ``studies.<study>``, keys of per-task maps such as ``search_aware.beam_size``) must be a plain
    name (:func:`check_name`). A failure is a :class:`ConfigError` naming the dotted key, the value
    and the resolved path.
    """
    base = from_dict(BaseConfig, params.get("base"), where="base")
    root = Path(root)

    def walk(value: Any, key: str) -> None:
        last = key.rsplit(".", 1)[-1]
        names = _matches(key, NAME_KEYS)
        if isinstance(value, dict):
            for k, v in value.items():
                if names:
                    check_name(k, key, "key ")
                walk(v, f"{key}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                if names:
                    check_name(v, f"{key}[{i}]")
                elif _PATH_KEY.search(last) and isinstance(v, str) and not _matches(key, READ_ONLY_PATH_KEYS):
                    contained_path(v, root, f"{key}[{i}]", base.external_paths, within)
                else:
                    walk(v, f"{key}[{i}]")
        elif isinstance(value, str) and _PATH_KEY.search(last) and not _matches(key, READ_ONLY_PATH_KEYS):
            contained_path(value, root, key, base.external_paths, within)

    for section, value in params.items():
        if section != "scales":
            walk(value, str(section))
