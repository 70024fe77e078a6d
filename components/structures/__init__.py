"""Exact (and mean-field) inference for structured outputs.

- ``linear_chain``: log partition, marginals, (constrained) Viterbi, scoring and sampling of a
  linear-chain CRF, batched over ragged sequences.
- ``mean_field``: mean-field marginals for chain potentials (Shevchenko & Osokin, eq. 6).
- ``enumerate``: brute force over all labelings, the oracle for tiny sizes in tests.
"""
