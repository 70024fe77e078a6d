"""The shared learning-curve figures and figure helpers of components.reports.curves."""
import matplotlib.pyplot as plt
import pytest

from components.reports.curves import MAX_SERIES, annotate_apart, close, learning_curve, legend_below, sweep_curves
from tests.reports.figure_checks import assert_paper_ready, legend_labels, overlapping_texts, series_count


def _history(n=5, base=50.0):
    return [{"epoch": i + 1, "train_loss": 2.0 / (i + 1), "dev_score": base + (i if i < 3 else 3 - i)} for i in range(n)]


def test_learning_curve_puts_loss_and_score_in_two_panels():
    fig = learning_curve(_history(), score_name="dev F1", title="ner: lr=0.01")
    try:
        loss, dev = fig.axes
        assert_paper_ready(fig)
        assert loss.get_ylabel() == "train loss" and dev.get_ylabel() == "dev F1"
        assert list(dev.lines[0].get_ydata()) == [50.0, 51.0, 52.0, 50.0, 49.0]
        assert legend_labels(dev) == ["dev F1", "best 52.00 (epoch 3)"]
        assert fig.texts[0].get_text() == "ner: lr=0.01"
    finally:
        close(fig)
    with pytest.raises(ValueError, match="empty"):
        learning_curve([])


def test_sweep_curves_split_many_trials_into_panels_of_at_most_max_series():
    histories = {f"trial {i}: lr={0.1 / (i + 1):.3g}, hidden={32 * (i + 1)}": _history(base=40.0 + i) for i in range(19)}
    histories["trial 19: no epochs"] = []
    fig = sweep_curves(histories, title="pos: dev score per trial")
    try:
        visible = [ax for ax in fig.axes if ax.axison]
        assert [series_count(ax) for ax in visible] == [MAX_SERIES, MAX_SERIES, 3]
        assert [len(legend_labels(ax)) for ax in visible] == [MAX_SERIES, MAX_SERIES, 3]
        assert visible[0].get_title() == "trials 1-8 of 19" and visible[2].get_title() == "trials 17-19 of 19"
        assert len({ax.get_ylim() for ax in visible}) == 1                 # one y scale across the panels
        assert_paper_ready(fig)
    finally:
        close(fig)
    fig = sweep_curves({"trial 0": _history()})
    try:
        assert len(fig.axes) == 1 and fig.axes[0].get_title() == "" and series_count(fig.axes[0]) == 1
        assert_paper_ready(fig)
    finally:
        close(fig)
    fig = sweep_curves({})
    try:
        assert "no trial" in fig.axes[0].texts[0].get_text()
    finally:
        close(fig)


def test_annotate_apart_leaves_out_labels_that_would_overlap():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    try:
        xs = [1.0, 1.01, 1.02, 1.03, 2.0, 3.0]
        ax.plot(xs, [1.0] * len(xs), "o-")
        fig.tight_layout()
        drawn = annotate_apart(ax, [(x, 1.0, f"N={k}") for k, x in enumerate(xs)])
        texts = [a.get_text() for a in drawn]
        assert texts[0] == "N=0" and "N=4" in texts and "N=5" in texts and len(texts) < len(xs)
        assert not overlapping_texts(fig)
        box = ax.get_window_extent()
        for a in drawn:                                                    # every label inside the axes
            b = a.get_window_extent()
            assert box.x0 <= b.x0 and b.x1 <= box.x1 and box.y0 <= b.y0 and b.y1 <= box.y1
    finally:
        close(fig)


def test_legend_below_lists_error_bars_first_and_stays_clear_of_the_axes():
    fig, axes = plt.subplots(2, 1, figsize=(5, 6), dpi=100)
    try:
        for ax in axes:
            ax.axhline(1.0, ls="--", label="reference")
            ax.errorbar([1, 2], [1.0, 1.5], yerr=[0.1, 0.2], fmt="o-", label="ours")
            ax.set_xlabel("x")
            legend_below(ax)
        fig.tight_layout()
        assert legend_labels(axes[0]) == ["ours", "reference"]
        assert_paper_ready(fig)
    finally:
        close(fig)
