"""Online calibration (D.1-D.3): a temperature T in [t_min, t_max] from verifier feedback.

State changes only at window boundaries, in problem order (the runner's window mechanism), so the
numbers do not depend on timing, and the state is saved with the results so a resumed run continues
from the same T and the same confidence history.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentic_repro.denoiseflow.config import Options


@dataclass
class CalibrationState:
    T: float = 1.0
    feedback: list[list[Any]] = field(default_factory=list)     # [problem_id, r, passed] (sliding window)
    confidences: list[float] = field(default_factory=list)      # every past confidence (for quantiles)
    updates: list[dict[str, Any]] = field(default_factory=list)  # one per window
    windows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"T": self.T, "feedback": self.feedback, "confidences": self.confidences,
                "updates": self.updates, "windows": self.windows}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CalibrationState:
        return cls(T=float(d["T"]), feedback=[list(x) for x in d.get("feedback", [])],
                   confidences=[float(x) for x in d.get("confidences", [])],
                   updates=list(d.get("updates", [])), windows=int(d.get("windows", 0)))


def update_temperature(state: CalibrationState, opts: Options) -> dict[str, Any]:
    """D.2: raise T when low-uncertainty problems fail too often, lower it when high-uncertainty problems
    pass too often; clamp to [t_min, t_max] (D.3). Returns the update record."""
    recent = state.feedback[-opts.calib_window:]
    low = [p for _, r, p in recent if r < opts.calib_u_low]
    high = [p for _, r, p in recent if r > opts.calib_u_high]
    acc_low = sum(low) / len(low) if len(low) >= opts.calib_min_count else None
    acc_high = sum(high) / len(high) if len(high) >= opts.calib_min_count else None
    theta_high = opts.theta_acc if opts.theta_acc_high is None else opts.theta_acc_high
    before = state.T
    action = "hold"
    if acc_low is not None and acc_low < opts.theta_acc:
        state.T, action = state.T * (1.0 + opts.calib_step), "raise"
    elif acc_high is not None and acc_high > theta_high:
        state.T, action = state.T / (1.0 + opts.calib_step), "lower"
    state.T = float(min(opts.t_max, max(opts.t_min, state.T)))
    return {"window": state.windows, "T_before": round(before, 6), "T_after": round(state.T, 6),
            "action": action, "acc_low": acc_low, "n_low": len(low), "acc_high": acc_high, "n_high": len(high)}


def observe_window(state: CalibrationState, records: list[dict[str, Any]], opts: Options) -> None:
    """Fold one window's records (in problem order) into the state; ``records`` hold
    ``id``, ``confidence``, ``r`` and ``passed`` (True/False, or None when the verdict was unknown)."""
    for rec in records:
        if rec.get("confidence") is not None:
            state.confidences.append(float(rec["confidence"]))
        if rec.get("r") is not None and rec.get("passed") is not None:
            state.feedback.append([rec["id"], float(rec["r"]), bool(rec["passed"])])
    state.feedback = state.feedback[-max(opts.calib_window, 1):]
    if opts.online_calibration:
        state.updates.append(update_temperature(state, opts))
    else:
        state.updates.append({"window": state.windows, "T_before": state.T, "T_after": state.T,
                              "action": "fixed (w/o OC)"})
    state.windows += 1
