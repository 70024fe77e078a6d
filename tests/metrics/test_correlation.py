import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.metrics.correlation import rankdata, spearman


def _ranks(x):
    """Brute force: the rank of x[i] is 1 + #{x[j] < x[i]} + (#{x[j] == x[i]} - 1) / 2 (average over ties)."""
    x = np.asarray(x, dtype=float)
    return np.array([1 + (x < v).sum() + ((x == v).sum() - 1) / 2 for v in x])


def test_rankdata_ties():
    assert rankdata(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert rankdata([5, 5, 5]).dtype == np.float64


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=3, max_size=12))
def test_spearman_is_pearson_of_brute_force_ranks(pairs):
    x, y = (np.array(v, dtype=float) for v in zip(*pairs))
    rx, ry = _ranks(x), _ranks(y)
    assert rankdata(x).tolist() == rx.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a constant side: NaN, not scipy's ConstantInputWarning
        rho = spearman(x, y)
    if rx.std() == 0 or ry.std() == 0:
        assert np.isnan(rho)
    else:
        assert rho == pytest.approx(np.corrcoef(rx, ry)[0, 1], abs=1e-12)


def test_spearman_no_ties_formula_and_errors():
    # 1 - 6 sum d^2 / (n (n^2 - 1)) holds without ties; check over all permutations of 5
    for perm in itertools.permutations(range(5)):
        d = np.arange(5) - np.array(perm)
        assert spearman(np.arange(5), np.array(perm)) == pytest.approx(1 - 6 * (d ** 2).sum() / (5 * 24))
    with pytest.raises(ValueError, match="at least two"):
        spearman([1.0], [2.0])
    with pytest.raises(ValueError, match="equal length"):
        spearman([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="1-D"):
        spearman(np.ones((2, 2)), np.ones((2, 2)))
    assert np.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])) and np.isnan(spearman([1.0, 2.0], [4.0, 4.0]))
    assert np.isnan(spearman([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]))        # NaN propagates
    assert isinstance(spearman([1, 2, 3], [3, 1, 2]), float)
