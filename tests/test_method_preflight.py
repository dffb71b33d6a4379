"""A method that cannot run here stops the run before any problem, with its own message (not one error per
problem): the config's ``requires`` and the method's ``preflight``."""
from __future__ import annotations

import asyncio

import pytest

from agentic_repro.harness.runner import Runner
from tests.conftest import make_spec
from tests.doubles import ScriptedBackbone


def _runner(tmp_path, method):
    backbone = ScriptedBackbone(lambda messages, sampling: "ANSWER: 2")
    return Runner(make_spec(tmp_path, method), backbone=backbone), backbone


def test_an_agent_method_on_a_benchmark_without_an_environment_is_refused_up_front(tmp_path, tiny_data):
    runner, backbone = _runner(tmp_path, {"name": "agent", "solver": "tests.fake_methods:ask_once",
                                          "requires": ["environment"]})
    with pytest.raises(ValueError, match="acts in an interactive environment, but benchmark tiny is not one"):
        asyncio.run(runner.run())
    assert backbone.requests == [] and not (runner.paths.root / "predictions.jsonl").exists()


def test_an_unknown_requirement_is_named(tmp_path, tiny_data):
    runner, _ = _runner(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "requires": ["gpu"]})
    with pytest.raises(ValueError, match=r"requires=\['gpu'\] is not one of \['environment'\]"):
        asyncio.run(runner.run())


def test_a_failing_preflight_stops_the_run_before_any_call(tmp_path, tiny_data):
    runner, backbone = _runner(tmp_path, {"name": "checked_first", "solver": "tests.fake_methods:CheckedFirst",
                                          "params": {"ok": False}})
    with pytest.raises(FileNotFoundError, match="artifact is missing"):
        asyncio.run(runner.run())
    assert backbone.requests == [] and runner.method.preflights == 1


def test_a_passing_preflight_runs_once_per_run(tmp_path, tiny_data):
    runner, backbone = _runner(tmp_path, {"name": "checked_first", "solver": "tests.fake_methods:CheckedFirst"})
    metrics = asyncio.run(runner.run())
    assert runner.method.preflights == 1 and metrics["n"] == 8 and len(backbone.requests) == 8


def test_a_searched_method_without_its_artifact_stops_before_any_call(tmp_path, tiny_data):
    """Before the preflight hook, a missing artifact failed every problem with the same error, one by one."""
    from agentic_repro.baselines.autoflow.artifact import ArtifactError

    missing = tmp_path / "search" / "{benchmark}" / "artifact.json"
    runner, backbone = _runner(tmp_path, {"name": "aflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                                          "params": {"artifact": str(missing)}})
    with pytest.raises(ArtifactError, match="run the search first"):
        asyncio.run(runner.run())
    assert backbone.requests == [] and not (runner.paths.root / "predictions.jsonl").exists()
