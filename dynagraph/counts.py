"""How often DynaGraph fell back or re-asked, per problem and per run.

Why: a labelled fallback (the orchestrator's 2-node plan after ``max_plan_attempts`` failed planner answers, or
the default patch when the planner's patch is unusable) produces an answer that is scored as DynaGraph's. A
cell must say how many of its problems were answered that way, so every prediction's trace carries these
counts and the tables sum them from ``predictions.jsonl`` (the method config's ``run_counts`` names :func:`run_counts`, which the runner
sums into ``metrics.json`` ``method_counts``).
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterable

KEYS = ("reasks", "fallbacks", "fallback_patches")


def plan_counts(plans: list[dict[str, Any]]) -> dict[str, int]:
    """From a trajectory's planner records: re-asked planner answers (every attempt after the first of a plan or
    sub-plan), fallback plans/sub-plans, and default patches."""
    structural = [p for p in plans if p.get("kind") != "patch"]
    return {"reasks": sum(max(0, len(p.get("attempts") or []) - 1) for p in structural),
            "fallbacks": sum(bool(p.get("fallback")) for p in structural),
            "fallback_patches": sum(bool(p.get("fallback")) for p in plans if p.get("kind") == "patch")}


def problem_counts(trace: dict[str, Any]) -> dict[str, int]:
    """The scored trajectory's counts (a sampling run scores candidate 0, which is the trace's top level)."""
    if all(k in trace for k in KEYS):
        return {k: int(trace[k] or 0) for k in KEYS}
    return plan_counts(trace.get("plans") or [])   # traces written before the counts existed


def run_counts(predictions: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Sums over a run's answered problems, plus ``problems_with_fallback`` (a fallback plan or sub-plan ran) and
    ``fallback_errors`` (problems that errored because ``fallback=error`` refused the fallback)."""
    out = {k: 0 for k in KEYS}
    out.update(problems_with_fallback=0, fallback_errors=0)
    for p in predictions:
        if p.get("status") == "error":
            out["fallback_errors"] += "PlanFailure" in str(p.get("error") or "")
            continue
        c = problem_counts(p.get("trace") or {})
        for k in KEYS:
            out[k] += c[k]
        out["problems_with_fallback"] += c["fallbacks"] > 0
    return out


def cell_note(c: dict[str, int]) -> str:
    """``fallback 7, re-asks 12`` (+ default patches when any): the text every DynaGraph cell carries."""
    text = f"fallback {c['problems_with_fallback']}, re-asks {c['reasks']}"
    if c.get("fallback_patches"):
        text += f", default patches {c['fallback_patches']}"
    return text
