"""ADAS's Meta Agent Search with the scripted double: initial archive, proposal + two reflections, debug on a
failing agent, bootstrap fitness, archive growth, resume, artifact and the frozen agent on test."""
from __future__ import annotations

import asyncio
import json

import pytest

from agentic_repro.baselines.autoflow import adas
from agentic_repro.baselines.autoflow.search import run_search, search_dir
from agentic_repro.harness.runner import Runner
from tests.autoflow_helpers import ADAS_AGENT, ADASScript, aflow_spec, write_tiny_splits
from tests.doubles import ScriptedBackbone

HOSTILE_AGENT = "def forward(self, taskInfo):\n    import os\n    return open('/etc/hostname').read()\n"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    return tmp_path


def adas_spec(tmp_path, **params):
    spec = aflow_spec(tmp_path)
    spec.method_cfg["name"] = "adas"
    spec.method_cfg["search"] = {"optimiser": "agentic_repro.baselines.autoflow.adas:ADAS", "split": "validate",
                                 "params": {"generations": 1, "valid_size": 2, "bootstrap_samples": 1000, **params}}
    spec.full_config["method"] = spec.method_cfg
    return spec


def test_bootstrap_fitness_is_the_released_string():
    text, median = adas.bootstrap_fitness([1.0] * 10, samples=500)
    assert text == "95% Bootstrap Confidence Interval: (100.0%, 100.0%), Median: 100.0%" and median == 100.0
    text, median = adas.bootstrap_fitness([0.0, 1.0] * 50, samples=5000)
    lo, hi = (float(x) for x in text.split("(")[1].split(")")[0].replace("%", "").split(", "))
    assert 38 < lo < 45 and 55 < hi < 62 and median == pytest.approx(50.0, abs=1.5)


def test_released_prompts_and_archive_are_the_data_file():
    for name in ("mgsm", "drop"):
        s = adas.PROMPTS["sets"][name]
        assert [a["name"] for a in s["initial_archive"]] == [
            "Chain-of-Thought", "Self-Consistency with Chain-of-Thought", "Self-Refine (Reflexion)", "LLM Debate",
            "Step-back Abstraction", "Quality-Diversity", "Dynamic Assignment of Roles"]
        assert "[ARCHIVE]" in s["base"] and "[EXAMPLE]" in s["reflexion_1"]
    base = adas.adapt_base(adas.PROMPTS["sets"]["mgsm"]["base"], "gsm8k", ("What is 1+1?", "2"))
    assert "performing well on the Grade School Math benchmark (GSM8K)" in base and "MGSM" not in base.split("#")[1]
    assert "**Question**: What is 1+1?\n\n**Answer (Not Given)**: 2" in base and "# The utility code:" in base


def test_meta_agent_search_archive_reflections_and_artifact(tiny):
    spec = adas_spec(tiny)
    script = ADASScript()
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    hist = doc["history"]
    assert [h["generation"] for h in hist] == ["initial"] * 7 + [1]
    assert all(h["mean"] == 0.5 for h in hist[:7])  # v0 (0+0) is right by luck, v1 is not
    assert hist[7]["status"] == "ok" and hist[7]["mean"] == 1.0
    assert hist[7]["fitness"] == "95% Bootstrap Confidence Interval: (100.0%, 100.0%), Median: 100.0%"
    # one proposal and two reflections, in one conversation, with the archive and its fitness in the prompt
    assert len(script.meta) == 3
    propose, r1, r2 = script.meta
    assert '"name": "LLM Debate"' in propose[1]["content"] and "Median: 50.0%" in propose[1]["content"]
    assert r1[-1]["content"].startswith('"Carefully review the proposed new architecture')  # no previous agent at n=0
    assert r1[-2]["role"] == "assistant" and r1[-2]["content"].startswith("{'reflection'")  # str(dict) as released
    assert r2[-1]["content"].startswith("Using the tips in")
    assert doc["extra"]["best"]["generation"] == 1 and doc["validate_score"] == 1.0
    assert doc["workflow"]["params"]["kind"] == "adas" and doc["workflow"]["params"]["graph"] == ADAS_AGENT
    assert doc["search_cost"]["by_role"]["optimizer"]["calls"] == 3
    assert doc["search_cost"]["by_role"]["executor"]["backbone_calls"] == len(script.executor)  # the rest: cache
    assert len(doc["extra"]["archive"]) == 8


def test_a_failing_agent_is_debugged_with_the_error_and_a_hostile_one_never_enters(tiny):
    spec = adas_spec(tiny, debug_max=2, valid_size=1)
    script = ADASScript(code=HOSTILE_AGENT)
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    gen = doc["history"][-1]
    assert gen["status"] == "workflow_failed" and len(gen["tries"]) == 2
    assert len(script.meta) == 4  # propose, 2 reflections, 1 debug
    assert script.meta[-1][-1]["content"].startswith("Error during evaluation:\n")
    assert "open is not allowed" in script.meta[-1][-1]["content"]
    assert len(doc["extra"]["archive"]) == 7 and doc["extra"]["best"]["generation"] == "initial"


def test_resume_and_the_frozen_agent_on_test(tiny):
    spec = adas_spec(tiny, generations=2, valid_size=1)

    class Dies(ADASScript):
        def __call__(self, messages, sampling):
            if len(self.meta) == 3 and "expert machine learning researcher" in messages[1]["content"]:
                raise RuntimeError("meta agent endpoint went away")
            return super().__call__(messages, sampling)

    with pytest.raises(RuntimeError):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(Dies())))
    fresh = ScriptedBackbone(ADASScript())
    doc = asyncio.run(run_search(spec, backbone=fresh))
    assert [h["generation"] for h in doc["history"]][-2:] == [1, 2]
    meta_calls = [r for r in fresh.requests if "expert machine learning researcher" in r[0][1]["content"]]
    assert len(meta_calls) == 3  # only generation 2 was asked again
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    test_spec = aflow_spec(tiny)
    test_spec.method_cfg = {"name": "adas", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                            "params": {"artifact": str(path)}, "roles": ["executor"]}
    test_spec.full_config["method"] = test_spec.method_cfg
    metrics = asyncio.run(Runner(test_spec, backbone=ScriptedBackbone(ADASScript())).run())
    # one validate problem: every agent ties at 100 %, the earliest (CoT, the initial archive) is frozen
    assert doc["extra"]["best"] == {"name": "Chain-of-Thought", "generation": "initial",
                                    "fitness": "95% Bootstrap Confidence Interval: (100.0%, 100.0%), Median: 100.0%"}
    assert metrics["complete"] and metrics["n"] == 3 and metrics["score"] == 0.0  # CoT's instruction lacks 'Think.'

    pred = json.loads((test_spec.out_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["trace"]["operators"][0]["op"] == "LLMAgentBase"


def test_initial_archive_option_keeps_only_the_named_agents(tiny):
    # a size option (the tiny embedded size, the slow test): only CoT is evaluated and shown to the meta agent
    spec = adas_spec(tiny, initial_archive=["Chain-of-Thought"], valid_size=1)
    script = ADASScript()
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    assert [h.get("name") for h in doc["history"]] == ["Chain-of-Thought", "Thinker 3"]
    assert doc["extra"]["initial_archive"] == ["Chain-of-Thought"]
    assert doc["search_config"]["params"]["initial_archive"] == ["Chain-of-Thought"]  # recorded in the artifact
    propose = script.meta[0][1]["content"]
    assert '"name": "Chain-of-Thought"' in propose and '"name": "LLM Debate"' not in propose
    full = ADASScript()
    asyncio.run(run_search(adas_spec(tiny / "full", valid_size=1), backbone=ScriptedBackbone(full)))
    assert len(propose) < len(full.meta[0][1]["content"]) - 8000  # the other six agents' code is gone
    with pytest.raises(ValueError, match="not in the released archive"):
        adas.ADAS(initial_archive=["Chain-of-Thought", "No Such Agent"]).seeds(adas.PROMPTS["sets"]["mgsm"])
    with pytest.raises(ValueError, match="at least one"):
        adas.ADAS(initial_archive=[])


def test_dyflow_benchmarks_get_their_own_base_prompt_sentence():
    for bench, pset, name in (("pubmedqa", "drop", "PubMedQA"), ("math_l5", "mgsm", "MATH"),
                              ("socialmaze", "drop", "SocialMaze"), ("humaneval_dyflow", "mgsm", "HumanEval")):
        base = adas.adapt_base(adas.PROMPTS["sets"][pset]["base"], bench, ("Q?", "A"))
        assert f"performing well on {adas.LABELS[bench]}" in base and f"## An example question from {name}:" in base
        assert "(DROP)" not in base.split("# The utility code:")[0] and "MGSM" not in base.split("#")[1]
