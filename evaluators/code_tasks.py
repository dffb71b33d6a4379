"""HumanEval and MBPP: pass@1 by running the official tests in the sandbox.

Code execution is opt-in (``execute_code: true`` in the benchmark config), as in
lm-evaluation-harness; the generated code never runs in the harness process.

What a method sees of a code task (one protocol for every method, evalplus/MBPP convention):
the task text from :meth:`render` and nothing of the scored tests beyond what that text shows.
The *public tests* — the only tests the ``run_public_tests`` tool runs — are tests the task text
shows, keyed by task id (never by function name: 8 MBPP names repeat across problems):

* MBPP: the first ``test_list`` assert, appended to the task text ("Your code should pass this
  test:"), as the original MBPP prompt and evalplus' MBPP+ prompt do. It is also one of the three
  scored asserts; the other two (and ``test_setup_code``) stay hidden. Task 630 of the AFlow
  test split, whose (sanitized) canonical solution is broken, keeps the example in its text but not
  in the tool (``public_tests_failing_canonical`` of ``configs/benchmark/mbpp.yaml``, per split). AFlow's
  ``mbpp_public_test.jsonl`` is not used: it is keyed by function name, and where it differs from
  the first assert (5 of 427 rows) it is garbled (``set(`` rewritten as ``candidate(``).
* HumanEval: the prompt is the official one (signature + docstring examples). Public tests come
  from AFlow's ``humaneval_public_test.jsonl`` (keyed by ``HumanEval/N``) minus those that do not
  parse, those that fail the canonical solution (listed with the reason in
  ``public_tests_failing_canonical`` of ``configs/benchmark/humaneval.yaml``) and those whose
  arguments or expected value the prompt does not show (AFlow added some, e.g. ``tri(4)``). Each drop (both benchmarks) is recorded with its reason in
  ``Problem.fields["public_tests_dropped"]`` and in every score's details. ``check`` stays hidden.

``hidden_fields`` withholds the scored tests from the method's view of a problem.

A *model maker's protocol* (``configs/benchmark/humaneval_evalplus.yaml``: Qwen2.5-Coder's EvalPlus
chat evaluation, docs/reference-scores.md) changes three things, each a named option whose default is
the protocol above: ``prompt_strip`` (the task text is ``prompt.strip()``), ``extraction``
(``evalplus_chat``: the reply, which continues a prefilled code fence, up to its first fence, then
EvalPlus-style sanitizing) and ``solution_program`` (``completion``: the solution runs alone, as
EvalPlus runs a chat model's sample file, not appended to the prompt).
"""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any
from collections.abc import Hashable

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.data import data_dir, read_jsonl
from agentic_repro.evaluators.sandbox import Program, SandboxFailure, humaneval_program, mbpp_program, run_program_async
from agentic_repro.evaluators.scorers import code_key, require_execution, score_code
from agentic_repro.harness.types import Problem, Score


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.strip():
        return [str(v) for v in ast.literal_eval(value)]
    return []


class CodeBenchmark(Benchmark):
    domain = "code"

    def _limits(self) -> dict[str, Any]:
        s = self.cfg.get("sandbox", {}) or {}
        return {"timeout_s": float(s.get("timeout_s", 10.0)), "memory_mb": int(s.get("memory_mb", 1024))}

    def _require_execution(self) -> None:
        require_execution(self.cfg, self.name)

    def entry_point(self, problem: Problem) -> str:
        return problem.fields["entry_point"]

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        rule = self.cfg.get("extraction") or "fences"
        if rule == "evalplus_chat":
            return evalplus_chat_code(text or "", self.entry_point(problem)), rule
        if rule != "fences":
            raise ValueError(f"benchmark {self.name}: unknown extraction {rule!r} (fences | evalplus_chat)")
        return ex.extract_code(text or "", self.entry_point(problem))

    def answer_key(self, extracted: Any) -> Hashable | None:
        return code_key(extracted)

    def program(self, code: str, problem: Problem, tests: list[str] | None = None) -> str:
        raise NotImplementedError

    async def score(self, text: str, problem: Problem) -> Score:
        self._require_execution()
        code, rule = self.extract(text, problem)
        program = self.program(code, problem) if code.strip() else None
        return await score_code(code, rule, program, **self._limits(), record=self._public_record(problem))

    def _public_record(self, problem: Problem) -> dict[str, Any]:
        record: dict[str, Any] = {"public_tests": len(self.public_tests(problem))}
        if problem.fields.get("public_tests_dropped"):
            record["public_tests_dropped"] = problem.fields["public_tests_dropped"]
        return record

    # ---- public tests, offered to methods as a tool --------------------------------------------
    def public_tests(self, problem: Problem) -> list[str]:
        """The tests ``run_public_tests`` runs: exactly those the task text shows (module docstring)."""
        return list(problem.fields.get("public_tests") or [])

    async def run_public_tests(self, text: str, problem: Problem) -> dict[str, Any] | None:
        tests = self.public_tests(problem)
        if not tests:
            return None
        self._require_execution()
        code, _ = self.extract(text, problem)
        results = []
        for t in tests:
            res = await run_program_async(self.program(code, problem, [t]), **self._limits())
            if res.infrastructure:  # never reported to a method as its code failing
                raise SandboxFailure(res.detail)
            results.append({"test": t, "passed": res.passed, "status": res.status,
                            "error": res.stderr_tail[-300:]})
        return {"passed": sum(r["passed"] for r in results), "total": len(results), "results": results}


class HumanEval(CodeBenchmark):
    hidden_fields = ("test", "public_tests_dropped")

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self._aflow_public: dict[str, list[str]] | None = None

    def _aflow_public_tests(self) -> dict[str, list[str]]:
        """AFlow's public tests by task id (``HumanEval/N``), as the file writes them."""
        if self._aflow_public is None:
            table: dict[str, list[str]] = {}
            rel = self.cfg.get("public_tests_file")
            if rel:
                for row in read_jsonl(Path(data_dir()) / rel):
                    table.setdefault(str(row["problem_id"]), []).extend(_as_list(row["test"]))
            self._aflow_public = table
        return self._aflow_public

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {k: row[k] for k in ("prompt", "entry_point", "test")}
        task = _humaneval_key(str(row["task_id"]))
        shown, dropped = self.select_public_tests(task, fields["prompt"], fields["entry_point"],
                                                  self._aflow_public_tests().get(task, []))
        fields.update(public_tests=shown, public_tests_dropped=dropped)
        return Problem(id=str(row["task_id"]), index=row_index, fields=fields, gold=row.get("canonical_solution"),
                       benchmark=self.name)

    def select_public_tests(self, task: str, prompt: str, entry: str, tests: list[str]
                            ) -> tuple[list[str], list[dict[str, str]]]:
        """(kept tests, [{test, reason}] dropped) for one task; see the module docstring."""
        failing = _failing(self.cfg, task)
        kept, dropped = [], []
        for i, raw in enumerate(tests):
            test = raw.replace("candidate(", f"{entry}(")
            if i in failing:
                dropped.append({"test": test, "reason": "fails the canonical solution: " + failing[i]})
            elif not _parses(test):
                dropped.append({"test": test, "reason": "malformed: does not parse"})
            elif not _shown_in(test, prompt, entry):
                dropped.append({"test": test, "reason": "not shown in the prompt (its call or expected value)"})
            else:
                kept.append(test)
        return kept, dropped

    def render(self, problem: Problem) -> str:
        prompt = problem.fields["prompt"]
        return prompt.strip() if self.cfg.get("prompt_strip") else prompt  # Qwen's generate.py strips it

    def program(self, code: str, problem: Problem, tests: list[str] | None = None) -> str:
        f = problem.fields
        if tests is None:
            full = humaneval_program(f["prompt"], code, f["test"], f["entry_point"])
            mode = self.cfg.get("solution_program") or "prompt_plus_completion"
            if mode == "completion":  # EvalPlus runs a chat sample alone; the prompt stays the trusted prelude
                return Program(f"{code}\n{full.test}", prelude=full.prelude, solution=code, test=full.test,
                               entry_points=full.entry_points)
            if mode != "prompt_plus_completion":
                raise ValueError(f"benchmark {self.name}: unknown solution_program {mode!r} "
                                 "(prompt_plus_completion | completion)")
            return full
        return mbpp_program(f["prompt"] + "\n" + code, "[]", tests)


def evalplus_chat_code(reply: str, entry_point: str) -> str:
    """The program in a reply that continues a prefilled ```` ```python ```` fence, as Qwen's EvalPlus run takes it.

    ``generate.py`` keeps the text before the first fence (``impl.split("```")[0]``); ``evalplus.sanitize``
    then keeps the longest span of lines that parses and, of it, the imports and the definitions
    (functions, classes, assigned names) the entry point reaches; the rest (example calls, prints) goes.
    """
    code = reply.split("```")[0]
    tree = _longest_parsing_span(code)
    if tree is None:
        return code
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _defined_names(node):
            defs.setdefault(name, node)
    reach, todo = set(), [entry_point]
    while todo:
        name = todo.pop()
        if name in reach or name not in defs:
            continue
        reach.add(name)
        todo.extend(n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name))
    keep = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
            or any(name in reach for name in _defined_names(node))]
    return "\n".join(ast.unparse(node) for node in keep) + "\n" if keep else ""


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _longest_parsing_span(code: str) -> ast.Module | None:
    """The whole code parsed, else the longest run of its lines that parses (EvalPlus' code_extract)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    lines = code.split("\n")
    best: tuple[int, ast.Module] | None = None
    for i in range(len(lines)):
        for j in range(len(lines), i, -1):
            if best is not None and j - i <= best[0]:
                break
            try:
                tree = ast.parse("\n".join(lines[i:j]))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            best = (j - i, tree)
            break
    return best[1] if best else None


def _failing(cfg: dict[str, Any], task: str) -> dict[int, str]:
    """``public_tests_failing_canonical[task]`` of the config: {index of the test: why it is dropped}."""
    table = (cfg.get("public_tests_failing_canonical") or {}).get(task) or {}
    return {int(i): str(reason) for i, reason in dict(table).items()}


def _humaneval_key(task_id: str) -> str:
    """AFlow's test split writes ``HumanEval_N``; the official id (and its public-test file) ``HumanEval/N``."""
    return task_id.replace("HumanEval_", "HumanEval/")


def _parses(test: str) -> bool:
    try:
        return bool(test.strip()) and isinstance(ast.parse(test).body[0], ast.Assert)
    except (SyntaxError, IndexError):
        return False


def _squash(text: str) -> str:
    """Whitespace, quotes and case removed: docstrings write ``f(a) => true`` for ``f('a') == True``."""
    return "".join(text.split()).replace("'", "").replace('"', "").lower()


def _shown_in(test: str, prompt: str, entry: str) -> bool:
    """Whether ``prompt`` shows this ``assert entry(args) == expected``: every argument and the
    expected value appear in it, up to whitespace, quotes and case (docstrings write examples as
    ``f(x) ==> y``, ``For lst = x the output should be y`` or ``Input: x  Output: y``)."""
    node = ast.parse(test).body[0].test
    if not (isinstance(node, ast.Compare) and len(node.comparators) == 1 and isinstance(node.left, ast.Call)):
        return False
    call, expected = node.left, node.comparators[0]
    if not (isinstance(call.func, ast.Name) and call.func.id == entry) or call.keywords:
        return False
    text = _squash(prompt)
    return all(_squash(ast.unparse(part)) in text for part in [*call.args, expected])


class MBPP(CodeBenchmark):
    hidden_fields = ("test_list", "test_setup_code", "public_tests_dropped")

    def filter_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        lo, hi = (self.cfg.get("task_id_range") or [None, None])
        if lo is None:
            return rows
        return [r for r in rows if lo <= int(r["task_id"]) <= hi]

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        tests = _as_list(row["test_list"])
        entry = row.get("entry_point") or _function_name(tests[0])
        prompt = row.get("prompt") or row.get("text")
        examples = tests[:1]  # the example test: part of the task text (render)
        by_split = self.cfg.get("public_tests_failing_canonical") or {}
        failing = _failing({"public_tests_failing_canonical": by_split.get(self.cfg.get("split"))}, str(row["task_id"]))
        fields = {"prompt": prompt, "entry_point": entry, "test_list": tests,
                  "test_imports": _as_list(row.get("test_imports")), "test_setup_code": row.get("test_setup_code", ""),
                  "example_tests": examples,
                  "public_tests": [t for i, t in enumerate(examples) if i not in failing],
                  "public_tests_dropped": [{"test": t, "reason": "fails the canonical solution: " + failing[i]}
                                           for i, t in enumerate(examples) if i in failing]}
        return Problem(id=f"mbpp/{row['task_id']}", index=row_index, fields=fields, gold=row.get("code"),
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        f = problem.fields
        text = f["prompt"]
        for test in f["example_tests"]:  # as the original MBPP prompt: the function name and one example
            text += "\nYour code should pass this test:\n" + test
        return text

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
