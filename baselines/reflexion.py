"""Reflexion (Shinn et al., 2023): inter-episode verbal reflection memory over trials, on the shared loop.

Each problem is played for up to ``trials`` episodes (Reflexion's ``--num_trials 10`` for ALFWorld and
WebShop). After a failed trial the model writes a reflection ("a concise, new plan") from the failed
trajectory, with Reflexion's reflection few-shot examples and its earlier plans; the next trial's prompt
carries the last ``memory_size`` reflections (3 in Reflexion's code) before the task. A trial ends at the
environment's end, at the step cap, or (``stop_on_repeat``, Reflexion's ``check_is_exhausted``) when the agent
repeats its previous action. The environment scores the last episode (the default ``score_episodes``), i.e.
success within ``trials`` trials; the success signal Reflexion reflects on is the environment's (ALFWorld's
``won``, WebShop's reward 1.0), which the agent sees through the session.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.agents.loop import AgentState, EpisodeResult, episode_solution, run_episode
from agentic_repro.agents.prompts import reflexion_examples
from agentic_repro.baselines.react import policy_from
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

# Reflexion's reflection instructions, one per environment as its release has them (alfworld_runs/ and
# webshop_runs/generate_reflections.py). They share the first four sentences; the "For example, if you tried A
# and B but forgot C ..." sentence, "You will need this later ..." and "Give your plan after \"Plan\"" are
# ALFWorld's only, and WebShop's ends "There are two examples below." instead of "Here are two examples:".
_SHARED = (
    "You will be given the history of a past experience in which you were placed in an environment and given a "
    "task to complete. You were unsuccessful in completing the task. Do not summarize your environment, but "
    "rather think about the strategy and path you took to attempt to complete the task. Devise a concise, new "
    "plan of action that accounts for your mistake with reference to specific actions that you should have "
    "taken.")
ALFWORLD_ONLY = (
    "For example, if you tried A and B but forgot C, then devise a plan to achieve C with environment-specific "
    "actions.",
    "You will need this later when you are solving the same task.",
    "Give your plan after \"Plan\".",
)
REFLECT_INSTRUCTIONS = {
    "alfworld": _SHARED + " " + " ".join(ALFWORLD_ONLY) + " Here are two examples:",
    "webshop": _SHARED + " There are two examples below.",
}
REFLECT_INSTRUCTION = REFLECT_INSTRUCTIONS["alfworld"]   # any other environment: ALFWorld's wording


def scenario(first_observation: str, r: EpisodeResult, env: str) -> str:
    """The failed trial as Reflexion's log shows it (the task and the ``> action`` / observation lines)."""
    if env == "webshop":
        body = f"{first_observation}\n" + "".join(f"\nAction: {t.action}\nObservation: {t.result}\n" for t in r.turns)
        return body.split("Instruction:", 1)[-1].strip()
    return first_observation + "\n" + "".join(f"> {t.action}\n{t.result}\n" for t in r.turns)


def reflection_prompt(env: str, scen: str, memory: list[str]) -> str:
    examples = reflexion_examples(env) if env in ("alfworld", "webshop") else ""
    instruction = REFLECT_INSTRUCTIONS.get(env, REFLECT_INSTRUCTION)
    scen = f"Instruction: {scen}" if env == "webshop" else scen
    q = f"{instruction}\n\n{examples}\n\n{scen}"
    if memory:
        q += "\n\nPlans from past attempts:\n" + "".join(f"Trial #{i}: {m}\n" for i, m in enumerate(memory))
    return q + "\n\nNew plan:"


def _repeats(state: AgentState) -> bool:
    return len(state.turns) >= 2 and state.turns[-1].action.strip() == state.turns[-2].action.strip()


async def reflexion(problem: ProblemView, ctx: ProblemContext, *, trials: int = 10, memory_size: int = 3,
                    stop_on_repeat: bool = True,
                    window: int | None = None, invalid_action: str = "send", reflect_sampling: dict | None = None,
                    **params: Any) -> Any:
    if int(trials) < 1 or int(memory_size) < 0:
        raise ValueError("reflexion: trials >= 1 and memory_size >= 0")
    policy = policy_from(params)
    env = policy.env(ctx)
    memory: list[str] = []
    results: list[EpisodeResult] = []
    reflections: list[dict[str, Any]] = []
    async with ctx.env() as s:
        for trial in range(int(trials)):
            shown = memory[-int(memory_size):] if memory_size else []
            r = await run_episode(ctx, s, policy.decide, window=window, invalid_action=invalid_action,
                                  allow_thoughts=policy.allows_thoughts, memory=shown, episode=trial,
                                  stop_when=_repeats if stop_on_repeat else None)
            results.append(r)
            if r.success or trial == int(trials) - 1:
                break
            scen = scenario(r.turns[0].observation if r.turns else "", r, env)
            text = await ctx.ask(reflection_prompt(env, scen, shown), stage="reflect", **(reflect_sampling or {}))
            memory.append(text.strip())
            reflections.append({"after_trial": trial, "reflection": text.strip()})
            s.record(reflection=text.strip(), trial=trial)
    return episode_solution(results, agent="reflexion", trials_run=len(results), reflections=reflections,
                            style=policy.style, elicit=policy.elicit_mode, window=window)
