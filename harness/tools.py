"""Tools a benchmark offers to methods, and the record of every call made to them.

A benchmark declares its tools per problem (:meth:`agentic_repro.harness.benchmark.Benchmark.tools`): running the
tests its prompt shows, a search index, a calculator. The function runs on the scorer side with the
real problem; a method sees only the tool's name, description and parameters (:class:`ToolSpec`)
and calls it with ``await ctx.call_tool(name, **args)``. Every call, successful or not, becomes a
:class:`ToolCall` in the problem's prediction record (``tool_calls``), so a reader can audit what a
method learnt from its tools.
"""
from __future__ import annotations

import inspect
import json
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from typing import Any

SUMMARY_CHARS = 300  # how much of a tool's arguments / result a record keeps


class UnknownTool(LookupError):
    """A method called a tool the benchmark does not offer for this problem."""


@dataclass(frozen=True)
class ToolSpec:
    """What a method may know about a tool."""

    name: str
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)  # argument name -> what it is


@dataclass(frozen=True)
class Tool:
    """A tool as the benchmark declares it: ``fn(**args)`` (sync or async) runs on the scorer side."""

    name: str
    fn: Callable[..., Any]
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, dict(self.parameters))


@dataclass
class ToolCall:
    """One call to a tool, as recorded in ``predictions.jsonl``."""

    name: str
    args: str          # a bounded summary of the arguments
    result: str | None  # a bounded summary of the result (None when the call failed)
    latency_s: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """A short, deterministic text form of a tool's arguments or result."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def invoke(tool: Tool, args: dict[str, Any], record: Callable[[ToolCall], None]) -> Any:
    """Call ``tool`` with ``args``; record the call whatever happens, re-raise a failure."""
    t0 = time.perf_counter()
    try:
        out = tool.fn(**args)
        if inspect.isawaitable(out):
            out = await out
    except Exception as exc:
        record(ToolCall(tool.name, summarize(args), None, round(time.perf_counter() - t0, 4),
                        f"{type(exc).__name__}: {exc}"))
        raise
    record(ToolCall(tool.name, summarize(args), summarize(out), round(time.perf_counter() - t0, 4)))
    return out

