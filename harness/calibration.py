"""Calibration of a method's confidences against its scores: ECE, Brier, AUROC, diagram.

A method's per-problem confidence is a float it computed (a vote share, a mean of elicited confidences), so
two confidences that are equal in exact arithmetic can differ in their last bit by summation order (the mean
of 0.1, 0.2, 0.3 in that order is 0.20000000000000004, in reverse 0.19999999999999998). AUROC's ties and the
ECE bins are therefore decided on the confidences rounded to ``TIE_DECIMALS`` (12) decimal places: far below
any confidence a model states or a method derives, far above float noise (~1e-16).

Which edge of a bin is inside it is ``convention`` (as AUQ's T-ECE, auq/metrics.py): ``left_closed`` [lo, hi),
the last bin closed at 1 (default), or ``right_closed`` (lo, hi], the first closed at 0 (Guo et al. 2017).
Stated confidences sit on a 0.05 grid, so the choice regroups half of them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

TIE_DECIMALS = 12  # confidences equal to 12 decimals are equal (ties in AUROC, the same ECE bin)


CONVENTIONS = ("left_closed", "right_closed")


def _in_bin(c: float, b: int, bins: int, convention: str) -> bool:
    lo, hi = b / bins, (b + 1) / bins
    if convention == "right_closed":
        return lo < c <= hi or (b == 0 and c == 0.0)
    return lo <= c < hi or (b == bins - 1 and c == 1.0)


def calibration_metrics(confidences: list[float], correct: list[float], bins: int = 10,
                        convention: str = "left_closed") -> dict[str, Any]:
    """Equal-width-bin ECE (edges by ``convention``), Brier score and AUROC (ties count half, decided to
    ``TIE_DECIMALS``); ``correct`` in {0, 1}."""
    if convention not in CONVENTIONS:
        raise ValueError(f"calibration bin convention {convention!r}: one of {CONVENTIONS}")
    n = len(confidences)
    if n == 0:
        return {}
    brier = sum((c - y) ** 2 for c, y in zip(confidences, correct)) / n
    keys = [round(float(c), TIE_DECIMALS) for c in confidences]   # what ties and bins are decided on
    table = []
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [i for i, c in enumerate(keys) if _in_bin(c, b, bins, convention)]
        if not members:
            continue
        conf = sum(confidences[i] for i in members) / len(members)
        acc = sum(correct[i] for i in members) / len(members)
        ece += len(members) / n * abs(conf - acc)
        table.append({"lo": lo, "hi": hi, "n": len(members), "confidence": conf, "accuracy": acc})
    pos = [c for c, y in zip(keys, correct) if y >= 0.5]
    neg = [c for c, y in zip(keys, correct) if y < 0.5]
    auroc = None
    if pos and neg:
        wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
        auroc = wins / (len(pos) * len(neg))
    return {"n": n, "ece": ece, "brier": brier, "auroc": auroc, "bins": table, "bin_convention": convention}


def reliability_diagram(metrics: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    bins = metrics.get("bins", [])
    ax.bar([b["lo"] for b in bins], [b["accuracy"] for b in bins], width=[b["hi"] - b["lo"] for b in bins],
           align="edge", edgecolor="black", alpha=0.7, label="accuracy per bin")
    for b in bins:
        ax.text(b["lo"] + (b["hi"] - b["lo"]) / 2, 0.02, str(b["n"]), ha="center", fontsize=7)
    auroc = metrics.get("auroc")
    ax.set_title(f"{title}\nECE={metrics['ece']:.3f}  Brier={metrics['brier']:.3f}  "
                 f"AUROC={'n/a' if auroc is None else f'{auroc:.3f}'}", fontsize=9)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.11, top=0.87)  # fixed margins: tight_layout cost 0.08 s a run
    fig.savefig(path, dpi=120)
    plt.close(fig)
