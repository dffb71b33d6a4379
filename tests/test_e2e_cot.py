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


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_keeps_finished_problems_and_the_rerun_continues(tmp_path, sig):
    """Ctrl-C (or kill) halfway: what finished is on disk, the server stops, the same command resumes."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "agentic_repro.harness.run", "method=cot", "benchmark=gsm8k", "limit=4", "backbone=local",
           "backbone.sampling.max_tokens=96", f"results_root={tmp_path}/results", f"cache.path={tmp_path}/c.sqlite",
           "runner.progress=false", "runner.max_concurrent_problems=1"]
    # one problem at a time: with the server's parallel slots all four finished together, so the signal
    # could land after the run had ended (exit 0, or -2 when it hit the interpreter's shutdown)
    env = {k: v for k, v in os.environ.items() if k != "AGENTIC_REPRO_LOCAL_URL"}
    preds = tmp_path / "results/default/gsm8k/cot/local/seed=42/predictions.jsonl"
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    while time.time() < deadline and not (preds.exists() and preds.read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "re-run the same command to resume" in err
    done = [json.loads(line) for line in preds.read_text().splitlines()]
    assert 1 <= len(done) < 4
    server_log = (preds.parent / "server.log").read_text()
    assert "llama_server: listening on http://127.0.0.1:" in server_log  # the embedded llama-server's own log
    # the re-run solves only what is left
    again = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    line = json.loads(again.stdout.strip().splitlines()[-1])
    assert line["n"] == 4 and line["backbone_calls"] == 4 - len(done)
