"""Orchestration: DVC stages, Ray Tune sweeps, sharded Ray maps. Thin: no maths, no batch loops."""
