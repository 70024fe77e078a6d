"""Registries: the one place where a family's names are defined.

A :class:`Registry` maps a name to an :class:`Entry`: the entry's own frozen config dataclass
(its defaults are the ones actually used) and a ``make(cfg, **inputs)`` that builds the object.
Every family (``ENERGIES``, ``INFERENCE``, ``OBJECTIVES``, ``SAMPLERS``, ``SCALINGS``,
``READERS``, study tasks) is one ``Registry`` in its package ``__init__``; flows build by name
from a params section, never from an if-chain:

    cfg = INFERENCE.config("gd_adam", {"lr": 0.1}, where="approx.methods.gd_adam")   # strict
    method = INFERENCE.build("gd_adam", cfg)

``inputs`` are what the config cannot hold because they come from data or from other objects
(vocabulary sizes for an energy, a trained network for a warm start); each family documents its
inputs. ``meta`` holds a few declarative facts a caller or a test may ask about an entry (what an
inference method needs, how an objective predicts), so no second table restates them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from components.config import ConfigError, from_dict


@dataclass(frozen=True)
class Entry:
    name: str
    config: type                          # a frozen dataclass; every field has a default
    make: Callable[..., Any]              # make(cfg, **inputs) -> the object
    doc: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


class Registry(Mapping[str, Entry]):
    """A read-only mapping name -> :class:`Entry`, filled by :meth:`register` at import time."""

    def __init__(self, family: str):
        self.family = family
        self._entries: dict[str, Entry] = {}

    # -- definition ------------------------------------------------------------------------------
    def register(self, name: str, config: type, make: Callable[..., Any] | None = None, *, doc: str = "",
                 **meta: Any):
        """Register ``name``; usable directly or as a decorator of ``make``. A name is defined once."""
        if not dataclasses.is_dataclass(config):
            raise TypeError(f"{self.family}.register({name!r}): config must be a dataclass, got {config!r}")

        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._entries:
                raise ValueError(f"{self.family}: {name!r} is already registered")
            self._entries[name] = Entry(name, config, fn, doc or (fn.__doc__ or "").strip().split("\n")[0], dict(meta))
            return fn

        return add(make) if make is not None else add

    # -- lookup ----------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"{self.family}: unknown name {name!r}; known: {sorted(self._entries)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.family!r}, {sorted(self._entries)})"

    def check(self, names: Any, where: str) -> None:
        """Raise a :class:`ConfigError` naming ``where`` if any of ``names`` is not registered."""
        unknown = [n for n in ([names] if isinstance(names, str) else names) if n not in self._entries]
        if unknown:
            raise ConfigError(f"{where}: unknown {self.family} {unknown}; known: {sorted(self._entries)}")

    # -- building --------------------------------------------------------------------------------
    def config(self, name: str, data: Any = None, *, where: str = "") -> Any:
        """The entry's config: defaults (``None``), a mapping read strictly, or a config instance."""
        entry = self[name]
        where = where or f"{self.family}.{name}"
        if data is None or isinstance(data, Mapping):
            return from_dict(entry.config, dict(data or {}), where=where)
        if isinstance(data, entry.config):
            return data
        raise ConfigError(f"{where}: expected a mapping or a {entry.config.__name__}, got {type(data).__name__}")

    def build(self, name: str, cfg: Any = None, /, **inputs: Any) -> Any:
        """``make(config(name, cfg), **inputs)``."""
        return self[name].make(self.config(name, cfg), **inputs)


@dataclass(frozen=True)
class NoConfig:
    """The config of an entry without settings."""
