"""Benchmark harnesses and naive baselines: what the ``bench`` stage times against the project's
kernels (a naive beam search, the per-point GD oracle grid, the MH sampler written as Algorithm 4,
the published CRF libraries). At the side of the layering: a harness may import any layer below
it; nothing but the bench stage and tests imports it.
"""
