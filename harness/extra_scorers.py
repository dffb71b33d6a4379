"""Scorers a benchmark config names beside the benchmark's own ``score``: the runner calls them, knowing none by name.

A benchmark config block whose key is in :data:`SCORER_BLOCKS` names the scorer that reads it (``judge:`` the
LLM judge, :class:`agentic_repro.harness.judge.JudgeScorer`); the block is the scorer's whole configuration, so
it is part of the run's identity like every benchmark key. A scorer that is not switched on for this run
(``enabled: false``, or the role it calls not configured) builds to None and costs nothing.

What a scorer must guarantee (the runner relies on it): its failure raises, and the runner makes the problem an
error (retried on resume), never a wrong answer or a 0; its calls go through the run's LLM clients under its
``role``, so the ledger bills them under that role; what it records is written beside the prediction under
:attr:`ExtraScorer.key`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentic_repro.harness.refs import resolve_ref

if TYPE_CHECKING:
    from agentic_repro.harness.benchmark import Benchmark
    from agentic_repro.harness.context import ProblemContext, RunContext
    from agentic_repro.harness.types import Problem, Score, Solution

#: benchmark config key -> ``module:attr`` of the scorer built from that block (``attr.from_config(block, ...)``)
SCORER_BLOCKS: dict[str, str] = {"judge": "agentic_repro.harness.judge:JudgeScorer"}


class ExtraScorer(Protocol):
    """One scorer beside the benchmark's own."""

    key: str              # the prediction record's key for what it records (and its metrics.json block)
    role: str | None      # the role its calls run as (the run's, not the method's: added to the method's roles)
    error_label: str      # a failure's ``error`` starts with it (``JudgeError: ...``)

    def stand_in(self, benchmark: Benchmark, answer: str, problem: Problem) -> Score | None:
        """The prediction's score before this scorer runs when it *is* the score (None: the benchmark scores)."""
        ...

    async def score(self, ctx: RunContext, pctx: ProblemContext, benchmark: Benchmark, problem: Problem,
                    solution: Solution, value: float, record: dict[str, Any]) -> float:
        """Score one answered prediction: write what it records to ``record[self.key]`` (before raising too),
        return the prediction's score (``value`` unless it is the headline). Raises when it cannot score."""
        ...

    def add_metrics(self, metrics: dict[str, Any], answered: list[dict[str, Any]], latest: list[dict[str, Any]],
                    samples_per_task: int, threshold: float) -> None:
        """Its numbers in metrics.json, from the run's latest predictions (``answered``: those not errored)."""
        ...


def build_scorers(benchmark_cfg: dict[str, Any], roles_cfg: dict[str, Any] | None) -> list[ExtraScorer]:
    """The scorers this run's benchmark config names and switches on, in :data:`SCORER_BLOCKS` order."""
    out = []
    for key, path in SCORER_BLOCKS.items():
        if benchmark_cfg.get(key) is not None:
            scorer = resolve_ref(path, f"benchmark.{key}").from_config(
                benchmark_cfg[key], benchmark=str(benchmark_cfg.get("name")), roles_cfg=roles_cfg or {})
            if scorer is not None:
                out.append(scorer)
    return out
