"""Tree-of-Thoughts (Yao et al., 2023), BFS with a value evaluator, in its math (Game of 24) setting.

Each tree level: every kept partial solution proposes its possible next thoughts in one call (the
"propose" generator, one thought per line); every new partial solution is valued by sampling the
evaluator ``n_evaluate`` times ("sure" / "likely" / "impossible", mapped to 20 / 1 / 0.001 and
summed; a duplicate candidate of the same level gets 0); the ``breadth`` best are kept (greedy
selection). The last level writes the final answer from each kept partial solution and values it
the same way; the best-valued answer is returned.

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

from harness.context import ProblemContext
from harness.types import Problem, Solution

from baselines.common import fill, strip_bullet, user

PROPOSE_TEMPLATE = (
    "{task}\n\nSteps so far:\n{steps}\n"
    "Propose up to {k} different possible next steps toward solving the task. Each must be one short, concrete "
    "reasoning step that follows from the steps so far. Write one step per line, nothing else."
)
VALUE_TEMPLATE = (
    "{task}\n\nPartial solution:\n{steps}\n"
    "Evaluate whether this partial solution is correct so far and can lead to a correct final answer. "
    "Briefly check it, then end with one word on the last line: sure, likely or impossible."
)
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


async def tot(problem: Problem, ctx: ProblemContext, *, breadth: int = 5, depth: int = 4, n_evaluate: int = 3,
              max_proposals: int = 8, temperature: float = 0.7, value_map: dict[str, float] | None = None,
              propose_template: str = PROPOSE_TEMPLATE, value_template: str = VALUE_TEMPLATE,
              answer_template: str = ANSWER_TEMPLATE, value_last_template: str = VALUE_LAST_TEMPLATE,
              system: str | None = None) -> Solution:
    """Stages: ``propose`` (one call per kept node and level), ``value`` (n_evaluate samples per new
    node), ``answer`` (one per kept node at the last level)."""
    if depth < 1 or breadth < 1:
        raise ValueError("depth and breadth must be >= 1")
    vmap = value_map or VALUE_MAP
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

    for level in range(depth):
        last = level == depth - 1
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
    return Solution(answer, confidence=confidence, trace={"levels": levels, "best_value": best_value})
