"""Trajectory-level calibration metrics of AUQ (arXiv 2601.15703, supplement §4-§5).

A trajectory tau has a success label y in {0, 1} (the environment's verdict) and the agent's per-step
verbalised confidences c_1..c_T, some of which may be **missing** (the model gave no parsable
``<confidence>``; recorded as None by the agent loop). Its trajectory confidence is C(tau) = Phi(c_1:T):

- ``last``  (End-State Belief)      C = c_T
- ``avg``   (Overall Quality)       C = mean_t c_t
- ``min``   (Process Reliability)   C = min_t c_t
- ``prod``  (Chain Probability)     C = prod_t c_t

Metrics over N trajectories, each computed for every Phi:

- **T-ECE** = sum_m |B_m|/N * |acc(B_m) - conf(B_m)| with **M = 10 equal-width bins** on [0, 1]. Neither the
  bin count nor which edge a bin includes is in the paper, and the AUQ authors published no code. The edge is
  the ``convention`` option, because verbalised confidences sit on a 0.05 grid, so half of them fall on an
  edge and the choice moves T-ECE by up to 0.10:
  ``left_closed`` (default; the udcs re-implementation of AUQ, the only public code of these metrics): bin m
  holds C in [m/10, (m+1)/10), the last bin closed at 1.0;
  ``right_closed`` (Guo et al. 2017's ECE code): (m/10, (m+1)/10], the first bin closed at 0.
  Empty bins add 0. :func:`calibration_report` computes both, so a table can show the other where they differ.
- **T-BS** = (1/N) sum_i (C_i - y_i)^2.
- **AUROC** of C against success (Mann-Whitney form, ties count 1/2: equal to scikit-learn's ``roc_auc_score``).
  Undefined (None, with the reason recorded) when every trajectory has the same label. C is computed and
  ranked in exact arithmetic (each recorded confidence read as the decimal it prints as, ``fractions``): with
  float sums, equal Φ_avg / Φ_prod values differ in the last bit by summation order and a tie becomes a win
  or a loss (AUROC moved by up to 0.0085 on 140 trajectories, 0.036 on small sets). T-ECE and T-BS are exact
  too (a C on a bin edge, e.g. mean 0.3, is in the bin it equals), rounded to a float once at the end.
- **SR**: the success rate over *all* trajectories, with or without confidences.

Missing confidences are never read as 1.0 or 0.0. Policy (``missing=``):

- ``skip_steps`` (default): Phi runs over the steps that have a confidence; ``last`` is the last step that has
  one. A trajectory with no confidence at all has no C and is excluded from T-ECE/T-BS/AUROC.
- ``drop_trajectory``: a trajectory with any missing confidence is excluded.

Either way the report counts the missing steps and the excluded trajectories, so a row built on few
trajectories says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from collections.abc import Iterable, Sequence

PHIS = ("last", "avg", "min", "prod")
PHI_NAMES = {"last": "End-State (Φ_last)", "avg": "Overall (Φ_avg)", "min": "Process (Φ_min)",
             "prod": "Chain (Φ_prod)"}
MISSING_POLICIES = ("skip_steps", "drop_trajectory")
N_BINS = 10
BIN_CONVENTIONS = ("left_closed", "right_closed")   # module docstring: which edge of a T-ECE bin is inside it
BIN_CONVENTION = "left_closed"
BIN_TEXT = {"left_closed": "left-closed [m/M, (m+1)/M), the last closed at 1",
            "right_closed": "right-closed (m/M, (m+1)/M], the first closed at 0"}


@dataclass(frozen=True)
class Trajectory:
    """One episode as the metrics see it: success and the per-step confidences (None = missing)."""

    success: bool
    confidences: tuple[float | None, ...] = ()
    id: str = ""

    @property
    def n_missing(self) -> int:
        return sum(1 for c in self.confidences if c is None)


def exact(c: float | Fraction) -> Fraction:
    """A confidence as an exact number: a float is read as the shortest decimal that prints as it (``0.85`` →
    17/20, the value the model wrote), so equal aggregates are equal, whatever the order they were summed in."""
    if isinstance(c, Fraction):
        v = c
    elif isinstance(c, int):
        v = Fraction(c)
    else:
        f = float(c)
        if not math.isfinite(f):
            raise ValueError(f"confidence {c!r} is not in [0, 1] (the parser should have recorded it as missing)")
        v = Fraction(repr(f))
    if not 0 <= v <= 1:
        raise ValueError(f"confidence {c!r} is not in [0, 1] (the parser should have recorded it as missing)")
    return v


def aggregate_exact(confidences: Sequence[float | None], phi: str, missing: str = "skip_steps") -> Fraction | None:
    """C(tau) = Phi(c_1:T) in exact arithmetic; None when the trajectory has no usable confidence (module
    docstring). Exact because AUROC ranks these values: two trajectories whose confidences have the same mean
    must tie, and a float mean of (0.1, 0.2, 0.3) is 0.20000000000000004 but of (0.3, 0.2, 0.1) 0.19999999999999998."""
    if phi not in PHIS:
        raise ValueError(f"aggregation {phi!r}: one of {PHIS}")
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing={missing!r}: one of {MISSING_POLICIES}")
    if missing == "drop_trajectory" and any(c is None for c in confidences):
        return None
    cs = [exact(c) for c in confidences if c is not None]
    if not cs:
        return None
    if phi == "last":
        return cs[-1]
    if phi == "avg":
        return sum(cs, Fraction(0)) / len(cs)
    if phi == "min":
        return min(cs)
    out = Fraction(1)
    for c in cs:
        out *= c
    return out


def aggregate(confidences: Sequence[float | None], phi: str, missing: str = "skip_steps") -> float | None:
    """:func:`aggregate_exact` as the nearest float (equal exact values give equal floats)."""
    c = aggregate_exact(confidences, phi, missing)
    return None if c is None else float(c)


def _convention(convention: str) -> str:
    if convention not in BIN_CONVENTIONS:
        raise ValueError(f"T-ECE bin convention {convention!r}: one of {BIN_CONVENTIONS}")
    return convention


def bin_index(c: float | Fraction, n_bins: int = N_BINS, convention: str = BIN_CONVENTION) -> int:
    """Equal-width bin of ``c`` in [0, 1], exactly (0.3 is on an edge): ``left_closed`` [m/M, (m+1)/M), the last
    bin closed at 1.0 (0.3 → bin 3); ``right_closed`` (m/M, (m+1)/M], the first closed at 0 (0.3 → bin 2)."""
    x = exact(c) * n_bins
    if _convention(convention) == "right_closed":
        return max(math.ceil(x) - 1, 0)
    return min(math.floor(x), n_bins - 1)


def t_ece(conf: Sequence[float | Fraction], success: Sequence[bool], n_bins: int = N_BINS,
          convention: str = BIN_CONVENTION) -> float:
    """Expected calibration error over trajectories, equal-width bins (module docstring); exact sums."""
    if len(conf) != len(success) or not conf:
        raise ValueError("t_ece needs equally many (>= 1) confidences and labels")
    bins: dict[int, list[tuple[Fraction, int]]] = {}
    for c, y in zip(conf, success):
        v = exact(c)
        bins.setdefault(bin_index(v, n_bins, convention), []).append((v, int(bool(y))))
    n = len(conf)
    return float(sum((Fraction(len(b), n) * abs(Fraction(sum(y for _, y in b), len(b)) - sum(c for c, _ in b) / len(b))
                      for b in bins.values()), Fraction(0)))


def reliability_bins(conf: Sequence[float | Fraction], success: Sequence[bool],
                     n_bins: int = N_BINS, convention: str = BIN_CONVENTION) -> list[dict[str, Any]]:
    """Per-bin count, mean confidence and accuracy (a reliability diagram's data); empty bins have count 0."""
    out = []
    values = [(exact(c), float(bool(y))) for c, y in zip(conf, success)]
    for m in range(n_bins):
        pts = [(c, y) for c, y in values if bin_index(c, n_bins, convention) == m]
        out.append({"bin": m, "low": m / n_bins, "high": (m + 1) / n_bins, "count": len(pts),
                    "conf": float(sum((c for c, _ in pts), Fraction(0)) / len(pts)) if pts else None,
                    "acc": sum(y for _, y in pts) / len(pts) if pts else None})
    return out


def t_brier(conf: Sequence[float | Fraction], success: Sequence[bool]) -> float:
    if len(conf) != len(success) or not conf:
        raise ValueError("t_brier needs equally many (>= 1) confidences and labels")
    return float(sum(((exact(c) - int(bool(y))) ** 2 for c, y in zip(conf, success)), Fraction(0)) / len(conf))


def auroc(conf: Sequence[float | Fraction], success: Sequence[bool]) -> float | None:
    """AUROC of ``conf`` separating successes from failures; None when only one class is present.

    The Mann-Whitney form: the share of (success, failure) pairs whose success has the higher confidence, ties
    counting 1/2 -- the same number as scikit-learn's ``roc_auc_score`` (not imported: it costs seconds).
    Ranked on exact values (:func:`exact`; pass :func:`aggregate_exact`'s results, not float means), so a tie is
    a tie and the result is exact up to its final rounding to a float."""
    vals = [(exact(c), bool(y)) for c, y in zip(conf, success)]
    n_pos = sum(1 for _, y in vals if y)
    n_neg = len(vals) - n_pos
    if not n_pos or not n_neg:
        return None
    # rank sum of the successes with average ranks for ties, doubled to stay in integers: O(n log n)
    order = sorted(vals, key=lambda v: v[0])
    r_pos2, i = 0, 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and order[j + 1][0] == order[i][0]:
            j += 1
        r_pos2 += (i + j + 2) * sum(1 for k in range(i, j + 1) if order[k][1])   # 2 x the average rank (i+j)/2+1
        i = j + 1
    return float(Fraction(r_pos2 - n_pos * (n_pos + 1), 2 * n_pos * n_neg))


@dataclass
class PhiReport:
    phi: str
    n: int                       # trajectories with a C(tau)
    t_ece: float | None
    t_bs: float | None
    auroc: float | None
    auroc_reason: str | None = None
    mean_conf: float | None = None
    t_ece_other: float | None = None     # T-ECE under the other bin convention (module docstring)
    bins: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def calibration_report(trajectories: Iterable[Trajectory], *, phis: Sequence[str] = PHIS,
                       missing: str = "skip_steps", n_bins: int = N_BINS,
                       convention: str = BIN_CONVENTION) -> dict[str, Any]:
    """SR, and T-ECE / T-BS / AUROC per aggregation, with the missing-confidence bookkeeping; T-ECE under
    ``convention`` and (``t_ece_other``) under the other one."""
    other = next(c for c in BIN_CONVENTIONS if c != _convention(convention))
    trajs = list(trajectories)
    n = len(trajs)
    out: dict[str, Any] = {
        "n": n, "successes": sum(1 for t in trajs if t.success),
        "success_rate": (sum(1 for t in trajs if t.success) / n) if n else None,
        "steps": sum(len(t.confidences) for t in trajs),
        "missing_steps": sum(t.n_missing for t in trajs),
        "no_confidence": sum(1 for t in trajs if all(c is None for c in t.confidences)),
        "with_missing": sum(1 for t in trajs if t.n_missing),
        "missing_policy": missing, "ece_bins": f"{n_bins} equal-width", "bin_convention": convention,
        "bin_convention_other": other, "phi": {},
    }
    for phi in phis:
        pairs = [(aggregate_exact(t.confidences, phi, missing), t.success) for t in trajs]
        pairs = [(c, y) for c, y in pairs if c is not None]
        if not pairs:
            out["phi"][phi] = PhiReport(phi, 0, None, None, None, "no trajectory has a confidence").to_dict()
            continue
        cs, ys = [c for c, _ in pairs], [y for _, y in pairs]   # exact C values: AUROC's ties are exact
        a = auroc(cs, ys)
        out["phi"][phi] = PhiReport(
            phi, len(pairs), t_ece(cs, ys, n_bins, convention), t_brier(cs, ys), a,
            None if a is not None else f"one class only ({'all successes' if all(ys) else 'all failures'})",
            float(sum(cs, Fraction(0)) / len(cs)), bins=reliability_bins(cs, ys, n_bins, convention),
            t_ece_other=t_ece(cs, ys, n_bins, other)).to_dict()
    out["excluded"] = {phi: n - out["phi"][phi]["n"] for phi in phis}
    return out


# ---- reading run records ------------------------------------------------------------------------------------

def step_confidences(prediction: dict[str, Any], episode: int = -1) -> list[float | None]:
    """The per-step confidences of one prediction record's episode, in step order.

    Read from the episode trajectory's step rows (``extra.confidence``: what the agent loop passes to
    ``s.step(action, confidence=...)``; a skipped invalid action is a ``note`` row with ``wasted: true``, also a
    step); a step row without the key, or with null, is a missing confidence."""
    eps = prediction.get("episodes") or []
    if not eps:
        return []
    rows = [r for r in (eps[episode].get("trajectory") or [])
            if r.get("event") == "step" or (r.get("event") == "note" and (r.get("extra") or {}).get("wasted"))]
    out: list[float | None] = []
    for r in rows:
        c = (r.get("extra") or {}).get("confidence")
        out.append(None if c is None else float(c))
    return out


def trajectory_of(prediction: dict[str, Any], episode: int = -1) -> Trajectory:
    """A :class:`Trajectory` from a prediction record (success = its score, the environment's verdict)."""
    return Trajectory(success=float(prediction.get("score") or 0.0) >= 1.0,
                      confidences=tuple(step_confidences(prediction, episode)), id=str(prediction.get("id", "")))
