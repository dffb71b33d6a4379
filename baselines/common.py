"""Helpers shared by the multi-call baselines (debate, refinement, ranking, search).

Everything here is method-agnostic: message building, answer keys, the domain-aware final choice
among candidates, public-test reports for code, and small parsers for the judges' outputs.
"""
from __future__ import annotations

import re
from typing import Any
from collections.abc import Hashable

from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Message

from agentic_repro.baselines.voting import Vote, choose_code, majority_vote


def user(content: str, system: str | None = None) -> list[Message]:
    """A one-turn conversation (optionally with a system message)."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": content})
    return messages


def fill(ctx: ProblemContext, template: str, **fields: Any) -> str:
    """``template`` with ``{task}``, ``{answer_instruction}`` and any extra ``fields``."""
    return template.format(task=ctx.benchmark.render(ctx.problem),
                           answer_instruction=ctx.benchmark.answer_instruction, **fields)


def answer_key(ctx: ProblemContext, text: str) -> Hashable | None:
    """The benchmark's canonical answer of ``text`` (None: nothing extractable)."""
    bench = ctx.benchmark
    return bench.answer_key(bench.extract(text or "", ctx.problem)[0])


async def choose(ctx: ProblemContext, texts: list[str], code_choice: str = "majority") -> Vote:
    """The final choice among candidates: majority over answer keys (math, QA); for code
    ``code_choice`` = ``majority`` (over programs, the papers' rule) or ``public_tests`` (see
    :mod:`agentic_repro.baselines.voting`)."""
    if ctx.benchmark.domain == "code":
        return await choose_code(ctx, texts, code_choice)
    return majority_vote(ctx, texts)


def vote_trace(vote: Vote) -> dict[str, Any]:
    return {"keys": [None if k is None else str(k)[:200] for k in vote.keys], "counts": vote.counts,
            "chosen": vote.index, "rule": vote.rule, "share": vote.share}


async def public_test_report(ctx: ProblemContext, text: str) -> tuple[str | None, dict[str, Any] | None]:
    """A short, human-readable report of the *public* tests on a code candidate (None: not code / no tests)."""
    if ctx.benchmark.domain != "code":
        return None, None
    res = await ctx.benchmark.run_public_tests(text, ctx.problem)
    if res is None:
        return None, None
    lines = [f"Public tests passed: {res['passed']}/{res['total']}."]
    for r in res.get("results", []):
        if not r.get("passed"):
            err = (r.get("error") or r.get("status") or "").strip().splitlines()
            lines.append(f"FAILED: {r.get('test', '').strip()}" + (f"  ({err[-1][:200]})" if err else ""))
    return "\n".join(lines), {"passed": res["passed"], "total": res["total"]}


def quote_solutions(texts: list[str], label: str = "Agent solution") -> str:
    """Other agents' solutions, numbered from 1, each in a fenced block (the debate papers' format)."""
    return "".join(f"\n\n{label} {i}: ```{t}```" for i, t in enumerate(texts, 1))


_INT_LIST = re.compile(r"\[\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*\]")


def last_int_list(text: str, *, double: bool = False) -> list[int] | None:
    """The last ``[1, 2]`` (or ``[[1, 2]]`` when ``double``) integer list in ``text``."""
    pattern = re.compile(r"\[\[\s*([^\[\]]*?)\s*\]\]") if double else _INT_LIST
    found = pattern.findall(text or "")
    if not found:
        return None
    out = []
    for part in found[-1].split(","):
        try:
            out.append(int(part.strip()))
        except ValueError:
            out.append(0)
    return out


def strip_bullet(line: str) -> str:
    return re.sub(r"^\s*(?:[-*\u2022]|\d+[.)]|step\s*\d+\s*[:.)-])\s*", "", line, flags=re.IGNORECASE).strip()
