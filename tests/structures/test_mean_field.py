"""components.structures.mean_field: fixed points, the simplex, monotone ELBO, exact special cases."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from components.structures import enumerate as en
from components.structures import linear_chain as lc
from components.structures.mean_field import mean_field, neighbour_messages
from tests.structures.test_linear_chain import cases, make_case

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = {torch.float32: 1e-5, torch.float64: 1e-9}


def entropy(q: torch.Tensor) -> torch.Tensor:
    return -(torch.where(q > 0, q * q.log(), 0)).sum((1, 2))


def elbo(case, q: torch.Tensor) -> torch.Tensor:
    """E_q[s(y)] + H(q) <= log Z for a factorised q (the multilinear score is E_q[s(y)])."""
    return lc.score(*case.args, q) + entropy(q)


@SETTINGS
@given(cases(scales=(0.1, 1.0, 2.0)))
def test_alternating_mean_field_reaches_a_fixed_point_on_the_simplex(case):
    tol = TOL[case.unary.dtype]
    res = mean_field(*case.args, n_iters=5000, tol=tol)
    q = res.marginals
    assert res.converged and res.delta < tol and 1 <= res.n_iters <= 5000
    assert q.shape == case.unary.shape and q.dtype == case.unary.dtype
    assert (q[~case.mask] == 0).all() and (q >= 0).all()
    sums = q.sum(-1)[case.mask]
    torch.testing.assert_close(sums, torch.ones_like(sums))
    again = mean_field(*case.args, n_iters=1, tol=0.0, init=q)
    assert again.delta < tol
    # the fixed-point equation (6) itself
    rhs = torch.softmax(case.unary + neighbour_messages(q, case.transition, case.transition.dim() == 4), -1)
    torch.testing.assert_close(q[case.mask], rhs[case.mask], rtol=0, atol=10 * tol)


@settings(max_examples=30, deadline=None)
@given(cases(scales=(0.1, 1.0, 4.0)))
def test_alternating_updates_increase_the_elbo_below_log_z(case):
    case64 = type(case)(*case.args64)
    log_z = en.log_partition(*case64.args)
    q = mean_field(*case64.args, n_iters=1, tol=0.0, init=None).marginals
    prev = elbo(case64, torch.where(case.mask[..., None], torch.softmax(case64.unary, -1), 0))
    for _ in range(10):
        cur = elbo(case64, q)
        assert (cur >= prev - 1e-9).all()
        assert (cur <= log_z + 1e-9).all()
        prev = cur
        q = mean_field(*case64.args, n_iters=1, tol=0.0, init=q).marginals


@SETTINGS
@given(cases(max_N=1))
def test_length_one_mean_field_is_exact(case):
    res = mean_field(*case.args)
    torch.testing.assert_close(res.marginals.double(), en.marginals(*case.args64),
                               rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(cases())
def test_zero_transitions_mean_field_is_exact(case):
    zero = torch.zeros_like(case.transition)
    res = mean_field(case.unary, zero, case.mask, n_iters=3)
    torch.testing.assert_close(res.marginals.double(), en.marginals(case.unary.double(), zero.double(), case.mask),
                               rtol=1e-5, atol=1e-6)
    assert res.converged


@settings(max_examples=30, deadline=None)
@given(cases(scales=(0.1, 0.5), dtypes=(torch.float64,)))
def test_damped_parallel_schedule_reaches_the_same_kind_of_fixed_point(case):
    res = mean_field(*case.args, schedule="parallel", damping=0.5, n_iters=5000, tol=1e-10)
    assert res.converged
    q = res.marginals
    rhs = torch.softmax(case.unary + neighbour_messages(q, case.transition, case.transition.dim() == 4), -1)
    torch.testing.assert_close(q[case.mask], rhs[case.mask], rtol=0, atol=1e-8)


def test_mean_field_is_differentiable():
    case = make_case(2, 3, 2, [3, 2], True, torch.float64, 3, 1.0)
    u = case.unary.clone().requires_grad_()
    w = case.transition.clone().requires_grad_()
    torch.autograd.gradcheck(lambda u, w: mean_field(u, w, case.mask, n_iters=3, tol=0.0).marginals, (u, w))


def test_mean_field_stops_after_n_iters_without_tolerance():
    case = make_case(2, 5, 3, [5, 3], False, torch.float32, 4, 2.0)
    res = mean_field(*case.args, n_iters=3, tol=0.0)
    assert res.n_iters == 3 and not res.converged


@pytest.mark.parametrize("kwargs, word", [
    (dict(n_iters=0), "n_iters"),
    (dict(n_iters=2.5), "n_iters"),
    (dict(damping=1.0), "damping"),
    (dict(damping=-0.1), "damping"),
    (dict(schedule="gauss"), "schedule"),
    (dict(init=torch.zeros(2, 3, dtype=torch.long)), "init"),
    (dict(init=torch.full((2, 3, 4), 0.5)), "simplex"),
])
def test_bad_arguments_raise_value_error(kwargs, word):
    case = make_case(2, 3, 4, [3, 2], False, torch.float32, 0, 1.0)
    with pytest.raises(ValueError, match=word):
        mean_field(*case.args, **kwargs)


def test_bad_potentials_raise_value_error_naming_the_tensor():
    case = make_case(2, 3, 4, [3, 2], False, torch.float32, 0, 1.0)
    with pytest.raises(ValueError, match="unary"):
        mean_field(case.unary.double(), case.transition, case.mask)
    with pytest.raises(ValueError, match="transition"):
        mean_field(case.unary, case.transition[:2], case.mask)
    with pytest.raises(ValueError, match="mask"):
        mean_field(case.unary, case.transition, torch.tensor([[True, False, True], [True, True, True]]))


@pytest.mark.gpu
def test_mean_field_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    for per in (False, True):
        case = make_case(4, 5, 3, [5, 1, 3, 4], per, torch.float64, 0, 1.0)
        res = mean_field(*case.to("cuda").args, n_iters=2000, tol=1e-9)
        ref = mean_field(*case.args, n_iters=2000, tol=1e-9)
        assert res.converged and res.marginals.is_cuda
        torch.testing.assert_close(res.marginals.cpu(), ref.marginals, rtol=1e-7, atol=1e-7)
        n1 = make_case(3, 1, 4, [1, 1, 1], per, torch.float32, 1, 1.0)
        torch.testing.assert_close(mean_field(*n1.to("cuda").args).marginals.double().cpu(),
                                   en.marginals(*n1.args64), rtol=1e-5, atol=1e-6)
