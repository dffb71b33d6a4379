"""The designer π_θ: one stage subgraph G_t per call, validated, repaired once, re-asked (bounded).

Every attempt (its messages, raw reply, status and error) goes into the trace. A re-ask continues the
conversation: the designer's invalid reply, then a user turn with the error (``prompts.REASK``).
"""
from __future__ import annotations

from typing import Any

from agentic_repro.dyflow import prompts as P
from agentic_repro.dyflow.config import Options
from agentic_repro.dyflow.operators import Calls
from agentic_repro.dyflow.schema import Attempt, StageGraph
from agentic_repro.dyflow.validate import StageError, StageRules, check_stage, read_stage
from agentic_repro.harness.context import ProblemContext


async def design_stage(ctx: ProblemContext, prompt: str, rules: StageRules, opts: Options, calls: Calls,
                       adapter: str | None = None) -> tuple[StageGraph | None, list[Attempt]]:
    """(the validated stage or None when every attempt failed, the attempts)."""
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    attempts: list[Attempt] = []
    sampling: dict[str, Any] = {"temperature": opts.designer_temperature}
    if opts.designer_max_tokens:
        sampling["max_tokens"] = opts.designer_max_tokens
    for k in range(1 + opts.max_reasks):
        out = await ctx.generate(messages, stage="design", role="designer", adapter=adapter,
                                 sample_offset=calls.offset("designer", messages), **sampling)
        raw = out[0].text
        kind = "first" if k == 0 else "reask"
        try:
            stage, status, strict_error = read_stage(raw, repair=opts.repair)
        except StageError as exc:
            attempts.append(Attempt(kind=kind, messages=list(messages), raw=raw, status="invalid", error=str(exc),
                                    repair_error=getattr(exc, "repair_error", None),
                                    finish_reason=out[0].finish_reason))
            repair_error = getattr(exc, "repair_error", None)
            error = str(exc) + (f" (after json repair: {repair_error})" if repair_error else "")
        else:
            fixes: list[str] = []
            problems = check_stage(stage, rules, fixes)
            if not problems:
                attempts.append(Attempt(kind=kind, messages=list(messages), raw=raw, status=status,
                                        error=strict_error, finish_reason=out[0].finish_reason, fixes=fixes))
                return stage, attempts
            error = "; ".join(problems)
            attempts.append(Attempt(kind=kind, messages=list(messages), raw=raw, status="invalid", error=error,
                                    read_as=status, finish_reason=out[0].finish_reason))
        messages = [*messages, {"role": "assistant", "content": raw},
                    {"role": "user", "content": P.fill(P.REASK, error=error)}]
    return None, attempts
