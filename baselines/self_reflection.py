"""Self-Reflection (Renze & Guven, 2024), and the every-step variant AUQ uses as a baseline.

``mode: answer`` (the paper): answer the task with a chain of thought; reflect on the answer
(find the errors, explain them, and write guidance for a retry); answer the task again with the
reflection in context. The paper reflects only on questions answered *incorrectly*, which needs the
gold answer; a method here never sees it, so it reflects on every answer (this is the unguided form
AUQ describes). ``reflection`` picks the paper's reflection type; the default "composite" asks for
all of the non-leaking types at once (explanation, keywords, instructions, advice); the paper's
"solution"/"unredacted" types rely on the known correct answer and are not offered.

``mode: every_step`` (AUQ, Zhang et al. 2025, §Baselines: "triggers reflection on every step ... by
simply asking the model to validate its action"): the solution is written one step per call; after
every step the model validates that step; a step judged invalid is rewritten once using the
validation as guidance. The run stops at the step that contains a final answer the benchmark can
extract, or after ``max_steps`` (then one call writes the final answer).
"""
from __future__ import annotations

import re

from agentic_repro.harness.answers import has_final_answer
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.common import fill, user
from agentic_repro.baselines.prompting import task_messages
from agentic_repro.harness.view import ProblemView

REFLECTIONS = {
    "retry": "",
    "keywords": "List keywords describing the kinds of errors that may be in the solution.",
    "advice": "Write general advice that would help you avoid these kinds of errors in the future.",
    "explanation": "Explain the errors in the solution and why they happened.",
    "instructions": "Write step-by-step instructions for solving this task correctly.",
    "composite": ("1. Explanation: explain any errors in the solution and why they happened.\n"
                  "2. Keywords: list keywords describing those kinds of errors.\n"
                  "3. Instructions: write step-by-step instructions for solving this task correctly.\n"
                  "4. Advice: write general advice to avoid these errors in the future."),
}
REFLECT_TEMPLATE = (
    "{task}\n\nYour previous solution:\n{solution}\n\n"
    "Reflect on your solution. It may contain mistakes; do not assume it is correct. {guidance}\n"
    "Do not give a final answer in this reflection."
)
REANSWER_TEMPLATE = (
    "{task}\n\nYour previous solution:\n{solution}\n\nYour reflection on it:\n{reflection}\n\n"
    "Using your reflection as guidance, solve the task again. Let's think step by step. {answer_instruction}"
)
STEP_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\n"
    "Write only the next step of the solution (one short step). If this step completes the solution, "
    "give the final answer in it. {answer_instruction}"
)
VALIDATE_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\nProposed next step:\n{step}\n\n"
    "Validate the proposed next step: is it correct and does it make progress? Explain briefly, then end with a "
    "final line \"Verdict: valid\" or \"Verdict: invalid\"."
)
REVISE_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\nProposed next step:\n{step}\n\nValidation of that step:\n{validation}\n\n"
    "Rewrite the next step so that it fixes the problems found (one short step). If it completes the solution, "
    "give the final answer in it. {answer_instruction}"
)
FINAL_TEMPLATE = "{task}\n\nSteps so far:\n{steps}\nFinish the solution and give the final answer. {answer_instruction}"
_VERDICT = re.compile(r"verdict\s*[:\-]?\s*\**\s*(valid|invalid)", re.IGNORECASE)


def step_is_valid(validation: str) -> bool:
    """The last explicit verdict; without one, a validation that says 'invalid'/'incorrect' rejects the step."""
    found = _VERDICT.findall(validation or "")
    if found:
        return found[-1].lower() == "valid"
    low = (validation or "").lower()
    return not any(w in low for w in ("invalid", "incorrect", "not correct", "wrong"))


def _steps(steps: list[str]) -> str:
    return "".join(f"Step {i}: {s.strip()}\n" for i, s in enumerate(steps, 1)) or "(none)\n"


async def self_reflection(problem: ProblemView, ctx: ProblemContext, *, template: str, mode: str = "answer",
                          reflection: str = "composite", max_steps: int = 10,
                          reflect_template: str = REFLECT_TEMPLATE, reanswer_template: str = REANSWER_TEMPLATE,
                          system: str | None = None) -> Solution:
    """``answer``: 3 calls (answer, reflect, reanswer). ``every_step``: per step 1 ``step`` + 1 ``validate``
    (+ 1 ``revise`` when the step is judged invalid); at most ``max_steps`` steps, then one ``finalize``."""
    if mode == "every_step":
        return await _every_step(ctx, max_steps=max_steps, system=system)
    if mode != "answer":
        raise ValueError("mode must be 'answer' or 'every_step'")
    if reflection not in REFLECTIONS:
        raise ValueError(f"reflection must be one of {sorted(REFLECTIONS)}")
    first = task_messages(ctx, template, system)
    answer = (await ctx.generate(first, stage="answer"))[0].text
    ref_msgs = user(fill(ctx, reflect_template, solution=answer, guidance=REFLECTIONS[reflection]), system)
    if reflection == "retry":  # the paper's "Retry" agent gets no reflection, only another attempt
        reflection_text = "(no reflection: retry)"
    else:
        reflection_text = (await ctx.generate(ref_msgs, stage="reflect"))[0].text
    again = user(fill(ctx, reanswer_template, solution=answer, reflection=reflection_text), system)
    final = (await ctx.generate(again, stage="reanswer"))[0].text
    return Solution(final, trace={"mode": "answer", "reflection_type": reflection, "exchange": [
        {"stage": "answer", "messages": first, "output": answer},
        {"stage": "reflect", "messages": None if reflection == "retry" else ref_msgs, "output": reflection_text},
        {"stage": "reanswer", "messages": again, "output": final}]})


async def _every_step(ctx: ProblemContext, *, max_steps: int, system: str | None) -> Solution:
    steps: list[str] = []
    log: list[dict] = []
    finished = False
    for i in range(max_steps):
        shown = _steps(steps)
        step = await ctx.ask(fill(ctx, STEP_TEMPLATE, steps=shown), stage="step", system=system)
        validation = await ctx.ask(fill(ctx, VALIDATE_TEMPLATE, steps=shown, step=step), stage="validate",
                                   system=system)
        valid = step_is_valid(validation)
        entry = {"step": i + 1, "proposed": step, "validation": validation, "valid": valid}
        if not valid:
            step = await ctx.ask(fill(ctx, REVISE_TEMPLATE, steps=shown, step=step, validation=validation),
                                 stage="revise", system=system)
            entry["revised"] = step
        log.append(entry)
        steps.append(step)
        if has_final_answer(ctx, step):
            finished = True
            break
    if not finished:
        final = await ctx.ask(fill(ctx, FINAL_TEMPLATE, steps=_steps(steps)), stage="finalize", system=system)
        steps.append(final)
    return Solution("\n".join(steps), trace={"mode": "every_step", "steps": log, "finished_by_step": finished,
                                             "n_steps": len(log)})
