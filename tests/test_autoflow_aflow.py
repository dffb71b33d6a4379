"""AFlow's search loop with the scripted double: rounds, parent selection, experience, artifact, resume,
hostile rounds, and the frozen workflow on test (baselines/autoflow/aflow.py)."""
from __future__ import annotations

import asyncio
import json
import random

import pytest

from agentic_repro.baselines.autoflow import aflow
from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.baselines.autoflow.search import run_search, search_dir
from agentic_repro.harness.runner import Runner
from tests.autoflow_helpers import (GOOD_GRAPH, HOSTILE_GRAPH, AFlowScript, aflow_spec, failed_workflow_runs,
                                    write_tiny_splits)
from tests.doubles import ScriptedBackbone


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    return tmp_path


def test_mixed_probabilities_are_the_released_formula():
    p = aflow.mixed_probabilities([100.0, 25.0], alpha=0.2, lam=0.3)
    assert p[0] == pytest.approx(0.15 + 0.7 / (1 + pytest.importorskip("math").exp(-15)))
    assert sum(p) == pytest.approx(1.0)
    assert aflow.mixed_probabilities([50.0, 50.0, 50.0], 0.2, 0.3) == pytest.approx([1 / 3] * 3)


def test_top_rounds_keep_round_one_and_the_best_others():
    means = {1: 0.1, 2: 0.9, 3: 0.5, 4: 0.7, 5: 0.95, 6: 0.2}
    assert [x["round"] for x in aflow.top_rounds(means, 4)] == [1, 5, 2, 4]


def test_parent_selection_follows_the_mixed_distribution():
    items = [{"round": 1, "score": 0.5}, {"round": 2, "score": 0.6}, {"round": 3, "score": 0.4}]
    rng = random.Random(0)
    counts = {1: 0, 2: 0, 3: 0}
    for _ in range(4000):
        counts[aflow.select_parent(items, rng, 0.2, 0.3)[0]["round"]] += 1
    _, probs = aflow.select_parent(items, random.Random(1), 0.2, 0.3)  # order: scores descending (2, 1, 3)
    for rnd, p in zip((2, 1, 3), probs):
        assert counts[rnd] / 4000 == pytest.approx(p, abs=0.03)


def test_convergence_needs_consecutive_unchanged_top_k():
    flat = [[0.5, 0.5]] * 10
    assert aflow.converged(flat, top_k=3, z=0.0, consecutive=5)
    rising = [[0.1 * i, 0.1 * i] for i in range(10)]
    assert not aflow.converged(rising, top_k=3, z=0.0, consecutive=5)


def test_parse_response_needs_graph_and_modification():
    ok = aflow.parse_response("x <modification>m</modification><graph>```python\nclass Workflow:\n    pass\n```"
                              "</graph><prompt>P = 1</prompt>")
    assert ok == {"modification": "m", "graph": "class Workflow:\n    pass", "prompt": "P = 1"}
    assert aflow.parse_response("<graph>g</graph>") is None


def test_seed_graphs_are_the_released_round_one():
    g, p = aflow.seed_graph("GSM8K")
    assert 'await self.custom(input=problem, instruction="")' in g and p.startswith("# XXX_PROMPT")
    g, _ = aflow.seed_graph("HumanEval")
    assert "custom_code_generate(problem=problem, entry_point=entry_point" in g


def test_search_rounds_selection_experience_and_artifact(tiny):
    spec = aflow_spec(tiny)
    script = AFlowScript()
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    hist = doc["history"]
    assert [h["round"] for h in hist] == [1, 2, 3]
    assert [h["mean"] for h in hist] == [0.25, 1.0, 0.25]  # seed 1/4 right; 'Think.' all; 'Guess.' 1/4
    assert hist[1]["parent"] == 1 and hist[1]["selection_probs"] == [1.0]
    assert hist[2]["selection_probs"] == pytest.approx([0.85, 0.15], abs=1e-5)
    assert all(len(h["scores"]) == 2 for h in hist)  # validate_runs=2
    # the best round is frozen; the artifact is complete and loads
    assert doc["validate_score"] == 1.0 and doc["extra"]["best_round"] == 2
    assert doc["workflow"]["solver"] == aflow.WORKFLOW_SOLVER
    assert 'SOLVE_PROMPT = "Think. "' == doc["workflow"]["params"]["prompt"]
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    assert load_artifact(path)["sha256"] == doc["sha256"]
    assert doc["executor"]["model"]["model"] == "scripted-model" and doc["optimizer"] is not None
    cost = doc["search_cost"]["by_role"]
    assert cost["optimizer"]["calls"] == 2 == len(script.optimizer_prompts)
    assert cost["executor"]["calls"] == 3 * 2 * 4 == len(script.executor_prompts)
    # experience back-propagated to the parent the optimiser saw
    exp = doc["extra"]["experience"]
    assert exp["1"]["success"]["2"] == {"modification": "modification 0", "score": 1.0}
    parent_of_3 = str(hist[2]["parent"])
    assert "3" in exp[parent_of_3]["failure"]
    # the optimiser saw the parent's code, score and the error log of round 1 (its mismatches)
    assert "<score>0.25</score>" in script.optimizer_prompts[0]
    assert '"right_answer": "2"' in script.optimizer_prompts[0] or '"right_answer": "4"' in script.optimizer_prompts[0]
    assert 'instruction=""' in script.optimizer_prompts[0]


def test_resume_mid_search_replays_finished_rounds(tiny):
    spec = aflow_spec(tiny)

    class Dies(AFlowScript):
        def __call__(self, messages, sampling):
            if "You are building a Graph" in messages[-1]["content"] and len(self.optimizer_prompts) == 1:
                raise RuntimeError("optimiser endpoint went away")
            return super().__call__(messages, sampling)

    with pytest.raises(RuntimeError):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(Dies())))
    state = json.loads((search_dir(spec, spec.method_cfg["search"]) / "search_state.json").read_text())
    assert state["next_round"] == 3 and set(state["rounds"]) == {"1", "2"}
    fresh = ScriptedBackbone(AFlowScript([(GOOD_GRAPH, 'SOLVE_PROMPT = "Guess. "')]))
    doc = asyncio.run(run_search(spec, backbone=fresh))
    assert [h["round"] for h in doc["history"]] == [1, 2, 3]
    # only round 3 was asked: one optimiser call and its 2 x 4 validate problems
    assert len(fresh.requests) == 1 + 8
    assert doc["history"][1]["mean"] == 1.0


def test_a_hostile_round_scores_zero_and_the_search_goes_on(tiny):
    spec = aflow_spec(tiny, rounds=2)
    script = AFlowScript([(HOSTILE_GRAPH, ""), (GOOD_GRAPH, 'SOLVE_PROMPT = "Think. "')])
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    bad = doc["history"][1]
    assert bad["mean"] == 0.0 and bad["status"] == "workflow_failed"
    assert all(r["workflow_failures"] == r["n"] == 4 for r in bad["runs"])
    assert doc["history"][2]["mean"] == 1.0 and doc["extra"]["best_round"] == 3
    run_dir = bad["runs"][0]["dir"]
    pred = json.loads(open(f"{run_dir}/predictions.jsonl").readline())
    assert pred["status"] == "ok" and pred["score"] == 0.0
    assert "importing subprocess is not allowed" in pred["trace"]["workflow"]["detail"]


def test_frozen_workflow_runs_on_test_like_any_method(tiny):
    spec = aflow_spec(tiny, rounds=1, validate_runs=1)
    asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    test_spec = aflow_spec(tiny)
    test_spec.method_cfg = {"name": "aflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                            "params": {"artifact": str(path).replace("/tiny/", "/{benchmark}/")},
                            "roles": ["executor"]}
    test_spec.full_config["method"] = test_spec.method_cfg
    bb = ScriptedBackbone(AFlowScript())
    metrics = asyncio.run(Runner(test_spec, backbone=bb).run())
    assert metrics["complete"] and metrics["n"] == 3 and metrics["score"] == 1.0
    assert metrics["by_role"]["executor"]["calls"] == 3 and len(bb.requests) == 3, failed_workflow_runs(tiny)
    pred = json.loads((test_spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["id"].startswith("t") and pred["trace"]["artifact"]["sha256"] == load_artifact(path)["sha256"]
    assert pred["trace"]["workflow"]["ok"] and pred["trace"]["operators"][0]["op"] == "Custom"
    # search cost and inference cost apart (DyFlow Table 8 layout)
    from agentic_repro.baselines.autoflow.costs import cost_row, to_markdown

    row = cost_row(test_spec.out_dir)
    art = load_artifact(path)
    assert row["search_prompt_tokens"] == art["search_cost"]["total"]["prompt_tokens"] > 0
    assert row["inference_prompt_tokens"] == metrics["totals"]["prompt_tokens"] > 0
    assert row["score_pct"] == 100.0 and "| aflow | tiny |" in to_markdown([row])


def test_the_frozen_workflow_refuses_problems_the_search_scored(tiny):
    spec = aflow_spec(tiny, rounds=1, rounds_count="graphs", validate_runs=1)
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert doc["validate_ids"] == ["v0", "v1", "v2", "v3"]
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    leak = aflow_spec(tiny)
    leak.benchmark_cfg["split"] = "validate"
    leak.method_cfg = {"name": "aflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                       "params": {"artifact": str(path)}, "roles": ["executor"]}
    leak.full_config["method"] = leak.method_cfg
    metrics = asyncio.run(Runner(leak, backbone=ScriptedBackbone(AFlowScript())).run())
    assert not metrics["complete"] and metrics["n_errors"] == 4
    assert "would be a leak" in metrics["first_error"]["error"]


def test_seed_graph_is_the_released_one_else_the_domains():
    assert aflow.choose_seed("gsm8k", "math") == {"dataset": "GSM8K", "rule": "released", "released_for_benchmark": True}
    assert aflow.choose_seed("humaneval", "code")["dataset"] == "HumanEval"
    # DyFlow's five (their domains as the benchmarks declare them)
    picks = {b: aflow.choose_seed(b, d) for b, d in (("math_l5", "math"), ("humaneval_dyflow", "code"),
                                                      ("pubmedqa", "qa"), ("socialmaze", "qa"),
                                                      ("livebench", "reasoning"))}
    assert {b: p["dataset"] for b, p in picks.items()} == {"math_l5": "MATH", "humaneval_dyflow": "HumanEval",
                                                           "pubmedqa": "DROP", "socialmaze": "DROP", "livebench": "DROP"}
    assert all(not p["released_for_benchmark"] and p["rule"].startswith("domain ") for p in picks.values())
    assert aflow.choose_seed("pubmedqa", "qa", by_domain={"qa": "HotpotQA"})["dataset"] == "HotpotQA"
    assert aflow.choose_seed("pubmedqa", "qa", seed_graph="MATH") == {"dataset": "MATH", "rule": "seed_graph",
                                                                      "released_for_benchmark": False}
    with pytest.raises(ValueError, match="choose auto or one of"):
        aflow.choose_seed("gsm8k", "math", seed_graph="GSM9K")
    with pytest.raises(ValueError, match="not in seed_by_domain"):
        aflow.choose_seed("webshop", "web")
    from agentic_repro.harness.benchmark import build_benchmark
    from tests.conftest import compose

    for b, d in (("math_l5", "math"), ("humaneval_dyflow", "code"), ("pubmedqa", "qa"), ("socialmaze", "qa"),
                 ("livebench", "reasoning")):
        assert build_benchmark(compose([f"benchmark={b}"])["benchmark"]).domain == d


def test_a_benchmark_without_a_released_graph_starts_from_its_domains_and_says_so(tiny):
    spec = aflow_spec(tiny, rounds=1, rounds_count="graphs", validate_runs=1)        # "tiny": an EchoBenchmark, domain qa
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert doc["extra"]["seed_graph"] == {"dataset": "DROP", "rule": "domain qa", "released_for_benchmark": False}
    (h,) = doc["history"]
    assert h["modification"] == "seed (released round 1 of DROP)" and "import workspace.DROP.workflows" in h["graph"]
    assert doc["workflow"]["params"]["dataset"] == "DROP"
    forced = asyncio.run(run_search(aflow_spec(tiny / "f", rounds=1, rounds_count="graphs", validate_runs=1, seed_graph="HotpotQA"),
                                    backbone=ScriptedBackbone(AFlowScript())))
    assert forced["extra"]["seed_graph"]["dataset"] == "HotpotQA" and forced["search_config"]["params"]["seed_graph"] == "HotpotQA"


class _Paced(ScriptedBackbone):
    """Answers problem ``What is n+n`` after ``delays[n]`` seconds, so problems finish in the order it sets."""

    def __init__(self, script, delays):
        super().__init__(script, max_concurrency=8)
        self.delays = delays

    async def complete(self, messages, sampling, n):
        import re

        m = re.search(r"What is (\d+)\+", messages[-1]["content"])
        await asyncio.sleep(self.delays.get(int(m.group(1)), 0.0) if m else 0.0)
        return await super().complete(messages, sampling, n)


def test_the_error_log_and_so_the_optimiser_prompt_do_not_depend_on_completion_order(tiny):
    prompts = []
    for name, delays in (("a", {0: 0.0, 1: 0.1, 2: 0.2, 3: 0.3}), ("b", {0: 0.3, 1: 0.2, 2: 0.1, 3: 0.0})):
        spec = aflow_spec(tiny / name, rounds=1, validate_runs=1, log_samples=3)
        script = AFlowScript()
        asyncio.run(run_search(spec, backbone=_Paced(script, delays)))
        state = json.loads((search_dir(spec, spec.method_cfg["search"]) / "search_state.json").read_text())
        assert [e["question"] for e in state["rounds"]["1"]["log"]] == [f"What is {i}+{i}?" for i in (1, 2, 3)]
        prompts.append(script.optimizer_prompts[0])
    assert prompts[0] == prompts[1]  # the same search asks the same thing: a resume replays it from the cache


def test_search_cost_is_the_fresh_calls_when_a_resumed_search_replays_the_cache(tiny):
    spec = aflow_spec(tiny, rounds=1, validate_runs=1)
    first = ScriptedBackbone(AFlowScript())
    doc = asyncio.run(run_search(spec, backbone=first))
    assert doc["search_cost"]["total"]["calls"] == len(first.requests) == 1 + 2 * 4, failed_workflow_runs(tiny)
    out = search_dir(spec, spec.method_cfg["search"])
    (out / "search_state.json").unlink()  # the optimiser starts over: every call it makes is in the cache
    (out / "artifact.json").unlink()
    again = ScriptedBackbone(AFlowScript())
    redo = asyncio.run(run_search(spec, backbone=again))
    assert again.requests == []                      # nothing was paid again...
    assert redo["search_cost"]["total"] == doc["search_cost"]["total"]   # ...so the cost did not grow
    assert redo["search_cost"]["by_role"] == doc["search_cost"]["by_role"]
    assert redo["search_cost"]["replayed"]["calls"] == 1   # the optimiser's call, replayed and shown apart


def test_a_search_answered_from_another_runs_cache_still_counts_those_calls(tiny):
    spec = aflow_spec(tiny, rounds=1, validate_runs=1)
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    import shutil

    shutil.rmtree(search_dir(spec, spec.method_cfg["search"]))  # as restart=true does; the cache stays
    again = ScriptedBackbone(AFlowScript())
    redo = asyncio.run(run_search(spec, backbone=again))
    assert again.requests == []   # all answered by the cache the first search filled...
    total = redo["search_cost"]["total"]
    assert total["calls"] == doc["search_cost"]["total"]["calls"] == 9, failed_workflow_runs(tiny)  # ...still what it used
    assert total["answered_by_cache_of_other_runs"] == 9 and total["billed_usd"] == 0.0
    assert redo["search_cost"]["replayed"]["calls"] == 0
