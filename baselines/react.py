"""ReAct (Yao et al., 2023) as an agent on the shared loop (agents/loop.py): one model call per step.

The act prompt is AUQ's recovered ReAct prompt (``style: auq``, admissible actions shown, ReAct's few-shot
trajectories first) or ReAct's own transcript (``style: react``); see agents/README.md for every option.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.agents.loop import episode_solution, run_episode
from agentic_repro.agents.policy import ReactPolicy
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView


def policy_from(params: dict[str, Any]) -> ReactPolicy:
    return ReactPolicy(style=params.get("style", "auq"), few_shot=int(params.get("few_shot", 2)),
                       elicit_confidence=params.get("elicit_confidence", "none"),
                       memory_confidence=bool(params.get("memory_confidence", False)),
                       sampling=dict(params.get("sampling") or {}))


async def react(problem: ProblemView, ctx: ProblemContext, *, window: int | None = None, invalid_action: str = "send",
                **params: Any) -> Any:
    policy = policy_from(params)
    async with ctx.env() as s:
        r = await run_episode(ctx, s, policy.decide, window=window, invalid_action=invalid_action,
                              allow_thoughts=policy.allows_thoughts)
    return episode_solution([r], agent="react", style=policy.style, elicit=policy.elicit_mode, window=window)
