"""GSM8K and MATH: final-answer extraction then numeric / symbolic equivalence."""
from __future__ import annotations

import asyncio
from typing import Any, Hashable

from evaluators import extract as ex
from evaluators.base import Benchmark
from evaluators.math_equiv import is_equiv, normalize_math
from harness.types import Problem, Score


class GSM8K(Benchmark):
    domain = "math"

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        if "cot" in row:  # AFlow split: the answer field is already the number
            gold = str(row["answer"]).replace(",", "").strip()
        else:
            gold = ex.gsm8k_gold(row["answer"])
        pid = str(row.get("id") or f"gsm8k-{self.cfg['split']}-{row_index}")
        return Problem(id=pid, index=row_index, fields={"question": row["question"]}, gold=gold, benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["question"]

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return ex.last_number(text or "")

    def answer_key(self, extracted: Any) -> Hashable | None:
        value = ex.normalize_number(extracted) if extracted is not None else None
        return None if value is None else round(value, 6)

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        p, g = self.answer_key(pred), ex.normalize_number(problem.gold)
        ok = p is not None and g is not None and abs(p - g) <= 1e-6
        return Score(float(ok), pred, {"rule": rule, "gold": problem.gold})


class MATH(Benchmark):
    domain = "math"

    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        levels = self.cfg.get("levels")
        return [r for r in rows if not levels or r.get("level") in levels]

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        gold = row.get("answer")
        if gold is None:
            gold, _ = ex.last_boxed(row["solution"])
        pid = str(row.get("unique_id") or row.get("id") or f"math-{self.cfg['split']}-{row_index}")
        fields = {"problem": row["problem"], "level": row.get("level"), "type": row.get("type") or row.get("subject")}
        return Problem(id=pid, index=row_index, fields=fields, gold=gold, benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["problem"]

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return ex.last_boxed(text or "")

    def answer_key(self, extracted: Any) -> Hashable | None:
        return None if extracted is None else normalize_math(str(extracted))

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        timeout = float(self.cfg.get("symbolic_timeout_s", 5.0))
        ok, how = await asyncio.to_thread(is_equiv, pred, str(problem.gold), timeout)
        return Score(float(ok), pred, {"rule": rule, "equivalence": how, "gold": problem.gold})
