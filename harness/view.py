"""What a method may see of a problem and its benchmark: no gold, no hidden fields, no scorer.

The runner keeps the real :class:`~harness.types.Problem` and benchmark; a method receives a
:class:`ProblemView` (the problem without ``gold`` and without the fields the benchmark declares
hidden, e.g. MBPP's scored asserts) and ``ctx.benchmark``, a :class:`BenchmarkView` that renders,
prompts, extracts and runs tools but has no ``score``, ``load`` or ``cfg``.

Why a context variable: the view's operations need the real problem (MBPP's prompt shows a test the
view hides), yet nothing reachable from ``ctx`` — attributes, private ones included, containers,
bound methods, closures — may hold it, or ``ctx.benchmark._real.problem.gold`` would be one line
away. The runner puts each problem attempt's :class:`Backstage` (real problem, benchmark, tools,
environment host) in a :class:`contextvars.ContextVar` of that problem's task; the views hold only
the attempt's key and look the backstage up when called. Tasks and threads a method starts inherit
it (asyncio copies the context). What no Python harness can prevent — importing this module to read
the variable, walking the interpreter's frames, or opening the data file — is deliberate cheating,
outside what ``ctx`` offers.
"""
from __future__ import annotations

import copy
from contextvars import ContextVar, Token
from dataclasses import dataclass
from collections.abc import Hashable
from typing import Any

from agentic_repro.harness.benchmark import Benchmark
from agentic_repro.harness.env import EnvHost
from agentic_repro.harness.tools import Tool, ToolCall, ToolSpec, UnknownTool, invoke
from agentic_repro.harness.types import Problem


class GoldHidden(AttributeError):
    """A method asked for the gold answer (or a hidden field) of a problem."""


@dataclass(frozen=True)
class ProblemView:
    """A problem as a method sees it: ``id``, ``index``, visible ``fields``, ``benchmark`` name."""

    id: str
    index: int
    fields: dict[str, Any]
    benchmark: str

    @property
    def gold(self) -> Any:
        raise GoldHidden(f"problem {self.id}: a method never sees the gold answer (the scorer and the environment "
                         "do); see docs/writing-a-method.md")

    @classmethod
    def of(cls, problem: Problem, hidden: frozenset[str] = frozenset()) -> ProblemView:
        fields = {k: copy.deepcopy(v) for k, v in problem.fields.items() if k not in hidden}
        return cls(problem.id, problem.index, fields, problem.benchmark)


@dataclass(frozen=True)
class BenchmarkInfo:
    """The benchmark's public facts, shared by every problem's view."""

    name: str
    domain: str
    version: str
    answer_instruction: str
    is_environment: bool
    max_steps: int | None

    @classmethod
    def of(cls, bench: Benchmark) -> BenchmarkInfo:
        return cls(bench.name, bench.domain, bench.version, bench.answer_instruction, bench.is_environment,
                   bench.max_steps)


class Backstage:
    """The runner side of one problem attempt (never reachable from ``ctx``; see the module docstring)."""

    def __init__(self, key: int, benchmark: Benchmark, problem: Problem, problems: dict[str, Problem],
                 host: EnvHost | None) -> None:
        self.key = key
        self.benchmark = benchmark
        self.problem = problem
        self._problems = problems  # the run's problems by id (a view of another problem resolves too)
        self.host = host
        self._tools: dict[str, dict[str, Tool]] = {}
        self.tool_calls: list[ToolCall] = []  # the authoritative record (a method cannot edit it)

    def real(self, problem: Any) -> Problem:
        pid = getattr(problem, "id", None)
        if pid not in self._problems:
            raise KeyError(f"problem {pid!r} is not in this run's selection")
        return self._problems[pid]

    def tools(self, problem: Any | None = None) -> dict[str, Tool]:
        real = self.problem if problem is None else self.real(problem)
        if real.id not in self._tools:
            self._tools[real.id] = {t.name: t for t in self.benchmark.tools(real)}
        return self._tools[real.id]

    async def call_tool(self, name: str, args: dict[str, Any], problem: Any | None = None) -> Any:
        tools = self.tools(problem)
        if name not in tools:
            raise UnknownTool(f"benchmark {self.benchmark.name} offers no tool {name!r} for problem "
                              f"{getattr(problem, 'id', self.problem.id)}; available: {sorted(tools)}")
        return await invoke(tools[name], args, self.tool_calls.append)


_BACKSTAGE: ContextVar[Backstage] = ContextVar("agentic_repro_backstage")


def enter(stage: Backstage) -> Token[Backstage]:
    return _BACKSTAGE.set(stage)


def leave(token: Token[Backstage]) -> None:
    _BACKSTAGE.reset(token)


def backstage(key: int) -> Backstage:
    """The backstage of problem attempt ``key``; a context used outside its problem's task is an error."""
    try:
        stage = _BACKSTAGE.get()
    except LookupError:
        raise RuntimeError("a problem context was used outside the runner's task for that problem (e.g. from a "
                           "thread started with run_in_executor: use asyncio.to_thread, which keeps the context, "
                           "or call ctx only from solve())") from None
    if stage.key != key:
        raise RuntimeError("this problem context belongs to another problem: use the ctx passed to this solve()")
    return stage


def env_host(key: int) -> EnvHost:
    stage = backstage(key)
    if stage.host is None:
        raise ValueError(f"benchmark {stage.benchmark.name} is not an environment (its config has no env:)")
    return stage.host


class BenchmarkView:
    """``ctx.benchmark``: render, prompt, extract, answer keys and tools; no score, load, cfg or gold."""

    def __init__(self, info: BenchmarkInfo, key: int) -> None:
        self._info = info
        self._key = key

    name = property(lambda self: self._info.name)
    domain = property(lambda self: self._info.domain)
    version = property(lambda self: self._info.version)
    answer_instruction = property(lambda self: self._info.answer_instruction)
    is_environment = property(lambda self: self._info.is_environment)
    max_steps = property(lambda self: self._info.max_steps)

    def render(self, problem: Any) -> str:
        """The task text the model reads."""
        stage = backstage(self._key)
        return stage.benchmark.render(stage.real(problem))

    def prompt(self, problem: Any, template: str) -> str:
        """``template`` with ``{task}`` and ``{answer_instruction}`` filled in."""
        stage = backstage(self._key)
        return stage.benchmark.prompt(stage.real(problem), template)

    def extract(self, text: str, problem: Any) -> tuple[Any, str]:
        """The benchmark's answer extraction: (extracted, rule)."""
        stage = backstage(self._key)
        return stage.benchmark.extract(text, stage.real(problem))

    def answer_key(self, extracted: Any) -> Hashable | None:
        """A canonical, hashable form of an extracted answer for voting (None: nothing extracted)."""
        return backstage(self._key).benchmark.answer_key(extracted)

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools this problem offers (name, description, parameters)."""
        return [t.spec for t in backstage(self._key).tools().values()]

    async def run_public_tests(self, text: str, problem: Any) -> dict[str, Any] | None:
        """The ``run_public_tests`` tool (recorded like any tool call); ``None`` when there are no public tests."""
        stage = backstage(self._key)
        if "run_public_tests" not in stage.tools(problem):
            return None
        return await stage.call_tool("run_public_tests", {"text": text}, problem)

    def __repr__(self) -> str:
        return f"BenchmarkView({self._info.name!r}, domain={self._info.domain!r})"
