"""Registries: the one place where a family's names are defined.

A :class:`Registry` maps a name to an :class:`Entry`: the entry's own frozen config dataclass
(its defaults are the ones actually used) and a ``make(cfg, **inputs)`` that builds the object.
Every family (``ENERGIES``, ``INFERENCE``, ``OBJECTIVES``, ``SAMPLERS``, ``SCALINGS``,
``READERS``, study tasks) is one ``Registry``; flows build by name from a params section, never
from an if-chain:

    cfg = INFERENCE.config("gd_adam", {"lr": 0.1}, where="approx.methods.gd_adam")   # strict
    method = INFERENCE.build("gd_adam", cfg)

``inputs`` are what the config cannot hold because they come from data or from other objects
(vocabulary sizes for an energy, a trained network for a warm start); each family documents its
inputs. ``meta`` holds a few declarative facts a caller or a test may ask about an entry (what an
inference method needs, how an objective predicts), so no second table restates them.

**Lazy entries.** An entry names where it lives, ``"package.module:attribute"``, for its ``make``
and its config, and that module is imported only when the entry is built or its config is read
(``entry.make`` / ``entry.config``); names, docs and ``meta`` are plain data. So a registry module
imports nothing of its implementations, and a stage's import closure (its DVC code deps,
``flows/dvc_deps.py``) holds the entries it builds, not the whole family. ``meta`` values are
therefore plain data too (``needs="ChainEnergy"``, not the class). A config given without a module
(``config="GDInferenceConfig"``) lives in the module of ``make``. A registry may also register
objects directly (``make`` a callable, ``config`` a class), when the entries are defined in the
registry's own module.

**Plug-ins.** A params entry may name a user's object instead of a registered name:
``"package.module:attribute"`` (the module importable, e.g. from ``base.plugin_dir``, which the
stages put on ``sys.path``), or a name another installed package declares in the entry-point group
``approxinfer.<family>`` (``approxinfer.inference_method``, ``approxinfer.energy``,
``approxinfer.sampler``, ``approxinfer.objective``, ...; spaces become underscores). The object is
the entry's ``make(cfg, **inputs)``; its config is its ``config`` attribute (a dataclass whose
fields all have defaults; :class:`NoConfig` when it has none), read with the same strict checks as a
registered entry's, and its ``meta`` attribute (a dict) is the entry's meta (an inference method
says ``needs``, ``inputs`` and ``seeded`` there as the registered ones do). An
:class:`Entry` object may be named too. Plug-ins are looked up by :meth:`Registry.__getitem__`,
:meth:`~Registry.check`, :meth:`~Registry.config` and :meth:`~Registry.build`; they are not listed
by iteration or :meth:`~Registry.names`, which stay the project's own entries.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from components.config import ConfigError, from_dict


def resolve(ref: str, where: str = "") -> Any:
    """The object ``"package.module:attribute"`` names (the module imported now)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"{where or ref}: expected 'package.module:attribute', got {ref!r}")
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise ConfigError(f"{where or ref}: cannot import module {module!r} ({e})") from None
    except (ImportError, SyntaxError) as e:       # the module is there but fails to import
        raise ConfigError(f"{where or ref}: cannot import module {module!r} ({type(e).__name__}: {e})") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{where or ref}: module {module!r} has no attribute {attr!r}") from None
    return obj


class UnknownName(ConfigError, KeyError):
    """A name a registry does not know: a :class:`ConfigError` (a stage reports it as a params error,
    not a traceback) and a ``KeyError`` (``name in registry``, ``registry.get(name)`` keep working)."""

    __str__ = BaseException.__str__                 # the message as written, not KeyError's repr of it


@dataclass(frozen=True)
class Entry:
    """One registered name. ``make_ref`` / ``config_ref`` are where the builder and the config
    live (``"module:attr"``) or the objects themselves; :attr:`make` and :attr:`config` import
    them on first use."""
    name: str
    make_ref: str | Callable[..., Any]    # make(cfg, **inputs) -> the object
    config_ref: str | type                # a frozen dataclass; every field has a default
    doc: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    family: str = ""

    @property
    def module(self) -> str | None:
        """The module the entry lives in (``None`` for an entry registered as objects)."""
        return self.make_ref.partition(":")[0] if isinstance(self.make_ref, str) else None

    @property
    def make(self) -> Callable[..., Any]:
        if isinstance(self.make_ref, str):
            return resolve(self.make_ref, f"{self.family}.{self.name}")
        return self.make_ref

    @property
    def config(self) -> type:
        ref = self.config_ref
        if isinstance(ref, str):
            if ":" not in ref:
                if self.module is None:
                    raise ConfigError(f"{self.family}.{self.name}: config {ref!r} names no module")
                ref = f"{self.module}:{ref}"
            cls = resolve(ref, f"{self.family}.{self.name}.config")
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{self.family}.{self.name}: config {ref!r} is not a dataclass")
            return cls
        return ref


class Registry(Mapping[str, Entry]):
    """A read-only mapping name -> :class:`Entry`, filled by :meth:`register` at import time."""

    def __init__(self, family: str):
        self.family = family
        self._entries: dict[str, Entry] = {}
        self._plugins: dict[str, Entry] = {}

    @property
    def entry_point_group(self) -> str:
        """The entry-point group other packages declare plug-ins of this family in."""
        return "approxinfer." + self.family.replace(" ", "_")

    # -- definition ------------------------------------------------------------------------------
    def register(self, name: str, config: type | str, make: Callable[..., Any] | str | None = None, *,
                 doc: str = "", **meta: Any):
        """Register ``name``; usable directly or as a decorator of ``make``. A name is defined once.

        Lazy form: ``register(name, "ConfigClass", "package.module:make", doc=..., **meta)``
        (the config a ``"module:attr"`` of its own, or an attribute of ``make``'s module)."""
        if isinstance(config, str):
            if ":" not in config and not (isinstance(make, str) and ":" in make):
                raise TypeError(f"{self.family}.register({name!r}): a config named by a string needs "
                                f"'module:attr', or a make given as 'module:attr'")
        elif not dataclasses.is_dataclass(config):
            raise TypeError(f"{self.family}.register({name!r}): config must be a dataclass, got {config!r}")
        if isinstance(make, str) and ":" not in make:
            raise TypeError(f"{self.family}.register({name!r}): make must be 'module:attr', got {make!r}")

        def add(fn: Callable[..., Any] | str) -> Callable[..., Any] | str:
            if name in self._entries:
                raise ValueError(f"{self.family}: {name!r} is already registered")
            first = "" if isinstance(fn, str) else (fn.__doc__ or "").strip().split("\n")[0]
            self._entries[name] = Entry(name, fn, config, doc or first, dict(meta), self.family)
            return fn

        return add(make) if make is not None else add

    # -- lookup ----------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Entry:
        return self.entry(name)

    def entry(self, name: str, where: str = "") -> Entry:
        """The entry ``name`` names (registered, or a plug-in). An unknown name is an
        :class:`UnknownName` error (a ``ConfigError`` and a ``KeyError``) naming ``where`` — the
        params key that gave the name, e.g. ``approx.methods.nosuch`` — the family, the name and the
        known names; a plug-in that does not import is a ``ConfigError`` naming ``where`` and the
        import error."""
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        if isinstance(name, str):
            try:
                entry = self._plugins.get(name) or self._plugin(name)
            except ConfigError as e:
                if not where:
                    raise
                raise ConfigError(f"{where}: {e}") from None
            if entry is not None:
                return entry
        head = f"{where}: unknown {self.family} {name!r}" if where else f"{self.family}: unknown name {name!r}"
        raise UnknownName(f"{head}; known: {sorted(self._entries)}, or a plug-in "
                          f"'package.module:attribute', or an entry point of group {self.entry_point_group!r}")

    def _plugin(self, name: str) -> Entry | None:
        """The plug-in ``name`` names (``module:attribute`` or an entry point), or ``None``."""
        if ":" in name:
            obj = resolve(name, f"{self.family} {name!r}")
        else:
            eps = [ep for ep in importlib.metadata.entry_points(group=self.entry_point_group) if ep.name == name]
            if not eps:
                return None
            obj = resolve(eps[0].value, f"{self.family} {name!r} (entry point of {self.entry_point_group})")
        entry = plugin_entry(obj, name, self.family)
        self._plugins[name] = entry
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.family!r}, {sorted(self._entries)})"

    def names(self, **meta: Any) -> tuple[str, ...]:
        """The registered names whose ``meta`` has every given value, in registration order
        (nothing is imported)."""
        return tuple(n for n, e in self._entries.items() if all(e.meta.get(k) == v for k, v in meta.items()))

    def check(self, names: Any, where: str) -> None:
        """Raise a :class:`ConfigError` naming ``where`` if any of ``names`` is not registered."""
        unknown = []
        for n in ([names] if isinstance(names, str) else names):
            try:
                self[n]
            except KeyError:
                unknown.append(n)
            except ConfigError as e:         # a plug-in that does not import, named where it is given
                raise ConfigError(f"{where}: {e}") from None
        if unknown:
            raise ConfigError(f"{where}: unknown {self.family} {unknown}; known: {sorted(self._entries)}")

    # -- building --------------------------------------------------------------------------------
    def config(self, name: str, data: Any = None, *, where: str = "") -> Any:
        """The entry's config: defaults (``None``), a mapping read strictly, or a config instance.
        ``where``: the params key of the config (``approx.methods.gd_adam``), named by every error,
        an unknown ``name`` included."""
        entry = self.entry(name, where)
        where = where or f"{self.family}.{name}"
        if data is None or isinstance(data, Mapping):
            return from_dict(entry.config, dict(data or {}), where=where)
        if isinstance(data, entry.config):
            return data
        raise ConfigError(f"{where}: expected a mapping or a {entry.config.__name__}, got {type(data).__name__}")

    def build(self, name: str, cfg: Any = None, /, **inputs: Any) -> Any:
        """``make(config(name, cfg), **inputs)``."""
        return self[name].make(self.config(name, cfg), **inputs)

    def build_with(self, name: str, settings: Mapping[str, Any], /, **inputs: Any) -> Any:
        """Build ``name`` from those of ``settings`` that its config has (the rest are another
        entry's): e.g. every step decoder from the task's ``{k, alpha}`` — greedy takes neither,
        the beam ``k``, the soft beam both — so that a caller names decoders and never tables
        their configs."""
        fields = {f.name for f in dataclasses.fields(self[name].config)}
        return self.build(name, {k: v for k, v in settings.items() if k in fields}, **inputs)


@dataclass(frozen=True)
class NoConfig:
    """The config of an entry without settings."""


def plugin_entry(obj: Any, name: str, family: str) -> Entry:
    """The :class:`Entry` of a user's object (see the module docstring, "Plug-ins"): an ``Entry``
    as it is, or a callable ``make(cfg, **inputs)`` with optional ``config`` and ``meta``."""
    where = f"{family} {name!r}"
    if isinstance(obj, Entry):
        return dataclasses.replace(obj, name=name, family=family)
    if not callable(obj):
        raise ConfigError(f"{where}: expected a callable make(cfg, **inputs) (a function or a class), "
                          f"got {type(obj).__name__}")
    config = getattr(obj, "config", NoConfig)
    if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise ConfigError(f"{where}: its 'config' attribute must be a dataclass class, got {config!r}")
    missing = [f.name for f in dataclasses.fields(config)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: config {config.__name__} fields without a default: {missing}")
    meta = getattr(obj, "meta", {})
    if not isinstance(meta, Mapping):
        raise ConfigError(f"{where}: its 'meta' attribute must be a dict, got {type(meta).__name__}")
    first = (getattr(obj, "__doc__", None) or "").strip().split("\n")[0]
    return Entry(name, obj, config, first, dict(meta), family)
