"""bench2 end to end through the real HTTP client and the real embedded model: StrategyQA and LiveBench (spatial)
with limit=1, the LLM judge on the embedded model, and samples_per_task=2 (pass@k) in one run."""
from __future__ import annotations

import pytest

from tests.conftest import check_run_files, run_e2e

pytestmark = pytest.mark.slow


def test_strategyqa_end_to_end(tmp_path):
    # one short benchmark here; PubMedQA/SocialMaze/LiveBench prompts carry 0.5-1.5k tokens (20-40 s on 2 cores)
    spec, metrics = run_e2e(tmp_path, ["method=io", "benchmark=strategyqa", "backbone=local", "limit=1",
                                       "backbone.sampling.max_tokens=32"])
    (p,) = check_run_files(spec, metrics, 1)
    assert p["status"] == "ok" and p["raw_output"].strip()
    assert p["score_details"]["rule"] and p["score_details"]["extraction_version"] == "1"
    assert metrics["complete"] and metrics["score"] in (0.0, 1.0)


def test_livebench_spatial_with_the_judge_on_the_embedded_model_and_two_samples(tmp_path):
    # spatial questions are short (~150 tokens); MATH's judge prompt carries the reference solution (slower here)
    spec, metrics = run_e2e(tmp_path, ["method=io", "benchmark=livebench", "benchmark.tasks=[spatial]",
                                       "backbone=local", "limit=1",
                                       "backbone@roles.judge=local", "benchmark.judge.max_tokens=32",
                                       "samples_per_task=2", "sampling.temperature=0.8",
                                       "backbone.sampling.max_tokens=64"])
    preds = check_run_files(spec, metrics, 2)
    assert sorted(p["sample"] for p in preds) == [0, 1] and len({p["sample_seed"] for p in preds}) == 2
    for p in preds:
        assert p["status"] == "ok" and p["judge"]["verdict"] in ("true", "false", "unparsed")
        assert p["calls"] == 2  # the method's answer + the judge's verdict
    assert metrics["judge"]["n_judged"] == 2 and metrics["by_role"]["judge"]["calls"] == 2
    assert set(metrics["pass_at_k"]) == {"1", "2"} and metrics["pass_at_k_problems"] == {"1": 1, "2": 1}
    assert metrics["pass_at_k"]["1"] == pytest.approx(metrics["score"])
