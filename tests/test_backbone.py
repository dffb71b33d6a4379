"""The OpenAI-compatible client against a real loopback HTTP server: retries, n, errors, key checks."""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy, api_key_from_env
from agentic_repro.harness.ledger import Price


class Flaky(BaseHTTPRequestHandler):
    """Fails the first ``fail`` requests with ``status`` (and a Retry-After), then answers."""

    fail = 2
    status = 429
    seen: list[dict] = []

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if len(type(self).seen) <= type(self).fail:
            self.send_response(type(self).status)
            self.send_header("Retry-After", "0.05")
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "slow down"}}')
            return
        n = body.get("n", 1)
        resp = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": i, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"answer {i}"}} for i in range(n)],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3 * n, "total_tokens": 10 + 3 * n}}
        data = json.dumps(resp).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    Flaky.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def make(url, attempts=5):
    return OpenAICompatibleBackbone(name="t", model="m", base_url=url, api_key="k", price=Price(0.15, 0.6),
                                    retry=RetryPolicy(max_attempts=attempts, base_delay_s=0.01, max_delay_s=0.1))


def test_retries_429_then_succeeds_and_counts_retries(server):
    Flaky.fail, Flaky.status = 2, 429
    res = asyncio.run(make(server).complete([{"role": "user", "content": "hi"}], {"temperature": 0}, 1))
    assert res.retries == 2 and res.completions[0].text == "answer 0" and len(res.retry_log) == 2


def test_gives_up_after_bounded_attempts(server):
    Flaky.fail, Flaky.status = 99, 503
    with pytest.raises(BackboneError, match="InternalServerError|APIStatusError|503"):
        asyncio.run(make(server, attempts=3).complete([{"role": "user", "content": "hi"}], {}, 1))
    assert len(Flaky.seen) == 3


def test_client_errors_are_not_retried(server):
    Flaky.fail, Flaky.status = 99, 400
    with pytest.raises(BackboneError):
        asyncio.run(make(server).complete([{"role": "user", "content": "hi"}], {}, 1))
    assert len(Flaky.seen) == 1


def test_n_choices_split_usage_so_cost_sums_to_the_request(server):
    Flaky.fail = 0
    res = asyncio.run(make(server).complete([{"role": "user", "content": "hi"}], {"temperature": 0.7}, 3))
    assert [c.text for c in res.completions] == ["answer 0", "answer 1", "answer 2"]
    assert sum(c.prompt_tokens for c in res.completions) == 10
    assert sum(c.completion_tokens for c in res.completions) == 9


def test_missing_key_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackboneError, match="OPENAI_API_KEY"):
        api_key_from_env("OPENAI_API_KEY", "gpt-4o-mini")


def test_unpriced_model_is_an_error():
    with pytest.raises(ValueError, match="price: 0"):
        Price.from_config(None, "mystery")
    assert Price.from_config(0, "free").cost(10**6, 10**6) == 0
    assert Price.from_config({"input_per_1m": 0.15, "output_per_1m": 0.6}, "p").cost(10**6, 10**6) == pytest.approx(0.75)
