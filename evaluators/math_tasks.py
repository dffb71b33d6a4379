"""GSM8K and MATH: final-answer extraction then numeric / symbolic equivalence."""
from __future__ import annotations

import asyncio
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.math_equiv import is_equiv, normalize_math
from agentic_repro.evaluators.math_verify_equiv import CHECKER_TIMEOUTS, MATH_VERIFY_VERSION, math_verify_equiv
from agentic_repro.harness.types import Problem, Score


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

    # extraction readings: ``protocol`` (AFlow/DenoiseFlow A.4: last number of the output) and
    # ``flexible`` (\\boxed{} > #### > "answer is" > last number; U+2212 read as a minus)
    READINGS = {"protocol": ex.last_number_protocol, "flexible": ex.last_number}

    def _reading(self) -> str:
        mode = str(self.cfg.get("extract", "protocol"))
        if mode not in self.READINGS:
            raise ValueError(f"benchmark.extract={mode!r}: choose one of {sorted(self.READINGS)} "
                             "(protocol = last number of the output, as AFlow/DenoiseFlow score GSM8K)")
        return mode

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return self.READINGS[self._reading()](text or "")

    def answer_key(self, extracted: Any) -> Hashable | None:
        value = ex.normalize_number(extracted) if extracted is not None else None
        return None if value is None else round(value, 6)

    def _correct(self, pred: Any, gold: Any) -> bool:
        p, g = self.answer_key(pred), ex.normalize_number(gold)
        return p is not None and g is not None and abs(p - g) <= 1e-6

    async def score(self, text: str, problem: Problem) -> Score:
        """Both readings are scored and recorded (as lm-evaluation-harness reports strict-match
        and flexible-extract side by side); ``benchmark.extract`` picks the headline."""
        mode = self._reading()
        readings = {}
        for name, fn in self.READINGS.items():
            pred, rule = fn(text or "")
            readings[name] = {"extracted": pred, "rule": rule, "correct": self._correct(pred, problem.gold)}
        chosen = readings[mode]
        return Score(float(chosen["correct"]), chosen["extracted"],
                     {"rule": chosen["rule"], "extract": mode, "readings": readings, "gold": problem.gold})


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
        if extracted is None:
            return None
        try:
            return normalize_math(str(extracted))
        except RecursionError:  # nesting deeper than the normaliser's stack: malformed output, keyed as text
            return " ".join(str(extracted).split())

    EQUIVALENCES = ("math_verify", "aflow")

    async def score(self, text: str, problem: Problem) -> Score:
        """``benchmark.equivalence``: ``math_verify`` (default; reads the whole output) or ``aflow``
        (the last-\\boxed{} extraction, then normalise → numeric → sympy). Either runs in a killable
        child under ``symbolic_timeout_s``; which one ran is recorded in every score. A checker that cannot
        judge (crashed, died, or killed at the limit with ``checker_timeout: error``, the default) raises
        :class:`~evaluators.base.ScorerFailure`: the problem is an error, not a 0."""
        mode, on_timeout = self._options()
        pred, rule = self.extract(text, problem)
        timeout = float(self.cfg.get("symbolic_timeout_s", 5.0))
        if mode == "aflow":
            ok, how = await asyncio.to_thread(is_equiv, pred, str(problem.gold), timeout, on_timeout)
            return Score(float(ok), pred, {"equivalence": "aflow", "rule": rule, "stage": how, "gold": problem.gold,
                                           "checker_timeout": on_timeout})
        mv = await asyncio.to_thread(math_verify_equiv, text, str(problem.gold), timeout, on_timeout)
        return Score(float(mv["equivalent"]), mv["pred"],
                     {"equivalence": "math_verify", "math_verify_version": MATH_VERIFY_VERSION,
                      "verdict": mv["verdict"], "gold_parsed": mv["gold"], "rule": rule, "boxed": pred,
                      "gold": problem.gold, "checker_timeout": on_timeout})
