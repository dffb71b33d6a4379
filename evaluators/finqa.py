"""FinQA (Chen et al., EMNLP 2021): numerical reasoning over financial reports (text + one table).

Scoring follows FinQA's official evaluation (``code/evaluate/evaluate.py`` of czyssrs/FinQA; rules
taken, no code copied): **execution accuracy** — the predicted program in FinQA's DSL is executed
and its result, rounded to 5 decimals, must equal ``qa.exe_ans`` exactly. The DSL: steps
``op(arg1, arg2)`` separated by ", "; ops add, subtract, multiply, divide, exp, greater (→ "yes"/"no"),
table_max/min/sum/average (arg1 = a row name of the table, its cells read as numbers after dropping
"$" and anything from "("); ``#k`` is step k's result; ``const_100`` is 100 and ``const_m1`` is -1;
numbers lose "," and "x%" is x/100. A malformed program or an unknown row scores 0, and so does
one whose value is not a real, finite number (``exp(-8, 0.5)`` is complex, ``multiply(1e308, 10)``
infinite), a reference that is not ``#k`` of an earlier step (``#x``, ``#-1``), or a table step over a
row with no cells: each is a wrong answer (extracted None, ``program_error`` says why), never a crash
of the scorer and never a number the official evaluation would not produce.

LLM methods usually answer with a number, so the extraction rules are (recorded per prediction):
``program`` (a ``Program: …`` line, executed), ``answer-line`` (``Answer: <number|yes|no>``),
``last-number`` (the last number of the output), ``none``. A number is compared like an executed
result (``numeric_match: official``: rounded to 5 decimals, equal); ``numeric_match: tolerant``
(a named deviation, recorded) also accepts x/100 or x·100 and a relative error ≤ ``rel_tol``. Both
verdicts are recorded in every score. FinQA's **program accuracy** is recorded beside it in every score
whose problem has a gold program (``program_correct``: symbolic equivalence with the gold program over the
gold's operands, sympy-simplified, as the release's ``equal_program``; an output without a program is not
program-correct, as in the official evaluation, where every prediction is a program).

Data: ``dataset/test.json`` (1,147 items, a JSON array) of czyssrs/FinQA; ``make data`` downloads it
and checks its git blob id. It is not in ``../shared/datasets``; without it the loader fails with one
line naming the file and the command.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark, DataInfo
from agentic_repro.evaluators.data import DataMissingError, data_dir, problem_from_row, select, sha256_file
from agentic_repro.harness.types import Problem, Score

EXTRACTION_VERSION = "1"
OPS = ("add", "subtract", "multiply", "divide", "exp", "greater",
       "table_max", "table_min", "table_sum", "table_average")
_STEP = re.compile(r"([a-z_]+)\(([^()]*)\)")
_PROGRAM_LINE = re.compile(r"program\s*[:=]\s*(.+)", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"answer\s*(?:is)?\s*[:=]\s*\**\s*([^\n]+)", re.IGNORECASE)


class ProgramError(ValueError):
    """A program that FinQA's evaluation counts as invalid (a 0, not an error)."""


def str_to_num(text: str) -> float | None:
    """FinQA's number reading: commas dropped; "x%" → x/100; const_N → N (const_m1 → -1); else None."""
    t = str(text).replace(",", "").strip()
    try:
        return float(t)
    except ValueError:
        pass
    if "%" in t:
        try:
            return float(t.replace("%", "")) / 100.0
        except ValueError:
            return None
    if t.startswith("const_"):
        c = t[len("const_"):]
        try:
            return -1.0 if c == "m1" else float(c)
        except ValueError:
            return None
    return None


def _row_numbers(cells: list[str]) -> list[float]:
    out = []
    for cell in cells:
        v = str_to_num(str(cell).replace("$", "").strip().split("(")[0].strip())
        if v is None:
            raise ProgramError(f"table cell {cell!r} is not a number")
        out.append(v)
    return out


def parse_program(text: str) -> list[tuple[str, str, str]]:
    """[(op, arg1, arg2)] of ``op(a, b), op(#0, c)``; structure as the official check (ops, two args)."""
    text = text.strip().rstrip(".").strip("`").strip()
    steps = _STEP.findall(text)
    if not steps or re.sub(r"[\s,]", "", _STEP.sub("", text)):
        raise ProgramError(f"not a FinQA program: {text[:80]!r}")
    out = []
    for op, args in steps:
        if op not in OPS:
            raise ProgramError(f"unknown op {op!r}")
        parts = [a.strip() for a in args.split(",")]
        if len(parts) != 2:
            raise ProgramError(f"{op} takes two arguments, got {len(parts)}")
        out.append((op, parts[0], parts[1]))
    return out


_REF = re.compile(r"#(\d{1,6})")


def _real(value: object, what: str) -> float:
    """``value`` as a finite real number, else :class:`ProgramError` (a wrong answer, not a scorer crash)."""
    if isinstance(value, complex) or not isinstance(value, (int, float)):
        raise ProgramError(f"{what} is not a real number: {value!r}")
    if not math.isfinite(value):
        raise ProgramError(f"{what} is not finite: {value!r}")
    return float(value)


def execute_program(program: str, table: list[list[str]]) -> float | str:
    """The program's result (rounded to 5 decimals, or "yes"/"no"); :class:`ProgramError` if invalid."""
    results: list[float | str] = []
    rows = {str(r[0]): r[1:] for r in table if r}
    res: float | str = "n/a"
    for i, (op, a1, a2) in enumerate(parse_program(program)):
        def arg(a: str) -> float | str:
            if a.startswith("#"):
                ref = _REF.fullmatch(a)
                if ref is None:
                    raise ProgramError(f"step {i}: {a!r} is not a step reference #k")
                k = int(ref.group(1))
                if k >= i:
                    raise ProgramError(f"step {i} refers to #{k}")
                return results[k]
            v = str_to_num(a)
            if v is None:
                raise ProgramError(f"argument {a!r} is not a number")
            return _real(v, f"argument {a!r}")
        if op.startswith("table_"):
            if a1 not in rows:
                raise ProgramError(f"no table row named {a1!r}")
            nums = _row_numbers(rows[a1])
            if not nums:
                raise ProgramError(f"table row {a1!r} has no cells")
            res = {"table_max": max, "table_min": min, "table_sum": sum}.get(op, lambda v: sum(v) / len(v))(nums)
        else:
            x, y = arg(a1), arg(a2)
            if isinstance(x, str) or isinstance(y, str):
                raise ProgramError("arithmetic on a yes/no result")
            try:
                res = {"add": lambda: x + y, "subtract": lambda: x - y, "multiply": lambda: x * y,
                       "divide": lambda: x / y, "exp": lambda: x ** y,
                       "greater": lambda: "yes" if x > y else "no"}[op]()
            except (ZeroDivisionError, OverflowError) as exc:
                raise ProgramError(str(exc)) from exc
        if not isinstance(res, str):
            res = _real(res, f"step {i} ({op}({a1}, {a2}))")   # exp(-8, 0.5) is complex: a wrong answer
        results.append(res)
    if isinstance(res, float):
        return round(res, 5)
    return res


_NUMBER_PCT = re.compile(r"(-?)\s?\$?\s?(\d[\d,]*(?:\.\d+)?|\.\d+)\s*(%?)")


def program_equivalent(gold: str, pred: str) -> bool:
    """FinQA's program accuracy: both programs as symbolic expressions over the gold program's operands
    (each distinct number/constant and each table step a symbol, in order of appearance in the gold),
    simplified with sympy and compared. An operand the gold does not use, a forward ``#k`` or a
    malformed program → False."""
    import sympy

    try:
        gold_steps, pred_steps = parse_program(gold), parse_program(pred)
    except ProgramError:
        return False
    symbols: dict[str, Any] = {}

    def sym(key: str) -> Any:
        if key not in symbols:
            symbols[key] = sympy.Symbol(f"a{len(symbols)}")
        return symbols[key]

    for op, a1, a2 in gold_steps:  # the gold fixes the symbol table
        if op.startswith("table_"):
            sym(f"{op}({a1}, {a2})")
        else:
            for a in (a1, a2):
                if not a.startswith("#"):
                    sym(a)

    def build(steps: list[tuple[str, str, str]]) -> Any:
        done: list[Any] = []
        for i, (op, a1, a2) in enumerate(steps):
            if op.startswith("table_"):
                key = f"{op}({a1}, {a2})"
                if key not in symbols:
                    raise ProgramError("table step not in the gold")
                done.append(symbols[key])
                continue
            args = []
            for a in (a1, a2):
                if a.startswith("#"):
                    ref = _REF.fullmatch(a)
                    if ref is None or int(ref.group(1)) >= i:
                        raise ProgramError("not a reference to an earlier step")
                    args.append(done[int(ref.group(1))])
                elif a in symbols:
                    args.append(symbols[a])
                else:
                    raise ProgramError("operand not in the gold")
            x, y = args
            done.append({"add": lambda: x + y, "subtract": lambda: x - y, "multiply": lambda: x * y,
                         "divide": lambda: x / y, "exp": lambda: x ** y,
                         "greater": lambda: sympy.Function("greater")(x, y)}[op]())
        return done[-1]

    try:
        g = build(gold_steps)
        p = build(pred_steps)
    except (ProgramError, ValueError, IndexError):
        return False
    return bool(sympy.simplify(g) == sympy.simplify(p))


def _as_answer(raw: str) -> float | str | None:
    """An answer line's value: yes/no, or its first number ("14.1%" → 0.141, "$1,200" → 1200)."""
    t = raw.strip().strip("*").strip().rstrip(".").lower()
    if t in ("yes", "no"):
        return t
    m = _NUMBER_PCT.search(raw.replace("\u2212", "-"))
    return None if m is None else str_to_num(m.group(1) + m.group(2) + m.group(3))


def extract_answer(text: str, table: list[list[str]]) -> tuple[float | str | None, str, dict[str, Any]]:
    """(value, rule, extra) following the module's rule order."""
    text = text or ""
    progs = _PROGRAM_LINE.findall(text)
    if progs:
        try:
            return execute_program(progs[-1], table), "program", {"program": progs[-1].strip()}
        except ProgramError as exc:
            return None, "program", {"program": progs[-1].strip(), "program_error": str(exc)}
    lines = _ANSWER_LINE.findall(text)
    if lines:
        v = _as_answer(lines[-1])
        if v is not None:
            return v, "answer-line", {}
    nums = ex._numbers(text)
    if nums:
        v = str_to_num(nums[-1].replace("$", ""))
        if v is not None:
            return v, "last-number", {}
    return None, "none", {}


def official_match(pred: float | str | None, gold: float | str) -> bool:
    if pred is None:
        return False
    if isinstance(gold, str) or isinstance(pred, str):
        return str(pred).lower() == str(gold).lower()
    return round(float(pred), 5) == round(float(gold), 5)


def tolerant_match(pred: float | str | None, gold: float | str, rel_tol: float) -> bool:
    if official_match(pred, gold):
        return True
    if pred is None or isinstance(pred, str) or isinstance(gold, str):
        return False
    return any(math.isclose(c, float(gold), rel_tol=rel_tol, abs_tol=1e-5) for c in (pred, pred / 100, pred * 100))


def render_table(table: list[list[str]]) -> str:
    return "\n".join(" | ".join(str(c) for c in row) for row in table)


class FinQA(Benchmark):
    domain = "math"
    hidden_fields = ("program", "gold_inds")

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        split = str(self.cfg["split"])
        rel = (self.cfg.get("splits") or {}).get(split)
        if not rel:
            raise ValueError(f"benchmark {self.name}: split {split!r} is not available; choose one of "
                             f"{sorted(k for k, v in (self.cfg.get('splits') or {}).items() if v)}")
        path = Path(rel) if Path(rel).is_absolute() else data_dir(root) / rel
        if not path.is_file():
            raise DataMissingError(f"FinQA file {path} is missing: run `make data` with internet access (it downloads "
                                   "czyssrs/FinQA dataset/test.json and checks its git blob id); it is not in "
                                   "../shared/datasets")
        rows = json.loads(path.read_text(encoding="utf-8"))
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        problems = [problem_from_row(self.make_problem, rows[i], pos, benchmark=self.name, source=path, position=i)
                    for pos, i in enumerate(idx)]
        return problems, DataInfo(file=str(path), sha256=sha256_file(path), total=len(rows),
                                  selected=len(problems), split=split)

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        qa = row["qa"]
        gold = qa["exe_ans"]
        fields = {"pre_text": list(row.get("pre_text") or []), "post_text": list(row.get("post_text") or []),
                  "table": [list(map(str, r)) for r in row["table"]], "question": qa["question"],
                  "program": qa.get("program"), "gold_inds": qa.get("gold_inds")}
        return Problem(id=f"finqa/{row['id']}", index=row_index, fields=fields,
                       gold=gold if isinstance(gold, str) else float(gold), benchmark=self.name)

    def render(self, problem: Problem) -> str:
        f = problem.fields
        return (" ".join(f["pre_text"]) + "\n\nTable:\n" + render_table(f["table"]) + "\n\n"
                + " ".join(f["post_text"]) + f"\n\nQuestion: {f['question']}")

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        value, rule, _ = extract_answer(text, problem.fields["table"])
        return value, rule

    def answer_key(self, extracted: Any) -> Hashable | None:
        if extracted is None:
            return None
        return extracted if isinstance(extracted, str) else round(float(extracted), 5)

    async def score(self, text: str, problem: Problem) -> Score:
        mode = str(self.cfg.get("numeric_match", "official"))
        if mode not in ("official", "tolerant"):
            raise ValueError(f"benchmark.numeric_match={mode!r}: choose official (FinQA's evaluation) or tolerant")
        rel_tol = float(self.cfg.get("rel_tol", 0.01))
        value, rule, extra = extract_answer(text, problem.fields["table"])
        if problem.fields.get("program"):  # FinQA's program accuracy, recorded beside: no program is not correct
            extra["program_correct"] = "program" in extra and program_equivalent(problem.fields["program"],
                                                                                 extra["program"])
        verdicts = {"official": official_match(value, problem.gold),
                    "tolerant": tolerant_match(value, problem.gold, rel_tol)}
        return Score(float(verdicts[mode]), value, {"rule": rule, "numeric_match": mode, "rel_tol": rel_tol,
                                                    "verdicts": verdicts, "extraction_version": EXTRACTION_VERSION,
                                                    "gold": problem.gold, **extra})
