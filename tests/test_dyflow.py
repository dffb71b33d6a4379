"""DyFlow (dyflow/): Algorithm 1 with the scripted double — stage validation, repair and re-ask, memory keys,
termination rules, T_max, the loop guard, each ablation's control flow — and the schema round trip."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentic_repro.dyflow import prompts as P
from agentic_repro.dyflow.config import Options
from agentic_repro.dyflow.schema import StageGraph, stage_from_trace
from agentic_repro.dyflow.validate import StageError, StageRules, check_stage, read_stage
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone

ROLES = ["designer", "executor", "summarizer"]


def stage_json(n: int, ops: list[tuple[str, list[str], str]], **extra: Any) -> str:
    return json.dumps({"stage_id": f"stage_{n}", "stage_description": f"stage {n}", "operators": [
        {"operator_id": f"op_{n}_{i + 1}", "operator_description": f"{t.lower()} op",
         "params": {"instruction_type": t, "input_keys": k, "output_key": o, "input_usage": f"use {k}"}}
        for i, (t, k, o) in enumerate(ops)], **extra})


def is_designer(messages: list[dict[str, str]]) -> bool:
    return "workflow stage designer" in messages[0]["content"]


def stage_count(messages: list[dict[str, str]]) -> int:
    """How many stages the designer's summary lists."""
    return len(re.findall(r"^Stage \d+:", messages[0]["content"], re.MULTILINE))


def executor_answer(prompt: str) -> str:
    if "careful reviewer" in prompt:
        return "Review Details: checked\nOverall Verdict: accept"
    if "impartial adjudicator" in prompt:
        return '{"selected_index": 2, "justification": "majority", "confidence": 0.9}'
    m = re.search(r"What is (\d+)\+(\d+)\?", prompt)
    head = "Refined. " if prompt.startswith("You are an expert in refining") else "Reasoning... "
    return f"{head}ANSWER: {int(m.group(1)) + int(m.group(2))}" if m else "ANSWER: ?"


class Script:
    """Designer replies by planning step (``designs[i]`` is a list of replies for its attempts);
    summariser and executor answer from the prompt. Records every call."""

    def __init__(self, designs: list[list[str]] | None = None, *, designer: Any = None) -> None:
        self.designs = designs or []
        self.designer = designer
        self.design_prompts: list[list[dict[str, str]]] = []
        self.prompts: list[str] = []

    def __call__(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
        p = messages[-1]["content"]
        self.prompts.append(p)
        if is_designer(messages):
            self.design_prompts.append(messages)
            if self.designer is not None:
                return self.designer(messages, sampling)
            step = stage_count(messages)
            attempt = sum(1 for m in messages if m["role"] == "assistant")
            replies = self.designs[min(step, len(self.designs) - 1)]
            return replies[min(attempt, len(replies) - 1)]
        if "summarizing a workflow stage" in p:
            return "- Stage goal: work\n- Actions executed: ok"
        return executor_answer(p)


def run_dyflow(tmp_path, script: Script, *, params: dict[str, Any] | None = None, limit: int = 1,
               roles: list[str] | None = None, split: str = "test"
               ) -> tuple[dict[str, Any], list[dict[str, Any]], ScriptedBackbone]:
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": roles or ROLES,
              "params": dict(params or {})}
    spec = make_spec(tmp_path, method, limit=limit)
    spec.benchmark_cfg.update(split=split, splits={split: "tiny/test.jsonl"})   # the tiny file under that name
    bb = ScriptedBackbone(script)
    metrics = run(spec, bb)
    preds = [json.loads(line) for line in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]
    return metrics, preds, bb


SOLVE = stage_json(1, [("GENERATE_ANSWER", ["original_problem"], "act_1"),
                       ("REVIEW_SOLUTION", ["original_problem", "act_1"], "act_2")])
ORGANIZE = stage_json(2, [("ORGANIZE_SOLUTION", ["original_problem", "act_1"], "act_3")])


# ---- schema ---------------------------------------------------------------------------------------
def test_schema_round_trip_and_topological_order():
    raw = stage_json(1, [("REVIEW_SOLUTION", ["act_1"], "act_2"), ("generate answer", ["original_problem"], "act_1")])
    g = StageGraph.from_designer(json.loads(raw))
    assert g.templates == ["REVIEW_SOLUTION", "GENERATE_ANSWER"]          # names normalised
    from agentic_repro.dyflow.schema import normalise_template
    assert normalise_template("Decompose") == "DECOMPOSE_PROBLEM" and normalise_template("ensemble") == "ENSEMBLE"
    assert [o.operator_id for o in g.topological_order()] == ["op_1_2", "op_1_1"]  # data flow first
    assert g.operators[1].instruction == "use ['original_problem']"       # φ = params.input_usage
    assert StageGraph.from_designer(g.to_designer()) == g
    assert StageGraph.model_validate(g.model_dump(mode="json")) == g
    cyc = StageGraph.from_designer(json.loads(stage_json(1, [("DEFAULT", ["act_2"], "act_1"),
                                                             ("DEFAULT", ["act_1"], "act_2")])))
    with pytest.raises(ValueError, match="cycle"):
        cyc.topological_order()


# ---- validation and repair ------------------------------------------------------------------------
def test_read_stage_strict_repaired_invalid():
    assert read_stage("Plan:\n```json\n" + SOLVE + "\n```", repair=True)[1] == "valid"
    cut = SOLVE[:-40]                                       # cut off at max_tokens
    with pytest.raises(StageError):
        read_stage(cut, repair=False)
    g, status, err = read_stage(cut, repair=True)
    assert status == "repaired" and err and g.operators[0].template == "GENERATE_ANSWER"
    with pytest.raises(StageError, match="no valid JSON") as ei:
        read_stage("I will solve it directly: 4", repair=True)
    assert ei.value.repair_error
    with pytest.raises(StageError, match="operators"):
        read_stage('{"stage_id": "stage_1", "stage_description": "x", "operators": []}', repair=True)


def test_repair_drops_the_operator_a_cut_left_incomplete_and_key_repair():
    cut = SOLVE[:SOLVE.index('"instruction_type": "REVIEW_SOLUTION"') - 2]
    g, status, _ = read_stage(cut, repair=True)
    assert status == "repaired" and g.templates == ["GENERATE_ANSWER"]
    inv = StageGraph.from_designer(json.loads(stage_json(1, [("DECOMPOSE", ["quarters", "dimes"], "act_1"),
                                                             ("GENERATE_ANSWER", ["original_problem", "x"], "act_2")])))
    assert inv.templates[0] == "DECOMPOSE_PROBLEM"       # the released prompt's own short name
    assert check_stage(inv.model_copy(deep=True), StageRules(memory_keys=(), stage_number=1, validation="strict"))   # strict: errors
    fixes: list[str] = []
    assert check_stage(inv, StageRules(memory_keys=(), stage_number=1, validation="strict", key_repair="drop"), fixes) == []
    assert [o.input_keys for o in inv.operators] == [["original_problem"], ["original_problem"]]
    assert len(fixes) == 2 and "quarters" in fixes[0]


def test_check_stage_rules():
    g = StageGraph.from_designer(json.loads(SOLVE))
    assert check_stage(g, StageRules(memory_keys=(), stage_number=1, validation="strict")) == []
    bad = StageGraph.from_designer(json.loads(stage_json(2, [("GENERATE_ANSWER", ["act_7"], "act_3")])))
    errs = check_stage(bad, StageRules(memory_keys=("act_1",), stage_number=2, validation="strict"))
    assert any("['act_7'] do not exist" in e and "act_1" in e for e in errs)
    mixed = StageGraph.from_designer(json.loads(stage_json(2, [("GENERATE_ANSWER", ["original_problem"], "act_3"),
                                                               ("ORGANIZE_SOLUTION", ["act_3"], "act_4")])))
    assert any("NEVER mix" in e for e in check_stage(mixed, StageRules(memory_keys=(), stage_number=2, validation="strict")))
    assert check_stage(mixed, StageRules(memory_keys=(), stage_number=7, validation="strict", allow_mixed_terminal=True)) == []
    nop = StageGraph.from_designer(json.loads(stage_json(1, [("GENERATE_PLAN", [], "act_1")])))
    assert any("original_problem" in e for e in check_stage(nop, StageRules(memory_keys=(), stage_number=1, validation="strict")))
    unk = StageGraph.from_designer(json.loads(stage_json(1, [("SOLVE_IT", ["original_problem"], "act_1")])))
    assert any("unknown instruction_type" in e for e in check_stage(unk, StageRules(memory_keys=(), stage_number=1, validation="strict")))
    assert check_stage(unk, StageRules(memory_keys=(), stage_number=1, validation="strict", unknown_template="default")) == []
    assert unk.operators[0].template == "DEFAULT"
    dup = StageGraph.from_designer(json.loads(stage_json(1, [("GENERATE_ANSWER", ["original_problem"], "act_1"),
                                                             ("GENERATE_PLAN", ["original_problem"], "act_1")])))
    assert any("more than one operator" in e for e in check_stage(dup, StageRules(memory_keys=(), stage_number=1, validation="strict")))


def test_options_refuse_unknown_and_bad_values():
    with pytest.raises(ValueError, match="unknown DyFlow option"):
        Options.build({"t_maxx": 3})
    with pytest.raises(ValueError, match="variant"):
        Options.build({"variant": "wo_everything"})
    with pytest.raises(ValueError, match="temperatures"):
        Options.build({"temperatures": "hot"})
    assert Options.build({"temperatures": "release"}).designer_temperature == 0.1
    assert Options.build({}).designer_temperature == Options.build({}).executor_temperature == 0.01


# ---- Algorithm 1 through the runner ----------------------------------------------------------------
def test_full_loop_roles_memory_trace(tmp_path, tiny_data):
    script = Script([[SOLVE], [ORGANIZE]])
    metrics, preds, bb = run_dyflow(tmp_path, script, limit=2)
    assert metrics["score"] == 1.0 and metrics["n"] == 2
    tr = preds[0]["trace"]
    assert tr["terminated_by"] == "organize" and tr["n_stages"] == 2 and tr["final_key"] == "act_3"
    assert set(tr["memory"]) == {"act_1", "act_2", "act_3"}
    assert tr["operators_used"] == ["GENERATE_ANSWER", "REVIEW_SOLUTION", "ORGANIZE_SOLUTION"]
    s0, s1 = tr["stages"]
    # the fields dyflow-train reads
    for rec in (s0, s1):
        assert {"summary", "designer_messages", "designer_output", "stage", "outputs"} <= set(rec)
        assert stage_from_trace(rec) is not None
    assert tr["original_problem"] == ("What is 0+0?\n\nEnd with ANSWER: <n>.\n\n"
                                      "Let's think step by step to solve the problem.")   # run_dataset.py form
    assert s0["summary"] == P.FIRST_STAGE_SUMMARY
    assert s1["summary"].startswith("Stage 1:\n- Stage goal: work")
    assert s0["designer_messages"][0]["content"].count("What is 0+0?") == 1
    assert s0["executed"][1]["verdict"] == "accept"
    assert s0["outputs"]["act_1"].endswith("ANSWER: 0")
    # the executor saw exactly its input keys, in the released context format
    review = next(p for p in script.prompts if "careful reviewer" in p)
    assert "original_problem's Context:\nWhat is 0+0?" in review and "act_1's Context:\nReasoning..." in review
    assert "Input Usage:\nuse ['original_problem', 'act_1']" in review
    # every role attributed in the ledger
    by_role = metrics["by_role"]
    assert by_role["designer"]["calls"] == 4 and by_role["summarizer"]["calls"] == 2
    assert by_role["executor"]["calls"] == 6
    calls = [json.loads(line) for line in (tmp_path / "results").rglob("calls.jsonl").__next__().read_text().splitlines()]
    stages = {c["stage"] for c in calls}
    assert {"design", "summarize", "op:GENERATE_ANSWER", "op:REVIEW_SOLUTION", "op:ORGANIZE_SOLUTION"} <= stages
    # D.3: designer and executor at temperature 0.01 (the summariser too)
    assert {s["temperature"] for m, s, n in bb.requests} == {0.01}


def test_repair_then_reask_every_attempt_recorded(tmp_path, tiny_data):
    bad_key = stage_json(1, [("GENERATE_ANSWER", ["act_9"], "act_1")])
    script = Script([[SOLVE[:-30]], ["no json here", bad_key, SOLVE], [ORGANIZE]])
    # step 0: truncated JSON -> repaired; step 1: invalid, invalid (context), then valid
    script.designs[1] = ["no json here", bad_key, ORGANIZE]
    _, preds, _ = run_dyflow(tmp_path, script, params={"validation": "strict"})   # a missing key is re-asked
    tr = preds[0]["trace"]
    s0, s1 = tr["stages"]
    assert [a["status"] for a in s0["attempts"]] == ["repaired"]
    assert [a["status"] for a in s1["attempts"]] == ["invalid", "invalid", "valid"]
    assert [a["kind"] for a in s1["attempts"]] == ["first", "reask", "reask"]
    assert "no valid JSON" in s1["attempts"][0]["error"]
    assert "['act_9'] do not exist" in s1["attempts"][1]["error"]
    reask = s1["attempts"][2]["messages"]
    assert reask[-2] == {"role": "assistant", "content": bad_key}
    assert reask[-1]["content"].startswith("Your stage design could not be used:") and "act_9" in reask[-1]["content"]
    assert s1["designer_messages"] == reask and s1["designer_output"] == ORGANIZE
    assert tr["designer_calls"] == 4 and tr["terminated_by"] == "organize"


def test_design_failure_is_recorded_and_bounded(tmp_path, tiny_data):
    script = Script(designer=lambda m, s: "I refuse to output JSON")
    metrics, preds, bb = run_dyflow(tmp_path, script, params={"t_max": 2, "max_reasks": 1})
    tr = preds[0]["trace"]
    assert preds[0]["status"] == "ok" and metrics["score"] == 0.0     # a scored method failure, not an error
    assert tr["terminated_by"] == "t_max" and tr["n_stages"] == 0
    assert [r["status"] for r in tr["stages"]] == ["design_failed", "design_failed"]
    assert all(len(r["attempts"]) == 2 and r["stage"] is None for r in tr["stages"])
    assert tr["designer_calls"] == 4 and tr["method_failure"] == "no stage could be designed"
    assert "planning step 1: no valid stage" in tr["stages"][1]["summary"]    # errors reach z_t


def test_t_max_and_last_output_answer(tmp_path, tiny_data):
    gen = stage_json(1, [("GENERATE_ANSWER", ["original_problem"], "")])   # empty key: a fresh one
    script = Script(designer=lambda m, s: gen.replace("stage_1", f"stage_{stage_count(m) + 1}"))
    metrics, preds, _ = run_dyflow(tmp_path, script, params={"t_max": 3})
    tr = preds[0]["trace"]
    assert tr["terminated_by"] == "t_max" and tr["n_stages"] == 3 and tr["final_key"] is None
    assert sorted(tr["memory"]) == ["act_1", "act_2", "act_3"]       # Algorithm 1 line 9: unique keys
    assert tr["answer_from"] == "last_output" and tr["answer_key"] == "act_3" and metrics["score"] == 1.0
    _, preds2, _ = run_dyflow(tmp_path / "empty", script, params={"t_max": 3, "no_answer": "empty"})
    assert preds2[0]["raw_output"] == "" and preds2[0]["trace"]["answer_from"] == "none"
    plan = stage_json(1, [("GENERATE_PLAN", ["original_problem"], "act_1")])
    _, preds3, _ = run_dyflow(tmp_path / "plan", Script(designer=lambda m, s: plan), params={"t_max": 1})
    assert preds3[0]["trace"]["answer_from"] == "last_any_output" and preds3[0]["raw_output"]
    assert preds2[0]["status"] == "ok" and preds2[0]["score"] == 0.0


def test_notices_forced_termination_and_max_stages(tmp_path, tiny_data):
    # a designer that never organizes: notices from stage 5, forced termination notice at 7 (and 8), and, as the
    # release's 8 iterations, an 8th stage; max_stages=7 enforces the prompt's "Maximum 7 stages total"
    def designer(m, s):
        n = stage_count(m) + 1
        return stage_json(n, [("GENERATE_ANSWER", ["original_problem"], f"act_{n}")])
    script = Script(designer=designer)
    _, preds, _ = run_dyflow(tmp_path, script, params={"t_max": 10})
    tr = preds[0]["trace"]
    assert tr["n_stages"] == 8 and tr["terminated_by"] == "max_stages"
    _, preds8, _ = run_dyflow(tmp_path / "t8", Script(designer=designer))          # the release: 8 iterations
    assert preds8[0]["trace"]["n_stages"] == 8 and preds8[0]["trace"]["designer_calls"] == 8
    _, preds7, _ = run_dyflow(tmp_path / "m7", Script(designer=designer), params={"t_max": 10, "max_stages": 7})
    assert preds7[0]["trace"]["n_stages"] == 7 and preds7[0]["trace"]["terminated_by"] == "max_stages"
    notices = [r["notice"] for r in tr["stages"]]
    assert notices[:4] == [None] * 4
    assert notices[4].startswith("\n\nConstraint: This will be stage 5.") and notices[5].startswith("\n\nConstraint")
    assert notices[6].startswith("\n\nTermination Required: This is stage 7.")
    assert notices[7].startswith("\n\nTermination Required: This is stage 8.")
    assert script.design_prompts[6][0]["content"].endswith(notices[6])
    # at the forced stage ORGANIZE_SOLUTION may follow other operators (the release's notice asks for it)
    def designer2(m, s):
        n = stage_count(m) + 1
        if n < 7:
            return stage_json(n, [("GENERATE_ANSWER", ["original_problem"], f"act_{n}")])
        return stage_json(7, [("SELF_CONSISTENCY_ENSEMBLE", ["original_problem"], "act_7"),
                              ("ORGANIZE_SOLUTION", ["act_7"], "act_8")])
    _, preds, _ = run_dyflow(tmp_path / "b", Script(designer=designer2), params={"t_max": 10})
    tr = preds[0]["trace"]
    assert tr["terminated_by"] == "organize" and tr["n_stages"] == 7
    ens = tr["stages"][6]["executed"][0]
    assert len(ens["samples"]) == 5 and ens["selected_index"] == 1 and ens["selection_method"] == "llm_majority_selection"


def test_loop_guard_warning_after_three_review_stages(tmp_path, tiny_data):
    def designer(m, s):
        n = stage_count(m) + 1
        if n == 1:
            return SOLVE
        if n <= 3:
            return stage_json(n, [("REVIEW_SOLUTION", ["original_problem", "act_1"], f"act_r{n}")])
        return stage_json(n, [("ORGANIZE_SOLUTION", ["act_1"], "act_final")])
    script = Script(designer=designer)
    _, preds, _ = run_dyflow(tmp_path, script)
    tr = preds[0]["trace"]
    warnings = [r["loop_warning"] for r in tr["stages"]]
    assert warnings == [None, None, None, P.LOOP_WARNING]
    assert script.design_prompts[3][0]["content"].endswith(P.LOOP_WARNING)
    _, preds, _ = run_dyflow(tmp_path / "off", Script(designer=designer), params={"loop_guard": 0})
    assert all(r["loop_warning"] is None for r in preds[0]["trace"]["stages"])


def test_ensemble_fallback_and_distinct_samples(tmp_path, tiny_data):
    seen: list[dict[str, Any]] = []

    def script_fn(messages, sampling):
        p = messages[-1]["content"]
        if is_designer(messages):
            return stage_json(1, [("ENSEMBLE", ["original_problem"], "act_1")]) if stage_count(messages) == 0 \
                else ORGANIZE
        if "impartial adjudicator" in p:
            seen.append(sampling)
            return "I pick the best one."                          # no JSON: first sample, as released
        if "summarizing" in p:
            return "- Stage goal: x"
        seen.append(sampling)
        return executor_answer(p)
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ROLES, "params": {}}
    spec = make_spec(tmp_path / "e", method, limit=1)
    run(spec, ScriptedBackbone(script_fn))
    tr = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])["trace"]
    ens = tr["stages"][0]["executed"][0]
    assert ens["selection_method"] == "fallback_first" and ens["selected_index"] == 0
    temps = sorted(s["temperature"] for s in seen)
    assert temps[0] == 0.0 and temps.count(0.7) == 5


# ---- ablations --------------------------------------------------------------------------------------
def test_wo_dynamic_planning_one_stage_no_feedback(tmp_path, tiny_data):
    one = stage_json(1, [("GENERATE_ANSWER", ["original_problem"], "act_1"),
                         ("ORGANIZE_SOLUTION", ["original_problem", "act_1"], "act_2")])
    script = Script([[one]])
    metrics, preds, _ = run_dyflow(tmp_path, script, params={"variant": "wo_dynamic_planning"},
                                   roles=["designer", "executor"])
    tr = preds[0]["trace"]
    assert tr["variant"] == "wo_dynamic_planning" and tr["n_stages"] == 1 and tr["terminated_by"] == "organize"
    assert len(script.design_prompts) == 1 and P.SINGLE_STAGE in script.design_prompts[0][0]["content"]
    assert "summarizer" not in metrics["by_role"] and metrics["score"] == 1.0
    # a single stage without ORGANIZE_SOLUTION is re-asked
    script = Script([[SOLVE, one]])
    _, preds, _ = run_dyflow(tmp_path / "b", script, params={"variant": "wo_dynamic_planning"},
                             roles=["designer", "executor"])
    att = preds[0]["trace"]["stages"][0]["attempts"]
    assert [a["status"] for a in att] == ["invalid", "valid"] and "must end with ORGANIZE_SOLUTION" in att[0]["error"]


def test_wo_dynamic_operator_fixed_template(tmp_path, tiny_data):
    reviews = iter(["Overall Verdict: reject", "Overall Verdict: major_issues", "Overall Verdict: accept"])

    def script_fn(messages, sampling):
        assert not is_designer(messages)                       # no designer in the fixed template
        p = messages[-1]["content"]
        if "careful reviewer" in p:
            return next(reviews)
        return executor_answer(p)
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ["executor"],
              "params": {"variant": "wo_dynamic_operator"}}
    spec = make_spec(tmp_path, method, limit=1)
    metrics = run(spec, ScriptedBackbone(script_fn))
    tr = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])["trace"]
    assert tr["operators_used"] == ["GENERATE_PLAN", "GENERATE_ANSWER", "REVIEW_SOLUTION",
                                    "REFINE_ANSWER", "REVIEW_SOLUTION", "REFINE_ANSWER", "REVIEW_SOLUTION",
                                    "ORGANIZE_SOLUTION"]
    assert tr["terminated_by"] == "organize" and tr["designer_calls"] == 0 and metrics["score"] == 1.0
    assert set(metrics["by_role"]) == {"executor"}


@pytest.mark.parametrize("variant,adapter", [("wo_kto", "dyplanner_sft"), ("wo_sft", "dyplanner_kto")])
def test_designer_adapter_variants_need_their_adapter(tmp_path, tiny_data, variant, adapter):
    """Same control flow as the full method; without the trained adapter the run stops before any problem
    with the adapter's name (never a silent run on the base designer)."""
    script = Script([[SOLVE], [ORGANIZE]])
    with pytest.raises(RuntimeError, match=f"needs the trained designer adapter '{adapter}'"):
        run_dyflow(tmp_path, script, params={"variant": variant, "designer_adapter": adapter})
    assert not script.prompts                                  # refused before any request


class AdapterScripted(ScriptedBackbone):
    """The scripted double serving named adapters (records which adapter each request ran on)."""

    def __init__(self, script: Any, adapters: tuple[str, ...]) -> None:
        super().__init__(script)
        self.adapters = {a: {"path": f"/x/{a}.gguf", "scale": 1.0} for a in adapters}
        self.adapter_of_request: list[tuple[bool, str | None]] = []

    def adapter_identity(self, name: str) -> dict[str, Any]:
        if name not in self.adapters:
            raise KeyError(f"unknown adapter {name!r}")
        return {"name": name, "sha256": "0" * 64, "base_model": "scripted"}

    async def complete(self, messages, sampling, n, adapter: str | None = None):
        self.adapter_of_request.append((is_designer(messages), adapter))
        return await super().complete(messages, sampling, n)


def test_designer_adapter_is_passed_on_designer_calls_only(tmp_path, tiny_data):
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ROLES,
              "params": {"variant": "wo_kto", "designer_adapter": "dyplanner_sft"}}
    spec = make_spec(tmp_path, method, limit=1)
    bb = AdapterScripted(Script([[SOLVE], [ORGANIZE]]), ("dyplanner_sft",))
    metrics = run(spec, bb)
    assert metrics["score"] == 1.0
    used = set(bb.adapter_of_request)
    assert used == {(True, "dyplanner_sft"), (False, None)}
    tr = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])["trace"]
    assert tr["designer_adapter"] == "dyplanner_sft" and tr["variant"] == "wo_kto"


def test_config_files_compose():
    from tests.conftest import compose

    for name, variant in [("dyflow", "full"), ("dyflow_wo_kto", "wo_kto"), ("dyflow_wo_sft", "wo_sft"),
                          ("dyflow_wo_dynamic_operator", "wo_dynamic_operator"),
                          ("dyflow_wo_dynamic_planning", "wo_dynamic_planning")]:
        m = compose([f"method={name}"])["method"]
        assert m["name"] == name and m["params"]["folder"] == name and m["label"] and m["deviations"]
        opts = Options.build(m["params"])
        assert opts.variant == variant


# ---- TEST_CODE: only the benchmark's public tests, through its tool ----------------------------------
from tests.conftest import EchoBenchmark


class PublicOnly(EchoBenchmark):
    """A code benchmark double whose one public test passes only for 'return 2*x'."""

    domain = "code"
    runs: list[str] = []

    async def run_public_tests(self, text, problem):
        PublicOnly.runs.append(text)
        ok = "return 2*x" in text
        return {"passed": int(ok), "total": 1,
                "results": [{"test": "assert f(1) == 2", "passed": ok, "status": "ok" if ok else "fail",
                             "error": "" if ok else "AssertionError"}]}


CODE = stage_json(1, [("GENERATE_CODE", ["original_problem"], "act_1"), ("TEST_CODE", ["act_1"], "act_2")])


def _code_script(messages, sampling):
    p = messages[-1]["content"]
    if is_designer(messages):
        return CODE if stage_count(messages) == 0 else ORGANIZE
    if "summarizing" in p:
        assert "Code execution result:" in p
        return "- Stage goal: code\n- Execution result: Failure"
    return "ANSWER: def f(x): return x"


def test_test_code_runs_public_tests_through_the_tool(tmp_path, tiny_data):
    PublicOnly.runs.clear()
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ROLES, "params": {}}
    spec = make_spec(tmp_path, method, limit=1)
    spec.benchmark_cfg.update(kind="tests.test_dyflow.PublicOnly", execute_code=True)
    run(spec, ScriptedBackbone(_code_script))
    pred = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    out = pred["trace"]["memory"]["act_2"]
    assert PublicOnly.runs == ["ANSWER: def f(x): return x"]              # the solution text, nothing else
    assert "**Execution Failed**" in out and "AssertionError" in out and "passed 0/1" in out
    assert [c["name"] for c in pred["tool_calls"]] == ["run_public_tests"]   # recorded like any tool call
    ex = pred["trace"]["stages"][0]["executed"][1]
    assert ex["template"] == "TEST_CODE" and ex["ledger_stage"] is None and ex["status"] == "ran"
    assert "op:TEST_CODE" not in pred["cost_by_stage"]                      # no LLM call


def test_test_code_without_a_code_tool_does_not_execute(tmp_path, tiny_data):
    def script_fn(messages, sampling):
        if is_designer(messages) or "summarizing" in messages[-1]["content"]:
            return _code_script(messages, sampling)
        return "```python\nimport os\nos.system('echo pwned')\n```"
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ROLES, "params": {}}
    spec = make_spec(tmp_path, method, limit=1)
    run(spec, ScriptedBackbone(script_fn))
    pred = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    out = pred["trace"]["memory"]["act_2"]
    assert "Execution Status: Not run" in out and "os.system" in out and pred["tool_calls"] == []


def test_memory_key_reused_later_overwrites_but_the_trace_keeps_each_stage(tmp_path, tiny_data):
    """A key written again names the latest value (as released); within a stage an input key resolves to its
    producer in that stage; each stage's own outputs stay in its trace record."""
    s2 = stage_json(2, [("REFINE_ANSWER", ["original_problem", "act_1"], "act_1"),
                        ("REVIEW_SOLUTION", ["act_1"], "act_2")])
    s3 = stage_json(3, [("ORGANIZE_SOLUTION", ["act_1"], "act_9")])
    script = Script([[SOLVE], [s2], [s3]])
    _, preds, _ = run_dyflow(tmp_path, script)
    tr = preds[0]["trace"]
    assert tr["stages"][0]["outputs"]["act_1"] == "Reasoning... ANSWER: 0"
    refine = next(p for p in script.prompts if p.startswith("You are an expert in refining"))
    assert "act_1's Context:\nReasoning... ANSWER: 0" in refine            # the old value, before the write
    assert tr["stages"][1]["outputs"]["act_1"] == tr["memory"]["act_1"] == "Refined. ANSWER: 0"
    review2 = [p for p in script.prompts if "careful reviewer" in p][1]
    assert f"act_1's Context:\n{tr['memory']['act_1']}" in review2
    assert tr["final_key"] == "act_9" and tr["n_stages"] == 3


def test_humaneval_test_code_runs_in_the_sandbox_on_the_shown_tests_only(tmp_path):
    """The real HumanEval (DyFlow split) through the runner: TEST_CODE's verdict comes from the sandbox running
    the docstring's examples (run_public_tests), and the run is scored by the hidden check."""
    import asyncio
    from pathlib import Path

    from agentic_repro.harness.runner import Runner, spec_from_config
    from tests.conftest import compose

    data = Path(__file__).resolve().parents[1] / "data" / "humaneval"
    if not data.exists():
        pytest.fail(f"{data} is missing: run `make data` (make test does)")
    s1 = stage_json(1, [("GENERATE_CODE", ["original_problem"], "act_1"), ("TEST_CODE", ["act_1"], "act_2")])

    def script_fn(messages, sampling):
        p = messages[-1]["content"]
        if is_designer(messages):
            assert "You should not raise ValueError" in messages[0]["content"]    # the release's code suffix
            return s1 if stage_count(messages) == 0 else ORGANIZE
        if "summarizing" in p:
            return "- Stage goal: code"
        return "```python\ndef wrong(*a):\n    return None\n```"
    cfg = compose(["method=dyflow", "benchmark=humaneval_dyflow", "limit=1", f"results_root={tmp_path}",
                   "cache.mode=off", "runner.progress=false"])
    spec = spec_from_config(cfg)
    asyncio.run(Runner(spec, backbone=ScriptedBackbone(script_fn)).run())
    pred = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["status"] == "ok" and pred["score"] == 0.0
    out = pred["trace"]["memory"]["act_2"]
    assert "**Execution Failed**" in out and [c["name"] for c in pred["tool_calls"]] == ["run_public_tests"]
    ex = pred["trace"]["stages"][0]["executed"][1]
    assert ex["status"] == "ran" and ex["total"] >= 1 and ex["passed"] == 0


def test_named_options_change_what_is_sent(tmp_path, tiny_data):
    """temperatures=release (0.1 / 0.1), operator_catalogue=paper (Table 6's list) and code_postprocess=release
    (the §3.2 extraction call on the executor role) each reach the requests."""
    script = Script([[SOLVE], [ORGANIZE]])
    _, _, bb = run_dyflow(tmp_path, script, params={"temperatures": "release", "operator_catalogue": "paper"})
    temps = {(is_designer(m), "summarizing" in m[-1]["content"]): s["temperature"] for m, s, n in bb.requests}
    assert temps == {(True, False): 0.1, (False, False): 0.1, (False, True): 0.01}
    first = script.design_prompts[0][0]["content"]
    assert "11. TERMINATE" in first and "5. GENERATE_CODE" in first and "TEST_CODE" not in first
    PublicOnly.runs.clear()
    seen: list[str] = []

    def code_fn(messages, sampling):
        p = messages[-1]["content"]
        if p.startswith("You are given:\n- A partial or original function definition"):
            seen.append(p)
            return "ANSWER: def f(x): return 2*x"
        return _code_script(messages, sampling)
    method = {"name": "dyflow", "solver": "agentic_repro.dyflow.method:DyFlow", "roles": ROLES,
              "params": {"code_postprocess": "release"}}
    spec = make_spec(tmp_path / "code", method, limit=1)
    spec.benchmark_cfg.update(kind="tests.test_dyflow.PublicOnly", execute_code=True)
    run(spec, ScriptedBackbone(code_fn))
    pred = json.loads((spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert len(seen) == 1 and "Complete working solution:\nANSWER: def f(x): return x" in seen[0]
    assert pred["raw_output"] == "ANSWER: def f(x): return 2*x" and pred["cost_by_stage"]["extract_code"]["calls"] == 1
    assert pred["trace"]["answer_from"] == "terminal+code_extraction"


# ---- issue 20 item 2: release-style TERMINATE, designer failures and fallback answers counted ------------------

def _terminate(n: int, key: str, **extra: Any) -> str:
    return json.dumps({"stage_id": f"stage_{n}", "stage_description": "end", "operators": [
        {"operator_id": f"op_{n}_1", "operator_description": "terminate",
         "params": {"instruction_type": "TERMINATE", "final_answer_key": key, **extra}}]})


@pytest.mark.parametrize("key", ["act_1", "<<act_1>>", "actions.act_1.content"])
def test_release_style_terminate_returns_the_named_key_from_memory(tmp_path, tiny_data, key):
    metrics, preds, _ = run_dyflow(tmp_path, Script([[SOLVE], [_terminate(2, key)]]))
    tr = preds[0]["trace"]
    assert tr["terminated_by"] == "terminate" and tr["answer_from"] == "terminal"
    assert preds[0]["raw_output"] == tr["memory"]["act_1"] and preds[0]["raw_output"].endswith("ANSWER: 0")
    assert metrics["score"] == 1.0
    g = StageGraph.from_designer(json.loads(_terminate(2, key)))
    assert g.operators[0].final_answer_key == "act_1"
    assert g.to_designer()["operators"][0]["params"]["final_answer_key"] == "act_1"   # the training target keeps it


def test_terminate_naming_a_missing_key_is_re_asked_not_an_empty_answer(tmp_path, tiny_data):
    metrics, preds, _ = run_dyflow(tmp_path, Script([[SOLVE], [_terminate(2, "act_9"), _terminate(2, "act_1")]]))
    s1 = preds[0]["trace"]["stages"][1]
    assert [a["status"] for a in s1["attempts"]] == ["invalid", "valid"]
    assert "final_answer_key 'act_9' does not exist" in s1["attempts"][0]["error"] and metrics["score"] == 1.0


def test_designer_failures_and_fallback_answers_are_counted_in_the_trace(tmp_path, tiny_data):
    review_only = stage_json(1, [("REVIEW_SOLUTION", ["original_problem"], "act_1")])
    script = Script([["no json", review_only], ["no json"]])
    _, preds, _ = run_dyflow(tmp_path, script, params={"t_max": 2, "max_reasks": 1})
    tr = preds[0]["trace"]
    assert tr["answer_from"] == "last_any_output" and tr["answer_template"] == "REVIEW_SOLUTION"
    assert preds[0]["raw_output"].startswith("Review Details")           # the review text became the answer
    assert tr["counts"] == {"invalid_designs": 3, "stages_given_up": 1, "fallback_answers": 1, "review_answers": 1}
    _, ok, _ = run_dyflow(tmp_path / "ok", Script([[SOLVE], [ORGANIZE]]))
    assert ok[0]["trace"]["counts"] == dict.fromkeys(
        ("invalid_designs", "stages_given_up", "fallback_answers", "review_answers"), 0)


# ---- validation=release (default) runs what the release runs; strict re-asks (issue 21) -----------------------------
def _review_then_refine(n: int) -> str:
    """Review act_1, then refine into act_1 (reads the review's act_2): a data-flow "cycle" the release runs in order."""
    return stage_json(n, [("REVIEW_SOLUTION", ["original_problem", "act_1"], "act_2"),
                          ("REFINE_ANSWER", ["original_problem", "act_1", "act_2"], "act_1")])


def test_release_validation_runs_in_listed_order_what_strict_rejects(tmp_path, tiny_data):
    first = stage_json(1, [("GENERATE_ANSWER", ["original_problem"], "act_1")])
    script = Script([[first], [_review_then_refine(2)], [ORGANIZE]])
    _, preds, _ = run_dyflow(tmp_path, script)
    tr = preds[0]["trace"]
    s1 = tr["stages"][1]
    assert [a["status"] for a in s1["attempts"]] == ["valid"]                  # one designer call
    assert [e["template"] for e in s1["executed"]] == ["REVIEW_SOLUTION", "REFINE_ANSWER"]   # listed order
    assert tr["memory"]["act_1"].startswith("Refined.")                        # the refine overwrote act_1
    review_prompt = next(q for q in script.prompts if "careful reviewer" in q)
    assert "act_1's Context:\nReasoning..." in review_prompt                  # the review read the old act_1
    strict = Script([[first], [_review_then_refine(2)], [ORGANIZE]])
    _, preds_s, _ = run_dyflow(tmp_path / "strict", strict, params={"validation": "strict", "max_reasks": 1})
    s1s = preds_s[0]["trace"]["stages"][1]
    assert [a["status"] for a in s1s["attempts"]] == ["invalid", "invalid"] and "cycle" in s1s["attempts"][0]["error"]


def test_release_validation_a_missing_key_fails_that_operator_and_unknown_types_run_default(tmp_path, tiny_data):
    stage1 = stage_json(1, [("GENERATE_ANSWER", ["original_problem", "act_9"], "act_1"),   # act_9 does not exist
                            ("SOLVE_IT", ["original_problem"], "act_2")])                  # unknown: DEFAULT
    script = Script([[stage1], [ORGANIZE.replace('"act_1"]', '"act_2"]')]])
    _, preds, _ = run_dyflow(tmp_path, script)
    tr = preds[0]["trace"]
    s0 = tr["stages"][0]
    assert [a["status"] for a in s0["attempts"]] == ["valid"] and tr["designer_calls"] == 2
    assert "SOLVE_IT" in s0["attempts"][0]["fixes"][0] and "DEFAULT" in s0["attempts"][0]["fixes"][0]
    assert [(e["template"], e.get("error")) for e in s0["executed"]] == [
        ("GENERATE_ANSWER", "input data not found: act_9"), ("DEFAULT", None)]
    assert "act_1" not in tr["memory"] and "act_2" in tr["memory"]
    assert any("op_1_1 (GENERATE_ANSWER) failed: input data not found: act_9" in e for e in tr["errors"])
    assert "input data not found: act_9" in tr["stages"][1]["summary"]          # s_t holds the error
    assert tr["terminated_by"] == "organize"


def test_organize_may_join_other_operators_once_the_stage_5_notice_asks_for_it(tmp_path, tiny_data):
    """The stage-5/6 notice tells the designer to include ORGANIZE_SOLUTION: neither validation rejects it."""
    def designer(m, s):
        n = stage_count(m) + 1
        if n < 5:
            return stage_json(n, [("GENERATE_ANSWER", ["original_problem"], f"act_{n}")])
        return stage_json(n, [("REVIEW_SOLUTION", ["original_problem", "act_4"], "act_5"),
                              ("ORGANIZE_SOLUTION", ["act_4", "act_5"], "act_6")])
    for validation in ("release", "strict"):
        _, preds, _ = run_dyflow(tmp_path / validation, Script(designer=designer), params={"validation": validation})
        tr = preds[0]["trace"]
        assert tr["terminated_by"] == "organize" and tr["n_stages"] == 5 and tr["designer_calls"] == 5, validation
