"""LiveBench reasoning (White et al. 2025): spatial, web_of_lies_v2 and zebra_puzzle, 200 questions.

Each task is scored with **LiveBench's own ground-truth rule** for it (rules read in LiveBench's
``livebench/process_results/reasoning/<task>/utils.py``; re-implemented here, no code copied):

* ``spatial``: the last three ``**bold**`` spans; one equal to the answer (case-insensitive), or a
  number word (zero..twenty) equal to it, or, for the answers tetrahedra/tetrahedron/triangle/square,
  a bold span containing it and shorter than 2*len+5 characters → 1, else 0.
* ``web_of_lies_v2``: the last ``<solution>…</solution>`` (single-line); else the last three
  yes/no/unknown words among the bold spans (lower-cased, ',' and '.' removed) joined by ', '; else
  the last ``\\boxed{}``/``\\textbf{}``; else the last plain "yes, no, unknown" triple in the text.
  1 if that equals the answer, or holds exactly three yes/no/unknown and contains the answer.
* ``zebra_puzzle`` released before 2024-11-25 (``***X***`` format): the last ``***word***`` (else the
  last word of the text) equals the answer, or its number word, or it + " movies" → 1. From
  2024-11-25 (``<solution>a, b, c</solution>``): the answers come from the ``<solution>`` tags (several:
  the last n comma items), else the last ``\\boxed{}``, else the last line if it has n-1 commas; item i is
  right if the gold item (lower-cased, '-' as ' ') equals or is contained in the answer's item
  ('position' removed); the score is ``(all right + right/n) / 2`` — a partial credit in [0, 1].
  Faithful quirk: the old rule's ``***(\\w+)***`` cannot read a gold with a '-' or '&' (3 of the 50:
  "d&b", "police-officer", "security-guard"), so LiveBench itself never credits those; kept as is.

The headline is the mean of those per-question scores, as LiveBench reports. DyFlow itself scored
LiveBench with an LLM judge (its prompt is this config's ``judge.prompt``): ``judge_score`` beside.
Split: DyFlow's 50/150 is unpublished; a seeded partition (:mod:`agentic_repro.evaluators.partition`) of the 200.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark, DataInfo
from agentic_repro.evaluators.data import data_dir, problem_from_row, read_jsonl, select
from agentic_repro.evaluators.partition import files_digest, partition_rows
from agentic_repro.harness.types import Problem, Score

EXTRACTION_VERSION = "1"
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
_SOLUTION = re.compile(r"<solution>(.*?)</solution>")
_SOLUTION_BROKEN = re.compile(r"</solution>(.*?)</solution>")
ZEBRA_NEW_FORMAT_FROM = "2024-11-25"


def _solutions(text: str) -> list[str]:
    return _SOLUTION.findall(text) or _SOLUTION_BROKEN.findall(text)


def _last_boxed_text(text: str) -> str | None:
    found = ex.boxed_contents(text)
    return found[-1] if found else None


def score_spatial(gold: str, text: str) -> tuple[float, Any, str]:
    bold = re.findall(r"\*\*([^*]+)\*\*", text)
    g = gold.strip().lower()
    for word in [b.strip().lower() for b in bold[::-1][:3]]:
        if word == g:
            return 1.0, word, "bold"
        if _NUMBER_WORDS.get(word) == g:
            return 1.0, word, "bold-number-word"
        for shape in ("tetrahedra", "tetrahedron", "triangle", "square"):
            if g == shape and shape in word and len(word) < 2 * len(shape) + 5:
                return 1.0, word, "bold-shape"
    return 0.0, (bold[-1].strip().lower() if bold else None), "bold" if bold else "none"


def score_web_of_lies(gold: str, text: str) -> tuple[float, Any, str]:
    parsed, rule = None, "none"
    sols = _solutions(text)
    if sols:
        parsed, rule = sols[-1], "solution-tag"
    bold = re.findall(r"\*\*(.*?)\*\*", text)
    if parsed is None and bold:
        words = [w.lower().strip().replace(",", "").replace(".", "") for m in bold for w in m.split()]
        picked = [w for w in words if w in ("yes", "no", "unknown")][-3:]
        if picked:
            parsed, rule = ", ".join(picked), "bold"
    if parsed is None or not parsed.strip():
        t = text.replace("\\textbf{", "\\boxed{").replace("\\fbox{", "\\boxed{")
        boxed = _last_boxed_text(t)
        if boxed:
            parsed, rule = boxed, "boxed"
    if parsed is None:
        best, best_at = None, -1
        low = text.lower()
        for comb in itertools.product(("yes", "no", "unknown"), repeat=3):
            at = low.find(", ".join(comb))
            if at > best_at:
                best, best_at = ", ".join(comb), at
        if best is not None:
            parsed, rule = best, "plain-triple"
    g = gold.lower()
    ok = bool(parsed) and (parsed == g or (
        parsed.count("yes") + parsed.count("no") + parsed.count("unknown") == 3 and g in parsed))
    return float(ok), parsed, rule


def score_zebra_old(gold: str, text: str) -> tuple[float, Any, str]:
    bold = re.findall(r"\*\*\*(\w+)\*\*\*", text)
    if bold:
        word, rule = bold[-1], "triple-bold"
    else:
        words = re.findall(r"\b\w+\b", text)
        word, rule = (words[-1] if words else ""), "last-word"
    g = gold.lower()
    num_words = {str(i): w for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]) if i}
    ok = word.lower() == g or num_words.get(word, "").lower() == g or word.lower() + " movies" == g
    return float(ok), word or None, rule


def score_zebra_new(gold: str, text: str) -> tuple[float, Any, str]:
    gold_items = gold.split(",")
    matches, rule = _solutions(text), "solution-tag"
    if not matches:
        boxed = _last_boxed_text(text.replace("\\fbox{", "\\boxed{"))
        if boxed:
            matches, rule = [boxed.replace("\\text{", "").replace("}", "").replace("\\", "")], "boxed"
    if not matches:
        last = text.strip().split("\n")[-1]
        if last.count(",") == len(gold_items) - 1:
            matches, rule = [last], "last-line"
    if not matches:
        return 0.0, None, "none"
    if len(matches) > 1:
        items = [i for m in matches for i in m.split(",")][-len(gold_items):]
    else:
        items = matches[-1].split(",")
    right = 0
    for i, g in enumerate(gold_items):
        if i >= len(items):
            continue
        gw = g.strip().lower().replace("-", " ")
        pw = items[i].strip().lower().replace("-", " ").replace("position", "")
        right += gw == pw or gw in pw
    n = len(gold_items)
    return ((right == n) + right / n) / 2, [s.strip() for s in items], rule


class LiveBenchReasoning(Benchmark):
    domain = "reasoning"

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        base = data_dir(root)
        rows: list[dict[str, Any]] = []
        for rel in self.cfg["files"]:
            rows += read_jsonl(base / rel)
        if self.cfg.get("partition"):
            rows = partition_rows(rows, self.cfg["partition"], str(self.cfg["split"]), lambda r: r["question_id"])
        tasks = self.cfg.get("tasks")
        if tasks:  # after the partition: the split's questions of those tasks
            rows = [r for r in rows if r["task"] in tasks]
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        files = " + ".join(str(base / f) for f in self.cfg["files"])
        problems = [problem_from_row(self.make_problem, rows[i], pos, benchmark=self.name, source=files, position=i)
                    for pos, i in enumerate(idx)]
        paths = [base / f for f in self.cfg["files"]]
        return problems, DataInfo(file="+".join(map(str, paths)), sha256=files_digest(paths), total=len(rows),
                                  selected=len(problems), split=str(self.cfg["split"]))

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {"question": row["turns"][0], "task": row["task"], "release_date": row["livebench_release_date"]}
        return Problem(id=f"livebench/{row['task']}/{row['question_id']}", index=row_index, fields=fields,
                       gold=str(row["ground_truth"]), benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["question"]

    def _rule(self, problem: Problem):  # one of the score_* functions
        task = problem.fields["task"]
        if task == "spatial":
            return score_spatial, "spatial"
        if task == "web_of_lies_v2":
            return score_web_of_lies, "web_of_lies_v2"
        if task == "zebra_puzzle":
            if problem.fields["release_date"] < ZEBRA_NEW_FORMAT_FROM:
                return score_zebra_old, "zebra_puzzle_old"
            return score_zebra_new, "zebra_puzzle"
        raise ValueError(f"LiveBench task {task!r} has no scorer here (spatial, web_of_lies_v2, zebra_puzzle)")

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        fn, _ = self._rule(problem)
        _, parsed, rule = fn(problem.gold, text or "")
        return parsed, rule

    def answer_key(self, extracted: Any) -> Hashable | None:
        if extracted is None:
            return None
        if isinstance(extracted, list):
            return tuple(s.lower() for s in extracted)
        return str(extracted).strip().lower()

    async def score(self, text: str, problem: Problem) -> Score:
        fn, scorer = self._rule(problem)
        value, parsed, rule = fn(problem.gold, text or "")
        return Score(float(value), parsed, {"rule": rule, "scorer": scorer, "task": problem.fields["task"],
                                            "extraction_version": EXTRACTION_VERSION, "gold": problem.gold})
