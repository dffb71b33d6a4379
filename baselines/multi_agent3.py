"""Multi-Agent (3 models): DynaGraph Table 1's static baseline, three separately loaded model instances collaborating
in a fixed pipeline with no dynamic memory optimisation (its memory is ~3x one model).

Agent 1 (role ``expert1``) solves the task step by step; agent 2 (``expert2``) checks that solution and lists its
errors; agent 3 (``expert3``) writes the final answer from both. The topology is static (no patching, no
reconstruction). Three *instances* need three distinct backbone configs for the roles
(``scripts/experiments/dynagraph_table1.yaml`` gives the overrides); the trace records how many distinct backbones
actually answered, so a run on one shared instance is labelled as such.
"""
from __future__ import annotations

from typing import Any

from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

SOLVE = "{task}\n\nSolve the task step by step. {answer_instruction}"
CHECK = ("{task}\n\nA colleague's solution:\n{solution}\n\nCheck this solution step by step. List every error you "
         "find (facts, logic, arithmetic), or say that it is correct.")
FINAL = ("{task}\n\nSolution:\n{solution}\n\nReview:\n{review}\n\nTaking the review into account, write the final "
         "answer. {answer_instruction}")
ROLES = ("expert1", "expert2", "expert3")


async def multi_agent3(problem: ProblemView, ctx: ProblemContext, *, temperature: float = 0.7, top_p: float = 0.9,
                       max_tokens: int | None = None) -> Solution:
    task, ai = ctx.benchmark.render(ctx.problem), ctx.benchmark.answer_instruction
    kw: dict[str, Any] = {"temperature": temperature, "top_p": top_p, **({"max_tokens": max_tokens} if max_tokens else {})}
    sol = await ctx.ask(SOLVE.format(task=task, answer_instruction=ai), stage="agent1_solve", role=ROLES[0], **kw)
    rev = await ctx.ask(CHECK.format(task=task, solution=sol), stage="agent2_check", role=ROLES[1], **kw)
    fin = await ctx.ask(FINAL.format(task=task, solution=sol, review=rev, answer_instruction=ai), stage="agent3_final",
                        role=ROLES[2], **kw)
    llms = getattr(ctx.run, "llms", {})
    instances = len({id(llms[r]) for r in ROLES if r in llms})
    return Solution(fin, trace={"solution": sol, "review": rev, "final": fin, "instances": instances,
                                "label": "three separate instances" if instances == 3 else
                                f"{instances} shared instance(s): not the paper's 3 separate models"})
