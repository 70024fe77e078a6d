"""MCMC over discrete sequences: Markov kernels that run many chains at once (one kernel family a
module) and the traces of their runs.

- ``base``: the target ``pi_T ∝ exp(-E / T)``, :class:`ChainState`, the ``Sampler`` protocol, the
  Metropolis acceptance, batch tiling, start states and ``run_chains``;
- ``chain_kernels``: single-site Gibbs for a ChainEnergy, uniform single-site MH for any Energy;
- ``mlm_kernels``: MH with masked-LM proposals and the degenerate Gibbs sampler (thesis ch. 6);
- ``traces``: many chains over MLM energies traced, flattened to rows and summarised;
- ``registry``: ``SAMPLERS``, where each kernel's name is defined, once.

This file stays empty of imports: importing one kernel family does not import the others.
"""
