import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.metrics.correlation import rankdata, spearman


def test_rankdata_ties():
    assert rankdata(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=3, max_size=12))
def test_spearman_is_pearson_of_ranks(pairs):
    x, y = (np.array(v, dtype=float) for v in zip(*pairs))
    rx, ry = rankdata(x), rankdata(y)
    if rx.std() == 0 or ry.std() == 0:
        assert np.isnan(spearman(x, y))
    else:
        assert spearman(x, y) == pytest.approx(np.corrcoef(rx, ry)[0, 1])


def test_spearman_no_ties_formula_and_errors():
    # 1 - 6 sum d^2 / (n (n^2 - 1)) holds without ties; check over all permutations of 5
    for perm in itertools.permutations(range(5)):
        d = np.arange(5) - np.array(perm)
        assert spearman(np.arange(5), np.array(perm)) == pytest.approx(1 - 6 * (d ** 2).sum() / (5 * 24))
    with pytest.raises(ValueError):
        spearman([1.0], [2.0])
