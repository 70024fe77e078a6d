"""Static import closure of the ``dvc.yaml`` stages: which project files each stage runs.

A stage whose ``cmd`` is ``python -m flows.stages.<name>`` runs ``flows/stages/<name>.py`` and
everything it imports, at the top or lazily inside a function. This module parses those files
with :mod:`ast` (nothing is imported or executed), follows every ``import`` / ``from ... import``
into the project packages (``components``, ``flows``; relative imports too), and adds each
package's ``__init__.py`` on the way (importing ``components.inference.exact`` runs
``components/__init__.py`` and ``components/inference/__init__.py``, which import more).
A non-Python file that a module names by a string constant and that lies beside it (e.g.
``CHECKSUMS_PATH = Path(__file__).with_name("checksums.json")``) is part of the closure too.
Dynamic imports (``importlib.import_module(f"...{x}")``) are not followed, with one exception that
is the point of the lazy registries (``components.registry``): an entry registered as
``REG.register("name", "Config", "package.module:make", ...)`` lives in that module, which a stage
runs only when it builds ``name``. So the closure of a stage that imports a registry module holds
the entries the stage builds: every entry named by a string in the params sections the stage lists
(its own values, every scale's overrides), by a string literal given to ``REG.build``/``.config``/
``.check``/``REG[...]`` in a file it runs, or selected by ``REG.names(key="value")`` with constant
filters; then the closure of each such module, and so on to a fixed point.

The tool serves the pipeline (it writes ``dvc.yaml``), so it lives in ``flows/``; it imports nothing
of the project and runs nothing.

``python -m flows.dvc_deps [stage ...]`` prints, per stage, the closure and a ``deps`` list for
``dvc.yaml`` (a folder when every Python file under it is needed, else the files), followed by
what the stage's current ``deps`` miss or list without need. ``--check`` exits 1 if anything
is missing or stale; ``--write`` rewrites the code deps in ``dvc.yaml`` (other deps and lines
kept); ``--layering`` lists the imports that break the DESIGN.md layering rules.
``--write`` writes each stage's deps as a YAML flow list wrapped at ``WIDTH`` columns (several paths
a line), so ``dvc.yaml`` reads as the experiment's shape. ``tests/test_dvc_deps.py`` asserts all of
it; ``tests/test_layering.py`` the layering.
"""
from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "flows")
STAGE_PREFIX = "python -m flows.stages."


# --------------------------------------------------------------------------------------------
# modules and their imports
# --------------------------------------------------------------------------------------------

def module_name(path: Path, root: Path = ROOT) -> str:
    """``components/data/readers.py`` -> ``components.data.readers`` (a package: its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a project module or package, or ``None`` (not a project module)."""
    if not name or name.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


@dataclass(frozen=True)
class Import:
    """One imported module: its absolute name (project or not) and where the import is."""
    module: str
    file: Path
    line: int


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve_relative(path: Path, level: int, module: str | None, root: Path) -> str:
    pkg = module_name(path, root) if _is_package(path) else module_name(path, root).rpartition(".")[0]
    parts = pkg.split(".") if pkg else []
    if level - 1 > len(parts):
        raise ImportError(f"{path}: relative import beyond the top-level package")
    parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` without the bodies of ``if TYPE_CHECKING:`` (never run; their ``else`` is)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every module an ``import`` / ``from ... import`` statement of ``path`` names, anywhere in
    the file. ``from pkg import name`` yields ``pkg`` and, when ``pkg.name`` is a project module,
    ``pkg.name`` too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[Import] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out += [Import(a.name, path, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve_relative(path, node.level, node.module, root) if node.level else node.module or ""
            out.append(Import(mod, path, node.lineno))
            for a in node.names:
                sub = f"{mod}.{a.name}" if mod else a.name
                if a.name != "*" and module_file(sub, root) is not None:
                    out.append(Import(sub, path, node.lineno))
    return out


def _with_parents(name: str) -> Iterator[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: importing a module runs its packages' ``__init__``."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def data_files(path: Path) -> list[Path]:
    """Non-Python files beside ``path`` that it names by a string constant."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) < 200 \
                and "\n" not in node.value and not node.value.endswith(".py"):
            p = path.parent / node.value
            try:
                if p.is_file() and p.resolve().parent == path.parent.resolve():
                    out.add(p)
            except OSError:
                continue
    return sorted(out)


def runs_nothing(path: Path) -> bool:
    """A package ``__init__.py`` with nothing but a docstring: importing it runs no code, so an
    edit of it changes no result and it is no stage's dependency."""
    if not _is_package(path):
        return False
    body = ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
               for n in body)


def closure(start: Iterable[Path], root: Path = ROOT) -> dict[Path, tuple[str, ...]]:
    """Every project file the ``start`` files run when imported, each with one import chain
    (module names, from the start) that reaches it; data files beside modules included."""
    found: dict[Path, tuple[str, ...]] = {}
    todo: list[tuple[Path, tuple[str, ...]]] = []

    def add(name: str, chain: tuple[str, ...]) -> None:
        for pkg in _with_parents(name):
            f = module_file(pkg, root)
            if f is not None and f not in found:
                found[f] = chain + (pkg,)
                todo.append((f, chain + (pkg,)))

    for s in start:
        add(module_name(s, root), ())
    while todo:
        f, chain = todo.pop()
        if f.suffix != ".py":
            continue
        for imp in imports_of(f, root):
            add(imp.module, chain)
        for d in data_files(f):
            if d not in found:
                found[d] = chain + (d.name,)
    return dict(sorted((f, c) for f, c in found.items() if not runs_nothing(f)))


# --------------------------------------------------------------------------------------------
# lazy registries: the entries a stage builds
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RegistryEntry:
    """One ``REG.register(...)`` call read from source: where the entry lives and its constant meta."""
    registry: str                     # the registry's variable name, e.g. INFERENCE
    name: str
    modules: tuple[str, ...]          # modules named by its "module:attr" refs (empty: it lives in its registry's module)
    meta: tuple[tuple[str, object], ...]


def _const(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def registry_entries(path: Path) -> list[RegistryEntry]:
    """The entries a module registers: ``X = Registry(...)`` at the top level, then every
    ``X.register("name", config, make, **meta)`` call with a constant name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    regs = {t.id for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "Registry" for t in node.targets if isinstance(t, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in regs and node.args):
            continue
        name = _const(node.args[0])
        if not isinstance(name, str):
            continue
        refs = [_const(a) for a in node.args[1:3]] + [_const(k.value) for k in node.keywords if k.arg in ("config", "make")]
        modules = tuple(sorted({r.partition(":")[0] for r in refs if isinstance(r, str) and ":" in r}))
        meta = tuple((k.arg, _const(k.value)) for k in node.keywords if k.arg and k.arg not in ("config", "make", "doc"))
        out.append(RegistryEntry(node.func.value.id, name, modules, meta))
    return out


_USES = ("build", "config", "check")


def names_used(path: Path, registries: dict[str, list[RegistryEntry]]) -> set[tuple[str, str]]:
    """(registry, name) pairs a file builds or inspects by a literal: ``REG.build("name")``,
    ``REG.config("name", ...)``, ``REG.check("name", ...)``, ``REG["name"]``, and every entry that
    ``REG.names(key=const, ...)`` selects."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in registries:
            reg = node.func.value.id
            if node.func.attr in _USES and node.args and isinstance(_const(node.args[0]), str):
                out.add((reg, _const(node.args[0])))
            elif node.func.attr == "names" and node.keywords:
                want = {k.arg: _const(k.value) for k in node.keywords}
                if all(isinstance(k.value, ast.Constant) for k in node.keywords):
                    out |= {(reg, e.name) for e in registries[reg] if all(dict(e.meta).get(k) == v for k, v in want.items())}
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in registries \
                and isinstance(_const(node.slice), str):
            out.add((node.value.id, _const(node.slice)))
    return out


def strings_in(value: object) -> set[str]:
    """Every string key and string value inside a params value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {str(k) for k in value} | {s for v in value.values() for s in strings_in(v)}
    if isinstance(value, (list, tuple)):
        return {s for v in value for s in strings_in(v)}
    return set()


def closure_with_entries(start: Iterable[Path], root: Path = ROOT, named: Iterable[str] = ()
                         ) -> dict[Path, tuple[str, ...]]:
    """:func:`closure`, plus the modules of the registry entries the files build: those named by
    a string in ``named`` (the stage's params) or by a literal in the files (:func:`names_used`),
    to a fixed point."""
    named = set(named)
    start = list(start)
    found = closure(start, root)
    while True:
        registries: dict[str, list[RegistryEntry]] = {}
        for f in found:
            if f.suffix == ".py":
                for e in registry_entries(f):
                    registries.setdefault(e.registry, []).append(e)
        used = {(r, e.name) for r, es in registries.items() for e in es if e.name in named}
        for f in found:
            if f.suffix == ".py":
                used |= names_used(f, registries)
        extra = []
        for reg, name in sorted(used):
            for e in registries.get(reg, []):
                if e.name == name:
                    extra += [(m, f"{reg}[{name!r}]") for m in e.modules]
        more = {}
        for m, why in extra:
            f = module_file(m, root)
            if f is not None and f not in found:
                for g, chain in closure([f], root).items():
                    more.setdefault(g, (why,) + chain)
        more = {g: c for g, c in more.items() if g not in found}
        if not more:
            return dict(sorted(found.items()))
        found.update(more)


# --------------------------------------------------------------------------------------------
# dvc.yaml
# --------------------------------------------------------------------------------------------

def load_stages(root: Path = ROOT) -> dict[str, dict]:
    """``dvc.yaml`` stages; a ``foreach``/``matrix`` stage gives its ``do`` body (or itself)."""
    data = yaml.safe_load((root / "dvc.yaml").read_text())
    out = {}
    for name, st in (data.get("stages") or {}).items():
        out[name] = st.get("do", st) if isinstance(st, dict) else {}
    return out


def stage_module(stage: dict) -> str | None:
    """``flows.stages.<name>`` for a ``python -m flows.stages.<name>`` stage, else ``None``."""
    cmd = stage.get("cmd")
    cmd = cmd if isinstance(cmd, str) else None
    if not cmd or not cmd.strip().startswith(STAGE_PREFIX):
        return None
    return cmd.strip().split()[2]


def dep_paths(stage: dict) -> list[str]:
    out = []
    for d in stage.get("deps") or []:
        out.append(next(iter(d)) if isinstance(d, dict) else str(d))
    return [d.rstrip("/") for d in out]


def covers(dep: str, rel: str) -> bool:
    """A dep covers a file if it is that file or one of its parent folders."""
    return rel == dep or rel.startswith(dep + "/")


def load_scales(root: Path = ROOT) -> dict[str, dict]:
    """The scale files ``scales/<scale>.yaml``: scale -> its blocks (section -> overrides)."""
    return {f.stem: yaml.safe_load(f.read_text()) or {} for f in sorted((root / "scales").glob("*.yaml"))}


def params_strings(stage: dict, root: Path = ROOT) -> set[str]:
    """Every string in the params sections ``stage`` lists, with every scale's override of them
    (``scales/<scale>.yaml``'s block of the section): the registry names a stage's params can select."""
    path = root / "params.yaml"
    if not path.is_file():
        return set()
    params = yaml.safe_load(path.read_text()) or {}
    scales = load_scales(root)
    out: set[str] = set()
    for key in param_keys(stage):
        node: object = params
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        out |= strings_in(node)
        if not key.startswith("base."):
            for block in scales.values():
                out |= strings_in((block or {}).get(key.split(".")[0]))
    return out


def stage_closure(stage: dict, root: Path = ROOT) -> dict[Path, tuple[str, ...]]:
    mod = stage_module(stage)
    if mod is None:
        return {}
    f = module_file(mod, root)
    if f is None:
        raise FileNotFoundError(f"{mod}: no such module under {root}")
    return closure_with_entries([f], root, params_strings(stage, root))


def _rel(p: Path, root: Path) -> str:
    return p.relative_to(root).as_posix()


def missing_deps(stage: dict, root: Path = ROOT) -> dict[str, tuple[str, ...]]:
    """Closure files no dep covers, each with its import chain."""
    deps = dep_paths(stage)
    return {_rel(f, root): chain for f, chain in stage_closure(stage, root).items()
            if not any(covers(d, _rel(f, root)) for d in deps)}


def stale_deps(stage: dict, root: Path = ROOT) -> list[str]:
    """Code deps (under a project package) that cover no file of the closure."""
    files = [_rel(f, root) for f in stage_closure(stage, root)]
    return [d for d in dep_paths(stage) if d.split("/")[0] in PACKAGES and not any(covers(d, f) for f in files)]


def suggested_deps(stage: dict, root: Path = ROOT) -> list[str]:
    """The closure as a ``deps`` list: a folder when every ``.py`` file under it is in the
    closure (largest such folder first), else the files; in path order."""
    files = {_rel(f, root) for f in stage_closure(stage, root)}

    def py_files(folder: Path) -> set[str]:
        return {_rel(p, root) for p in folder.rglob("*.py") if "__pycache__" not in p.parts and not runs_nothing(p)}

    out: list[str] = []
    done: set[str] = set()
    for top in PACKAGES:
        todo = [root / top]
        while todo:
            folder = todo.pop(0)
            inside = py_files(folder)
            if not inside & files:
                continue
            if folder != root / top and inside <= files:
                out.append(_rel(folder, root))
                done |= {f for f in files if covers(_rel(folder, root), f)}
                continue
            todo += sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__")
    out += sorted(files - done)
    return sorted(out)


def sections_read(path: Path) -> set[str]:
    """The params sections a stage module loads by name: the string literal given to
    ``load_section(cls, "<section>", ...)``, any ``section="<section>"`` keyword (a ModelSpec) and
    any ``params["<section>"]`` subscript (a part of another stage's section read with ``from_dict``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "params"
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            out.add(node.slice.value)
        if not isinstance(node, ast.Call):
            continue
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if fn == "load_section" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            out.add(node.args[1].value)
        out |= {k.value.value for k in node.keywords
                if k.arg == "section" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
    return out - {"base"}


SCALE_FILE = "scales/${base.scale}.yaml"     # the params file of the scale a stage runs at


def param_keys(stage: dict) -> list[str]:
    """The ``params.yaml`` keys a stage lists (its entries of other params files are not)."""
    out: list[str] = []
    for k in stage.get("params") or []:
        if isinstance(k, str):
            out.append(k)
        elif isinstance(k, dict) and "params.yaml" in k:
            out += list(k["params.yaml"] or [])
    return out


def scale_sections(stage: dict) -> list[str]:
    """The sections a stage lists of its scale's file (``scales/${base.scale}.yaml: [...]``)."""
    for k in stage.get("params") or []:
        if isinstance(k, dict) and SCALE_FILE in k:
            return list(k[SCALE_FILE] or [])
    return []


# --------------------------------------------------------------------------------------------
# layering (DESIGN.md): the direct imports of every project file
# --------------------------------------------------------------------------------------------

def project_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for top in PACKAGES for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)


# components' floors (DESIGN.md): a module may import its own floor and the ones below, never above.
# The top-level modules: config, io, registry, recipes, seeds are the ground; checkpoints rebuilds energies
# and networks, so it stands on the energies' floor; bench (harnesses and naive baselines) on top.
RANK = {"config": 0, "io": 0, "registry": 0, "recipes": 0, "seeds": 0, "data": 0, "structures": 0, "models": 1, "energies": 2,
        "checkpoints": 2, "inference": 3, "training": 4, "bench": 5}
# at the side: importable from any floor, importing only the ground (and, for reports, metrics)
SIDE = {"metrics": {"metrics"}, "tracking": {"tracking"}, "reports": {"reports", "metrics"}}
GROUND = {"config", "io", "recipes", "seeds"}


def _part(module: str) -> str | None:
    """``components.inference.beam`` -> ``inference``; ``components.config`` -> ``config``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "components" and len(parts) > 1 else None


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import inside a function or method body (not ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in _runtime_nodes(fn):
                if isinstance(node, ast.Import):
                    out += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((node.lineno, _resolve_relative(path, node.level, node.module, ROOT)
                                if node.level else node.module or ""))
    return out


def layering_violations(root: Path = ROOT) -> list[str]:
    """``file:line: what`` for each import that breaks the DESIGN.md layering rules:
    no stage module imports another stage module (``flows.stages.common`` is shared);
    nothing under ``components/`` imports ``flows``; only ``components/tracking/`` imports
    mlflow; only ``flows/`` imports ray; inside components, imports go down the floors of
    :data:`RANK` (a side package of :data:`SIDE` imports only the ground and what it lists;
    reports import no registry); and no project import inside a function of components (a
    lazy import there dodges a cycle: move the shared part down a floor instead). The
    one exception is ``components/tracking/base.py`` importing its MLflow tracker when one is
    asked for (so that a run without MLflow never imports mlflow)."""
    out = []
    for f in project_files(root):
        rel = _rel(f, root)
        me = module_name(f, root)
        mine = _part(me)
        for imp in imports_of(f, root):
            top = imp.module.split(".")[0]
            where = f"{rel}:{imp.line}: imports {imp.module}"
            if rel.startswith("flows/stages/") and imp.module.startswith("flows.stages.") \
                    and imp.module not in ("flows.stages.common", me) and module_file(imp.module, root):
                out.append(f"{where}: a stage module imports another stage (move the shared part to "
                           f"components/ or flows/)")
            if rel.startswith("components/") and top == "flows":
                out.append(f"{where}: components never import flows")
            if top == "mlflow" and not rel.startswith("components/tracking/"):
                out.append(f"{where}: only components/tracking imports mlflow")
            if top == "ray" and not rel.startswith("flows/"):
                out.append(f"{where}: only flows/ imports ray")
            theirs = _part(imp.module) if top == "components" else None
            if mine is None or theirs is None or theirs == mine:
                continue
            if mine in SIDE:
                if theirs not in GROUND | SIDE[mine]:
                    out.append(f"{where}: {mine} is at the side and imports only {sorted(GROUND | SIDE[mine])}"
                               + (" (reports import no registry: pass them the labels they print)"
                                  if mine == "reports" else ""))
            elif theirs in RANK and mine in RANK and RANK[theirs] > RANK[mine]:
                out.append(f"{where}: back-arrow: {mine} (floor {RANK[mine]}) imports {theirs} (floor "
                           f"{RANK[theirs]}); layering is data, structures -> models -> energies -> inference "
                           f"-> training (move the shared part down a floor)")
            elif theirs == "tracking" or (theirs == "reports" and mine != "bench"):
                out.append(f"{where}: components import {theirs} only from flows")
        if rel.startswith("components/") and rel != "components/tracking/base.py":
            for line, mod in _function_level_imports(f):
                if mod.split(".")[0] == "components":
                    out.append(f"{rel}:{line}: imports {mod}: a function-level import in components "
                               f"(import at the top; if that makes a cycle, move the shared part down a floor)")
    return sorted(set(out))


def package_cycles(root: Path = ROOT) -> list[tuple[str, str]]:
    """Pairs (a, b) of components packages where a reaches b and b reaches a through imports
    (a cycle of any length), each pair once."""
    edges: set[tuple[str, str]] = set()
    for f in project_files(root):
        mine = _part(module_name(f, root))
        for imp in imports_of(f, root):
            theirs = _part(imp.module) if imp.module.split(".")[0] == "components" else None
            if mine and theirs and mine != theirs:
                edges.add((mine, theirs))
    reach = {a: {b for x, b in edges if x == a} for a, _ in edges}
    changed = True
    while changed:
        changed = False
        for a in reach:
            more = set().union(*(reach.get(b, set()) for b in reach[a])) - reach[a]
            if more:
                reach[a] |= more
                changed = True
    return sorted((a, b) for a in reach for b in reach[a] if a < b and a in reach.get(b, set()))


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def report(names: list[str], root: Path = ROOT) -> bool:
    """Print closure, suggested deps, missing and stale deps per stage; True if all is covered."""
    stages = load_stages(root)
    ok = True
    for name in names or list(stages):
        if name not in stages:
            raise SystemExit(f"unknown stage {name!r}; dvc.yaml has {sorted(stages)}")
        st = stages[name]
        if stage_module(st) is None:
            print(f"# {name}: cmd is not `{STAGE_PREFIX}<name>`; skipped\n")
            continue
        print(f"# {name}: {len(stage_closure(st, root))} project files imported")
        print(f"{name}:\n  deps:  # code (keep the data/model/metric deps)")
        for d in suggested_deps(st, root):
            print(f"    - {d}")
        miss, stale = missing_deps(st, root), stale_deps(st, root)
        for f, chain in miss.items():
            print(f"  # MISSING {f}  (via {' -> '.join(chain)})")
        for d in stale:
            print(f"  # STALE   {d}  (imported by nothing the stage runs)")
        ok &= not miss and not stale
        print()
    return ok


WIDTH = 118       # the column a flow list of deps wraps at


def flow_list(items: list[str], indent: str, width: int = WIDTH) -> list[str]:
    """``deps: [a, b, ...]`` as lines of at most ``width`` columns (several paths a line), each
    continuation aligned under the first item."""
    head = f"{indent}deps: ["
    pad = " " * len(head)
    lines, cur = [], head
    for i, it in enumerate(items):
        if any(c in it for c in "{}[],#:&*!|>'\"%@`"):
            it = '"' + it + '"'
        tok = it + ("]" if i == len(items) - 1 else ",")
        if cur not in (head, pad) and len(cur) + 1 + len(tok) > width:
            lines.append(cur.rstrip() + "\n")
            cur = pad
        cur += ("" if cur in (head, pad) else " ") + tok
    lines.append(cur + "\n")
    return lines


def _deps_block(lines: list[str], start: int, stop: int) -> tuple[int, int, str] | None:
    """(first line, end line, indent) of the ``deps:`` entry between ``start`` and ``stop``, as a
    block list (``deps:`` then ``- x`` lines) or a flow list (``deps: [x, y,`` ... ``]``)."""
    for i in range(start, stop):
        st = lines[i].strip()
        if st == "deps:" or st.startswith("deps: ["):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            j = i + 1
            if st == "deps:":
                while j < stop and lines[j].startswith(indent + "  - "):
                    j += 1
            else:
                k = i
                while "]" not in lines[k].split("#")[0]:
                    k += 1
                j = k + 1
            return i, j, indent
    return None


def rewrite_dvc_yaml(names: list[str], root: Path = ROOT) -> list[str]:
    """Replace each stage's ``deps`` with a flow list: its other deps (data, models, metrics)
    first and in their order, then :func:`suggested_deps`; every other line of ``dvc.yaml`` is kept.
    Returns the stages changed."""
    stages = load_stages(root)
    lines = (root / "dvc.yaml").read_text().splitlines(keepends=True)
    changed = []
    for name in names or list(stages):
        st = stages[name]
        if stage_module(st) is None:
            continue
        head = next((i for i, ln in enumerate(lines) if ln.rstrip() == f"  {name}:"), None)
        if head is None:
            raise SystemExit(f"dvc.yaml: stage {name!r} is not written as `  {name}:`; edit its deps by hand")
        stop = next((i for i in range(head + 1, len(lines)) if lines[i].startswith("  ")
                     and not lines[i].startswith("   ") and lines[i].strip()), len(lines))
        found = _deps_block(lines, head + 1, stop)
        if found is None:
            raise SystemExit(f"dvc.yaml: stage {name!r} has no `deps:` entry; add one by hand")
        i, j, indent = found
        keep = [d for d in dep_paths(st) if d.split("/")[0] not in PACKAGES]
        new = flow_list(keep + suggested_deps(st, root), indent)
        if lines[i:j] != new:
            lines[i:j] = new
            changed.append(name)
    (root / "dvc.yaml").write_text("".join(lines))
    return changed


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if "--layering" in args:
        v = layering_violations()
        print("\n".join(v) or "layering: no violations")
        return 1 if v and check else 0
    if "--write" in args:
        changed = rewrite_dvc_yaml([a for a in args if a != "--write"])
        print(f"dvc.yaml: code deps rewritten for {changed or 'no stage (already up to date)'}")
        return 0
    ok = report(args)
    return 0 if ok or not check else 1


if __name__ == "__main__":
    raise SystemExit(main())
