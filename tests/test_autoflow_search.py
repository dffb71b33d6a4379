"""The search machinery itself: configs compose, the artifact is versioned and checked, an infrastructure
error in a validate run stops the search (never a score), and search cost is per role (search.py, artifact.py)."""
from __future__ import annotations

import asyncio
import json

import pytest

from baselines.autoflow.artifact import ArtifactError, ArtifactMethod, load_artifact, write_artifact
from baselines.autoflow.search import SearchIncomplete, run_search, search_dir
from harness.method import build_method, resolve
from tests.autoflow_helpers import AFlowScript, aflow_spec, write_tiny_splits
from tests.conftest import compose
from tests.doubles import ScriptedBackbone


@pytest.mark.parametrize("name", ["aflow", "adas", "judgeflow"])
def test_configs_compose_and_build(name, tmp_path):
    cfg = compose([f"method={name}", "benchmark=gsm8k", f"results_root={tmp_path}"])
    m = cfg["method"]
    assert m["label"] and m["deviations"] and m["roles"] == ["executor"]
    method = build_method(m)
    assert isinstance(method, ArtifactMethod)
    assert method.path_for("gsm8k") == tmp_path / "search" / "gsm8k" / name / "local" / "seed=42" / "artifact.json"
    optimiser = resolve(m["search"]["optimiser"])(**m["search"]["params"])
    assert hasattr(optimiser, "search")


def test_artifact_is_versioned_and_checked(tmp_path):
    doc = {"method": "m", "benchmark": "b", "split": "validate", "workflow": {"solver": "baselines.simple:io",
           "params": {}}, "validate_score": 0.5, "history": [], "roles": {}, "search_cost": {}}
    path = tmp_path / "a.json"
    written = write_artifact(path, doc)
    assert written["version"] == 1 and load_artifact(path)["sha256"] == written["sha256"]
    again = write_artifact(path, {**doc, "created": 123.0})  # a re-run of a finished search: same artifact
    assert again["sha256"] == written["sha256"] and json.loads(path.read_text())["sha256"] == written["sha256"]
    tampered = json.loads(path.read_text())
    tampered["validate_score"] = 0.99
    path.write_text(json.dumps(tampered))
    with pytest.raises(ArtifactError, match="sha256"):
        load_artifact(path)
    with pytest.raises(ArtifactError, match="lacks"):
        write_artifact(path, {"method": "m"})
    with pytest.raises(ArtifactError, match="run the search first"):
        load_artifact(tmp_path / "missing.json")


def test_an_infrastructure_error_in_a_validate_run_stops_the_search(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    spec = aflow_spec(tmp_path, rounds=1, validate_runs=1)

    def dead(messages, sampling):
        if "What is 2+" in messages[-1]["content"]:
            raise ConnectionError("backbone down")
        return AFlowScript()(messages, sampling)

    with pytest.raises(SearchIncomplete, match="incomplete"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(dead)))
    assert not (search_dir(spec, spec.method_cfg["search"]) / "artifact.json").exists()
