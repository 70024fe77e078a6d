"""gpu/check.py, the prepared GPU script, run on the CPU in subprocesses: the skip path without CUDA,
the ``--cpu-smoke`` path with ray / mlflow / dvc / optuna / pytest / hypothesis blocked and the
installed pytorch-crf hidden (as on the lent GPU machine), and the gpu-marked tests run with the real
pytest. Plus: the default-scale shapes the script copies still match flows/translation_configs.py.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = ("ray", "mlflow", "dvc", "optuna", "pytest", "hypothesis", "_pytest")
SECTIONS = ("tests", "kernels", "beam", "mcmc", "training")

# Runs gpu.check as __main__ with the modules above made unimportable (sys.modules[name] = None) and the
# installed pytorch-crf hidden, so that only gpu/vendor's copy can be found.
WRAPPER = f"""
import importlib.machinery, runpy, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None

class HideInstalledTorchCRF:
    def find_spec(self, name, path=None, target=None):
        if name != "torchcrf":
            return None
        dirs = [p for p in sys.path if "site-packages" not in p and "dist-packages" not in p]
        spec = importlib.machinery.PathFinder.find_spec(name, dirs)
        if spec is None:
            raise ModuleNotFoundError("torchcrf (hidden by the test)", name=name)
        return spec

sys.meta_path.insert(0, HideInstalledTorchCRF())
sys.argv = ["gpu.check"] + sys.argv[1:]
runpy.run_module("gpu.check", run_name="__main__", alter_sys=True)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    return env


def _run(args: list[str], out: Path, *, wrapped: bool = False) -> tuple[subprocess.CompletedProcess, dict]:
    cmd = [sys.executable, "-c", WRAPPER] if wrapped else [sys.executable, "-m", "gpu.check"]
    proc = subprocess.run(cmd + ["--out", str(out), *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    return proc, report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    proc, report = _run(["--cpu-smoke"], out, wrapped=True)
    return proc, report, out


def test_without_cuda_every_section_is_skipped_and_the_exit_code_is_0(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the skip path does not apply")
    proc, report = _run([], tmp_path)
    assert report["mode"] == "skip" and report["ok"] is True
    assert {name: s["skipped"] for name, s in report["sections"].items()} == {s: "no CUDA device" for s in SECTIONS}
    assert report["device"]["cuda_available"] is False and report["device"]["torch"]
    assert report["forbidden_modules_loaded"] == []
    assert "no CUDA device" in (tmp_path / "gpu_rows.md").read_text()


def test_cpu_smoke_runs_every_section_without_ray_mlflow_dvc_optuna_or_pytest(smoke):
    proc, report, out = smoke
    assert report["mode"] == "cpu-smoke" and report["ok"] is True
    assert report["forbidden_modules_loaded"] == []
    S = report["sections"]
    for name in SECTIONS:
        assert "error" not in S[name] and not isinstance(S[name].get("skipped"), str), (name, S[name])
    # the gpu-marked tests, imported through the stand-ins and called: on the CPU they skip themselves
    t = S["tests"]
    assert set(t["stood_in"]) == {"pytest", "hypothesis"}
    assert t["failed"] == 0 and t["errors"] == 0 and t["passed"] + t["skipped"] == len(t["checks"]) > 0
    assert any("test_brute_force_on_cuda[" in c["check"] for c in t["checks"])
    assert any(c["check"].endswith("test_mean_field_on_cuda") for c in t["checks"])
    # kernels: agreement with our float64 CPU kernel and with the vendored pytorch-crf, and times
    k = S["kernels"]
    assert k["pytorch_crf"] == "vendored (gpu/vendor, MIT)" and k["baseline"] == "pytorch_crf"
    assert k["agreement_all"] is True and len(k["per_L"]) == 2
    for r in k["per_L"].values():
        assert r["agreement"]["all"] is True and r["agreement"]["log_partition_vs_pytorch_crf"] is True
        for op in ("log_partition", "marginals", "viterbi"):
            assert r[op]["ours_ms"] > 0 and r[op]["pytorch_crf_ms"] > 0 and r[op]["speedup"] > 0
    b = S["beam"]
    assert b["vs_naive"]["batched_sents_per_s"] > 0 and b["vs_naive"]["max_abs_score_diff"] < 1e-3
    assert all(x["sents_per_s"] > 0 for x in b["throughput"])
    m = S["mcmc"]
    assert [r["chains"] for r in m["chains"]] == [1, 4, 16]
    assert all(r["proposals_per_s"] > 0 and 0 <= r["acceptance"] <= 1 for r in m["chains"])
    assert m["vs_naive"]["mh_ratio"] > 0 and m["vs_naive"]["law_gap"] <= m["vs_naive"]["law_tol"] < 1e-4
    for name in ("translator", "cmlm"):
        r = S["training"][name]
        assert r["updates"] == 3 and r["median_update_ms"] > 0 and r["epoch_train_s"] > 0, r
    rows = (out / "gpu_rows.md").read_text()
    for title in ("Chain kernels on CPU", "Hard beam decoding on CPU", "MH with MLM proposals on CPU",
                  "One training epoch on CPU", "gpu-marked tests on CPU"):
        assert title in rows
    assert "[gpu.check" in proc.stdout                          # progress lines


def test_the_gpu_tests_run_the_same_with_the_real_pytest(smoke, tmp_path):
    _, blocked, _ = smoke
    _, report = _run(["--cpu-smoke", "--only", "tests"], tmp_path)
    t = report["sections"]["tests"]
    assert t["stood_in"] == [] and "real pytest" in t["runner"]
    assert [c["check"] for c in t["checks"]] == [c["check"] for c in blocked["sections"]["tests"]["checks"]]
    assert {s: report["sections"][s]["skipped"] for s in SECTIONS[1:]} == {s: "not selected (--only)"
                                                                          for s in SECTIONS[1:]}


def _stage_defaults(cls_name: str) -> dict[str, dict]:
    """Keyword arguments of the field defaults of a dataclass in flows/translation_configs.py (read
    with ast: importing flows would import ray)."""
    tree = ast.parse((ROOT / "flows" / "translation_configs.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    out = {}
    for n in cls.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.value, ast.Call):
            kws = {}
            for kw in n.value.keywords:
                try:
                    kws[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:          # a nested config call (sweep resources): not compared
                    pass
            out[n.target.id] = kws
    return out


def test_the_copied_default_shapes_match_the_stage_configs():
    from gpu import check
    tr = _stage_defaults("TranslatorStageConfig")
    assert tr["model"] == check.TRANSLATOR["model"]
    assert (tr["data"]["src_vocab_size"], tr["data"]["tgt_vocab_size"]) == (check.TRANSLATOR["src_vocab"],
                                                                             check.TRANSLATOR["tgt_vocab"])
    assert (tr["data"]["max_source_len"], tr["data"]["max_target_len"]) == (check.TRANSLATOR["max_source_len"],
                                                                            check.TRANSLATOR["max_target_len"])
    cm = _stage_defaults("CMLMStageConfig")
    assert cm["model"] == check.CMLM["model"]
    assert (cm["data"]["src_vocab_size"], cm["data"]["tgt_vocab_size"]) == (check.CMLM["src_vocab"], check.CMLM["tgt_vocab"])
    assert cm["data"]["max_target_len"] == check.CMLM["max_target_len"]
    assert all(cm["train"][k] == v for k, v in check.CMLM["train"].items())
    assert json.loads((ROOT / "metrics" / "translator.json").read_text())["n_train"] == check.TRANSLATOR["pairs"]
    # random lengths stay inside what the configs admit (targets: + eos)
    assert check.TRANSLATOR["src_len"][1] <= check.TRANSLATOR["max_source_len"]
    assert check.TRANSLATOR["tgt_len"][1] + 1 <= check.TRANSLATOR["max_target_len"]
    assert check.CMLM["src_len"][1] <= check.CMLM["max_source_len"]
    assert check.CMLM["tgt_len"][1] + 1 <= check.CMLM["max_target_len"] <= check.CMLM["model"]["max_target_len"]
