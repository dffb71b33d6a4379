"""One MBPP/HumanEval protocol: the public tests are what the task text shows, keyed by task id,
every one passes its canonical solution, and the scored tests are out of the methods' reach."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentic_repro.evaluators.code_tasks import MBPP, HumanEval, _shown_in
from agentic_repro.evaluators.sandbox import mbpp_program, run_program_async
from agentic_repro.harness.types import Problem
from agentic_repro.harness.view import ProblemView

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "benchmark"
GATE = max(2, (os.cpu_count() or 1) * 2)


def _bench(cls: type, name: str, split: str) -> Any:
    cfg = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    cfg["split"] = split
    return cls(cfg)


def _problems(cls: type, name: str) -> tuple[Any, list[Problem]]:
    """Both AFlow splits (test + validate): every problem of the protocol."""
    out: list[Problem] = []
    for split in ("test", "validate"):
        bench = _bench(cls, name, split)
        out += bench.load()[0]
    return bench, out


async def _run_all(programs: list[str]) -> list[Any]:
    gate = asyncio.Semaphore(GATE)

    async def one(p: str) -> Any:
        async with gate:
            return await run_program_async(p, timeout_s=20)

    return await asyncio.gather(*(one(p) for p in programs))


# ---- MBPP -----------------------------------------------------------------------------------------

def test_mbpp_example_test_is_in_every_task_text_and_keyed_by_task_id() -> None:
    bench, problems = _problems(MBPP, "mbpp")
    assert len(problems) == 427
    for p in problems:
        expected = [] if p.id == "mbpp/630" else p.fields["test_list"][:1]  # its canonical solution is broken
        assert bench.public_tests(p) == expected
        assert p.fields["test_list"][0] in bench.render(p)
        assert not any(t in bench.render(p) for t in p.fields["test_list"][1:])  # the other asserts are not shown
    # names that repeat across problems no longer share tests: each problem gets its own first assert
    by_name: dict[str, list[Problem]] = {}
    for p in problems:
        by_name.setdefault(p.fields["entry_point"], []).append(p)
    repeated = {k: v for k, v in by_name.items() if len(v) > 1}
    assert {"replace_spaces", "square_Sum", "Split"} <= set(repeated)
    for group in repeated.values():
        for p in group:
            assert bench.public_tests(p) == p.fields["test_list"][:1]
    dropped = next(p for p in problems if p.id == "mbpp/630").fields["public_tests_dropped"]
    assert len(dropped) == 1 and "canonical solution is broken" in dropped[0]["reason"]
    assert len({tuple(bench.public_tests(p)) for p in repeated["square_Sum"]}) == len(repeated["square_Sum"])


def test_mbpp_hidden_fields_are_the_scored_tests() -> None:
    bench, problems = _problems(MBPP, "mbpp")
    view = ProblemView.of(problems[0], bench.hidden())
    assert "test_list" not in view.fields and "test_setup_code" not in view.fields
    assert view.fields["public_tests"] == problems[0].fields["test_list"][:1]
    assert set(view.fields) == {"prompt", "entry_point", "test_imports", "example_tests", "public_tests"}


def test_scored_asserts_are_not_reachable_through_the_public_tool() -> None:
    """A program that hard-codes the shown example passes the tool (it runs only that test) and fails
    the score (the hidden asserts); the tool takes no test argument."""
    bench = _bench(MBPP, "mbpp", "test")
    problem = next(p for p in bench.load()[0] if p.fields["entry_point"] == "tuple_to_int")
    cheat = "```python\ndef tuple_to_int(nums):\n    return 123\n```"

    async def main() -> tuple[Any, Any]:
        return await bench.run_public_tests(cheat, problem), await bench.score(cheat, problem)

    public, score = asyncio.run(main())
    assert public["passed"] == public["total"] == 1 and public["results"][0]["test"] == problem.fields["test_list"][0]
    assert score.value == 0.0
    tool = bench.tools(problem)[0]
    assert tool.name == "run_public_tests" and set(tool.parameters) == {"text"}


# ---- HumanEval -------------------------------------------------------------------------------------

def test_humaneval_public_tests_are_shown_in_the_prompt_and_drops_have_reasons() -> None:
    bench, problems = _problems(HumanEval, "humaneval")
    assert len(problems) == 164
    n_kept = 0
    for p in problems:
        for t in bench.public_tests(p):
            assert _shown_in(t, bench.render(p), p.fields["entry_point"]), (p.id, t)
            assert t not in p.fields["test"] or t in p.fields["prompt"]  # never a scored assert the prompt hides
            n_kept += 1
        for d in p.fields["public_tests_dropped"]:
            assert d["reason"] and d["test"] not in bench.public_tests(p)
    dropped = {p.id.replace("HumanEval_", "HumanEval/"): [d["reason"].split(":")[0] for d in p.fields["public_tests_dropped"]]
               for p in problems if p.fields["public_tests_dropped"]}
    for task in ("HumanEval/41", "HumanEval/53", "HumanEval/47", "HumanEval/116", "HumanEval/148"):
        assert "fails the canonical solution" in dropped[task], task
    assert "malformed" in dropped["HumanEval/33"]  # its second assert is cut off mid-list
    assert n_kept > 300
    view = ProblemView.of(problems[0], bench.hidden())
    assert "test" not in view.fields and "public_tests_dropped" not in view.fields and "public_tests" in view.fields


def test_every_public_test_passes_its_canonical_solution_and_the_failing_list_is_exact() -> None:
    """Every kept public test (MBPP and HumanEval) passes the canonical solution; every AFlow HumanEval
    test that parses and fails it is in ``public_tests_failing_canonical`` (and nothing else is)."""
    mbpp, mbpp_problems = _problems(MBPP, "mbpp")
    he, he_problems = _problems(HumanEval, "humaneval")
    raw = he._aflow_public_tests()
    failing_cfg = {task: {int(i) for i in v} for task, v in he.cfg["public_tests_failing_canonical"].items()}
    programs, labels = [], []
    for p in mbpp_problems:
        if mbpp.public_tests(p):
            programs.append(mbpp.program(p.gold, p, mbpp.public_tests(p)))
            labels.append(("mbpp", p.id, None))
        for d in p.fields["public_tests_dropped"]:  # a drop is justified: it does fail
            programs.append(mbpp.program(p.gold, p, [d["test"]]))
            labels.append(("mbpp-dropped", p.id, None))
    for p in he_problems:
        task = p.id.replace("HumanEval_", "HumanEval/")
        for i, t in enumerate(raw.get(task, [])):
            test = t.replace("candidate(", f"{p.fields['entry_point']}(")
            programs.append(mbpp_program(p.fields["prompt"] + p.gold, "[]", [test]))
            labels.append(("humaneval", task, (i, test)))
    results = asyncio.run(_run_all(programs))
    failing: dict[str, set[int]] = {}
    for (kind, task, extra), res in zip(labels, results):
        if kind.startswith("mbpp"):
            assert res.passed is (kind == "mbpp"), (kind, task, res)
            continue
        i, test = extra
        if res.passed:
            continue
        assert res.status in ("failed", "error"), (task, test, res)
        if res.status == "error" and "SyntaxError" in (res.detail + res.stderr_tail) or not test.strip():
            continue  # malformed: dropped as such
        failing.setdefault(task, set()).add(i)
    assert failing == failing_cfg
    kept = {(p.id.replace("HumanEval_", "HumanEval/"), t) for p in he_problems for t in he.public_tests(p)}
    for (kind, task, extra), res in zip(labels, results):
        if kind == "humaneval" and (task, extra[1]) in kept:
            assert res.passed, (task, extra[1], res)


def test_humaneval_tool_runs_only_kept_tests() -> None:
    bench = _bench(HumanEval, "humaneval", "validate")
    problems = {p.id: p for p in bench.load()[0]}
    p = problems.get("HumanEval/53") or next(iter(problems.values()))
    canonical = "```python\n" + p.fields["prompt"] + p.gold + "\n```"
    res = asyncio.run(bench.run_public_tests(canonical, p))
    if bench.public_tests(p):
        assert res is not None and res["passed"] == res["total"] == len(bench.public_tests(p))
    else:
        assert res is None


# ---- through the runner: what a method gets ----------------------------------------------------

async def probe(problem, ctx):  # a method that reports what it can see (used below)
    from agentic_repro.harness.types import Solution

    text = await ctx.ask(ctx.benchmark.prompt(problem, "{task}\n{answer_instruction}"), stage="answer")
    tool = await ctx.benchmark.run_public_tests(text, problem)
    return Solution(text, trace={"fields": sorted(problem.fields), "task": ctx.benchmark.render(problem),
                                 "tool": None if tool is None else [r["test"] for r in tool["results"]],
                                 "tool_passed": None if tool is None else tool["passed"]})


def test_runner_gives_methods_the_task_text_the_view_and_only_the_shown_tests(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    import json

    from tests.conftest import make_spec, run
    from tests.doubles import ScriptedBackbone

    data = Path(__file__).resolve().parents[1] / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data))
    bench = yaml.safe_load((CONFIGS / "mbpp.yaml").read_text())
    bench["limit"] = 2
    spec = make_spec(tmp_path, {"name": "probe", "solver": "tests.test_code_protocol:probe", "params": {}})
    spec = dataclasses.replace(spec, benchmark_cfg=bench, full_config={**spec.full_config, "benchmark": bench})
    answer = "```python\ndef tuple_to_int(nums):\n    return 123\n```"  # passes the shown example of mbpp/116 only
    run(spec, ScriptedBackbone(lambda messages, sampling: answer))
    preds = [json.loads(line) for line in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]
    first = next(p for p in preds if p["id"] == "mbpp/116")
    trace = first["trace"]
    assert "test_list" not in trace["fields"] and "public_tests" in trace["fields"]
    assert "assert tuple_to_int((1,2,3))==123" in trace["task"]
    assert trace["tool"] == ["assert tuple_to_int((1,2,3))==123"] and trace["tool_passed"] == 1
    assert first["score"] == 0.0  # the hidden asserts decide
    assert [c["name"] for c in first["tool_calls"]] == ["run_public_tests"]  # recorded in the trace


# ---- every method: the same visible example, and no test the prompt does not show ------------------

def _not_on_mbpp(name: str) -> str | None:
    """Why a method config cannot run on MBPP with a bare scripted backbone (None: it can).

    Each reason names where the method is tested instead; anything else runs here."""
    cfg = yaml.safe_load((CONFIGS.parent / "method" / f"{name}.yaml").read_text())
    params = cfg.get("params") or {}
    if "environment" in (cfg.get("requires") or []):
        return "acts in an environment (tests/test_agents*.py, tests/test_auq*.py)"
    if "artifact" in params:
        return "runs a workflow found by a search (tests/test_autoflow_*.py)"
    if params.get("evidence") == "required":
        return "a research agent: refuses a task without a search tool (tests/test_auq_deepresearch.py)"
    if params.get("designer_adapter"):
        return "needs a trained designer adapter (tests/test_dyflow_train*.py)"
    if params.get("prefill") and params.get("prefill_in_reply", True):
        return "a model maker's protocol: the reply must continue its prefilled turn (tests/test_reference_scores*.py)"
    return None


METHODS = [pytest.param(p.stem, marks=pytest.mark.skip(reason=_not_on_mbpp(p.stem))) if _not_on_mbpp(p.stem)
           else p.stem for p in sorted((CONFIGS.parent / "method").glob("*.yaml"))]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_prompt_shows_the_example_and_runs_only_it(method: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each configured method, on MBPP task 116 with a scripted backbone: its first prompt contains the
    problem's example test (the same one for every method, keyed by task id) and every test it runs
    through the tool is that test (DenoiseFlow's verifier and Self-Refine's feedback call it by default)."""
    import dataclasses
    import json

    from tests.conftest import compose, make_spec, run
    from tests.doubles import ScriptedBackbone

    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(Path(__file__).resolve().parents[1] / "data"))
    bench = yaml.safe_load((CONFIGS / "mbpp.yaml").read_text())
    bench["limit"] = 1
    method_cfg = compose([f"method={method}", "benchmark=mbpp"])["method"]  # as a run resolves it
    spec = make_spec(tmp_path, method_cfg)
    spec = dataclasses.replace(spec, benchmark_cfg=bench, full_config={**spec.full_config, "benchmark": bench,
                                                                        "method": method_cfg})
    example = "assert tuple_to_int((1,2,3))==123"
    program = "```python\ndef tuple_to_int(nums):\n    return int(''.join(map(str, nums)))\n```"
    backbone = ScriptedBackbone(lambda messages, sampling: f"The function below.\n{program}\nIt is correct.")
    run(spec, backbone)
    preds = [json.loads(line) for line in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 1 and preds[0]["id"] == "mbpp/116" and preds[0]["status"] == "ok", preds
    first = "\n".join(m["content"] for m in backbone.requests[0][0])
    assert example in first, (method, first[:500])
    for call in preds[0].get("tool_calls") or []:
        assert call["name"] == "run_public_tests"
        result = json.loads(call["result"]) if isinstance(call["result"], str) else call["result"]
        assert [r["test"] for r in result["results"]] == [example], (method, result)


# ---- the sandbox's own failures are errors, never a 0 ---------------------------------------------

def test_a_sandbox_that_cannot_judge_raises_instead_of_scoring_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """Privileges that cannot be dropped, and a benchmark test that does not run, say nothing
    about the code: the scorer and the public-test tool raise (the runner records the problem as
    an error), while a wrong solution still scores 0."""
    from agentic_repro.evaluators.sandbox import SandboxFailure
    from agentic_repro.evaluators.sandbox import launch

    bench = _bench(HumanEval, "humaneval", "validate")
    bench.cfg["execute_code"] = True
    p = bench.load()[0][0]
    canonical = "```python\n" + p.fields["prompt"] + p.gold + "\n```"
    wrong = "```python\n" + p.fields["prompt"] + "    return None\n```"
    assert asyncio.run(bench.score(canonical, p)).value == 1.0
    assert asyncio.run(bench.score(wrong, p)).value == 0.0
    if os.geteuid() == 0:
        monkeypatch.setitem(launch._PROBED, "privilege", "unavailable")
        with pytest.raises(SandboxFailure, match="unable to drop privileges"):
            asyncio.run(bench.score(canonical, p))
        monkeypatch.undo()
    import dataclasses
    broken = dataclasses.replace(p, fields={**p.fields, "test": p.fields["test"] + "\ndef check(:\n"})
    with pytest.raises(SandboxFailure, match="benchmark prelude or test does not run"):
        asyncio.run(bench.score(canonical, broken))
