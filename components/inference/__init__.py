"""Inference methods for energies. Their names are defined once, in
``components.inference.registry.INFERENCE`` (Markov kernels: ``components.inference.mcmc.registry.SAMPLERS``).
This file stays empty of imports: importing one method does not import every method.
"""
