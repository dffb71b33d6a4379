"""One process per search folder, and damaged search files named with their fix (issue 20 items 10 and 14)."""
from __future__ import annotations

import asyncio

import pytest

from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.baselines.autoflow.search import run_search, search_dir
from agentic_repro.harness.lock import FolderBusy, FolderLock
from agentic_repro.harness.results import CorruptFile
from tests.autoflow_helpers import AFlowScript, aflow_spec, write_tiny_splits
from tests.doubles import ScriptedBackbone


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    spec = aflow_spec(tmp_path, rounds=1, rounds_count="graphs", validate_runs=1)
    return spec, search_dir(spec, spec.method_cfg["search"])


def test_a_second_search_on_a_held_search_folder_is_refused_before_any_call(tiny):
    spec, out = tiny
    backbone = ScriptedBackbone(AFlowScript())
    with FolderLock(out, what="search folder"):  # another search holds it
        with pytest.raises(FolderBusy, match="search folder"):
            asyncio.run(run_search(spec, backbone=backbone))
    assert backbone.requests == []
    doc = asyncio.run(run_search(spec, backbone=backbone))  # free again: the search runs
    assert doc["validate_score"] is not None and (out / ".lock").exists()


def test_restart_empties_the_search_folder_but_keeps_its_lock(tiny):
    spec, out = tiny
    asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    (out / "stale.txt").write_text("from an earlier search")
    spec.full_config["restart"] = True
    asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert not (out / "stale.txt").exists() and (out / "artifact.json").exists()


def test_a_damaged_checkpoint_or_artifact_names_the_file_and_the_fix(tiny):
    spec, out = tiny
    asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    (out / "search_state.json").write_text('{"round": 2, "hist')
    with pytest.raises(CorruptFile, match=r"search_state\.json \(search checkpoint\).*restart=true"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    (out / "artifact.json").write_text("")
    with pytest.raises(CorruptFile, match=r"artifact\.json \(workflow artifact\) is damaged.*it is empty"):
        load_artifact(out / "artifact.json")
