"""JudgeFlow's logic blocks: a workflow as an ordered list of configured blocks, interpreted here.

JudgeFlow (Ma et al., 2026, arXiv 2601.07477) composes operators into three block types: ``seq`` (operators
in order, each consuming its predecessor's output), ``for`` (the operators repeated until a stopping condition
or a maximum number of iterations) and ``cond`` (a condition operator first, then its success or failure
branch). A workflow is the blocks in order; block i maps (question, a'_{i-1}) to a'_i.

Here the optimiser writes block *configurations* (JSON data validated by :func:`validate_blocks`), not Python,
so nothing generated is executed: the interpreter below is trusted code calling the operators of
:mod:`agentic_repro.baselines.autoflow.operators` through the problem context (ledger, cache). Each block's input, output
and operator calls go to the trace, which the judge reads.

Operator steps (``{"op": ..., ...}``): ``Custom`` / ``CustomCodeGenerate`` (``instruction``), ``AnswerGenerate``,
``ScEnsemble`` (``n`` Custom samples with ``instruction``, then the ensemble), ``Programmer``, ``SelfRefine``,
``Review`` (a condition), ``Revise`` (with the last review's feedback), ``Format``, ``Test`` (code; a condition).
"""
from __future__ import annotations

import asyncio
from typing import Any

from agentic_repro.harness.types import Solution
from agentic_repro.harness.view import ProblemView

from agentic_repro.baselines.autoflow import operators as ops_mod
from agentic_repro.harness.context import ProblemContext

STEP_OPS = ("Custom", "CustomCodeGenerate", "AnswerGenerate", "ScEnsemble", "Programmer", "SelfRefine", "Review",
            "Revise", "Format", "Test")
CONDITION_OPS = ("Review", "Test")
GENERATORS = ("Custom", "CustomCodeGenerate", "AnswerGenerate", "ScEnsemble", "Programmer")
BLOCK_TYPES = ("seq", "for", "cond")
TYPE_ALIASES = {"sequence": "seq", "sequential": "seq", "sequencelogic": "seq", "loop": "for", "looplogic": "for",
                "conditional": "cond", "if": "cond", "conditionallogic": "cond"}
MAX_BLOCKS, MAX_STEPS, MAX_ITERS, MAX_N = 6, 4, 5, 5


class BlockError(ValueError):
    """A block configuration the interpreter refuses (the optimiser's proposal is then no candidate)."""


def _steps(raw: Any, where: str, allowed: tuple[str, ...]) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_STEPS:
        raise BlockError(f"{where}: 1..{MAX_STEPS} operator steps")
    out = []
    for s in raw:
        s = {"op": s} if isinstance(s, str) else s  # "Review" as a step: {"op": "Review"}
        if not isinstance(s, dict) or s.get("op") not in allowed:
            raise BlockError(f"{where}: unknown operator step {str(s)[:80]} (allowed: {', '.join(allowed)})")
        step = {"op": s["op"]}
        if "instruction" in s:
            if not isinstance(s["instruction"], str) or len(s["instruction"]) > 4000:
                raise BlockError(f"{where}: instruction must be text (<= 4000 characters)")
            step["instruction"] = s["instruction"]
        if s["op"] == "ScEnsemble":
            n = s.get("n", 3)
            if not isinstance(n, int) or not 2 <= n <= MAX_N:
                raise BlockError(f"{where}: ScEnsemble n must be 2..{MAX_N}")
            step["n"] = n
        out.append(step)
    return out


def validate_blocks(raw: Any, allowed: tuple[str, ...] = STEP_OPS) -> list[dict[str, Any]]:
    """The normalised block list, or :class:`BlockError` naming the first problem."""
    if not isinstance(raw, list) or not raw or len(raw) > MAX_BLOCKS:
        raise BlockError(f"a workflow is 1..{MAX_BLOCKS} blocks")
    blocks = []
    for i, b in enumerate(raw):
        if isinstance(b, dict) and isinstance(b.get("type"), str):  # names an LLM may use for the three types
            b = {**b, "type": TYPE_ALIASES.get(b["type"].strip().lower(), b["type"].strip().lower())}
        if not isinstance(b, dict) or b.get("type") not in BLOCK_TYPES:
            raise BlockError(f"block {i + 1}: type must be one of {BLOCK_TYPES}")
        blk: dict[str, Any] = {"id": f"B{i + 1}", "type": b["type"], "description": str(b.get("description", ""))[:500]}
        if b["type"] == "seq":
            blk["operators"] = _steps(b.get("operators"), blk["id"], allowed)
        elif b["type"] == "for":
            blk["operators"] = _steps(b.get("operators"), blk["id"], allowed)
            it = b.get("max_iters", 2)
            if not isinstance(it, int) or not 1 <= it <= MAX_ITERS:
                raise BlockError(f"{blk['id']}: max_iters must be 1..{MAX_ITERS}")
            blk["max_iters"] = it
            stop = b.get("stop", "review")
            if stop not in ("review", "unchanged", "none"):
                raise BlockError(f"{blk['id']}: stop must be review | unchanged | none")
            blk["stop"] = stop
        else:
            cond = b.get("condition")
            cond = cond if isinstance(cond, dict) else {"op": cond}
            if cond.get("op") not in [o for o in CONDITION_OPS if o in allowed or o == "Review"]:
                raise BlockError(f"{blk['id']}: condition must be one of {CONDITION_OPS}")
            blk["condition"] = {"op": cond["op"]}
            blk["success"] = _steps(b.get("success") or [{"op": "Format"}], blk["id"] + ".success", allowed)
            blk["failure"] = _steps(b.get("failure"), blk["id"] + ".failure", allowed)
        blocks.append(blk)
    first = blocks[0]["operators"][0]["op"] if blocks[0]["type"] != "cond" else blocks[0]["condition"]["op"]
    if first not in GENERATORS:
        raise BlockError(f"the first step must generate a solution ({', '.join(GENERATORS)}), not {first}")
    return blocks


class BlockWorkflow:
    """A block workflow as a harness method (the frozen JudgeFlow artifact runs this)."""

    def __init__(self, blocks: list[dict[str, Any]], *, role: str | None = "executor",
                 sampling: dict[str, Any] | None = None, name: str = "") -> None:
        self.name = name
        self.blocks = validate_blocks(blocks)
        self.role = role
        self.sampling = dict(sampling or {})

    async def _step(self, ops: Any, step: dict[str, Any], question: str, state: str, mem: dict[str, Any],
                    entry: str | None) -> str:
        op, instr = step["op"], step.get("instruction", "")
        context = question if not state else f"{question}\n\nCurrent solution:\n{state}"
        if op == "Custom":
            return (await ops_mod.custom(ops, input=context, instruction=instr))["response"]
        if op == "CustomCodeGenerate":
            return (await ops_mod.custom_code_generate(ops, problem=context, entry_point=entry or "",
                                                       instruction=instr))["response"]
        if op == "AnswerGenerate":
            out = await ops_mod.answer_generate(ops, input=context)
            return f"{out['thought']}\n{out['answer']}".strip()
        if op == "ScEnsemble":
            sols = await asyncio.gather(*[ops_mod.custom(ops, input=context, instruction=instr)
                                          for _ in range(step.get("n", 3))])
            return (await ops_mod.sc_ensemble(ops, solutions=[s["response"] for s in sols],
                                              problem=question))["response"]
        if op == "Programmer":
            out = await ops_mod.programmer(ops, problem=question, analysis=state or "None")
            return f"{state}\n\nProgram output: {out['output']}".strip() if state else str(out["output"])
        if op == "SelfRefine":
            return (await ops_mod.self_refine(ops, problem=question, solution=state))["response"]
        if op == "Review":
            out = await ops_mod.review(ops, problem=question, solution=state)
            mem["ok"], mem["feedback"] = bool(out["review_result"]), out["feedback"]
            return state
        if op == "Revise":
            return (await ops_mod.revise(ops, problem=question, solution=state,
                                         feedback=mem.get("feedback", "")))["solution"]
        if op == "Format":
            return (await ops_mod.format_answer(ops, problem=question, solution=state))["solution"]
        if op == "Test":
            out = await ops_mod.test(ops, problem=question, solution=state, entry_point=entry or "")
            mem["ok"] = bool(out["result"])
            return out["solution"]
        raise BlockError(f"unknown operator {op}")

    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        ops = ops_mod.Ops(ctx, role=self.role, **self.sampling)
        question = ctx.benchmark.render(problem)
        entry = problem.fields.get("entry_point") if ctx.benchmark.domain == "code" else None
        state, trace = "", []
        for blk in self.blocks:
            before, mem, n_calls = state, {}, len(ops.trace)
            if blk["type"] == "seq":
                for step in blk["operators"]:
                    state = await self._step(ops, step, question, state, mem, entry)
            elif blk["type"] == "for":
                for it in range(blk["max_iters"]):
                    prev = state
                    mem.pop("ok", None)
                    for step in blk["operators"]:
                        state = await self._step(ops, step, question, state, mem, entry)
                    if (blk["stop"] == "review" and mem.get("ok")) or (blk["stop"] == "unchanged" and state == prev):
                        break
            else:
                state = await self._step(ops, blk["condition"], question, state, mem, entry)
                for step in blk["success"] if mem.get("ok") else blk["failure"]:
                    state = await self._step(ops, step, question, state, mem, entry)
            trace.append({"block": blk["id"], "type": blk["type"], "input": before[-1500:], "output": state[-1500:],
                          "calls": ops.trace[n_calls:]})
        return Solution(answer=state, trace={"blocks": trace})
