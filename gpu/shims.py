"""Running the project's ``gpu``-marked tests without pytest (the lent GPU machine has none).

:func:`run_marked_tests` finds the test modules under ``tests/`` whose source mentions
``mark.gpu``, imports them, and calls every test function marked ``gpu`` (by the function's own
``pytestmark`` or the module's) once per combination of its ``parametrize`` marks, recording pass /
fail / skipped per call. With pytest (and hypothesis) importable it uses the real modules (marks
read from the real ``Mark`` objects, ``pytest.skip`` caught as a skip); without them it first puts
small stand-ins into ``sys.modules`` so that the test modules import: ``pytest.mark.*`` records
marks the same way, ``pytest.skip`` raises :class:`Skipped`, ``pytest.raises``/``warns`` work as
context managers; hypothesis's decorators and strategies are inert (a ``@given`` test, which no
``gpu`` test is, is reported as skipped if called). Fixtures other than ``tmp_path`` are not
provided: a test that needs one is reported as an error naming it.

Standard library only (plus the test modules' own imports).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import inspect
import itertools
import re
import sys
import tempfile
import time
import traceback
import types
import warnings
from pathlib import Path
from typing import Any, Callable

__all__ = ["Skipped", "install_shims", "remove_shims", "run_marked_tests"]


class Skipped(Exception):
    """``pytest.skip`` of the stand-in module."""


class Failed(AssertionError):
    """``pytest.fail`` of the stand-in module."""


# -- pytest stand-in ------------------------------------------------------------------------------
class _Mark:
    def __init__(self, name: str, args: tuple = (), kwargs: dict | None = None):
        self.name, self.args, self.kwargs = name, tuple(args), dict(kwargs or {})


class _MarkDecorator:
    def __init__(self, mark: _Mark):
        self.mark = mark

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            fn = args[0]
            fn.pytestmark = [*getattr(fn, "pytestmark", []), self.mark]
            return fn
        m = self.mark
        return _MarkDecorator(_Mark(m.name, m.args + args, {**m.kwargs, **kwargs}))


class _MarkGenerator:
    def __getattr__(self, name: str) -> _MarkDecorator:
        if name.startswith("__"):
            raise AttributeError(name)
        return _MarkDecorator(_Mark(name))


class _ParameterSet:
    def __init__(self, *values: Any, marks: Any = (), id: str | None = None):  # noqa: A002 - pytest's name
        self.values, self.marks, self.id = values, marks, id


def _skip(reason: str = "", **_: Any):
    raise Skipped(reason)


_skip.Exception = Skipped  # type: ignore[attr-defined]


def _fail(reason: str = "", **_: Any):
    raise Failed(reason)


class _Raises:
    def __init__(self, expected: Any, match: str | None = None):
        self.expected, self.match, self.value = expected, match, None

    def __enter__(self) -> "_Raises":
        return self

    def __exit__(self, et, ev, tb) -> bool:
        if et is None:
            raise Failed(f"DID NOT RAISE {self.expected}")
        if not issubclass(et, self.expected):
            return False
        if self.match is not None and not re.search(self.match, str(ev)):
            raise Failed(f"regex {self.match!r} does not match {str(ev)!r}")
        self.value = ev
        return True


def _raises(expected: Any, *args: Any, match: str | None = None, **kwargs: Any):
    if args:                                     # the call form pytest.raises(E, fn, *args)
        with _Raises(expected, match):
            args[0](*args[1:], **kwargs)
        return None
    return _Raises(expected, match)


@contextlib.contextmanager
def _warns(expected: Any = Warning, match: str | None = None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    hits = [w for w in caught if issubclass(w.category, expected)
            and (match is None or re.search(match, str(w.message)))]
    if not hits:
        raise Failed(f"DID NOT WARN {expected} (match {match!r})")


def _fixture(*args: Any, **kwargs: Any):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def _importorskip(name: str, *_: Any, **__: Any):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise Skipped(f"could not import {name!r}: {e}") from None


def _make_pytest() -> types.ModuleType:
    m = types.ModuleType("pytest")
    m.__doc__ = "gpu.shims: a stand-in for pytest (marks, skip, raises, warns) — pytest is not installed"
    m.mark = _MarkGenerator()
    m.param = _ParameterSet
    m.skip = _skip
    m.fail = _fail
    m.raises = _raises
    m.warns = _warns
    m.fixture = _fixture
    m.importorskip = _importorskip
    m.__gpu_shim__ = True
    m.__spec__ = importlib.machinery.ModuleSpec("pytest", None)     # importlib.util.find_spec (torch._dynamo)
    return m


# -- hypothesis stand-in -----------------------------------------------------------------------------
class _Inert:
    """Anything: attributes and calls give another inert object, except that a call on one plain
    function returns it unchanged (so ``@settings(...)`` and ``@SETTINGS`` leave a test as it is)."""

    def __getattr__(self, name: str) -> "_Inert":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and inspect.isfunction(args[0]):
            return args[0]
        return _Inert()


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


def _given(*_: Any, **__: Any) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        def needs_hypothesis(*a: Any, **k: Any) -> None:
            raise Skipped("a @given test needs hypothesis, which is not installed")
        needs_hypothesis.__name__ = fn.__name__
        needs_hypothesis.__module__ = fn.__module__
        needs_hypothesis.pytestmark = list(getattr(fn, "pytestmark", []))
        return needs_hypothesis
    return deco


def _composite(fn: Callable) -> Callable[..., _Inert]:
    return lambda *a, **k: _Inert()


def _make_hypothesis() -> tuple[types.ModuleType, types.ModuleType]:
    h = _InertModule("hypothesis")
    st = _InertModule("hypothesis.strategies")
    st.composite = _composite
    h.strategies = st
    h.given = _given
    for mod in (h, st):
        mod.__gpu_shim__ = True
        mod.__spec__ = importlib.machinery.ModuleSpec(mod.__name__, None)   # importlib.util.find_spec works
    return h, st


def install_shims() -> list[str]:
    """Put the stand-ins into ``sys.modules`` for whichever of pytest / hypothesis does not import;
    returns the names stood in for (:func:`remove_shims` takes them out again)."""
    stood_in = []
    try:
        import pytest  # noqa: F401
    except ImportError:
        sys.modules["pytest"] = _make_pytest()
        stood_in.append("pytest")
    try:
        import hypothesis  # noqa: F401
        import hypothesis.strategies  # noqa: F401
    except ImportError:
        h, st = _make_hypothesis()
        sys.modules["hypothesis"], sys.modules["hypothesis.strategies"] = h, st
        stood_in.append("hypothesis")
    return stood_in


def remove_shims() -> None:
    """Take the stand-ins out of ``sys.modules`` (code that later asks whether pytest is loaded,
    or looks its spec up, sees the machine as it is)."""
    for name in ("pytest", "hypothesis", "hypothesis.strategies"):
        if getattr(sys.modules.get(name), "__gpu_shim__", False):
            del sys.modules[name]


# -- the runner -----------------------------------------------------------------------------------------
def _marks(x: Any) -> list[Any]:
    if x is None:
        return []
    xs = x if isinstance(x, (list, tuple)) else [x]
    return [getattr(m, "mark", m) for m in xs]       # a MarkDecorator (module pytestmark) holds its Mark


def _id(v: Any) -> str:
    if isinstance(v, (int, float, bool, str)) or v is None:
        return str(v)
    s = str(v)
    return s.rsplit(".", 1)[-1] if s.startswith("torch.") else s[:30]


def _expand(marks: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The parametrize product: [(id, kwargs)]."""
    axes = []
    for m in marks:
        if m.name != "parametrize":
            continue
        names = m.args[0] if m.args else m.kwargs["argnames"]
        values = m.args[1] if len(m.args) > 1 else m.kwargs["argvalues"]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        axis = []
        for v in values:
            vals = tuple(v.values) if hasattr(v, "values") and hasattr(v, "marks") else (
                (v,) if len(names) == 1 else tuple(v))
            axis.append(("-".join(_id(x) for x in vals), dict(zip(names, vals))))
        axes.append(axis)
    out = []
    for combo in itertools.product(*axes):
        kwargs: dict[str, Any] = {}
        for _, kw in combo:
            kwargs.update(kw)
        out.append(("-".join(i for i, _ in combo), kwargs))
    return out


def _skip_types() -> tuple[type, ...]:
    types_ = [Skipped]
    pytest = sys.modules.get("pytest")
    exc = getattr(getattr(pytest, "skip", None), "Exception", None)
    if isinstance(exc, type) and exc is not Skipped:
        types_.append(exc)
    return tuple(types_)


def _call(fn: Callable, kwargs: dict[str, Any]) -> tuple[str, str]:
    params = inspect.signature(fn).parameters
    missing = [n for n in params if n not in kwargs]
    kw = dict(kwargs)
    with contextlib.ExitStack() as stack:
        for n in missing:
            if n == "tmp_path":
                kw[n] = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu_check_")))
            else:
                return "error", f"needs the fixture {n!r}, which this runner does not provide"
        try:
            fn(**kw)
            return "pass", ""
        except _skip_types() as e:
            return "skipped", str(getattr(e, "msg", "") or e)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - a failing check of any kind is a result
            tb = traceback.format_exc(limit=6)
            return "fail", f"{type(e).__name__}: {str(e)[:400]}\n{tb[-1500:]}"


def find_marked_modules(root: Path, mark: str = "gpu") -> list[str]:
    """Dotted names of the test modules under ``root/tests`` whose source mentions ``mark.<mark>``."""
    needle = re.compile(rf"mark\.{re.escape(mark)}\b")
    mods = []
    for p in sorted((root / "tests").rglob("test_*.py")):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if needle.search(text):
            mods.append(".".join(p.relative_to(root).with_suffix("").parts))
    return mods


def run_marked_tests(root: Path, mark: str = "gpu", progress: Callable[[str], None] = print,
                     time_left: Callable[[], float] = lambda: float("inf")) -> dict[str, Any]:
    """Import the ``mark``-marked test modules and call their marked tests (module doc). Returns
    ``{"runner", "stood_in", "modules", "checks": [{"check", "status", "seconds", "message"}],
    "passed", "failed", "skipped", "errors"}``; checks not started because ``time_left()`` ran out
    are ``skipped`` with that reason."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    stood_in = install_shims()
    try:
        checks, modules = _run(root, mark, progress, time_left)
    finally:
        remove_shims()
    count = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "skipped", "error")}
    return {"runner": "direct calls (gpu.shims)" + (f"; stand-ins for {', '.join(stood_in)}" if stood_in
                                                     else "; real pytest and hypothesis"),
            "stood_in": stood_in, "modules": modules, "checks": checks, "passed": count["pass"],
            "failed": count["fail"], "skipped": count["skipped"], "errors": count["error"]}


def _run(root: Path, mark: str, progress: Callable[[str], None], time_left: Callable[[], float]
         ) -> tuple[list[dict[str, Any]], list[str]]:
    checks: list[dict[str, Any]] = []
    modules = find_marked_modules(root, mark)
    for modname in modules:
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(modname)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            checks.append({"check": modname, "status": "error", "seconds": time.perf_counter() - t0,
                           "message": f"import failed: {type(e).__name__}: {e}"})
            progress(f"tests: {modname}: import failed: {type(e).__name__}: {e}")
            continue
        module_marks = _marks(getattr(mod, "pytestmark", None))
        for name, fn in list(vars(mod).items()):
            if not (name.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == mod.__name__):
                continue
            marks = _marks(getattr(fn, "pytestmark", None)) + module_marks
            if not any(m.name == mark for m in marks):
                continue
            for pid, kwargs in _expand(marks):
                check = f"{modname}::{name}" + (f"[{pid}]" if pid else "")
                if time_left() <= 0:
                    checks.append({"check": check, "status": "skipped", "seconds": 0.0,
                                   "message": "budget: no time left"})
                    continue
                t0 = time.perf_counter()
                status, msg = _call(fn, kwargs)
                secs = time.perf_counter() - t0
                checks.append({"check": check, "status": status, "seconds": secs, "message": msg})
                progress(f"tests: {check}: {status}" + (f" ({msg.splitlines()[0][:120]})" if msg else "")
                         + f" [{secs:.2f} s]")
    return checks, modules
