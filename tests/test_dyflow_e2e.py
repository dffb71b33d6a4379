"""DyFlow end to end through the real HTTP client and the embedded model (one GSM8K problem, short replies).

The 0.5B model rarely writes a valid stage: the run must still complete, with every designer attempt in the
trace, each role in the ledger, and an answer or a scored method failure (never an infrastructure error)."""
from __future__ import annotations

import pytest

from agentic_repro.dyflow.schema import StageGraph
from tests.conftest import check_run_files, run_e2e

pytestmark = pytest.mark.slow

# key_repair=drop: the 0.5B designer invents input keys (e.g. "quarters"); dropping them lets a stage run, so
# the executor and the summariser are exercised too (re-asks are covered by the unit tests).
SMALL = ["method=dyflow", "backbone=local", "benchmark=gsm8k", "limit=1", "backbone.sampling.max_tokens=64",
         "method.params.t_max=2", "method.params.max_reasks=0", "method.params.designer_max_tokens=200",
         "method.params.summarizer_max_tokens=48", "method.params.ensemble_samples=2",
         "method.params.ensemble_max_tokens=64", "method.params.selector_max_tokens=32",
         "method.params.key_repair=drop"]


def test_dyflow_end_to_end_gsm8k(tmp_path):
    spec, metrics = run_e2e(tmp_path, SMALL)
    preds = check_run_files(spec, metrics, 1)
    p = preds[0]
    assert p["status"] == "ok", p.get("error")
    t = p["trace"]
    assert t["method"] == "dyflow" and t["options"]["t_max"] == 2
    assert 1 <= len(t["stages"]) <= 2 and t["designer_calls"] >= len(t["stages"])
    assert t["terminated_by"] in ("organize", "terminate", "t_max", "max_stages")
    for rec in t["stages"]:
        assert rec["designer_messages"][0]["content"].startswith("\nYou are the workflow stage designer")
        assert len(rec["attempts"]) == 1
        assert all(a["status"] in ("valid", "repaired", "invalid") for a in rec["attempts"])
        if rec["stage"] is not None:
            g = StageGraph.model_validate(rec["stage"])
            assert set(rec["outputs"]) <= {op.output_key for op in g.operators}
    by_role = metrics["by_role"]
    assert by_role["designer"]["calls"] == t["designer_calls"]
    if t["n_stages"]:
        assert by_role["executor"]["calls"] >= 1
    assert (p["raw_output"] != "") or t.get("method_failure")


# DyFlow's other four benchmarks (issue 11 §2), one problem each and one stage (t_max=1): the run completes with
# the benchmark's own scorer, and the judge-scored ones record their deterministic score (the judge role is
# exercised by tests/test_bench2_e2e.py). HumanEval's TEST_CODE can only run the tests the task shows.
ONE_STAGE = [o for o in SMALL if not o.startswith(("benchmark=", "method.params.t_max="))] + ["method.params.t_max=1"]


@pytest.mark.parametrize("bench", ["pubmedqa", "math_l5", "livebench", "socialmaze", "humaneval_dyflow"])
def test_dyflow_end_to_end_on_its_benchmarks(tmp_path, bench):
    spec, metrics = run_e2e(tmp_path, [*ONE_STAGE, f"benchmark={bench}"])
    preds = check_run_files(spec, metrics, 1)
    p = preds[0]
    assert p["status"] == "ok", p.get("error")
    assert p["trace"]["method"] == "dyflow" and len(p["trace"]["stages"]) == 1
    assert metrics["by_role"]["designer"]["calls"] >= 1 and metrics["complete"] is True
    assert 0.0 <= p["score"] <= 1.0
