"""AUQ Table 3 / Figure 2 (scripts/auq_deepresearch.py) from run folders written by real scripted runs: the RACE
numbers, the paper's rows beside, the protocol lines read from the runs, Δ withheld, closed-book labelled,
a refused (no evidence) run shown as incomplete, never as a number."""
from __future__ import annotations

import csv
import json

import pytest

from agentic_repro.scripts import auq_deepresearch as tables
from tests.conftest import run
from tests.doubles import ScriptedBackbone
from tests.test_auq_deepresearch import PLAN_A, PLAN_B, Agent, make, method_cfg, reply


def judge_script(score_for):
    """Every criterion scored ``score_for(prompt)`` vs 4 (the report is article_1)."""
    import re

    def reply_(messages, sampling):
        prompt = messages[-1]["content"]
        crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", prompt, re.DOTALL).group(1))
        s = score_for(prompt)
        return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": s,
                                "article_2_score": 4} for c in items] for d, items in crit.items()})
    return reply_


def scripted_run(tmp_path, monkeypatch, results, method, agent, judge, experiment="auq-deepresearch", corpus=True,
                 **params):
    spec = make(tmp_path, monkeypatch, method_cfg(method, **params), corpus=corpus, n=2)
    spec.experiment, spec.results_root = experiment, results
    spec.full_config = {**spec.full_config, "benchmark": spec.benchmark_cfg, "roles": spec.roles_cfg,
                        "method": spec.method_cfg}
    return run(spec, {"scripted": ScriptedBackbone(agent), "judge-bb": ScriptedBackbone(judge)})


def test_table3_from_scripted_runs(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    results = tmp_path / "results"
    # base: every criterion 6 vs 4 -> 60.0; AUQ (System 2 picks PLAN_B): 7 vs 4 when PLAN_B was researched
    scripted_run(tmp_path / "a", monkeypatch, results, "deep_research", Agent(reply(PLAN_A, 0.9)),
                 judge_script(lambda p: 6))
    scripted_run(tmp_path / "b", monkeypatch, results, "auq_deep_research", Agent(reply(PLAN_A, 0.9)),
                 judge_script(lambda p: 7 if "perovskite" in p else 6))
    out = tables.write_all(results, "scripted")
    t = out["data"]["scripted"]["table"]
    md = t.to_markdown()
    rows = {r[0].text if hasattr(r[0], "text") else r[0]: r for r in t.rows}
    base = rows["Research agent (EDR-style stand-in)"]
    auq = rows["AUQ (Dual) on the stand-in"]
    assert base[1] == "60.00" and base[2:6] == ["60.00"] * 4 and base[6] == "2" and base[7] == "—"
    assert auq[1] == f"{100 * 7 / 11:.2f}"
    assert auq[7] == "— (another judge, another evidence source, fewer tasks)"      # Δ withheld, and why
    assert "52.09" in md and "50.62" in md and "49.71" in md and "54.21" in md and "51.60" in md
    protos = [r[0].text for r in t.rows if hasattr(r[0], "text") and r[0].text.startswith("↳ protocol")]
    assert len(protos) == 2
    assert "RACE judge judge-model ≠ paper gemini-2.5-pro" in protos[1] and "n 2 of 100" in protos[1]
    assert "evidence bm25 over corpus.jsonl ≠ paper web search" in protos[1]
    assert "τ 0.95 = paper" in protos[1] and "N 3 = paper" in protos[1] and "judge attempts 10 = paper" in protos[1]
    assert "article cleaning no ≠ paper yes" in protos[0] and "τ" not in protos[0]
    assert "closed-book" not in md
    assert "paired wilcoxon over 2 shared tasks" in md and "**" not in md                      # no bold marks
    recs = list(csv.DictReader((results / "auq-report" / "table3-scripted.csv").open()))
    assert {r["method"] for r in recs} >= {"deep_research", "auq_deep_research", "paper"}
    fig = json.loads((results / "auq-report" / "figure2-scripted.json").read_text())
    assert fig["gains"][0]["gain_pct"] == pytest.approx(100 * (700 / 11 - 60) / 60)
    assert fig["paper"]["avg_gain_pct"] == 6.4 and (results / "auq-report" / "figure2-scripted.png").is_file()


def test_closed_book_cells_are_labelled_and_refused_runs_are_incomplete(tmp_path, monkeypatch):
    results = tmp_path / "results"
    scripted_run(tmp_path / "a", monkeypatch, results, "deep_research", Agent(reply(PLAN_A, 0.9)),
                 judge_script(lambda p: 6), corpus=False, evidence="closed_book")
    scripted_run(tmp_path / "b", monkeypatch, results, "auq_deep_research", Agent(reply(PLAN_A, 0.9)),
                 judge_script(lambda p: 6), corpus=False)                                    # refused
    for tau, score in ((0.8, 5), (0.9, 6)):
        scripted_run(tmp_path / f"t{tau}", monkeypatch, results, "auq_deep_research", Agent(reply(PLAN_B, 0.99)),
                     judge_script(lambda p, s=score: s), experiment=f"auq-deepresearch-tau{tau:g}", corpus=False,
                     evidence="closed_book", tau=tau)
    out = tables.write_all(results, "scripted")
    t = out["data"]["scripted"]["table"]
    rows = {r[0].text if hasattr(r[0], "text") else r[0]: r for r in t.rows}
    base = rows["Research agent (EDR-style stand-in)"]
    assert base[1] == "60.00 (closed-book)" and base[7] == "—"
    proto = next(r[0].text for r in t.rows if hasattr(r[0], "text") and r[0].text.startswith("↳ protocol"))
    assert "evidence closed-book (no search tool)" in proto and "NOT the paper's measurement" in proto
    auq = rows["AUQ (Dual) on the stand-in"]
    assert auq[1].startswith("incomplete 0/2, 2 errors") and "EvidenceMissing" in auq[1]
    fig = out["data"]["scripted"]["figure2"]
    assert fig["gains"] == []                                     # AUQ's cell is not complete: no gain drawn
    by_tau = {p["tau"]: p for p in fig["tau"]}
    assert by_tau[0.8]["race"] == pytest.approx(100 * 5 / 9) and by_tau[0.8]["closed_book"] is True
    assert by_tau[0.85]["race"] is None and by_tau[0.9]["race"] == pytest.approx(60.0)


def reference_judge(score, scores_reference):
    """Every criterion ``score`` vs 4; ``scores_reference(attempt)``: whether the reply gives article_2_score."""
    import re

    from agentic_repro.harness.llm import request_seed

    def reply_(messages, sampling):
        attempt = next(i for i in range(50) if request_seed(42, i) == sampling["seed"])
        crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", messages[-1]["content"],
                                    re.DOTALL).group(1))
        ref = {"article_2_score": 4} if scores_reference(attempt) else {}
        return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": score, **ref}
                               for c in items] for d, items in crit.items()})
    return reply_


def test_a_judge_that_does_not_score_the_reference_is_asked_again_never_read_as_a_reference_0(tmp_path, monkeypatch):
    """Issue 29: the release reads a missing article_2_score as a reference 0, so a report scored 3 (vs 4) won
    every dimension: Table 3 printed 100.00 beside the research agent's 42.86 for the same target scores. Now
    the reply is asked again (counted per cell, by why), and a judge that never scores the reference makes the
    task an error, never a number."""
    results = tmp_path / "results"
    scripted_run(tmp_path / "a", monkeypatch, results, "deep_research", Agent(reply(PLAN_A, 0.99)),
                 reference_judge(3, lambda attempt: True), corpus=False, evidence="closed_book")
    m = scripted_run(tmp_path / "b", monkeypatch, results, "auq_deep_research", Agent(reply(PLAN_A, 0.99)),
                     reference_judge(3, lambda attempt: attempt >= 1), corpus=False, evidence="closed_book")
    assert m["complete"] and m["judge"]["reasks"] == 2 and m["judge"]["rejected"] == {"missing_reference": 2}
    t = tables.write_all(results, "scripted")["data"]["scripted"]["table"]
    rows = {r[0].text if hasattr(r[0], "text") else r[0]: r for r in t.rows}
    base, auq = rows["Research agent (EDR-style stand-in)"], rows["AUQ (Dual) on the stand-in"]
    assert base[1:6] == auq[1:6] == ["42.86 (closed-book)", *["42.86"] * 4]      # was 100.00 in every column
    protos = [r[0].text for r in t.rows if hasattr(r[0], "text") and r[0].text.startswith("↳ protocol")]
    assert "judge re-asks 0;" in protos[0] and "judge re-asks 2 (missing_reference 2);" in protos[1]
    recs = list(csv.DictReader((results / "auq-report" / "table3-scripted.csv").open()))
    assert [r["judge_reasks"] for r in recs if r["method"] == "auq_deep_research"] == ["2"]

    never = tmp_path / "never"
    m = scripted_run(tmp_path / "c", monkeypatch, never, "auq_deep_research", Agent(reply(PLAN_A, 0.99)),
                     reference_judge(3, lambda attempt: False), corpus=False, evidence="closed_book")
    assert not m["complete"] and m["n_errors"] == 2 and m["judge"]["rejected"] == {"missing_reference": 20}
    t = tables.write_all(never, "scripted")["data"]["scripted"]["table"]
    cell = next(r for r in t.rows if r[0] == "AUQ (Dual) on the stand-in" or getattr(r[0], "text", None)
                == "AUQ (Dual) on the stand-in")[1]
    assert cell.startswith("incomplete 0/2, 2 errors") and "judge re-asks 20 (missing_reference 20)" in cell


def test_a_plan_that_fell_back_to_the_task_text_is_counted_in_both_rows_and_flagged_in_the_viewer(tmp_path,
                                                                                                   monkeypatch):
    """Issue 29 item 8: a planner reply with no usable plan researches the task text itself; that was recorded
    nowhere (the research agent) or only inside AUQ's rounds, so the viewer's fallback filter and Table 3 missed it."""
    from agentic_repro.viewer import data as vdata

    results = tmp_path / "results"
    no_plan = lambda k, d: "I would research several things. <confidence>0.99</confidence>"
    scripted_run(tmp_path / "a", monkeypatch, results, "deep_research", Agent("   "), judge_script(lambda p: 6),
                 corpus=False, evidence="closed_book")
    scripted_run(tmp_path / "b", monkeypatch, results, "auq_deep_research", Agent("no plan either", no_plan),
                 judge_script(lambda p: 6), corpus=False, evidence="closed_book")
    t = tables.write_all(results, "scripted")["data"]["scripted"]["table"]
    protos = [r[0].text for r in t.rows if hasattr(r[0], "text") and r[0].text.startswith("↳ protocol")]
    assert all("plan fell back to the task text on 2 of 2 tasks" in p for p in protos), protos
    recs = list(csv.DictReader((results / "auq-report" / "table3-scripted.csv").open()))
    assert [r["fallback_plans"] for r in recs if r["method"] != "paper"][:2] == ["2", "2"]
    runs = vdata.find_runs(results / "auq-deepresearch")
    assert len(runs) == 2 and all(r["fallback"] for run_ in runs for r in vdata.problem_rows(run_))
    # AUQ runs made before trace.fallback_plans: the flag is found in the rounds they recorded
    auq = next(p for run_ in runs if run_.method == "auq_deep_research" for p in vdata.problems_of(run_).values())
    legacy = {k: v for k, v in auq["trace"].items() if k != "fallback_plans"}
    assert legacy["rounds"][0]["fallback_plan"] and vdata._true_flag(legacy, vdata.FALLBACK_KEYS)


def test_the_protocol_line_names_the_backbone_not_the_judge_model(tmp_path, monkeypatch):
    """Issue 29 item 8: the protocol's "backbone" listed every model of calls.jsonl, the judge role's too."""
    spec = make(tmp_path, monkeypatch, method_cfg("deep_research", evidence="closed_book"), corpus=False, n=1)
    spec.experiment, spec.results_root = "auq-deepresearch", tmp_path / "results"
    spec.full_config = {**spec.full_config, "benchmark": spec.benchmark_cfg, "roles": spec.roles_cfg,
                        "method": spec.method_cfg}
    run(spec, {"scripted": ScriptedBackbone(Agent(reply(PLAN_A, 0.9))),
               "judge-bb": ScriptedBackbone(judge_script(lambda p: 6), name="judge-llm")})
    t = tables.write_all(tmp_path / "results", "scripted")["data"]["scripted"]["table"]
    proto = next(r[0].text for r in t.rows if hasattr(r[0], "text") and r[0].text.startswith("↳ protocol"))
    assert "backbone scripted-model (paper" in proto and "judge-llm-model" not in proto.split("backbone ")[1]
