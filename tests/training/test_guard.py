"""The did-not-learn guard (components.training.guard) on its own."""
import math

import pytest

from components.training.guard import DidNotLearn, check_learned


@pytest.mark.parametrize("initial,best,gain", [(0.0, 0.0, 0.0), (40.0, 40.0, 0.0), (40.0, 39.0, 0.0),
                                               (40.0, 41.0, 2.0), (0.0, math.nan, 0.0), (10.0, -1.0, 0.0)])
def test_a_model_that_did_not_learn_fails(initial, best, gain):
    with pytest.raises(DidNotLearn, match="tagger pos"):
        check_learned(initial, best, what="tagger pos", min_gain=gain)


@pytest.mark.parametrize("initial,best,gain", [(0.0, 0.1, 0.0), (40.0, 41.0, 0.5), (math.nan, 3.0, 0.0)])
def test_a_model_that_learned_passes(initial, best, gain):
    check_learned(initial, best, what="tagger pos", min_gain=gain)
