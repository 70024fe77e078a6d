"""approxinfer components: pure, reusable parts (no ray, no mlflow outside tracking/).

CPU numerics are pinned here, before anything in the project imports torch. Training is chaotic in
float rounding: the same seeded OCR run of the Shevchenko & Osokin study scored 79.2 to 80.5 % on one
machine depending only on which instruction set torch's kernels (ATen), MKL's GEMM and oneDNN's
convolutions dispatched to. Left to themselves they pick the widest the CPU has (AVX-512 here, AVX2
elsewhere), so committed metrics would reproduce exactly only on the CPU that made them. Pinning all
three to AVX2 makes a run's numbers the same on every x86-64 CPU with AVX2 (Intel since 2013, AMD
since 2015), at the same thread count. A value the user has already set wins (``setdefault``); the
effective values are in every study's RUN.md (``flows.run_record.machine``). Ray workers inherit them
(``flows.ray_runtime.init_ray`` passes them to a cluster's workers too). No effect on GPU kernels.
"""
import os as _os

CPU_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

for _key, _value in CPU_NUMERICS.items():
    _os.environ.setdefault(_key, _value)
