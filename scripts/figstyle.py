"""One look for every figure: readable labels, PNG and PDF side by side. Matplotlib without a display."""
from __future__ import annotations

from pathlib import Path


def plt():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    pyplot.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9,
                            "xtick.labelsize": 10, "ytick.labelsize": 10, "figure.dpi": 150,
                            "savefig.bbox": "tight", "axes.grid": True, "grid.alpha": 0.3})
    return pyplot


def save(fig, base: Path) -> list[Path]:
    base.parent.mkdir(parents=True, exist_ok=True)
    out = [base.with_suffix(".png"), base.with_suffix(".pdf")]
    for p in out:
        fig.savefig(p)
    from matplotlib import pyplot

    pyplot.close(fig)
    return out


def empty_panel(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
