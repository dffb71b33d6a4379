"""ReAct (Yao et al., 2022) for QA and math, with the evidence tool DynaGraph's E_rag gets (fair comparison).

Thought / Action / Observation turns; actions ``Search[query]`` (only when an evidence source is configured:
the same ``agentic_repro.dynagraph.evidence`` source and options as E_rag — a BM25 index over a corpus, or a search tool) and
``Finish[answer]``. Closed-book, the only action is Finish (the loop still lets the model think for several
turns). The loop ends at Finish or after ``max_steps``; a run out of steps is asked once for its final answer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentic_repro.dynagraph.evidence import make_source
from agentic_repro.harness.types import Solution
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.view import ProblemView

REACT_SYSTEM = "Solve the task by interleaving Thought, Action and Observation steps."
REACT = """{task}

Actions:
{actions}- Finish[<final answer text>]: end with your answer. {answer_instruction}
Write one "Thought: ..." line, then one "Action: ..." line. The Observation will be given to you.
{memory}{scratchpad}"""

_ACTION = re.compile(r"Action\s*\d*\s*:\s*(Search|Finish)\s*\[(.*)\]", re.DOTALL | re.IGNORECASE)


@dataclass
class EvidenceOpts:
    evidence: str = "closed_book"
    corpus: str | None = None
    evidence_k: int = 3
    evidence_tool: str = "search"


def parse_action(text: str) -> tuple[str | None, str]:
    """The first ``Action: Search[...]`` / ``Finish[...]`` of a turn (None: no valid action)."""
    m = _ACTION.search(text or "")
    if not m:
        return None, ""
    arg = m.group(2)
    depth, end = 0, len(arg)
    for i, ch in enumerate(arg):            # Finish[\boxed{x}] keeps nested brackets: cut at the matching ]
        if ch == "[":
            depth += 1
        elif ch == "]":
            if depth == 0:
                end = i
                break
            depth -= 1
    return m.group(1).capitalize(), arg[:end].strip()


async def react_episode(ctx: ProblemContext, *, max_steps: int, temperature: float, top_p: float,
                        max_tokens: int | None,
                        evidence: EvidenceOpts, memory: str = "", stage: str = "react", trial: int = 0,
                        cache: dict[str, Any] | None = None) -> dict[str, Any]:
    src = make_source(evidence, cache)
    searchable = evidence.evidence != "closed_book"
    actions = "- Search[<query>]: look up passages in the evidence source.\n" if searchable else ""
    task = ctx.benchmark.render(ctx.problem)
    pad, turns, answer = "", [], None
    for step in range(max_steps):
        content = REACT.format(task=task, actions=actions, answer_instruction=ctx.benchmark.answer_instruction,
                               memory=memory, scratchpad=pad)
        kw = {"max_tokens": max_tokens} if max_tokens else {}
        out = (await ctx.generate([{"role": "system", "content": REACT_SYSTEM}, {"role": "user", "content": content}],
                                  stage=stage, temperature=temperature, top_p=top_p,
                                  sample_offset=trial * 100 + step, **kw))[0].text
        turn = out.split("Observation")[0].strip()
        kind, arg = parse_action(turn)
        if kind == "Search" and searchable:
            res = await src.retrieve(ctx, arg, evidence.evidence_k)
            obs = " ".join(f"[{i + 1}] {p['text'][:300]}" for i, p in enumerate(res.items)) or "No passage found."
        elif kind == "Finish":
            answer = arg
            obs = None
        else:
            obs = ("Invalid action: use " + ("Search[...] or " if searchable else "") + "Finish[...].")
        turns.append({"raw": out, "action": kind, "arg": arg[:300], "observation": obs})
        pad += f"\n{turn}\n" + (f"Observation: {obs}\n" if obs is not None else "")
        if answer is not None:
            break
    if answer is None:
        final = (await ctx.generate([{"role": "user", "content": f"{task}\n{pad}\nYou are out of steps. "
                                      f"{ctx.benchmark.answer_instruction}"}], stage=f"{stage}_final",
                                    temperature=temperature, top_p=top_p, sample_offset=trial))[0].text
        answer = final
    return {"answer": answer, "turns": turns, "steps": len(turns), "finished": any(t["action"] == "Finish" for t in turns),
            "evidence": src.describe()}


async def react_qa(problem: ProblemView, ctx: ProblemContext, *, max_steps: int = 6, temperature: float = 0.7,
                   top_p: float = 0.9,
                   max_tokens: int | None = 256, evidence: str = "closed_book", corpus: str | None = None,
                   evidence_k: int = 3, evidence_tool: str = "search") -> Solution:
    ep = await react_episode(ctx, max_steps=max_steps, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                             evidence=EvidenceOpts(evidence, corpus, evidence_k, evidence_tool))
    return Solution(ep["answer"], trace=ep)
