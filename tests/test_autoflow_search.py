"""The search machinery itself: configs compose, the artifact is versioned and checked, an infrastructure
error in a validate run stops the search (never a score), and search cost is per role (search.py, artifact.py)."""
from __future__ import annotations

import asyncio
import json

import pytest

from agentic_repro.baselines.autoflow.artifact import ARTIFACT_VERSION, ArtifactError, ArtifactMethod, load_artifact, write_artifact
from agentic_repro.baselines.autoflow.search import SearchIncomplete, SearchSplitError, check_search_split, run_search, search_dir
from agentic_repro.harness.method import build_method, resolve
from agentic_repro.harness.runner import Runner, spec_from_config
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
    doc = {"method": "m", "benchmark": "b", "split": "validate", "workflow": {"solver": "agentic_repro.baselines.simple:io",
           "params": {}}, "validate_score": 0.5, "history": [], "roles": {}, "search_cost": {}}
    path = tmp_path / "a.json"
    written = write_artifact(path, doc)
    assert written["version"] == ARTIFACT_VERSION == 2 and load_artifact(path)["sha256"] == written["sha256"]
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
    spec = aflow_spec(tmp_path, rounds=1, rounds_count="graphs", validate_runs=1)

    def dead(messages, sampling):
        if "What is 2+" in messages[-1]["content"]:
            raise ConnectionError("backbone down")
        return AFlowScript()(messages, sampling)

    with pytest.raises(SearchIncomplete, match="incomplete"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(dead)))
    assert not (search_dir(spec, spec.method_cfg["search"]) / "artifact.json").exists()


def _train_test_spec(tmp_path, monkeypatch, split: str):
    """The tiny benchmark with DyFlow's layout: train and test parts, no validate split."""
    write_tiny_splits(tmp_path / "data")
    (tmp_path / "data" / "tiny" / "validate.jsonl").rename(tmp_path / "data" / "tiny" / "train.jsonl")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    spec = aflow_spec(tmp_path, rounds=1, rounds_count="graphs", validate_runs=1)
    spec.benchmark_cfg["splits"] = {"train": "tiny/train.jsonl", "test": "tiny/test.jsonl"}
    spec.method_cfg["search"]["split"] = split
    return spec


@pytest.mark.parametrize("split,why", [("validate", "has no 'validate' split"), ("test", "never runs on the test")])
def test_a_search_refuses_a_missing_split_and_the_test_split_before_any_call(tmp_path, monkeypatch, split, why):
    spec = _train_test_spec(tmp_path, monkeypatch, split)
    bb = ScriptedBackbone(AFlowScript())
    with pytest.raises(SearchSplitError, match=why):
        asyncio.run(run_search(spec, backbone=bb))
    assert bb.requests == [] and not (search_dir(spec, spec.method_cfg["search"]) / "artifact.json").exists()


def test_a_search_split_sharing_problems_with_test_is_refused(tmp_path, monkeypatch):
    spec = _train_test_spec(tmp_path, monkeypatch, "validate")
    spec.benchmark_cfg["splits"]["validate"] = "tiny/test.jsonl"   # another name for the test problems
    with pytest.raises(SearchSplitError, match="shares 3 of its 3 problems with the test split"):
        check_search_split(spec, "validate")


def test_a_search_split_sharing_problems_with_test_under_other_ids_is_refused(tmp_path, monkeypatch):
    spec = _train_test_spec(tmp_path, monkeypatch, "validate")
    test = (tmp_path / "data" / "tiny" / "test.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in test]
    copy = [{**rows[0], "id": "other-0", "q": "  WHAT is 10+10? "}, {"id": "fresh", "q": "What is 99+1?", "a": "100"}]
    (tmp_path / "data" / "tiny" / "validate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in copy))
    spec.benchmark_cfg["splits"]["validate"] = "tiny/validate.jsonl"
    with pytest.raises(SearchSplitError, match=r"shares 1 of its 2 problems.*0 by id, 1 by content.*other-0=t0"):
        check_search_split(spec, "validate")


def test_drop_validate_and_test_files_share_five_problems_under_other_ids(tmp_path):
    # the real files (data/aflow_splits): the same passage and question under another id, gold written the same
    # or as a superset of references (75.81|85.53 vs 75.81)
    from agentic_repro.baselines.autoflow.search import exclude_shared
    from agentic_repro.harness.benchmark import build_benchmark

    real = spec_from_config(compose(["benchmark=drop", "method=aflow"]))
    with pytest.raises(SearchSplitError, match=r"shares 5 of its 200 problems with the test split \(0 by id, 5 by "
                                               r"content.*563=5145"):
        check_search_split(real, "validate")
    check = check_search_split(real, "validate", "exclude")
    assert sorted(check["excluded"]) == ["131", "3024", "563", "5872", "8540"] and check["problems"] == 195
    narrowed = exclude_shared(real, "validate", check, tmp_path)
    ids = [p.id for p in build_benchmark({**narrowed.benchmark_cfg, "split": "validate"}).load()[0]]
    assert len(ids) == 195 and not set(ids) & set(check["excluded"])


def test_dyflow_benchmarks_validate_split_would_leak_their_train_split_does_not():
    # the real case: DyFlow's HumanEval partition over AFlow's HumanEval validate file (which DyFlow's test part
    # overlaps: 25 of its 33), and SocialMaze, whose partition used to read every row for a split name it lacks;
    # both partitions now refuse a split that is not one of their parts (evaluators/partition.py)
    for bench, shared in (("humaneval_dyflow", "no 'validate' split.*neither a part"),
                          ("socialmaze", "no 'validate' split.*neither a part")):
        real = spec_from_config(compose([f"benchmark={bench}", "method=aflow"]))
        with pytest.raises(SearchSplitError, match=shared):
            check_search_split(real, "validate")
        ok = check_search_split(real, "train")
        assert ok["shared_with_test"] == 0 and ok["problems"] > 0 and ok["test_problems"] > ok["problems"]


def test_search_on_the_train_split_is_recorded_and_its_problems_refused_at_test(tmp_path, monkeypatch):
    spec = _train_test_spec(tmp_path, monkeypatch, "train")
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert doc["split"] == "train" and doc["search_config"]["split"] == "train"
    assert doc["split_check"] == {"split": "train", "problems": 4, "test_problems": 3, "shared_with_test": 0,
                                  "compared": "ids and task text (whitespace and case normalised)"}
    assert doc["validate_ids"] == ["v0", "v1", "v2", "v3"]     # the train rows (ids as write_tiny_splits names them)
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    for split, complete in (("test", True), ("train", False)):
        run_spec = _train_test_spec(tmp_path / split, monkeypatch, "train")
        run_spec.benchmark_cfg["split"] = split
        run_spec.method_cfg = {"name": "aflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
                               "params": {"artifact": str(path)}, "roles": ["executor"]}
        run_spec.full_config["method"] = run_spec.method_cfg
        metrics = asyncio.run(Runner(run_spec, backbone=ScriptedBackbone(AFlowScript())).run())
        assert metrics["complete"] is complete
        if not complete:
            assert metrics["n_errors"] == 4 and "would be a leak" in metrics["first_error"]["error"]


def _planned_with_artifact(tmp_path, monkeypatch, recorded_params):
    """A Table 1 item of a searched method whose artifact exists, searched with ``recorded_params``."""
    from agentic_repro.baselines.autoflow import search as S
    from agentic_repro.scripts import runs

    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    spec = aflow_spec(tmp_path, rounds=20, validate_runs=5)
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    spec.method_cfg["params"]["artifact"] = str(path)
    recorded = {**spec.method_cfg["search"], "params": {**spec.method_cfg["search"]["params"], **recorded_params}}
    write_artifact(path, {"method": "aflow", "benchmark": "tiny", "split": "validate", "workflow": {
        "solver": "agentic_repro.baselines.simple:io", "params": {}}, "validate_score": 0.5, "history": [], "roles": {},
        "search_cost": {}, "search_config": recorded})
    searched = []

    async def fake(spec, **kw):
        searched.append(spec.method_cfg["search"]["params"]["rounds"])
        return {}

    monkeypatch.setattr(S, "run_search", fake)
    it = runs.Planned(label="aflow/tiny", overrides=[])
    it.spec = spec
    return it, path, searched


def test_table1_hook_refuses_an_artifact_searched_at_another_setting(tmp_path, monkeypatch):
    from agentic_repro.scripts import runs

    it, path, searched = _planned_with_artifact(tmp_path, monkeypatch, {"rounds": 2, "validate_limit": 2})
    with pytest.raises(ValueError) as err:
        runs._ensure_artifact(it, None, lambda m: None)
    line = str(err.value)
    assert "\n" not in line and "params.rounds: 2 (artifact) != 20 (this run)" in line
    assert "params.validate_limit: 2 (artifact) != null (this run)" in line and "stale_artifact=search" in line
    assert searched == [] and path.exists()
    it2, path2, searched2 = _planned_with_artifact(tmp_path / "same", monkeypatch, {})
    runs._ensure_artifact(it2, None, lambda m: None)  # the same setting: reused, no search
    assert searched2 == []


def test_table1_hook_searches_again_when_told_and_keeps_the_old_search(tmp_path, monkeypatch):
    from agentic_repro.scripts import runs

    it, path, searched = _planned_with_artifact(tmp_path, monkeypatch, {"rounds": 2})
    it.spec.method_cfg["search"]["stale_artifact"] = "search"
    logs = []
    runs._ensure_artifact(it, None, logs.append)
    assert searched == [20] and not path.exists()
    kept = [p for p in path.parent.parent.iterdir() if p.name.startswith("seed=42.stale-")]
    assert len(kept) == 1 and (kept[0] / "artifact.json").exists() and "searching again" in logs[-1]


def test_a_searched_rows_footnote_comes_from_its_artifacts_record(tmp_path):
    from agentic_repro.baselines.autoflow.artifact import setting_note

    doc = {"benchmark": "gsm8k", "split": "validate", "search_config": {"params": {"rounds": 2, "validate_runs": 5}}}
    note = setting_note(doc, {"params": {"rounds": 20, "validate_runs": 5}})
    assert note == ("searched on gsm8k's validate split at a reduced setting (its artifact's search_config): "
                    "rounds=2 (configured 20)")
    assert setting_note(doc, {"params": {"rounds": 2, "validate_runs": 5}}) is None


def test_table1_hook_rewrites_an_old_version_artifact_in_place(tmp_path, monkeypatch):
    from agentic_repro.scripts import runs

    it, path, searched = _planned_with_artifact(tmp_path, monkeypatch, {})
    doc = json.loads(path.read_text())
    doc["version"] = 1
    path.write_text(json.dumps(doc))
    logs = []
    runs._ensure_artifact(it, None, logs.append)
    assert searched == [20] and path.exists() and "resumes in place" in logs[-1]   # not moved aside
    assert not [p for p in path.parent.parent.iterdir() if ".stale-" in p.name]


def test_shared_with_test_exclude_searches_without_the_shared_problems(tmp_path, monkeypatch):
    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    val = tmp_path / "data" / "tiny" / "validate.jsonl"
    rows = [json.loads(x) for x in val.read_text().splitlines()]
    rows[1] = {"id": "v1", "q": "what is 11+11? ", "a": "22"}   # the test file's t1, under another id
    val.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = aflow_spec(tmp_path, rounds=1, rounds_count="graphs", validate_runs=1)
    with pytest.raises(SearchSplitError, match="shared_with_test=exclude"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    spec.method_cfg["search"]["shared_with_test"] = "exclude"
    bb = ScriptedBackbone(AFlowScript())
    doc = asyncio.run(run_search(spec, backbone=bb))
    check = doc["split_check"]
    assert check["excluded"] == ["v1"] and check["same_as_test"] == ["t1"] and check["problems"] == 3
    assert doc["validate_ids"] == ["v0", "v2", "v3"] and len(bb.requests) == 3
    assert all("11+11" not in m[-1]["content"] for m, _, _ in bb.requests)
