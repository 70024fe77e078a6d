"""Exact and approximate inference on your own linear-chain potentials.

Random potentials for 3 sentences of up to 6 tokens over 4 labels stand in for yours. Viterbi's
path is checked against brute force (every one of the 4^6 labelings), log Z and the marginals
against the same enumeration, then momentum GD in the relaxed space (the Tu & Gimpel baseline)
is run at a few step counts and its search error (its energy minus Viterbi's) is printed.

    python examples/own_potentials.py

Prints "viterbi == brute force: True", "log Z == brute force: True", "marginals == brute force:
True" and one line per GD setting.
"""
import itertools

import torch

from components.inference.api import chain, decode, log_partition, marginals

torch.manual_seed(0)
B, N, L = 3, 6, 4
p = chain(torch.randn(B, N, L), torch.randn(L, L), lengths=[6, 4, 1])

# brute force: the score of every labeling of each sentence
best_ok, logz_ok, marg_ok = True, True, True
exact = decode(p)                                       # Viterbi
log_z, probs = log_partition(p), marginals(p)
for b in range(B):
    n = int(p.mask[b].sum())
    ys = torch.tensor(list(itertools.product(range(L), repeat=n)))
    y = torch.zeros(len(ys), N, dtype=torch.long)
    y[:, :n] = ys
    sub = chain(p.unary[b:b + 1].expand(len(ys), -1, -1), p.transition, p.mask[b:b + 1].expand(len(ys), -1))
    scores = -sub.energy(y)
    best_ok &= torch.equal(exact.labels[b, :n], ys[scores.argmax()])
    logz_ok &= torch.allclose(log_z[b], torch.logsumexp(scores, 0), atol=1e-5)
    w = torch.softmax(scores, 0)
    brute = torch.stack([(w[:, None] * torch.nn.functional.one_hot(ys[:, t], L)).sum(0) for t in range(n)])
    marg_ok &= torch.allclose(probs[b, :n], brute, atol=1e-5)
print(f"viterbi == brute force: {best_ok}")
print(f"log Z == brute force: {logz_ok}")
print(f"marginals == brute force: {marg_ok}")

for iterations in (5, 20, 100):
    gd = decode(p, "gd", {"lr": 1.0, "iterations": iterations}, seed=0)
    gap = (gd.energy - exact.energy).tolist()
    print(f"gd, {iterations:3d} iterations: search error per sentence {[round(g, 3) for g in gap]} "
          f"(0 = Viterbi's energy)")
