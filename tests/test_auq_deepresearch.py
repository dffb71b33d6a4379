"""AUQ on DeepResearch Bench (auq/research.py): System 1 / System 2 switching at the planner step of the research
agent, the plan fed to the researchers, the UAM memory of earlier rounds, and the evidence rule (refused
without a search tool; closed-book only when asked, and labelled) -- through the runner with scripted doubles
(planner, researchers, analyst and the RACE judge)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from agentic_repro.auq.research import parse_plan, plan_key
from agentic_repro.harness.llm import request_seed
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_bench2_deepresearch import _data as deepresearch_data

ROOT = Path(__file__).resolve().parents[1]
JUDGE_BB = {"name": "judge-bb", "kind": "openai", "model": "judge-model", "price": 0, "max_concurrency": 2}


def offset_of(sampling) -> int:
    return next(i for i in range(5000) if request_seed(42, i) == sampling["seed"])


def data_dir(tmp_path, n=1):
    """n English tasks with a reference article each, and the BM25 fixture corpus (the RACE tests' own data)."""
    return deepresearch_data(tmp_path, n)


def method_cfg(name="auq_deep_research", **params):
    cfg = yaml.safe_load((ROOT / f"configs/method/{name}.yaml").read_text())
    cfg["params"] = {**cfg["params"], **params}
    return cfg


def make(tmp_path, monkeypatch, method, corpus=True, n=1):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data_dir(tmp_path, n)))
    spec = make_spec(tmp_path, method)
    bench = yaml.safe_load((ROOT / "configs/benchmark/deepresearch_bench.yaml").read_text())
    bench["search"]["corpus"] = "corpus.jsonl" if corpus else None
    spec.benchmark_cfg = bench
    spec.roles_cfg = {"judge": dict(JUDGE_BB)}
    return spec


def judge_reply(messages, sampling) -> str:
    crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", messages[-1]["content"], re.DOTALL).group(1))
    return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": 6,
                            "article_2_score": 4} for c in items] for d, items in crit.items()})


PLAN_A = ["solar panel efficiency", "battery storage costs", "wind capacity"]
PLAN_B = ["grid battery storage prices 2024", "perovskite solar efficiency", "offshore wind growth"]


def reply(plan, c, e="gaps: no official statistics"):
    return f"<plan>{json.dumps(plan)}</plan>\n<confidence>{c}</confidence>\n<explanation>{e}</explanation>"


class Agent:
    """Planner / researcher / analyst double. ``system1`` is the planner's first reply; a reflection reply per
    (path k, turn d) comes from ``paths(k, d)``."""

    def __init__(self, system1: str, paths=None):
        self.system1, self.paths = system1, paths or (lambda k, d: reply(PLAN_B, 0.97))
        self.seen: list[tuple[str, dict]] = []

    def __call__(self, messages, sampling) -> str:
        text = messages[-1]["content"]
        self.seen.append((text, dict(sampling)))
        if text.startswith("You are the planner"):
            if "Before the researchers are dispatched" in text:
                off = offset_of(sampling) % 1000
                return self.paths(off % 3, off // 3)
            return self.system1
        if text.startswith("You are a researcher"):
            question = re.search(r"Research question: (.*)", text).group(1)
            return "notes " + " ".join(re.findall(r"^\[(d\d)\]", text, re.MULTILINE)) + " on " + question
        assert text.startswith("You are the analyst")
        return "# Report\n" + text[-200:]


def researched(agent) -> list[str]:
    """The queries the researchers were given (in call order)."""
    return [re.search(r"Research question: (.*)", t).group(1) for t, _ in agent.seen if t.startswith("You are a researcher")]


def stages(spec):
    return [c["stage"] for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl")]


def test_parse_plan_and_key():
    assert parse_plan(reply(PLAN_A, 0.9), 3) == PLAN_A
    assert parse_plan("<plan>\n1. a b\n- c\n</plan>", 3) == ["a b", "c"]
    assert parse_plan(reply(PLAN_A, 0.9), 2) == PLAN_A[:2]
    assert parse_plan("no tags: solar", 3) is None and parse_plan("<plan> [] </plan>", 3) is None
    assert plan_key(["Solar  Panel", "x"]) == plan_key(["solar panel", "X"]) != plan_key(["x", "solar panel"])


def test_system1_passes_a_confident_plan_straight_to_the_researchers(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    spec = make(tmp_path, monkeypatch, method_cfg())
    agent = Agent(reply(PLAN_A, 0.96))
    m = run(spec, {"scripted": ScriptedBackbone(agent), "judge-bb": ScriptedBackbone(judge_reply)})
    assert m["complete"] and m["score"] == pytest.approx(0.6)
    assert stages(spec) == ["plan", "research", "research", "research", "report", "judge"]
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    rnd = p["trace"]["rounds"][0]
    assert rnd["auq"]["system2"] is False and rnd["auq"]["c_init"] == 0.96 and p["confidence"] == 0.96
    assert sorted(researched(agent)) == sorted(PLAN_A) == sorted(p["trace"]["queries"])
    assert [c["name"] for c in p["tool_calls"]] == ["search"] * 3 and p["trace"]["closed_book"] is False
    plan_prompt = agent.seen[0][0]
    assert "<confidence>...</confidence>" in plan_prompt and "JSON list" in plan_prompt
    assert "criteria" not in plan_prompt.lower() and "Reference article" not in plan_prompt


def test_system2_blocks_the_dispatch_and_the_selected_plan_is_researched(tmp_path, monkeypatch):
    """c = 0.9 < tau = 0.95: N = 3 reflection paths at T = 0.7 with the explanation fed back; a path below tau
    is refined (at most D = 3 more turns); S_cons picks the plan two paths agree on; the researchers get it."""
    pytest.importorskip("bm25s")
    spec = make(tmp_path, monkeypatch, method_cfg())

    def paths(k, d):
        if k == 2:
            return reply(["lonely query"], 0.6)            # never confident: 1 + D = 4 turns
        return reply(PLAN_B, 0.8 if d == 0 else 0.96)    # k = 0, 1: refined once, then confident
    agent = Agent(reply(PLAN_A, 0.9, "unsure about 2025 data"), paths)
    m = run(spec, {"scripted": ScriptedBackbone(agent), "judge-bb": ScriptedBackbone(judge_reply)})
    assert m["complete"]
    st = stages(spec)
    assert st.count("plan") == 1 and st.count("uar_reflect") == 2 * 2 + 4 and st.count("research") == 3
    refl = [(t, s) for t, s in agent.seen if "Before the researchers are dispatched" in t]
    assert all(s["temperature"] == 0.7 for _, s in refl)
    assert len({s["seed"] for _, s in refl}) == len(refl)                # distinct samples
    assert "unsure about 2025 data" in refl[0][0] and json.dumps(PLAN_A) in refl[0][0]
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    a = p["trace"]["rounds"][0]["auq"]
    assert a["system2"] and a["trigger"] == "low_confidence" and a["c_init"] == 0.9 and a["c_final"] == 0.96
    assert [len(path) for path in a["rounds"][0]["paths"]] == [2, 2, 4]
    assert a["rounds"][0]["selection"]["votes"] == {plan_key(PLAN_B): 2, plan_key(["lonely query"]): 1}
    assert sorted(researched(agent)) == sorted(PLAN_B) == sorted(p["trace"]["queries"])
    assert p["trace"]["system2_triggers"] == 1 and p["calls"] == 1 + 8 + 3 + 1 + 1


def test_missing_confidence_triggers_system2_and_forward_never_reflects(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    spec = make(tmp_path, monkeypatch, method_cfg(n_paths=1, max_refinements=0))
    m = run(spec, {"scripted": ScriptedBackbone(Agent(f"<plan>{json.dumps(PLAN_A)}</plan> sure")),
                   "judge-bb": ScriptedBackbone(judge_reply)})
    a = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]["trace"]["rounds"][0]["auq"]
    assert m["complete"] and a["trigger"] == "missing_confidence" and a["c_init"] is None
    assert stages(spec).count("uar_reflect") == 1

    spec = make(tmp_path / "fwd", monkeypatch, method_cfg(variant="forward"))
    m = run(spec, {"scripted": ScriptedBackbone(Agent(reply(PLAN_A, 0.1))), "judge-bb": ScriptedBackbone(judge_reply)})
    assert m["complete"] and "uar_reflect" not in stages(spec)


def test_uam_memory_of_earlier_rounds_shows_confidences_only_with_uam(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    for variant, shown in (("dual", True), ("inverse", False)):
        spec = make(tmp_path / variant, monkeypatch, method_cfg(variant=variant, rounds=2))
        agent = Agent(reply(PLAN_A, 0.99, "first-round gaps"))
        m = run(spec, {"scripted": ScriptedBackbone(agent), "judge-bb": ScriptedBackbone(judge_reply)})
        assert m["complete"]
        plans = [t for t, _ in agent.seen if t.startswith("You are the planner")]
        assert len(plans) == 2 and "Earlier research rounds" not in plans[0]
        assert "Round 1:" in plans[1] and "notes d1" in plans[1]
        assert ("<confidence>0.99</confidence>" in plans[1] and "first-round gaps" in plans[1]) is shown
        assert stages(spec).count("research") == 6


@pytest.mark.parametrize("method", ["auq_deep_research", "deep_research"])
def test_without_a_search_tool_the_research_agent_is_refused(tmp_path, monkeypatch, method):
    """No corpus, no search API: the problem is an error naming the missing evidence source, before any call;
    never a report RACE-scores as if it had evidence."""
    spec = make(tmp_path, monkeypatch, method_cfg(method), corpus=False)
    m = run(spec, {"scripted": ScriptedBackbone(Agent(reply(PLAN_A, 0.99))), "judge-bb": ScriptedBackbone(judge_reply)})
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["status"] == "error" and "EvidenceMissing" in p["error"] and "benchmark.search.corpus" in p["error"]
    assert not m["complete"] and p["calls"] == 0 and stages(spec) == []


@pytest.mark.parametrize("method", ["auq_deep_research", "deep_research"])
def test_closed_book_runs_only_when_asked_and_says_so(tmp_path, monkeypatch, method):
    spec = make(tmp_path, monkeypatch, method_cfg(method, evidence="closed_book"), corpus=False)
    agent = Agent(reply(PLAN_A, 0.99))
    m = run(spec, {"scripted": ScriptedBackbone(agent), "judge-bb": ScriptedBackbone(judge_reply)})
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert m["complete"] and p["trace"]["closed_book"] is True and p["tool_calls"] == []
    research = [t for t, _ in agent.seen if t.startswith("You are a researcher")]
    assert len(research) == 3 and all("no search tool in this run" in t for t in research)
