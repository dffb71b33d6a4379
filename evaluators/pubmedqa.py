"""PubMedQA (PQA-L, Jin et al. 2019): yes / no / maybe accuracy on the expert-labelled questions.

DyFlow's task text (its ``benchmarks/pubmedqa.py``, dyflow-supplement §3.1) asks for ``[[yes]]`` /
``[[no]]`` / ``[[maybe]]``. Two extraction rules, option ``extraction`` (the rule is recorded per prediction):

- ``dyflow_release`` (default, what DyFlow's release scores with: ``judge_solution`` of its
  ``benchmarks/pubmedqa.py``): on the lower-cased text, ``yes`` if ``[[yes]]`` or any standalone "yes"
  appears anywhere, else ``no`` likewise, else ``maybe``, else no answer. Order, not position, decides:
  "[[no]] ... yes, the trial ..." is ``yes``. Standalone = no word character either side.
- ``last_label`` (ours): the last ``[[yes|no|maybe]]``; then, unless ``extract: strict``, the last
  ``answer/decision: label`` line, then the last standalone yes/no/maybe.

Split: DyFlow's 84 train / 251 test are drawn from the 1,000 labelled items with a seeded partition
(:mod:`agentic_repro.evaluators.partition`); DyFlow's own lists are not published.
"""
from __future__ import annotations

import re
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.partition import Partitioned
from agentic_repro.harness.types import Problem, Score

EXTRACTION_VERSION = "2"  # 2: the extraction option (dyflow_release default)
EXTRACTIONS = ("dyflow_release", "last_label")
LABELS = ("yes", "no", "maybe")
_BRACKET = re.compile(r"\[\[\s*(yes|no|maybe)\s*\]\]", re.IGNORECASE)
_LINE = re.compile(r"(?:answer|decision)\s*(?:is)?\s*[:=]?\s*\**\s*(yes|no|maybe)\b", re.IGNORECASE)
_WORD = re.compile(r"\b(yes|no|maybe)\b", re.IGNORECASE)
_RELEASE = {label: re.compile(rf"\[\[{label}\]\]|(?<!\w){label}(?!\w)") for label in LABELS}


def release_label(text: str) -> tuple[str | None, str]:
    """DyFlow's release rule: the first of yes, no, maybe (in that order) found anywhere in the text."""
    low = (text or "").lower()
    for label in LABELS:
        if _RELEASE[label].search(low):
            return label, "dyflow_release"
    return None, "none"


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

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        if cfg.get("extraction", "dyflow_release") not in EXTRACTIONS:  # refused before any problem runs
            raise ValueError(f"pubmedqa: extraction must be one of {EXTRACTIONS}, not {cfg['extraction']!r}")

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
        how = self.cfg.get("extraction", "dyflow_release")
        if how == "dyflow_release":
            return release_label(text)
        if how == "last_label":
            return extract_label(text, strict=self.cfg.get("extract", "flexible") == "strict")
        raise ValueError(f"pubmedqa: extraction must be one of {EXTRACTIONS}, not {how!r}")

    def answer_key(self, extracted: Any) -> Hashable | None:
        return None if extracted is None else str(extracted).lower()

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        return Score(float(pred == problem.gold), pred, {"rule": rule, "extraction_version": EXTRACTION_VERSION,
                                                         "extraction": self.cfg.get("extraction", "dyflow_release"),
                                                         "gold": problem.gold})
