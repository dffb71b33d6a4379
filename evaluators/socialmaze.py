"""SocialMaze Hidden Role Deduction (Xu et al. 2025), 6 players / 3 rounds: who is the criminal, and what is Player 1?

Data: the 300 items of ``../shared/datasets/socialmaze/`` (three of the authors' Hugging-Face-format
exports, see its README). **This is not DyFlow's split**: DyFlow's 87/262 items are unpublished; the
train/test parts here are a seeded 1:3 partition (75/225) of these 300 (:mod:`agentic_repro.evaluators.partition`).

Task text as DyFlow builds it (``benchmarks/socialmaze.py``): ``system_prompt + prompt`` and the
answer instruction of the config. Gold: ``Answer`` ("Final Criminal Is Player 2.\\nMy Role Is
Investigator."). Score 1 only if both the criminal's number and Player 1's role match, as DyFlow's
judge prompt requires; "Unknown" is wrong. Extraction (recorded per prediction): the last
``Final Criminal: N`` / ``Final Criminal Is Player N`` and the last ``My role: R`` / ``My Role Is R``
of the output (rules ``format`` when both are found, ``criminal-only`` / ``role-only`` / ``none``).
A malformed answer (a "player number" of thousands of digits) is a wrong answer, never a scorer crash.
A method sees ``system_prompt`` and ``prompt`` only: ``answer_text`` (the gold, read by the judge) and
``reasoning_process`` (the worked solution) are hidden fields.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators.base import Benchmark, DataInfo
from agentic_repro.evaluators.data import data_dir, problem_from_row, read_jsonl, select
from agentic_repro.evaluators.partition import files_digest, partition_rows
from agentic_repro.harness.types import Problem, Score

EXTRACTION_VERSION = "1"
ROLES = ("investigator", "criminal", "rumormonger", "lunatic", "unknown")
_CRIMINAL = re.compile(r"final\s+criminal\s*(?:is)?\s*[:：]?\s*\**\s*(?:player\s*)?#?\s*(\d+)", re.IGNORECASE)
_ROLE = re.compile(r"my\s+role\s*(?:is)?\s*[:：]?\s*\**\s*(" + "|".join(ROLES) + r")\b", re.IGNORECASE)


def parse_answer(text: str) -> tuple[dict[str, Any] | None, str]:
    """({"criminal": int|None, "role": str|None}, rule) from a model output or a gold ``Answer``."""
    crim = _CRIMINAL.findall(text or "")
    role = _ROLE.findall(text or "")
    # a player number of more than 9 digits names no player (and int() refuses > 4,300 digits): no number
    criminal = int(crim[-1]) if crim and len(crim[-1]) <= 9 else None
    out = {"criminal": criminal, "role": role[-1].lower() if role else None}
    if crim and role:
        return out, "format"
    if crim or role:
        return out, "criminal-only" if crim else "role-only"
    return None, "none"


class SocialMaze(Benchmark):
    domain = "qa"
    hidden_fields = ("reasoning_process", "answer_text")  # the worked solution and the gold Answer text

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        base = data_dir(root)
        rows: list[dict[str, Any]] = []
        for rel in self.cfg["files"]:
            path = base / rel
            for i, r in enumerate(read_jsonl(path)):
                rows.append({**r, "_id": f"socialmaze/{Path(rel).stem}/{i}"})
        if self.cfg.get("partition"):
            rows = partition_rows(rows, self.cfg["partition"], str(self.cfg["split"]), lambda r: r["_id"])
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        files = " + ".join(str(base / f) for f in self.cfg["files"])
        problems = [problem_from_row(self.make_problem, rows[i], pos, benchmark=self.name, source=files, position=i)
                    for pos, i in enumerate(idx)]
        paths = [base / f for f in self.cfg["files"]]
        return problems, DataInfo(file="+".join(map(str, paths)), sha256=files_digest(paths), total=len(rows),
                                  selected=len(problems), split=str(self.cfg["split"]))

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        gold, rule = parse_answer(row["Answer"])
        if rule != "format":
            raise ValueError(f"{row['_id']}: cannot read the gold Answer {row['Answer']!r}")
        return Problem(id=row["_id"], index=row_index,
                       fields={"system_prompt": row["system_prompt"], "prompt": row["prompt"],
                               "reasoning_process": row.get("reasoning_process"), "answer_text": row["Answer"]},
                       gold=gold, benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["system_prompt"] + problem.fields["prompt"]

    def judge_fields(self, problem: Problem) -> dict[str, str]:
        """What the LLM judge reads (DyFlow's prompt shows the gold ``Answer`` text)."""
        return {"question": self.render(problem), "ground_truth": problem.fields["answer_text"]}

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return parse_answer(text)

    def answer_key(self, extracted: Any) -> Hashable | None:
        if not extracted:
            return None
        return (extracted.get("criminal"), extracted.get("role"))

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        gold = problem.gold
        crim_ok = bool(pred) and pred["criminal"] == gold["criminal"]
        role_ok = bool(pred) and pred["role"] == gold["role"]
        return Score(float(crim_ok and role_ok), pred,
                     {"rule": rule, "extraction_version": EXTRACTION_VERSION, "criminal_correct": crim_ok,
                      "role_correct": role_ok, "gold": gold})
