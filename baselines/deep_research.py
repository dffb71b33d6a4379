"""An EDR-style research agent: planner → parallel researchers (the benchmark's ``search`` tool) → analyst report.

A small, documented stand-in for the Enterprise Deep Research agent AUQ evaluates on DeepResearch Bench
(its exact prompts are not here): the planner (role ``planner``) writes ``n_queries`` search queries
(one per line); each researcher (default role) calls ``search`` and writes notes with the passage ids
it used; the analyst (default role) writes the report from the notes in the task's language. What the
method sees: the task prompt and the search results only (never the criteria or the reference article).
Without a ``search`` tool the researchers are skipped and the analyst answers from the task alone
(recorded in the trace as ``no_search_tool``).
"""
from __future__ import annotations

import asyncio
import re

from harness.context import ProblemContext
from harness.types import Problem, Solution

PLAN = ("You are the planner of a research team. Task:\n{task}\n\nWrite {n} web-search queries that together cover "
        "what the report needs, one per line, nothing else.")
RESEARCH = ("You are a researcher. Research question: {query}\n\nSearch results:\n{results}\n\nWrite concise notes "
            "with the facts relevant to the question; cite the passage ids in brackets like [id].")
REPORT = ("You are the analyst. Write a well-structured research report for this task:\n{task}\n\nResearch notes:\n"
          "{notes}\n\nWrite the report in the language of the task; cite passage ids in brackets where used.")


def _queries(text: str, n: int) -> list[str]:
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", ln).strip().strip('"') for ln in (text or "").splitlines()]
    return [ln for ln in lines if ln][:n]


async def deep_research(problem: Problem, ctx: ProblemContext, *, n_queries: int = 3, k: int = 3,
                        plan_template: str = PLAN, research_template: str = RESEARCH,
                        report_template: str = REPORT) -> Solution:
    task = ctx.benchmark.render(problem)
    has_search = any(t.name == "search" for t in ctx.tools)
    trace: dict = {"no_search_tool": not has_search}
    notes: list[str] = []
    if has_search:
        plan = await ctx.ask(plan_template.format(task=task, n=n_queries), stage="plan", role="planner")
        queries = _queries(plan, n_queries) or [task[:200]]
        trace["plan"], trace["queries"] = plan, queries

        async def research(i: int, query: str) -> str:
            hits = await ctx.call_tool("search", query=query, k=k)
            results = "\n".join(f"[{h['id']}] {h.get('title', '')}: {h['text'][:600]}" for h in hits) or "(none)"
            return await ctx.ask(research_template.format(query=query, results=results), stage="research")

        notes = list(await asyncio.gather(*(research(i, q) for i, q in enumerate(queries))))
        trace["notes"] = notes
    report = await ctx.ask(report_template.format(task=task, notes="\n\n".join(notes) or "(no research)"),
                           stage="report")
    return Solution(report, trace=trace)
