"""Where a run's results come from: the git commit, the DVC stage and the data it read.

Every stage run (and the runs nested in it: sweep parents, trials) carries

- ``mlflow.source.git.commit`` — ``HEAD`` of the git repository holding the project root — and
  ``git.dirty`` (``true``/``false``): whether tracked files differ from that commit, not counting
  the pipeline's own outputs (``dvc.lock`` and the ``outs``/``metrics``/``plots`` of ``dvc.yaml``,
  which ``dvc repro`` rewrites between stages); ``git.dirty_files`` lists the first changed paths;
- ``dvc.stage`` — the stage's name as DVC knows it (``train@pos``, ``report``);

and logs as MLflow dataset inputs the stage's ``dvc.yaml`` deps under ``data/`` (for instance
``data/prepared/pos``), each with DVC's hash as its digest: the md5 of a file's bytes, or for a
folder the md5 of DVC's JSON listing of its files' md5s plus ``.dir`` — the value ``dvc.lock``
records for that dep, so a run can be matched to a ``dvc.lock`` entry and a DVC cache object.

Nothing here imports mlflow or dvc: ``dvc.yaml`` is read as YAML and its ``foreach`` and
``${...}`` references are resolved from the params the stage was given; the hashes are computed
from the files (a few MB of Parquet per stage; a cheap, always-current answer, where ``dvc.lock``
holds the hashes of the *previous* run while a stage is being reproduced).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

GIT_COMMIT = "mlflow.source.git.commit"
GIT_BRANCH = "mlflow.source.git.branch"
GIT_DIRTY = "git.dirty"
GIT_DIRTY_FILES = "git.dirty_files"
DVC_STAGE = "dvc.stage"
DATA_PREFIX = "data/"
_REF = re.compile(r"\$\{\s*([A-Za-z0-9_.\-]+)\s*\}")
_MAX_DIRTY_LISTED = 20

log = logging.getLogger(__name__)
Stages = list[tuple[str, dict[str, Any]]]        # resolved dvc.yaml stages: (name, body)


@dataclass(frozen=True)
class DataInput:
    """One data dependency of a stage: ``path`` relative to the project root, its DVC hash
    (``digest``: md5, or md5 + ``.dir`` for a folder), and its number of files and bytes."""
    path: str
    digest: str
    nfiles: int
    size: int

    @property
    def name(self) -> str:
        return self.path


# --- git ---------------------------------------------------------------------------------------

def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})   # status must not take index.lock
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_tags(root: str | Path, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """``{GIT_COMMIT, GIT_BRANCH, GIT_DIRTY[, GIT_DIRTY_FILES]}`` for the repository holding
    ``root``; ``{}`` when it is not in a git repository (or git is missing). Changed paths equal
    to, or under, an entry of ``exclude`` (relative to ``root``) do not make it dirty."""
    root = Path(root)
    commit = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    if not commit:
        return {}
    tags = {GIT_COMMIT: commit.strip()}
    branch = (_git(root, "rev-parse", "--abbrev-ref", "HEAD") or "").strip()
    if branch and branch != "HEAD":
        tags[GIT_BRANCH] = branch
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    if status is None:
        return tags
    changed = _porcelain_paths(status)
    sub = (_git(root, "rev-parse", "--show-prefix") or "").strip()     # root's path inside the repository
    prefixes = tuple(sub + e.rstrip("/") for e in exclude)
    dirty = sorted(p for p in changed if not any(p == e or p.startswith(e + "/") for e in prefixes))
    tags[GIT_DIRTY] = "true" if dirty else "false"
    if dirty:
        listed = dirty[:_MAX_DIRTY_LISTED]
        more = len(dirty) - len(listed)
        tags[GIT_DIRTY_FILES] = ", ".join(listed) + (f", ... ({more} more)" if more else "")
    return tags


def _porcelain_paths(status: str) -> set[str]:
    """Paths of ``git status --porcelain=v1 -z`` (both sides of a rename)."""
    out: set[str] = set()
    fields = status.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        out.add(entry[3:])
        if entry[0] in "RC":         # a rename/copy is followed by its source path
            if i < len(fields) and fields[i]:
                out.add(fields[i])
            i += 1
    return out


# --- dvc.yaml ----------------------------------------------------------------------------------

def _lookup(params: dict[str, Any], key: str) -> Any:
    cur: Any = params
    for part in key.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(key)
    return cur


def _interp(value: Any, ctx: dict[str, Any], params: dict[str, Any]) -> Any:
    """``value`` with DVC's ``${name}`` references resolved from ``ctx`` (``item``, ``key``) or
    ``params`` (in strings, and in mapping keys such as ``- metrics/x/${item}.json: {cache: false}``);
    a string that is one whole reference becomes the referenced value itself."""
    if isinstance(value, dict):
        return {(_interp(k, ctx, params) if isinstance(k, str) else k): _interp(v, ctx, params)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_interp(v, ctx, params) for v in value]
    if not isinstance(value, str):
        return value

    def get(name: str) -> Any:
        head = name.split(".", 1)[0]
        if head in ctx:
            return ctx[head] if head == name else _lookup({head: ctx[head]}, name)
        return _lookup(params, name)

    whole = _REF.fullmatch(value.strip())
    if whole:
        return get(whole.group(1))
    return _REF.sub(lambda m: str(get(m.group(1))), value)


def resolved_stages(root: str | Path, params: dict[str, Any]) -> Stages:
    """``(name, stage)`` for each stage of ``<root>/dvc.yaml`` (``[]`` without one), ``foreach`` and
    ``matrix`` expanded as DVC names them (``train@pos``; ``name@a-b`` for a matrix), references
    resolved from ``params``. A stage whose references cannot be resolved is left out with a warning."""
    path = Path(root) / "dvc.yaml"
    if not path.exists():
        return []
    data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    return list(_expand(path, data.get("stages") or {}, params))


def _expand(path: Path, stages: dict[str, Any], params: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, st in stages.items():
        try:
            if "foreach" in st:
                items = _interp(st["foreach"], {}, params)
                pairs = items.items() if isinstance(items, dict) else ((str(v), v) for v in items)
                for key, item in pairs:
                    yield f"{name}@{key}", _interp(st.get("do") or {}, {"item": item, "key": key}, params)
            elif "matrix" in st:
                axes = {k: _interp(v, {}, params) for k, v in st["matrix"].items()}
                combos: list[dict[str, Any]] = [{}]
                for axis, values in axes.items():
                    combos = [{**c, axis: v} for c in combos for v in values]
                for combo in combos:
                    key = "-".join(str(v) for v in combo.values())
                    body = {k: v for k, v in st.items() if k != "matrix"}
                    yield f"{name}@{key}", _interp(body, {"item": combo}, params)
            else:
                yield name, _interp(st, {}, params)
        except (KeyError, TypeError, ValueError) as e:
            log.warning("%s: stage %r: cannot resolve %s; its deps are not recorded", path, name, e)


def _entry_path(entry: Any) -> str | None:
    """A ``deps``/``outs`` entry is a path or ``{path: options}``."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    return None


def stage_deps(stages: Stages, stage: str) -> list[str] | None:
    """The ``deps`` of ``stage`` (``train@pos``) among ``resolved_stages``; ``None`` if it is not one."""
    for name, st in stages:
        if name == stage:
            return [p for p in map(_entry_path, st.get("deps") or []) if p]
    return None


def pipeline_outputs(stages: Stages) -> tuple[str, ...]:
    """``dvc.lock`` and every ``outs``/``metrics``/``plots`` path of the ``resolved_stages``: what the
    pipeline itself writes (changes to those do not make a run's source dirty)."""
    outs = {"dvc.lock"}
    for _, st in stages:
        for field in ("outs", "metrics", "plots"):
            outs.update(p for p in map(_entry_path, st.get(field) or []) if p)
    return tuple(sorted(outs))


# --- DVC hashes --------------------------------------------------------------------------------

def file_md5(path: str | Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dvc_hash(path: str | Path) -> tuple[str, int, int]:
    """``(hash, nfiles, size)`` as DVC 3 records them (``hash: md5``): a file's md5; for a folder,
    the md5 of ``json.dumps(sorted [{"md5", "relpath"}], sort_keys=True)`` + ``.dir``
    (``dvc_data.hashfile.tree.Tree.as_bytes``). ``.dvcignore`` patterns are not applied."""
    path = Path(path)
    if path.is_file():
        return file_md5(path), 1, path.stat().st_size
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    entries, size = [], 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".dvc")]
        for fn in filenames:
            p = Path(dirpath) / fn
            entries.append({"md5": file_md5(p), "relpath": p.relative_to(path).as_posix()})
            size += p.stat().st_size
    entries.sort(key=lambda e: e["relpath"])
    listing = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.md5(listing).hexdigest() + ".dir", len(entries), size


def stage_inputs(root: str | Path, stages: Stages, stage: str) -> list[DataInput]:
    """The ``deps`` of ``stage`` (among ``resolved_stages(root, ...)``) under ``data/`` that exist,
    with their DVC hashes."""
    root = Path(root)
    out = []
    for dep in stage_deps(stages, stage) or []:
        if not dep.startswith(DATA_PREFIX):
            continue
        p = root / dep
        if not p.exists():
            log.warning("%s: a dep of stage %s in dvc.yaml does not exist; not recorded as an input", p, stage)
            continue
        digest, nfiles, size = dvc_hash(p)
        out.append(DataInput(path=dep, digest=digest, nfiles=nfiles, size=size))
    return out


def stage_provenance(root: str | Path, stage: str, params: dict[str, Any]) -> tuple[dict[str, str], list[DataInput]]:
    """``(tags, inputs)`` of a run of ``stage`` (its DVC name) in the project at ``root``: the git
    tags and ``dvc.stage``, and the stage's data deps. Never raises for a project without git or
    ``dvc.yaml``: it records what it can and logs what it cannot."""
    tags = {DVC_STAGE: stage}
    try:
        stages = resolved_stages(root, params)
    except (OSError, yaml.YAMLError) as e:
        log.warning("%s: dvc.yaml unreadable; the stage's data inputs are not recorded: %s", root, e)
        stages = []
    tags.update(git_tags(root, exclude=pipeline_outputs(stages)))
    try:
        inputs = stage_inputs(root, stages, stage)
    except OSError as e:
        log.warning("%s: the data inputs of stage %s are not recorded: %s", root, stage, e)
        inputs = []
    return tags, inputs
