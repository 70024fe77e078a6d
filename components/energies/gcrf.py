r"""Gaussian CRF for dense labelling (Chandra & Kokkinos 2016; Chandra et al. 2017; Shevchenko &
Osokin, Sec. 4.2 and 6.1): UNet unaries, UNet pixel embeddings, exact inference by CG.

    U = UNet_u(x) [B, M, H, W],   A = UNet_a(x) [B, D, H, W],   W = (J - I) ⊗ A A^T,
    s* = (W + lam_eff I)^{-1} U,  p_j = softmax_k s*_{k, j}  (eq. 14),  y_hat_j = argmax_k s*_{k, j},

with ``lam_eff = lam + ||A||_F^2`` per image (see :mod:`components.structures.gaussian_crf` for
why the shift is needed and the implicit-differentiation backward pass). The training loss is the
per-pixel cross-entropy of ``p`` averaged over (valid) pixels (eqs. 14 and 5); the stage
procedure's first stage trains the unary network alone with the cross-entropy of
``softmax_k U_{k, j}`` (:meth:`GaussianCRF.unary_loss`). The energy of a continuous score map is
``E(x, s) = -F(s)`` (eq. 9), lowest at ``s*``.

Shapes: x [B, C, H, W] float, y [B, H, W] long in 0..M-1, mask [B, H, W] bool (optional).
Cost per batch: two UNet passes plus ``n_iter`` Potts products ``O(B M H W D)`` forward, the same
again backward (``n_iter <= 2 D + 1`` in exact arithmetic).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from components.config import check_range
from components.models.unet import UNet, UNetConfig
from components.structures.gaussian_crf import (GCRFPotentials, GCRFSolveInfo, GCRFSolverConfig, gcrf_score,
                                                gcrf_solve)

__all__ = ["GCRFConfig", "GaussianCRF"]


@dataclass(frozen=True)
class GCRFConfig:
    embedding_dim: int = 8                                            # D, pixel-embedding size
    unary: UNetConfig = field(default_factory=UNetConfig)             # the unary network
    pairwise: UNetConfig = field(default_factory=UNetConfig)          # the embedding network
    solver: GCRFSolverConfig = field(default_factory=GCRFSolverConfig)  # lam, CG iterations and tolerance

    def __post_init__(self):
        check_range(self, positive=("embedding_dim",))


class GaussianCRF(nn.Module):
    structure = "grid"                 # see components.energies.base.ChainEnergy

    def __init__(self, in_channels: int, n_labels: int, cfg: GCRFConfig = GCRFConfig(), seed: int | None = None):
        super().__init__()
        if n_labels < 2 or cfg.embedding_dim < 1 or not cfg.solver.lam > 0:
            raise ValueError(f"GaussianCRF: need n_labels >= 2, embedding_dim >= 1 and lam > 0, "
                             f"got n_labels={n_labels}, {cfg}")
        self.cfg = cfg
        self.n_labels = n_labels
        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            self.unary_net = UNet(in_channels, n_labels, cfg.unary)
            self.embedding_net = UNet(in_channels, cfg.embedding_dim, cfg.pairwise)

    def potentials(self, x, mask: Tensor | None = None) -> GCRFPotentials:
        """x [B, C, H, W] (mask bool [B, H, W] or None), or a batch with ``.x`` and ``.mask`` (a
        ``GridBatch``) -> unary [B, M, H, W], embeddings [B, D, H, W]."""
        if not isinstance(x, Tensor):
            x, mask = x.x, x.mask
        return GCRFPotentials(self.unary_net(x), self.embedding_net(x), self.cfg.solver.lam, mask)

    def unary_parameters(self):
        return self.unary_net.parameters()

    def pairwise_parameters(self):
        return self.embedding_net.parameters()

    def scores(self, p: GCRFPotentials, info: GCRFSolveInfo | None = None) -> Tensor:
        """s* [B, M, H, W] (eq. 12), differentiable by implicit differentiation (eq. 15)."""
        return gcrf_solve(p.unary, p.embeddings, p.lam, mask=p.mask, max_iter=self.cfg.solver.max_iter,
                          tol=self.cfg.solver.tol, info=info)

    def energy(self, batch, y: Tensor) -> Tensor:
        """The ``Energy`` contract: E(x, y) = -F(y) [B] for a batch (a ``GridBatch`` or x [B, C, H, W])
        and continuous scores y [B, M, H, W] or pixel labels y [B, H, W] (read as one-hot scores)."""
        return self.potential_energy(self.potentials(batch), y)

    def potential_energy(self, p: GCRFPotentials, y: Tensor) -> Tensor:
        """E(x, y) = -F(y) [B] from potentials computed once (see :meth:`energy`)."""
        if not y.dtype.is_floating_point:
            y = F.one_hot(self._check_y(p, y), self.n_labels).permute(0, 3, 1, 2).to(p.unary.dtype)
        return -gcrf_score(p.unary, p.embeddings, p.lam, y, mask=p.mask)

    def _check_y(self, p: GCRFPotentials, y: Tensor) -> Tensor:
        B, M, H, W = p.unary.shape
        if y.shape != (B, H, W) or y.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise ValueError(f"y must be integer labels [B, H, W] = [{B}, {H}, {W}], got {y.dtype} {list(y.shape)}")
        y = y.long()
        valid = torch.ones_like(y, dtype=torch.bool) if p.mask is None else p.mask
        if bool(((y[valid] < 0) | (y[valid] >= M)).any()):
            raise ValueError(f"y has labels outside 0..{M - 1} at valid pixels")
        return torch.where(valid, y, torch.zeros_like(y))

    def _pixel_ce(self, logits: Tensor, p: GCRFPotentials, y: Tensor) -> Tensor:
        ce = F.cross_entropy(logits, self._check_y(p, y), reduction="none")     # [B, H, W]
        if p.mask is None:
            return ce.flatten(1).mean(1)
        m = p.mask.to(ce.dtype)
        return (ce * m).flatten(1).sum(1) / m.flatten(1).sum(1).clamp_min(1.0)

    def loss(self, p: GCRFPotentials, y: Tensor, info: GCRFSolveInfo | None = None) -> Tensor:
        """[B] per-pixel cross-entropy of softmax(s*) (eqs. 14, 5), averaged over valid pixels."""
        return self._pixel_ce(self.scores(p, info), p, y)

    def unary_loss(self, p: GCRFPotentials, y: Tensor) -> Tensor:
        """[B] per-pixel cross-entropy of softmax(U) alone (the unary stage of stage training)."""
        return self._pixel_ce(p.unary, p, y)

    def predict(self, p: GCRFPotentials) -> Tensor:
        """long [B, H, W]: argmax_k s*_{k, j} (eq. 13); invalid pixels get label 0."""
        with torch.no_grad():
            return self.scores(p).argmax(1)


def gcrf(cfg: GCRFConfig, in_channels: int, n_labels: int, seed: int | None = None) -> GaussianCRF:
    """Gaussian CRF with UNet unaries and pixel embeddings (Shevchenko & Osokin Sec. 4.2)."""
    return GaussianCRF(in_channels, n_labels, cfg, seed=seed)
