"""Gaussian CRF: CG and implicit differentiation against dense ``torch.linalg.solve``."""
import pytest
import torch

from components.energies.gcrf import GCRFConfig, GaussianCRF
from components.models.unet import UNetConfig
from components.structures.gaussian_crf import (GCRFPotentials, GCRFSolveInfo, conjugate_gradient, dense_potts,
                                                effective_lambda, gcrf_marginals, gcrf_score, gcrf_solve,
                                                potts_matvec, predict)

F64 = torch.float64
TIGHT = dict(max_iter=500, tol=1e-13)


def _inputs(B, M, D, H, W, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(B, M, H, W, dtype=F64, generator=g).requires_grad_(requires_grad)
    A = (0.7 * torch.randn(B, D, H, W, dtype=F64, generator=g)).requires_grad_(requires_grad)
    return U, A


def _dense_solve(U, A, lam, mask=None):
    """Reference: build W + lam_eff I explicitly and solve (autograd through linalg.solve)."""
    if mask is not None:
        U, A = U * mask[:, None], A * mask[:, None]
    B, M, H, W = U.shape
    n = M * H * W
    Hm = dense_potts(A, M) + effective_lambda(A, lam)[:, None, None] * torch.eye(n, dtype=F64)
    return torch.linalg.solve(Hm, U.reshape(B, n, 1)).reshape(B, M, H, W)


@pytest.mark.parametrize("M,H,W", [(2, 2, 3), (3, 3, 4), (2, 1, 6), (3, 2, 5)])
def test_cg_matches_dense_solve(M, H, W):
    U, A = _inputs(2, M, 3, H, W, seed=M * H)
    info = GCRFSolveInfo()
    s = gcrf_solve(U, A, 0.5, info=info, **TIGHT)
    torch.testing.assert_close(s, _dense_solve(U, A, 0.5), rtol=0, atol=1e-10)
    assert info.forward_residual < 1e-12
    assert info.forward_iters <= 2 * 3 + 1 + 2        # <= 2D + 1 distinct eigenvalues (module doc)


def test_conjugate_gradient_generic_batch():
    g = torch.Generator().manual_seed(1)
    Q = torch.randn(3, 5, 5, dtype=F64, generator=g)
    S = Q @ Q.transpose(1, 2) + 0.5 * torch.eye(5, dtype=F64)
    b = torch.randn(3, 5, dtype=F64, generator=g)
    b[1] = 0.0                                          # a zero right-hand side solves to 0
    x, n, res = conjugate_gradient(lambda v: (S @ v[..., None])[..., 0], b, max_iter=100, tol=1e-12)
    torch.testing.assert_close(x, torch.linalg.solve(S, b), rtol=0, atol=1e-9)
    assert x[1].abs().max() == 0 and res[1] == 0 and bool((res <= 1e-12).all()) and n <= 7
    with pytest.raises(ValueError, match="x0"):
        conjugate_gradient(lambda v: v, b, x0=torch.zeros(3, 4, dtype=F64))


@pytest.mark.parametrize("M", [2, 3])
def test_implicit_gradients_match_dense_autograd(M):
    U, A = _inputs(2, M, 3, 2, 4, seed=10 + M, requires_grad=True)
    g = torch.Generator().manual_seed(3)
    w = torch.randn(2, M, 2, 4, dtype=F64, generator=g)
    lam = 0.3

    def loss(s):  # a random nonlinear scalar of s*
        return (w * s).sum() + (s ** 2).sum() * 0.1 + torch.log_softmax(s, 1).sum()

    ours = torch.autograd.grad(loss(gcrf_solve(U, A, lam, **TIGHT)), (U, A))
    dense = torch.autograd.grad(loss(_dense_solve(U, A, lam)), (U, A))
    for a, b in zip(ours, dense):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)


def test_gradcheck_gcrf_solve():
    U, A = _inputs(2, 3, 2, 2, 3, seed=5, requires_grad=True)
    lam = torch.tensor([0.4, 0.9], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda u, a, l: gcrf_solve(u, a, l, max_iter=500, tol=1e-14), (U, A, lam))


def test_mask_decouples_invalid_pixels_and_gradients_match():
    U, A = _inputs(2, 3, 2, 3, 3, seed=7, requires_grad=True)
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    mask[0, 2, :] = False
    mask[1, :, 0] = False
    s = gcrf_solve(U, A, 0.5, mask=mask, **TIGHT)
    assert s[~mask[:, None].expand_as(s)].abs().max() == 0
    ref = _dense_solve(U, A, 0.5, mask=mask.to(F64))
    torch.testing.assert_close(s, ref, rtol=0, atol=1e-10)
    # the valid part equals the solve on the valid pixels alone (example 0: top two rows)
    torch.testing.assert_close(s[:1, :, :2], gcrf_solve(U[:1, :, :2], A[:1, :, :2], 0.5, **TIGHT))
    ours = torch.autograd.grad(s.pow(3).sum(), (U, A))
    dense = torch.autograd.grad(ref.pow(3).sum(), (U, A))
    for a, b in zip(ours, dense):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)


def test_dense_potts_is_eq16_for_two_labels_and_matvec_agrees():
    _, A = _inputs(2, 2, 3, 2, 3, seed=8)
    Af = A.flatten(2).transpose(1, 2)
    K = Af @ Af.transpose(1, 2)
    Z = torch.zeros_like(K)
    eq16 = torch.cat([torch.cat([Z, K], 2), torch.cat([K, Z], 2)], 1)
    torch.testing.assert_close(dense_potts(A, 2), eq16)
    s = torch.randn(2, 3, 6, dtype=F64)
    Wd = dense_potts(A, 3)
    torch.testing.assert_close(potts_matvec(Af, s), (Wd @ s.reshape(2, 18, 1)).reshape(2, 3, 6))
    # W is indefinite; W + lam_eff I is positive definite with smallest eigenvalue >= lam
    ev = torch.linalg.eigvalsh(Wd)
    assert bool((ev.min(1).values < 0).all())
    ev_shift = torch.linalg.eigvalsh(Wd + effective_lambda(A, 0.2)[:, None, None] * torch.eye(18, dtype=F64))
    assert bool((ev_shift.min(1).values >= 0.2 - 1e-10).all())


def test_solution_maximises_score():
    U, A = _inputs(2, 3, 2, 2, 2, seed=9)
    s = gcrf_solve(U, A, 0.5, **TIGHT)
    best = gcrf_score(U, A, 0.5, s)
    for _ in range(3):
        assert bool((gcrf_score(U, A, 0.5, s + 0.1 * torch.randn_like(s)) < best).all())
    sg = s.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(gcrf_score(U, A, 0.5, sg).sum(), sg)
    assert grad.abs().max() < 1e-9


def test_marginals_and_predict():
    s = torch.randn(2, 3, 4, 5)
    p = gcrf_marginals(s)
    torch.testing.assert_close(p.sum(1), torch.ones(2, 4, 5))
    assert predict(s).shape == (2, 4, 5) and predict(s).dtype == torch.long
    assert torch.equal(predict(s), p.argmax(1))


def test_norms_and_rescale():
    U, A = _inputs(3, 3, 2, 3, 4, seed=11)
    p = GCRFPotentials(U, A, 0.5)
    Af = A.flatten(2).transpose(1, 2)
    K = Af @ Af.transpose(1, 2)
    torch.testing.assert_close(p.unary_norm(), U.abs().mean((1, 2, 3)))
    torch.testing.assert_close(p.pairwise_norm(), dense_potts(A, 3).abs().mean((1, 2)))
    torch.testing.assert_close(p.pairwise_norm(), (2 / 3) * K.abs().mean((1, 2)))
    torch.testing.assert_close(p.pairwise_norm(chunk=5), p.pairwise_norm())
    c, d = torch.tensor([0.5, 2.0, 3.0], dtype=F64), torch.tensor([4.0, 0.25, 1.5], dtype=F64)
    q = p.rescale(c, d)
    torch.testing.assert_close(q.unary_norm(), c * p.unary_norm())
    torch.testing.assert_close(q.pairwise_norm(), d * p.pairwise_norm())
    r = p.rescale(2.0, 9.0)
    torch.testing.assert_close(r.unary_norm(), 2.0 * p.unary_norm())
    torch.testing.assert_close(r.pairwise_norm(), 9.0 * p.pairwise_norm())
    torch.testing.assert_close(dense_potts(r.embeddings, 3), 9.0 * dense_potts(A, 3))
    with pytest.raises(ValueError, match=">= 0"):
        p.rescale(1.0, -1.0)
    # masked norms average over valid pixels only
    mask = torch.zeros(3, 3, 4, dtype=torch.bool)
    mask[:, :2, :3] = True
    pm = GCRFPotentials(U, A, 0.5, mask)
    pv = GCRFPotentials(U[:, :, :2, :3], A[:, :, :2, :3], 0.5)
    torch.testing.assert_close(pm.unary_norm(), pv.unary_norm())
    torch.testing.assert_close(pm.pairwise_norm(), pv.pairwise_norm())


def test_bad_shapes_name_the_tensor():
    U, A = _inputs(2, 3, 2, 3, 4)
    with pytest.raises(ValueError, match="embeddings must be"):
        gcrf_solve(U, A[:, :, :2])
    with pytest.raises(ValueError, match="unary must be"):
        gcrf_solve(U[0], A)
    with pytest.raises(ValueError, match="mask must be"):
        gcrf_solve(U, A, mask=torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="lam must be > 0"):
        gcrf_solve(U, A, 0.0)


def test_gaussian_crf_energy_step():
    torch.manual_seed(0)
    net = UNetConfig(depth=1, width=4)
    model = GaussianCRF(3, 4, GCRFConfig(embedding_dim=3, unary=net, pairwise=net), seed=0)
    x, y = torch.rand(2, 3, 5, 6), torch.randint(0, 4, (2, 5, 6))
    mask = torch.ones(2, 5, 6, dtype=torch.bool)
    mask[1, 4:] = False
    p = model.potentials(x, mask)
    info = GCRFSolveInfo()
    loss = model.loss(p, y, info=info)
    assert loss.shape == (2,) and bool(torch.isfinite(loss).all())
    loss.sum().backward()
    assert info.forward_iters > 0 and info.backward_iters > 0
    assert all(q.grad is not None for q in model.embedding_net.parameters() if q.requires_grad)
    p = model.potentials(x, mask)
    assert model.unary_loss(p, y).shape == (2,)
    assert model.predict(p).shape == (2, 5, 6)
    s = model.scores(p)
    assert bool((model.potential_energy(p, s) <= model.potential_energy(p, s + 0.01)).all())
    with pytest.raises(ValueError, match="y must be"):
        model.loss(p, y[:, :4])
    with pytest.raises(ValueError, match="outside"):
        model.loss(p, y + 4)
