"""DenoiseFlow end to end: the embedded backbone, the real all-MiniLM-L6-v2 embedder, real benchmarks.

Tiny on purpose (2 problems for GSM8K and MBPP, 1 for HotpotQA; short outputs, N=3, K_max=3, R=1): the local
model is slow (measured on the shared 2-core machine under load: GSM8K 2 problems 680 s, MBPP 2 problems 310 s).
"""
from __future__ import annotations

import json

import pytest

from tests.conftest import check_run_files, run_e2e

# ~8 calls per problem on one llama.cpp thread: at load 6-7 (the other xdist worker busy) the GSM8K case took over
# the slow tests' 900 s; a hang still fails this test, not the run
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SMALL = ["method=denoiseflow", "backbone=local", "backbone.sampling.max_tokens=160",
         "method.params.n_samples=3", "method.params.k_max=3", "method.params.max_retries=1",
         "method.params.window_size=2", "method.params.quantile_min_history=2",
         "method.params.sense_max_tokens=160"]


def test_minilm_embedder_loads_offline():
    from agentic_repro.harness.embedding import MiniLMEmbedder

    e = MiniLMEmbedder()
    v = e.embed(["How many marbles does Janet have?", "Number of marbles Janet owns", "The capital of France"])
    assert v.shape == (3, 384)
    assert float(v[0] @ v[1]) > 0.7 > float(v[0] @ v[2])


@pytest.mark.parametrize("bench,n", [("gsm8k", 2), ("mbpp", 2), ("hotpotqa", 1)])  # HotpotQA: ~2k-token prompts
def test_denoiseflow_end_to_end_writes_traces_and_report(tmp_path, bench, n, capsys):
    overrides = [*SMALL, f"benchmark={bench}", f"limit={n}"]
    if bench == "mbpp":
        overrides.append("benchmark.execute_code=true")
    spec, metrics = run_e2e(tmp_path, overrides)
    preds = check_run_files(spec, metrics, n)
    for p in preds:
        assert p["status"] == "ok", p.get("error")
        t = p["trace"]
        assert t["embedding"]["model"] == "all-MiniLM-L6-v2" and t["embedding"]["calls"] > 0
        assert p["cost_by_stage"]["sense"]["calls"] == 3
        assert t["route"] in ("direct", "branch", "refine") and 1 <= t["K"] <= 3
        assert 0.0 <= t["r"] <= 1.0
    state = json.loads((spec.out_dir / "method_state.json").read_text())
    assert state["windows_done"] == 1 and 0.5 <= state["state"]["calibration"]["T"] <= 2.0
    from agentic_repro.denoiseflow.report import report

    res = report(tmp_path / "results", bins=2)
    assert "Table 3" in capsys.readouterr().out
    assert (tmp_path / "results" / "denoiseflow_figure3.png").exists()
    assert len([k for k in res if k != "figure_path"]) == 1
