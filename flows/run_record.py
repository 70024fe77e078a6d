"""Write a paper's ``RUN.md`` at the end of its scale's pipeline (``study/dvc.yaml`` runs it after
the paper's report stage): the commit, the command, the settings that differ from the default scale,
the machine and device, each stage's wall time (its ``metrics/timings`` file) and the findings counts.

``python -m flows.run_record --paper goyal_2018 --params ../params.yaml --params params.yaml
--out reports/goyal_2018/RUN.md`` (in the scale's folder, as ``study/dvc.yaml`` calls it); the
rendering is :mod:`components.reports.run_record`.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from components import CPU_NUMERICS
from components.config import (ConfigError, flatten, get_dotted, load_params, load_params_files, project_root,
                               resolve_device, resolve_scale, scale_overrides)
from components.io import write_text
from components.reports.run_record import CODE_DEFAULT, RunFacts, Setting, StageTime, render
from flows.scale_pipeline import PAPERS, SCALE_DIR, chains
from flows.sections import code_default

#: what makes a run's code or settings differ from its commit
CODE_PATHS = ("components", "flows", "params.yaml", "scales", "dvc.yaml", "pyproject.toml",
              *(f"{d}/params.yaml" for d in SCALE_DIR.values()), *(f"{d}/dvc.yaml" for d in SCALE_DIR.values()))


def _git(project: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({platform.machine()})"
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    import torch
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out: dict[str, Any] = {"CPU cores available": cores, "processor": _cpu_model() or platform.machine()}
    mem = _memory_gib()
    if mem is not None:
        out["memory"] = f"{mem} GiB"
    out["system"] = platform.platform()
    out["Python"] = platform.python_version()
    out["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads in this process)"
    # which kernels the numbers came from (components.CPU_NUMERICS pins them; a user's setting wins)
    out["CPU numerics"] = (f"torch kernels {torch.backends.cpu.get_cpu_capability()}, "
                           + ", ".join(f"{key}={os.environ.get(key, 'unset')}" for key in CPU_NUMERICS))
    return out


def device_name(device: str) -> str:
    resolved = resolve_device(device)
    if resolved.startswith("cuda"):
        import torch
        return f"{resolved}: {torch.cuda.get_device_name(torch.device(resolved))}"
    return f"{resolved} (no GPU)" if resolved == "cpu" else resolved


def stage_times(root: Path, stages: dict[str, dict], chain: list[str], params: dict[str, Any]) -> list[StageTime]:
    from flows.scale_pipeline import resolve_refs
    out = []
    for name in chain:
        st = stages[name]
        items = [str(i) for i in resolve_refs(st["foreach"], params, name)] if "foreach" in st else [None]
        for item in items:
            path = root / "metrics" / "timings" / (f"{name}.json" if item is None else f"{name}/{item}.json")
            label = name if item is None else f"{name}@{item}"
            try:
                seconds = float(json.loads(path.read_text())["stage_seconds"])
                when = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
                out.append(StageTime(label, seconds, when))
            except (OSError, KeyError, ValueError):
                out.append(StageTime(label, None))
    return out


def settings(files: list[Path], raw: dict[str, Any], stages: dict[str, dict], chain: list[str],
             scale: str, project: Path) -> list[Setting]:
    """The overlays' keys, then the scale file's overrides of the sections the chain's stages read."""
    out: list[Setting] = []

    at_default = resolve_scale(raw)            # params.yaml at its own (the default) scale

    def default(key: str) -> Any:
        try:
            return get_dotted(at_default, key)
        except (KeyError, ConfigError):
            pass
        try:
            return code_default(key)           # params.yaml is silent: the section dataclass's default
        except (KeyError, ConfigError):
            return CODE_DEFAULT

    for f in files[1:]:
        for key, value in flatten(load_params(f)).items():
            out.append(Setting(key, value, default(key), os.path.relpath(f.resolve(), project)))
    sections: list[str] = []
    for name in chain:
        st = stages[name]
        for e in st.get("do", st).get("params") or []:
            if isinstance(e, dict):
                for f, keys in e.items():
                    if "${base.scale}" in f:
                        sections += [k for k in keys if k not in sections]
    block = (raw.get("scales") or {}).get(scale) or {}
    for key, value in scale_overrides({s: block[s] for s in sections if s in block}, f"scales.{scale}"):
        out.append(Setting(key, value, default(key), f"scales/{scale}.yaml"))
    return out


def collect(paper: str, files: list[Path], root: Path) -> RunFacts:
    project = project_root(root)
    params = resolve_scale(load_params_files(files))
    raw = load_params(files[0])
    scale = (params.get("base") or {}).get("scale", "default")
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    chain = chains(stages, params)[paper]
    final = PAPERS[paper]
    metrics = root / "metrics" / f"{final}.json"
    findings = {}
    if metrics.exists():
        findings = json.loads(metrics.read_text()).get("findings") or {}
    dirty = [line[3:] for line in _git(project, "status", "--porcelain=v1", "--untracked-files=all", "--",
                                       *CODE_PATHS).splitlines() if len(line) > 3]
    folder = os.path.relpath(root, project)
    command = (f"make study PAPER={paper}   # = dvc repro {folder}/dvc.yaml:{final}" if folder in SCALE_DIR.values()
               else f"python -m flows.run_record --paper {paper}")
    return RunFacts(
        paper=paper, scale=scale, command=command,
        commit=_git(project, "rev-parse", "HEAD").strip() or "(not a git repository)", dirty=tuple(dirty),
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"), machine=machine(),
        device=device_name((params.get("base") or {}).get("device", "auto")),
        stages=tuple(stage_times(root, stages, chain, params)),
        settings=tuple(settings(files, raw, stages, chain, scale, project)), findings=findings)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.run_record", description=__doc__.split("\n\n")[0])
    ap.add_argument("--paper", required=True, choices=sorted(PAPERS))
    ap.add_argument("--params", action="append", default=None, help="params files, each on top of the ones before")
    ap.add_argument("--root", default=".", help="the folder the paper's stages wrote their products under")
    ap.add_argument("--out", required=True, help="the RUN.md to write (relative to --root)")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    try:
        facts = collect(args.paper, [Path(p) for p in (args.params or ["params.yaml"])], root)
    except (ConfigError, OSError, KeyError) as e:
        print(f"run_record: error: {e}", file=sys.stderr)
        return 1
    out = Path(args.out)
    write_text(out if out.is_absolute() else root / out, render(facts))
    print(f"run_record: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
