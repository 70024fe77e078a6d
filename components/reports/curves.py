"""Learning curves (training loss and dev score per epoch, one figure per run or per sweep) and the small
figure helpers the paper reports share.

The rules every report figure keeps: one quantity per axes (no twin y axes), at most
:data:`MAX_SERIES` series per panel (more become small multiples), bars only from zero (else dots with
intervals), text labels that do not overlap (:func:`annotate_apart`), a legend per panel that stays
inside its own column (:func:`legend_below`).
"""
from __future__ import annotations

from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.transforms as mtransforms  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

MAX_SERIES = 8          # series per panel; more go to further panels


def learning_curve(history: Sequence[dict[str, float]], *, score_name: str = "dev score", title: str = "") -> Figure:
    """Train loss (left panel) and dev score (right panel) per epoch, the best epoch starred.
    history rows need ``epoch``, ``train_loss`` and ``dev_score``."""
    if not history:
        raise ValueError("learning_curve: empty history")
    ep = [h["epoch"] for h in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=110)
    ax1.plot(ep, [h["train_loss"] for h in history], "o-", color="tab:blue", ms=4, label="train loss")
    ax1.set_ylabel("train loss")
    dev = [h["dev_score"] for h in history]
    ax2.plot(ep, dev, "s-", color="tab:orange", ms=4, label=score_name)
    best = max(range(len(dev)), key=dev.__getitem__)
    ax2.plot([ep[best]], [dev[best]], "*", ms=14, color="tab:red", label=f"best {dev[best]:.2f} (epoch {ep[best]:g})")
    ax2.set_ylabel(score_name)
    ax2.legend(loc="best", fontsize=8)
    for ax in (ax1, ax2):
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.suptitle(title or "learning curve", fontsize=10)
    fig.tight_layout()
    return fig


def sweep_curves(histories: dict[str, Sequence[dict[str, float]]], *, score_name: str = "dev score",
                 title: str = "") -> Figure:
    """Dev score per epoch, one line per trial; at most :data:`MAX_SERIES` trials per panel (small
    multiples on one y scale beyond that), each panel with its legend below it."""
    items = [(name, h) for name, h in histories.items() if h]
    chunks = [items[i:i + MAX_SERIES] for i in range(0, len(items), MAX_SERIES)] or [[]]
    ncols = min(len(chunks), 3)
    nrows = -(-len(chunks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 4.6 * nrows), dpi=110, squeeze=False, sharey=True)
    for k, ax in enumerate(axes.flat):
        if k >= len(chunks):
            ax.set_axis_off()
            continue
        for j, (name, h) in enumerate(chunks[k]):
            ax.plot([r["epoch"] for r in h], [r["dev_score"] for r in h], "o-", ms=3, color=f"C{j}", label=name)
        ax.set_xlabel("epoch")
        ax.set_ylabel(score_name)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if chunks[k]:
            first = k * MAX_SERIES
            if len(chunks) > 1:
                ax.set_title(f"trials {first + 1}-{first + len(chunks[k])} of {len(items)}", fontsize=9)
            legend_below(ax, ncol=1)
        else:
            ax.text(0.5, 0.5, "no trial recorded a curve", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title or "sweep: dev score per trial", fontsize=10)
    fig.tight_layout()
    return fig


def legend_below(ax: Any, ncol: int = 2, fontsize: float = 7, handles: Sequence[Any] | None = None,
                 labels: Sequence[str] | None = None, gap: float = 40.0) -> Any:
    """A legend under ``ax`` (outside the data, inside the axes' own column), without a frame, its top ``gap``
    points below the axes (room for one row of tick labels and the x label, whatever the axes' height; the
    figure's ``tight_layout`` then makes room for the legend). Without ``handles``: the axes' labelled artists,
    error-bar series first (matplotlib lists them after the lines, so the data would follow its reference
    lines)."""
    anchor = ax.transAxes + mtransforms.ScaledTranslation(0, -gap / 72, ax.figure.dpi_scale_trans)
    kw: dict[str, Any] = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "bbox_transform": anchor, "ncol": ncol,
                          "fontsize": fontsize, "frameon": False}
    if handles is None:
        found, names = ax.get_legend_handles_labels()
        order = sorted(range(len(found)), key=lambda i: not isinstance(found[i], ErrorbarContainer))
        handles, labels = [found[i] for i in order], [names[i] for i in order]
    return ax.legend(handles, labels if labels is not None else [h.get_label() for h in handles], **kw)


def _overlaps(a: Any, b: Any, gap: float = 2.0) -> bool:
    """Whether window boxes ``a`` and ``b`` come closer than ``gap`` pixels."""
    return a.x0 < b.x1 + gap and b.x0 < a.x1 + gap and a.y0 < b.y1 + gap and b.y0 < a.y1 + gap


def _inside(a: Any, box: Any) -> bool:
    return a.x0 >= box.x0 and a.x1 <= box.x1 and a.y0 >= box.y0 and a.y1 <= box.y1


def annotate_apart(ax: Any, points: Sequence[tuple[float, float, str]], *, fontsize: float = 7,
                   offsets: Sequence[tuple[float, float, str]] = ((3, -10, "left"), (3, 4, "left"),
                                                                  (-3, -10, "right"), (-3, 4, "right")),
                   avoid: Sequence[Any] = ()) -> list[Any]:
    """Label each ``(x, y, text)`` point of ``ax`` at the first of ``offsets`` (points, and the text's
    horizontal alignment) where its text stays
    inside the axes and clear of the labels placed before it, of the texts of ``avoid`` and of the tick labels
    of ``ax``; a label that fits nowhere is left out. Call it after the figure's layout is final (``tight_layout`` moves the axes, so it
    would move the points under the labels). Returns the annotations drawn."""
    fig = ax.figure
    fig.canvas.draw()                   # tick labels get their text and place at draw time
    renderer = fig.canvas.get_renderer()
    taken = [t.get_window_extent(renderer) for t in avoid if t.get_visible() and t.get_text()]
    xlim, ylim = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    for t in ax.get_xticklabels() + ax.get_yticklabels():
        x, y = t.get_position()
        inside = xlim[0] <= x <= xlim[1] if t in ax.get_xticklabels() else ylim[0] <= y <= ylim[1]
        if t.get_visible() and t.get_text() and inside:
            taken.append(t.get_window_extent(renderer))
    drawn = []
    for x, y, text in points:
        for dx, dy, ha in offsets:
            a = ax.annotate(text, (x, y), fontsize=fontsize, textcoords="offset points", xytext=(dx, dy), ha=ha)
            box = a.get_window_extent(renderer)
            if _inside(box, ax.get_window_extent(renderer)) and not any(_overlaps(box, b) for b in taken):
                taken.append(box)
                drawn.append(a)
                break
            a.remove()
    return drawn


def close(fig: Figure) -> None:
    plt.close(fig)
