"""Backbones: one async client for every OpenAI-compatible endpoint, plus vLLM in-process.

A backbone only turns (messages, sampling) into completions and reports
retries; caching, cost and attribution live in :mod:`harness.llm`.
"""
from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from harness.ledger import Price
from harness.types import Completion, Message

# Sampling parameters a method may set per call; everything here is part of the cache key.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed", "logprobs", "top_logprobs")


class BackboneError(RuntimeError):
    """A backbone call failed for good (after its retries) or cannot start."""


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    timeout_s: float = 600.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Exponential backoff with full jitter; a server's Retry-After wins when longer."""
        backoff = min(self.max_delay_s, self.base_delay_s * (2 ** attempt))
        wait = rng.uniform(0.5 * backoff, backoff)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay_s * 5))
        return wait


@dataclass
class BackboneResult:
    completions: list[Completion]
    retries: int
    latency_s: float
    retry_log: list[str] = field(default_factory=list)


class Backbone(Protocol):
    name: str
    model: str
    price: Price
    params: float | None
    max_concurrency: int
    supports_n: bool

    def identity(self) -> dict[str, Any]: ...

    def cache_identity(self) -> dict[str, Any]: ...

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int) -> BackboneResult: ...

    async def aclose(self) -> None: ...


def _retry_after_seconds(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _is_retryable(exc: Exception) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                        asyncio.TimeoutError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500 or exc.status_code == 408
    return False


class OpenAICompatibleBackbone:
    """OpenAI, a vLLM server, or the embedded llama.cpp server, through AsyncOpenAI."""

    def __init__(self, *, name: str, model: str, base_url: str | None, api_key: str,
                 price: Price, params: float | None = None, max_concurrency: int = 8,
                 supports_n: bool = True, retry: RetryPolicy | None = None,
                 extra_identity: dict[str, Any] | None = None, extra_body: dict[str, Any] | None = None,
                 cache_identity: dict[str, Any] | None = None, seed: int = 0) -> None:
        from openai import AsyncOpenAI

        self.name = name
        self.model = model
        self.base_url = base_url
        self.price = price
        self.params = params
        self.max_concurrency = max_concurrency
        self.supports_n = supports_n
        self.retry = retry or RetryPolicy()
        self.extra_body = extra_body or {}
        self._extra_identity = extra_identity or {}
        self._cache_identity = cache_identity if cache_identity is not None else {"base_url": base_url}
        self._rng = random.Random(seed)
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                   timeout=self.retry.timeout_s)

    def identity(self) -> dict[str, Any]:
        """Everything known about the model, for meta.json."""
        return {"kind": "openai-compatible", "model": self.model, **self._extra_identity}

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this model's outputs (not a port or a key), for cache keys."""
        return {"model": self.model, **self._cache_identity}

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int) -> BackboneResult:
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                **{k: v for k, v in sampling.items() if v is not None}}
        if n > 1:
            body["n"] = n
        if body.get("logprobs") is False:
            body.pop("logprobs")
            body.pop("top_logprobs", None)
        body.update(self.extra_body)
        retries, log = 0, []
        start = time.perf_counter()
        while True:
            try:
                # The client's post() keeps its auth, base URL, timeouts and error classes but skips the
                # typed request transform and pydantic response parsing (~2 ms of CPU per call, which
                # caps throughput at high concurrency): the JSON is read directly below.
                raw = await self._client.post("/chat/completions", body=body, cast_to=httpx.Response)
                resp = raw.json()
                break
            except Exception as exc:  # noqa: BLE001 - classified below
                if not _is_retryable(exc) or retries + 1 >= self.retry.max_attempts:
                    raise BackboneError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
                wait = self.retry.delay(retries, _retry_after_seconds(exc), self._rng)
                log.append(f"{type(exc).__name__}: retry in {wait:.2f}s")
                retries += 1
                await asyncio.sleep(wait)
        latency = time.perf_counter() - start
        usage = resp.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_total = int(usage.get("completion_tokens") or 0)
        choices = sorted(resp.get("choices") or [], key=lambda c: c.get("index", 0))
        if not choices:
            raise BackboneError(f"{self.name}: the response has no choices: {str(resp)[:300]}")
        comps = []
        for i, ch in enumerate(choices):
            lp = None
            content_lp = (ch.get("logprobs") or {}).get("content")
            if content_lp:
                lp = [{"token": t.get("token"), "logprob": t.get("logprob")} for t in content_lp]
            # Usage is reported per request: the prompt is charged once, completions split evenly.
            share = completion_total // len(choices) + (1 if i < completion_total % len(choices) else 0)
            message = ch.get("message") or {}
            comps.append(Completion(text=message.get("content") or "", prompt_tokens=prompt_tokens if i == 0 else 0,
                                    completion_tokens=share, finish_reason=ch.get("finish_reason"), logprobs=lp))
        return BackboneResult(comps, retries, latency, log)

    async def aclose(self) -> None:
        await self._client.close()


class VLLMInProcessBackbone:
    """``vllm.LLM`` in this process, for GPU users who do not want a server."""

    supports_n = True

    def __init__(self, *, name: str, model: str, price: Price, params: float | None = None,
                 max_concurrency: int = 64, engine_args: dict[str, Any] | None = None) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise BackboneError(
                "backbone=vllm-inprocess needs vLLM and a GPU: install the `gpu` extra "
                "(`pip install -e .[gpu]`), or use backbone=vllm with a running `vllm serve` URL") from exc
        from vllm import LLM

        self.name, self.model, self.price, self.params = name, model, price, params
        self.max_concurrency = max_concurrency
        self._llm = LLM(model=model, **(engine_args or {}))
        self._lock = asyncio.Lock()

    def identity(self) -> dict[str, Any]:
        return {"kind": "vllm-inprocess", "model": self.model}

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int) -> BackboneResult:
        from vllm import SamplingParams

        sp = SamplingParams(n=n, temperature=sampling.get("temperature") or 0.0,
                            top_p=sampling.get("top_p") or 1.0, max_tokens=sampling.get("max_tokens"),
                            stop=sampling.get("stop"), seed=sampling.get("seed"),
                            logprobs=sampling.get("top_logprobs") if sampling.get("logprobs") else None)
        start = time.perf_counter()
        async with self._lock:
            out = await asyncio.to_thread(self._llm.chat, messages, sp, use_tqdm=False)
        req = out[0]
        comps = [Completion(text=o.text, prompt_tokens=len(req.prompt_token_ids) if i == 0 else 0,
                            completion_tokens=len(o.token_ids), finish_reason=o.finish_reason)
                 for i, o in enumerate(req.outputs)]
        return BackboneResult(comps, 0, time.perf_counter() - start)

    async def aclose(self) -> None:
        return None


def api_key_from_env(var: str | None, backbone_name: str) -> str:
    """Read the key named by the config; fail before any work starts when it is missing."""
    if not var:
        return "not-needed"
    value = os.environ.get(var)
    if not value:
        raise BackboneError(
            f"backbone '{backbone_name}' needs the environment variable {var}: "
            f"`export {var}=...` (or pick backbone=local, which needs no key)")
    return value
