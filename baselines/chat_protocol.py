"""A model maker's own chat evaluation prompt (reference scores): system line, user template, assistant prefill.

Model cards report code scores with a prompt of their own (Qwen2.5-Coder's EvalPlus run: a system line,
"Can you complete the following Python function?", and the assistant turn opened with a code fence that the
model continues). Reproducing such a number needs that exact prompt, so it is a method of its own, never a
change to IO: the prefill is sent as a final assistant message, which llama-server continues (its
``--prefill-assistant`` default) and returns *with* the prefill in front (``prefill_in_reply: true``); the
method removes it, so the Solution is the continuation alone, as Qwen's vLLM run sees it. A reply that
does not start with the prefill means the server did not continue it: an error, never scored.
``stop`` and ``max_tokens`` are the protocol's, per call.
"""
from __future__ import annotations

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.prompting import task_messages
from agentic_repro.harness.view import ProblemView


async def chat_protocol(problem: ProblemView, ctx: ProblemContext, *, template: str, system: str | None = None,
                        prefill: str | None = None, stop: list[str] | None = None,
                        max_tokens: int | None = None, prefill_in_reply: bool = True) -> Solution:
    """One greedy call; the Solution is the continuation of ``prefill`` (the prefill itself is not in it)."""
    messages = task_messages(ctx, template, system)
    if prefill:
        messages.append({"role": "assistant", "content": prefill})
    out = (await ctx.generate(messages, stage="answer", stop=list(stop) if stop else None,
                              max_tokens=max_tokens))[0]
    text = out.text
    if prefill and prefill_in_reply:
        if not text.startswith(prefill):
            raise PrefillNotContinued(f"the reply does not start with the prefill {prefill!r} (it starts "
                                      f"{text[:40]!r}): the server did not continue the assistant turn")
        text = text[len(prefill):]
    return Solution(text, trace={"messages": messages, "finish_reason": out.finish_reason, "reply": out.text})


class PrefillNotContinued(RuntimeError):
    """The server answered a new turn instead of continuing the prefilled one: the protocol was not run."""
