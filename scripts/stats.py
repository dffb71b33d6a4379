"""95% intervals for a table cell's mean score, in percent.

A cell's number is a mean over problems (and over seeds when several: each problem's score is first
averaged over the seeds, so the interval reflects the problems, the dominant source of uncertainty):

- **Wilson score interval** when every per-problem value is 0 or 100 (accuracy, pass@1 with one seed or
  seeds that agree): exact-enough at small n and never outside [0, 100], unlike the normal approximation;
- **Student t interval** otherwise (F1, or accuracy averaged over disagreeing seeds): mean ± t(n−1)·s/√n,
  clipped to [0, 100]. With n < 2 there is no interval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str          # "wilson" | "t"
    n: int

    def text(self, digits: int = 1) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def wilson(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval for ``successes`` of ``n``, in percent."""
    if n <= 0:
        raise ValueError("wilson interval needs n >= 1")
    z = _z(level)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)       # exact ends (no rounding residue at 0 and n)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(100 * low, 100 * high, "wilson", n)


def t_interval(values_pct: list[float], level: float = 0.95) -> Interval | None:
    """Student t interval of the mean of ``values_pct`` (percent), clipped to [0, 100]; None when n < 2."""
    n = len(values_pct)
    if n < 2:
        return None
    from scipy.stats import t

    mean = sum(values_pct) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values_pct) / (n - 1))
    half = float(t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(max(0.0, mean - half), min(100.0, mean + half), "t", n)


def interval(values_pct: list[float], level: float = 0.95) -> Interval | None:
    """The cell interval: Wilson for all-binary per-problem values, else t (see the module docstring)."""
    if not values_pct:
        return None
    if all(v in (0.0, 100.0) for v in values_pct):
        return wilson(sum(1 for v in values_pct if v == 100.0), len(values_pct), level)
    return t_interval(values_pct, level)


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


# ---- paired tests: is one cell's mean really above another's? ----------------------------------------------

@dataclass(frozen=True)
class Paired:
    """A two-sided paired test of two cells over the problems both answered."""

    p: float             # two-sided p-value (1.0 when nothing differs or nothing is shared)
    method: str          # "mcnemar" (exact, 0/100 scores) | "wilcoxon" (signed-rank, any other score)
    n_shared: int        # problems both cells answered
    n_differ: int        # of those, problems whose scores differ (McNemar's discordant pairs)


def paired_test(a: dict[str, float], b: dict[str, float]) -> Paired:
    """Two cells' per-problem scores (problem id -> %, averaged over seeds), compared on their shared problems.

    Exact McNemar (the two-sided binomial test of the discordant pairs at 1/2) when every score is 0 or 100,
    since accuracy and pass@1 are 0/1 per problem and a normal approximation is wrong at small n; the Wilcoxon
    signed-rank test otherwise (F1, or accuracy averaged over disagreeing seeds), which needs no normality."""
    shared = sorted(set(a) & set(b))
    xs, ys = [a[k] for k in shared], [b[k] for k in shared]
    diffs = [x - y for x, y in zip(xs, ys) if x != y]
    binary = all(v in (0.0, 100.0) for v in (*xs, *ys))
    method = "mcnemar" if binary else "wilcoxon"
    if not diffs:
        return Paired(1.0, method, len(shared), 0)
    if binary:
        from scipy.stats import binomtest

        wins = sum(1 for d in diffs if d > 0)
        p = float(binomtest(wins, len(diffs), 0.5).pvalue)
    else:
        from scipy.stats import wilcoxon

        p = float(wilcoxon(diffs).pvalue)
    return Paired(min(1.0, p), method, len(shared), len(diffs))
