"""Tree-of-Thoughts (Yao et al., 2023), BFS with a value evaluator, in its math (Game of 24) setting.

Each tree level: every kept partial solution proposes its possible next thoughts in one call (the
"propose" generator, one thought per line); every new partial solution is valued by sampling the
evaluator ``n_evaluate`` times ("sure" / "likely" / "impossible", mapped to 20 / 1 / 0.001 and
summed; a duplicate candidate of the same level gets 0); the ``breadth`` best are kept (greedy
selection). The value prompt is per domain (math: can these steps still reach a correct answer;
code: does this plan lead to a program that meets the task and its example tests; QA: is each step
supported by the context and on the way to the answer), as the paper writes one value prompt per task.
Final pick (``final: best_state``, the paper's Algorithm 1 BFS): after ``depth - 1`` thought levels
the answer is generated once, from the best-valued state: G(p, argmax_s V(s), 1).
``final: value_answers`` (the Game-of-24 script's last step): every kept state writes an answer, each
answer is valued, the best is returned.

Paper/code defaults for Game of 24 (``scripts/game24/bfs.sh`` and the logged run name
``gpt-4_0.7_propose1_value3_greedy5``): propose generator, value evaluator with 3 samples, greedy
selection with breadth b = 5, temperature 0.7, depth 4 (three intermediate thoughts + the answer step).
The number of proposals per node is not fixed in the paper (the model lists as many as it sees);
``max_proposals`` caps it (8 by default, the length of the paper's one-shot proposal example).
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution

from agentic_repro.baselines.common import fill, strip_bullet, user
from agentic_repro.harness.view import ProblemView

PROPOSE_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\n"
    "Propose up to {k} different possible next steps toward solving the task. Each must be one short, concrete "
    "reasoning step that follows from the steps so far. Write one step per line, nothing else."
)
VALUE_TEMPLATE = (  # math (and the fallback)
    "{task}\n\nPartial solution:\n{steps}\n"
    "Evaluate whether this partial solution is correct so far and can lead to a correct final answer. "
    "Check each calculation and whether the remaining work can still reach the answer. "
    "Briefly check it, then end with one word on the last line: sure, likely or impossible."
)
VALUE_TEMPLATES = {
    "math": VALUE_TEMPLATE,
    "code": (
        "{task}\n\nPlan for the program so far:\n{steps}\n"
        "Evaluate whether this plan leads to a correct Python function for the task: does it handle what the "
        "task asks, the example test shown in the task, and the edge cases? "
        "Briefly check it, then end with one word on the last line: sure, likely or impossible."
    ),
    "qa": (
        "{task}\n\nReasoning steps so far:\n{steps}\n"
        "Evaluate whether each step is supported by the context and whether the steps lead toward the answer to "
        "the question (the right entities, the right hops). "
        "Briefly check it, then end with one word on the last line: sure, likely or impossible."
    ),
}
ANSWER_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\n"
    "Using these steps, complete the solution and give the final answer. {answer_instruction}"
)
VALUE_LAST_TEMPLATE = (
    "{task}\n\nProposed solution:\n{steps}\n"
    "Judge whether this solution and its final answer are correct. Briefly check it, then end with one word on "
    "the last line: sure, likely or impossible."
)
VALUE_MAP = {"sure": 20.0, "likely": 1.0, "impossible": 0.001}
_WORD = re.compile(r"\b(sure|likely|impossible)\b", re.IGNORECASE)


def value_of(outputs: list[str], value_map: dict[str, float] = VALUE_MAP) -> float:
    """Sum over evaluator samples of the value of the judgement on the last line (as in the paper)."""
    total = 0.0
    for text in outputs:
        lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
        found = _WORD.findall(lines[-1]) if lines else []
        if not found:
            found = _WORD.findall(text or "")
        if found:
            total += value_map[found[-1].lower()]
    return total


def parse_proposals(text: str, k: int) -> list[str]:
    out: list[str] = []
    for line in (text or "").splitlines():
        step = strip_bullet(line)
        if step and step not in out:
            out.append(step)
    return out[:k]


async def tot(problem: ProblemView, ctx: ProblemContext, *, breadth: int = 5, depth: int = 4, n_evaluate: int = 3,
              max_proposals: int = 8, temperature: float = 0.7, value_map: dict[str, float] | None = None,
              propose_template: str = PROPOSE_TEMPLATE, value_template: str | None = None,
              answer_template: str = ANSWER_TEMPLATE, value_last_template: str = VALUE_LAST_TEMPLATE,
              final: str = "best_state", system: str | None = None) -> Solution:
    """Stages: ``propose`` (one call per kept node and level), ``value`` (n_evaluate samples per new
    node), ``answer`` (``best_state``: one call from the best state; ``value_answers``: one per kept
    node, each valued). ``value_template`` None: the benchmark domain's value prompt."""
    if depth < 1 or breadth < 1:
        raise ValueError("depth and breadth must be >= 1")
    if final not in ("best_state", "value_answers"):
        raise ValueError("final must be 'best_state' or 'value_answers'")
    vmap = value_map or VALUE_MAP
    if value_template is None:
        value_template = VALUE_TEMPLATES.get(ctx.benchmark.domain, VALUE_TEMPLATE)
    ys: list[str] = [""]
    levels: list[dict[str, Any]] = []

    async def evaluate(candidates: list[str], template: str) -> list[float]:
        seen: set[str] = set()
        jobs: list[Any] = []
        for y in candidates:
            if y in seen:
                jobs.append(None)  # duplicate of this level: value 0 (paper code)
                continue
            seen.add(y)
            jobs.append(ctx.generate(user(fill(ctx, template, steps=y or "(none)\n"), system), stage="value",
                                     n=n_evaluate, temperature=temperature))
        done = await asyncio.gather(*(j for j in jobs if j is not None))
        it = iter(done)
        return [0.0 if j is None else value_of([c.text for c in next(it)], vmap) for j in jobs]

    best_value = 0.0
    for level in range(depth):
        last = level == depth - 1
        if last and final == "best_state":
            # Algorithm 1: the answer is generated once, from the best state of the last thought level
            msgs = user(fill(ctx, answer_template, steps=ys[0] or "(none)\n"), system)
            out = (await ctx.generate(msgs, stage="answer", temperature=temperature))[0].text
            levels.append({"level": level + 1, "kind": "answer-from-best-state", "state": ys[0], "output": out})
            answer = ys[0] + out
            break
        if last:
            msgs = [user(fill(ctx, answer_template, steps=y or "(none)\n"), system) for y in ys]
            outs = await asyncio.gather(*(ctx.generate(m, stage="answer", temperature=temperature) for m in msgs))
            new_ys = [y + o[0].text for y, o in zip(ys, outs)]
            values = await evaluate(new_ys, value_last_template)
        else:
            msgs = [user(fill(ctx, propose_template, steps=y or "(none)\n", k=max_proposals), system) for y in ys]
            outs = await asyncio.gather(*(ctx.generate(m, stage="propose", temperature=temperature) for m in msgs))
            new_ys = [y + step + "\n" for y, o in zip(ys, outs) for step in parse_proposals(o[0].text, max_proposals)]
            if not new_ys:  # nothing proposed: keep the current partial solutions
                new_ys = list(ys)
            values = await evaluate(new_ys, value_template)
        order = sorted(range(len(new_ys)), key=lambda i: (-values[i], i))[:breadth]
        levels.append({"level": level + 1, "kind": "answer" if last else "propose", "candidates": new_ys,
                       "values": values, "kept": order})
        ys = [new_ys[i] for i in order]
        best_value = values[order[0]]
        answer = ys[0]
    confidence = min(1.0, best_value / (vmap["sure"] * n_evaluate)) if n_evaluate > 0 else None
    return Solution(answer, confidence=confidence, trace={"levels": levels, "best_value": best_value,
                                                          "final": final, "value_prompt_domain": ctx.benchmark.domain})
