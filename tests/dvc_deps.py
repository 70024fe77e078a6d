"""Static import closure of the ``dvc.yaml`` stages: which project files each stage runs.

A stage whose ``cmd`` is ``python -m flows.stages.<name>`` runs ``flows/stages/<name>.py`` and
everything it imports, at the top or lazily inside a function. This module parses those files
with :mod:`ast` (nothing is imported or executed), follows every ``import`` / ``from ... import``
into the project packages (``components``, ``flows``; relative imports too), and adds each
package's ``__init__.py`` on the way (importing ``components.inference.exact`` runs
``components/__init__.py`` and ``components/inference/__init__.py``, which import more).
A non-Python file that a module names by a string constant and that lies beside it (e.g.
``CHECKSUMS_PATH = Path(__file__).with_name("checksums.json")``) is part of the closure too.
Dynamic imports (``importlib.import_module(f"...{x}")``) are not followed.

``python -m tests.dvc_deps [stage ...]`` prints, per stage, the closure and a ``deps`` list for
``dvc.yaml`` (a folder when every Python file under it is needed, else the files), followed by
what the stage's current ``deps`` miss or list without need. ``--check`` exits 1 if anything
is missing or stale; ``--write`` rewrites the code deps in ``dvc.yaml`` (other deps and lines
kept); ``--layering`` lists the imports that break the DESIGN.md layering rules.
``tests/test_dvc_deps.py`` asserts all of it.
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
    return dict(sorted(found.items()))


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


def stage_closure(stage: dict, root: Path = ROOT) -> dict[Path, tuple[str, ...]]:
    mod = stage_module(stage)
    if mod is None:
        return {}
    f = module_file(mod, root)
    if f is None:
        raise FileNotFoundError(f"{mod}: no such module under {root}")
    return closure([f], root)


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
        return {_rel(p, root) for p in folder.rglob("*.py") if "__pycache__" not in p.parts}

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


def param_keys(stage: dict) -> list[str]:
    return [k if isinstance(k, str) else next(iter(k)) for k in stage.get("params") or []]


# --------------------------------------------------------------------------------------------
# layering (DESIGN.md): the direct imports of every project file
# --------------------------------------------------------------------------------------------

def project_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for top in PACKAGES for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)


def layering_violations(root: Path = ROOT) -> list[str]:
    """``file:line: what`` for each import that breaks the DESIGN.md layering rules:
    no stage module imports another stage module (``flows.stages.common`` is shared);
    nothing under ``components/`` imports ``flows``; only ``components/tracking/`` imports
    mlflow; only ``flows/`` imports ray."""
    out = []
    for f in project_files(root):
        rel = _rel(f, root)
        me = module_name(f, root)
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
    return sorted(set(out))


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


def rewrite_dvc_yaml(names: list[str], root: Path = ROOT) -> list[str]:
    """Replace the code deps (paths under a project package) of each stage with
    :func:`suggested_deps`, keeping its other deps (data, models, metrics) first and in their
    order, and every other line of ``dvc.yaml`` as it is. Returns the stages changed."""
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
        i = head + 1
        while i < len(lines) and not (lines[i].startswith("  ") and not lines[i].startswith("   ")
                                      and lines[i].strip()) and lines[i].strip() != "deps:":
            i += 1
        if i >= len(lines) or lines[i].strip() != "deps:":
            raise SystemExit(f"dvc.yaml: stage {name!r} has no `deps:` block; add one by hand")
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())] + "  "
        j = i + 1
        while j < len(lines) and lines[j].startswith(indent + "- "):
            j += 1
        keep = [d for d in dep_paths(st) if d.split("/")[0] not in PACKAGES]
        new = [f"{indent}- {d}\n" for d in keep + suggested_deps(st, root)]
        if lines[i + 1:j] != new:
            lines[i + 1:j] = new
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
