"""Building a method's messages from a benchmark's task and answer format."""
from __future__ import annotations

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Message


def task_messages(ctx: ProblemContext, template: str, system: str | None = None) -> list[Message]:
    """``template`` may use ``{task}`` and ``{answer_instruction}`` (from the benchmark config)."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": ctx.benchmark.prompt(ctx.problem, template)})
    return messages
