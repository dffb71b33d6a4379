"""Control flow of the hand-crafted baselines with a scripted backbone: calls per stage, stop
conditions and aggregation (Self-Refine, LLM-Debate, LLM-Blender, DyLAN, ToT, Self-Reflection)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentic_repro.evaluators.base import Benchmark
from agentic_repro.harness.llm import request_seed
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.types import Problem, Score
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone


# ---- helpers ---------------------------------------------------------------------------------
class CodeEchoBenchmark(Benchmark):
    """Code test benchmark: the answer is the last ```python block; the public test passes when the
    program contains 'return 4'."""

    domain = "code"

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        return Problem(id=row["id"], index=row_index, fields={"q": row["q"]}, gold=row["a"], benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["q"]

    def extract(self, text: str, problem: Problem):
        blocks = re.findall(r"```python\n(.*?)```", text or "", re.DOTALL)
        return (blocks[-1], "fence") if blocks else ("", "empty")

    def answer_key(self, extracted):
        return " ".join(str(extracted).split()) or None

    async def score(self, text: str, problem: Problem) -> Score:
        code, rule = self.extract(text, problem)
        return Score(float("return 4" in code), code, {"rule": rule})

    test_runs = 0

    async def run_public_tests(self, text: str, problem: Problem):
        CodeEchoBenchmark.test_runs += 1
        code, _ = self.extract(text, problem)
        ok = "return 4" in code
        return {"passed": int(ok), "total": 1,
                "results": [{"test": "assert f() == 4", "passed": ok, "status": "ok" if ok else "fail",
                             "error": "" if ok else "AssertionError"}]}


def code_spec(tmp_path: Path, method: dict[str, Any], limit: int = 1):
    spec = make_spec(tmp_path, method, limit=limit)
    spec.benchmark_cfg.update(kind="tests.test_baselines_multiagent.CodeEchoBenchmark",
                              answer_instruction="Write the function in a ```python block.", execute_code=True)
    return spec


def solve(tmp_path: Path, method: dict[str, Any], script, *, limit: int = 1, code: bool = False):
    spec = code_spec(tmp_path, method, limit) if code else make_spec(tmp_path, method, limit=limit)
    bb = ScriptedBackbone(script)
    metrics = run(spec, bb)
    preds = sorted(read_jsonl_tolerant(spec.out_dir / "predictions.jsonl"), key=lambda p: p["index"])
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert all(p["status"] == "ok" for p in preds), [p.get("error") for p in preds]
    json.dumps(preds[0]["trace"])  # traces are JSON
    return preds, calls, metrics, bb


def stages(pred: dict[str, Any]) -> dict[str, int]:
    return {k: v["calls"] for k, v in pred["cost_by_stage"].items()}


def last(messages) -> str:
    return messages[-1]["content"]


def agent_of(sampling: dict[str, Any], n: int = 10) -> int:
    """The sample index a call was made with (its seed is request_seed(42, index))."""
    return next(i for i in range(n) if request_seed(42, i) == sampling["seed"])


COT = "{task}\n\nLet's think step by step. {answer_instruction}"


# ---- Self-Refine -----------------------------------------------------------------------------
def test_self_refine_stops_when_the_feedback_says_correct(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "Review this solution" in p:
            return "It is correct." if "draft 2" in p else "The sum is wrong; recompute."
        if "Previous attempts" in p:
            assert "### Attempt 1" in p and "recompute" in p
            return "draft 2 ANSWER: 0"
        return "draft 1 ANSWER: 1"

    method = {"name": "self_refine", "solver": "agentic_repro.baselines.self_refine:self_refine", "params": {"template": COT}}
    preds, calls, metrics, _ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"generate": 1, "feedback": 2, "refine": 1}
    assert p["trace"]["stop"] == "feedback-says-correct" and p["raw_output"] == "draft 2 ANSWER: 0"
    assert metrics["score"] == 1.0  # p0: 0+0 = 0
    fb_temps = {c["temperature"] for c in calls if c["stage"] == "feedback"}
    assert fb_temps == {0.7}


def test_self_refine_stop_check_reads_the_verdict_line():
    from agentic_repro.baselines.self_refine import feedback_says_correct

    issue_example = "Step 1: the setup, it is correct.\nStep 2: 3*4 = 13 is wrong; recompute."
    assert not feedback_says_correct(issue_example)
    assert feedback_says_correct(issue_example, check="substring")  # the old rule stopped here
    assert feedback_says_correct("Every step checks out.\n\nIt is correct.")
    assert feedback_says_correct("it is correct")
    assert not feedback_says_correct("Step 2 is off.\nVerdict: it is not correct.")
    assert not feedback_says_correct("Step 1 is fine, it is correct. But step 2 is wrong.")
    assert not feedback_says_correct("")


def test_self_refine_keeps_refining_when_a_correct_step_is_followed_by_an_error(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "Review this solution" in p:
            if "draft 2" in p:
                return "All steps check out.\nit is correct"
            return "Step 1: reading the task, it is correct.\nStep 2: the sum is wrong; 0+0 is 0."
        if "Previous attempts" in p:
            return "draft 2 ANSWER: 0"
        return "draft 1 ANSWER: 1"

    method = {"name": "self_refine", "solver": "agentic_repro.baselines.self_refine:self_refine", "params": {"template": COT}}
    preds, *_ = solve(tmp_path, method, script)
    assert stages(preds[0]) == {"generate": 1, "feedback": 2, "refine": 1}
    assert preds[0]["raw_output"] == "draft 2 ANSWER: 0" and preds[0]["score"] == 1.0


def test_self_refine_caps_iterations_and_keeps_full_history(tmp_path, tiny_data):
    seen = []

    def script(messages, sampling):
        p = last(messages)
        if "Review this solution" in p:
            return "Still wrong."
        if "Previous attempts" in p:
            seen.append(p.count("### Attempt"))
            return f"draft {len(seen) + 1} ANSWER: 9"
        return "draft 1 ANSWER: 9"

    method = {"name": "self_refine", "solver": "agentic_repro.baselines.self_refine:self_refine",
              "params": {"template": COT, "max_iterations": 3}}
    preds, *_ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"generate": 1, "feedback": 3, "refine": 3}
    assert p["trace"]["stop"] == "max_iterations" and p["raw_output"] == "draft 4 ANSWER: 9"
    assert seen == [1, 2, 3]  # the refiner sees every earlier attempt


def test_self_refine_code_feedback_shows_public_tests_only(tmp_path, tiny_data):
    prompts = []

    def script(messages, sampling):
        p = last(messages)
        if "Review this solution" in p:
            prompts.append(p)
            return "it is correct" if "Public tests passed: 1/1" in p else "fix it"
        if "Previous attempts" in p:
            return "```python\ndef f():\n    return 4\n```"
        return "```python\ndef f():\n    return 5\n```"

    method = {"name": "self_refine", "solver": "agentic_repro.baselines.self_refine:self_refine", "params": {"template": COT}}
    preds, *_ = solve(tmp_path, method, script, code=True)
    assert stages(preds[0]) == {"generate": 1, "feedback": 2, "refine": 1}
    assert "Public tests passed: 0/1" in prompts[0] and "FAILED: assert f() == 4" in prompts[0]
    assert preds[0]["score"] == 1.0


# ---- LLM-Debate ------------------------------------------------------------------------------
def test_debate_rounds_messages_and_majority(tmp_path, tiny_data):
    round2_prompts: dict[int, str] = {}

    def script(messages, sampling):
        agent = agent_of(sampling)
        if len(messages) == 1:  # round 1: independent answers
            return f"agent {agent} says ANSWER: {[0, 5, 0][agent]}"
        round2_prompts[agent] = last(messages)
        assert messages[1]["role"] == "assistant" and f"agent {agent} says" in messages[1]["content"]
        return f"updated ANSWER: {[0, 0, 7][agent]}"

    method = {"name": "llm_debate", "solver": "agentic_repro.baselines.llm_debate:llm_debate", "params": {"template": COT}}
    preds, calls, _, _ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"debate_round_1": 3, "debate_round_2": 3}
    for agent, prompt in round2_prompts.items():  # each agent reads the two others, not itself
        assert prompt.count("One agent solution") == 2 and f"agent {agent} says" not in prompt
    assert p["extracted"] == "0" and p["confidence"] == pytest.approx(2 / 3)
    assert {c["temperature"] for c in calls} == {1.0}


def test_debate_sizes_are_parameters(tmp_path, tiny_data):
    method = {"name": "llm_debate", "solver": "agentic_repro.baselines.llm_debate:llm_debate",
              "params": {"template": COT, "agents": 2, "rounds": 3}}
    preds, *_ = solve(tmp_path, method, lambda m, s: "ANSWER: 0")
    assert stages(preds[0]) == {"debate_round_1": 2, "debate_round_2": 2, "debate_round_3": 2}
    assert preds[0]["confidence"] == 1.0


# ---- LLM-Blender -----------------------------------------------------------------------------
def test_blender_ranks_all_pairs_and_fuses_top_k(tmp_path, tiny_data):
    fuse_prompts = []

    def script(messages, sampling):
        p = last(messages)
        if "Two candidate responses" in p:
            a = p.split("### Candidate A")[1].split("### Candidate B")[0]
            b = p.split("### Candidate B")[1]
            score = lambda t: int(re.search(r"quality (\d)", t).group(1))
            return "Better: A" if score(a) > score(b) else "Better: B"
        if "Fuse them" in p:
            fuse_prompts.append(p)
            return "fused ANSWER: 0"
        return f"quality {[1, 3, 2, 0][agent_of(sampling)]} ANSWER: {agent_of(sampling)}"

    method = {"name": "llm_blender", "solver": "agentic_repro.baselines.llm_blender:llm_blender",
              "params": {"template": COT, "n_candidates": 4, "top_k": 2, "candidates": "samples"}}
    preds, *_ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"candidate": 4, "rank": 12, "fuse": 1}
    assert p["trace"]["order"] == [1, 2, 0, 3] and p["trace"]["top_k"] == [1, 2]
    assert p["trace"]["wins"] == [2, 6, 4, 0]  # wins over both positions
    assert p["trace"]["ranker_used"] == "backbone-judge" and p["trace"]["fuser_used"] == "backbone"
    shown = fuse_prompts[0]
    assert shown.index("quality 3") < shown.index("quality 2") and "quality 1" not in shown
    assert p["raw_output"] == "fused ANSWER: 0" and p["score"] == 1.0


def test_blender_default_candidates_come_from_distinct_systems_not_cot_sc_samples(tmp_path, tiny_data):
    from agentic_repro.baselines.llm_blender import SYSTEMS

    def script(messages, sampling):
        p = last(messages)
        if "Two candidate responses" in p:
            return "Better: A"
        if "Fuse them" in p:
            return "fused ANSWER: 0"
        return "ANSWER: 0"

    method = {"name": "llm_blender", "solver": "agentic_repro.baselines.llm_blender:llm_blender", "params": {"template": COT}}
    preds, calls, _, bb = solve(tmp_path, method, script)
    assert stages(preds[0]) == {"candidate": 5, "rank": 20, "fuse": 1}
    cand = [(m, s) for m, s, n in bb.requests if not any(x in last(m) for x in ("Two candidate", "Fuse them"))]
    systems = [m[0]["content"] for m, s in cand]
    assert [m[0]["role"] for m, s in cand] == ["system"] * 5 and len(set(systems)) == 5
    assert sorted(s["temperature"] for m, s in cand) == sorted(x["temperature"] for x in SYSTEMS)
    # none of them is the CoT-SC request (same prompt, no system message), so nothing is replayed from its cache
    assert all(len(m) == 2 for m, s in cand)
    assert preds[0]["trace"]["candidates_from"] == "systems"


def test_blender_unreadable_verdicts_are_ties():
    from agentic_repro.baselines.llm_blender import parse_verdict

    assert parse_verdict("I think so.\nBetter: B") == "B"
    assert parse_verdict("**Better: candidate A**") == "A"
    assert parse_verdict("A") == "A"
    assert parse_verdict("both are fine") is None


def test_blender_rejects_unknown_ranker(tmp_path, tiny_data):
    method = {"name": "llm_blender", "solver": "agentic_repro.baselines.llm_blender:llm_blender",
              "params": {"template": COT, "ranker": "oracle"}}
    spec = make_spec(tmp_path, method, limit=1)
    run(spec, ScriptedBackbone(lambda m, s: "ANSWER: 0"))
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "error" and "ranker must be" in pred["error"]


# ---- DyLAN -----------------------------------------------------------------------------------
DYLAN = {"name": "dylan", "solver": "agentic_repro.baselines.dylan:dylan", "params": {}}


def test_dylan_stops_early_on_consensus_in_layer_1(tmp_path, tiny_data):
    preds, calls, _, _ = solve(tmp_path, DYLAN, lambda m, s: "ANSWER: 0")
    p = preds[0]
    # 4 agents, > floor(2/3 * 4) = 2 must agree: the check starts at the 3rd activation
    assert stages(p) == {"layer_1": 3}
    assert p["trace"]["stop"]["reason"] == "consensus" and p["confidence"] == 1.0
    assert {c["temperature"] for c in calls} == {1.0}  # QA temperature (the test benchmark is QA)
    assert p["trace"]["roles"] == ["Assistant", "Historian", "Lawyer", "Economist"]


def test_dylan_full_network_with_agent_selection_and_importance(tmp_path, tiny_data):
    rank_outputs, layer3_prompts = [], []

    def script(messages, sampling):
        p = last(messages)
        if "choose the best 2 solutions" in p:
            rank_outputs.append(p)
            return "Solutions 2 and 4 are best. [2, 4]"
        agent = agent_of(sampling)
        if "solutions to the problem from other agents" in p:
            n = p.count("Agent solution")
            if n == 2:
                layer3_prompts.append(p)
                return f"[[5, 1]] agent {agent} final ANSWER: {agent}"
            return f"[[5, 1, 1, 1]] agent {agent} layer2 ANSWER: {agent}"
        return f"agent {agent} ANSWER: {agent}"  # everyone disagrees

    preds, *_ = solve(tmp_path, DYLAN, script)
    p = preds[0]
    assert stages(p) == {"layer_1": 4, "layer_2": 4, "rank": 1, "layer_3": 2}
    t = p["trace"]
    chosen = t["ranker"][0]["chosen"]
    assert chosen == [t["ranker"][0]["candidates"][1], t["ranker"][0]["candidates"][3]]
    assert sorted(nd["agent"] for nd in t["layers"][2]) == sorted(chosen)
    assert len(layer3_prompts) == 2 and all(q.count("Agent solution") == 2 for q in layer3_prompts)
    # importance: each layer's scores sum to 1 (ratings are normalised per receiver)
    for layer in t["layers"]:
        assert sum(nd["importance"] for nd in layer) == pytest.approx(1.0)
    assert sum(t["agent_importance"].values()) == pytest.approx(3.0)
    assert p["confidence"] == 0.5 and t["stop"]["reason"] == "last-layer"


def pick_agents(prompt: str, wanted: set[int]) -> str:
    """A ranker reply choosing the listed solutions written by the ``wanted`` agents."""
    blocks = prompt.split("Agent solution ")[1:]
    pos = [i + 1 for i, b in enumerate(blocks) if int(re.search(r"agent (\d+)", b).group(1)) in wanted]
    return f"[{pos[0]}, {pos[1]}]"


def test_dylan_consensus_among_selected_agents_skips_the_last_layer(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "choose the best 2 solutions" in p:
            return pick_agents(p, {0, 1})
        agent = agent_of(sampling)
        if "solutions to the problem from other agents" in p:
            return f"[[3, 3, 3, 3]] agent {agent} ANSWER: {0 if agent < 2 else agent}"  # agents 0, 1 agree
        return f"agent {agent} ANSWER: {agent}"

    preds, *_ = solve(tmp_path, DYLAN, script)
    t = preds[0]["trace"]
    assert stages(preds[0]) == {"layer_1": 4, "layer_2": 4, "rank": 1}
    assert sorted(t["ranker"][0]["chosen"]) == [0, 1] and t["stop"]["reason"] == "consensus-after-ranking"
    assert preds[0]["extracted"] == "0" and preds[0]["confidence"] == 1.0


def test_dylan_unparsable_ranking_falls_back_to_a_seeded_choice(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "choose the best 2 solutions" in p:
            return "I cannot decide."
        return f"ANSWER: {agent_of(sampling)}"

    preds, *_ = solve(tmp_path, DYLAN, script)
    t = preds[0]["trace"]
    assert t["ranker"][0]["parsed"] is False and len(set(t["ranker"][0]["chosen"])) == 2
    assert stages(preds[0])["layer_3"] == 2


def test_dylan_code_final_choice_by_public_tests_is_an_option(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "choose the best 2 solutions" in p:
            return pick_agents(p, {2, 3})
        agent = agent_of(sampling)
        body = "return 4" if agent == 3 else f"return {agent} + 0"
        return f"```python\n# agent {agent}\ndef f():\n    {body}\n```"

    dylan_tests = {**DYLAN, "params": {"code_choice": "public_tests"}}
    preds, calls, _, _ = solve(tmp_path, dylan_tests, script, code=True)
    p = preds[0]
    assert p["trace"]["roles"][0] == "PythonAssistant"
    assert {c["temperature"] for c in calls if c["stage"] != "rank"} == {0.8}
    assert stages(p) == {"layer_1": 4, "layer_2": 4, "rank": 1, "layer_3": 2}
    assert "return 4" in p["raw_output"] and p["trace"]["vote"]["rule"] == "public-tests" and p["score"] == 1.0


@pytest.mark.parametrize("method", ["cot_sc", "llm_debate", "dylan"])
def test_code_choice_defaults_to_program_majority_and_tests_are_an_option(tmp_path, tiny_data, method):
    """The papers' rule for code is a majority over programs; choosing by the visible example test is a
    named option (issue 9 §2)."""
    CodeEchoBenchmark.test_runs = 0

    def script(messages, sampling):
        p = last(messages)
        if "choose the best 2 solutions" in p:
            return "[1, 2]"
        agent = agent_of(sampling)
        body = "return 4" if agent in (1,) else "return 5"   # the majority program fails the example test
        return f"```python\ndef f():\n    {body}\n```"

    solver = {"cot_sc": "agentic_repro.baselines.simple:cot_sc", "llm_debate": "agentic_repro.baselines.llm_debate:llm_debate",
              "dylan": "agentic_repro.baselines.dylan:dylan"}[method]
    params = {"template": COT} if method != "dylan" else {}
    base = {"name": method, "solver": solver, "params": params}
    preds, *_ = solve(tmp_path / "maj", base, script, code=True)
    assert "return 5" in preds[0]["raw_output"] and preds[0]["score"] == 0.0
    assert CodeEchoBenchmark.test_runs == 0          # the default never runs a test
    opt = {**base, "params": {**params, "code_choice": "public_tests"}}
    preds, *_ = solve(tmp_path / "tests", opt, script, code=True)
    assert "return 4" in preds[0]["raw_output"] and preds[0]["score"] == 1.0 and CodeEchoBenchmark.test_runs > 0


# ---- Tree-of-Thoughts ------------------------------------------------------------------------
def tot_script(messages, sampling):
    p = last(messages)
    if "Propose up to" in p:
        steps = p.split("Steps so far:")[1].split("Propose up to")[0]
        depth = steps.count("\n") - 1 if "(none)" not in steps else 0
        return f"good step {depth}\nbad step {depth}\n- good alt {depth}"
    if "sure, likely or impossible" in p:
        sol = p.split("so far:")[1] if "so far:" in p else p.split("solution:")[1]
        return "ok\nsure" if "bad" not in sol and "WRONG" not in sol else "no\nimpossible"
    if "complete the solution" in p:
        return "ANSWER: 0" if "good step 0" in p else "WRONG ANSWER: 3"
    return "?"


def test_tot_bfs_calls_per_level_and_greedy_selection(tmp_path, tiny_data):
    method = {"name": "tot", "solver": "agentic_repro.baselines.tot:tot",
              "params": {"breadth": 2, "depth": 3, "n_evaluate": 2, "max_proposals": 3, "final": "value_answers"}}
    preds, calls, _, _ = solve(tmp_path, method, tot_script)
    p = preds[0]
    # level 1: 1 propose, 3 children x 2 value samples; level 2: 2 proposes, 6 children x 2;
    # level 3: 2 answers x 2 value samples
    assert stages(p) == {"propose": 3, "value": 6 + 12 + 4, "answer": 2}
    lv = p["trace"]["levels"]
    assert lv[0]["values"] == [40.0, 0.002, 40.0] and lv[0]["kept"] == [0, 2]
    assert p["raw_output"].startswith("good step 0\n") and p["raw_output"].endswith("ANSWER: 0")
    assert p["score"] == 1.0 and p["confidence"] == 1.0
    assert {c["temperature"] for c in calls} == {0.7}


def test_tot_default_final_pick_is_algorithm_1_and_value_prompts_follow_the_domain(tmp_path, tiny_data):
    from agentic_repro.baselines.tot import VALUE_TEMPLATES

    seen = []

    def script(messages, sampling):
        if "sure, likely or impossible" in last(messages):
            seen.append(last(messages))
        return tot_script(messages, sampling)

    method = {"name": "tot", "solver": "agentic_repro.baselines.tot:tot",
              "params": {"breadth": 2, "depth": 3, "n_evaluate": 2, "max_proposals": 3}}
    preds, *_ = solve(tmp_path, method, script)
    p = preds[0]
    # two thought levels are valued; then ONE answer is generated from the best state (no answer values)
    assert stages(p) == {"propose": 3, "value": 6 + 12, "answer": 1}
    assert p["trace"]["levels"][-1]["kind"] == "answer-from-best-state"
    assert p["raw_output"].startswith("good step 0\n") and p["raw_output"].endswith("ANSWER: 0")
    # the test benchmark is QA: every value prompt is the QA one
    qa_marker = "supported by the context"
    assert seen and all(qa_marker in x for x in seen) and qa_marker in VALUE_TEMPLATES["qa"]
    assert len({VALUE_TEMPLATES[d] for d in ("math", "code", "qa")}) == 3


def test_tot_duplicate_candidates_get_zero_value_without_a_call(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "Propose up to" in p:
            return "same\nsame\nother"  # duplicates in one proposal are merged by the parser
        return tot_script(messages, sampling) if "complete" not in p else "ANSWER: 0"

    from agentic_repro.baselines.tot import parse_proposals, value_of

    assert parse_proposals("1. a\n2) b\n- a\n\nStep 3: c", 5) == ["a", "b", "c"]
    assert value_of(["x\nlikely", "sure", "Impossible.", "no verdict"]) == pytest.approx(21.001)
    method = {"name": "tot", "solver": "agentic_repro.baselines.tot:tot",
              "params": {"breadth": 1, "depth": 2, "n_evaluate": 1, "max_proposals": 3, "final": "value_answers"}}
    preds, *_ = solve(tmp_path, method, script)
    assert stages(preds[0]) == {"propose": 1, "value": 2 + 1, "answer": 1}


# ---- Self-Reflection -------------------------------------------------------------------------
def test_self_reflection_answer_reflect_reanswer(tmp_path, tiny_data):
    prompts = {}

    def script(messages, sampling):
        p = last(messages)
        if "Reflect on your solution" in p:
            prompts["reflect"] = p
            return "Explanation: I added wrong."
        if "Your reflection on it" in p:
            prompts["reanswer"] = p
            return "again ANSWER: 0"
        return "first ANSWER: 1"

    method = {"name": "self_reflection", "solver": "agentic_repro.baselines.self_reflection:self_reflection",
              "params": {"template": COT}}
    preds, *_ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"answer": 1, "reflect": 1, "reanswer": 1}
    assert "Keywords" in prompts["reflect"] and "first ANSWER: 1" in prompts["reflect"]
    assert "I added wrong" in prompts["reanswer"] and p["raw_output"] == "again ANSWER: 0"


def test_self_reflection_retry_type_makes_no_reflection_call(tmp_path, tiny_data):
    method = {"name": "self_reflection", "solver": "agentic_repro.baselines.self_reflection:self_reflection",
              "params": {"template": COT, "reflection": "retry"}}
    preds, *_ = solve(tmp_path, method, lambda m, s: "ANSWER: 0")
    assert stages(preds[0]) == {"answer": 1, "reanswer": 1}


def test_self_reflection_every_step_validates_each_step(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "Validate the proposed next step" in p:
            step = p.split("Proposed next step:")[1]
            return "Looks wrong.\nVerdict: invalid" if "careless" in step else "Fine.\nVerdict: valid"
        if "Rewrite the next step" in p:
            return "careful: 0+0 is 0"
        if "Step 1:" in p:
            return "So ANSWER: 0"
        return "careless: 0+0 is 1"

    method = {"name": "sr_step", "solver": "agentic_repro.baselines.self_reflection:self_reflection",
              "params": {"template": COT, "mode": "every_step"}}
    preds, *_ = solve(tmp_path, method, script)
    p = preds[0]
    assert stages(p) == {"step": 2, "validate": 2, "revise": 1}
    assert p["trace"]["finished_by_step"] is True and p["raw_output"] == "careful: 0+0 is 0\nSo ANSWER: 0"
    assert [s["valid"] for s in p["trace"]["steps"]] == [False, True]


def test_self_reflection_every_step_is_bounded(tmp_path, tiny_data):
    def script(messages, sampling):
        p = last(messages)
        if "Validate" in p:
            return "Verdict: valid"
        if "Finish the solution" in p:
            return "done ANSWER: 0"
        return "thinking more"

    method = {"name": "sr_step", "solver": "agentic_repro.baselines.self_reflection:self_reflection",
              "params": {"template": COT, "mode": "every_step", "max_steps": 3}}
    preds, *_ = solve(tmp_path, method, script)
    assert stages(preds[0]) == {"step": 3, "validate": 3, "finalize": 1}
    assert preds[0]["score"] == 1.0


def test_step_verdict_parser():
    from agentic_repro.baselines.self_reflection import step_is_valid

    assert step_is_valid("ok\nVerdict: valid") and not step_is_valid("Verdict: invalid")
    assert not step_is_valid("This step is incorrect.") and step_is_valid("Looks right.")


# ---- configs ---------------------------------------------------------------------------------
NEW_METHODS = ["self_refine", "llm_debate", "llm_blender", "dylan", "tot", "self_reflection", "self_reflection_step"]


@pytest.mark.parametrize("name", NEW_METHODS)
def test_method_configs_compose_and_build(name):
    from agentic_repro.harness.method import build_method
    from tests.conftest import compose

    cfg = compose([f"method={name}"])
    assert cfg["method"]["name"] == name
    build_method(cfg["method"])


def test_catalog_names_exist():
    from agentic_repro.baselines.catalog import ALL

    root = Path(__file__).resolve().parents[1] / "configs" / "method"
    assert set(NEW_METHODS) <= set(ALL)
    assert all((root / f"{name}.yaml").exists() for name in ALL)


def test_every_method_config_states_its_label_and_deviations():
    """Interface 9: each configs/method/<name>.yaml names its deviations from the paper (table footnotes)."""
    from tests.conftest import compose

    root = Path(__file__).resolve().parents[1] / "configs" / "method"
    for path in sorted(root.glob("*.yaml")):
        method = compose([f"method={path.stem}"])["method"]
        assert isinstance(method.get("deviations"), list), path.name
        assert all(isinstance(d, str) and len(d) > 20 for d in method["deviations"]), path.name
        assert isinstance(method.get("label"), str) and method["label"], path.name
    assert compose(["method=llm_blender"])["method"]["label"] == "LLM-Blender (backbone ranker/fuser)"
    assert "code judges not run" in compose(["method=dylan"])["method"]["label"]


class ShownExampleBenchmark(CodeEchoBenchmark):
    """A code task whose text shows its example test (as MBPP's task text does after issue 9 §2)."""

    EXAMPLE = ">>> assert f() == 4"

    def render(self, problem: Problem) -> str:
        return f"Write f. {problem.fields['q']}\n{self.EXAMPLE}"


@pytest.mark.parametrize("name", ["io", "cot", "cot_sc", *NEW_METHODS, "denoiseflow"])
def test_every_method_prompt_shows_the_task_text_with_its_example_test(tmp_path, tiny_data, name):
    """What a method may see is what its prompt shows: every request of every method carries the rendered
    task, its example test included (issue 9 §2: the example test is part of the task text)."""
    from tests.conftest import compose

    method = compose([f"method={name}"])["method"]
    if name == "denoiseflow":
        method["params"].update(embedder="hash", n_samples=2, k_max=2, max_retries=1)
    spec = make_spec(tmp_path, method, limit=1)
    spec.benchmark_cfg.update(kind="tests.test_baselines_multiagent.ShownExampleBenchmark",
                              answer_instruction="Write the function in a ```python block.", execute_code=True)
    bb = ScriptedBackbone(lambda m, s: "```python\ndef f():\n    return 4\n```")
    run(spec, bb)
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "ok", pred.get("error")
    texts = ["\n".join(m["content"] for m in msgs) for msgs, _, _ in bb.requests]
    assert texts and all(ShownExampleBenchmark.EXAMPLE in t for t in texts)
