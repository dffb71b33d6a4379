"""CoT-SC over actions (Wang et al., 2022, as AUQ's ensemble baseline): at each step ``n`` ReAct replies are
sampled at ``temperature``; their actions are normalised (the environment profile's admissible form, so e.g.
ALFWorld's "put X in/on Y" and "move X to Y" agree) and the majority action is taken (ties: the first seen;
unparsable or inadmissible samples do not vote unless no sample is valid). The vote share is CoT-SC's native
confidence; with ``elicit_confidence: inline`` the confidence is the mean elicited confidence of the samples
that voted for the winner (None when none of them gave a well-formed one).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from agentic_repro.agents.loop import AgentState, Decision, episode_solution, run_episode
from agentic_repro.agents.profiles import normalise, profile_for
from agentic_repro.baselines.react import policy_from
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView


def vote(samples: list[Decision], actions: list[str] | None, profile: Any) -> tuple[int, dict[str, int], list]:
    """(index of the chosen sample, votes per normalised action, each sample's key or None)."""
    keys = []
    for d in samples:
        offered = profile.admissible(d.action, actions)
        keys.append(normalise(offered) if offered is not None else None)
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return 0, {}, keys
    best = max(counts.values())
    winner = next(k for k in keys if k is not None and counts[k] == best)
    return keys.index(winner), dict(counts), keys


async def agent_cot_sc(problem: ProblemView, ctx: ProblemContext, *, n: int = 3, temperature: float = 0.7,
                       window: int | None = None,
                       invalid_action: str = "send", **params: Any) -> Any:
    if int(n) < 1:
        raise ValueError("agent_cot_sc: n >= 1")
    policy = policy_from(params)
    profile = profile_for(getattr(ctx.benchmark, "name", None))

    async def decide(ctx: ProblemContext, state: AgentState) -> Decision:
        samples = await policy.sample(ctx, state, int(n), stage="sample", temperature=float(temperature))
        i, counts, keys = vote(samples, state.actions, profile)
        d = samples[i]
        share = (counts.get(keys[i], 0) / len(samples)) if keys[i] is not None else 0.0
        agreeing = [s.confidence for s, k in zip(samples, keys) if k is not None and k == keys[i]
                    and s.confidence is not None]
        extra = {**d.extra, "samples": [s.action for s in samples], "votes": counts, "vote_share": share,
                 "elicited": [s.confidence for s in samples]}
        if policy.inline:
            conf = sum(agreeing) / len(agreeing) if agreeing else None
        else:
            conf = share
        out = Decision(d.action, d.raw, conf, d.explanation, calls=len(samples), extra=extra)
        if policy.elicit_mode == "separate":
            out = await policy.add_confidence(ctx, state, out)
        return out

    async with ctx.env() as s:
        r = await run_episode(ctx, s, decide, window=window, invalid_action=invalid_action,
                              allow_thoughts=policy.allows_thoughts)
    return episode_solution([r], agent="agent_cot_sc", n=int(n), temperature=float(temperature),
                            style=policy.style, elicit=policy.elicit_mode, window=window)
