"""StrategyQA (Geva et al. 2021): yes/no accuracy on implicit multi-hop questions.

Splits (``configs/benchmark/strategyqa.yaml``): the official test labels are not public, so

* ``dev`` (default): the 229-question dev set of the authors' unofficial 90/10 split
  (eladsegal/strategyqa), taken from the labelled 2,290-question file by **question text** (the two
  files share no qid); every one of the 229 must be found, else the loader fails;
* ``train``: the other 2,061 labelled questions (the only part DPO/training examples may come from);
* ``all``: all 2,290 labelled questions (BIG-bench's ``strategyqa``, as CoT/Self-Consistency use it).

Extraction rules, in order (recorded per prediction): ``answer-line`` (the last ``Answer: yes|no``,
true/false accepted), ``last-word`` (the last standalone yes/no/true/false), else ``none`` (a 0).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators.base import Benchmark, DataInfo
from agentic_repro.evaluators.data import data_dir, problem_from_row, read_jsonl, select, sha256_file
from agentic_repro.evaluators.partition import files_digest
from agentic_repro.harness.types import Problem, Score

EXTRACTION_VERSION = "1"
_LINE = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*\**\s*(yes|no|true|false)\b", re.IGNORECASE)
_WORD = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_AS_BOOL = {"yes": True, "true": True, "no": False, "false": False}


def extract_yes_no(text: str) -> tuple[bool | None, str]:
    for rule, pattern in (("answer-line", _LINE), ("last-word", _WORD)):
        found = pattern.findall(text or "")
        if found:
            return _AS_BOOL[found[-1].lower()], rule
    return None, "none"


def _gold(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1")


class StrategyQA(Benchmark):
    domain = "qa"
    hidden_fields = ("facts", "decomposition", "evidence")  # the annotated reasoning gives the answer away

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        base = data_dir(root)
        labelled = base / self.cfg["files"]["labelled"]
        rows = read_jsonl(labelled)
        split = str(self.cfg["split"])
        if split not in ("dev", "train", "all"):
            raise ValueError(f"benchmark {self.name}: split {split!r}: choose dev, train or all")
        digest = sha256_file(labelled)
        if split != "all":
            dev_path = base / self.cfg["files"]["dev"]
            dev_questions = [r["question"] for r in read_jsonl(dev_path)]
            by_question = {r["question"]: r for r in rows}
            missing = [q for q in dev_questions if q not in by_question]
            if missing:
                raise ValueError(f"benchmark {self.name}: {len(missing)} dev question(s) of {dev_path} are not in "
                                 f"{labelled} (join by question text), e.g. {missing[0]!r}")
            wanted = set(dev_questions)
            rows = [r for r in rows if (r["question"] in wanted) == (split == "dev")]
            digest = files_digest([labelled, dev_path])
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        problems = [problem_from_row(self.make_problem, rows[i], pos, benchmark=self.name, source=labelled,
                                     position=i) for pos, i in enumerate(idx)]
        return problems, DataInfo(file=str(labelled), sha256=digest, total=len(rows), selected=len(problems),
                                  split=split)

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {"question": row["question"], "term": row.get("term"), "description": row.get("description"),
                  "facts": row.get("facts"), "decomposition": row.get("decomposition"),
                  "evidence": row.get("evidence")}
        return Problem(id=f"strategyqa/{row['qid']}", index=row_index, fields=fields, gold=_gold(row["answer"]),
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return f"Question: {problem.fields['question']}"

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return extract_yes_no(text)

    def answer_key(self, extracted: Any) -> Hashable | None:
        return None if extracted is None else bool(extracted)

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        return Score(float(pred is not None and pred == problem.gold), pred,
                     {"rule": rule, "extraction_version": EXTRACTION_VERSION, "gold": problem.gold})
