"""An EDR-style research agent: planner → parallel researchers (the benchmark's ``search`` tool) → analyst report.

A small, documented stand-in for the Enterprise Deep Research agent AUQ evaluates on DeepResearch Bench
(its exact prompts are not here): the planner (role ``planner``) writes ``n_queries`` search queries
(one per line); each researcher (default role) calls ``search`` and writes notes with the passage ids
it used; the analyst (default role) writes the report from the notes in the task's language. What the
method sees: the task prompt and the search results only (never the criteria or the reference article).

Evidence (``evidence``): RACE compares the report with a reference written from web research, so a report
written without any evidence source is a different measurement. ``required`` (default): without a ``search``
tool (``benchmark.search.corpus`` null and no Tavily backend) the problem is refused with an error naming the
missing source, before any call. ``closed_book``: the agent runs anyway, its researchers answer from the
model's own knowledge, and the trace says ``closed_book: true`` (the tables label every such cell).
The pieces (:func:`require_evidence`, :func:`research_notes`, :func:`write_report`) are shared with AUQ's
research loop (``auq/research.py``), so the two rows differ only in the planner step.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Solution
from agentic_repro.harness.view import ProblemView

PLAN = ("You are the planner of a research team. Task:\n{task}\n\nWrite {n} web-search queries that together cover "
        "what the report needs, one per line, nothing else.")
RESEARCH = ("You are a researcher. Research question: {query}\n\nSearch results:\n{results}\n\nWrite concise notes "
            "with the facts relevant to the question; cite the passage ids in brackets like [id].")
CLOSED_BOOK_RESULTS = ("(no search tool in this run: there are no results. Write notes from what you know, and say "
                       "plainly what you are unsure of; cite nothing.)")
REPORT = ("You are the analyst. Write a well-structured research report for this task:\n{task}\n\nResearch notes:\n"
          "{notes}\n\nWrite the report in the language of the task; cite passage ids in brackets where used.")
EVIDENCE = ("required", "closed_book")


class EvidenceMissing(RuntimeError):
    """The research agent has no evidence source and the run did not ask for a closed-book run."""


def _queries(text: str, n: int) -> list[str]:
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", ln).strip().strip('"') for ln in (text or "").splitlines()]
    return [ln for ln in lines if ln][:n]


def require_evidence(ctx: ProblemContext, evidence: str) -> bool:
    """Whether the run has a search tool; raises :class:`EvidenceMissing` (the problem's error, before any call)
    when it has none and ``evidence`` is ``required``."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence={evidence!r}: one of {EVIDENCE}")
    has_search = any(t.name == "search" for t in ctx.tools)
    if not has_search and evidence == "required":
        raise EvidenceMissing(
            "the research agent has no evidence source: the benchmark offers no `search` tool "
            "(benchmark.search.corpus is null with backend=bm25, or backend=tavily without its key). Set "
            "benchmark.search.corpus=<JSONL of {id, title, text}> or benchmark.search.backend=tavily with "
            "$TAVILY_API_KEY; or method.params.evidence=closed_book to run without evidence (its cells are "
            "labelled closed-book and are not the paper's measurement)")
    return has_search


async def research_notes(ctx: ProblemContext, queries: list[str], *, k: int, has_search: bool,
                         research_template: str = RESEARCH) -> list[str]:
    """One researcher per query, in parallel: ``search`` then notes (closed-book: notes without results)."""
    async def research(query: str) -> str:
        if has_search:
            hits = await ctx.call_tool("search", query=query, k=k)
            results = "\n".join(f"[{h['id']}] {h.get('title', '')}: {h['text'][:600]}" for h in hits) or "(none)"
        else:
            results = CLOSED_BOOK_RESULTS
        return await ctx.ask(research_template.format(query=query, results=results), stage="research")

    return list(await asyncio.gather(*(research(q) for q in queries)))


async def write_report(ctx: ProblemContext, task: str, notes: list[str], report_template: str = REPORT) -> str:
    return await ctx.ask(report_template.format(task=task, notes="\n\n".join(notes) or "(no research)"),
                         stage="report")


async def deep_research(problem: ProblemView, ctx: ProblemContext, *, n_queries: int = 3, k: int = 3,
                        evidence: str = "required", plan_template: str = PLAN, research_template: str = RESEARCH,
                        report_template: str = REPORT) -> Solution:
    has_search = require_evidence(ctx, evidence)
    task = ctx.benchmark.render(problem)
    trace: dict[str, Any] = {"no_search_tool": not has_search, "closed_book": not has_search}
    plan = await ctx.ask(plan_template.format(task=task, n=n_queries), stage="plan", role="planner")
    queries = _queries(plan, n_queries)
    # an empty plan falls back to the task text as the one query: recorded, so the viewer and Table 3 count it
    trace["plan"], trace["queries"], trace["fallback_plan"] = plan, queries or [task[:200]], not queries
    queries = trace["queries"]
    notes = await research_notes(ctx, queries, k=k, has_search=has_search, research_template=research_template)
    trace["notes"] = notes
    report = await write_report(ctx, task, notes, report_template)
    return Solution(report, trace=trace)
