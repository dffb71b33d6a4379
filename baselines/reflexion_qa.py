"""Reflexion (Shinn et al., 2023) for QA and math: ReAct trials with verbal self-reflection between them.

The paper's HotpotQA agent learns from an exact-match signal against the gold answer; a method here never sees
the gold, so the trial's evaluator is the model itself (it judges its own answer CORRECT / INCORRECT, the
paper's "self-evaluation" variant). After an INCORRECT verdict it writes a reflection, which joins the memory
(the last ``memory_size`` reflections) of the next ReAct trial; at most ``max_trials`` trials. Same evidence
tool as DynaGraph's E_rag (baselines/react_qa.py).
"""
from __future__ import annotations

from typing import Any

from agentic_repro.baselines.react_qa import EvidenceOpts, react_episode
from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

EVALUATE = """{task}

Proposed answer: {answer}

Is the proposed answer correct? Think briefly, then end with "Verdict: CORRECT" or "Verdict: INCORRECT"."""

REFLECT = """You tried to solve this task and your answer may be wrong.
{task}

Your attempt:
{trajectory}
Your answer: {answer}

In a few sentences, diagnose a possible reason for failure and write a new, concise plan that mitigates it."""


async def reflexion_qa(problem: ProblemView, ctx: ProblemContext, *, max_trials: int = 3, max_steps: int = 6,
                       memory_size: int = 3,
                       temperature: float = 0.7, top_p: float = 0.9, max_tokens: int | None = 256,
                       evidence: str = "closed_book", corpus: str | None = None, evidence_k: int = 3,
                       evidence_tool: str = "search") -> Solution:
    ev = EvidenceOpts(evidence, corpus, evidence_k, evidence_tool)
    task = ctx.benchmark.render(ctx.problem)
    reflections: list[str] = []
    trials = []
    ep: dict[str, Any] = {}
    kw = {"max_tokens": max_tokens} if max_tokens else {}
    for trial in range(max_trials):
        memory = ("Reflections from earlier trials:\n" + "\n".join(f"- {r}" for r in reflections[-memory_size:]) + "\n"
                  if reflections else "")
        ep = await react_episode(ctx, max_steps=max_steps, temperature=temperature, top_p=top_p,
                                 max_tokens=max_tokens, evidence=ev, memory=memory, stage=f"trial_{trial + 1}",
                                 trial=trial)
        verdict = (await ctx.generate([{"role": "user", "content": EVALUATE.format(task=task, answer=ep["answer"])}],
                                      stage="evaluate", temperature=temperature, top_p=top_p, sample_offset=trial,
                                      **kw))[0].text
        ok = "verdict: correct" in verdict.lower()
        trials.append({"trial": trial + 1, "answer": ep["answer"], "steps": ep["steps"], "verdict": verdict[-300:],
                       "self_judged_correct": ok, "turns": ep["turns"]})
        if ok or trial == max_trials - 1:
            break
        traj = "\n".join(t["raw"][:400] for t in ep["turns"])
        reflections.append((await ctx.generate([{"role": "user", "content": REFLECT.format(
            task=task, trajectory=traj, answer=ep["answer"])}], stage="reflect", temperature=temperature, top_p=top_p,
            sample_offset=trial, **kw))[0].text.strip()[:800])
    return Solution(ep["answer"], trace={"trials": trials, "reflections": reflections, "evidence": ep.get("evidence")})
