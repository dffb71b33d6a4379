"""HotpotQA: a short answer is extracted, then token F1 against the references (DROP, scored the same way, is a
YAML benchmark: configs/benchmark/drop.yaml, evaluators/scorers.py:score_f1).

The extraction step matters: scoring verbose output with F1 is how AFlow's
QA numbers collapsed (AFlow #27). Raw-output F1 is kept in the details so the
effect of extraction stays visible.
"""
from __future__ import annotations

import ast
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.text_f1 import hotpot_f1_official, max_f1, normalize_answer
from agentic_repro.harness.types import Problem, Score


class QABenchmark(Benchmark):
    domain = "qa"

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return ex.extract_short_answer(text or "")

    def answer_key(self, extracted: Any) -> Hashable | None:
        if extracted is None:
            return None
        key = normalize_answer(str(extracted))
        return key or None


class HotpotQA(QABenchmark):
    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        context = row.get("context") or []
        if isinstance(context, str):
            context = ast.literal_eval(context)
        # DenoiseFlow A.1: concatenate all sentences of all paragraphs (distractor setting)
        paragraphs = [f"{title}: {''.join(sents)}" for title, sents in context]
        pid = str(row.get("_id") or f"hotpotqa-{row_index}")
        fields = {"question": row["question"], "context": "\n".join(paragraphs), "type": row.get("type")}
        return Problem(id=pid, index=row_index, fields=fields, gold=str(row["answer"]), benchmark=self.name)

    def render(self, problem: Problem) -> str:
        ctx = problem.fields["context"]
        return (f"Context:\n{ctx}\n\n" if ctx else "") + f"Question: {problem.fields['question']}"

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        f1 = max_f1(pred or "", [problem.gold])  # headline: DenoiseFlow A.4 token F1
        return Score(f1, pred, {"rule": rule, "f1_official": hotpot_f1_official(pred or "", problem.gold),
                                "f1_raw_output": max_f1(text or "", [problem.gold]), "gold": problem.gold})
