"""Small methods used by the runner tests (they exercise the core, not any paper)."""
from __future__ import annotations

import asyncio

from agentic_repro.harness.types import Solution


async def ask_once(problem, ctx, *, stage: str = "answer") -> Solution:
    text = await ctx.ask(ctx.benchmark.prompt(problem, "{task} {answer_instruction}"), stage=stage)
    return Solution(text, trace={"n": 1})


async def ask_many(problem, ctx, *, n: int = 3) -> Solution:
    outs = await ctx.generate([{"role": "user", "content": problem.fields["q"]}], stage="sample", n=n,
                              temperature=0.7)
    await asyncio.sleep(0.001 * (problem.index % 3))  # interleave problems
    verdict = await ctx.ask("verify " + outs[0].text, stage="verify")
    return Solution(outs[0].text, confidence=0.5 + 0.1 * (problem.index % 4), trace={"verdict": verdict})


async def explode_on_p3(problem, ctx) -> Solution:
    if problem.id == "p3":
        raise RuntimeError("boom")
    return await ask_once(problem, ctx)


class WindowCounter:
    """A stateful method: its answer depends on state updated only at window ends."""

    window_size = 3

    def __init__(self) -> None:
        self.name = "window_counter"
        self.seen: list[str] = []
        self.windows: list[list[str]] = []

    async def solve(self, problem, ctx) -> Solution:
        text = await ctx.ask(problem.fields["q"], stage="answer")
        return Solution(text, trace={"state_at_solve": len(self.seen)})

    def end_window(self, outcomes) -> None:
        ids = [p.id for p, _ in outcomes]
        self.windows.append(ids)
        self.seen.extend(ids)

    def state_dict(self) -> dict:
        return {"seen": list(self.seen)}

    def load_state_dict(self, state: dict) -> None:
        self.seen = list(state["seen"])


class CheckedFirst:
    """A method with a preflight: it refuses to start when told to (``ok=False``), else counts its calls."""

    def __init__(self, ok: bool = True) -> None:
        self.name = "checked_first"
        self.ok = ok
        self.preflights = 0

    async def preflight(self, ctx) -> None:
        self.preflights += 1
        if not self.ok:
            raise FileNotFoundError("checked_first: its artifact is missing; run the search first")

    async def solve(self, problem, ctx) -> Solution:
        return Solution(await ctx.ask(problem.fields["q"], stage="answer"))
