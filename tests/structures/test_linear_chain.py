"""components.structures.linear_chain against brute-force enumeration (components.structures.enumerate).

Random chains have ragged lengths (including 1), batch sizes 1-4, label counts 1-4, shared and
per-position transitions, float32 and float64. Exactness is judged against float64 brute force
on the same (cast) potentials.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.structures import enumerate as en
from components.structures import linear_chain as lc

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Case:
    unary: torch.Tensor
    transition: torch.Tensor
    mask: torch.Tensor

    @property
    def args(self):
        return self.unary, self.transition, self.mask

    @property
    def args64(self):
        return self.unary.double(), self.transition.double(), self.mask

    @property
    def lengths(self) -> list[int]:
        return self.mask.sum(1).tolist()

    def to(self, device):
        return Case(self.unary.to(device), self.transition.to(device), self.mask.to(device))


def make_case(B, N, L, lengths, per_position, dtype, seed, scale, device="cpu") -> Case:
    g = torch.Generator().manual_seed(seed)
    unary = scale * torch.randn(B, N, L, generator=g, dtype=torch.float64)
    if per_position:
        transition = scale * torch.randn(B, N - 1, L, L, generator=g, dtype=torch.float64)
    else:
        transition = scale * torch.randn(L, L, generator=g, dtype=torch.float64)
    mask = torch.arange(N)[None, :] < torch.tensor(lengths)[:, None]
    return Case(unary.to(dtype), transition.to(dtype), mask).to(device)


@st.composite
def cases(draw, max_B=4, max_N=5, min_L=1, max_L=4, scales=(0.1, 1.0, 4.0), dtypes=(torch.float32, torch.float64),
          per_position=None):
    B = draw(st.integers(1, max_B))
    N = draw(st.integers(1, max_N))
    L = draw(st.integers(min_L, max_L))
    lengths = [N] + draw(st.lists(st.integers(1, N), min_size=B - 1, max_size=B - 1))  # one full row
    lengths = draw(st.permutations(lengths))
    per = draw(st.booleans()) if per_position is None else per_position
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from(scales))
    return make_case(B, N, L, lengths, per, dtype, seed, scale)


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


def brute_score(case: Case, b: int, y: torch.Tensor) -> torch.Tensor:
    """Score of labels y[:n_b] of sequence b, looked up in the enumeration (float64)."""
    Y, s = en.all_scores(*case.args64, b)
    n = Y.shape[1]
    L = case.unary.shape[-1]
    k = int(sum(int(y[t]) * L ** (n - 1 - t) for t in range(n)))
    assert torch.equal(Y[k].cpu(), y[:n].cpu())
    return s[k]


# ---------------------------------------------------------------------------------------------
# log Z, marginals, gradients
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(cases())
def test_log_partition_matches_brute_force(case):
    got = lc.log_partition(*case.args)
    assert got.dtype == case.unary.dtype and got.shape == (case.unary.shape[0],)
    want = en.log_partition(*case.args64)
    torch.testing.assert_close(got.double(), want, **tol(case.unary.dtype))


@SETTINGS
@given(cases())
def test_marginals_match_brute_force_and_sum_to_one(case):
    got = lc.marginals(*case.args)
    torch.testing.assert_close(got.double(), en.marginals(*case.args64), **tol(case.unary.dtype))
    sums = got.sum(-1)
    torch.testing.assert_close(sums[case.mask], torch.ones_like(sums[case.mask]), **tol(case.unary.dtype))
    assert (got[~case.mask] == 0).all()
    assert (got >= 0).all()


@SETTINGS
@given(cases())
def test_gradients_of_log_partition_are_brute_force_expectations(case):
    """d log Z / d unary = marginals; d log Z / d transition = expected transition counts."""
    u = case.unary.clone().requires_grad_()
    w = case.transition.clone().requires_grad_()
    lc.log_partition(u, w, case.mask).sum().backward()
    u64 = case.unary.double().requires_grad_()
    w64 = case.transition.double().requires_grad_()
    en.log_partition(u64, w64, case.mask).sum().backward()
    t = tol(case.unary.dtype)
    torch.testing.assert_close(u.grad.double(), u64.grad, **t)
    if case.unary.shape[1] == 1:            # transitions unused: no gradient at all
        assert w.grad is None and w64.grad is None
    else:
        torch.testing.assert_close(w.grad.double(), w64.grad, **t)
    torch.testing.assert_close(u.grad, lc.marginals(*case.args), **t)


@settings(max_examples=25, deadline=None)
@given(cases(dtypes=(torch.float64,)))
def test_marginals_are_differentiable(case):
    """Second derivatives through marginals (a loss on marginals can be trained)."""
    u = case.unary.clone().requires_grad_()
    w = case.transition.clone().requires_grad_()
    m = lc.marginals(u, w, case.mask)
    assert m.requires_grad
    gu, gw = torch.autograd.grad((m * torch.arange(m.shape[-1], dtype=m.dtype)).sum(), (u, w), allow_unused=True)
    u64 = case.unary.clone().requires_grad_()
    w64 = case.transition.clone().requires_grad_()
    m64 = en.marginals(u64, w64, case.mask)
    hu, hw = torch.autograd.grad((m64 * torch.arange(m.shape[-1], dtype=m.dtype)).sum(), (u64, w64),
                                 allow_unused=True)
    torch.testing.assert_close(gu, hu, rtol=1e-8, atol=1e-8)
    if case.unary.shape[1] > 1:
        torch.testing.assert_close(gw, hw, rtol=1e-8, atol=1e-8)


def test_marginals_under_no_grad_and_of_graph_inputs():
    case = make_case(2, 4, 3, [4, 2], False, torch.float32, 0, 1.0)
    with torch.no_grad():
        m = lc.marginals(*case.args)
    assert not m.requires_grad
    torch.testing.assert_close(m.double(), en.marginals(*case.args64), rtol=1e-5, atol=1e-5)
    u = case.unary.clone().requires_grad_() * 1.0          # non-leaf input
    m2 = lc.marginals(u, case.transition, case.mask)
    assert m2.requires_grad
    torch.testing.assert_close(m2.detach(), m)


# ---------------------------------------------------------------------------------------------
# Viterbi and score
# ---------------------------------------------------------------------------------------------

def check_viterbi(case: Case, labels: torch.Tensor, best: torch.Tensor, **constraints):
    B, N, L = case.unary.shape
    assert labels.dtype == torch.long and labels.shape == (B, N) and best.shape == (B,)
    assert (labels[~case.mask] == 0).all()
    assert ((labels >= 0) & (labels < L)).all()
    _, want = en.argmax(*case.args64, **constraints)
    t = tol(case.unary.dtype)
    torch.testing.assert_close(best.double(), want, **t)
    for b in range(B):   # the labels really have the best score (ties may pick other labels)
        torch.testing.assert_close(brute_score(case, b, labels[b]), want[b], **t)
    torch.testing.assert_close(best, lc.score(*case.args, labels))


@SETTINGS
@given(cases())
def test_viterbi_matches_brute_force(case):
    labels, best = lc.viterbi(*case.args)
    check_viterbi(case, labels, best)


@settings(max_examples=30, deadline=None)
@given(cases(max_N=3, min_L=25, max_L=40, max_B=3))
def test_viterbi_many_labels_path_matches_brute_force(case):
    """L > 24 takes the recomputed-argmax backtrace (and chunking, see below)."""
    labels, best = lc.viterbi(*case.args)
    check_viterbi(case, labels, best)


@settings(max_examples=30, deadline=None)
@given(cases(max_N=4, max_L=4), st.integers(1, 8))
def test_chunked_semiring_steps_match_brute_force(case, chunk_elements):
    """Force the chunked max-plus / log-space steps (normally only for large B * L)."""
    old = lc._CHUNK_ELEMENTS
    lc._CHUNK_ELEMENTS = chunk_elements
    try:
        logz, _ = lc._forward_log(*case.args64, case.transition.dim() == 4)
        torch.testing.assert_close(logz, en.log_partition(*case.args64))
        orig = lc._BACKPOINTER_MAX_LABELS
        lc._BACKPOINTER_MAX_LABELS = 0
        try:
            labels, best = lc.viterbi(*case.args)
        finally:
            lc._BACKPOINTER_MAX_LABELS = orig
        check_viterbi(case, labels, best)
    finally:
        lc._CHUNK_ELEMENTS = old


def test_compiled_step_expression_equals_eager_step():
    g = torch.Generator().manual_seed(0)
    d, u = torch.randn(5, 30, generator=g), torch.randn(5, 30, generator=g)
    for WT in (torch.randn(30, 30, generator=g), torch.randn(5, 30, 30, generator=g)):
        torch.testing.assert_close(lc._maxplus_step(d, WT, u), lc._eager_maxplus_step(d, WT, u), rtol=0, atol=0)


def test_compile_failure_falls_back_to_eager(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr(torch, "compile", broken)
    lazy = lc._LazyCompiled(lc._maxplus_step, lc._eager_maxplus_step)
    monkeypatch.setattr(lc, "_COMPILED_MAXPLUS", lazy)
    case = make_case(2, 3, 70, [3, 2], False, torch.float64, 1, 1.0)
    with pytest.warns(RuntimeWarning, match="torch.compile"):
        labels, best = lc.viterbi(*case.args, compile=True)
    assert lazy.failed
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # warned once only
        labels2, best2 = lc.viterbi(*case.args, compile=True)
    ref_labels, ref_best = lc.viterbi(*case.args, compile=False)
    assert torch.equal(labels, ref_labels) and torch.equal(labels2, ref_labels)
    torch.testing.assert_close(best, ref_best)


def test_compile_switch(monkeypatch):
    monkeypatch.delenv(lc._COMPILE_ENV, raising=False)
    assert not lc._use_compile(None, 400)
    monkeypatch.setenv(lc._COMPILE_ENV, "1")
    assert lc._use_compile(None, 400) and not lc._use_compile(None, 17) and not lc._use_compile(False, 400)


@SETTINGS
@given(cases(), st.integers(0, 2**31 - 1))
def test_score_matches_brute_force_and_one_hot(case, seed):
    B, N, L = case.unary.shape
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, L, (B, N), generator=g)
    y_padded = torch.where(case.mask, y, -100)       # masked label values are ignored
    got = lc.score(*case.args, y_padded)
    want = torch.stack([brute_score(case, b, y[b]) for b in range(B)])
    torch.testing.assert_close(got.double(), want, **tol(case.unary.dtype))
    one_hot = torch.nn.functional.one_hot(y, L).to(case.unary.dtype)
    torch.testing.assert_close(lc.score(*case.args, one_hot), got)


@SETTINGS
@given(cases(), st.integers(0, 2**31 - 1))
def test_relaxed_score_is_the_multilinear_expression(case, seed):
    B, N, L = case.unary.shape
    g = torch.Generator().manual_seed(seed)
    q = torch.softmax(3 * torch.randn(B, N, L, generator=g, dtype=torch.float64), -1)
    got = lc.score(case.unary, case.transition, case.mask, q.to(case.unary.dtype))
    U, W = case.unary.double(), case.transition.double()
    want = []
    for b in range(B):
        n = int(case.mask[b].sum())
        s = sum(q[b, t] @ U[b, t] for t in range(n))
        for t in range(1, n):
            Wt = W[b, t - 1] if W.dim() == 4 else W
            s = s + q[b, t - 1] @ Wt @ q[b, t]
        want.append(s)
    torch.testing.assert_close(got.double(), torch.stack(want), **tol(case.unary.dtype))


# ---------------------------------------------------------------------------------------------
# Constrained decoding
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(cases(), st.integers(0, 2**31 - 1), st.booleans())
def test_constrained_viterbi_matches_constrained_brute_force(case, seed, ends):
    B, N, L = case.unary.shape
    g = torch.Generator().manual_seed(seed)
    allowed = torch.rand(L, L, generator=g) < 0.6
    start = (torch.rand(L, generator=g) < 0.7) if ends else None
    end = (torch.rand(L, generator=g) < 0.7) if ends else None
    kw = dict(allowed=allowed, allowed_start=start, allowed_end=end)
    try:
        en.argmax(*case.args64, **kw)
    except ValueError:
        with pytest.raises(ValueError, match="allowed"):
            lc.viterbi(*case.args, **kw)
        return
    labels, best = lc.viterbi(*case.args, **kw)
    check_viterbi(case, labels, best, **kw)
    for b, n in enumerate(case.lengths):
        y = labels[b, :n]
        assert allowed[y[:-1], y[1:]].all(), "a forbidden transition was emitted"
        if ends:
            assert start[y[0]] and end[y[-1]]


BIOES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "*"]


def is_valid_bioes(tags: list[str]) -> bool:
    open_type = None
    for tag in tags:
        p, typ = (tag[0], tag[2:]) if tag not in ("O", "*") else ("O", "")
        if open_type is not None:
            if p not in "IE" or typ != open_type:
                return False
            open_type = None if p == "E" else open_type
        else:
            if p in "IE":
                return False
            open_type = typ if p == "B" else None
    return open_type is None


def test_bioes_allowed_entries():
    allowed, start, end = lc.bioes_allowed(BIOES)
    ix = {t: i for i, t in enumerate(BIOES)}
    assert allowed.dtype == start.dtype == end.dtype == torch.bool
    assert allowed[ix["B-PER"], ix["I-PER"]] and allowed[ix["B-PER"], ix["E-PER"]]
    assert not allowed[ix["B-PER"], ix["E-LOC"]] and not allowed[ix["B-PER"], ix["O"]]
    assert not allowed[ix["I-PER"], ix["S-PER"]] and allowed[ix["I-PER"], ix["I-PER"]]
    assert allowed[ix["E-PER"], ix["B-LOC"]] and allowed[ix["S-LOC"], ix["O"]] and allowed[ix["O"], ix["*"]]
    assert not allowed[ix["O"], ix["I-PER"]] and not allowed[ix["S-PER"], ix["E-PER"]]
    assert start.tolist() == [True, True, False, False, True, True, False, False, True, True]
    assert end.tolist() == [True, False, False, True, True, False, False, True, True, True]
    for bad in (["O", "X-PER"], ["O", "PER"], ["B-"], []):
        with pytest.raises(ValueError, match="labels"):
            lc.bioes_allowed(bad)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 7), st.integers(0, 2**31 - 1))
def test_bioes_constrained_viterbi_emits_valid_sequences(B, N, seed):
    allowed, start, end = lc.bioes_allowed(BIOES)
    L = len(BIOES)
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, N + 1, (B,), generator=g)
    mask = torch.arange(N)[None] < lengths[:, None]
    unary, W = 3 * torch.randn(B, N, L, generator=g), torch.randn(L, L, generator=g)
    labels, best = lc.viterbi(unary, W, mask, allowed=allowed, allowed_start=start, allowed_end=end)
    for b in range(B):
        assert is_valid_bioes([BIOES[i] for i in labels[b, : int(lengths[b])]])
    torch.testing.assert_close(best, lc.score(unary, W, mask, labels))


# ---------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_frequencies_match_marginals(per_position, dtype):
    case = make_case(3, 4, 3, [4, 1, 3], per_position, dtype, seed=7, scale=1.0)
    S = 20_000
    y = lc.sample(*case.args, n_samples=S, generator=torch.Generator().manual_seed(0))
    assert y.shape == (S, 3, 4) and y.dtype == torch.long
    assert (y[:, ~case.mask] == 0).all()
    L = case.unary.shape[-1]
    freq = torch.nn.functional.one_hot(y, L).double().mean(0)
    p = en.marginals(*case.args64)
    # Each frequency is a binomial proportion with sd sqrt(p (1 - p) / S); with ~30 entries, a
    # 5-sigma band is exceeded by chance with probability < 1e-5 (the seed is fixed anyway).
    # 1 / S absorbs p ~ 0, where the normal approximation fails.
    band = 5 * torch.sqrt(p * (1 - p) / S) + 1.0 / S
    ok = ((freq - p).abs() <= band)[case.mask]
    assert ok.all(), (freq - p)[case.mask].abs().max()
    # pairs too: the sampler draws whole sequences, not independent positions
    b = 0
    Y, s = en.all_scores(*case.args64, b)
    joint = torch.softmax(s, 0)
    pair = torch.zeros(L, L, dtype=torch.float64)
    pair.index_put_((Y[:, 1], Y[:, 2]), joint, accumulate=True)
    emp = torch.zeros(L, L, dtype=torch.float64)
    emp.index_put_((y[:, b, 1], y[:, b, 2]), torch.ones(S, dtype=torch.float64), accumulate=True)
    emp /= S
    assert ((emp - pair).abs() <= 5 * torch.sqrt(pair * (1 - pair) / S) + 1.0 / S).all()


def test_sample_is_reproducible_and_validates_n_samples():
    case = make_case(2, 3, 3, [3, 2], False, torch.float32, 0, 1.0)
    a = lc.sample(*case.args, n_samples=5, generator=torch.Generator().manual_seed(1))
    b = lc.sample(*case.args, n_samples=5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n_samples"):
            lc.sample(*case.args, n_samples=bad)


# ---------------------------------------------------------------------------------------------
# Large potentials (the log-space fallback)
# ---------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(cases(scales=(1e3, 300.0, 60.0, 30.0)))
def test_large_potentials_are_finite_and_exact(case):
    dtype = case.unary.dtype
    logz = lc.log_partition(*case.args)
    assert torch.isfinite(logz).all()
    # float32 carries ~7 digits of log Z ~ 1e3 * N: compare relative to the magnitude
    t = dict(rtol=2e-6, atol=1e-2) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-8)
    torch.testing.assert_close(logz.double(), en.log_partition(*case.args64), **t)
    m = lc.marginals(*case.args)
    assert torch.isfinite(m).all()
    # marginals are exp(differences of ~1e3-sized scores): a float32 rounding of 1e-4 in a score
    # moves a marginal by ~1e-4
    mt = dict(rtol=0, atol=2e-3) if dtype == torch.float32 else dict(rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(m.double(), en.marginals(*case.args64), **mt)
    labels, best = lc.viterbi(*case.args)
    assert torch.isfinite(best).all()
    _, want = en.argmax(*case.args64)
    torch.testing.assert_close(best.double(), want, **t)
    y = lc.sample(*case.args, n_samples=3)
    assert ((y >= 0) & (y < case.unary.shape[-1])).all()


def test_large_potentials_take_the_fallback_and_sample_the_mode():
    case = make_case(2, 5, 4, [5, 3], False, torch.float32, 3, 1e3)
    _, inexact, _ = lc._forward_scaled(*case.args, False)
    assert inexact.all()
    labels, _ = lc.viterbi(*case.args)
    # scores are 1e3 apart: the distribution is a point mass on the Viterbi labels
    y = lc.sample(*case.args, n_samples=50)
    assert (y == labels).all()
    m = lc.marginals(*case.args)
    assert torch.equal(m.argmax(-1) * case.mask, labels)


@pytest.mark.parametrize("per_position, seed, scale", [(True, 6, 30.0), (False, 3, 60.0), (True, 28, 60.0)])
def test_a_label_lost_to_underflow_is_caught(per_position, seed, scale):
    """Regression: each step's normaliser was fine, but a label that underflowed early was
    the one the later potentials favoured (log Z was 5% too small)."""
    case = make_case(3, 5, 4, [5, 3, 1], per_position, torch.float32, seed, scale)
    torch.testing.assert_close(lc.log_partition(*case.args).double(), en.log_partition(*case.args64),
                               rtol=1e-6, atol=1e-3)


def test_moderate_potentials_stay_on_the_fast_path():
    case = make_case(4, 6, 4, [6, 6, 2, 1], True, torch.float32, 5, 3.0)
    _, inexact, _ = lc._forward_scaled(*case.args, True)
    assert not inexact.any()


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

def _good():
    return make_case(2, 3, 4, [3, 2], False, torch.float32, 0, 1.0)


def _bad_inputs():
    c = _good()
    U, W, M = c.args
    y = torch.zeros(2, 3, dtype=torch.long)
    return {
        "unary 2-d": ((U[0], W, M), {}, "unary"),
        "unary int": ((U.long(), W.long(), M), {}, "unary"),
        "unary float16": ((U.half(), W.half(), M), {}, "unary"),
        "unary list": ((U.tolist(), W, M), {}, "unary"),
        "empty batch": ((U[:0], W, M[:0]), {}, "unary"),
        "empty sequences": ((U[:, :0], W, M[:, :0]), {}, "unary"),
        "no labels": ((U[..., :0], W[:0, :0], M), {}, "unary"),
        "unary NaN": ((U.index_put((torch.tensor(1), torch.tensor(2), torch.tensor(3)), torch.tensor(math.nan)), W, M),
                      {}, "unary"),
        "unary inf": ((U.index_put((torch.tensor(0),), torch.tensor(math.inf)), W, M), {}, "unary"),
        "transition shape": ((U, W[:3], M), {}, "transition"),
        "transition per-position shape": ((U, torch.zeros(2, 3, 4, 4), M), {}, "transition"),
        "transition dtype": ((U, W.double(), M), {}, "transition"),
        "transition -inf": ((U, W.index_put((torch.tensor(0), torch.tensor(1)), torch.tensor(-math.inf)), M),
                            {}, "transition"),
        "mask shape": ((U, W, M[:, :2]), {}, "mask"),
        "mask dtype": ((U, W, M.to(torch.uint8)), {}, "mask"),
        "mask not left-aligned": ((U, W, torch.tensor([[True, False, True], [True, True, False]])), {}, "left-aligned"),
        "mask empty row": ((U, W, torch.tensor([[True, True, True], [False, False, False]])), {}, "mask"),
        "allowed shape": ((U, W, M), {"allowed": torch.ones(3, 3, dtype=torch.bool)}, "allowed"),
        "allowed dtype": ((U, W, M), {"allowed": torch.ones(4, 4)}, "allowed"),
        "allowed_start shape": ((U, W, M), {"allowed_start": torch.ones(3, dtype=torch.bool)}, "allowed_start"),
        "y out of range": ((U, W, M), {"y": torch.tensor([[0, 1, 4], [0, 0, 0]])}, "y"),
        "y negative": ((U, W, M), {"y": torch.tensor([[0, -1, 3], [0, 0, 0]])}, "y"),
        "y float labels": ((U, W, M), {"y": y.float()}, "y"),
        "y shape": ((U, W, M), {"y": y[:, :2]}, "y"),
        "relaxed y sum": ((U, W, M), {"y": torch.full((2, 3, 4), 0.3)}, "simplex"),
        "relaxed y negative": ((U, W, M), {"y": torch.tensor([1.5, -0.5, 0, 0]).expand(2, 3, 4)}, "simplex"),
        "relaxed y dtype": ((U, W, M), {"y": torch.full((2, 3, 4), 0.25, dtype=torch.float64)}, "y"),
        "relaxed y NaN": ((U, W, M), {"y": torch.full((2, 3, 4), math.nan)}, "y"),
    }


BAD = _bad_inputs()
ENTRY_POINTS = {
    "log_partition": lambda a, kw: lc.log_partition(*a),
    "marginals": lambda a, kw: lc.marginals(*a),
    "viterbi": lambda a, kw: lc.viterbi(*a),
    "sample": lambda a, kw: lc.sample(*a),
    "score": lambda a, kw: lc.score(*a, torch.zeros(a[0].shape[:2], dtype=torch.long)
                                    if isinstance(a[0], torch.Tensor) and a[0].dim() == 3 else None),
    "brute force": lambda a, kw: en.log_partition(*a),
}


@pytest.mark.parametrize("name", [k for k, (_, kw, _) in BAD.items() if not kw])
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_bad_potentials_raise_value_error_naming_the_tensor(name, entry):
    args, _, word = BAD[name]
    with pytest.raises(ValueError, match=word):
        ENTRY_POINTS[entry](args, {})


@pytest.mark.parametrize("name", [k for k, (_, kw, _) in BAD.items() if "y" in kw])
def test_bad_y_raises_value_error(name):
    args, kw, word = BAD[name]
    with pytest.raises(ValueError, match=word):
        lc.score(*args, kw["y"])


@pytest.mark.parametrize("name", [k for k, (_, kw, _) in BAD.items() if kw and "y" not in kw])
def test_bad_constraints_raise_value_error(name):
    args, kw, word = BAD[name]
    with pytest.raises(ValueError, match=word):
        lc.viterbi(*args, **kw)


def test_masked_positions_are_ignored():
    c = _good()
    U, W, M = c.args
    U2 = torch.where(M[..., None], U, 1e6)          # huge but finite padding
    W2 = torch.randn(2, 2, 4, 4)
    W2[1, 1] = 1e6                                  # per-position transition past row 1's end
    W1 = W.expand(2, 2, 4, 4).clone()
    W1[1, 1] = 1e6
    torch.testing.assert_close(lc.log_partition(U2, W, M), lc.log_partition(U, W, M))
    torch.testing.assert_close(lc.log_partition(U, W1, M), lc.log_partition(U, W.expand(2, 2, 4, 4), M))
    assert torch.equal(lc.viterbi(U2, W, M)[0], lc.viterbi(U, W, M)[0])
    torch.testing.assert_close(lc.marginals(U2, W, M), lc.marginals(U, W, M))


def test_mask_none_means_full_length():
    c = make_case(2, 3, 4, [3, 3], True, torch.float64, 2, 1.0)
    torch.testing.assert_close(lc.log_partition(c.unary, c.transition, None), lc.log_partition(*c.args))


# ---------------------------------------------------------------------------------------------
# GPU (skipped without CUDA)
# ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_brute_force_on_cuda(per_position, dtype, scale):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    for seed in range(5):
        cpu = make_case(4, 5, 3, [5, 1, 3, 4], per_position, dtype, seed, scale)
        case = cpu.to("cuda")
        t = tol(dtype) if scale == 1.0 else dict(rtol=2e-6, atol=1e-2)
        want_z = en.log_partition(*cpu.args64)
        torch.testing.assert_close(lc.log_partition(*case.args).double().cpu(), want_z, **t)
        mt = tol(dtype) if scale == 1.0 else dict(rtol=0, atol=2e-3)
        torch.testing.assert_close(lc.marginals(*case.args).double().cpu(), en.marginals(*cpu.args64), **mt)
        labels, best = lc.viterbi(*case.args)
        assert labels.is_cuda
        torch.testing.assert_close(best.double().cpu(), en.argmax(*cpu.args64)[1], **t)
        allowed = torch.rand(3, 3, generator=torch.Generator().manual_seed(seed)) < 0.7
        allowed.fill_diagonal_(True)
        lab_c, best_c = lc.viterbi(*case.args, allowed=allowed.cuda())
        torch.testing.assert_close(best_c.double().cpu(), en.argmax(*cpu.args64, allowed=allowed)[1], **t)
        y = lc.sample(*case.args, n_samples=4, generator=torch.Generator("cuda").manual_seed(seed))
        assert y.is_cuda and y.shape == (4, 4, 5)
