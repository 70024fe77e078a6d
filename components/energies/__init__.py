"""Energies: the Energy contract (``base``) and its implementations; their names are defined once,
in ``components.energies.registry.ENERGIES``. This file stays empty of imports so that importing
one energy module does not import every energy (DESIGN.md, lazy registries)."""
