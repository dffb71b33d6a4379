"""The run context a method receives: backbones by role, seeds, budgets, the benchmark's view and tools.

There is no global state: everything a method may touch comes through
:class:`ProblemContext`, created by the runner per (run, problem attempt). It holds the gold-free
:class:`~harness.view.ProblemView` and :class:`~harness.view.BenchmarkView`; what needs the real
problem (rendering, tools, environments) is reached through the attempt's backstage
(:mod:`agentic_repro.harness.view`), never through an attribute.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from agentic_repro.harness.env import EnvSession
from agentic_repro.harness.ledger import CallRecord, CallSummary
from agentic_repro.harness.llm import LLMClient
from agentic_repro.harness.roles import DEFAULT, role_of
from agentic_repro.harness.tools import ToolSpec
from agentic_repro.harness.types import Completion, Message
from agentic_repro.harness.view import BenchmarkInfo, BenchmarkView, ProblemView, backstage, env_host


class BudgetExceeded(RuntimeError):
    """A method asked for more backbone calls than the run's per-problem budget allows."""


@dataclass
class Budgets:
    max_calls_per_problem: int | None = None
    max_usd: float | None = None  # the run's dollar cap (enforced by the clients: harness.llm.DollarCap)


@dataclass
class RunContext:
    """Per-run resources shared by every problem of one (method, benchmark, backbones, seed).

    ``llms`` maps each role to its client (``default`` = the run's backbone; roles sharing a backbone
    share a client); ``adapters`` the adapter each role is bound to (None: the base model).
    """

    run_id: str
    seed: int
    method: str
    llms: dict[str, LLMClient]
    benchmark: BenchmarkInfo
    adapters: dict[str, str | None] = field(default_factory=dict)
    budgets: Budgets = field(default_factory=Budgets)
    resources: dict[str, Any] = field(default_factory=dict)  # lazily built shared helpers (e.g. an embedder)
    _keys: Any = field(default_factory=itertools.count, repr=False)

    @property
    def llm(self) -> LLMClient:
        return self.llms[DEFAULT]

    @property
    def roles(self) -> list[str]:
        return list(self.llms)

    def resource(self, name: str, factory: Any) -> Any:
        """A run-wide shared object (built once, e.g. an embedding model); a method's ``preflight`` builds
        it here before the first problem, and every problem's :meth:`ProblemContext.resource` finds it."""
        if name not in self.resources:
            self.resources[name] = factory()
        return self.resources[name]

    def for_problem(self, problem: ProblemView, calls: list[CallRecord] | None = None) -> ProblemContext:
        """``calls`` is the list the attempt's ledger records go into (the runner's writes them as they come)."""
        return ProblemContext(self, problem, next(self._keys), calls)


class ProblemContext:
    """What a method sees while solving one problem."""

    def __init__(self, run: RunContext, problem: ProblemView, key: int,
                 calls: list[CallRecord] | None = None) -> None:
        self.run = run
        self.problem = problem
        self.key = key  # names this attempt's backstage (see harness.view)
        self.calls: list[CallRecord] = [] if calls is None else calls
        self.benchmark = BenchmarkView(run.benchmark, key)
        digest = hashlib.sha256(f"{run.seed}:{problem.id}".encode()).digest()
        self.rng = random.Random(int.from_bytes(digest[:8], "big"))

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def roles(self) -> list[str]:
        """The roles this run configures (``default`` first)."""
        return self.run.roles

    def resource(self, name: str, factory: Any) -> Any:
        """A run-wide shared object (built once, e.g. an embedding model)."""
        return self.run.resource(name, factory)

    async def generate(self, messages: list[Message], *, stage: str, role: str | None = None,
                       adapter: str | None = None, n: int = 1, sample_offset: int = 0,
                       **sampling: Any) -> list[Completion]:
        """``n`` completions for ``messages`` from ``role``'s backbone (None: the run's backbone).

        ``stage`` names the step in the cost ledger; ``adapter`` overrides the role's bound adapter.
        """
        name = role_of(self.run.llms, role)
        limit = self.run.budgets.max_calls_per_problem
        if limit is not None and len(self.calls) + n > limit:
            raise BudgetExceeded(f"problem {self.problem.id}: {len(self.calls) + n} calls exceed "
                                 f"budgets.max_calls_per_problem={limit}")
        chosen = adapter if adapter is not None else self.run.adapters.get(name)
        return await self.run.llms[name].generate(messages, stage=stage, problem_id=self.problem.id,
                                                  seed=self.run.seed, sink=self.calls.append, n=n,
                                                  sample_offset=sample_offset, role=name, adapter=chosen,
                                                  **sampling)

    async def ask(self, prompt: str, *, stage: str, system: str | None = None, role: str | None = None,
                  adapter: str | None = None, **sampling: Any) -> str:
        """One completion's text for a single user prompt."""
        messages: list[Message] = ([{"role": "system", "content": system}] if system else [])
        messages.append({"role": "user", "content": prompt})
        return (await self.generate(messages, stage=stage, role=role, adapter=adapter, **sampling))[0].text

    # ---- tools and environments ----------------------------------------------------------------
    @property
    def tools(self) -> list[ToolSpec]:
        """The tools the benchmark offers for this problem."""
        return self.benchmark.tools

    async def call_tool(self, name: str, **args: Any) -> Any:
        """Call a benchmark tool; the call (arguments, result, latency) is recorded in predictions.jsonl."""
        return await backstage(self.key).call_tool(name, args)

    def env(self) -> EnvSession:
        """A session on this problem's environment: ``async with ctx.env() as s`` or ``s = await ctx.env()``."""
        backstage(self.key)  # fail here, not at the first reset, when used outside the problem's task
        return EnvSession(functools.partial(env_host, self.key))

    def summary(self) -> CallSummary:
        return CallSummary.of(self.calls)
