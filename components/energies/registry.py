"""``ENERGIES``: where an energy's name is defined, once (lazy: an entry's module is imported when
it is built or its config read; see :mod:`components.registry`).

``ENERGIES.build(name, cfg, **inputs)``: chain-CRF energies over tagging data
(``meta["data"] == "tagging"``) take inputs ``n_words, n_chars, n_labels`` and optionally
``glove_ids, glove_vectors, seed``; the Gaussian CRF over grids (``"grid"``) takes
``in_channels, n_labels`` and optionally ``seed``; the masked-LM energies (``"mlm"``, thesis ch. 6)
take ``model``, a ``components.models.mlm.MaskedLM``. ``meta["protocol"]`` names the contract the
built object implements (``"ChainEnergy"`` or ``"Energy"``, classes of ``components.energies.base``).
"""
from components.registry import Registry

ENERGIES = Registry("energy")
ENERGIES.register("blstm_crf", "components.models.encoders:BLSTMConfig", "components.energies.chain_crf:blstm_crf",
                  data="tagging", protocol="ChainEnergy")
ENERGIES.register("blstm_crf_plus", "components.models.encoders:BLSTMConfig",
                  "components.energies.chain_crf:blstm_crf_plus", data="tagging", protocol="ChainEnergy")
ENERGIES.register("gcrf", "GCRFConfig", "components.energies.gcrf:gcrf", data="grid", protocol="Energy",
                  doc="Gaussian CRF with UNet unaries and pixel embeddings (Shevchenko & Osokin Sec. 4.2)")
ENERGIES.register("mlm_raw", "MLMEnergyConfig", "components.energies.mlm:mlm_raw", data="mlm", protocol="Energy",
                  doc="E_raw(y) = -sum_t log phi_t(y): an MLM's raw masked logits (thesis 6.2.1)")
ENERGIES.register("mlm_norm", "MLMEnergyConfig", "components.energies.mlm:mlm_norm", data="mlm", protocol="Energy",
                  doc="E_norm(y) = -sum_t log p_mlm(y_t | y_\\t): locally normalised (thesis 6.2.4)")
