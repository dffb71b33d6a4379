"""JudgeFlow with the scripted double: block validation and interpretation, the judge's rank-based blame,
the optimiser rewriting only the most blamed block, artifact and test-time (baselines/autoflow/judgeflow.py)."""
from __future__ import annotations

import asyncio
import json

import pytest

from agentic_repro.baselines.autoflow import judgeflow
from agentic_repro.baselines.autoflow.blocks import BlockError, validate_blocks
from agentic_repro.baselines.autoflow.search import run_search, search_dir
from agentic_repro.harness.runner import Runner
from tests.autoflow_helpers import JudgeFlowScript, aflow_spec, write_tiny_splits
from tests.doubles import ScriptedBackbone


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    return tmp_path


def jf_spec(tmp_path, **params):
    spec = aflow_spec(tmp_path)
    spec.method_cfg["name"] = "judgeflow"
    spec.method_cfg["search"] = {"optimiser": "agentic_repro.baselines.autoflow.judgeflow:JudgeFlow", "split": "validate",
                                 "params": {"rounds": 2, "validate_runs": 1, **params}}
    spec.full_config["method"] = spec.method_cfg
    return spec


def test_blocks_are_validated():
    ok = validate_blocks([{"type": "seq", "operators": [{"op": "Custom", "instruction": "x"}]},
                          {"type": "for", "operators": [{"op": "Review"}, {"op": "Revise"}], "max_iters": 2},
                          {"type": "cond", "condition": "Review", "failure": [{"op": "SelfRefine"}]}])
    assert [b["id"] for b in ok] == ["B1", "B2", "B3"] and ok[1]["stop"] == "review"
    assert ok[2]["success"] == [{"op": "Format"}]
    loose = validate_blocks([{"type": "Sequence", "operators": [{"op": "Custom"}]},
                             {"type": "conditional", "condition": "Review", "failure": ["Revise"]}])
    assert [b["type"] for b in loose] == ["seq", "cond"] and loose[1]["failure"] == [{"op": "Revise"}]
    for bad in ([], [{"type": "while"}], [{"type": "seq", "operators": [{"op": "exec"}]}],
                [{"type": "seq", "operators": [{"op": "Review"}]}],  # nothing generated yet
                [{"type": "for", "operators": [{"op": "Custom"}], "max_iters": 99}]):
        with pytest.raises(BlockError):
            validate_blocks(bad)


def test_rank_based_blame():
    s = judgeflow.blame_scores([["B2", "B1", "B3"], ["B2", "B3"], ["B9"]], ["B1", "B2", "B3"])
    assert s == pytest.approx({"B1": 2 / 3, "B2": 2.0, "B3": 1 / 3 + 2 / 3})
    r = judgeflow.blame_scores([["B2", "B1"]], ["B1", "B2"], "reciprocal")
    assert r == {"B1": 0.5, "B2": 1.0}


def test_judge_blames_and_the_optimiser_rewrites_that_block(tiny):
    spec = jf_spec(tiny)
    script = JudgeFlowScript()
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    h1, h2 = doc["history"]
    assert h1["mean"] == 0.25 and h1["failed"] == 3
    assert len(script.judge_prompts) == 3  # every failed validate question judged (<= judge_samples)
    assert "# Correct answer" in script.judge_prompts[0] and "## B1 (seq; generate a solution)" in script.judge_prompts[0]
    assert h2["target_block"] == "B1" and h2["blame"] == {"B1": 3.0}
    assert "The most responsible block is B1" in script.optimizer_prompts[0]
    assert h2["blocks"][0]["operators"] == [{"op": "Custom", "instruction": "Think. "}] and h2["mean"] == 1.0
    assert doc["workflow"]["solver"] == judgeflow.WORKFLOW_SOLVER and doc["extra"]["best_round"] == 2
    roles = doc["search_cost"]["by_role"]
    assert roles["optimizer"]["calls"] == 3 + 1 and roles["executor"]["calls"] == 8
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    test_spec = aflow_spec(tiny)
    test_spec.method_cfg = {"name": "judgeflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                            "params": {"artifact": str(path)}, "roles": ["executor"]}
    test_spec.full_config["method"] = test_spec.method_cfg
    metrics = asyncio.run(Runner(test_spec, backbone=ScriptedBackbone(JudgeFlowScript())).run())
    assert metrics["complete"] and metrics["score"] == 1.0
    pred = json.loads((test_spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["trace"]["blocks"][0]["block"] == "B1"


def test_an_invalid_rewrite_is_no_candidate_and_the_search_goes_on(tiny):
    class Bad(JudgeFlowScript):
        def __call__(self, messages, sampling):
            if messages[-1]["content"].startswith("You are optimising"):
                self.optimizer_prompts.append(messages[-1]["content"])
                return json.dumps({"modification": "m", "blocks": [{"type": "seq", "operators": [{"op": "os.system"}]}]})
            return super().__call__(messages, sampling)

    doc = asyncio.run(run_search(jf_spec(tiny, max_regenerations=2), backbone=ScriptedBackbone(Bad())))
    h2 = doc["history"][1]
    assert h2["status"] == "no_candidate" and len(h2["attempts"]) == 2 and "invalid blocks" in h2["attempts"][0]["why"]
    assert doc["extra"]["best_round"] == 1
