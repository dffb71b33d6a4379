"""A loopback OpenAI-compatible chat server that injects faults at a seeded rate (a test double).

    with FaultServer(rate=0.2, seed=1) as srv:      # in-process, on a thread; 127.0.0.1 only
        url = srv.url                               # http://127.0.0.1:<port>/v1
    python tests/fault_server.py --port 8765 --rate 0.2 --kinds 429,500,null_content

Answers are deterministic: a function of the request body (messages + sampling), so the same request
always gets the same answer and a re-run can be compared with the first. Whether a request gets a fault
is decided by (seed, body, how many times this body was seen), so a retry of a faulted request draws
again and the whole sequence is reproducible regardless of arrival order.

Faults: ``429`` (with Retry-After), ``500``, ``503``, ``hang`` (holds the connection past the client's
timeout, then drops it), ``truncated_json`` (a 200 whose JSON body is cut), ``empty_choices``,
``null_content``; on request only (not drawn by default): ``no_usage`` (a 200 without ``usage``).
The server is bounded: it stops by itself after ``max_seconds`` or ``max_requests``.

``billing=OpenAIBilling()`` makes it bill like OpenAI's chat-completions API documents: the requested model resolves
to a dated snapshot (``model`` in the reply, with a ``system_fingerprint`` and ``service_tier``), an unknown model is
a 404 ``model_not_found``, a reasoning model refuses ``max_tokens``/``temperature``/``top_p`` with a 400
``unsupported_parameter`` and spends reasoning tokens, prompts of >= 1,024 tokens whose prefix was seen before are
cached in 128-token steps (``prompt_tokens_details.cached_tokens``). The double keeps its own bill (``bill_usd``,
one line per billed reply) from its own price list, independent of the harness's table.

Stdlib only (asyncio streams, HTTP/1.1 keep-alive), so it runs wherever the tests run.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from typing import Any
from collections.abc import Callable

FAULTS = ("429", "500", "503", "hang", "truncated_json", "empty_choices", "null_content")
ON_REQUEST_FAULTS = ("no_usage",)  # never drawn unless named in kinds (keeps the seeded sequences of FAULTS)


class OpenAIBilling:
    """OpenAI's documented billing, as a double: snapshots, errors, prompt caching, reasoning tokens, its own bill.

    Tokens are the double's own count (whitespace words of ``role: content`` per message plus 3 per message): the
    harness never counts, it reads ``usage``. Prices (USD per 1M: input, cached input, output; batch halves all)
    are this class's own list, so a harness that prices from its table is checked against an independent bill.
    """

    SNAPSHOTS = {"gpt-4o-mini": "gpt-4o-mini-2024-07-18", "gpt-4o-mini-2024-07-18": "gpt-4o-mini-2024-07-18",
                 "o4-mini": "o4-mini-2025-04-16", "o4-mini-2025-04-16": "o4-mini-2025-04-16"}
    PRICES = {"gpt-4o-mini-2024-07-18": (0.15, 0.075, 0.60), "o4-mini-2025-04-16": (1.10, 0.275, 4.40)}
    REASONING = ("o4-mini-2025-04-16",)

    def __init__(self, *, snapshots: dict[str, str] | None = None, prices: dict[str, tuple[float, float, float]] | None = None,
                 fingerprint: str | None = None) -> None:
        self.snapshots = {**self.SNAPSHOTS, **(snapshots or {})}
        self.prices = {**self.PRICES, **(prices or {})}
        self.fingerprint = fingerprint
        self.prefixes: set[tuple[str, str]] = set()  # (snapshot, hash of a 1024 + 128k token prefix) seen
        self.bill_usd = 0.0
        self.lines: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # every body received (for checks of what was sent)

    @staticmethod
    def tokens(messages: list[dict[str, Any]]) -> list[str]:
        out: list[str] = []
        for m in messages:
            out += [f"<{m.get('role')}>", *str(m.get("content", "")).split(), "<end>", "<sep>"]
        return out

    def reject(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """OpenAI's 4xx for a request it refuses (error body as documented: message, type, param, code)."""
        self.requests.append(body)
        model = str(body.get("model"))
        snap = self.snapshots.get(model)
        if snap is None:
            return 404, {"error": {"message": f"The model `{model}` does not exist or you do not have access to it.",
                                   "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
        if snap in self.REASONING:
            if "max_tokens" in body:
                return 400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this "
                                                  "model. Use 'max_completion_tokens' instead.",
                                       "type": "invalid_request_error", "param": "max_tokens",
                                       "code": "unsupported_parameter"}}
            for key in ("temperature", "top_p"):
                if key in body and body[key] != 1:
                    return 400, {"error": {"message": f"Unsupported value: '{key}' does not support {body[key]} with "
                                                      "this model. Only the default (1) value is supported.",
                                           "type": "invalid_request_error", "param": key, "code": "unsupported_value"}}
        return None

    def usage(self, body: dict[str, Any], texts: list[str]) -> tuple[str, dict[str, Any]]:
        """(snapshot, usage) of an answered request; the prefix cache learns the prompt after it is priced."""
        snap = self.snapshots[str(body.get("model"))]
        toks = self.tokens(body.get("messages") or [])
        cached = 0
        steps = [k for k in range(1024, len(toks) + 1, 128)]
        digests = {k: hashlib.sha256(" ".join(toks[:k]).encode()).hexdigest() for k in steps}
        for k in steps:
            if (snap, digests[k]) in self.prefixes:
                cached = k
        visible = sum(len(t.split()) for t in texts)
        reasoning = (64 + len(toks) % 100) * len(texts) if snap in self.REASONING else 0
        usage = {"prompt_tokens": len(toks), "completion_tokens": visible + reasoning,
                 "total_tokens": len(toks) + visible + reasoning,
                 "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                 "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                               "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
        return snap, usage

    def learn(self, snap: str, body: dict[str, Any]) -> None:
        toks = self.tokens(body.get("messages") or [])
        for k in range(1024, len(toks) + 1, 128):
            self.prefixes.add((snap, hashlib.sha256(" ".join(toks[:k]).encode()).hexdigest()))

    def charge(self, snap: str, usage: dict[str, Any], tier: str = "default") -> float:
        inp, cached_in, out = self.prices[snap]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        usd = ((usage["prompt_tokens"] - cached) * inp + cached * cached_in + usage["completion_tokens"] * out) / 1e6
        if tier in ("batch", "flex"):
            usd *= 0.5
        self.bill_usd += usd
        self.lines.append({"model": snap, "usage": usage, "usd": usd, "tier": tier})
        return usd

    def fingerprint_of(self, snap: str) -> str:
        return self.fingerprint or "fp_" + hashlib.sha256(snap.encode()).hexdigest()[:10]


def default_answer(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """'What is i+i?' → the right sum when the sample seed is even, else a wrong one; other prompts → a
    GSM8K-style boxed number derived from the body. Deterministic in the body."""
    text = str(messages[-1].get("content", "")) if messages else ""
    m = re.search(r"What is (\d+)\+(\d+)", text)
    seed = int(body.get("seed") or 0)
    if m:
        total = int(m.group(1)) + int(m.group(2))
        return f"thinking... ANSWER: {total if seed % 3 else total + 1}"
    digest = int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8], 16)
    return f"Step by step, the answer is \\boxed{{{digest % 7}}}."


class FaultServer:
    """Serve ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1 with seeded faults.

    Counters (thread-safe enough for tests: written on the server's loop, read after): ``received``,
    ``answered`` (200 with a good body), ``faults`` (Counter by kind), ``in_flight``, ``bodies`` (body hash →
    answers sent), ``log`` (one (time, body hash, outcome) per request).
    """

    def __init__(self, *, rate: float = 0.0, seed: int = 0, kinds: tuple[str, ...] = FAULTS, delay_s: float = 0.0,
                 retry_after_s: float = 0.2, hang_s: float = 3.0, max_seconds: float = 300.0,
                 max_requests: int = 20_000, answer: Callable[[list[dict[str, Any]], dict[str, Any]], str] = default_answer,
                 port: int = 0, fail_all: str | None = None, billing: OpenAIBilling | None = None) -> None:
        unknown = set(kinds) - set(FAULTS) - set(ON_REQUEST_FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULTS + ON_REQUEST_FAULTS}")
        self.billing = billing
        self.rate, self.seed, self.kinds = rate, seed, tuple(kinds)
        self.delay_s, self.retry_after_s, self.hang_s = delay_s, retry_after_s, hang_s
        self.max_seconds, self.max_requests = max_seconds, max_requests
        self.answer = answer
        self.fail_all = fail_all  # every request gets this fault (a dead or broken server)
        self.port = port
        self.received = 0
        self.answered = 0
        self.in_flight = 0
        self.faults: Counter[str] = Counter()
        self.seen: Counter[str] = Counter()
        self.bodies: Counter[str] = Counter()
        self.log: list[tuple[float, str, str]] = []
        self.last_headers: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FaultServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fault-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start")

    def stop(self) -> None:
        if self._loop is not None and not self._stopped.is_set():
            self._loop.call_soon_threadsafe(self._shutdown)
        if self._thread is not None:
            self._thread.join(10)

    def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in asyncio.all_tasks(self._loop):
            if task is not asyncio.current_task(self._loop):
                task.cancel()
        self._stopped.set()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        deadline = time.monotonic() + self.max_seconds
        try:
            while not self._stopped.is_set() and time.monotonic() < deadline and self.received < self.max_requests:
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
        self._server.close()
        self._stopped.set()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    # ---- HTTP ---------------------------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ") + ["", ""])[:3]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                self.last_headers = headers  # the request's headers, for a double that checks its API's key header
                keep = await self._handle(method, path, body, writer)
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the peer may be gone
                pass

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, payload: bytes, extra: dict[str, str] | None = None,
                    content_length: int | None = None) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
        head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                f"Content-Length: {len(payload) if content_length is None else content_length}"]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()

    def _decide(self, key: str) -> str | None:
        if self.fail_all:
            return self.fail_all
        self.seen[key] += 1
        draw = random.Random(f"{self.seed}:{key}:{self.seen[key]}")
        if draw.random() < self.rate:
            return draw.choice(self.kinds)
        return None

    async def _handle(self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter) -> bool:
        if path.rstrip("/").endswith("/models"):
            await self._send(writer, 200, json.dumps({"object": "list", "data": [{"id": "fault-model"}]}).encode())
            return True
        if not path.rstrip("/").endswith("/chat/completions") or method != "POST":
            await self._send(writer, 404, b'{"error": {"message": "not found"}}')
            return True
        self.received += 1
        self.in_flight += 1
        try:
            body = json.loads(raw or b"{}")
            key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
            refused = self.billing.reject(body) if self.billing is not None else None
            if refused is not None:  # a request the provider refuses is not billed
                self.log.append((time.time(), key, f"http_{refused[0]}"))
                await self._send(writer, refused[0], json.dumps(refused[1]).encode())
                return True
            fault = self._decide(key)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.log.append((time.time(), key, fault or "ok"))
            if fault is not None:
                self.faults[fault] += 1
            if fault == "hang":
                await asyncio.sleep(self.hang_s)
                return False  # drop the connection without a reply
            if fault in ("429", "500", "503"):
                extra = {"Retry-After": f"{self.retry_after_s:g}"} if fault == "429" else {}
                await self._send(writer, int(fault), json.dumps({"error": {"message": f"injected {fault}"}}).encode(),
                                 extra)
                return True
            reply = self._reply(body)
            if fault == "empty_choices":
                reply["choices"] = []
            elif fault == "null_content":
                reply["choices"][0]["message"]["content"] = None
            if self.billing is not None:  # every reply generated is billed (null content too), as the provider does
                self.billing.charge(reply["model"], reply["usage"], reply["service_tier"])
                self.billing.learn(reply["model"], body)
            if fault == "no_usage":
                reply.pop("usage")
            payload = json.dumps(reply).encode()
            if fault == "truncated_json":
                await self._send(writer, 200, payload[: len(payload) // 2])
                return True
            await self._send(writer, 200, payload)
            self.answered += 1
            self.bodies[key] += 1
            return True
        finally:
            self.in_flight -= 1

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        n = int(body.get("n") or 1)
        texts = [self.answer(messages, {**body, "seed": (body.get("seed") or 0) + i}) for i in range(n)]
        choices = [{"index": i, "finish_reason": "stop", "logprobs": None,
                    "message": {"role": "assistant", "content": t, "refusal": None}} for i, t in enumerate(texts)]
        if self.billing is not None:
            snap, usage = self.billing.usage(body, texts)
            return {"id": f"chatcmpl-{self.received}", "object": "chat.completion", "created": int(time.time()),
                    "model": snap, "choices": choices, "usage": usage,
                    "service_tier": "flex" if body.get("service_tier") == "flex" else "default",
                    "system_fingerprint": self.billing.fingerprint_of(snap)}
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        completion = sum(len(t.split()) for t in texts)
        return {"id": "chatcmpl-fault", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "fault-model"),
                "choices": [{"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": t}}
                            for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                          "total_tokens": prompt_tokens + completion}}


def backbone_config(url: str, **overrides: Any) -> dict[str, Any]:
    """A harness backbone config (kind openai) pointed at a fault server, with test-sized retry timings."""
    cfg = {"name": "fault", "kind": "openai", "model": "fault-model", "base_url": url, "api_key_env": None,
           "price": {"input_per_1m": 1.0, "output_per_1m": 2.0}, "params": None, "max_concurrency": 8,
           "supports_n": False, "sampling": {},
           "retry": {"max_attempts": 8, "base_delay_s": 0.01, "max_delay_s": 0.1, "timeout_s": 1.0}}
    cfg.update(overrides)
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(FAULTS))
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args()
    srv = FaultServer(rate=args.rate, seed=args.seed, kinds=tuple(args.kinds.split(",")), delay_s=args.delay,
                      max_seconds=args.max_seconds, port=args.port)
    srv.start()
    srv._thread.join()  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
