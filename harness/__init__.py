"""The public core: what a method or a benchmark author imports (``from agentic_repro.harness import ...``).

A method is ``async def solve(problem: ProblemView, ctx: ProblemContext) -> Solution`` and generates through
``ctx.generate`` / ``ctx.ask`` (docs/writing-a-method.md); a benchmark subclasses :class:`Benchmark` (load, render,
score) and raises :class:`ScorerFailure` when it cannot judge (docs/writing-a-benchmark.md). Everything else under
``harness/`` is the runner's own machinery and may change.

The names resolve on first use (PEP 562): ``import agentic_repro.harness.types`` stays as cheap as that one module,
where importing :mod:`~agentic_repro.harness.context` here would pull in the HTTP client for every caller. Type
checkers and editors read the ``TYPE_CHECKING`` imports below.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentic_repro.harness.answers import FALLBACK_RULES, has_final_answer
    from agentic_repro.harness.benchmark import Benchmark, DataInfo, ScorerFailure
    from agentic_repro.harness.context import BudgetExceeded, ProblemContext, RunContext
    from agentic_repro.harness.env import EnvSession, StepResult
    from agentic_repro.harness.tools import Tool, ToolSpec
    from agentic_repro.harness.types import Completion, Message, Problem, Score, Solution
    from agentic_repro.harness.view import BenchmarkView, GoldHidden, ProblemView

#: public name -> the module that defines it
_HOME = {
    # a method: solve(problem, ctx) -> Solution, generating through ctx.generate / ctx.ask
    "Solution": "types", "ProblemView": "view", "ProblemContext": "context", "RunContext": "context",
    "Completion": "types", "Message": "types", "BenchmarkView": "view", "GoldHidden": "view",
    "BudgetExceeded": "context", "ToolSpec": "tools", "Tool": "tools", "EnvSession": "env", "StepResult": "env",
    # the answer helpers
    "has_final_answer": "answers", "FALLBACK_RULES": "answers",
    # a benchmark: load, render, score
    "Benchmark": "benchmark", "Problem": "types", "Score": "types", "ScorerFailure": "benchmark", "DataInfo": "benchmark",
}

__all__ = ["FALLBACK_RULES", "Benchmark", "BenchmarkView", "BudgetExceeded", "Completion", "DataInfo", "EnvSession",
           "GoldHidden", "Message", "Problem", "ProblemContext", "ProblemView", "RunContext", "Score", "ScorerFailure",
           "Solution", "StepResult", "Tool", "ToolSpec", "has_final_answer"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
