"""The one seed policy (``components.seeds``): every seed is ``seed_for(base.seed, <name parts>)``.

The hash is stable (a documented value, recomputable by hand), different for other base seeds and
other names, strict about its inputs; ``params.yaml`` has no seed key but ``base.seed`` (in any
section, scales included); and no stage or method config has a seed field, so params cannot set a
seed any other way.
"""
from __future__ import annotations

import dataclasses
import hashlib
import typing
from pathlib import Path

import pytest

from components.config import load_params
from components.seeds import SEED_MODULUS, seed_for

ROOT = Path(__file__).resolve().parents[1]


def test_a_fixed_name_has_a_stable_documented_value():
    # the module docstring's example, and the recipe it documents: BLAKE2b-64 of "base/part/part/..."
    assert seed_for(13, "search_aware", "ner", "ce", "replicate0", "epoch", 3) == 1685582803
    assert seed_for(13, "prepare", "pos", "split") == 1407713473
    text = b"13/prepare/pos/split"
    assert seed_for(13, "prepare", "pos", "split") == \
        int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") % SEED_MODULUS


def test_seeds_differ_by_base_seed_and_by_name():
    name = ("train_energy", "pos", "batches", "epoch", 1)
    assert len({seed_for(b, *name) for b in range(50)}) == 50
    names = [("train_energy", "pos", "model"), ("train_energy", "ner", "model"), ("infnets", "pos", "model"),
             ("train_energy", "pos", "batches", "epoch", 1), ("train_energy", "pos", "batches", "epoch", 2),
             ("approx", "pos", "test", "subset"), ("approx", "pos", "dev", "subset")]
    assert len({seed_for(13, *n) for n in names}) == len(names)
    # no arithmetic collisions: (seed 1, epoch 0) and (seed 0, epoch 1000) were one seed under seed * 1000 + epoch
    assert seed_for(1, "batches", "epoch", 0) != seed_for(0, "batches", "epoch", 1000)
    # an int part and its text are the same name (the text is what is hashed)
    assert seed_for(13, "epoch", 3) == seed_for(13, "epoch", "3")


def test_seeds_fit_every_consumer():
    import numpy as np
    import torch
    for i in range(200):
        s = seed_for(i, "x", i)
        assert isinstance(s, int) and 0 <= s < SEED_MODULUS < 2 ** 31
    np.random.default_rng(s)
    torch.Generator().manual_seed(s)


@pytest.mark.parametrize("base, name, error", [
    ("13", ("a",), TypeError), (13.0, ("a",), TypeError), (True, ("a",), TypeError), (None, ("a",), TypeError),
    (13, ("a", 1.5), TypeError), (13, ("a", None), TypeError), (13, ("a", False), TypeError),
    (13, ("a", ("b",)), TypeError), (13, (), ValueError)])
def test_bad_input_is_an_error(base, name, error):
    with pytest.raises(error, match="seed_for"):
        seed_for(base, *name)


def _seed_keys(node: typing.Any, path: tuple[str, ...] = ()) -> list[str]:
    """Dotted paths of every key named ``seed`` (or a dotted key ending in ``.seed``) below ``node``."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            p = path + (str(k),)
            if str(k) == "seed" or str(k).endswith(".seed"):
                out.append(".".join(p))
            out += _seed_keys(v, p)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _seed_keys(v, path + (f"[{i}]",))
    return out


def test_base_seed_is_the_only_seed_key_in_params():
    """Every section, scales included: a replicate list (``seeds: [0, 1, 2]``) names replicates, not
    seeds; any other seed would bypass ``base.seed``."""
    params = load_params(ROOT / "params.yaml")
    assert params["base"]["seed"] == params["base"]["seed"] + 0          # an int
    assert _seed_keys(params) == ["base.seed"]


def test_the_walk_finds_seed_keys_anywhere():
    tree = {"base": {"seed": 1}, "x": {"y": [{"seed": 2}]}, "scales": {"paper": {"x.tune.seed": 3}}}
    assert _seed_keys(tree) == ["base.seed", "x.y.[0].seed", "scales.paper.x.tune.seed"]


def _seed_fields(cls: type, path: str, seen: set) -> list[str]:
    """Dotted paths of the fields named ``seed`` / ``*_seed`` of a config dataclass and of the
    dataclasses it nests (directly or as dict values)."""
    if cls in seen:
        return []
    seen.add(cls)
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "seed" or f.name.endswith("_seed"):
            out.append(f"{path}.{f.name}")
        for t in (hints.get(f.name), *typing.get_args(hints.get(f.name))):
            if isinstance(t, type) and dataclasses.is_dataclass(t):
                out += _seed_fields(t, f"{path}.{f.name}", seen)
    return out


def test_no_stage_or_method_config_has_a_seed_field():
    from components.inference.mcmc.registry import SAMPLERS
    from components.inference.registry import INFERENCE
    from components.inference.study_config import ApproxStudyConfig
    from components.training.studies import ScalingStudyConfig
    from flows.stages import bench, cmlm, infnets, mcmc, mlm_exact, train, train_energy
    configs = {"train": train.SPEC.config, "train_energy": train_energy.SPEC.config, "infnets": infnets.SPEC.config,
               "approx": ApproxStudyConfig, "bench": bench.BenchConfig, "mcmc": mcmc.MCMCStageConfig,
               "cmlm": cmlm.CMLMStageConfig, "mlm_exact": mlm_exact.MLMExactConfig, "scaling": ScalingStudyConfig}
    configs.update({f"INFERENCE.{n}": e.config for n, e in INFERENCE.items()})
    configs.update({f"SAMPLERS.{n}": e.config for n, e in SAMPLERS.items()})
    found = [p for name, cls in configs.items() for p in _seed_fields(cls, name, set())]
    assert found == []


def test_seeded_methods_and_samplers_take_their_seed_as_an_input():
    import torch

    from components.inference.mcmc.registry import SAMPLERS
    from components.inference.registry import INFERENCE
    seeded = INFERENCE.names(seeded=True)
    assert set(seeded) == {"gd", "gd_adam", "gd_warm_start"}
    for name in ("gd", "gd_adam"):
        assert INFERENCE.build(name, seed=5)._starts(torch.device("cpu")).initial_seed() == 5
        with pytest.raises(ValueError, match="seed"):
            INFERENCE.build(name, seed=-1)
    for name in SAMPLERS:
        assert SAMPLERS.build(name, seed=7).seed == 7
        with pytest.raises(ValueError, match="seed"):
            SAMPLERS.build(name, seed=1.5)
