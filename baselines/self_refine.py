"""Self-Refine (Madaan et al., 2023): generate, give yourself feedback, refine; repeat.

Algorithm 1 of the paper: y0 = M(p_gen || x); for t = 0, 1, ...: fb_t = M(p_fb || x || y_t);
stop if fb_t says the output needs no change, else y_{t+1} = M(p_refine || x || y0 || fb0 || ... || y_t || fb_t)
(the refiner sees the whole history). Iteration cap and feedback temperature follow the authors' GSM8K
runner (``src/gsm/run.py``: ``max_attempts=4``, feedback sampled at T=0.7, initial generation at T=0).
The stop check is the feedback's *verdict*: its final non-empty line must state "it is correct"
(``stop_check: verdict_line``), so feedback such as "... it is correct. Step 2: ... is wrong" keeps
refining; ``stop_check: substring`` is the phrase anywhere in the feedback.

For code the feedback prompt also shows the result of the benchmark's public tests on the current
program: only the tests the task text shows (the benchmark's ``run_public_tests``), never scored ones.
"""
from __future__ import annotations

import re

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.common import fill, public_test_report, user
from agentic_repro.baselines.prompting import task_messages
from agentic_repro.harness.view import ProblemView

FEEDBACK_TEMPLATE = (
    "{task}\n\nHere is a proposed solution:\n\n{solution}\n{tests}\n"
    "Review this solution step by step and point out every error (misreading of the task, wrong reasoning, "
    "wrong calculation, wrong format, failing test). Be specific and say how to fix each error. "
    "End with a final line giving your verdict: \"it is correct\" if there is no error at all, otherwise "
    "\"it is not correct\"."
)
REFINE_TEMPLATE = (
    "{task}\n\nPrevious attempts and the feedback on each:\n{history}\n\n"
    "Write an improved solution that fixes every problem raised in the feedback. {answer_instruction}"
)


def feedback_says_correct(feedback: str, stop_phrase: str = "it is correct", check: str = "verdict_line") -> bool:
    """Whether the feedback's verdict says the solution needs no change.

    ``verdict_line``: the last non-empty line contains the phrase and no negation of it; ``substring``:
    the phrase anywhere (a review that says "step 1 ... it is correct" and then finds an error would stop).
    """
    phrase = stop_phrase.lower()
    text = (feedback or "").lower()
    if check == "substring":
        return phrase in text
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    # the verdict is the last sentence of the last line
    last = [x for x in re.split(r"(?<=[.!?])\s+", lines[-1]) if x.strip()][-1]
    return phrase in last and not re.search(r"\b(not|isn't|incorrect|wrong)\b", last.replace(phrase, ""))


def _history(attempts: list[dict[str, str]]) -> str:
    return "".join(f"\n\n### Attempt {i}\n{a['solution']}\n\n### Feedback on attempt {i}\n{a['feedback']}"
                   for i, a in enumerate(attempts, 1))


async def self_refine(problem: ProblemView, ctx: ProblemContext, *, template: str,
                      feedback_template: str = FEEDBACK_TEMPLATE, refine_template: str = REFINE_TEMPLATE,
                      max_iterations: int = 4, feedback_temperature: float = 0.7,
                      stop_phrase: str = "it is correct", stop_check: str = "verdict_line", history: str = "full",
                      public_tests: bool = True, system: str | None = None) -> Solution:
    """``max_iterations`` feedback rounds at most; each round that does not stop costs one refinement.

    Calls: 1 ``generate`` + k ``feedback`` + (k or k-1) ``refine``, k <= max_iterations.
    ``history``: "full" (the paper: the refiner sees every earlier attempt and feedback) or "last".
    """
    if history not in ("full", "last"):
        raise ValueError("history must be 'full' or 'last'")
    if stop_check not in ("verdict_line", "substring"):
        raise ValueError("stop_check must be 'verdict_line' or 'substring'")
    first = task_messages(ctx, template, system)
    solution = (await ctx.generate(first, stage="generate"))[0].text
    attempts: list[dict[str, str]] = []
    exchange: list[dict] = [{"stage": "generate", "messages": first, "output": solution}]
    stop = "max_iterations"
    for it in range(max_iterations):
        report, tests = (await public_test_report(ctx, solution)) if public_tests else (None, None)
        fb_prompt = fill(ctx, feedback_template, solution=solution,
                         tests=f"\nResult of running the public tests:\n{report}\n" if report else "")
        fb_messages = user(fb_prompt, system)
        feedback = (await ctx.generate(fb_messages, stage="feedback", temperature=feedback_temperature))[0].text
        attempts.append({"solution": solution, "feedback": feedback})
        exchange.append({"stage": "feedback", "iteration": it, "messages": fb_messages, "output": feedback,
                         "public_tests": tests})
        if feedback_says_correct(feedback, stop_phrase, stop_check):
            stop = "feedback-says-correct"
            break
        shown = attempts if history == "full" else attempts[-1:]
        ref_messages = user(fill(ctx, refine_template, history=_history(shown)), system)
        solution = (await ctx.generate(ref_messages, stage="refine"))[0].text
        exchange.append({"stage": "refine", "iteration": it, "messages": ref_messages, "output": solution})
    return Solution(solution, trace={"stop": stop, "iterations": len(attempts), "exchange": exchange})
