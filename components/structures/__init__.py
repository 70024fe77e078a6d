"""Exact (and mean-field) inference for structured outputs.

- ``linear_chain``: log partition, marginals, (constrained) Viterbi, scoring and sampling of a
  linear-chain CRF, batched over ragged sequences.
- ``mean_field``: mean-field marginals for chain potentials (Shevchenko & Osokin, eq. 6).
- ``gaussian_crf``: the Gaussian CRF's exact MAP s* = (W + lam I)^-1 U by conjugate gradient,
  with the backward pass by a second solve (implicit differentiation; Chandra & Kokkinos 2016).
- ``enumerate``: brute force over all labelings, the oracle for tiny sizes in tests.
"""
