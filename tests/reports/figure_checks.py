"""The rules every report figure keeps, as checks on a drawn ``Figure`` (shared by the report tests):
at most ``MAX_SERIES`` series per axes, bars only from zero, no twin axes, no two texts (tick labels,
annotations, axis labels, titles) or legends overlapping, the paper's numbers as a separately labelled series.

Overlap is judged on window extents after ``fig.canvas.draw()``, as a saved PNG would lay them out."""
from __future__ import annotations

from typing import Any

from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure

from components.reports.curves import MAX_SERIES


def series_count(ax: Any) -> int:
    """Lines (an error-bar series counts once, its cap lines not at all), bar groups and scatters of ``ax``."""
    caps: set[int] = set()
    bare = 0
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            data, caplines, _ = c.lines
            caps.update(id(ln) for ln in caplines)
            bare += data is None
    lines = [ln for ln in ax.lines if id(ln) not in caps]
    bars = sum(isinstance(c, BarContainer) for c in ax.containers)
    scatters = sum(type(c).__name__ == "PathCollection" for c in ax.collections)
    return len(lines) + bare + bars + scatters


def _in_view(ax: Any, label: Any, axis: str) -> bool:
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    v = label.get_position()[0 if axis == "x" else 1]
    return lo - 1e-9 * abs(hi - lo) <= v <= hi + 1e-9 * abs(hi - lo)


def text_boxes(fig: Figure, draw: bool = True) -> list[tuple[str, Any]]:
    """(description, window extent) of every visible, non-empty text the figure draws outside its legends."""
    if draw:
        fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out: list[tuple[str, Any]] = []

    def add(what: str, t: Any) -> None:
        if t.get_visible() and t.get_text().strip():
            out.append((f"{what} {t.get_text()!r}", t.get_window_extent(r)))

    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        if ax.axison:
            for axis, labels in (("x", ax.get_xticklabels(which="both")), ("y", ax.get_yticklabels(which="both"))):
                for t in labels:
                    if _in_view(ax, t, axis):
                        add(f"axes {i} {axis} tick", t)
            add(f"axes {i} x label", ax.xaxis.label)
            add(f"axes {i} y label", ax.yaxis.label)
        for t in ax.texts:
            add(f"axes {i} text", t)
        for t in (ax.title, ax._left_title, ax._right_title):
            add(f"axes {i} title", t)
    for t in fig.texts:                 # the suptitle is one of these
        add("figure text", t)
    return out


def _overlap(a: Any, b: Any, tol: float = 0.5) -> bool:
    return a.x0 < b.x1 - tol and b.x0 < a.x1 - tol and a.y0 < b.y1 - tol and b.y0 < a.y1 - tol


def overlapping_texts(fig: Figure, draw: bool = True) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes overlap (tick labels, annotations, axis labels, titles) and texts or other
    legends a legend's box covers."""
    boxes = text_boxes(fig, draw)
    r = fig.canvas.get_renderer()
    legends = [(f"legend of axes {i}", ax.get_legend().get_window_extent(r)) for i, ax in enumerate(fig.axes)
               if ax.get_legend() is not None]
    if fig.legends:
        legends += [(f"figure legend {k}", lg.get_window_extent(r)) for k, lg in enumerate(fig.legends)]
    items = boxes + legends
    return [(a, b) for i, (a, ba) in enumerate(items) for b, bb in items[i + 1:] if _overlap(ba, bb)]


def legend_over_other_axes(fig: Figure, draw: bool = True) -> list[tuple[str, int]]:
    """(legend, axes index) where a legend's box covers another axes' plotting area."""
    if draw:
        fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        lg = ax.get_legend()
        if lg is None:
            continue
        box = lg.get_window_extent(r)
        out += [(f"legend of axes {i}", j) for j, other in enumerate(fig.axes)
                if j != i and other.get_visible() and other.axison and _overlap(box, other.get_window_extent(r))]
    return out


def twin_axes(fig: Figure, draw: bool = True) -> list[tuple[int, int]]:
    """Pairs of axes drawn over the same area (twinx / twiny)."""
    if draw:
        fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [ax.get_window_extent(r) for ax in fig.axes]
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if fig.axes[i].get_visible() and fig.axes[j].get_visible() and fig.axes[i].axison and fig.axes[j].axison
            and _overlap(boxes[i], boxes[j], tol=5.0)]


def legend_labels(ax: Any) -> list[str]:
    lg = ax.get_legend()
    return [t.get_text() for t in lg.get_texts()] if lg is not None else []


def assert_paper_ready(fig: Figure, *, max_series: int = MAX_SERIES) -> None:
    """Every rule at once: series per axes, bars from zero, no twin axes, no overlapping texts or legends."""
    for i, ax in enumerate(fig.axes):
        n = series_count(ax)
        assert n <= max_series, f"axes {i} ({ax.get_title()!r}): {n} series > {max_series}"
        if any(isinstance(c, BarContainer) for c in ax.containers):
            assert min(ax.get_ylim()) == 0.0, f"axes {i}: bars, but the y axis starts at {min(ax.get_ylim())}"
    clash = overlapping_texts(fig)                  # draws the figure once; the checks below reuse that layout
    assert not clash, f"overlapping texts: {clash[:5]}"
    twins = twin_axes(fig, draw=False)
    assert not twins, f"twin axes: {twins}"
    covered = legend_over_other_axes(fig, draw=False)
    assert not covered, f"legends over other axes: {covered}"


def paper_series(ax: Any, word: str = "paper") -> list[str]:
    """The labels of ``ax``'s legend entries that name the paper (its numbers as their own series)."""
    return [t for t in legend_labels(ax) if word in t.lower()]
