"""PubMedQA (PQA-L, Jin et al. 2019): yes / no / maybe accuracy on the expert-labelled questions.

DyFlow's task text (its ``benchmarks/pubmedqa.py``, dyflow-supplement §3.1) asks for ``[[yes]]`` /
``[[no]]`` / ``[[maybe]]``; DyFlow scores by extracting that bracket, so does the headline here. The
extraction rules, in order (the one that fired is recorded per prediction):

1. ``double-bracket``: the last ``[[yes|no|maybe]]`` (case-insensitive);
2. ``answer-line``: the last ``answer/decision: yes|no|maybe``;
3. ``last-word``: the last standalone yes/no/maybe in the text (``extract: strict`` turns 2-3 off).

Split: DyFlow's 84 train / 251 test are drawn from the 1,000 labelled items with a seeded partition
(:mod:`evaluators.partition`); DyFlow's own lists are not published.
"""
from __future__ import annotations

import re
from typing import Any, Hashable

from evaluators.base import Benchmark
from evaluators.partition import Partitioned
from harness.types import Problem, Score

EXTRACTION_VERSION = "1"
LABELS = ("yes", "no", "maybe")
_BRACKET = re.compile(r"\[\[\s*(yes|no|maybe)\s*\]\]", re.IGNORECASE)
_LINE = re.compile(r"(?:answer|decision)\s*(?:is)?\s*[:=]?\s*\**\s*(yes|no|maybe)\b", re.IGNORECASE)
_WORD = re.compile(r"\b(yes|no|maybe)\b", re.IGNORECASE)


def extract_label(text: str, strict: bool = False) -> tuple[str | None, str]:
    """(yes|no|maybe or None, rule)."""
    text = text or ""
    for rule, pattern in (("double-bracket", _BRACKET), ("answer-line", _LINE), ("last-word", _WORD)):
        found = pattern.findall(text)
        if found:
            return found[-1].lower(), rule
        if strict:
            break
    return None, "none"


class PubMedQA(Partitioned, Benchmark):
    domain = "qa"

    def partition_key(self, row: dict[str, Any]) -> str:
        return str(row["pubid"])

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {"question": row["QUESTION"], "contexts": list(row["CONTEXTS"]), "labels": row.get("LABELS"),
                  "year": row.get("YEAR"), "long_answer": row.get("LONG_ANSWER")}
        return Problem(id=f"pubmedqa/{row['pubid']}", index=row_index, fields=fields,
                       gold=str(row["final_decision"]).lower(), benchmark=self.name)

    hidden_fields = ("long_answer",)  # the expert's conclusion gives the label away

    def render(self, problem: Problem) -> str:
        f = problem.fields
        return f"Question: {f['question']}\n\nContext: {' '.join(f['contexts'])}"

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return extract_label(text, strict=self.cfg.get("extract", "flexible") == "strict")

    def answer_key(self, extracted: Any) -> Hashable | None:
        return None if extracted is None else str(extracted).lower()

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        return Score(float(pred == problem.gold), pred, {"rule": rule, "extraction_version": EXTRACTION_VERSION,
                                                         "gold": problem.gold})
