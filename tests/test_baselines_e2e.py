"""End-to-end: each hand-crafted baseline on 1 problem of GSM8K (math), MBPP (code) and DROP (QA)
with the embedded model (real Hydra config, HTTP client, cache, ledger, scorer).

To keep CI short every run uses ``limit=1``, ``max_tokens=64`` and reduced sizes (stated per method
below; the paper defaults are in configs/method/*.yaml and are unit-tested with the scripted double
in tests/test_baselines_multiagent.py). At most ~7 calls per run, ~21 runs in all.
"""
from __future__ import annotations

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import check_run_files, run_e2e

# method -> (reduced-size overrides, the stages its calls may have)
REDUCED = {
    "self_refine": (["method.params.max_iterations=1"], {"generate", "feedback", "refine"}),
    "llm_debate": (["method.params.agents=2", "method.params.rounds=2"], {"debate_round_1", "debate_round_2"}),
    "llm_blender": (["method.params.n_candidates=2", "method.params.top_k=2"], {"candidate", "rank", "fuse"}),
    "dylan": (["method.params.roles.math=[Assistant,Mathematician,Mathematician]",
               "method.params.roles.code=[PythonAssistant,AlgorithmDeveloper,Programmer]",
               "method.params.roles.qa=[Assistant,Historian,Lawyer]", "method.params.layers=2"],
              {"layer_1", "layer_2"}),
    "tot": (["method.params.breadth=1", "method.params.depth=2", "method.params.n_evaluate=1",
             "method.params.max_proposals=2"], {"propose", "value", "answer"}),
    "self_reflection": ([], {"answer", "reflect", "reanswer"}),
    "self_reflection_step": (["method.params.max_steps=2"], {"step", "validate", "revise", "finalize"}),
}
BENCHMARKS = ["gsm8k", "mbpp", "drop"]


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("method", list(REDUCED))
def test_baseline_end_to_end(tmp_path, method, benchmark):
    overrides, allowed = REDUCED[method]
    spec, metrics = run_e2e(tmp_path, [f"method={method}", f"benchmark={benchmark}", "backbone=local", "limit=1",
                                       "backbone.sampling.max_tokens=64", *overrides])
    preds = check_run_files(spec, metrics, 1)
    pred = preds[0]
    assert pred["status"] == "ok", pred.get("error")
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert {c["stage"] for c in calls} <= allowed
    assert set(pred["cost_by_stage"]) <= allowed
    assert sum(v["calls"] for v in pred["cost_by_stage"].values()) == len(calls)
    assert pred["trace"]  # the full exchange is kept
    assert 0.0 <= metrics["score"] <= 1.0
