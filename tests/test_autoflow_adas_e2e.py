"""End-to-end: a tiny ADAS Meta Agent Search (the CoT seed on 1 GSM8K validate problem, 1 generation: proposal +
2 reflections, at most one evaluation of the candidate) through the real Hydra config, HTTP client, embedded model,
sandbox channel, cache and ledger; then the frozen agent on 1 test problem. Sizes are cut for CI: the released
archive's 7 agents put ~5.4k tokens in the meta prompt (minutes of prefill on 2 cores), so the test keeps CoT only
(``initial_archive``, a documented size option) and caps the meta agent's reply (``meta_max_tokens``); the paper's
sizes are in configs/method/adas.yaml and unit-tested with the scripted double."""
from __future__ import annotations

import json
import re

import pytest

from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.baselines.autoflow.search import search_dir
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.autoflow_helpers import failed_workflow_runs, tiny_search_on_embedded
from tests.conftest import check_run_files, run_e2e

BASE = ["method=adas", "benchmark=gsm8k", "backbone=local", "limit=1", "backbone.sampling.max_tokens=32"]
TINY = [*BASE, "method.search.params.generations=1", "method.search.params.valid_size=1",
        "method.search.params.debug_max=1", "method.search.params.meta_max_tokens=320",
        "method.search.params.initial_archive=[Chain-of-Thought]", "method.search.params.bootstrap_samples=1000"]
FITNESS = re.compile(r"^95% Bootstrap Confidence Interval: \(\d+\.\d%, \d+\.\d%\), Median: \d+\.\d%$")


@pytest.mark.slow
def test_adas_tiny_search_then_test(tmp_path):
    spec, doc = tiny_search_on_embedded(tmp_path, TINY)
    out = search_dir(spec, spec.method_cfg["search"])
    assert load_artifact(out / "artifact.json")["sha256"] == doc["sha256"]

    # the archive: CoT (scored on the 1 validate problem) and, if the 0.5B meta agent's candidate ran, that one
    hist = doc["history"]
    assert [h["generation"] for h in hist] == ["initial", 1]
    assert hist[0]["name"] == "Chain-of-Thought" and hist[0]["status"] == "ok" and hist[0]["mean"] in (0.0, 1.0)
    assert hist[1]["status"] in ("ok", "workflow_failed", "no_candidate")  # a 0.5B meta agent rarely writes code
    archive = doc["extra"]["archive"]
    assert [a["name"] for a in archive][:1] == ["Chain-of-Thought"] and all(FITNESS.match(a["fitness"]) for a in archive)
    assert len(archive) == 1 + (hist[1]["status"] == "ok")
    assert doc["extra"]["initial_archive"] == ["Chain-of-Thought"] and doc["extra"]["best"]["fitness"] in \
        [a["fitness"] for a in archive]
    assert doc["search_config"]["params"]["initial_archive"] == ["Chain-of-Thought"]   # the size option, recorded
    assert doc["search_config"]["params"]["meta_max_tokens"] == 320 and doc["split"] == "validate"
    assert doc["workflow"]["params"]["kind"] == "adas" and "def forward(self, taskInfo)" in doc["workflow"]["params"]["graph"]

    # search cost per role, and every call in the ledger under its role
    cost = doc["search_cost"]["by_role"]
    assert set(cost) == {"optimizer", "executor"}
    assert cost["optimizer"]["calls"] >= 1 and cost["optimizer"]["prompt_tokens"] > 2500  # the base prompt + CoT
    assert cost["executor"]["calls"] >= 1
    opt_rows = read_jsonl_tolerant(out / "optimizer" / "calls.jsonl")
    assert opt_rows and {r["role"] for r in opt_rows} == {"optimizer"}
    assert opt_rows[0]["stage"] == "generation_1_propose" and len(opt_rows) == cost["optimizer"]["calls"]
    eval_rows = [r for p in sorted((out / "evals").rglob("calls.jsonl")) for r in read_jsonl_tolerant(p)]
    assert eval_rows and {r["role"] for r in eval_rows} == {"executor"} and len(eval_rows) == cost["executor"]["calls"]

    # the CoT agent ran in the sandbox: its LLMAgentBase call went through the channel, one request per ledger call
    (cot_preds,) = sorted((out / "evals" / "initial_0").rglob("predictions.jsonl"))
    pred = read_jsonl_tolerant(cot_preds)[0]
    wf = pred["trace"]["workflow"]
    assert wf["ok"] and wf["calls"] == 1 and pred["trace"]["operators"][0]["op"] == "LLMAgentBase"
    assert pred["calls"] == 1 and len(read_jsonl_tolerant(cot_preds.parent / "calls.jsonl")) == 1
    assert doc["validate_ids"] == [pred["id"]]

    # the frozen agent on 1 test problem
    test_spec, metrics = run_e2e(tmp_path, BASE)
    assert not failed_workflow_runs(test_spec.out_dir), failed_workflow_runs(test_spec.out_dir)
    preds = check_run_files(test_spec, metrics, 1)
    assert metrics["complete"] and set(metrics["by_role"]) == {"executor"} and metrics["n_errors"] == 0
    assert preds[0]["status"] == "ok" and preds[0]["id"] not in doc["validate_ids"]
    assert preds[0]["trace"]["artifact"]["sha256"] == doc["sha256"] and preds[0]["trace"]["workflow"]["ok"]
    calls = read_jsonl_tolerant(test_spec.out_dir / "calls.jsonl")
    assert {c["role"] for c in calls} == {"executor"} and preds[0]["trace"]["workflow"]["calls"] == len(calls)
    assert json.loads((test_spec.out_dir / "metrics.json").read_text())["score"] == preds[0]["score"]
