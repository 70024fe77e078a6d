"""CPU numerics are pinned when ``components`` is imported (``components.CPU_NUMERICS``): torch's
kernels, MKL's GEMM and oneDNN dispatch to AVX2 whatever wider set the CPU has, so a seeded run's
numbers are the same on every AVX2 machine; a value the user set wins."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import components

ROOT = Path(__file__).resolve().parents[1]


def _has_avx2() -> bool:
    try:
        return any(line.startswith("flags") and " avx2" in line
                   for line in Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _has_avx2(), reason="the pin is to AVX2: needs an x86-64 CPU with AVX2")

PROBE = ("import components, torch, os, json; torch.ones(64).sum(); "
         "print(json.dumps([torch.backends.cpu.get_cpu_capability()]"
         " + [os.environ.get(k) for k in components.CPU_NUMERICS]))")


def _probe(**env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in components.CPU_NUMERICS}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env={**base, **env}, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_components_pins_torch_mkl_and_onednn_to_avx2() -> None:
    assert _probe() == ["AVX2", "avx2", "AVX2", "AVX2"]


def test_a_value_the_user_set_wins() -> None:
    got = _probe(ATEN_CPU_CAPABILITY="default")
    assert got[0] == "DEFAULT" and got[1] == "default" and got[2:] == ["AVX2", "AVX2"]

