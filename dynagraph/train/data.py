"""Run folders -> DynaGraph training files, through ``agentic_repro.training.datasets`` (provenance, status filter, pairing).

* **Planner DPO** (critic-guided): a sampling run (``method=dynagraph_sample``: several plans per training query,
  each executed) yields, per candidate, the planner's first prompt and raw plan, scored by the Topology Critic:
  Phi_task from the benchmark's own scorer on that candidate's answer (offline, after the run: the method never
  saw it), the legality gate from the plan's validation, S_cost from its node and reconstruction counts. Pairs
  are (highest R, lowest R) per prompt.
* **Expert SFT**: every node execution of a teacher run (the experts' roles on a teacher backbone) whose problem
  was solved and whose feedback had no anomaly, one file per expert role.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

import yaml

from agentic_repro.dynagraph.critic import CriticOptions, reward
from agentic_repro.dynagraph.schema import validate_plan
from agentic_repro.training.datasets import Example, Trajectory

ROLE_OF_EXPERT = {"E_rag": "expert1", "E_logic": "expert2", "E_expr": "expert3"}


class GoldScorer:
    """Phi_task for deterministic tasks: the run's benchmark scores a candidate answer against the gold."""

    def __init__(self) -> None:
        self._benches: dict[Path, tuple[Any, dict[str, Any]]] = {}

    def _bench(self, root: Path) -> tuple[Any, dict[str, Any]]:
        if root not in self._benches:
            from agentic_repro.harness.benchmark import build_benchmark

            cfg = yaml.safe_load((root / "config.yaml").read_text())
            bcfg = cfg.get("benchmark") or cfg.get("full_config", {}).get("benchmark")
            bench = build_benchmark(bcfg)
            problems, _ = bench.load()
            self._benches[root] = (bench, {p.id: p for p in problems})
        return self._benches[root]

    def __call__(self, t: Trajectory, answer: str) -> float:
        bench, problems = self._bench(t.run.root)
        problem = problems[t.id]
        return float(asyncio.run(bench.score(answer or "", problem)).value)


def _candidates(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return list(trace.get("candidates") or ([trace] if trace.get("plans") else []))


def legal_first_plan(trace: dict[str, Any], candidate: dict[str, Any]) -> bool:
    """The legality gate on the completion being trained (the candidate's first planner answer), with the
    runtime's own limits: the check the orchestrator recorded when it ran, and the same validation again with the
    run's ``max_plan_nodes`` (a plan the runtime refused is illegal, whatever the re-asked plan then achieved)."""
    first = candidate["plans"][0]["attempts"][0]
    recorded = (first.get("check") or {}).get("ok")
    max_nodes = (trace.get("options") or {}).get("max_plan_nodes")
    again = validate_plan(first["raw"], max_nodes=None if max_nodes is None else int(max_nodes)).ok
    return again and recorded is not False


def candidate_phi(t: Trajectory, c: dict[str, Any], score: Callable[[Trajectory, str], float]) -> float:
    """Phi_task of one candidate: the runner's own score for the candidate it scored (the trace's top level,
    candidate 0), the benchmark's scorer on the candidate's answer for the others (each its own, never candidate
    0's)."""
    if not t.trace.get("candidates") or c.get("sample", 0) == t.trace.get("sample", 0):
        return t.score
    return score(t, c.get("answer", ""))


def critic_plans(opts: CriticOptions = CriticOptions(),  # noqa: B008 - frozen dataclass, never mutated
                 phi: Callable[[Trajectory, str], float] | None = None
                 ) -> Callable[[Trajectory], list[Example]]:
    """The DPO extractor: one planner Example per executed candidate, labelled with R(tau)."""
    score = phi or GoldScorer()

    def extract(t: Trajectory) -> list[Example]:
        out = []
        for c in _candidates(t.trace):
            first = c["plans"][0]["attempts"][0]
            legal = legal_first_plan(t.trace, c)
            p = candidate_phi(t, c, score)
            r = reward(p, legal, int(c["nodes_executed"]), int(c["reconstructions"]), opts)
            out.append(Example(first["messages"], first["raw"], r, "planner",
                               {"sample": c.get("sample"), "phi_task": p, "legal": legal,
                                "nodes": c["nodes_executed"], "reconstructions": c["reconstructions"],
                                "patches": c.get("patches")}))
        return out

    extract.__name__ = f"dynagraph.critic_plans[{opts.cost_form},{opts.gate},{opts.lam_nodes},{opts.lam_recon}]"
    return extract


def expert_steps(success_threshold: float = 1.0, phi: Callable[[Trajectory, str], float] | None = None
                 ) -> Callable[[Trajectory], Iterable[Example]]:
    """The SFT extractor: (expert messages, raw JSON answer) of solved candidates' anomaly-free nodes."""
    score = phi or GoldScorer()

    def extract(t: Trajectory) -> list[Example]:
        out = []
        for c in _candidates(t.trace):
            ok = candidate_phi(t, c, score) >= success_threshold     # this candidate's own outcome
            for e in c.get("executions", []):
                out.append(Example(e["messages"], e["raw"], ok and not e["feedback"]["xi"],
                                   ROLE_OF_EXPERT[e["expert"]], {"node": e["node"], "expert": e["expert"],
                                                                 "candidate": c.get("sample", 0)}))
        return out

    extract.__name__ = f"dynagraph.expert_steps[{success_threshold}]"
    return extract
