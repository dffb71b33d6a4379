"""DynaGraph with the scripted double: DAG validation and repair, expert feedback, the Evaluator's thresholds,
patch insertion, subgraph truncation and regeneration, budgets, and whole problems through the runner."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentic_repro.dynagraph.config import Options
from agentic_repro.dynagraph.evaluator import Budget, decide, global_uncertainty
from agentic_repro.dynagraph.schema import Feedback, PlanNode, parse_feedback, validate_plan
from agentic_repro.dynagraph.topology import TaskGraph
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone


def plan(*nodes):
    return json.dumps({"nodes": [{"id": i, "expert": e, "subtask": f"do {i}", "inputs": list(ins)}
                                 for i, e, ins in nodes]})


# ---- DAG validation -------------------------------------------------------------------------------------

def test_valid_plan_and_expert_aliases():
    c = validate_plan("Here it is:\n```json\n" + plan(("v1", "rag", []), ("v2", "E_logic", ["v1"]),
                                                       ("v3", "E_expr", ["v2", "v1"])) + "\n```")
    assert c.ok and [n.expert for n in c.nodes] == ["E_rag", "E_logic", "E_expr"]
    assert sorted(c.graph.edges) == [("v1", "v2"), ("v1", "v3"), ("v2", "v3")]


@pytest.mark.parametrize("text, error", [
    (plan(("a", "E_logic", ["b"]), ("b", "E_logic", ["a"])), "cycle"),
    (plan(("a", "E_math", []), ("b", "E_expr", ["a"])), "unknown expert 'E_math'"),
    (plan(("a", "E_logic", ["zz"]), ("b", "E_expr", ["a"])), "dangling input"),
    (plan(("a", "E_logic", []), ("a", "E_expr", [])), "used more than once"),
    (plan(("a", "E_logic", ["a"])), "depends on itself"),
    ("I would first look up the facts.", "not JSON"),
    ('{"nodes": []}', "empty"),
])
def test_invalid_plans_are_rejected_with_a_reason(text, error):
    c = validate_plan(text)
    assert not c.ok and any(error in e for e in c.errors), c.errors


def test_subgraph_may_use_executed_nodes_but_not_reuse_ids():
    sub = plan(("n1", "E_logic", ["v1"]), ("n2", "E_expr", ["n1"]))
    assert validate_plan(sub, available={"v1"}, reserved={"v1", "v2"}).ok
    assert not validate_plan(sub, available=set()).ok                       # v1 unknown: dangling
    bad = validate_plan(plan(("v2", "E_expr", ["v1"])), available={"v1"}, reserved={"v1", "v2"})
    assert any("already used" in e for e in bad.errors)
    assert not validate_plan(plan(*[(f"x{i}", "E_logic", []) for i in range(5)]), max_nodes=4).ok


def test_truncated_json_is_repaired():
    text = plan(("v1", "E_logic", []), ("v2", "E_expr", ["v1"]))[:-3]
    c = validate_plan(text)
    assert c.parse == "repaired" and [n.id for n in c.nodes][:1] == ["v1"]


# ---- expert feedback --------------------------------------------------------------------------------------

def test_feedback_xi_and_confidence_rules():
    ok = parse_feedback("v1", "E_rag", '{"assertions": ["Paris is in France"], "evidence": ["x"], '
                        '"citations": ["wiki"], "confidence": 0.8}')
    assert (ok.xi, ok.c, ok.text) == (0, 0.8, "Paris is in France")
    assert parse_feedback("v1", "E_rag", '{"assertions": [], "confidence": 0.9}').xi == 1
    assert parse_feedback("v1", "E_rag", "no json here").xi == 1
    logic = parse_feedback("v2", "E_logic", '{"reasoning": ["a"], "verifications": [true, "false"], '
                           '"result": "4", "confidence": "85%"}')
    assert logic.xi == 1 and logic.c == 0.85 and "a verification failed" in logic.reasons
    expr = parse_feedback("v3", "E_expr", '{"draft": "ANSWER: 4", "unsupported": [], "confidence": 0.9, '
                          '"anomaly": true}')
    assert expr.xi == 1 and "self-reported anomaly" in expr.reasons
    nocal = parse_feedback("v3", "E_expr", '{"draft": "ANSWER: 4"}', missing_confidence=0.0)
    assert nocal.xi == 0 and nocal.c == 0.0 and "no valid confidence" in nocal.reasons


# ---- the Evaluator ------------------------------------------------------------------------------------------

def fb(c, xi=0):
    return Feedback("v", "E_logic", {}, xi, c, "ok", ["a verification failed"] if xi else [])


def test_uncertainty_forms():
    cs = [0.9, 0.5, 0.7]
    assert global_uncertainty(cs, "mean") == pytest.approx(1 - 0.7)
    assert global_uncertainty(cs, "min") == pytest.approx(0.5)
    assert global_uncertainty(cs, "noisy_or") == pytest.approx(1 - 0.9 * 0.5 * 0.7)
    assert global_uncertainty(cs, "last") == pytest.approx(0.3)
    assert global_uncertainty([], "mean") == 0.0


def test_thresholds_tau_c_and_tau_u():
    o, b = Options(), Budget(3, 2, 10)
    assert decide(fb(0.35), [0.9, 0.35], o, b).action == "continue"       # c == tau_c: no breach
    assert decide(fb(0.349), [0.9, 0.9], o, b).action == "patch"          # c < tau_c
    assert decide(fb(0.9, xi=1), [0.9], o, b).action == "patch"           # xi = 1
    # U_t = 1 - mean(0.6, 0.5) = 0.45 >= tau_u: reconstruct, although the node itself is above tau_c
    d = decide(fb(0.5), [0.6, 0.5], o, b)
    assert d.action == "reconstruct" and d.U_t == pytest.approx(0.45)
    assert decide(fb(0.5), [0.61, 0.5], o, b).action == "continue"        # U_t = 0.445
    assert decide(fb(0.5), [0.6, 0.5], Options(suspend_rule="local_only"), b).action == "continue"
    assert decide(fb(0.1), [0.1], o, b, is_patch=True).action == "reconstruct"   # a failed patch


def test_variants_and_budgets_choose_the_other_operator_or_accept():
    b = Budget(3, 2, 10)
    assert decide(fb(0.1), [0.9, 0.1], Options.build({"variant": "wo_patching"}), b).action == "reconstruct"
    wo_r = Options.build({"variant": "wo_reconstruction"})
    assert decide(fb(0.1), [0.1], wo_r, b, is_patch=True).action == "patch"
    assert decide(fb(0.1), [0.1], wo_r, Budget(0, 2, 10), is_patch=True).action == "accept"
    assert decide(fb(0.1), [0.9, 0.1], Options(), Budget(0, 0, 10)).action == "accept"
    assert decide(fb(0.1), [0.9, 0.1], Options(), Budget(0, 1, 10)).action == "reconstruct"
    with pytest.raises(ValueError, match="unknown DynaGraph variant"):
        Options.build({"variant": "wo_everything"})
    with pytest.raises(ValueError, match="corpus"):
        Options.build({"evidence": "bm25"})


# ---- topology operators -------------------------------------------------------------------------------------

def diamond() -> TaskGraph:
    g = TaskGraph()
    g.add_plan([PlanNode(id="v1", expert="E_rag", subtask="a"), PlanNode(id="v2", expert="E_logic", subtask="b",
                inputs=["v1"]), PlanNode(id="v4", expert="E_rag", subtask="d"),
                PlanNode(id="v3", expert="E_expr", subtask="c", inputs=["v2", "v4"])])
    return g


def test_topological_execution_order_and_patch_insertion():
    g = diamond()
    assert g.next_ready() == "v1"
    g.mark_done("v1")
    assert g.next_ready() == "v2"
    g.mark_done("v2")
    pid = g.insert_patch("v2", PlanNode(id="v2_patch1", expert="E_logic", subtask="redo b", inputs=["v1"]))
    assert g.status("v2") == "superseded" and g.node("v3").inputs == ["v2_patch1", "v4"]
    assert ("v2_patch1", "v3") in g.g.edges and ("v2", "v3") not in g.g.edges
    assert g.next_ready() == pid           # the patch runs before its consumer
    assert g.history[-1]["op"] == "patch" and g.history[-1]["rewired"] == ["v3"]


def test_truncation_removes_exactly_the_downstream_branch_and_regenerates():
    g = diamond()
    for n in ("v1", "v2", "v4"):
        g.mark_done(n)
    r = g.reconstruct("v2", [PlanNode(id="n1", expert="E_logic", subtask="b again", inputs=["v1"]),
                             PlanNode(id="n2", expert="E_expr", subtask="answer", inputs=["n1", "v4"])])
    assert r["truncated"] == ["v2", "v3"]                     # v2 and its consumer; the sibling v4 is kept
    assert g.status("v4") == "done" and g.status("v1") == "done"
    assert sorted(g.live()) == ["n1", "n2", "v1", "v4"] and g.sinks() == ["n2"]
    assert g.next_ready() == "n1" and g.history[-1]["op"] == "reconstruct"


# ---- whole problems through the runner ---------------------------------------------------------------------

def _num(messages):
    m = re.search(r"What is (\d+)\+", messages[-1]["content"]) or re.search(r"What is (\d+)\+",
                                                                            json.dumps(messages))
    return int(m.group(1))


def script_factory(*, bad_first_plan=True, patch_fails=False, expr_format_ok=True):
    def script(messages, sampling):
        sys_msg, last = messages[0]["content"], messages[-1]["content"]
        i = _num(messages)
        if "Write ONE patch node" in last:
            return '{"expert": "E_logic", "subtask": "Redo the addition carefully"}'
        if "Write a new sub-plan" in last:
            return plan(("n1", "E_logic", ["v1"]), ("n2", "E_expr", ["n1"]))
        if "Write a plan" in last or "was rejected" in last:
            if bad_first_plan and len(messages) == 2:
                return plan(("v1", "E_logic", ["v2"]), ("v2", "E_logic", ["v1"]))   # a cycle
            return plan(("v1", "E_rag", []), ("v2", "E_logic", ["v1"]), ("v3", "E_expr", ["v2"]))
        if sys_msg.startswith("You are E_rag"):
            return json.dumps({"assertions": [f"{i}+{i} is a sum"], "evidence": ["arithmetic"],
                               "citations": ["model recall"], "confidence": 0.9, "anomaly": False})
        if sys_msg.startswith("You are E_logic"):
            careful = "carefully" in last
            conf = 0.9 if (careful and not patch_fails) or "do n1" in last else 0.2
            return json.dumps({"reasoning": [f"{i}+{i}"], "verifications": [True], "result": str(2 * i),
                               "confidence": conf})
        if sys_msg.startswith("You are E_expr"):
            draft = f"The sum is {2 * i}. ANSWER: {2 * i}" if expr_format_ok else f"The sum is {2 * i}."
            return json.dumps({"draft": draft, "unsupported": [], "confidence": 0.9})
        raise AssertionError(f"unexpected prompt: {last[:200]}")
    return script


def method_cfg(**params):
    return {"name": "dynagraph", "solver": "agentic_repro.dynagraph.method:DynaGraph", "roles": ["planner", "expert1", "expert2",
            "expert3"], "params": {"variant": "full", **params}}


def preds_of(spec):
    return [json.loads(l) for l in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]


def test_replan_on_cycle_then_patch_the_low_confidence_node(tmp_path: Path, tiny_data: Path):
    spec = make_spec(tmp_path, method_cfg(), limit=2)
    double = ScriptedBackbone(script_factory())
    metrics = run(spec, double)
    assert metrics["score"] == 1.0
    p = preds_of(spec)[0]
    t = p["trace"]
    att = t["plans"][0]["attempts"]
    assert len(att) == 2 and not att[0]["check"]["ok"] and "cycle" in att[0]["check"]["errors"][0]
    assert "was rejected" in att[1]["messages"][-1]["content"]
    ops = [h["op"] for h in t["topology_history"]]
    assert ops == ["plan", "patch"] and t["patches"] == 1 and t["reconstructions"] == 0
    assert [e["node"] for e in t["executions"]] == ["v1", "v2", "v2_patch1", "v3"]
    assert [e["action"] for e in t["events"]] == ["continue", "patch", "continue", "continue"]
    # experts read only through S: v3 read the patch's output, not v2's
    assert {"reader": "v3", "keys": ["v2_patch1"]} in t["S_reads"]
    kinds = [a["kind"] for a in t["S"]]
    assert kinds[0] == "query" and "patch" in kinds and kinds[-1] == "answer"
    # every call at the paper's sampling; roles attributed per module
    assert all(s["temperature"] == 0.7 and s["top_p"] == 0.9 for _, s, _ in double.requests)
    roles = {c["role"] for c in map(json.loads, (spec.out_dir / "calls.jsonl").read_text().splitlines())}
    assert roles == {"planner", "expert1", "expert2", "expert3"}
    assert [m["label"] for m in t["modules"]] == ["base model + role prompt"] * 4
    assert t["options"]["uncertainty"] == "mean" and t["evidence"]["kind"] == "closed_book"


def test_failed_patch_reconstructs_the_downstream_subgraph(tmp_path: Path, tiny_data: Path):
    spec = make_spec(tmp_path, method_cfg(), limit=1)
    run(spec, ScriptedBackbone(script_factory(bad_first_plan=False, patch_fails=True)))
    t = preds_of(spec)[0]["trace"]
    ops = [h["op"] for h in t["topology_history"]]
    assert ops == ["plan", "patch", "reconstruct"]
    rec = t["topology_history"][-1]
    assert rec["failed"] == "v2_patch1" and rec["truncated"] == ["v2_patch1", "v3"] and rec["added"] == ["n1", "n2"]
    assert [n["id"] for n in rec["live_nodes"]] == ["v1", "n1", "n2"]
    assert preds_of(spec)[0]["score"] == 1.0


def test_wo_patching_reconstructs_and_budgets_bound_the_work(tmp_path: Path, tiny_data: Path):
    spec = make_spec(tmp_path, method_cfg(variant="wo_patching"), limit=1)
    run(spec, ScriptedBackbone(script_factory(bad_first_plan=False)))
    t = preds_of(spec)[0]["trace"]
    assert [h["op"] for h in t["topology_history"]][:2] == ["plan", "reconstruct"] and t["patches"] == 0
    # node budget: 2 executions, then the orchestrator stops and answers with what it has
    spec2 = make_spec(tmp_path / "b", method_cfg(max_nodes=2), limit=1)
    run(spec2, ScriptedBackbone(script_factory(bad_first_plan=False)))
    t2 = preds_of(spec2)[0]["trace"]
    assert t2["nodes_executed"] == 2 and t2["stopped"] == "node budget exhausted"


def test_plan_attempts_are_bounded_then_the_labelled_fallback(tmp_path: Path, tiny_data: Path):
    def script(messages, sampling):
        last = messages[-1]["content"]
        if "Write a plan" in last or "was rejected" in last:
            return "first I think"
        return script_factory(bad_first_plan=False)(messages, sampling)
    spec = make_spec(tmp_path, method_cfg(max_plan_attempts=2), limit=1)
    run(spec, ScriptedBackbone(script))
    t = preds_of(spec)[0]["trace"]
    assert len(t["plans"][0]["attempts"]) == 2 and t["fallback_plan"] and not t["plan_legal_first_try"]
    assert [e["expert"] for e in t["executions"]][:2] == ["E_logic", "E_logic"]  # fallback v1, then its patch
    assert (t["reasks"], t["fallbacks"], t["fallback_patches"]) == (1, 1, 0)      # counted in the trace
    err = make_spec(tmp_path / "e", method_cfg(max_plan_attempts=1, fallback="error"), limit=1)
    m = run(err, ScriptedBackbone(script))
    assert m["n_errors"] == 1 and not m["complete"] and "PlanFailure" in m["first_error"]["error"]
    old = make_spec(tmp_path / "o", method_cfg(max_plan_attempts=1, on_plan_failure="error"), limit=1)
    assert run(old, ScriptedBackbone(script))["n_errors"] == 1                  # the option's earlier name


def test_final_answer_in_the_wrong_format_is_a_lethal_anomaly(tmp_path: Path, tiny_data: Path):
    spec = make_spec(tmp_path, method_cfg(max_patches=1, max_reconstructions=0), limit=1)
    run(spec, ScriptedBackbone(script_factory(bad_first_plan=False, expr_format_ok=False)))
    t = preds_of(spec)[0]["trace"]
    v3 = [e for e in t["executions"] if e["node"] == "v3"][0]
    assert v3["feedback"]["xi"] == 1 and "final answer not in the required format" in v3["feedback"]["reasons"]


def test_bm25_evidence_is_retrieved_recorded_and_gold_folders_refused(tmp_path: Path, tiny_data: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in [
        ("Addition", "To answer a sum, adding a number to itself doubles it: 3+3 is 6."), ("Rivers", "The Nile is long."),
        ("Cats", "Cats sleep a lot.")]))
    spec = make_spec(tmp_path, method_cfg(evidence="bm25", corpus=str(corpus), evidence_k=2), limit=1)
    inner = script_factory(bad_first_plan=False)

    def script(messages, sampling):
        out = inner(messages, sampling)
        return out.replace('"do v1"', '"recall the rule of addition"')
    run(spec, ScriptedBackbone(script))
    t = preds_of(spec)[0]["trace"]
    ev = [a for a in t["S"] if a["kind"] == "evidence"][0]
    assert ev["producer"].startswith("bm25:") and ev["payload"]["items"][0]["title"] == "Addition"
    assert "Evidence passages:" in t["executions"][0]["messages"][1]["content"]
    assert t["evidence"]["kind"] == "bm25" and len(t["evidence"]["sha256"]) == 64
    from agentic_repro.dynagraph.evidence import Bm25Index

    bad = tmp_path / "strategyqa" / "facts.txt"
    bad.parent.mkdir()
    bad.write_text("gold fact\n")
    with pytest.raises(ValueError, match="gold evidence"):
        Bm25Index(str(bad))


def test_retry_message_lists_at_most_six_distinct_errors():
    from agentic_repro.dynagraph.method import _errors_text

    text = _errors_text([f"node {i} is malformed" for i in range(20)] + ["node 0 is malformed"])
    assert text.count("\n- ") == 6 and text.endswith("... and 14 more")
