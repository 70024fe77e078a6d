"""The one seed policy: every seed derives from ``base.seed`` and a stable name.

``seed_for(base_seed, "search_aware", "ner", "ce", "replicate0", "epoch", 3)`` hashes the base seed
with the name's parts (stage, task, variant, replicate or trial, purpose, epoch ...) into a 31-bit
seed: changing ``base.seed`` reseeds everything, two names never share a stream by accident (no
``seed * 1000 + epoch`` arithmetic that collides across seeds), and nothing else (the order of a
grid, a worker's pid, a restart) changes a seed. A replicate index in params (``seeds: [0, 1, 2]``)
is a name part, not a seed.

The hash is BLAKE2b over the parts' text joined by ``/``: stable across Python versions and
processes (``hash()`` is salted per process), cheap, and documented here so that a user can
recompute a seed by hand.
"""
from __future__ import annotations

import hashlib

SEED_MODULUS = 2**31 - 1          # fits every consumer: torch, numpy, Optuna, random


def seed_for(base_seed: int, *name: str | int) -> int:
    """The seed of ``name`` (its parts: str or int, in order) under ``base_seed``; in [0, 2^31 - 1)."""
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise TypeError(f"seed_for: base_seed must be an int (base.seed), got {base_seed!r}")
    parts = []
    for p in name:
        if isinstance(p, bool) or not isinstance(p, (str, int)):
            raise TypeError(f"seed_for: name parts are str or int, got {p!r} in {name!r}")
        parts.append(str(p))
    if not parts:
        raise ValueError("seed_for: a seed needs a name (stage, task, variant, ...)")
    text = "/".join([str(base_seed), *parts]).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") % SEED_MODULUS
