"""A scripted environment for the environment-protocol tests: walk a counter to the goal, then stop.

The goal is the problem's gold (the engine sees it; the method never does). The counter starts at 0;
actions: ``inc``, ``dec``, ``stop`` (ends the episode: success when the counter is at the goal).
Misbehaviours on demand: ``crash`` kills the worker process, ``raise`` raises in the engine, ``hang``
sleeps past any step timeout.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from agentic_repro.evaluators.base import Benchmark
from agentic_repro.harness.env import StepResult
from agentic_repro.harness.types import Problem, Score

ACTIONS = ["inc", "dec", "stop"]


class CounterEngine:
    """Synchronous engine (run in a worker process by default)."""

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.pid = os.getpid()
        self.k = start
        self.goal = None

    def reset(self, problem: Problem, seed: int) -> tuple[str, dict[str, Any]]:
        self.goal = int(problem.gold)
        self.k = self.start
        return f"counter at {self.k}", {"admissible_actions": list(ACTIONS), "pid": self.pid, "seed": seed}

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        action = action.strip()
        if action == "crash":
            os._exit(3)
        if action == "raise":
            raise ValueError("engine broke")
        if action == "hang":
            time.sleep(30)
        if action == "inc":
            self.k += 1
        elif action == "dec":
            self.k -= 1
        elif action == "stop":
            ok = self.k == self.goal
            return ("you stopped at the goal" if ok else "you stopped short"), float(ok), True, {"success": ok}
        return f"counter at {self.k}", 0.0, False, {"admissible_actions": list(ACTIONS)}


class AsyncCounterEngine:
    """The same game as an async in-process engine (no worker)."""

    def __init__(self) -> None:
        self._e = CounterEngine()

    async def reset(self, problem: Problem, seed: int) -> StepResult:
        obs, info = self._e.reset(problem, seed)
        return StepResult(obs, 0.0, False, info, info["admissible_actions"])

    async def step(self, action: str) -> StepResult:
        obs, r, done, info = self._e.step(action)
        return StepResult(obs, r, done, info, info.get("admissible_actions"))

    async def close(self) -> None:
        return None


class CounterBenchmark(Benchmark):
    """Problems: ``{"id", "hint", "goal"}``; the hint is what the method may read, the goal is the gold."""

    domain = "env"
    hidden_fields = ("goal_copy",)

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        return Problem(id=row["id"], index=row_index, fields={"hint": row["hint"], "goal_copy": row["goal"]},
                       gold=str(row["goal"]), benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return f"Walk the counter to {problem.fields['hint']} and stop."

    def extract(self, text: str, problem: Problem):
        return (text or "").strip(), "raw"

    async def score(self, text: str, problem: Problem) -> Score:  # never used: the environment scores
        raise AssertionError("an environment benchmark is scored from its episodes")


def counter_data(root: Path, goals: list[int], hints: list[int] | None = None) -> Path:
    (root / "counter").mkdir(parents=True, exist_ok=True)
    hints = hints or goals
    rows = [{"id": f"g{i}", "hint": h, "goal": g} for i, (g, h) in enumerate(zip(goals, hints))]
    (root / "counter" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def counter_bench_cfg(**env: Any) -> dict[str, Any]:
    return {"name": "counter", "kind": "tests.scripted_env.CounterBenchmark", "split": "test",
            "splits": {"test": "counter/test.jsonl"}, "metric": "success",
            "env": {"engine": "tests.scripted_env:CounterEngine", "max_steps": 10, "step_timeout_s": 20, **env}}


def walker_script(messages, sampling) -> str:
    """The scripted policy: read 'counter at k' and 'to h' from the prompt, answer the next action."""
    text = messages[-1]["content"]
    m = re.search(r"counter at (-?\d+)", text)
    h = re.search(r"to (-?\d+)", text)
    if not m or not h:
        return "stop"
    k, goal = int(m.group(1)), int(h.group(1))
    return "inc" if k < goal else "dec" if k > goal else "stop"
