"""End to end against the fault-injecting loopback server (tests/fault_server.py), through the real HTTP
client: faults are retried or reported, never answers; a SIGKILL costs at most the requests in flight."""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.runner import RunSpec, Runner
from tests.fault_server import FaultServer, backbone_config

ROOT = Path(__file__).resolve().parents[1]
CONSENSUS = {"name": "sc", "solver": "tests.fake_methods:ask_many", "params": {"n": 5}}


def tiny_rows(root: Path, n: int) -> Path:
    (root / "tiny").mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"p{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)} for i in range(n)]
    (root / "tiny" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def fault_spec(tmp: Path, url: str, *, results: str = "results", cache: str = "cache.sqlite",
               method: dict[str, Any] = CONSENSUS, runner: dict[str, Any] | None = None,
               backbone: dict[str, Any] | None = None) -> RunSpec:
    bench = {"name": "tiny", "kind": "tests.conftest.EchoBenchmark", "split": "test",
             "splits": {"test": "tiny/test.jsonl"}, "metric": "accuracy", "answer_instruction": "End with ANSWER: <n>."}
    bb = backbone or backbone_config(url)
    full = {"method": method, "benchmark": bench, "backbone": bb, "seed": 42}
    return RunSpec(experiment="faults", seed=42, method_cfg=method, benchmark_cfg=bench, backbone_cfg=bb,
                   sampling={"temperature": 0.0, "max_tokens": 32},
                   cache_cfg={"mode": "read-write", "path": str(tmp / cache)},
                   runner_cfg={"progress": False, "max_concurrent_problems": 16, **(runner or {})},
                   results_root=tmp / results, full_config=full)


def run_spec(spec: RunSpec) -> dict[str, Any]:
    return asyncio.run(Runner(spec).run())


def test_twenty_percent_faults_over_100_problems_every_problem_answered(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 100)))
    with FaultServer(rate=0.2, seed=7, hang_s=3.0, retry_after_s=0.05, max_seconds=240) as srv:
        spec = fault_spec(tmp_path, srv.url, backbone=backbone_config(srv.url, retry={
            "max_attempts": 8, "base_delay_s": 0.01, "max_delay_s": 0.1, "timeout_s": 2.0}))
        metrics = run_spec(spec)
        faults = dict(srv.faults)
        # the same run replayed from the cache (the server now healthy) gives the same numbers, zero requests
        srv.rate, mark = 0.0, srv.received
        again = run_spec(fault_spec(tmp_path, srv.url, results="results2"))
        assert srv.received == mark
    assert metrics["n"] == 100 and metrics["n_errors"] == 0 and metrics["complete"] is True, metrics.get("first_error")
    assert set(faults) == {"429", "500", "503", "hang", "truncated_json", "empty_choices", "null_content"}, faults
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert len(calls) == 600 and all(c["error"] is None for c in calls)
    retried = [c for c in calls if c["retries"]]
    # every injected fault is a recorded retry; on a loaded machine a slow reply may also time out (logged as such)
    total, injected = sum(c["retries"] for c in calls), sum(faults.values())
    timeouts = sum(1 for c in retried for line in c["retry_log"] if line.startswith("timeout"))
    assert injected <= total <= injected + max(0, timeouts - faults["hang"]), (total, injected, timeouts)
    assert retried and all(len(c["retry_log"]) == c["retries"] and c["attempts"] == c["retries"] + 1 for c in retried)
    # no fault reached an answer: every prediction has the server's deterministic reply
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert all(p["raw_output"].startswith("thinking... ANSWER:") for p in preds)
    assert again["score"] == metrics["score"] and again["n"] == 100


def test_null_content_is_an_error_never_cached_and_a_healthy_rerun_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 3)))
    once = {"name": "once", "solver": "tests.fake_methods:ask_once", "params": {}}
    with FaultServer(fail_all="null_content") as broken:
        spec = fault_spec(tmp_path, broken.url, method=once, runner={"fail_fast_after": 0})
        metrics = run_spec(spec)
        calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
        broken.fail_all, mark = None, broken.received  # the server recovers (same URL: same cache keys)
        fixed = run_spec(fault_spec(tmp_path, broken.url, method=once))
        assert broken.received - mark == 3  # nothing was replayed from the cache
    assert fixed["n"] == 3 and fixed["complete"] is True
    assert metrics["n"] == 0 and metrics["n_errors"] == 3 and metrics["complete"] is False
    assert metrics["first_error"]["kind"] == "null_content"
    assert len(calls) == 3 and all(c["error_kind"] == "null_content" and c["attempts"] > 1 for c in calls)


# ---- SIGKILL at a random point, then resume --------------------------------------------------------------------

CHILD = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from tests.test_faults import fault_spec
from agentic_repro.harness.runner import Runner
from pathlib import Path
spec = fault_spec(Path({tmp!r}), {url!r})
asyncio.run(Runner(spec).run())
"""


def test_sigkill_then_resume_gives_identical_metrics_and_rebuys_only_what_was_in_flight(tmp_path, monkeypatch):
    n_problems = 40  # 40 x (5 samples + verify) = 240 requests
    data = tiny_rows(tmp_path / "data", n_problems)
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data))
    env = {**os.environ, "AGENTIC_REPRO_DATA": str(data)}
    kill_after = random.Random(int(time.time())).randint(20, 200)
    with FaultServer(delay_s=0.03, max_seconds=240) as srv:
        child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT), tmp=str(tmp_path), url=srv.url)],
                                 env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 120
            while srv.answered < kill_after and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(30)
        received_before = srv.received
        seen_before = set(k for _, k, _ in srv.log)
        spec = fault_spec(tmp_path, srv.url)
        calls_at_kill = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
        answered_at_kill = sum(1 for c in calls_at_kill if c["error"] is None and not c["cache_hit"])
        in_flight = received_before - answered_at_kill  # sent by the harness, answer never recorded
        # the ledger line is written before the cache entry (no paid call missing from the bill), so a kill
        # between the two loses the cached reply of a recorded call: re-bought on resume, and billed twice
        with sqlite3.connect(tmp_path / "cache.sqlite") as db:
            cached_at_kill = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        not_cached = received_before - cached_at_kill
        log_mark = len(srv.log)
        resumed = run_spec(spec)
        rebought = sum(1 for _, k, _ in srv.log[log_mark:] if k in seen_before)
    assert kill_after <= received_before < 6 * n_problems, "the kill came too late to test anything"
    print(f"killed after {received_before} requests: {in_flight} in flight, {not_cached} not cached, "
          f"{rebought} re-bought on resume")
    assert in_flight <= not_cached <= in_flight + 16  # at most one write gap per problem in flight
    assert rebought <= not_cached, (rebought, not_cached)
    report = resumed["this_invocation"]["resumed"]
    # the harness's own count: journalled requests re-sent (a few journalled may never have reached the server)
    assert rebought <= report["rebought"]  # every re-send the server saw is in the harness's own count
    # the whole bill is in the ledger: every request the server answered has its line
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert sum(1 for c in calls if not c["cache_hit"] and c["error"] is None) >= 6 * n_problems
    # identical metrics to an uninterrupted run (fresh folder, fresh cache)
    with FaultServer(delay_s=0.0) as srv2:
        whole = run_spec(fault_spec(tmp_path, srv2.url, results="whole", cache="whole.sqlite"))
    for key in ("score", "n", "n_errors", "complete", "stderr"):
        assert resumed[key] == whole[key], key
    for key in ("calls", "prompt_tokens", "completion_tokens", "cost_usd"):
        assert resumed["totals"][key] == pytest.approx(whole["totals"][key]), key
