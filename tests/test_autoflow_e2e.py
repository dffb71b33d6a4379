"""End-to-end: a tiny AFlow search (the seed + 1 proposal, 1 validate run, 1 GSM8K validate problem) through the real
Hydra config, HTTP client, embedded model, sandbox channel, cache and ledger; then the frozen workflow on
1 test problem via ``python -m agentic_repro.harness.run``'s path. Sizes are cut for CI (the paper's are in
configs/method/aflow.yaml and unit-tested with the scripted double)."""
from __future__ import annotations

import json

import pytest

from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.baselines.autoflow.search import search_dir
from tests.autoflow_helpers import tiny_search_on_embedded
from tests.conftest import check_run_files, run_e2e

# the optimiser's prompt (~1.2k tokens even so) dominates: no error-log entries, one operator described
TINY = ["method=aflow", "benchmark=gsm8k", "backbone=local", "limit=1", "backbone.sampling.max_tokens=32",
        "method.search.params.rounds=1", "method.search.params.validate_runs=1",
        "method.search.params.max_regenerations=1", "method.search.params.optimizer_max_tokens=16",
        "method.search.params.log_samples=0", "method.search.params.operators=[Custom]"]


@pytest.mark.slow
def test_aflow_tiny_search_then_test(tmp_path):
    spec, doc = tiny_search_on_embedded(tmp_path, TINY)
    path = search_dir(spec, spec.method_cfg["search"]) / "artifact.json"
    assert load_artifact(path)["sha256"] == doc["sha256"]
    hist = doc["history"]
    assert [h["round"] for h in hist] == [1, 2]
    assert hist[0]["status"] == "ok" and len(hist[0]["scores"]) == 1 and 0.0 <= hist[0]["mean"] <= 1.0
    assert hist[1]["status"] in ("ok", "workflow_failed", "no_candidate")  # a 0.5B optimiser rarely writes XML
    cost = doc["search_cost"]["by_role"]
    assert cost["optimizer"]["calls"] == 1 and cost["optimizer"]["prompt_tokens"] > 800
    assert cost["executor"]["calls"] >= 1 and "default" not in cost
    assert doc["executor"]["model"] == doc["optimizer"]["model"]  # one embedded model plays both roles here
    pred = json.loads(open(f"{hist[0]['runs'][0]['dir']}/predictions.jsonl").readline())
    assert pred["trace"]["workflow"]["ok"] and pred["trace"]["operators"][0]["op"] == "Custom"

    test_spec, metrics = run_e2e(tmp_path, ["method=aflow", "benchmark=gsm8k", "backbone=local", "limit=1",
                                            "backbone.sampling.max_tokens=32"])
    preds = check_run_files(test_spec, metrics, 1)
    assert metrics["complete"] and set(metrics["by_role"]) == {"executor"}
    assert preds[0]["trace"]["artifact"]["sha256"] == doc["sha256"]
    assert preds[0]["trace"]["workflow"]["ok"]


# JudgeFlow at the smallest size that still runs every stage once: round 1 (the seed blocks on 1 validate
# problem), then the judge on the parent's failures (if any) and one block rewrite by the optimiser.
JUDGEFLOW_TINY = ["method=judgeflow", "benchmark=gsm8k", "backbone=local", "limit=1",
                  "backbone.sampling.max_tokens=32", "method.search.params.rounds=2",
                  "method.search.params.validate_limit=1", "method.search.params.judge_samples=1",
                  "method.search.params.max_regenerations=1", "method.search.params.optimizer_max_tokens=96"]


@pytest.mark.slow
def test_judgeflow_tiny_search_then_test(tmp_path):
    spec, doc = tiny_search_on_embedded(tmp_path, JUDGEFLOW_TINY)
    assert load_artifact(search_dir(spec, spec.method_cfg["search"]) / "artifact.json")["sha256"] == doc["sha256"]
    hist = doc["history"]
    assert [h["round"] for h in hist] == [1, 2]
    assert hist[0]["status"] == "ok" and len(hist[0]["scores"]) == 1 and 0.0 <= hist[0]["mean"] <= 1.0
    assert hist[1]["status"] in ("ok", "no_candidate")  # a 0.5B optimiser rarely writes valid blocks
    assert hist[1]["target_block"] is not None and hist[1]["attempts"]
    cost = doc["search_cost"]["by_role"]
    assert cost["optimizer"]["calls"] >= 1 and cost["executor"]["calls"] >= 1 and "default" not in cost

    test_spec, metrics = run_e2e(tmp_path, ["method=judgeflow", "benchmark=gsm8k", "backbone=local", "limit=1",
                                            "backbone.sampling.max_tokens=32"])
    preds = check_run_files(test_spec, metrics, 1)
    assert metrics["complete"] and set(metrics["by_role"]) == {"executor"}
    assert preds[0]["trace"]["artifact"]["sha256"] == doc["sha256"]
