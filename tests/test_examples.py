"""Each script of examples/ runs as a user would run it and prints what its docstring says."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(name: str) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "examples" / name)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_own_potentials_matches_brute_force_and_gd_converges():
    out = run("own_potentials.py")
    for line in ("viterbi == brute force: True", "log Z == brute force: True", "marginals == brute force: True"):
        assert line in out, out
    errors = [[float(x) for x in m.split(", ")] for m in re.findall(r"search error per sentence \[([^\]]*)\]", out)]
    assert len(errors) == 3 and all(e >= -1e-5 for row in errors for e in row)     # never below Viterbi's energy


def test_pytorch_crf_model_is_the_same_model_and_runs_the_benchmark_methods():
    pytest.importorskip("torchcrf")
    out = run("pytorch_crf_energy.py")
    assert "viterbi == crf.decode: True" in out and "log Z == crf normaliser: True" in out, out
    rows = re.findall(r"^(viterbi|gd|gd_adam)\s.*search error\s+(-?[0-9.]+)", out, re.M)
    assert [m for m, _ in rows] == ["viterbi", "gd", "gd", "gd_adam"], out
    assert float(rows[0][1]) == 0.0 and all(float(e) >= -1e-3 for _, e in rows)


def test_mh_on_own_energy_reaches_the_exact_law():
    out = run("mh_own_energy.py")
    tv = float(re.search(r"total variation to the exact law ([0-9.]+)", out).group(1))
    assert tv < 0.1, out          # 4,000 chains over 243 outputs: ~0.05 from sampling alone; uniform would be far
    assert 0.0 < float(re.search(r"mean acceptance ([0-9.]+)", out).group(1)) < 1.0
