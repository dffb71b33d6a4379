"""HumanEval and MBPP: pass@1 by running the official tests in the sandbox.

Code execution is opt-in (``execute_code: true`` in the benchmark config), as in
lm-evaluation-harness; the generated code never runs in the harness process.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Hashable

from evaluators import extract as ex
from evaluators.base import Benchmark
from evaluators.data import data_dir, read_jsonl
from evaluators.sandbox import humaneval_program, mbpp_program, run_program_async
from harness.types import Problem, Score


class CodeExecutionDisabled(RuntimeError):
    pass


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.strip():
        return [str(v) for v in ast.literal_eval(value)]
    return []


class CodeBenchmark(Benchmark):
    domain = "code"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self._public: dict[str, list[str]] | None = None

    def _limits(self) -> dict[str, Any]:
        s = self.cfg.get("sandbox", {}) or {}
        return {"timeout_s": float(s.get("timeout_s", 10.0)), "memory_mb": int(s.get("memory_mb", 1024))}

    def _require_execution(self) -> None:
        if not self.cfg.get("execute_code", False):
            raise CodeExecutionDisabled(
                f"benchmark {self.name} scores by running generated code, which is off: "
                f"set benchmark.execute_code=true to allow it (it runs in a sandboxed subprocess)")

    def entry_point(self, problem: Problem) -> str:
        return problem.fields["entry_point"]

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return ex.extract_code(text or "", self.entry_point(problem))

    def answer_key(self, extracted: Any) -> Hashable | None:
        if not extracted:
            return None
        try:  # formatting-insensitive identity of a program
            return ast.dump(ast.parse(str(extracted)))
        except SyntaxError:
            return " ".join(str(extracted).split())

    def program(self, code: str, problem: Problem, tests: list[str] | None = None) -> str:
        raise NotImplementedError

    async def score(self, text: str, problem: Problem) -> Score:
        self._require_execution()
        code, rule = self.extract(text, problem)
        if not code.strip():
            return Score(0.0, code, {"rule": rule, "status": "empty"})
        res = await run_program_async(self.program(code, problem), **self._limits())
        return Score(float(res.passed), code, {"rule": rule, "status": res.status,
                                               "duration_s": round(res.duration_s, 3),
                                               "stderr_tail": res.stderr_tail[-500:]})

    # ---- public tests, offered to methods as a tool --------------------------------------------
    def _public_table(self) -> dict[str, list[str]]:
        if self._public is None:
            rel = self.cfg.get("public_tests_file")
            table: dict[str, list[str]] = {}
            if rel:
                for row in read_jsonl(Path(data_dir()) / rel):
                    key = str(row.get("problem_id") or row.get("entry_point"))
                    table.setdefault(key, []).extend(_as_list(row["test"]))
            self._public = table
        return self._public

    async def run_public_tests(self, text: str, problem: Problem) -> dict[str, Any] | None:
        tests = self.public_tests(problem)
        if not tests:
            return None
        self._require_execution()
        code, _ = self.extract(text, problem)
        results = []
        for t in tests:
            res = await run_program_async(self.program(code, problem, [t]), **self._limits())
            results.append({"test": t, "passed": res.passed, "status": res.status,
                            "error": res.stderr_tail[-300:]})
        return {"passed": sum(r["passed"] for r in results), "total": len(results), "results": results}


class HumanEval(CodeBenchmark):
    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {k: row[k] for k in ("prompt", "entry_point", "test")}
        return Problem(id=str(row["task_id"]), index=row_index, fields=fields, gold=row.get("canonical_solution"),
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["prompt"]

    def public_tests(self, problem: Problem) -> list[str]:
        # AFlow's public tests file keys HumanEval by 'HumanEval/N'; its test split writes 'HumanEval_N'.
        key = problem.id.replace("HumanEval_", "HumanEval/")
        return [t.replace("candidate(", f"{self.entry_point(problem)}(") for t in self._public_table().get(key, [])]

    def program(self, code: str, problem: Problem, tests: list[str] | None = None) -> str:
        f = problem.fields
        if tests is None:
            return humaneval_program(f["prompt"], code, f["test"], f["entry_point"])
        return mbpp_program(f["prompt"] + "\n" + code, "[]", tests)


class MBPP(CodeBenchmark):
    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        lo, hi = (self.cfg.get("task_id_range") or [None, None])
        if lo is None:
            return rows
        return [r for r in rows if lo <= int(r["task_id"]) <= hi]

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        tests = _as_list(row["test_list"])
        entry = row.get("entry_point") or _function_name(tests[0])
        prompt = row.get("prompt") or row.get("text")
        fields = {"prompt": prompt, "entry_point": entry, "test_list": tests,
                  "test_imports": _as_list(row.get("test_imports")), "test_setup_code": row.get("test_setup_code", ""),
                  "shows_test": "prompt" not in row}
        return Problem(id=f"mbpp/{row['task_id']}", index=row_index, fields=fields, gold=row.get("code"),
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        f = problem.fields
        text = f["prompt"]
        if f["shows_test"]:  # the original MBPP prompt shows one test so the function name is known
            text += "\nYour code should pass this test:\n" + f["test_list"][0]
        return text

    def public_tests(self, problem: Problem) -> list[str]:
        f = problem.fields
        if f["shows_test"]:
            return f["test_list"][:1]
        return [t.replace("candidate(", f"{f['entry_point']}(") for t in self._public_table().get(f["entry_point"], [])]

    def program(self, code: str, problem: Problem, tests: list[str] | None = None) -> str:
        f = problem.fields
        return mbpp_program(code, json.dumps(f["test_imports"]), tests if tests is not None else f["test_list"],
                            f.get("test_setup_code") or "")


def _function_name(test: str) -> str:
    """The function an MBPP assert calls (``assert foo(1) == 2`` → ``foo``)."""
    node = ast.parse(test.strip())
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            return sub.func.id
    raise ValueError(f"cannot find the function name in MBPP test {test!r}")
