"""MATH: final-answer extraction then symbolic equivalence (GSM8K is a YAML benchmark: configs/benchmark/gsm8k.yaml)."""
from __future__ import annotations

from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.math_verify_equiv import CHECKER_TIMEOUTS
from agentic_repro.evaluators.scorers import math_key, score_math
from agentic_repro.harness.types import Problem, Score


class MATH(Benchmark):
    domain = "math"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self._options()  # refused before any call, naming the key

    def _options(self) -> tuple[str, str]:
        mode = str(self.cfg.get("equivalence", "math_verify"))
        if mode not in self.EQUIVALENCES:
            raise ValueError(f"benchmark.equivalence={mode!r}: choose one of {list(self.EQUIVALENCES)}")
        on_timeout = str(self.cfg.get("checker_timeout", "error"))
        if on_timeout not in CHECKER_TIMEOUTS:
            raise ValueError(f"benchmark.checker_timeout={on_timeout!r}: choose one of {list(CHECKER_TIMEOUTS)} "
                             "(error: a checker killed at symbolic_timeout_s makes the problem an error; "
                             "wrong: it is a 0 with verdict timeout)")
        return mode, on_timeout

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
        return math_key(extracted)

    EQUIVALENCES = ("math_verify", "aflow")

    async def score(self, text: str, problem: Problem) -> Score:
        """``benchmark.equivalence``: ``math_verify`` (default; reads the whole output) or ``aflow``
        (the last-\\boxed{} extraction, then normalise → numeric → sympy). Either runs in a killable
        child under ``symbolic_timeout_s``; which one ran is recorded in every score. A checker that cannot
        judge (crashed, died, or killed at the limit with ``checker_timeout: error``, the default) raises
        :class:`~evaluators.base.ScorerFailure`: the problem is an error, not a 0."""
        mode, on_timeout = self._options()
        pred, rule = self.extract(text, problem)
        return await score_math(text, problem.gold, pred, rule, equivalence=mode,
                                timeout=float(self.cfg.get("symbolic_timeout_s", 5.0)), on_timeout=on_timeout)
