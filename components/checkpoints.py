"""A trained model's folder: ``model.pt`` (weights) beside ``model.json`` with its *recipe*.

The recipe is everything needed to rebuild the module before its weights are loaded, written by
whoever trained it, so loading never consults ``params.yaml`` (whose values may have changed
since, or been overridden by the trial that won a sweep)::

    {"kind": "energy" | "infnet" | "tagger" | "seq2seq" | "translator",    # which builder
     "name": "blstm_crf_plus" | "cnn" | ...,     # registry name (energies) or architecture
     "config": {...},                            # the builder's frozen config, as a mapping
     "sizes": {"n_words": .., "n_chars": .., "n_labels": ..},   # a translator: n_src, n_tgt, eos, pad
     "prefix": "net."}                           # optional: the weights are a wrapper's, keep this part

:func:`components.recipes.recipe` writes a recipe (no model code needed to describe one);
:func:`build` and :func:`load` read it with the registries' builders (``ENERGIES``) and the model
constructors (``components.models``); embeddings are not re-read from GloVe since the weights
hold them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from components.config import ConfigError, from_dict
from components.energies.registry import ENERGIES
from components.models.encoders import BLSTMConfig, BLSTMTagger
from components.models.infnets import InfNetConfig, build_infnet
from components.models.seq2seq import Seq2SeqTagger, Seq2SeqTaggerConfig
from components.models.translator import AttentionTranslator, TranslatorConfig
from components.recipes import KINDS


def build(rec: dict[str, Any], where: str = "recipe") -> nn.Module:
    """An untrained module from its recipe."""
    try:
        kind, name, cfg, sizes = rec["kind"], rec["name"], rec["config"], rec["sizes"]
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{where}: not a model recipe (missing {e})") from None
    if kind == "translator":
        try:
            return AttentionTranslator(from_dict(TranslatorConfig, cfg, where=f"{where}.config"), int(sizes["n_src"]),
                                       int(sizes["n_tgt"]), eos=int(sizes["eos"]), pad=int(sizes["pad"]))
        except KeyError as e:
            raise ConfigError(f"{where}.sizes: a translator recipe needs n_src, n_tgt, eos and pad (missing {e})") from None
    n = (sizes["n_words"], sizes["n_chars"], sizes["n_labels"])
    if kind == "energy":
        return ENERGIES.build(name, ENERGIES.config(name, cfg, where=f"{where}.config"),
                              n_words=n[0], n_chars=n[1], n_labels=n[2])
    if kind == "infnet":
        return build_infnet(from_dict(InfNetConfig, cfg, where=f"{where}.config"), *n)
    if kind == "tagger":
        return BLSTMTagger(from_dict(BLSTMConfig, cfg, where=f"{where}.config"), n[0], n[2], n_chars=n[1])
    if kind == "seq2seq":
        return Seq2SeqTagger(from_dict(Seq2SeqTaggerConfig, cfg, where=f"{where}.config"), n[0], n[2], n_chars=n[1])
    raise ConfigError(f"{where}.kind: {kind!r} is not one of {KINDS}")


def load(folder: str | Path, device: str = "cpu", *, expect: str | None = None) -> nn.Module:
    """The trained module saved in ``folder`` in eval mode, rebuilt from its recipe. An energy is
    frozen (``requires_grad`` off: inference never trains it); a network keeps its own choice of
    trainable parameters (instance tailoring copies exactly those)."""
    folder = Path(folder)
    meta_path, weights = folder / "model.json", folder / "model.pt"
    if not weights.exists() or not meta_path.exists():
        raise FileNotFoundError(f"{folder}: no trained model (model.pt and model.json); run the stage that trains it")
    meta = json.loads(meta_path.read_text())
    rec = meta.get("recipe")
    if rec is None:
        raise ConfigError(f"{meta_path}: no 'recipe' (saved by an older version; re-run the stage that trained it)")
    if expect is not None and rec.get("kind") != expect:
        raise ConfigError(f"{meta_path}: a {rec.get('kind')!r} model, expected {expect!r}")
    module = build(rec, where=f"{meta_path}:recipe")
    state = torch.load(weights, map_location=device, weights_only=True)
    prefix = rec.get("prefix", "")
    if prefix:
        state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    module.load_state_dict(state)
    module = module.to(device).eval()
    return module.requires_grad_(False) if rec["kind"] == "energy" else module
