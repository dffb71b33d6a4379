"""Stage 2, Regulating: confidence, thresholds, routing, branch width and consensus scoring."""
from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from agentic_repro.denoiseflow.config import Options


def confidence(r: float, complexity: float, opts: Options) -> float:
    if opts.confidence_form == "sigmoid":
        c = 1.0 / (1.0 + math.exp(-((1.0 - r - opts.sigmoid_bias) / opts.sigmoid_scale)))
    else:
        c = 1.0 - r
    c *= 1.0 - opts.complexity_weight * complexity
    return float(min(1.0, max(0.0, c)))


def quantile(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def thresholds(history: Sequence[float], opts: Options) -> tuple[float, float, str]:
    """(tau_low, tau_high, source): running quantiles of past confidences, or the fixed values."""
    if opts.thresholds == "quantile" and len(history) >= opts.quantile_min_history:
        lo, hi = quantile(history, opts.q_low), quantile(history, opts.q_high)
        if hi - lo >= opts.quantile_min_gap:
            return lo, hi, f"quantile(n={len(history)})"
        return opts.tau_low, opts.tau_high, "fixed(degenerate-quantiles)"
    return opts.tau_low, opts.tau_high, "fixed" if opts.thresholds == "fixed" else "fixed(cold-start)"


def route(c: float, tau_low: float, tau_high: float) -> str:
    """Eq. 9 (candidate): Direct if c >= tau_high; Branch if tau_low <= c < tau_high; Refine below."""
    if c >= tau_high:
        return "direct"
    if c >= tau_low:
        return "branch"
    return "refine"


def branch_width(c: float, tau_low: float, tau_high: float, n_clusters: int, opts: Options) -> int:
    """K_t, growing with risk, in [k_min, K_max]."""
    lo_k = min(opts.k_min, opts.k_max)
    if opts.k_rule == "linear":
        k = math.ceil(opts.k_max * (1.0 - c))
    elif opts.k_rule == "clusters":
        k = n_clusters
    else:
        span = max(tau_high - tau_low, 1e-9)
        frac = min(1.0, max(0.0, (tau_high - c) / span))
        k = lo_k + math.ceil((opts.k_max - lo_k) * frac)
    return int(min(opts.k_max, max(lo_k, k)))


@dataclass
class ClusterScore:
    members: list[int]
    representative: int
    key: str | None
    validity: float
    cohesion: float
    size_share: float
    score: float
    verdict: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"members": self.members, "rep": self.representative, "key": self.key,
                "validity": round(self.validity, 4), "cohesion": round(self.cohesion, 4),
                "size": round(self.size_share, 4), "score": round(self.score, 4), "verdict": self.verdict}


def cluster_by_key(keys: Sequence[Any]) -> list[list[int]]:
    """Equal non-None keys form one cluster; each None is its own cluster. Sorted by size, then first index."""
    groups: dict[Any, list[int]] = {}
    out: list[list[int]] = []
    for i, k in enumerate(keys):
        if k is None:
            out.append([i])
        else:
            groups.setdefault(k, []).append(i)
    out.extend(groups.values())
    return sorted(out, key=lambda g: (-len(g), g[0]))


def score_clusters(clusters: list[list[int]], reps: list[int], keys: Sequence[Any], validity: list[float | None],
                   cohesions: list[float], verdicts: list[str | None], opts: Options) -> list[ClusterScore]:
    """score = alpha*validity + beta*cohesion + gamma*|C|/K (peers.md §1.2 item 7); clusters without an
    extractable answer get validity 0."""
    total = sum(len(c) for c in clusters) or 1
    out = []
    for c, rep, val, coh, ver in zip(clusters, reps, validity, cohesions, verdicts):
        key = keys[c[0]]
        v = 0.0 if key is None else (opts.unverified_validity if val is None else val)
        size = len(c) / total
        s = opts.consensus_alpha * v + opts.consensus_beta * coh + opts.consensus_gamma * size
        out.append(ClusterScore(list(c), rep, None if key is None else str(key)[:120], v, coh, size, s, ver))
    return out


def _rank(s: ClusterScore) -> tuple[float, int, int]:
    return (round(s.score, 9), len(s.members), -s.members[0])


def choose(scores: list[ClusterScore]) -> ClusterScore:
    """Highest score; ties go to the larger cluster, then the earlier one."""
    return max(scores, key=_rank)


async def select_verified(clusters: list[list[int]], reps: list[int], keys: Sequence[Any], cohesions: list[float],
                          verify: Callable[[int], Awaitable[dict[str, Any]]], first_batch: int, opts: Options
                          ) -> tuple[int, list[ClusterScore], dict[int, dict[str, Any]]]:
    """Consensus that only a verified cluster can win.

    The ``first_batch`` largest clusters with an extractable answer are verified first (one concurrent
    batch). Then, while some unverified cluster could still win (its score with validity 1.0 reaches the
    best verified score), those clusters are verified too. The choice is made among verified clusters
    only, so an unverified cluster never beats a verified one, and the winner always has a verdict for
    Stage 3 and for the calibration feedback. Returns (chosen cluster index, scores, verdict per cluster).
    """
    eligible = [i for i, c in enumerate(clusters) if keys[c[0]] is not None]
    verdict_of: dict[int, dict[str, Any]] = {}

    async def run(idx: list[int]) -> None:
        results = await asyncio.gather(*(verify(i) for i in idx))
        verdict_of.update(zip(idx, results))

    def scored(optimistic: bool) -> list[ClusterScore]:
        validity: list[float | None] = []
        for i in range(len(clusters)):
            v = verdict_of.get(i)
            if v is None:
                validity.append(1.0 if optimistic and i in eligible else None)
            elif v.get("passed") is None:
                validity.append(None)  # verified, verdict unreadable: unverified_validity
            else:
                validity.append(float(v.get("validity", 1.0 if v["passed"] else 0.0)))
        verdicts = [verdict_of[i].get("verdict") if i in verdict_of else None for i in range(len(clusters))]
        return score_clusters(clusters, reps, keys, validity, cohesions, verdicts, opts)

    await run(eligible[:max(0, first_batch)])
    while True:
        pending = [i for i in eligible if i not in verdict_of]
        if not pending:
            break
        real = scored(False)
        if verdict_of:
            best = max((real[i] for i in verdict_of), key=_rank)
            opt = scored(True)
            contenders = [i for i in pending if _rank(opt[i]) >= _rank(best)]
        else:
            contenders = pending[:1]
        if not contenders:
            break
        await run(contenders)
    scores = scored(False)
    pool = list(verdict_of) or list(range(len(clusters)))
    best_i = max(pool, key=lambda i: _rank(scores[i]))
    return best_i, scores, verdict_of


def embedding_clusters(vecs: np.ndarray, keys: Sequence[Any], tau: float) -> list[list[int]]:
    from agentic_repro.denoiseflow.sensing import threshold_clusters

    idx = [i for i, k in enumerate(keys) if k is not None]
    groups = [[idx[j] for j in g] for g in threshold_clusters(vecs[idx], tau)] if idx else []
    groups += [[i] for i, k in enumerate(keys) if k is None]
    return sorted(groups, key=lambda g: (-len(g), g[0]))
