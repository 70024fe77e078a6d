"""``approxinfer``: the command line for what users do with the project (docs/cli.md).

    approxinfer run [STAGE ...] [--force] [--scale default|study|paper] [--dry-run]
    approxinfer study STAGE --trials N [--task TASK[/VARIANT]] [--apply]
    approxinfer predict MODEL --input FILE [--format conll|text] [--method M] [--option K=V] [--output FILE]
    approxinfer report [PAPER ...] [--force] [--dry-run]
    approxinfer exp STUDY [-- DVC_ARG ...]
    approxinfer ui [--store URI] [--port 5000]
    approxinfer dashboard [--port 8080]

Thin: ``run`` and ``report`` run ``dvc repro`` (``run --scale`` runs ``dvc exp run -S
base.scale=...``), printing the command first; ``study`` is :func:`flows.study.run_study` plus
``--apply``, which writes the study's best values into ``params.yaml`` (only the values change:
comments, order and layout of the file stay as they are; the file is replaced atomically);
``predict`` loads a model folder or a registered MLflow model (``models:/name/version``,
``models:/name@alias``) and tags a file with :mod:`components.inference.predict`; ``ui`` and
``dashboard`` start the same servers as ``make ui`` and ``make dashboard``. Neither server has any
authentication: a ``--host`` other than a loopback address prints a warning on stderr
(:func:`warn_if_exposed`, which ``make ui`` / ``make dashboard`` run too).

Bad input (an unknown stage, a malformed input line, a missing model) is one line on stderr,
``approxinfer <command>: error: ...``, and exit status 2; ``--debug`` shows the traceback instead.
"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

import yaml  # noqa: E402

from components.config import ConfigError, get_dotted, load_params, resolve_scale, scale_overrides  # noqa: E402
from components.data.types import FormatError  # noqa: E402
from flows.scale_pipeline import PAPERS, SCALE_DIR, report_folder, resolve_refs, target  # noqa: E402

PROG = "approxinfer"
SCALES = ("default", "study", "paper")
log = logging.getLogger(__name__)


class UsageError(ConfigError):
    """A command-line mistake: one line and exit status 2."""


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------

def _tool(name: str) -> str:
    """The console script ``name`` of this environment (beside the Python running us), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise UsageError(f"{name}: not installed in this environment (pip install -e '.[test,bench]')")
    return found


def _exec(cmd: list[str], root: Path, *, dry_run: bool, env: dict[str, str] | None = None,
          err: Callable[[str], None]) -> int:
    """Print ``cmd`` (as a shell line) and run it in ``root`` unless ``dry_run`` -> its exit status."""
    shown = " ".join(shlex.quote(c) for c in [Path(cmd[0]).name, *cmd[1:]])   # the tool of this environment
    extra = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    err(f"$ {extra + ' ' if extra else ''}{shown}" + (f"   (in {root})" if root != Path.cwd() else ""))
    if dry_run:
        return 0
    try:
        return subprocess.run(cmd, cwd=root, env={**os.environ, **(env or {})}).returncode
    except KeyboardInterrupt:
        return 130


def dvc_stages(root: Path) -> dict[str, dict[str, Any]]:
    """The stages of ``root/dvc.yaml`` (name -> body), or a UsageError naming the file."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise UsageError(f"{path}: no dvc.yaml (run from the project root or pass --root)")
    try:
        stages = (yaml.safe_load(path.read_text()) or {}).get("stages") or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UsageError(f"{path}:{mark.line + 1 if mark else '?'}: not valid YAML ({getattr(e, 'problem', e)})") from None
    return stages


def check_stage_names(names: Sequence[str], stages: dict[str, dict[str, Any]], path: Path) -> None:
    """Each of ``names`` is a stage of dvc.yaml, or ``stage@item`` of a ``foreach`` stage."""
    for n in names:
        stage, at, item = n.partition("@")
        if stage not in stages or (at and "foreach" not in stages[stage]) or (at and not item):
            known = ", ".join(sorted(s + ("[@item]" if "foreach" in b else "") for s, b in stages.items()))
            raise UsageError(f"stage {n!r}: not a stage of {path} (stages: {known})")


def _params_path(args: argparse.Namespace, root: Path) -> Path:
    return Path(args.params) if Path(args.params).is_absolute() else root / args.params


def _params(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path}: no params file (pass --params)")
    return load_params(path)


# --------------------------------------------------------------------------------------------
# run / report
# --------------------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    root = Path(args.root).resolve()
    force = ["--force"] if args.force else []
    if args.paper is not None:               # one paper in its scale's own pipeline (study/dvc.yaml)
        if args.stages or args.scale not in SCALE_DIR:
            raise ConfigError(f"--paper runs a paper's whole chain in a scale's own pipeline: give --scale "
                              f"{' or '.join(SCALE_DIR)} and no STAGE")
        return _exec([_tool("dvc"), "repro", *force, target(args.paper, args.scale)], root, dry_run=args.dry_run, err=err)
    check_stage_names(args.stages, dvc_stages(root), root / "dvc.yaml")
    if args.scale is None:
        cmd = [_tool("dvc"), "repro", *force, *args.stages]
    else:
        cmd = [_tool("dvc"), "exp", "run", "-S", f"base.scale={args.scale}", *force, *args.stages]
    return _exec(cmd, root, dry_run=args.dry_run, err=err)


def report_stages(root: Path, params: dict[str, Any]) -> dict[str, str]:
    """paper (the folder under ``reports/``) -> the dvc.yaml stage that writes its report (the
    scale pipeline's :func:`~flows.scale_pipeline.report_folder`, ``${...}`` resolved from params)."""
    out: dict[str, str] = {}
    for name, body in dvc_stages(root).items():
        if "foreach" in body or "matrix" in body:
            continue
        try:
            folder = report_folder(resolve_refs({k: body.get(k) for k in ("outs", "plots")}, params, name), name)
        except ConfigError:
            continue
        out.setdefault(Path(folder).parts[1], name)
    return dict(sorted(out.items()))


def cmd_report(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    root = Path(args.root).resolve()
    papers = report_stages(root, _params(_params_path(args, root)))
    if args.list:
        for paper, stage in papers.items():
            out(f"{paper}\t{stage}\treports/{paper}/")
        return 0
    unknown = [p for p in args.papers if p not in papers]
    if unknown:
        raise UsageError(f"paper {unknown[0]!r}: no dvc.yaml stage writes reports/{unknown[0]}/ "
                         f"(papers: {', '.join(papers)})")
    stages = list(dict.fromkeys(papers[p] for p in (args.papers or papers)))
    cmd = [_tool("dvc"), "repro", *(["--force"] if args.force else []), *stages]
    return _exec(cmd, root, dry_run=args.dry_run, err=err)


# --------------------------------------------------------------------------------------------
# study --apply: write values into params.yaml, changing nothing else in the file
# --------------------------------------------------------------------------------------------

def _yaml_scalar(value: Any) -> str:
    """``value`` as a YAML flow scalar (``0.0123``, ``8``, ``true``, ``'a b'``)."""
    if isinstance(value, (dict, list, tuple)):
        raise UsageError(f"cannot write {value!r} into params.yaml: only single values (numbers, strings, booleans)")
    text = yaml.safe_dump([value], default_flow_style=True, width=10_000).strip()
    return text[1:-1]


def _scalar_end(line: str, col: int, flow: bool) -> int:
    """Where the plain or quoted scalar starting at ``line[col]`` ends (exclusive)."""
    if col < len(line) and line[col] in "'\"":
        q = line[col]
        i = col + 1
        while i < len(line):
            if line[i] == q:
                if q == "'" and i + 1 < len(line) and line[i + 1] == "'":
                    i += 2
                    continue
                return i + 1
            i += 2 if (q == '"' and line[i] == "\\") else 1
        return len(line)
    i = col
    while i < len(line):
        c = line[i]
        if flow and c in ",]}":
            break
        if c == "#" and i > col and line[i - 1] in " \t":
            break
        i += 1
    return len(line[:i].rstrip(" \t")) if i > col else i


def _set_in_yaml(text: str, path: Sequence[str], value: Any, where: str) -> str:
    """``text`` with the value at the mapping keys ``path`` set to ``value``: the scalar replaced in
    place when the key exists, else the missing keys inserted as the first entries of the deepest
    existing block mapping. Everything else in the text is kept byte for byte."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    doc = YAML(typ="rt").load(text)
    lines = text.split("\n")
    node: Any = doc
    for i, key in enumerate(path):
        if not isinstance(node, CommentedMap):
            raise UsageError(f"{where}: {'.'.join(path[:i])} is not a mapping")
        if key in node:
            if i == len(path) - 1:
                if isinstance(node[key], (dict, list)):
                    raise UsageError(f"{where}: {'.'.join(path)} holds a mapping or list, not a value")
                line, col = node.lc.value(key)
                end = _scalar_end(lines[line], col, bool(node.fa.flow_style()))
                lines[line] = lines[line][:col] + _yaml_scalar(value) + lines[line][end:]
                return "\n".join(lines)
            node = node[key]
            continue
        if i == 0:
            raise UsageError(f"{where}: no section {path[0]!r} to write {'.'.join(path)} into")
        if not node:
            raise UsageError(f"{where}: cannot add {'.'.join(path)} to the empty mapping {'.'.join(path[:i])}; "
                             f"add it by hand")
        if node.fa.flow_style():        # {a: 1} -> {a: 1, key: value}, when it is on one line
            entry = f"{path[-1]}: {_yaml_scalar(value)}"
            for k in reversed(path[i:-1]):
                entry = f"{k}: {{{entry}}}"
            last = list(node)[-1]
            line, col = node.lc.value(last)
            if node.lc.key(next(iter(node)))[0] != line or isinstance(node[last], (dict, list)):
                raise UsageError(f"{where}: cannot add {'.'.join(path)} inside the flow mapping "
                                 f"{'.'.join(path[:i])} (over several lines, or ending in a collection); "
                                 f"add it by hand")
            end = _scalar_end(lines[line], col, True)
            lines[line] = lines[line][:end] + f", {entry}" + lines[line][end:]
            return "\n".join(lines)
        # insert path[i:] into the block mapping ``node``, before its first key
        line, col = node.lc.key(next(iter(node)))
        new = []
        for depth, k in enumerate(path[i:]):
            last = depth == len(path) - i - 1
            new.append(" " * (col + 2 * depth) + f"{k}:" + (f" {_yaml_scalar(value)}" if last else ""))
        lines[line:line] = new
        return "\n".join(lines)
    raise UsageError(f"{where}: empty key")


def apply_params(params_path: Path, values: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Write ``values`` (dotted params keys -> values) where they take effect: in the scale file
    ``scales/<scale>.yaml`` beside the params file when the params' ``base.scale`` (not ``default``)
    overrides the key there (in a ``scales`` section of the params file, in the older layout), else
    at the key in the params file -> (``file: key`` written, old value, new value) per key. The
    result is loaded back (strictly, with its scale files) and checked before any file is replaced;
    each changed file is then replaced atomically."""
    from components.config import SCALES_DIR
    from components.io import write_text
    params = load_params(params_path)
    scale = (params.get("base") or {}).get("scale", "default")
    scale_file = params_path.parent / SCALES_DIR / f"{scale}.yaml"
    texts: dict[Path, str] = {}
    changes = []
    for key, value in values.items():
        try:
            old = get_dotted(resolve_scale(params), key)
        except ConfigError:
            old = None
        file, target = params_path, key.split(".")
        if scale != "default":
            block = (params.get("scales") or {}).get(scale) or {}
            for k, _ in scale_overrides(block, f"scales.{scale}"):
                if k == key:
                    section, rest = key.split(".", 1)
                    sub = [section, rest] if isinstance(block.get(section), dict) and rest in block[section] else [key]
                    file, target = (scale_file, sub) if scale_file.is_file() else (params_path, ["scales", scale, *sub])
        texts[file] = _set_in_yaml(texts.get(file) or file.read_text(), target, value, str(file))
        shown = file.relative_to(params_path.parent) if file.is_relative_to(params_path.parent) else file
        changes.append((f"{shown}: {'.'.join(target)}", old, value))
    with tempfile.TemporaryDirectory() as tmp:          # the result, loaded as the stages will load it
        copy = Path(tmp) / params_path.name
        copy.write_text(texts.get(params_path) or params_path.read_text())
        if (params_path.parent / SCALES_DIR).is_dir():
            (Path(tmp) / SCALES_DIR).mkdir()
            for f in (params_path.parent / SCALES_DIR).glob("*.yaml"):
                (Path(tmp) / SCALES_DIR / f.name).write_text(texts.get(f) or f.read_text())
        check = resolve_scale(load_params(copy))
    for key, value in values.items():
        got = get_dotted(check, key)
        if got != value and not (isinstance(got, float) and isinstance(value, float) and abs(got - value) <= 1e-12 * abs(value)):
            raise RuntimeError(f"{params_path}: writing {key} = {value!r} gave {got!r}; no file was changed")
    for file, text in texts.items():
        write_text(file, text)
    return changes


def existing_best(stage: str, params: dict[str, Any], root: Path, task: str | None) -> dict[str, Any]:
    """The summary of the user's study of ``stage`` (as :func:`flows.study.run_study` returns it),
    without adding trials."""
    import optuna
    from components.config import load_section
    from flows.study import pick_run, stage_spec
    from flows.study_storage import open_study_storage, shown_url, study_storage_url
    from flows.task_sweeps import sweep_name
    from flows.stages.common import stage_params
    spec = stage_spec(stage)
    cfg = load_section(spec.config, spec.section, stage_params(params))     # the study's task list, as a stage reads it
    task_name, variant = pick_run(spec, cfg, task)
    url = study_storage_url(root)
    name = sweep_name(stage, task_name, variant)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=name, storage=open_study_storage(url))
    except KeyError:
        raise UsageError(f"no study {name!r} in {shown_url(url)}: run `approxinfer study {stage} --trials N` "
                         f"first") from None
    try:
        best = study.best_trial
    except ValueError:
        raise UsageError(f"study {name!r}: no completed trial yet") from None
    return {"study": name, "storage": shown_url(url), "n_trials": len(study.trials), "best_value": best.value,
            "best_params": dict(best.params), "best_trial": best.number}


def _study_tracker(params: dict[str, Any], root: Path, stage: str) -> Any:
    """The tracker ``flows.study`` would make (the stage's study's experiment), its runs' Source the
    study module (not this program)."""
    from components.config import BaseConfig, load_section
    from components.tracking import make_tracker
    from flows.studies import experiment_name
    base = load_section(BaseConfig, "base", resolve_scale(params))
    tracker = make_tracker(base.tracker, experiment_name(base.experiment, stage), root)
    if hasattr(tracker, "source"):
        tracker.source = "flows/study.py"
    return tracker


def cmd_study(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    from flows.study import run_study
    root = Path(args.root).resolve()
    params_path = _params_path(args, root)
    params = _params(params_path)
    if args.trials is None and not args.apply:
        raise UsageError("give --trials N (trials to add), --apply (write the best values found so far), or both")
    if args.trials is not None:
        summary = run_study(args.stage, params, root, trials=args.trials, task=args.task,
                            tracker=_study_tracker(params, root, args.stage), out=lambda line: out(line))
    else:
        summary = existing_best(args.stage, params, root, args.task)
    out(f"study {summary['study']} ({summary['storage']}): {summary['n_trials']} trial(s); best trial "
        f"{summary['best_trial']}: {summary['best_value']:.6g} with {summary['best_params']}")
    if args.apply:
        for where, old, new in apply_params(params_path, summary["best_params"]):
            out(f"{where}: {old!r} -> {new!r}")
        out("`dvc params diff` shows the change; `approxinfer run` re-runs the stages that read it")
    return 0


# --------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------

def _options(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--option {item!r}: expected KEY=VALUE (e.g. --option lr=0.5)")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _prepared_dir(root: Path, params_path: Path) -> Path:
    try:
        rel = (load_params(params_path).get("base") or {}).get("prepared_dir", "data/prepared")
    except (OSError, ConfigError):
        rel = "data/prepared"
    return Path(rel) if Path(rel).is_absolute() else root / rel


def cmd_predict(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    from components.inference.predict import format_conll, load_tagging_model, read_sentences, tag, write_conll
    from components.metrics.tagging import tagging_scores
    root = Path(args.root).resolve()
    params_path = _params_path(args, root)
    options = _options(args.option)
    if args.format == "text" and not args.input:
        raise UsageError("--input FILE is required")
    with tempfile.TemporaryDirectory(prefix="approxinfer-predict-") as tmp:
        if args.model.startswith("models:/"):
            from components.tracking.base import default_tracking_uri
            from components.tracking.models import fetch_model
            store = default_tracking_uri(root)
            folder = fetch_model(args.model, Path(tmp) / "model", tracking_uri=store)
            shown = f"{args.model} ({store})"
        else:
            folder = Path(args.model)
            if not folder.is_dir():
                raise UsageError(f"{folder}: no such model folder (or give a registered model: models:/<name>/<version>)")
            shown = str(folder)
        model = load_tagging_model(folder, args.task_dir, device=args.device,
                                   prepared_dir=_prepared_dir(root, params_path))
        # the gold column is read as the task's scheme only to be scored: unscored, it may hold anything
        scheme = str(model.task_meta.get("scheme", "keep")) if args.score else "keep"
        sentences = read_sentences(args.input, args.format, scheme=scheme)
        words = [s.words for s in sentences]
        method = args.method or model.default_method
        labels = tag(model, words, method, options=options, seed=args.seed, batch_size=args.batch_size)
    n_tokens = sum(len(w) for w in words)
    if args.output:
        write_conll(args.output, words, labels)
    else:
        out(format_conll(words, labels).rstrip("\n") + "\n")
    err(f"tagged {len(words)} sentence(s), {n_tokens} token(s) with {shown} ({model.kind}, task {model.task}, "
        f"method {method})" + (f" -> {args.output}" if args.output else ""))
    if args.score:
        if args.format != "conll" or all(s.tags == s.words for s in sentences):
            raise UsageError(f"--score: {args.input} has no tag column to score against")
        metric = str(model.task_meta.get("metric", "accuracy"))
        scores = tagging_scores(metric, [s.tags for s in sentences], labels)
        err(f"{metric} against the file's last column: {scores['score']:.2f}")
    return 0


# --------------------------------------------------------------------------------------------
# ui / dashboard
# --------------------------------------------------------------------------------------------

#: what each server lets a visitor do, for the exposure warning
SERVERS = {
    "ui": ("the MLflow UI (mlflow server)", "read, change and delete every run, experiment, model and artifact"),
    "dashboard": ("optuna-dashboard", "read the studies and change or delete them and their trials"),
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1, ``localhost``), so that a server
    bound to it is reachable from this machine only. Anything else is exposed: ``0.0.0.0`` and
    ``::`` (every interface), a LAN or public address, any other host name."""
    h = host.strip()
    if h.lower() in ("localhost", "localhost."):
        return True
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    try:
        ip = ipaddress.ip_address(h.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)                # ::ffff:127.0.0.1
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def exposure_warning(host: str, port: int | str, server: str = "ui") -> str | None:
    """The warning for serving ``server`` (``ui`` or ``dashboard``) on ``host:port``, or None on a
    loopback address. Neither server has any authentication."""
    if is_loopback(host):
        return None
    name, power = SERVERS[server]
    where = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    every = " (every network interface of this machine)" if host.strip() in ("0.0.0.0", "::", "[::]", "") else ""
    secure = ("or, for a shared MLflow server, run infra/mlflow-server.sh with MLflow's basic-auth app "
              "behind TLS" if server == "ui" else
              "or put a reverse proxy with authentication and TLS in front of it")
    return (f"WARNING: {name} will listen on {where}{every}, which is not a loopback address, and it has "
            f"NO AUTHENTICATION: anyone who can reach {where} can {power}. Bind 127.0.0.1 (the default) and "
            f"open it through an SSH tunnel (ssh -N -L {port}:127.0.0.1:{port} USER@THIS_MACHINE, then "
            f"http://127.0.0.1:{port}), {secure}: infra/README.md.")


def warn_if_exposed(host: str, port: int | str, server: str = "ui",
                    err: Callable[[str], None] | None = None) -> bool:
    """Print :func:`exposure_warning` to ``err`` (stderr) when there is one -> whether it warned."""
    msg = exposure_warning(host, port, server)
    if msg:
        (err or (lambda s: print(s, file=sys.stderr, flush=True)))(msg)
    return msg is not None


def check_exposure(argv: Sequence[str] | None = None) -> int:
    """``python -c 'import flows.cli as c; c.check_exposure()' ui|dashboard HOST PORT`` (``make ui`` and
    ``make dashboard``): the exposure warning on stderr; always exit status 0 (a warning, not a refusal)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if len(words) != 3 or words[0] not in SERVERS:
        raise SystemExit(f"flows.cli.check_exposure: expected ui|dashboard HOST PORT, got {words}")
    warn_if_exposed(words[1], words[2], words[0])
    return 0


def cmd_ui(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    from components.tracking import mlflow_tracker
    root = Path(args.root).resolve()
    store = args.store or f"sqlite:///{root / 'mlflow.db'}"
    server = f"http://{args.host}:{args.port}"
    if not args.dry_run:
        for name, url in mlflow_tracker.ui_links(store, server):
            out(f"  {name}: {url}")
        out('If a page shows the GenAI menu (Overview, Traces, ...), click "Model training" at the top left once.')
    cmd = [_tool("mlflow"), "server", "--host", args.host, "--port", str(args.port), "--workers", "1",
           "--backend-store-uri", store]
    warn_if_exposed(args.host, args.port, "ui", err)
    return _exec(cmd, root, dry_run=args.dry_run, env={"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, err=err)


def cmd_dashboard(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    from flows.study_storage import open_study_storage, study_storage_url
    root = Path(args.root).resolve()
    url = study_storage_url(root)
    if not args.dry_run:
        open_study_storage(url)                # the schema is created under its lock first (as `make dashboard`)
    cmd = [_tool("optuna-dashboard"), url, "--host", args.host, "--port", str(args.port)]
    warn_if_exposed(args.host, args.port, "dashboard", err)
    return _exec(cmd, root, dry_run=args.dry_run, err=err)


def headline_columns(root: Path, study: str) -> list[str]:
    """The metric names of ``metrics/headline/<study>.json`` (the headline stage's), or a UsageError
    naming the studies that have one."""
    folder = root / "metrics" / "headline"
    path = folder / f"{study}.json"
    if not path.is_file():
        known = sorted(f.stem for f in folder.glob("*.json")) if folder.is_dir() else []
        raise UsageError(f"{path}: no headline metrics for {study!r}; known: {known or 'none (run the headline stage)'}")
    import json
    return sorted(json.loads(path.read_text()))


def cmd_exp(args: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    root = Path(args.root).resolve()
    names = headline_columns(root, args.study)
    # DVC names a metric column by its key, prefixed with its file when two files share a key
    own = re.escape(f"metrics/headline/{args.study}.json:")      # not another study's column of that key
    keep = "|".join(["Experiment"] + [rf"({own})?{re.escape(n)}" for n in names])
    cmd = [_tool("dvc"), "exp", "show", "--no-pager", "--drop", ".*", "--keep", f"^({keep})$", *args.dvc_args]
    return _exec(cmd, root, dry_run=args.dry_run, err=err)


# --------------------------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------------------------

class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions wrapped by :func:`_wrap`, epilogs (examples) as written."""


def _wrap(text: str, width: int = 88) -> str:
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in text.split("\n\n"))


DESCRIPTION = """\
Energy-based structured prediction and approximate inference: run the pipeline, tune a stage
with Optuna, tag text with a trained model, rebuild the papers' reports, open the MLflow UI or
the Optuna dashboard. `approxinfer COMMAND --help` explains each command, with examples."""

EPILOG = """\
examples:
  approxinfer run                      # the whole pipeline (dvc repro)
  approxinfer run train_energy@ner     # one stage (one task of a per-task stage)
  approxinfer study train --trials 3 --task pos --apply
  approxinfer predict models/tagger/pos --input sentences.conll
  approxinfer predict models:/approxinfer-train_energy-ner-blstm_crf/1 --input tweets.conll --method gd
  approxinfer report tu_gimpel
  approxinfer ui                       # http://127.0.0.1:5000
  approxinfer dashboard                # http://127.0.0.1:8080
docs/cli.md is the full reference."""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=".", help="the project root: dvc.yaml, params.yaml, data/, the stores (default: .)")
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    with_params = argparse.ArgumentParser(add_help=False)
    with_params.add_argument("--params", default="params.yaml", help="the params file, relative to --root (default: params.yaml)")

    ap = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", parents=[common], formatter_class=_Formatter,
                       help="run the pipeline, or some of its stages (dvc repro)",
                       description=_wrap("Run the pipeline with DVC: `dvc repro [STAGE ...]`, which runs the stages "
                                   "whose inputs changed (and the stages they need). The command is printed first."),
                       epilog="examples:\n  approxinfer run\n  approxinfer run train@pos train_energy --force\n"
                              "  approxinfer run --scale study approx     # dvc exp run -S base.scale=study approx\n"
                              "  approxinfer run --scale study --paper goyal_2018   # dvc repro study/dvc.yaml:search_aware\n"
                              "  approxinfer run --dry-run report         # print the command only")
    p.add_argument("stages", nargs="*", metavar="STAGE", help="dvc.yaml stages (stage@task for one task of a "
                                                               "per-task stage); none: every stage")
    p.add_argument("--force", action="store_true", help="run the stages even if nothing changed (dvc --force)")
    p.add_argument("--paper", default=None, choices=sorted(PAPERS),
                   help="with --scale study: the paper's chain in the study's own pipeline (study/dvc.yaml; "
                        "outputs under study/, its report and RUN.md in study/reports/PAPER/)")
    p.add_argument("--scale", choices=SCALES, default=None,
                   help="run as a DVC experiment at this scale (dvc exp run -S base.scale=SCALE); "
                        "default: params.yaml's own base.scale, with dvc repro")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("study", parents=[common, with_params], formatter_class=_Formatter,
                       help="add trials to a stage's Optuna study; --apply writes the best values to params",
                       description=_wrap("Add trials to the Optuna study of a per-task sweep stage (train, "
                                   "train_energy, infnets), in the project's Optuna storage (optuna.db, or "
                                   "$APPROXINFER_OPTUNA_STORAGE). The study is named <stage>-<task>[-<variant>] "
                                   "and resumes: two runs of --trials 3 leave one study with 6 trials. Each "
                                   "trial is an MLflow run under study/<study>. --apply writes the best trial's "
                                   "values (dotted params keys, e.g. train.optim.lr) into the params file, "
                                   "changing nothing else in it; `dvc params diff` then shows them."),
                       epilog="examples:\n  approxinfer study train --task pos --trials 3\n"
                              "  approxinfer study train_energy --task ner/blstm_crf --trials 5 --apply\n"
                              "  approxinfer study train --task pos --apply     # the best so far, no new trial")
    p.add_argument("stage", metavar="STAGE", help="a stage with an Optuna sweep space (train, train_energy, infnets)")
    p.add_argument("--trials", type=int, default=None, help="trials to add to the study")
    p.add_argument("--task", default=None, help="TASK or TASK/VARIANT of <stage>.tasks (needed when there are several)")
    p.add_argument("--apply", action="store_true", help="write the study's best values into the params file")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("predict", parents=[common, with_params], formatter_class=_Formatter,
                       help="tag a CoNLL or text file with a trained model",
                       description=_wrap("Tag a file with a trained tagging model: a model folder (model.json + "
                                   "model.pt, e.g. models/energy/ner/blstm_crf) or a registered MLflow model "
                                   "(models:/<name>/<version> or models:/<name>@<alias>, from the project's "
                                   "MLflow store or $MLFLOW_TRACKING_URI). Output: token<TAB>label lines, a blank "
                                   "line between sentences. Methods by model kind: tagger argmax; energy viterbi "
                                   "(default), gd, gd_adam; infnet infnet; seq2seq greedy (default), beam, "
                                   "soft_beam. Translator folders are not supported yet."),
                       epilog="input formats:\n"
                              "  conll  one token a line, a blank line between sentences; the word is the first\n"
                              "         column, a last column (gold tags) is kept for --score\n"
                              "  text   one sentence a line, tokens separated by spaces\n"
                              "examples:\n"
                              "  approxinfer predict models/tagger/pos --input in.conll --output out.conll\n"
                              "  approxinfer predict models/energy/ner/blstm_crf --input tweets.txt --format text "
                              "--method gd --option iterations=50\n"
                              "  approxinfer predict models:/approxinfer-train_energy-ner-blstm_crf/1 --input dev.conll "
                              "--score")
    p.add_argument("model", metavar="MODEL", help="a model folder, or models:/<name>/<version> | models:/<name>@<alias>")
    p.add_argument("--input", "-i", required=True, help="the file to tag")
    p.add_argument("--format", "-f", choices=("conll", "text"), default="conll", help="the input's format (default: conll)")
    p.add_argument("--method", "-m", default=None, help="the inference method (default: the model kind's)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the method's config (repeatable), e.g. --option lr=0.5")
    p.add_argument("--output", "-o", default=None, help="where to write the tagged CoNLL file (default: stdout)")
    p.add_argument("--task-dir", default=None, help="the prepared task folder with the model's vocabularies "
                                                   "(default: the model's own task/, else data/prepared/<task>)")
    p.add_argument("--score", action="store_true", help="score the labels against the input's last column "
                                                        "(the task's metric), on stderr")
    p.add_argument("--seed", type=int, default=0, help="the seed of a randomised method such as gd (default: 0)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("report", parents=[common, with_params], formatter_class=_Formatter,
                       help="rebuild the papers' reports (dvc repro of the stages that write them)",
                       description=_wrap("Rebuild reports/<paper>/ by `dvc repro` of the dvc.yaml stage that writes it "
                                   "(found from the stages' outs). Without PAPER, every paper's."),
                       epilog="examples:\n  approxinfer report --list\n  approxinfer report tu_gimpel goyal_2019\n"
                              "  approxinfer report --dry-run")
    p.add_argument("papers", nargs="*", metavar="PAPER", help="a folder under reports/ (see --list)")
    p.add_argument("--list", action="store_true", help="list the papers and the stage writing each report")
    p.add_argument("--force", action="store_true", help="re-run the stages even if nothing changed")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("exp", parents=[common], formatter_class=_Formatter,
                       help="dvc exp show with one study's headline metrics only",
                       description=_wrap("`dvc exp show` lists every param, dep and metric of the project (hundreds of "
                                   "columns); this shows the experiments with one study's headline metrics "
                                   "(metrics/headline/<study>.json, at most 20), which fit a terminal. Arguments "
                                   "after `--` go to dvc (e.g. -- -A, --sort-by)."),
                       epilog="examples:\n  approxinfer exp tu_gimpel\n  approxinfer exp goyal_mlm -- -A")
    p.add_argument("study", help="a study with a headline file: pipeline, tu_gimpel, shevchenko_osokin, "
                                 "goyal_2018, goyal_2019, goyal_mlm")
    p.add_argument("dvc_args", nargs="*", metavar="DVC_ARG", help="passed to dvc exp show (after --)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(func=cmd_exp)

    p = sub.add_parser("ui", parents=[common], formatter_class=_Formatter,
                       help="the MLflow UI on the project's store (as make ui)",
                       description=_wrap("Print a link to each experiment's runs table, then start `mlflow server` on "
                                   "the store (as `make ui`). Stop it with Ctrl-C."),
                       epilog="examples:\n  approxinfer ui\n  approxinfer ui --port 5001 --store postgresql://u@db/mlflow")
    p.add_argument("--store", default=None, help="backend store URI (default: sqlite:///<root>/mlflow.db)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; the UI has no "
                                                       "authentication, another address prints a warning)")
    p.add_argument("--port", type=int, default=5000, help="port to listen on (default: 5000)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("dashboard", parents=[common], formatter_class=_Formatter,
                       help="optuna-dashboard on the sweeps' studies (as make dashboard)",
                       description=_wrap("Start optuna-dashboard on the project's Optuna storage ($APPROXINFER_OPTUNA_STORAGE "
                                   "if set, else optuna.db beside mlflow.db), as `make dashboard`. Stop it with Ctrl-C."),
                       epilog="examples:\n  approxinfer dashboard\n  approxinfer dashboard --port 8081")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; the dashboard has "
                                                       "no authentication, another address prints a warning)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(func=cmd_dashboard)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """The ``approxinfer`` console script -> its exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def out(s: str) -> None:
        print(s, flush=True)

    def err(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    try:
        return int(args.func(args, out, err) or 0)
    except (ConfigError, FormatError, FileNotFoundError, FileExistsError, ValueError) as e:
        if args.debug:
            raise
        msg = str(e) if not isinstance(e, FileNotFoundError) or e.filename is None else f"{e.filename}: {e.strerror}"
        err(f"{PROG} {args.command}: error: {msg}")
        return 2
    except KeyboardInterrupt:
        err(f"{PROG} {args.command}: interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
