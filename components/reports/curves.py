"""Learning curves: training loss and dev score per epoch, one figure per run or per sweep."""
from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def learning_curve(history: Sequence[dict[str, float]], *, score_name: str = "dev score", title: str = "") -> Figure:
    """history rows need ``epoch``, ``train_loss`` and ``dev_score``; best epoch marked."""
    if not history:
        raise ValueError("learning_curve: empty history")
    ep = [h["epoch"] for h in history]
    fig, ax1 = plt.subplots(figsize=(6, 3.6), dpi=110)
    ax1.plot(ep, [h["train_loss"] for h in history], "o-", color="tab:blue", label="train loss")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("train loss", color="tab:blue")
    ax2 = ax1.twinx()
    dev = [h["dev_score"] for h in history]
    ax2.plot(ep, dev, "s-", color="tab:orange", label=score_name)
    best = max(range(len(dev)), key=dev.__getitem__)
    ax2.plot([ep[best]], [dev[best]], "*", ms=14, color="tab:red", label=f"best {dev[best]:.2f}")
    ax2.set_ylabel(score_name, color="tab:orange")
    ax2.legend(loc="lower right", fontsize=8)
    ax1.set_title(title or "learning curve")
    ax1.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def sweep_curves(histories: dict[str, Sequence[dict[str, float]]], *, score_name: str = "dev score",
                 title: str = "") -> Figure:
    """Dev score per epoch, one line per trial."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110)
    for name, h in histories.items():
        if h:
            ax.plot([r["epoch"] for r in h], [r["dev_score"] for r in h], "o-", ms=3, label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(score_name)
    ax.set_title(title or "sweep: dev score per trial")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def close(fig: Figure) -> None:
    plt.close(fig)
