"""Small methods that exercise the core's roles, tools, environments and problem view (no paper)."""
from __future__ import annotations

from agentic_repro.harness.env import EnvironmentFailure, EpisodeOver
from agentic_repro.harness.types import Solution


async def env_walker(problem, ctx, *, action_override: str | None = None, override_on: str | None = None,
                     catch_failure: bool = False, step_after_done: bool = False) -> Solution:
    """Act in the environment with the backbone as the policy; always *claims* success."""
    task = ctx.benchmark.render(problem)
    trace: dict = {}
    try:
        async with ctx.env() as s:
            res = await s.reset(note="start")
            while not res.done:
                action = (await ctx.ask(f"{task}\nNow: {res.observation}\nActions: {s.actions}", stage="act")).strip()
                if action_override is not None and s.steps == 1 and override_on in (None, problem.id):
                    action = action_override
                res = await s.step(action, confidence=0.9)
                s.record(reflection=f"after {s.steps} steps: {res.observation}")
            trace["truncated"] = res.truncated
            if step_after_done:
                try:
                    await s.step("inc")
                except EpisodeOver as exc:
                    trace["episode_over"] = str(exc)
    except EnvironmentFailure as exc:
        if not catch_failure:
            raise
        trace["swallowed"] = str(exc)
    return Solution("I reached the goal: SUCCESS", confidence=1.0, trace=trace)


async def draft_and_check(problem, ctx, *, draft_tokens: int = 48) -> Solution:
    """Role ``designer`` drafts an answer, role ``critic`` checks it (the two-role test method)."""
    prompt = ctx.benchmark.prompt(problem, "{task} {answer_instruction}")
    draft = await ctx.ask(prompt, stage="draft", role="designer", max_tokens=draft_tokens)
    verdict = await ctx.ask(f"Is this answer correct? Reply yes or no.\n{draft}", stage="check", role="critic",
                            max_tokens=8)
    return Solution(draft, trace={"verdict": verdict})


async def uses_unknown_role(problem, ctx) -> Solution:
    await ctx.ask("hello", stage="x", role="nonexistent")
    return Solution("unreachable")


async def same_prompt_as_roles(problem, ctx, *, roles: list, adapters: list | None = None) -> Solution:
    """The same prompt asked once per role (and optional explicit adapter): what the cache shares."""
    texts = []
    for i, role in enumerate(roles):
        adapter = (adapters or [None] * len(roles))[i]
        texts.append(await ctx.ask(problem.fields["q"], stage=f"ask{i}", role=role, adapter=adapter))
    return Solution(texts[-1], trace={"texts": texts})


async def env_no_close(problem, ctx) -> Solution:
    """Opens a session with ``await ctx.env()`` and never closes it: the runner must."""
    s = await ctx.env()
    res = await s.reset()
    while not res.done:
        k = int(str(res.observation).split()[-1])
        res = await s.step("stop" if k >= int(problem.fields["hint"]) else "inc")
    return Solution("done")
