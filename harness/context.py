"""The run context a method receives: backbone access, seeds, budgets, benchmark tools.

There is no global state: everything a method may touch comes through
:class:`ProblemContext`, created by the runner per (run, problem).
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.ledger import CallRecord, CallSummary
from harness.llm import LLMClient
from harness.types import Completion, Message, Problem

if TYPE_CHECKING:
    from evaluators.base import Benchmark


class BudgetExceeded(RuntimeError):
    """A method asked for more backbone calls than the run's per-problem budget allows."""


@dataclass
class Budgets:
    max_calls_per_problem: int | None = None


@dataclass
class RunContext:
    """Per-run resources shared by every problem of one (method, benchmark, backbone, seed)."""

    run_id: str
    seed: int
    method: str
    llm: LLMClient
    benchmark: "Benchmark"
    budgets: Budgets = field(default_factory=Budgets)
    resources: dict[str, Any] = field(default_factory=dict)  # lazily built shared helpers (e.g. an embedder)

    def for_problem(self, problem: Problem) -> "ProblemContext":
        return ProblemContext(self, problem)


class ProblemContext:
    """What a method sees while solving one problem."""

    def __init__(self, run: RunContext, problem: Problem) -> None:
        self.run = run
        self.problem = problem
        self.calls: list[CallRecord] = []
        digest = hashlib.sha256(f"{run.seed}:{problem.id}".encode()).digest()
        self.rng = random.Random(int.from_bytes(digest[:8], "big"))

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def benchmark(self) -> "Benchmark":
        return self.run.benchmark

    def resource(self, name: str, factory: Any) -> Any:
        """A run-wide shared object (built once, e.g. an embedding model)."""
        if name not in self.run.resources:
            self.run.resources[name] = factory()
        return self.run.resources[name]

    async def generate(self, messages: list[Message], *, stage: str, n: int = 1, sample_offset: int = 0,
                       **sampling: Any) -> list[Completion]:
        """``n`` completions for ``messages``; ``stage`` names the role in the cost ledger."""
        limit = self.run.budgets.max_calls_per_problem
        if limit is not None and len(self.calls) + n > limit:
            raise BudgetExceeded(f"problem {self.problem.id}: {len(self.calls) + n} calls exceed "
                                 f"budgets.max_calls_per_problem={limit}")
        return await self.run.llm.generate(messages, stage=stage, problem_id=self.problem.id, seed=self.run.seed,
                                           sink=self.calls.append, n=n, sample_offset=sample_offset, **sampling)

    async def ask(self, prompt: str, *, stage: str, system: str | None = None, **sampling: Any) -> str:
        """One completion's text for a single user prompt."""
        messages: list[Message] = ([{"role": "system", "content": system}] if system else [])
        messages.append({"role": "user", "content": prompt})
        return (await self.generate(messages, stage=stage, **sampling))[0].text

    def summary(self) -> CallSummary:
        return CallSummary.of(self.calls)
