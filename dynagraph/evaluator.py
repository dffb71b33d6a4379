"""The Evaluator: global uncertainty U_t, the suspension signal and the choice of intervention.

The paper gives the triggers (§3.3) but not U_t's formula nor the suspension rule; the candidate forms are
named options (README). ``decide`` is pure so the thresholds are tested on hand-made feedback.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

from agentic_repro.dynagraph.config import Options
from agentic_repro.dynagraph.schema import Feedback


def global_uncertainty(confidences: Sequence[float], form: str) -> float:
    """U_t over the confidences of the nodes executed so far on the live graph (empty: 0)."""
    cs = [min(1.0, max(0.0, float(c))) for c in confidences]
    if not cs:
        return 0.0
    if form == "mean":
        return 1.0 - sum(cs) / len(cs)
    if form == "min":
        return 1.0 - min(cs)
    if form == "noisy_or":
        return 1.0 - math.prod(cs)
    if form == "last":
        return 1.0 - cs[-1]
    raise ValueError(f"unknown uncertainty form {form!r}")


@dataclass
class Decision:
    """What the Evaluator asks of the Orchestrator after one node."""

    action: str                 # continue | patch | reconstruct | accept (suspended, but no operator allowed)
    suspend: bool
    reasons: list[str] = field(default_factory=list)
    U_t: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "suspend": self.suspend, "reasons": self.reasons, "U_t": round(self.U_t, 4)}


@dataclass
class Budget:
    """What is left of a problem's intervention budgets."""

    patches: int
    reconstructions: int
    nodes: int

    @classmethod
    def of(cls, opts: Options) -> Budget:
        return cls(opts.max_patches, opts.max_reconstructions, opts.max_nodes)


def decide(fb: Feedback, live_confidences: Sequence[float], opts: Options, budget: Budget, *,
           is_patch: bool = False) -> Decision:
    """Suspend on xi=1, c < tau_c or U_t >= tau_u (``suspend_rule: any``); then:

    * a local failure (xi or c) of an ordinary node -> fine-grained patching;
    * a failed patch, or U_t >= tau_u -> subgraph reconstruction;
    * with an operator disabled (Table 2 variants) the other one takes its place (w/o patching: every
      suspension reconstructs; w/o reconstruction: a failed patch or U_t breach patches again);
    * no operator or no budget left -> ``accept`` (execution goes on with the output as it is, recorded).
    """
    U = global_uncertainty(live_confidences, opts.uncertainty)
    reasons = []
    if fb.xi:
        reasons.append("xi=1 (" + ", ".join(r for r in fb.reasons if r != "no valid confidence") + ")")
    if fb.c < opts.tau_c:
        reasons.append(f"c={fb.c:.2f} < tau_c={opts.tau_c}")
    local = bool(reasons)
    use_u = opts.suspend_rule == "any"
    if use_u and round(U, 9) >= opts.tau_u:  # rounded: 1 - mean(0.6, 0.5) is 0.4499999...

        reasons.append(f"U_t={U:.2f} >= tau_u={opts.tau_u}")
    if not reasons:
        return Decision("continue", False, [], U)
    want = "patch" if local and not is_patch else "reconstruct"
    can = {"patch": opts.patching and budget.patches > 0,
           "reconstruct": opts.reconstruction and budget.reconstructions > 0}
    if want == "patch" and not can["patch"]:
        want = "reconstruct"
        reasons.append("patching unavailable: reconstruct")
    elif want == "reconstruct" and not can["reconstruct"] and can["patch"] and not opts.reconstruction:
        want = "patch"
        reasons.append("reconstruction disabled: patch")
    if not can[want]:
        reasons.append("no operator or budget left: accept")
        return Decision("accept", True, reasons, U)
    return Decision(want, True, reasons, U)
