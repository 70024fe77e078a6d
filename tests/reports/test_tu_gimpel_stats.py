"""The approx stage's inputs to the Tu & Gimpel intervals: a GD selection's per-sentence statistics
score as the selection does, and the speed repeats are interleaved and paired by round."""
import numpy as np
import pytest
import torch

from components.inference.oracle import corpus_score
from components.inference.study import selection_stats, speed_repeats
from components.metrics.tagging import stats_columns, stats_score


@pytest.mark.parametrize("metric", ["accuracy", "span_f1"])
def test_selection_stats_score_as_the_selection(metric):
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(1, 6, (30,), generator=g)
    pred = torch.minimum(torch.randint(0, 6, (30,), generator=g), gold) if metric == "span_f1" else gold
    correct = torch.minimum(torch.randint(0, 6, (30,), generator=g), torch.minimum(pred, gold))
    counts = torch.stack([correct, pred, gold], 1)
    st = selection_stats(counts, metric)
    assert st.shape == (30, len(stats_columns(metric)))
    assert stats_score(metric)(st.sum(0)) == pytest.approx(float(corpus_score(counts)))
    with pytest.raises(ValueError, match="shape"):
        selection_stats(counts[:, :2], metric)


class _Clock:
    """A method that records the order it is called in (one call per batch)."""
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __call__(self, energy, batch):
        self.log.append(self.name)


class _DS:
    def __len__(self):
        return 20

    def collate(self, idx):
        class B:
            def to(self, device):
                return self
        return B()


def test_speed_repeats_interleave_methods_and_rotate_their_order():
    log = []
    methods = {k: _Clock(k, log) for k in ("a", "b", "c")}
    energy = torch.nn.Linear(1, 1)
    out = speed_repeats(energy, methods, _DS(), 10, 3)
    assert set(out) == {"a", "b", "c"} and all(len(v) == 3 and min(v) > 0 for v in out.values())
    timed = log[3:]                                   # after one warm-up call each; 2 batches per timing
    rounds = [timed[i:i + 6:2] for i in range(0, 18, 6)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    with pytest.raises(ValueError):
        speed_repeats(energy, methods, _DS(), 10, 0)
    assert np.isfinite(out["a"]).all()
