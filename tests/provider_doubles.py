"""Loopback doubles of Anthropic's Messages API and Gemini's generateContent, on tests/fault_server.py's plumbing.

    with AnthropicDouble(script=[429, 529]) as srv:   # http://127.0.0.1:<port>/v1, POST /v1/messages
    with GeminiDouble(script=[429]) as srv:           # http://127.0.0.1:<port>/v1beta, POST .../models/<m>:generateContent

Each speaks its API's documented wire format: the key header (``x-api-key`` + ``anthropic-version``;
``x-goog-api-key``) or a 401; the request checked as the API checks it (Anthropic: ``max_tokens`` required,
temperature in [0, 1], roles user/assistant with the system prompt apart; Gemini: ``contents`` with roles user/model)
or a 400; ``script``: statuses answered to the first requests in order (429, 529/503, 500, 400) with the API's error
body (Anthropic ``{"type": "error", "error": {"type": "rate_limit_error", ...}}`` + ``retry-after``; Gemini
``{"error": {"code", "message", "status", "details": [RetryInfo]}}``); replies with the API's usage object, cache
classes included (``cache_read``/``cache_write``/``cache_write_1h``; Gemini ``cached``/``thoughts``), and Anthropic's
``anthropic-ratelimit-*`` headers. Answers are tests/fault_server.py's (deterministic in the body).
"""
from __future__ import annotations

import json
import time
from typing import Any

from tests.fault_server import FaultServer, default_answer

KEY = "test-key"


def _words(text: str) -> int:
    return len(str(text).split())


class AnthropicDouble(FaultServer):
    def __init__(self, *, model: str = "claude-3-7-sonnet-20250219", script: list[int] | None = None,
                 cache_read: int = 0, cache_write: int = 0, cache_write_1h: int = 0, omit_usage: bool = False,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.model, self.script = model, list(script or [])
        self.cache_read, self.cache_write, self.cache_write_1h = cache_read, cache_write, cache_write_1h
        self.omit_usage = omit_usage
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.hold = False  # Message Batches stay in_progress while held
        self.message_batches: dict[str, dict[str, Any]] = {}
        self.batches_created = self.polls = 0

    async def _error(self, writer: Any, status: int, etype: str, message: str, extra: dict[str, str] | None = None) -> bool:
        self.statuses.append(status)
        await self._send(writer, status, json.dumps({"type": "error", "error": {"type": etype, "message": message}}
                                                    ).encode(), extra)
        return True

    def limits(self) -> dict[str, str]:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
        return {"anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3999",
                "anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-tokens-limit": "400000",
                "anthropic-ratelimit-tokens-remaining": "399000", "anthropic-ratelimit-tokens-reset": reset,
                "request-id": f"req_{self.received}"}

    async def _handle(self, method: str, path: str, raw: bytes, writer: Any) -> bool:
        route = path.split("?")[0].rstrip("/")
        if "/v1/messages/batches" in route:
            return await self._batches(method, route, raw, writer)
        if not route.endswith("/v1/messages") or method != "POST":
            return await self._error(writer, 404, "not_found_error", f"no route {method} {path}")
        headers = self.last_headers
        self.received += 1
        if headers.get("x-api-key") != KEY or not headers.get("anthropic-version"):
            return await self._error(writer, 401, "authentication_error", "invalid x-api-key")
        body = json.loads(raw or b"{}")
        self.requests.append(body)
        if self.script:
            status = self.script.pop(0)
            kinds = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 400: "invalid_request_error"}
            extra = {"retry-after": "0", **self.limits()} if status == 429 else None
            return await self._error(writer, status, kinds.get(status, "api_error"), f"scripted {status}", extra)
        status, reply = self.message(body)
        if status != 200:
            return await self._error(writer, status, "invalid_request_error", reply["error"]["message"])
        self.statuses.append(200)
        self.answered += 1
        await self._send(writer, 200, json.dumps(reply).encode(), self.limits())
        return True

    # Message Batches: POST /v1/messages/batches, GET .../{id} (processing_status), GET .../{id}/results (JSONL)
    async def _batches(self, method: str, route: str, raw: bytes, writer: Any) -> bool:
        if self.last_headers.get("x-api-key") != KEY:
            return await self._error(writer, 401, "authentication_error", "invalid x-api-key")
        tail = route.split("/v1/messages/batches", 1)[1].strip("/")
        if method == "POST" and not tail:
            reqs = json.loads(raw or b"{}").get("requests") or []
            self.batches_created += 1
            bid = f"msgbatch_{self.batches_created}"
            self.message_batches[bid] = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                                         "requests": reqs, "results_url": None,
                                         "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0,
                                                            "canceled": 0, "expired": 0}}
            return await self._json(writer, {k: v for k, v in self.message_batches[bid].items() if k != "requests"})
        bid = tail.split("/")[0]
        batch = self.message_batches.get(bid)
        if batch is None:
            return await self._error(writer, 404, "not_found_error", f"no batch {bid}")
        if tail.endswith("/results"):
            lines = []
            for r in batch["requests"]:
                status, reply = self.message(r.get("params") or {})
                result = {"type": "succeeded", "message": reply} if status == 200 else \
                    {"type": "errored", "error": {"type": "error", "error": reply["error"]}}
                lines.append({"custom_id": r["custom_id"], "result": result})
            await self._send(writer, 200, "".join(json.dumps(x) + "\n" for x in lines).encode())
            return True
        self.polls += 1
        if not self.hold:
            batch["processing_status"] = "ended"
            batch["results_url"] = f"http://127.0.0.1:{self.port}/v1/messages/batches/{bid}/results"
        return await self._json(writer, {k: v for k, v in batch.items() if k != "requests"})

    async def _json(self, writer: Any, obj: Any) -> bool:
        await self._send(writer, 200, json.dumps(obj).encode())
        return True

    def message(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(200, a Message) or (400, the API's error body) for a Messages API request body."""
        problems = []
        if not isinstance(body.get("max_tokens"), int):
            problems.append("max_tokens: Field required")
        t = body.get("temperature")
        if t is not None and not 0 <= t <= 1:
            problems.append("temperature: Input should be less than or equal to 1")
        msgs = body.get("messages") or []
        if any(m.get("role") not in ("user", "assistant") for m in msgs) or not msgs:
            problems.append("messages: roles must be user or assistant (the system prompt is the top-level `system`)")
        unknown = set(body) - {"model", "max_tokens", "messages", "system", "temperature", "top_p", "top_k",
                               "stop_sequences", "metadata", "stream"}
        if unknown:
            problems.append(f"{sorted(unknown)}: Extra inputs are not permitted")
        if problems:
            return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "; ".join(problems)}}
        text = default_answer(msgs, body)
        prompt = _words(body.get("system", "")) + sum(_words(m.get("content", "")) for m in msgs)
        usage = {"input_tokens": max(0, prompt - self.cache_read - self.cache_write - self.cache_write_1h),
                 "output_tokens": _words(text), "cache_read_input_tokens": self.cache_read,
                 "cache_creation_input_tokens": self.cache_write + self.cache_write_1h,
                 "cache_creation": {"ephemeral_5m_input_tokens": self.cache_write,
                                    "ephemeral_1h_input_tokens": self.cache_write_1h}}
        reply = {"id": f"msg_{self.received}", "type": "message", "role": "assistant", "model": self.model,
                 "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                 **({} if self.omit_usage else {"usage": usage})}
        return 200, reply


class GeminiDouble(FaultServer):
    def __init__(self, *, model_version: str = "gemini-2.5-pro", script: list[int] | None = None, cached: int = 0,
                 thoughts: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.model_version, self.script = model_version, list(script or [])
        self.cached, self.thoughts = cached, thoughts
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.statuses: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1beta"

    async def _error(self, writer: Any, code: int, status: str, message: str, details: list[Any] | None = None) -> bool:
        self.statuses.append(code)
        err = {"code": code, "message": message, "status": status, **({"details": details} if details else {})}
        await self._send(writer, code, json.dumps({"error": err}).encode())
        return True

    async def _handle(self, method: str, path: str, raw: bytes, writer: Any) -> bool:
        if ":generateContent" not in path or "/v1beta/models/" not in path or method != "POST":
            return await self._error(writer, 404, "NOT_FOUND", f"no route {method} {path}")
        self.received += 1
        self.paths.append(path)
        if self.last_headers.get("x-goog-api-key") != KEY:
            return await self._error(writer, 403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers")
        body = json.loads(raw or b"{}")
        self.requests.append(body)
        if self.script:
            code = self.script.pop(0)
            status = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 500: "INTERNAL", 400: "INVALID_ARGUMENT"}
            details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}] \
                if code == 429 else None
            return await self._error(writer, code, status.get(code, "INTERNAL"), f"scripted {code}", details)
        contents = body.get("contents") or []
        if not contents or any(c.get("role") not in ("user", "model") for c in contents):
            return await self._error(writer, 400, "INVALID_ARGUMENT", "contents: roles must be user or model")
        unknown = set(body) - {"contents", "systemInstruction", "generationConfig", "safetySettings", "cachedContent"}
        if unknown:
            return await self._error(writer, 400, "INVALID_ARGUMENT", f"Unknown name {sorted(unknown)}")
        messages = [{"role": c["role"], "content": "".join(p.get("text", "") for p in c.get("parts") or [])}
                    for c in contents]
        cfg = body.get("generationConfig") or {}
        text = default_answer(messages, {"messages": messages, **cfg})
        prompt = sum(_words(m["content"]) for m in messages) + _words(
            "".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or []))
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": _words(text),
                 "totalTokenCount": prompt + _words(text) + self.thoughts,
                 **({"cachedContentTokenCount": self.cached} if self.cached else {}),
                 **({"thoughtsTokenCount": self.thoughts} if self.thoughts else {})}
        reply = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                                 "index": 0}],
                 "usageMetadata": usage, "modelVersion": self.model_version, "responseId": f"r{self.received}"}
        self.statuses.append(200)
        self.answered += 1
        await self._send(writer, 200, json.dumps(reply).encode())
        return True


def native_config(kind: str, url: str, model: str, **overrides: Any) -> dict[str, Any]:
    """A backbone config (kind anthropic / gemini) pointed at a double, priced from the table, test-sized retries."""
    cfg = {"name": f"{kind}-double", "kind": kind, "model": model, "base_url": url, "api_key_env": "DOUBLE_API_KEY",
           "price": "table", "params": None, "max_concurrency": 4, "supports_n": False, "sampling": {},
           "retry": {"max_attempts": 4, "base_delay_s": 0.01, "max_delay_s": 0.1, "timeout_s": 5.0},
           "rate_limit": {"mode": "fixed"}}
    cfg.update(overrides)
    return cfg
