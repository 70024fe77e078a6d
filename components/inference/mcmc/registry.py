"""``SAMPLERS``: where a Markov kernel's name is defined, once (lazy: an entry's module is imported
when it is built or its config read; see :mod:`components.registry`).

``SAMPLERS.build(name, cfg, seed=...)`` builds a kernel (the ``Sampler`` protocol of
:mod:`components.inference.mcmc.base`) from its own frozen config (a mapping from params is read
strictly) and the seed of its generator (an int; never a config field: a flow derives it from
``base.seed`` with :func:`components.seeds.seed_for`). ``meta["needs"]`` names the energy protocol the kernel requires, as a string:
``"Energy"`` (:mod:`components.energies.base`), ``"ChainEnergy"`` (:mod:`components.energies.chain`),
``"MLMScorer"`` (:mod:`components.energies.mlm`); the kernel's ``needs`` attribute is the class, and
its ``init`` checks it.

Adding a sampler: one module with its config, its kernel and a ``make(cfg)``, one
``SAMPLERS.register`` line below, and (to run it in the ``mcmc`` stage) a params entry under
``mcmc.schemes`` named in a group of ``mcmc.groups``; ``tests/inference/test_mcmc.py`` tests it the
day it is added and the chapter's report lists it.
"""
from components.registry import Registry

SAMPLERS = Registry("sampler")
SAMPLERS.register("gibbs_chain", "GibbsChainConfig", "components.inference.mcmc.chain_kernels:make_gibbs_chain",
                  needs="ChainEnergy", doc="single-site Gibbs (systematic or random scan) for a ChainEnergy")
SAMPLERS.register("mh_uniform", "MHUniformConfig", "components.inference.mcmc.chain_kernels:make_mh_uniform",
                  needs="Energy", doc="Metropolis-Hastings, uniform single-site proposal, for any Energy")
SAMPLERS.register("mh_mlm", "MHMLMConfig", "components.inference.mcmc.mlm_kernels:make_mh_mlm", needs="MLMScorer",
                  doc="Metropolis-Hastings with block / tempered / nucleus masked-LM proposals (thesis ch. 6)")
SAMPLERS.register("gibbs_mlm", "GibbsMLMConfig", "components.inference.mcmc.mlm_kernels:make_gibbs_mlm",
                  needs="MLMScorer", doc="degenerate (block) Gibbs: masked-LM proposals always accepted; biased baseline")
