"""``python -m agentic_repro.harness.run`` on the issue-10 cases: each ends with the stated one-line message and exit code.

A dead server is no longer a score of 0 with exit 0; a bad option names its key; a changed configuration is
refused with both fixes; a full results disk names the path and errno and leaves no .tmp behind.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fault_server import FaultServer

ROOT = Path(__file__).resolve().parents[1]


def cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "agentic_repro.harness.run", *overrides, f"results_root={tmp_path}/results",
                           f"cache.path={tmp_path}/c.sqlite", "runner.progress=false"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def fault_backbone(url: str) -> list[str]:
    return ["backbone=vllm", "backbone.name=fault", "backbone.model=fault-model", f"backbone.base_url={url}",
            "backbone.max_concurrency=4", "backbone.supports_n=false", "+backbone.retry.base_delay_s=0.01",
            "backbone.retry.max_attempts=2", "backbone.retry.timeout_s=5", "method=cot", "benchmark=gsm8k"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def test_a_dead_server_is_an_incomplete_run_that_fails_fast_with_one_line(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    r = cli(tmp_path, *fault_backbone(url), "backbone.max_concurrency=1", "limit=10")
    assert r.returncode == 3, r.stderr
    line = last_line(r.stderr)
    assert line.startswith("error: run incomplete:") and "stopped early" in line and "3 of 10 problems failed" in line
    assert "backbone.base_url" in line and "re-run the same command" in line
    metrics = json.loads(next((tmp_path / "results").rglob("metrics.json")).read_text())
    assert metrics["complete"] is False and metrics["n"] == 0 and metrics["first_error"]["kind"] == "connection"
    calls = [json.loads(x) for x in next((tmp_path / "results").rglob("calls.jsonl")).read_text().splitlines()]
    assert len(calls) == 3 and all(c["error_kind"] == "connection" and c["attempts"] == 2 for c in calls)
    # the summary line on stdout is strict JSON: nothing answered prints a null score, not NaN
    summary = json.loads(r.stdout.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"{c} in stdout"))
    assert summary["score_pct"] is None and summary["n"] == 0 and summary["complete"] is False


def test_bad_options_exit_2_naming_the_key(tmp_path):
    r = cli(tmp_path, "limit=-1")
    assert r.returncode == 2 and last_line(r.stderr).startswith("error: limit=-1 is not allowed: ")
    r = cli(tmp_path, "seed=abc", "+lmit=3")
    assert r.returncode == 2 and "lmit" in r.stderr and "no part of the harness reads it" in r.stderr
    assert not (tmp_path / "results").exists()


def test_changed_configuration_is_refused_then_restart_and_a_full_disk(tmp_path):
    with FaultServer() as srv:
        base = [*fault_backbone(srv.url), "limit=2"]
        first = cli(tmp_path, *base)
        assert first.returncode == 0, first.stderr
        out = Path(json.loads(first.stdout.strip().splitlines()[-1])["run"])
        assert out.parent.name == "fault@fault-model" or out.parts[-2] == "fault@fault-model"
        hotter = cli(tmp_path, *base, "sampling.temperature=0.5")
        assert hotter.returncode == 2
        line = last_line(hotter.stderr)
        assert "sampling.temperature: 0.0 -> 0.5" in line and "experiment=" in line and "restart=true" in line
        again = cli(tmp_path, *base, "sampling.temperature=0.5", "restart=true")
        assert again.returncode == 0, again.stderr
        os.symlink("/dev/full", out / "metrics.json.tmp")
        full = cli(tmp_path, *base, "sampling.temperature=0.5")
        assert full.returncode == 2
        line = last_line(full.stderr)
        assert line.startswith(f"error: cannot write {out / 'metrics.json'}: [Errno 28]"), line
        assert "Traceback" not in full.stderr and not os.path.lexists(out / "metrics.json.tmp")
