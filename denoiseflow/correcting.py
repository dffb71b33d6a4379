"""Stage 3, Correcting: root-cause localisation (E.5, candidate Eq. 11) and asymmetric calibration."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentic_repro.denoiseflow.config import Options
from agentic_repro.denoiseflow.sensing import DepGraph, influence, propagate


@dataclass
class RootCause:
    index: int | None          # step index in the dependency graph (None: no graph)
    step: str
    influence: list[float]
    method: str                # root_cause | local_retry | no_graph

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "step": self.step[:300], "method": self.method,
                "influence": [round(x, 4) for x in self.influence]}


def localize(g: DepGraph | None, correction: str, u_prop: list[float] | None = None) -> RootCause:
    """``root_cause``: argmax_j I(j) for the failed terminal node (ties: the earliest step, i.e. the most
    upstream). ``local_retry``: the failing step itself (the terminal node), no influence analysis."""
    if g is None or not g.steps:
        return RootCause(None, "the final answer step", [], "no_graph")
    failed = len(g.steps) - 1
    if correction == "local_retry":
        return RootCause(failed, g.steps[failed], [], "local_retry")
    inf = influence(g, failed, u_prop)
    best = max(range(len(inf)), key=lambda j: (round(inf[j], 9), -j))
    return RootCause(best, g.steps[best], inf, "root_cause")


def boost(g: DepGraph, u_local: list[float], k: int | None, opts: Options) -> tuple[list[float], list[float]]:
    """E.5 Boost: u_{k*} <- u_boost (1.0); returns (new local u, re-propagated u~)."""
    u = list(u_local)
    if k is not None and 0 <= k < len(u):
        u[k] = max(u[k], opts.u_boost)
    return u, propagate(g, opts, u)


def enforce(u_slots: dict[str, float], failing: list[str], opts: Options) -> dict[str, float]:
    """E.5 Enforce: u_s <- max(u_s, tau_enf) for the failing slots."""
    return {s: (max(v, opts.tau_enf) if s in failing else v) for s, v in u_slots.items()}


def failing_slots(domain: str, verdict: dict[str, Any], slots: list[str]) -> list[str]:
    """Which understanding slots a failed verification implicates.

    math: the G.3 checks (format_ok -> answer_form, units; constraints_ok -> constraints;
    reasonable -> goal); code: failing public tests -> constraints, answer_form; qa: slots named in
    the reason, else answer_form. Only slots that exist for the domain are returned.
    """
    out: list[str] = []
    checks = verdict.get("checks") if isinstance(verdict.get("checks"), dict) else {}
    if domain == "math":
        if checks.get("format_ok") is False:
            out += ["answer_form", "units"]
        if checks.get("constraints_ok") is False:
            out += ["constraints"]
        if checks.get("reasonable") is False:
            out += ["goal"]
        if not out:
            out = ["goal", "constraints"]
    elif domain == "code":
        out = ["constraints", "answer_form"]
    else:
        reason = str(verdict.get("reason", "")).lower()
        out = [s for s in slots if s.replace("_", " ") in reason or s in reason] or ["answer_form"]
    return [s for s in dict.fromkeys(out) if s in slots]
