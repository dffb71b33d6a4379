"""The Topology Critic (paper §3.4.1): R(tau) from task completion, the legality gate and the system overhead.

The paper names the three parts but its equation was not recovered; the supplement's candidate form is
``R = I_leg * (Phi_task - S_cost)`` with a sub-linear S_cost on the node count |V| and the reconstruction count
eta. The gate's handling of a negative score and S_cost's form are named options (README).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

GATES = ("clip", "zero", "floor")
COSTS = ("sqrt", "log", "linear")


@dataclass(frozen=True)
class CriticOptions:
    lam_nodes: float = 0.05     # weight of |V| in S_cost
    lam_recon: float = 0.10     # weight of eta in S_cost
    cost_form: str = "sqrt"     # sqrt (lam1 sqrt|V| + lam2 sqrt eta) | log (log1p) | linear (not sub-linear; contrast)
    gate: str = "clip"          # clip: I_leg * max(0, Phi - S_cost) | zero: I_leg * (Phi - S_cost) | floor: illegal = -1

    def __post_init__(self) -> None:
        if self.cost_form not in COSTS or self.gate not in GATES:
            raise ValueError(f"critic: cost_form in {COSTS}, gate in {GATES}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def s_cost(n_nodes: int, eta: int, opts: CriticOptions) -> float:
    f = {"sqrt": math.sqrt, "log": math.log1p, "linear": float}[opts.cost_form]
    return opts.lam_nodes * f(max(0, n_nodes)) + opts.lam_recon * f(max(0, eta))


def reward(phi: float, legal: bool, n_nodes: int, eta: int, opts: CriticOptions = CriticOptions()) -> float:
    """R(tau) of one trajectory: Phi_task in [0, 1], legality, node executions |V_tau| and reconstructions eta."""
    raw = float(phi) - s_cost(n_nodes, eta, opts)
    if opts.gate == "floor":
        return raw if legal else -1.0
    if opts.gate == "clip":
        raw = max(0.0, raw)
    return raw if legal else 0.0
