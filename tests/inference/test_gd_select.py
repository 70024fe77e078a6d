"""Label-free GD selections (components.inference.gd_select) against brute force: explicit loops over
every candidate of small random grids, with the documented tie-breaks, and corpus scores recomputed
from the chosen counts."""
from __future__ import annotations

import random

import pytest
import torch

from components.inference.gd_select import dev_tuned_select, min_energy_select
from components.inference.oracle import corpus_score

LRS = (10.0, 1.0, 5.0)                 # not sorted: ties must go to the smaller *value*
CHECKPOINTS = (5, 10, 20)


def _grid(seed: int, C=3, R=2, K=3, B=6):
    rng = random.Random(seed)
    counts = torch.zeros(C, R, K, B, 3, dtype=torch.long)
    for c in range(C):
        for r in range(R):
            for k in range(K):
                for b in range(B):
                    g = rng.randint(1, 5)
                    counts[c, r, k, b] = torch.tensor([rng.randint(0, g), g, g])
    # few distinct energies, so ties need the tie-breaks
    energy = torch.tensor([float(rng.randint(-3, 0)) for _ in range(C * R * K * B)],
                          dtype=torch.float64).view(C, R, K, B)
    return counts, energy


def _score(rows):
    c = sum(int(x[0]) for x in rows)
    d = sum(int(x[1]) + int(x[2]) for x in rows)
    return 200 * c / d if d else 0.0


def _brute_min_energy(counts, energy, cs):
    C, R, K, B = energy.shape
    out = []
    for b in range(B):
        cands = [(float(energy[c, r, k, b]), CHECKPOINTS[c], LRS[k], r, c, k)
                 for c in cs for r in range(R) for k in range(K)]
        e, _, _, r, c, k = min(cands)
        out.append((c, r, k))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_min_energy_select_matches_brute_force(seed):
    counts, energy = _grid(seed)
    vit = torch.full((energy.shape[-1],), -5.0, dtype=torch.float64)
    relaxed = energy + 0.5
    per_n, full = min_energy_select(counts, energy, lrs=LRS, checkpoints=CHECKPOINTS, relaxed_energy=relaxed,
                                    viterbi_energy=vit)
    for c, sel in enumerate(per_n):
        want = _brute_min_energy(counts, energy, [c])
        assert [(int(sel.checkpoint[b]), int(sel.restart[b]), int(sel.lr[b])) for b in range(len(want))] == want
    want = _brute_min_energy(counts, energy, range(len(CHECKPOINTS)))
    assert [(int(full.checkpoint[b]), int(full.restart[b]), int(full.lr[b])) for b in range(len(want))] == want
    s = full.summary()
    rows = [counts[c, r, k, b] for b, (c, r, k) in enumerate(want)]
    assert s["score"] == pytest.approx(_score(rows))
    mean_e = sum(float(energy[c, r, k, b]) for b, (c, r, k) in enumerate(want)) / len(want)
    assert s["energy"] == pytest.approx(mean_e)
    assert s["relaxed_energy"] == pytest.approx(mean_e + 0.5)
    assert s["search_error"] == pytest.approx(mean_e + 5.0)


def test_min_energy_select_ignores_labels():
    counts, energy = _grid(0)
    other = counts.flip(0)                  # different qualities, same energies
    _, a = min_energy_select(counts, energy, lrs=LRS, checkpoints=CHECKPOINTS)
    _, b = min_energy_select(other, energy, lrs=LRS, checkpoints=CHECKPOINTS)
    assert torch.equal(a.checkpoint, b.checkpoint) and torch.equal(a.lr, b.lr) and torch.equal(a.restart, b.restart)


@pytest.mark.parametrize("seed", range(8))
def test_dev_tuned_select_matches_brute_force(seed):
    dev_counts, dev_energy = _grid(seed, B=7)
    counts, energy = _grid(seed + 100)
    C, R, K, B = energy.shape
    tuned = dev_tuned_select(dev_counts, dev_energy, counts, energy, lrs=LRS, checkpoints=CHECKPOINTS)

    def restart(e, c, k, b):
        return min(range(R), key=lambda r: (float(e[c, r, k, b]), r))
    pairs = []
    for c in range(C):
        for k in range(K):
            rows = [dev_counts[c, restart(dev_energy, c, k, b), k, b] for b in range(dev_energy.shape[-1])]
            pairs.append((-_score(rows), CHECKPOINTS[c], LRS[k], c, k))
    neg, n, lr, c, k = min(pairs)
    assert (tuned.n, tuned.lr) == (n, lr)
    assert tuned.dev_score == pytest.approx(-neg)
    rows = [counts[c, restart(energy, c, k, b), k, b] for b in range(B)]
    assert tuned.summary()["score"] == pytest.approx(_score(rows))
    assert tuned.summary()["N"] == n and tuned.summary()["lr"] == lr
    assert [int(x) for x in tuned.test.restart] == [restart(energy, c, k, b) for b in range(B)]


def test_dev_tuned_select_prefers_the_best_dev_pair():
    C, R, K, B = 2, 1, 2, 3
    dev = torch.zeros(C, R, K, B, 3, dtype=torch.long)
    dev[..., 1:] = 4
    dev[1, 0, 0, :, 0] = 4                  # (N = 10, lr = 10.0) is perfect on dev
    e = torch.zeros(C, R, K, B, dtype=torch.float64)
    tuned = dev_tuned_select(dev, e, dev.clone(), e.clone(), lrs=(10.0, 1.0), checkpoints=(5, 10))
    assert (tuned.n, tuned.lr, tuned.dev_score) == (10, 10.0, 100.0)
    assert float(corpus_score(tuned.test.counts)) == 100.0


def test_selections_reject_bad_shapes():
    counts, energy = _grid(1)
    with pytest.raises(ValueError, match="energy must have shape"):
        min_energy_select(counts, energy[:, :, :, :-1], lrs=LRS, checkpoints=CHECKPOINTS)
    with pytest.raises(ValueError, match="grid"):
        dev_tuned_select(counts[:2], energy[:2], counts, energy, lrs=LRS, checkpoints=CHECKPOINTS)
    with pytest.raises(ValueError, match="NaN"):
        min_energy_select(counts, energy * float("nan"), lrs=LRS, checkpoints=CHECKPOINTS)
