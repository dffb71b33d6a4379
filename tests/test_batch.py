"""Batch mode (harness/batch.py) end to end: CoT-SC on GSM8K through a loopback double of OpenAI's Batch API
(tests/batch_server.py) gives the online run's answers under the same cache keys, billed at the batch price, and a
run killed between submission and completion resumes its batch without submitting it again."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentic_repro.harness.batch import check_batch
from agentic_repro.harness.compose import compose
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.runner import run_spec, spec_from_config
from agentic_repro.harness.validate import ConfigError
from tests.batch_server import BatchDouble

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"question": f"Tom has {i} apples and buys {i + 2} more. How many apples does he have?",
         "answer": str(2 * i + 2)} for i in range(3)]


def gsm8k_data(tmp: Path) -> Path:
    root = tmp / "data"
    (root / "aflow_splits").mkdir(parents=True, exist_ok=True)
    (root / "aflow_splits" / "gsm8k_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return root


def overrides(tmp: Path, url: str, name: str, batch: bool) -> list[str]:
    return ["method=cot_sc", "benchmark=gsm8k", "backbone=gpt-4o-mini", f"backbone.base_url={url}",
            "backbone.api_key_env=DOUBLE_API_KEY", "backbone.rate_limit.mode=fixed", "backbone.retry.timeout_s=10",
            "limit=3", f"results_root={tmp / name}", f"cache.path={tmp / name / 'cache.sqlite'}",
            "runner.progress=false", f"runner.batch={'true' if batch else 'false'}", "runner.batch_poll_s=0.05",
            "runner.batch_flush_s=0.3"]


def run(tmp: Path, url: str, name: str, batch: bool):
    spec = spec_from_config(compose(overrides(tmp, url, name, batch)))
    metrics = run_spec(spec)
    return spec, metrics


def answers(spec):
    return {p["id"]: p["raw_output"] for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")}


def calls(spec):
    return sorted(read_jsonl_tolerant(spec.out_dir / "calls.jsonl"), key=lambda c: c["key"] or "")


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(gsm8k_data(tmp_path)))
    monkeypatch.setenv("DOUBLE_API_KEY", "sk-double")
    return tmp_path


def test_cot_sc_through_the_batch_api_is_the_online_run_at_half_price(env):
    with BatchDouble(max_seconds=120) as srv:
        online, m_online = run(env, srv.url, "online", batch=False)
        assert srv.online == 15 and srv.batches_created == 0  # 3 problems x 5 separate samples (n_mode separate)
        batched, m_batch = run(env, srv.url, "batch", batch=True)
        assert srv.online == 15 and srv.batches_created == 1 and srv.uploads == 1
    assert m_online["n_errors"] == 0 and m_batch["n_errors"] == 0 and m_batch["complete"] is True
    assert answers(batched) == answers(online)
    a, b = calls(online), calls(batched)
    assert [c["key"] for c in a] == [c["key"] for c in b] and len(b) == 15  # the same cache keys
    assert all(c["service_tier"] == "batch" for c in b) and not any(c["service_tier"] == "batch" for c in a)
    for x, y in zip(a, b):
        assert y["cost_usd"] == pytest.approx(x["cost_usd"] / 2, rel=1e-9)  # gpt-4o-mini batch: 50%
    lines = [json.loads(t) for t in (batched.out_dir / "batches.jsonl").read_text().splitlines()]
    assert [ln["batch_id"] for ln in lines] == ["batch_1"] and len(lines[0]["custom_ids"]) == 15


def test_a_run_killed_after_submission_resumes_its_batch(env):
    script = ("import sys; from agentic_repro.harness.compose import compose; "
              "from agentic_repro.harness.runner import run_spec, spec_from_config; "
              "run_spec(spec_from_config(compose(sys.argv[1:])))")
    with BatchDouble(hold=True, max_seconds=120) as srv:
        online, _ = run(env, srv.url, "online", batch=False)
        proc = subprocess.Popen([sys.executable, "-c", script, *overrides(env, srv.url, "batch", True)], cwd=ROOT,
                                env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        def recorded() -> bool:
            return any((env / "batch").rglob("batches.jsonl"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (srv.batches_created and srv.polls >= 2 and recorded()):
            time.sleep(0.05)
        assert srv.batches_created == 1 and recorded(), proc.stderr.read().decode()[-2000:] if proc.poll() else ""
        proc.send_signal(signal.SIGKILL)  # between submission and completion
        proc.wait(10)
        srv.release()
        batched, metrics = run(env, srv.url, "batch", batch=True)
        assert srv.batches_created == 1 and srv.uploads == 1  # polled the recorded batch, never submitted again
        assert srv.online == 15  # only the online run's requests
    assert metrics["n_errors"] == 0 and metrics["complete"] is True
    assert answers(batched) == answers(online)


def test_a_failed_line_is_that_problems_error(env):
    with BatchDouble(fail_lines={0}, max_seconds=120) as srv:
        spec, metrics = run(env, srv.url, "batch", batch=True)
    assert metrics["n_errors"] == 1 and metrics["complete"] is False
    failed = [c for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl") if c["error"]]
    assert len(failed) == 1 and failed[0]["error_kind"] == "http_4xx" and "scripted line error" in failed[0]["error"]


def test_batch_is_refused_where_calls_depend_on_answers_or_the_api_has_no_batch():
    assert check_batch({"batch": False}, "dyflow", "openai") is False
    assert check_batch({"batch": True}, "cot_sc", "openai") is True
    with pytest.raises(ConfigError, match="waits on its own answers"):
        check_batch({"batch": True}, "dyflow", "openai")
    with pytest.raises(ConfigError, match="kind openai"):
        check_batch({"batch": True}, "cot", "embedded")


def test_claude_through_message_batches_is_the_online_run_at_half_price(env, monkeypatch):
    from tests.provider_doubles import KEY, AnthropicDouble

    monkeypatch.setenv("DOUBLE_API_KEY", KEY)
    with AnthropicDouble(model="claude-3-5-sonnet-20241022", max_seconds=120) as srv:
        def go(name, batch):
            ov = [o.replace("backbone=gpt-4o-mini", "backbone=claude-3-5-sonnet").replace("method=cot_sc", "method=cot")
                  for o in overrides(env, srv.url, name, batch)]
            spec = spec_from_config(compose(ov))
            return spec, run_spec(spec)
        online, m1 = go("online", False)
        assert srv.answered == 3 and srv.batches_created == 0
        batched, m2 = go("batch", True)
        assert srv.answered == 3 and srv.batches_created == 1  # no online request: all through the batch
    assert m1["n_errors"] == 0 and m2["n_errors"] == 0
    assert answers(batched) == answers(online)
    a, b = calls(online), calls(batched)
    assert [c["key"] for c in a] == [c["key"] for c in b]
    for x, y in zip(a, b):
        assert y["service_tier"] == "batch" and y["cost_usd"] == pytest.approx(x["cost_usd"] / 2, rel=1e-9)


def test_the_docs_batch_command_composes_into_a_batch_run():
    import re

    text = (ROOT / "docs" / "backbones.md").read_text(encoding="utf-8")
    section = text.split("## Batch mode (`runner.batch=true`)", 1)[1].split("\n## ", 1)[0]
    (line,) = re.findall(r"^python -m agentic_repro\.harness\.run (.+)$", section, re.MULTILINE)
    cfg = compose(line.split())
    assert check_batch(cfg["runner"], cfg["method"]["name"], cfg["backbone"]["kind"]) is True
