"""End to end through the real HTTP client and the real embedded model: a two-role run (both roles on
backbone=local, still attributed per role), and a scripted-environment episode driven by the model."""
from __future__ import annotations

import json

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import run_e2e
from tests.scripted_env import counter_data

pytestmark = pytest.mark.slow


def test_two_role_run_through_the_embedded_server(tmp_path):
    overrides = ["method=io", "method.name=two_roles", "method.solver=tests.core_methods:draft_and_check",
                 "~method.params", "+method.params.draft_tokens=32", "+method.roles=[designer,critic]",
                 "benchmark=gsm8k", "limit=2", "backbone=local", "+backbone@roles.critic=local"]
    spec, metrics = run_e2e(tmp_path, overrides)
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert [p["status"] for p in preds] == ["ok", "ok"], [p.get("error") for p in preds]
    assert all(p["raw_output"].strip() and p["trace"]["verdict"].strip() for p in preds)
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert sorted((c["stage"], c["role"]) for c in calls) == [("check", "critic")] * 2 + [("draft", "designer")] * 2
    assert all(c["completion_tokens"] > 0 and c["error"] is None for c in calls)
    # one backbone config for both roles: one model identity, one server, attributed per role all the same
    assert len({c["model_identity"] for c in calls}) == 1
    assert metrics["by_role"]["designer"]["calls"] == metrics["by_role"]["critic"]["calls"] == 2
    assert metrics["by_role"]["critic"]["completion_tokens"] == sum(c["completion_tokens"] for c in calls
                                                                    if c["role"] == "critic")
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert meta["roles"]["critic"]["own_backbone"] and meta["roles"]["critic"]["backbone"] == "local"
    assert meta["roles"]["critic"]["model"] == meta["roles"]["designer"]["model"] == meta["model"]
    # a re-run replays both roles from the cache
    _, again = run_e2e(tmp_path, overrides)
    assert again["this_invocation"]["backbone_calls"] == 0 and again["by_role"] == metrics["by_role"]


def test_a_scripted_environment_episode_driven_by_the_embedded_model(tmp_path, monkeypatch):
    """The real model picks each action from the admissible ones; the environment scores the episode."""
    root = tmp_path / "data"
    counter_data(root, goals=[1])
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    overrides = ["method=io", "method.name=walker", "method.solver=tests.core_methods:env_walker", "~method.params",
                 "benchmark=gsm8k", "benchmark.name=counter", "benchmark.kind=tests.scripted_env.CounterBenchmark",
                 "benchmark.split=test", "benchmark.splits.test=counter/test.jsonl",
                 "+benchmark.env.engine=tests.scripted_env:CounterEngine", "+benchmark.env.max_steps=4",
                 "backbone=local", "backbone.sampling.max_tokens=8", "benchmark.answer_instruction=",
                 "limit=1"]
    spec, metrics = run_e2e(tmp_path, overrides)
    (p,) = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert p["status"] == "ok", p.get("error")
    ep = p["episodes"][0]
    assert 1 <= ep["steps"] <= 4 and ep["done"]
    # the score is the environment's verdict, whatever the model did and whatever the method claims
    assert p["score"] == (1.0 if ep["success"] else 0.0) and p["raw_output"].endswith("SUCCESS")
    traj = [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]
    assert len(traj) == ep["steps"] and all(isinstance(t["action"], str) for t in traj)
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert len(calls) == ep["steps"] and all(c["stage"] == "act" and c["completion_tokens"] > 0 for c in calls)
