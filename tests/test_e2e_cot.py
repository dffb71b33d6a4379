"""End to end through the real HTTP client and the real embedded model: CoT on each benchmark,
every result file written with consistent numbers, then a replay that makes no backbone call."""
from __future__ import annotations

import pytest

from tests.conftest import check_run_files, run_e2e

pytestmark = pytest.mark.slow

# HotpotQA prompts carry ~1-2k tokens of distractor context (~20-40 s to read on 2 cores): one problem.
CASES = [("gsm8k", 2), ("math", 2), ("humaneval", 2), ("mbpp", 2), ("hotpotqa", 1), ("drop", 2)]


@pytest.mark.parametrize("benchmark,n", CASES)
def test_cot_end_to_end(tmp_path, benchmark, n):
    overrides = ["method=cot", f"benchmark={benchmark}", "backbone=local", f"limit={n}",
                 "backbone.sampling.max_tokens=256"]
    spec, metrics = run_e2e(tmp_path, overrides)
    preds = check_run_files(spec, metrics, n)
    for p in preds:
        assert p["status"] == "ok" and p["raw_output"].strip(), p
        assert p["score_details"].get("rule"), "the extraction rule is recorded"
        assert p["calls"] == 1 and p["prompt_tokens"] > 0 and p["completion_tokens"] > 0
    assert metrics["this_invocation"]["backbone_calls"] == n
    meta = (spec.out_dir / "meta.json").read_text()
    assert "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" in meta  # the model's identity
    # a finished run re-run: everything skipped, zero backbone calls, same numbers
    spec2, again = run_e2e(tmp_path, overrides)
    assert again["this_invocation"]["backbone_calls"] == 0 and again["score"] == metrics["score"]
