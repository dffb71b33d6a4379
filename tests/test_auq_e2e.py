"""End-to-end: AUQ (dual) acts in one real ALFWorld game through the real HTTP client and the embedded model
(one step, short replies); the trajectory carries the elicited confidence and System 2's record, the ledger
agrees with it, and the score is the game's."""
from __future__ import annotations

import pytest

from agentic_repro.auq.metrics import trajectory_of
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import check_run_files, run_e2e


@pytest.mark.slow
def test_auq_dual_in_a_real_alfworld_game(tmp_path):
    spec, metrics = run_e2e(tmp_path, [
        "method=auq_dual", "benchmark=alfworld", "backbone=local", "limit=1", "benchmark.env.max_steps=1",
        "backbone.sampling.max_tokens=40", "method.params.few_shot=0", "method.params.tau=1.0",
        "method.params.n_paths=2", "method.params.max_refinements=0"])
    preds = check_run_files(spec, metrics, 1)
    p = preds[0]
    assert p["status"] == "ok", p["error"]
    steps = [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]
    assert len(steps) == 1
    a = steps[0]["extra"]["auq"]
    c0 = a["c_init"]
    # tau = 1.0: System 2 runs unless the model stated exactly 1.0 (a missing confidence also triggers it)
    assert a["system2"] == (c0 is None or c0 < 1.0)
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    stages = sorted(c["stage"] for c in calls)
    assert stages == (["act", "uar_reflect", "uar_reflect"] if a["system2"] else ["act"])
    assert steps[0]["extra"]["calls"] == len(calls) == p["calls"]
    if a["system2"]:
        assert {c["stage"]: c["temperature"] for c in calls} == {"act": 0.0, "uar_reflect": 0.7}
        assert len({c["sample_index"] for c in calls if c["stage"] == "uar_reflect"}) == 2   # distinct paths
        assert steps[0]["extra"]["confidence"] == a["c_final"]
    t = trajectory_of(p)
    assert len(t.confidences) == 1 and (t.confidences[0] is None or 0.0 <= t.confidences[0] <= 1.0)
    assert p["score_details"]["rule"] == "environment" and p["score"] == float(bool(p["episodes"][0]["success"]))
