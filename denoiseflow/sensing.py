"""Stage 1, Sensing: semantic entropy, slot uncertainty, complexity, dependency graph, risk.

Pure functions of embeddings and numbers (no backbone), so each is unit-testable with fixed
vectors. Forms the paper does not fix are selected by :class:`agentic_repro.denoiseflow.config.Options`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

import numpy as np

from agentic_repro.denoiseflow.config import Options


# ---- clustering and entropy (E.1, Eq. 3) -----------------------------------------------------
def threshold_clusters(vecs: np.ndarray, tau: float) -> list[list[int]]:
    """Connected components of the graph with an edge where cosine >= tau.

    Clusters are sorted by size (desc), then by their smallest member, so the order is deterministic.
    """
    n = len(vecs)
    if n == 0:
        return []
    sim = np.clip(vecs @ vecs.T, -1.0, 1.0)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if sim[i, j] >= tau - 1e-9:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def normalized_entropy(sizes: Sequence[int], norm: str = "log_n") -> float:
    """H(p)/log N (``log_n``) or H(p)/log K (``log_k``, K = number of clusters); 0 for one cluster."""
    n = sum(sizes)
    k = len([s for s in sizes if s > 0])
    if n <= 1 or k <= 1:
        return 0.0
    h = -sum((s / n) * math.log(s / n) for s in sizes if s > 0)
    denom = math.log(n) if norm == "log_n" else math.log(k)
    return float(min(1.0, max(0.0, h / denom))) if denom > 0 else 0.0


def medoid(vecs: np.ndarray, members: Sequence[int]) -> int:
    """The member with the highest total cosine to the other members (ties: the first)."""
    if len(members) == 1:
        return members[0]
    sub = vecs[list(members)]
    score = (sub @ sub.T).sum(axis=1)
    return members[int(np.argmax(score))]


def cohesion(vecs: np.ndarray, members: Sequence[int], singleton: float) -> float:
    if len(members) < 2:
        return singleton
    sub = vecs[list(members)]
    sim = sub @ sub.T
    m = len(members)
    return float((sim.sum() - np.trace(sim)) / (m * (m - 1)))


# ---- slots (E.1, E.3) ------------------------------------------------------------------------
def slot_value(understanding: dict[str, Any] | None, slot: str) -> str:
    """A slot's value as text; missing and null values read 'null' (so absence is a cluster too)."""
    if not understanding:
        return "null"
    if slot in understanding:
        v = understanding[slot]
    elif isinstance(understanding.get("outputs"), dict) and slot in understanding["outputs"]:
        v = understanding["outputs"][slot]
    else:
        return "null"
    if v is None or v == "" or v == []:
        return "null"
    if isinstance(v, list):
        return "; ".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    return str(v)


def slot_aggregate(u_slots: dict[str, float], opts: Options) -> float:
    """f_slot of Eq. 8. Default ``max_noisy_or``: max(max_s u_s, 1 - prod_s(1 - beta*u_s)) so that one
    critical slot (the max) and several mild ones (the noisy-or) both raise the risk."""
    vals = list(u_slots.values())
    if not vals:
        return 0.0
    noisy = 1.0 - float(np.prod([1.0 - opts.slot_mild_weight * v for v in vals]))
    if opts.slot_agg == "max":
        return max(vals)
    if opts.slot_agg == "noisy_or":
        return noisy
    if opts.slot_agg == "mean":
        return float(np.mean(vals))
    return max(max(vals), noisy)


# ---- complexity features (E.2) ---------------------------------------------------------------
_MATH_WORDS = ("equation", "solve", "prove", "calculate", "compute", "sum", "product", "percent", "ratio",
               "integer", "fraction", "probability", "average", "total", "remainder", "function", "derivative")
_STEP_WORDS = ("first", "then", "next", "after", "finally", "afterwards", "before", "second", "third",
               "subsequently", "remaining", "left")
_CONSTRAINT_WORDS = ("at least", "at most", "no more than", "no less than", "exactly", "only", "must",
                     "cannot", "not exceed", "minimum", "maximum", "between", "each", "every")
_HOP_WORDS = ("both", "which", "who", "compared", "older", "younger", "same", "larger", "first", "before",
              "after", "also", "where", "whose", "than")


def _presence(text: str, words: Sequence[str], saturate: int = 3) -> float:
    t = text.lower()
    hits = sum(1 for w in words if re.search(rf"\b{re.escape(w)}\b", t))
    return min(1.0, hits / saturate)


def complexity_features(text: str, domain: str) -> dict[str, float]:
    words = text.split()
    numbers = re.findall(r"\d+(?:\.\d+)?", text)
    return {
        "length": min(1.0, len(words) / 200.0),
        "math": _presence(text, _MATH_WORDS),
        "multi_step": _presence(text, _STEP_WORDS),
        "constraint": _presence(text, _CONSTRAINT_WORDS),
        "numeric": min(1.0, len(numbers) / 8.0),
        "multi_hop": _presence(text, _HOP_WORDS) if domain == "qa" else 0.0,
    }


def complexity_score(features: dict[str, float], weights: dict[str, float], domain: str) -> float:
    keys = [k for k in features if weights.get(k, 0) > 0 and (k != "multi_hop" or domain == "qa")]
    total = sum(weights[k] for k in keys)
    return float(sum(weights[k] * features[k] for k in keys) / total) if total else 0.0


# ---- dependency graph and propagation (peers.md §1.2 items 2-3) ------------------------------
@dataclass
class DepGraph:
    steps: list[str]
    u: list[float]                                  # local step uncertainty
    w: dict[tuple[int, int], float] = field(default_factory=dict)   # (j, t) coupling, j < t
    p_struct: dict[tuple[int, int], float] = field(default_factory=dict)
    u_prop: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s[:200] for s in self.steps], "u": [round(x, 4) for x in self.u],
                "u_prop": [round(x, 4) for x in self.u_prop],
                "edges": [[j, t, round(v, 4)] for (j, t), v in sorted(self.w.items()) if v > 0]}


def plan_steps(understanding: dict[str, Any] | None, domain: str) -> list[str]:
    if not understanding:
        return []
    raw = understanding.get("required_hops") if domain == "qa" else understanding.get("plan")
    if raw is None and domain == "qa":
        raw = understanding.get("plan")
    steps: list[str] = []
    if isinstance(raw, list):
        for s in raw:
            if isinstance(s, dict):
                s = s.get("info") or s.get("step") or json.dumps(s, ensure_ascii=False)
            s = str(s).strip()
            if s:
                steps.append(s)
    elif isinstance(raw, str) and raw.strip():
        steps = [x.strip() for x in re.split(r"\n|(?<=\.)\s+(?=\S)", raw) if x.strip()]
    return steps[:12]


def structural_prior(steps: list[str], opts: Options) -> dict[tuple[int, int], float]:
    out: dict[tuple[int, int], float] = {}
    for t in range(len(steps)):
        text = steps[t].lower()
        for j in range(t):
            if t == j + 1:
                p = opts.struct_adjacent
            elif re.search(rf"\b(step|hop)\s*{j + 1}\b", text):
                p = opts.struct_reference
            else:
                p = opts.struct_skip
            out[(j, t)] = p
    return out


def step_uncertainty(primary_vecs: np.ndarray, other_plans: list[np.ndarray], opts: Options) -> list[float]:
    """Local uncertainty of each primary-plan step from the other samples' plans.

    ``support``: 1 - (share of other samples with a step of cosine >= step_tau).
    ``aligned_entropy``: normalised entropy of the clusters of the steps at the same index
    (a sample without that step counts as its own cluster).
    """
    m = len(primary_vecs)
    if not other_plans:
        return [0.0] * m
    out = []
    for j in range(m):
        if opts.step_uncertainty == "support":
            hits = sum(1 for P in other_plans if len(P) and float(np.max(P @ primary_vecs[j])) >= opts.step_tau)
            out.append(1.0 - hits / len(other_plans))
        else:
            vecs = [primary_vecs[j]]
            missing = 0
            for P in other_plans:
                if len(P) > j:
                    vecs.append(P[j])
                else:
                    missing += 1
            sizes = [len(c) for c in threshold_clusters(np.stack(vecs), opts.step_tau)] + [1] * missing
            out.append(normalized_entropy(sizes, opts.entropy_norm))
    return out


def build_graph(steps: list[str], step_vecs: np.ndarray, u_local: list[float], opts: Options) -> DepGraph:
    prior = structural_prior(steps, opts)
    w = {}
    for (j, t), p in prior.items():
        sim = float(np.clip(step_vecs[j] @ step_vecs[t], 0.0, 1.0)) if len(step_vecs) else 0.0
        w[(j, t)] = p * sim
    g = DepGraph(steps=steps, u=list(u_local), w=w, p_struct=prior)
    g.u_prop = propagate(g, opts)
    return g


def propagate(g: DepGraph, opts: Options, u_override: list[float] | None = None) -> list[float]:
    """u~_t = combine(u_t, lambda*bottleneck + (1-lambda)*aggregation) over predecessors j < t:
    bottleneck = max_j w_jt u~_j; aggregation = 1 - prod_j (1 - w_jt u~_j)."""
    u = list(u_override if u_override is not None else g.u)
    out: list[float] = []
    for t in range(len(u)):
        contrib = [g.w.get((j, t), 0.0) * out[j] for j in range(t)]
        if contrib:
            bott = max(contrib)
            agg = 1.0 - float(np.prod([1.0 - c for c in contrib]))
            mix = opts.propagation_lambda * bott + (1.0 - opts.propagation_lambda) * agg
        else:
            mix = 0.0
        if opts.propagation_combine == "max":
            val = max(u[t], mix)
        else:
            val = 1.0 - (1.0 - u[t]) * (1.0 - mix)
        out.append(float(min(1.0, max(0.0, val))))
    return out


def graph_risk(u_prop: list[float], opts: Options) -> float:
    if not u_prop:
        return 0.0
    return float(max(u_prop) if opts.propagated_readout == "max" else u_prop[-1])


def fuse(u_global: float, u_graph: float | None, opts: Options) -> float:
    if u_graph is None:
        return u_global
    if opts.fuse == "max":
        return max(u_global, u_graph)
    if opts.fuse == "noisy_or":
        return 1.0 - (1.0 - u_global) * (1.0 - u_graph)
    return 0.5 * (u_global + u_graph)


# ---- calibration (D.1) and compound risk (E.3, Eq. 8) ----------------------------------------
def calibrate(u: float, T: float, form: str = "power") -> float:
    """Temperature-scaled uncertainty: T > 1 raises it, T < 1 lowers it; 0 and 1 stay fixed."""
    u = min(1.0, max(0.0, u))
    if form == "scale":
        return min(1.0, T * u)
    return u ** (1.0 / T) if u > 0 else 0.0


def compound_risk(u_cal: float, f_slot: float | None) -> float:
    return max(u_cal, f_slot) if f_slot is not None else u_cal


# ---- influence (candidate Eq. 11) ------------------------------------------------------------
def influence(g: DepGraph, failed: int, u_prop: list[float] | None = None) -> list[float]:
    """I(j) = u~_j * (sum over paths j -> failed of the product of edge weights); the trivial path of
    the failed node itself counts 1."""
    up = u_prop if u_prop is not None else g.u_prop
    m = len(g.steps)
    paths = [0.0] * m
    if m == 0:
        return []
    paths[failed] = 1.0
    for j in range(failed - 1, -1, -1):
        paths[j] = sum(g.w.get((j, t), 0.0) * paths[t] for t in range(j + 1, failed + 1))
    return [up[j] * paths[j] for j in range(m)]
