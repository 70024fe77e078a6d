"""Conformance of every ``ENERGIES`` entry with the Energy contract: ``energy(batch, y) -> [B]``;
discrete outputs and their one-hot relaxations score the same (masked-LM energies, defined on
token ids only, reject a relaxed output); chain energies agree with their potentials."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from components.data.grids import GridBatch
from components.energies.base import Energy
from components.energies.chain import ChainEnergy
from components.energies.registry import ENERGIES
from components.energies.base import conforms
from components.models.mlm import BiLSTMMLM, BiLSTMMLMConfig
from tests.energies.test_mlm_energy import ragged_batch
from tests.inference.test_conformance import DS, SIZES


def _tagging(name):
    torch.manual_seed(0)
    e = ENERGIES.build(name, ENERGIES.config(name, {"hidden": 4}), **SIZES).double().eval()
    batch = DS.collate(list(range(len(DS))))
    return e, batch, batch.tags, SIZES["n_labels"]


def _grid(name):
    small = {"embedding_dim": 2, "unary": {"depth": 1, "width": 4}, "pairwise": {"depth": 1, "width": 4}}
    e = ENERGIES.build(name, ENERGIES.config(name, small), in_channels=3, n_labels=2, seed=0).double().eval()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 6, 5, generator=g, dtype=torch.double)
    y = torch.randint(0, 2, (2, 6, 5), generator=g)
    mask = torch.ones(2, 6, 5, dtype=torch.bool)
    mask[1, 4:] = False
    return e, GridBatch(x, y, mask), y, 2


def _mlm(name):
    model = BiLSTMMLM(5, BiLSTMMLMConfig(embedding_dim=4, hidden=4), seed=0)
    e = ENERGIES.build(name, ENERGIES.config(name, {"max_rows": 3}), model=model).double().eval()
    batch = ragged_batch(B=3, N=4, lengths=(4, 1, 2))
    y = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(0)).masked_fill(~batch.mask, 0)
    return e, batch, y, 5


@pytest.mark.parametrize("name", sorted(ENERGIES))
def test_energy_contract(name):
    entry = ENERGIES[name]
    energy, batch, y, L = {"tagging": _tagging, "grid": _grid, "mlm": _mlm}[entry.meta["data"]](name)
    assert conforms(energy, {"ChainEnergy": ChainEnergy, "Energy": Energy}[entry.meta["protocol"]]) and conforms(energy, Energy)
    assert conforms(energy, ChainEnergy) == (entry.meta["protocol"] == "ChainEnergy")
    with torch.no_grad():
        e = energy.energy(batch, y)
        assert e.shape == (y.shape[0],) and bool(torch.isfinite(e).all())
        onehot = F.one_hot(y, L).double()
        if entry.meta["data"] == "mlm":
            with pytest.raises(ValueError, match="relaxed"):
                energy.energy(batch, onehot)
            return
        if entry.meta["data"] == "grid":
            onehot = onehot.permute(0, 3, 1, 2)
        assert torch.allclose(energy.energy(batch, onehot), e)            # discrete == one-hot relaxed
        if conforms(energy, ChainEnergy):
            assert torch.equal(energy.potentials(batch).energy(y), e)
