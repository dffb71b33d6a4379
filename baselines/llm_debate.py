"""Multi-agent debate (Du et al., 2023).

Round 1: every agent answers independently. Round r > 1: every agent reads the other agents'
answers of round r-1 (appended to its own conversation) and gives an updated answer. The final
answer is the majority over the last round's answers (for code: over programs; ``code_choice:
public_tests`` ranks by the visible example tests first, a named option). Defaults from the authors' GSM8K script
(``gsm/gen_gsm.py``: ``agents = 3``, ``rounds = 2``, where round 1 is the independent answer;
no temperature is set there, i.e. the API default 1.0).

Agents share the prompt, so each agent uses its own ``sample_offset`` (its index): their samples
differ and every call stays reproducible from the cache.
"""
from __future__ import annotations

import asyncio

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Message, Solution

from agentic_repro.baselines.common import choose, fill, quote_solutions, vote_trace
from agentic_repro.baselines.prompting import task_messages
from agentic_repro.harness.view import ProblemView

DEBATE_TEMPLATE = (
    "These are the solutions to the problem from other agents:{solutions}\n\n"
    "Using the solutions from other agents as additional information, can you provide your answer to the "
    "problem? Examine your own solution and the other agents' solutions step by step.\n"
    "The original problem is:\n{task}\n\n{answer_instruction}"
)


async def llm_debate(problem: ProblemView, ctx: ProblemContext, *, template: str,
                     debate_template: str = DEBATE_TEMPLATE, agents: int = 3, rounds: int = 2,
                     temperature: float = 1.0, system: str | None = None, code_choice: str = "majority") -> Solution:
    """``agents`` x ``rounds`` calls, stages ``debate_round_1`` .. ``debate_round_<rounds>``."""
    if agents < 1 or rounds < 1:
        raise ValueError("agents and rounds must be >= 1")
    contexts: list[list[Message]] = [task_messages(ctx, template, system) for _ in range(agents)]
    answers: list[list[str]] = []  # answers[r][i]
    for r in range(rounds):
        if r > 0:
            for i, conv in enumerate(contexts):
                others = [answers[r - 1][j] for j in range(agents) if j != i]
                shown = quote_solutions(others, "One agent solution")
                conv.append({"role": "user", "content": fill(ctx, debate_template, solutions=shown)})
        done = await asyncio.gather(*(ctx.generate(conv, stage=f"debate_round_{r + 1}", sample_offset=i,
                                                   temperature=temperature) for i, conv in enumerate(contexts)))
        outs = [d[0].text for d in done]
        for conv, text in zip(contexts, outs):
            conv.append({"role": "assistant", "content": text})
        answers.append(outs)
    vote = await choose(ctx, answers[-1], code_choice)
    return Solution(answers[-1][vote.index], confidence=vote.share,
                    trace={"answers_by_round": answers, "conversations": contexts, "vote": vote_trace(vote)})
