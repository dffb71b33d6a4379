"""Self-Reflection at every step (Renze & Guven, 2024, as AUQ uses it as a baseline: the model is asked to
"validate its action" at every step, unguided), on the shared loop.

Per step: ReAct's act call proposes an action; a ``validate`` call shows the same step (task, history,
observation, admissible actions) and the proposed action and asks whether it is correct and makes progress,
ending with "Verdict: valid|invalid"; an action judged invalid is re-chosen once (``revise``) with the
validation as guidance. ``revise: on_invalid`` (default) or ``always``. Calls per step: 2, or 3 when revised
(+1 with ``separate`` confidence elicitation).
"""
from __future__ import annotations

from typing import Any

from agentic_repro.agents.loop import AgentState, Decision, episode_solution, run_episode
from agentic_repro.baselines.react import policy_from
from agentic_repro.baselines.self_reflection import step_is_valid
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

VALIDATE = ("Proposed action for this step: {action}\n\n"
            "Validate the proposed action: is it admissible, correct and does it make progress toward the task? "
            "Explain briefly, then end with a final line \"Verdict: valid\" or \"Verdict: invalid\".")
REVISE = ("Your previously proposed action for this step was: {action}\n"
          "A validation of that action said:\n{validation}\n\n"
          "Taking the validation into account, choose the action for this step again.")


def _validation_messages(policy: Any, ctx: ProblemContext, state: AgentState, action: str) -> list[dict[str, str]]:
    msgs = policy.messages(ctx, state, elicit=False)
    user = msgs[-1]["content"]  # the step's context without the ask (AUQ template / ReAct transcript)
    user = user.rsplit("Now it's your turn", 1)[0] if policy.style == "auq" else user.rsplit("\n\nContinue with", 1)[0]
    user = user.rstrip()
    return msgs[:-1] + [{"role": "user", "content": user + "\n\n" + VALIDATE.format(action=action or "(none)")}]


async def agent_self_reflection(problem: ProblemView, ctx: ProblemContext, *, revise: str = "on_invalid",
                                window: int | None = None,
                                invalid_action: str = "send", **params: Any) -> Any:
    if revise not in ("on_invalid", "always"):
        raise ValueError("agent_self_reflection: revise must be on_invalid or always")
    policy = policy_from(params)

    async def decide(ctx: ProblemContext, state: AgentState) -> Decision:
        first = (await policy.sample(ctx, state, 1))[0]
        validation = (await ctx.generate(_validation_messages(policy, ctx, state, first.action or ""),
                                         stage="validate"))[0].text
        valid = step_is_valid(validation)
        log = {"proposed": first.action, "validation": validation, "valid": valid}
        d, calls = first, 2
        if revise == "always" or not valid:
            d = (await policy.sample(ctx, state, 1, stage="revise",
                                     extra=REVISE.format(action=first.action or "(none)", validation=validation)))[0]
            log["revised"] = d.action
            calls += 1
        d.calls = calls
        d.extra["reflections"] = [log]
        return await policy.add_confidence(ctx, state, d)

    async with ctx.env() as s:
        r = await run_episode(ctx, s, decide, window=window, invalid_action=invalid_action,
                              allow_thoughts=policy.allows_thoughts)
    return episode_solution([r], agent="agent_self_reflection", revise=revise, style=policy.style,
                            elicit=policy.elicit_mode, window=window)
