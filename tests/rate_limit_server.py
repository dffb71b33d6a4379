"""A loopback OpenAI-compatible chat server that enforces an RPM and a TPM limit the way OpenAI does (a test double).

    with RateLimitedServer(rpm=600, tpm=20_000, window_s=2.0) as srv:   # in-process, on a thread
        url = srv.url
    python tests/rate_limit_server.py --port 8765 --rpm 3000 --tpm 200000 --window 10   # its own process

Limits are per fixed window (``window_s``; 60 s is OpenAI's minute, tests and benches use seconds) and reset at
its end. A request is counted when it arrives: one request, and with ``charge="reserved"`` (the default) its
prompt's tokens plus ``n x max_tokens`` (the completion the provider reserves; without ``max_tokens``, the completion
it writes); with ``charge="actual"`` it is admitted under OpenAI's documented rule (the larger of the prompt and
``n x max_tokens`` must fit in what is left) but deducts only what the reply uses (prompt + completion tokens).
``answer_words=(lo, hi)`` pads each choice to a length drawn from the body in that range (a chain of thought), so
the completion is a real share of the bill. A request that would exceed either limit gets a 429 with ``Retry-After`` (whole seconds), ``retry-after-ms`` and the headers below,
and is not counted. Every reply carries ``x-ratelimit-limit/remaining/reset-{requests,tokens}`` computed when it
is sent (resets in OpenAI's format: ``1m2.5s``, ``850ms``). The latency grows with load: ``base_latency_s +
latency_per_request_s x requests in flight``. Prompt tokens are words and punctuation (+4 per message, +3),
which is not what a client's chars/4 estimate says: the reply's ``usage`` is the truth.

``GET /v1/stats`` returns the counters, ``POST /v1/control`` with ``{"rpm": .., "tpm": ..}`` changes the limits
(from the next window on, like a provider's tier change) and ``{"reset": true}`` restarts the windows and
counters (with the limits given, at once). Stdlib only, on tests/fault_server.py's HTTP plumbing; bounded by ``max_seconds``/``max_requests``.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault_server import FaultServer

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return 3 + sum(4 + count_tokens(str(m.get("content") or "")) for m in messages)


def go_duration(seconds: float) -> str:
    """OpenAI's reset format: ``20ms``, ``1s``, ``6m0s``, ``1m2.5s``."""
    if seconds < 1:
        return f"{max(0, int(round(seconds * 1000)))}ms"
    minutes, rest = divmod(seconds, 60.0)
    secs = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{secs}s" if minutes else f"{secs}s"


class RateLimitedServer(FaultServer):
    """Counters: ``received``, ``answered``, ``rejected`` (429s), ``windows`` (window index -> Counter of admitted
    ``requests``/``tokens`` and ``rejected``), ``by_client`` (the request's ``user`` field -> admitted tokens; per window too, as ``tokens@<user>``)."""

    def __init__(self, *, rpm: int, tpm: int, window_s: float = 60.0, base_latency_s: float = 0.2,
                 latency_per_request_s: float = 0.005, completion_tokens: int = 40, charge: str = "reserved",
                 answer_words: tuple[int, int] | None = None, **kw: Any) -> None:
        if charge not in ("reserved", "actual"):
            raise ValueError(f"charge={charge!r}: reserved or actual")
        self.charge_rule = charge
        if answer_words is not None:
            kw.setdefault("answer", _padded(*answer_words))
        super().__init__(**kw)
        self.rpm, self.tpm, self.window_s = int(rpm), int(tpm), float(window_s)
        self.base_latency_s, self.latency_per_request_s = base_latency_s, latency_per_request_s
        self.completion_tokens = completion_tokens
        self._pending: tuple[int, int] | None = None
        self.reset()

    def reset(self) -> None:
        self.t0 = time.monotonic()
        self.received = self.answered = self.rejected = 0
        self.windows: dict[int, Counter[str]] = {}
        self.limits_by_window: dict[int, tuple[int, int]] = {}
        self.by_client: Counter[str] = Counter()
        self._window = 0
        self._used = Counter()

    # ---- windows ------------------------------------------------------------------------------------------
    def _roll(self) -> tuple[int, float]:
        """(current window index, seconds until it resets); applies a pending limit change at a boundary."""
        now = time.monotonic()
        w = int((now - self.t0) // self.window_s)
        if w != self._window:
            self._window, self._used = w, Counter()
            if self._pending is not None:
                self.rpm, self.tpm = self._pending
                self._pending = None
        self.limits_by_window.setdefault(w, (self.rpm, self.tpm))
        return w, self.t0 + (w + 1) * self.window_s - now

    def headers(self) -> dict[str, str]:
        _, reset = self._roll()
        return {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-limit-tokens": str(self.tpm),
                "x-ratelimit-remaining-requests": str(max(0, self.rpm - self._used["requests"])),
                "x-ratelimit-remaining-tokens": str(max(0, self.tpm - self._used["tokens"])),
                "x-ratelimit-reset-requests": go_duration(reset), "x-ratelimit-reset-tokens": go_duration(reset)}

    def charge(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, tokens the admission check needs left)."""
        prompt = prompt_tokens(body.get("messages") or [])
        n = int(body.get("n") or 1)
        mt = body.get("max_tokens")
        if self.charge_rule == "actual":
            return prompt, max(prompt, n * int(mt)) if mt else prompt + n * self.completion_tokens
        return prompt, prompt + n * (int(mt) if mt else self.completion_tokens)

    # ---- HTTP ---------------------------------------------------------------------------------------------
    async def _handle(self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter) -> bool:
        route = path.rstrip("/")
        if route.endswith("/stats"):
            await self._send(writer, 200, json.dumps(self.stats()).encode())
            return True
        if route.endswith("/control") and method == "POST":
            ctl = json.loads(raw or b"{}")
            limits = (int(ctl.get("rpm", self.rpm)), int(ctl.get("tpm", self.tpm)))
            if ctl.get("reset"):  # a fresh start: the limits given apply at once
                self.reset()
                self.rpm, self.tpm = limits
            elif "rpm" in ctl or "tpm" in ctl:
                self._pending = limits
            await self._send(writer, 200, b"{}")
            return True
        if not route.endswith("/chat/completions") or method != "POST":
            return await super()._handle(method, path, raw, writer)
        self.received += 1
        body = json.loads(raw or b"{}")
        prompt, cost = self.charge(body)
        w, reset = self._roll()
        win = self.windows.setdefault(w, Counter())
        if self._used["requests"] + 1 > self.rpm or self._used["tokens"] + cost > self.tpm:
            self.rejected += 1
            win["rejected"] += 1
            extra = {"Retry-After": str(max(1, math.ceil(reset))), "retry-after-ms": str(int(reset * 1000) + 1),
                     **self.headers()}
            await self._send(writer, 429, json.dumps({"error": {"message": "Rate limit reached (tokens per min)",
                                                                "type": "tokens", "code": "rate_limit_exceeded"}}
                                                     ).encode(), extra)
            return True
        reply = self._reply(body)
        if self.charge_rule == "actual":  # the reply is known on arrival here: deduct what it uses
            cost = prompt + reply["usage"]["completion_tokens"]
        self._used["requests"] += 1
        self._used["tokens"] += cost
        win["requests"] += 1
        win["tokens"] += cost
        client = str(body.get("user") or "")
        self.by_client[client] += cost
        win[f"tokens@{client}"] += cost
        self.in_flight += 1
        try:
            await asyncio.sleep(self.base_latency_s + self.latency_per_request_s * self.in_flight)
        finally:
            self.in_flight -= 1
        reply["usage"]["prompt_tokens"] = prompt
        reply["usage"]["total_tokens"] = prompt + reply["usage"]["completion_tokens"]
        await self._send(writer, 200, json.dumps(reply).encode(), self.headers())
        self.answered += 1
        return True

    def stats(self) -> dict[str, Any]:
        return {"received": self.received, "answered": self.answered, "rejected": self.rejected,
                "rpm": self.rpm, "tpm": self.tpm, "window_s": self.window_s, "window": self._roll()[0],
                "windows": {str(w): dict(c) for w, c in sorted(self.windows.items())},
                "limits_by_window": {str(w): list(v) for w, v in sorted(self.limits_by_window.items())},
                "by_client": dict(self.by_client)}


def _padded(lo: int, hi: int) -> Any:
    """An answer function: the fault server's answer padded to lo..hi words, the length drawn from the body."""
    from tests.fault_server import default_answer

    def answer(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        text = default_answer(messages, body)
        digest = int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8], 16)
        words = lo + digest % (hi - lo + 1)
        return " ".join(["step"] * max(0, words - len(text.split()))) + " " + text
    return answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rpm", type=int, required=True)
    ap.add_argument("--tpm", type=int, required=True)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--base-latency", type=float, default=0.2)
    ap.add_argument("--latency-per-request", type=float, default=0.005)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--charge", default="reserved", choices=("reserved", "actual"))
    ap.add_argument("--answer-words", default=None, help="lo-hi: pad each choice to that many words")
    args = ap.parse_args()
    words = tuple(int(x) for x in args.answer_words.split("-")) if args.answer_words else None
    srv = RateLimitedServer(rpm=args.rpm, tpm=args.tpm, window_s=args.window, base_latency_s=args.base_latency,
                            charge=args.charge, answer_words=words,  # type: ignore[arg-type]
                            latency_per_request_s=args.latency_per_request, max_seconds=args.max_seconds,
                            max_requests=10_000_000, port=args.port)
    srv.start()
    srv._thread.join()  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
