"""Loading trained energies and inference networks back from their DVC-tracked folders."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from components.config import from_dict
from components.data.tasks import TaggingTask
from components.energies import ENERGIES
from components.models.encoders import BLSTMConfig


def load_energy(folder: Path, name: str, task: TaggingTask, device: str = "cpu") -> Any:
    """The chain energy ``name`` saved by the ``train_energy`` stage in ``folder`` (frozen, eval mode)."""
    meta_path, weights = folder / "model.json", folder / "model.pt"
    if not weights.exists():
        raise FileNotFoundError(f"{weights}: no trained energy (run `dvc repro train_energy`; is "
                                f"{task.name!r} under train_energy.tasks and {name!r} under train_energy.energies?)")
    meta = json.loads(meta_path.read_text())
    cfg = from_dict(BLSTMConfig, meta["model"], where=f"{meta_path}:model")
    energy = ENERGIES[name](cfg, len(task.vocabs["word"]), len(task.vocabs["char"]), len(task.vocabs["label"]))
    energy.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
    return energy.to(device).eval().requires_grad_(False)
