"""AFlow's operators (baselines/autoflow/operators.py) with the scripted double, through the runner: the released
prompts go out, the released output keys come back, repeated prompts are distinct samples, Programmer runs its
code in the sandbox and Test runs only the visible tests."""
from __future__ import annotations

import json
from typing import Any

from agentic_repro.baselines.autoflow import operators as O
from agentic_repro.harness.llm import request_seed
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.types import Solution
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_baselines_multiagent import CodeEchoBenchmark, code_spec


async def probe(problem, ctx, *, case: str) -> Solution:
    """A method that calls one operator scenario and returns what it gave (in the trace)."""
    ops = O.Ops(ctx, role=None, temperature=1.0)
    q = ctx.benchmark.render(problem)
    if case == "custom":
        outs = [await O.custom(ops, q, "Solve: ") for _ in range(3)]
        res: Any = [o["response"] for o in outs]
    elif case == "cross_stage":
        a = await O.generate_cot(ops, q, "Think.")
        b = await O.multi_generate_cot(ops, q, "Think.")
        res = [a["response"], *b["response"]]
    elif case == "bare_ctx":
        outs = [await O.custom(ctx, q, "Solve: ") for _ in range(2)]
        res = [o["response"] for o in outs]
    elif case == "answer_generate":
        res = await O.answer_generate(ops, q)
    elif case == "sc_ensemble":
        res = await O.sc_ensemble(ops, ["ANSWER: 1", "ANSWER: 2", "ANSWER: 3"], q)
    elif case == "md_ensemble":
        res = await O.md_ensemble(ops, ["ANSWER: 1", "ANSWER: 2"], q, vote_count=5)
    elif case == "review_revise":
        rv = await O.review(ops, q, "ANSWER: 9")
        rs = await O.revise(ops, q, "ANSWER: 9", rv["feedback"])
        res = {"review": rv, "revise": rs}
    elif case == "format":
        res = await O.format_answer(ops, q, "long text ANSWER: 4")
    elif case == "self_refine":
        res = await O.self_refine(ops, q, "ANSWER: 5")
    elif case == "early_stop":
        res = await O.early_stop(ops)
    elif case == "multi_cot":
        res = await O.multi_generate_cot(ops, q, "Think.")
    elif case == "programmer":
        res = await O.programmer(ops, q, "None")
    elif case == "code_generate":
        res = await O.custom_code_generate(ops, q, "f", "Write f. ")
    elif case == "test":
        res = await O.test(ops, q, "```python\ndef f():\n    return 3\n```", "f", test_loop=2)
    else:
        raise ValueError(case)
    return Solution("ANSWER: 0", trace={"result": res, "ops": ops.trace})


def go(tmp_path, case: str, script, *, code: bool = False):
    method = {"name": "probe", "solver": "tests.test_autoflow_operators:probe", "params": {"case": case}}
    spec = code_spec(tmp_path, method) if code else make_spec(tmp_path, method, limit=1)
    bb = ScriptedBackbone(script)
    run(spec, bb)
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "ok", pred.get("error")
    json.dumps(pred["trace"])
    return pred, bb


def prompts(bb) -> list[str]:
    return [m[-1]["content"] for m, _, _ in bb.requests]


def sample_index(sampling: dict[str, Any]) -> int:
    return next(i for i in range(20) if request_seed(42, i) == sampling["seed"])


def test_custom_is_instruction_plus_input_and_repeats_are_distinct_samples(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "custom", lambda m, s: f"sample seed {s['seed']}")
    assert prompts(bb) == ["Solve: What is 0+0?"] * 3
    assert sorted(sample_index(s) for _, s, _ in bb.requests) == [0, 1, 2]
    assert len(set(pred["trace"]["result"])) == 3
    assert all(s["temperature"] == 1.0 for _, s, _ in bb.requests)
    assert set(pred["cost_by_stage"]) == {"Custom"}


def test_one_prompt_in_two_stages_is_still_distinct_samples(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "cross_stage", lambda m, s: f"seed {s['seed']}")
    assert sorted(sample_index(s) for _, s, _ in bb.requests) == [0, 1, 2, 3]
    assert len(set(pred["trace"]["result"])) == 4


def test_a_bare_problem_context_still_counts_repeats(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "bare_ctx", lambda m, s: f"seed {s['seed']}")
    assert sorted(sample_index(s) for _, s, _ in bb.requests) == [0, 1]


def test_answer_generate_prompt_and_xml_fields(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "answer_generate", lambda m, s: "<thought>0+0</thought>\n<answer>0</answer>")
    p = prompts(bb)[0]
    assert p.startswith("\nThink step by step and solve the problem.") and "Your task: What is 0+0?" in p
    assert "<thought>content</thought>\n<answer>content</answer>" in p and "### Response format" in p
    assert pred["trace"]["result"]["answer"] == "0" and pred["trace"]["result"]["thought"] == "0+0"


def test_sc_ensemble_letters_and_choice(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "sc_ensemble", lambda m, s: "<thought>B twice</thought><solution_letter>b</solution_letter>")
    p = prompts(bb)[0]
    assert "A: \nANSWER: 1\n\n\nB: \nANSWER: 2\n\n\nC: \nANSWER: 3" in p and "most consistent solution" in p
    assert pred["trace"]["result"]["response"] == "ANSWER: 2" and not pred["trace"]["result"]["fallback"]


def test_sc_ensemble_unreadable_letter_falls_back_and_says_so(tmp_path, tiny_data):
    pred, _ = go(tmp_path, "sc_ensemble", lambda m, s: "<solution_letter>Z</solution_letter>")
    r = pred["trace"]["result"]
    assert r["response"] == "ANSWER: 1" and r["fallback"] is True and pred["trace"]["ops"][0]["fallback"]


def test_md_ensemble_votes_over_shuffled_rounds(tmp_path, tiny_data):
    # always pick the candidate whose text is "ANSWER: 2", wherever the shuffle put it
    def script(m, s):
        p = m[-1]["content"]
        return "<solution_letter>A</solution_letter>" if "A: \nANSWER: 2" in p else "<solution_letter>B</solution_letter>"
    pred, bb = go(tmp_path, "md_ensemble", script)
    assert len(bb.requests) == 5
    assert pred["trace"]["result"]["solution"] == "ANSWER: 2"
    assert pred["trace"]["ops"][0]["picks"] == [1] * 5


def test_review_bool_and_revise_solution(tmp_path, tiny_data):
    def script(m, s):
        p = m[-1]["content"]
        if "review the solution's correctness" in p:
            return "<review_result>False</review_result><feedback>9 is wrong</feedback>"
        assert "feedback: 9 is wrong" in p and "<solution>content</solution>" in p
        return "<solution>ANSWER: 0</solution>"
    pred, bb = go(tmp_path, "review_revise", script)
    r = pred["trace"]["result"]
    assert r["review"] == {"review_result": False, "feedback": "9 is wrong"}
    assert r["revise"] == {"solution": "ANSWER: 0"}
    assert set(pred["cost_by_stage"]) == {"Review", "Revise"}


def test_format_self_refine_early_stop(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "format", lambda m, s: "4")
    assert "please extract a short and concise answer" in prompts(bb)[0]
    assert pred["trace"]["result"] == {"solution": "4"}
    pred, bb = go(tmp_path / "r", "self_refine", lambda m, s: "refined ANSWER: 0")
    assert "You are an assistant specialized in refining solutions" in prompts(bb)[0]
    assert pred["trace"]["result"] == {"response": "refined ANSWER: 0"}
    pred, bb = go(tmp_path / "e", "early_stop", lambda m, s: "x")
    assert pred["trace"]["result"] == {"terminate": True} and bb.requests == []


def test_self_refine_returns_the_program_on_code_as_maas_humaneval_template(tmp_path, tiny_data):
    # MaAS HumanEval operator.py SelfRefine: code_fill (GSM8K/MATH: single_fill, the raw text, above)
    pred, bb = go(tmp_path, "self_refine",
                  lambda m, s: "Refined:\n```python\ndef f():\n    return 5\n```\nDone.", code=True)
    assert "You are an assistant specialized in refining solutions" in prompts(bb)[0]
    assert pred["trace"]["result"]["response"].strip() == "def f():\n    return 5"


def test_multi_generate_cot_is_three_distinct_cot_samples(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "multi_cot", lambda m, s: f"cot {s['seed']}")
    assert len(bb.requests) == 3 and len(set(pred["trace"]["result"]["response"])) == 3
    p = prompts(bb)[0]
    assert "Mathematical Reasoning Instruction\nThink.\n\nCurrent Problem:\nWhat is 0+0?" in p
    assert "\\boxed{-2}, \\boxed{2}" in p and "\\frac{1}{3}" in p   # MaAS's text, braces intact


def test_programmer_runs_solve_in_the_sandbox_and_feeds_errors_back(tmp_path, tiny_data):
    def script(m, s):
        p = m[-1]["content"]
        assert "Define a function named `solve`" in p
        if "The result of the error" in p:
            assert "ZeroDivisionError" in p
            return "```python\ndef solve():\n    return 6 * 7\n```"
        return "```python\ndef solve():\n    return 1 / 0\n```"
    pred, bb = go(tmp_path, "programmer", script)
    r = pred["trace"]["result"]
    assert r["output"] == "42" and "6 * 7" in r["code"]
    assert [t["status"] for t in pred["trace"]["ops"][0]["tries"]] == ["Error", "Success"]


def test_programmer_code_cannot_touch_the_harness(tmp_path, tiny_data):
    """Generated code runs in the sandbox: a write outside its temporary directory and a network call fail
    there, never in the harness process."""
    target = tmp_path / "pwned.txt"
    code = (f"```python\nimport socket\ndef solve():\n    open({str(target)!r}, 'w').write('x')\n"
            "    socket.create_connection(('1.1.1.1', 80), timeout=1)\n    return 1\n```")
    pred, _ = go(tmp_path, "programmer", lambda m, s: code)
    r = pred["trace"]["result"]
    assert r["output"].startswith("Execution error") or r["output"] == "Code execution timed out"
    assert not target.exists()


def test_custom_code_generate_extracts_the_entry_point(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "code_generate",
                  lambda m, s: "Here:\n```python\ndef g():\n    pass\n```\n```python\ndef f():\n    return 4\n```\n",
                  code=True)
    assert prompts(bb) == ["Write f. What is 0+0?"]
    assert pred["trace"]["result"]["response"].strip() == "def f():\n    return 4"


def test_test_operator_runs_visible_tests_and_reflects(tmp_path, tiny_data):
    CodeEchoBenchmark.test_runs = 0

    def script(m, s):
        p = m[-1]["content"]
        assert "### Execution Result\nexecuted successfully" in p and "assert f() == 4" in p
        return "Reflection: off by one.\n```python\ndef f():\n    return 4\n```"
    pred, bb = go(tmp_path, "test", script, code=True)
    r = pred["trace"]["result"]
    assert r["result"] is True and "return 4" in r["solution"]
    assert len(bb.requests) == 1 and CodeEchoBenchmark.test_runs == 2
    assert [h["passed"] for h in pred["trace"]["ops"][0]["history"]] == [0, 1]


def test_test_operator_on_a_task_without_visible_tests_changes_nothing(tmp_path, tiny_data):
    pred, bb = go(tmp_path, "test", lambda m, s: "x")   # EchoBenchmark: qa, no tests
    assert pred["trace"]["result"]["result"] is True and bb.requests == []


def test_parsers():
    assert O.parse_xml("<a> x </a><b>TRUE</b>", {"a": str, "b": bool, "c": str}) == {"a": "x", "b": True}
    assert O.letter_index(" c.", 3) == 2 and O.letter_index("D", 3) is None and O.letter_index("", 2) is None
    assert O.description_text(0, "EarlyStop").startswith("0. EarlyStop: This issue has been correctly")
    assert set(O.OPERATORS) >= {"Custom", "AnswerGenerate", "CustomCodeGenerate", "ScEnsemble", "Programmer", "Test",
                                "Review", "Revise", "Format", "MdEnsemble", "SelfRefine", "EarlyStop"}
    for names in [*O.AFLOW_OPERATORS.values(), *O.MAAS_OPERATORS.values()]:
        assert all(n in O.OPERATORS and n in O.DESCRIPTIONS for n in names)


def test_run_solve_reports_a_sandbox_failure_as_an_error_not_as_the_codes(monkeypatch) -> None:
    """Programmer's runs: code that fails is ("Error", why) for the workflow; a sandbox that cannot judge it
    (here: privileges that cannot be dropped) raises, so the problem is an error."""
    import asyncio
    import os

    import pytest

    from agentic_repro.evaluators.sandbox import SandboxFailure, launch

    code = "def solve():\n    return 6 * 7\n"
    assert asyncio.run(O.run_solve(code)) == ("Success", "42")
    status, why = asyncio.run(O.run_solve("def solve():\n    raise ValueError('no')\n"))
    assert status == "Error" and "ValueError" in why
    if os.geteuid() == 0:
        monkeypatch.setitem(launch._PROBED, "privilege", "unavailable")
        with pytest.raises(SandboxFailure, match="unable to drop privileges"):
            asyncio.run(O.run_solve(code))
