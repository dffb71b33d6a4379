"""Backbone-level reliability (issue 10 items 1, 6, 9): a bad 200 reply is an error, retried, never a Completion.

A stdlib loopback server plays a script of replies: each case first fails the stated way, then answers.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy
from agentic_repro.harness.ledger import Price

GOOD = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "42"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


def _reply(content, finish="stop"):
    r = json.loads(json.dumps(GOOD))
    r["choices"][0]["message"]["content"] = content
    r["choices"][0]["finish_reason"] = finish
    return json.dumps(r).encode()


BAD = {
    "null_content": _reply(None),
    "empty_content": _reply("", "content_filter"),
    "bad_json": json.dumps(GOOD).encode()[:40],  # truncated body
    "empty_choices": json.dumps({**GOOD, "choices": []}).encode(),
    "error_body": json.dumps({"error": {"message": "model crashed"}}).encode(),
}


class Script(BaseHTTPRequestHandler):
    plan: list[bytes | str] = []
    seen: list[dict] = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        type(self).seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        step = type(self).plan.pop(0) if type(self).plan else json.dumps(GOOD).encode()
        if step == "hang":
            time.sleep(3)
            step = json.dumps(GOOD).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(step)))
        self.end_headers()
        self.wfile.write(step)


@pytest.fixture
def url():
    Script.plan, Script.seen = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def bb(url, attempts=3, timeout=5.0):
    return OpenAICompatibleBackbone(name="t", model="m", base_url=url, api_key="k", price=Price(0, 0),
                                    retry=RetryPolicy(max_attempts=attempts, base_delay_s=0.01, max_delay_s=0.02,
                                                      timeout_s=timeout))


MSG = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_reply_is_retried_then_answered(url, kind):
    Script.plan = [BAD[kind]]
    res = asyncio.run(bb(url).complete(MSG, {}, 1))
    assert res.completions[0].text == "42" and res.retries == 1 and len(Script.seen) == 2
    assert res.retry_log[0].startswith(kind)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_persistent_bad_reply_is_an_error_never_a_completion(url, kind):
    Script.plan = [BAD[kind]] * 5
    with pytest.raises(BackboneError) as ei:
        asyncio.run(bb(url, attempts=3).complete(MSG, {}, 1))
    e = ei.value
    assert e.kind == kind and e.attempts == 3 and len(e.retry_log) == 2 and e.retryable
    assert len(Script.seen) == 3


def test_empty_answer_that_stopped_is_an_answer(url):
    """'' with finish_reason stop/length is what the model said, not a fault."""
    Script.plan = [_reply("", "stop"), _reply("", "length")]
    b = bb(url)
    assert asyncio.run(b.complete(MSG, {}, 1)).completions[0].text == ""
    assert asyncio.run(b.complete(MSG, {}, 1)).completions[0].finish_reason == "length"
    assert len(Script.seen) == 2


def test_one_bad_choice_among_n_retries_the_request(url):
    two = json.loads(json.dumps(GOOD))
    two["choices"].append({"index": 1, "finish_reason": None, "message": {"content": None}})
    Script.plan = [json.dumps(two).encode()]
    res = asyncio.run(bb(url).complete(MSG, {}, 2))
    assert res.retries == 1 and res.retry_log[0].startswith("null_content")


def test_hung_server_times_out_per_attempt_and_is_retried(url):
    Script.plan = ["hang"]
    t0 = time.perf_counter()
    res = asyncio.run(bb(url, timeout=0.5).complete(MSG, {}, 1))
    assert res.retries == 1 and res.retry_log[0].startswith("timeout") and time.perf_counter() - t0 < 2.5


def test_closed_port_is_a_connection_error_with_attempts():
    with pytest.raises(BackboneError) as ei:
        asyncio.run(bb("http://127.0.0.1:9/v1", attempts=2).complete(MSG, {}, 1))
    assert ei.value.kind == "connection" and ei.value.attempts == 2 and len(ei.value.retry_log) == 1


def test_default_timeout_and_every_openai_config_states_one():
    from pathlib import Path

    assert RetryPolicy().timeout_s == 120.0
    folder = Path(__file__).resolve().parents[1] / "configs" / "backbone"
    for p in folder.glob("*.yaml"):
        cfg = yaml.safe_load(p.read_text())
        if cfg.get("kind") in ("openai", "embedded"):
            assert (cfg.get("retry") or {}).get("timeout_s"), f"{p.name} states no retry.timeout_s"
