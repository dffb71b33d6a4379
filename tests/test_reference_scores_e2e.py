"""Slow: the Qwen EvalPlus protocol through the embedded model, the prompt checked where it enters the server.

A loopback HTTP proxy sits between the harness and llama-server (the server pool hands the backbone the proxy's
URL), so the test sees the exact bytes of every request. The server renders a chat request into the prompt it
tokenizes; ``/apply-template`` is that same rendering (llama-server's chat-request parser, prefill included),
and ``usage.prompt_tokens`` of the real reply must equal the token count of Qwen's template text: together they
show the model read Qwen's prompt, byte for byte, not merely that we sent the right JSON.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.conftest import _SERVERS, compose

pytestmark = pytest.mark.slow

# qwencoder-eval/instruct/eval_plus/model.py, class ChatML.codegen: the text Qwen's run sends to vLLM, verbatim.
QWEN_INPUT = """<|im_start|>system
You are an intelligent programming assistant to produce Python algorithmic solutions<|im_end|>
<|im_start|>user
Can you complete the following Python function?
```python
{prompt}
```
<|im_end|>
<|im_start|>assistant
```python
"""
QWEN_STOP = ["<|endoftext|>", "<|endofmask|>", "</s>", "\nif __name__", "\ndef main(", "\nprint(", "\n#", "\n```"]


class Proxy:
    """Forwards every request to ``upstream`` and keeps (method, path, request body, response body)."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.seen = upstream, []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                r = httpx.request(self.command, proxy.upstream + self.path, content=body or None, timeout=900,
                                  headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                proxy.seen.append((self.command, self.path, body, r.content))
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


class ProxiedPool:
    """The session's server pool, with the backbone pointed at a proxy in front of the real server."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.proxy = pool, None

    async def aget_or_start(self, *args: Any, **kwargs: Any) -> str:
        upstream = await self.pool.aget_or_start(*args, **kwargs)
        if self.proxy is None:
            self.proxy = Proxy(upstream)
        return self.proxy.url

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def test_qwen_protocol_prompt_reaches_the_server_byte_for_byte(tmp_path):
    from agentic_repro.harness.results import read_jsonl_tolerant
    from agentic_repro.harness.runner import run_spec, spec_from_config

    cfg = compose(["method=qwen_evalplus", "benchmark=humaneval_evalplus", "backbone=local", "limit=3",
                   f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.sqlite'}",
                   "runner.progress=false"])
    spec = spec_from_config(cfg)
    pool = ProxiedPool(_SERVERS[0])
    metrics = run_spec(spec, servers=pool)
    assert metrics["complete"] and metrics["n"] == 3 and metrics["n_errors"] == 0

    from agentic_repro.evaluators.base import build_benchmark
    problems = {p.id: p for p in build_benchmark(spec.benchmark_cfg).load()[0]}
    chats = [(json.loads(req), json.loads(resp)) for method, path, req, resp in pool.proxy.seen
             if method == "POST" and path.endswith("/chat/completions")]
    assert len(chats) == 3
    upstream = pool.proxy.upstream
    by_prompt = {}
    for body, reply in chats:
        user = body["messages"][1]["content"]
        pid = next(i for i, p in problems.items()
                   if user == f"Can you complete the following Python function?\n```python\n{p.fields['prompt'].strip()}\n```\n")
        prompt = problems[pid].fields["prompt"].strip()
        expected = QWEN_INPUT.format(prompt=prompt)
        assert (body["stop"], body["max_tokens"], body["temperature"]) == (QWEN_STOP, 2048, 0.0)
        rendered = httpx.post(upstream + "/apply-template", json={"messages": body["messages"]}).json()["prompt"]
        assert rendered == expected                                      # byte for byte
        tokens = httpx.post(upstream + "/tokenize", json={"content": expected, "parse_special": True}).json()["tokens"]
        assert reply["usage"]["prompt_tokens"] == len(tokens)            # the server read exactly that many tokens
        content = reply["choices"][0]["message"]["content"]
        assert content.startswith("```python\n")                         # llama-server echoes the prefill
        by_prompt[pid] = content
    for pred in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl"):  # the Solution is the continuation
        assert pred["raw_output"] == by_prompt[pred["id"]][len("```python\n"):]
        assert pred["score_details"]["rule"] == "evalplus_chat"
