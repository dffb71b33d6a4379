"""IO, CoT and CoT-SC: the single-agent baselines of DenoiseFlow Table 1."""
from __future__ import annotations

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.prompting import task_messages
from agentic_repro.baselines.voting import choose_code, majority_vote
from agentic_repro.harness.view import ProblemView


async def io(problem: ProblemView, ctx: ProblemContext, *, template: str, system: str | None = None) -> Solution:
    """Direct input → output: one greedy call, no reasoning instruction."""
    messages = task_messages(ctx, template, system)
    out = (await ctx.generate(messages, stage="answer"))[0]
    return Solution(out.text, trace={"messages": messages, "finish_reason": out.finish_reason})


async def cot(problem: ProblemView, ctx: ProblemContext, *, template: str, system: str | None = None) -> Solution:
    """Chain-of-thought (Wei et al., 2022), zero-shot: reason step by step, then answer."""
    messages = task_messages(ctx, template, system)
    out = (await ctx.generate(messages, stage="reason"))[0]
    return Solution(out.text, trace={"messages": messages, "finish_reason": out.finish_reason})


async def cot_sc(problem: ProblemView, ctx: ProblemContext, *, template: str, k: int = 5, temperature: float = 0.7,
                 system: str | None = None, code_choice: str = "majority") -> Solution:
    """Self-consistency (Wang et al., 2022): k sampled chains, majority vote over extracted answers.

    Code: majority over programs (equal normalised ASTs vote together) by default, the paper's rule;
    ``code_choice: public_tests`` ranks by visible example tests passed first (see :mod:`agentic_repro.baselines.voting`).
    The confidence is the winning answer's vote share.
    """
    messages = task_messages(ctx, template, system)
    outs = await ctx.generate(messages, stage="sample", n=k, temperature=temperature)
    texts = [o.text for o in outs]
    vote = (await choose_code(ctx, texts, code_choice) if ctx.benchmark.domain == "code"
            else majority_vote(ctx, texts))
    return Solution(texts[vote.index], confidence=vote.share,
                    trace={"messages": messages, "samples": texts, "keys": [str(x)[:200] for x in vote.keys],
                           "counts": vote.counts, "chosen": vote.index, "rule": vote.rule})
