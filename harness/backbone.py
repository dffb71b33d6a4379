"""Backbones: one async client for every OpenAI-compatible endpoint, plus vLLM in-process.

A backbone only turns (messages, sampling) into completions and reports
retries; caching, cost and attribution live in :mod:`agentic_repro.harness.llm`.
"""
from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from agentic_repro.harness.ledger import Price
from agentic_repro.harness.pricing import MissingUsage, Usage, family_settings
from agentic_repro.harness.types import Completion, Message

# Sampling parameters a method may set per call; everything here is part of the cache key.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed", "logprobs", "top_logprobs")


class BackboneError(RuntimeError):
    """A backbone call failed for good (after its retries) or cannot start.

    ``kind`` names the failure ("connection", "timeout", "http_429", "http_5xx", "http_4xx", "null_content",
    "empty_content", "bad_json", "empty_choices", "error_body", "unknown_adapter", "config", ...),
    ``attempts`` how many requests were sent (0 when it failed before any), ``retry_log`` one line per retry.
    """

    def __init__(self, message: str, *, kind: str = "error", attempts: int = 1,
                 retry_log: list[str] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.retry_log = list(retry_log or [])

    @property
    def retryable(self) -> bool:
        """Whether the same request could succeed later (an infrastructure fault, not a bad request)."""
        return self.kind in RETRYABLE_KINDS


#: Failures retried within a call like a 5xx: the server or the network misbehaved, the request was fine.
#: (``no_usage`` is not among them: a paid reply without usage cannot be priced, and asking again is charged again.)
RETRYABLE_KINDS = frozenset({"connection", "timeout", "http_429", "http_5xx", "http_408", "null_content",
                             "empty_content", "bad_json", "empty_choices", "error_body"})


class BadResponse(Exception):
    """A 200 reply that is not a usable completion (null/empty content, no choices, broken JSON, no usage)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass(frozen=True)
class Answered:
    """A reply the provider answered (and billed) that gave no completion: a 200 retried for null content, say.
    It is on the bill (:mod:`agentic_repro.harness.llm` prices it with the request's record)."""

    usage: Usage
    served_model: str | None = None
    service_tier: str | None = None

    @classmethod
    def of(cls, resp: Any) -> Answered | None:
        """The billed part of a rejected 200 reply, when it says what it used."""
        if not isinstance(resp, dict):
            return None
        try:
            usage = Usage.from_openai(resp.get("usage"))
        except MissingUsage:
            return None
        return cls(usage, resp.get("model"), resp.get("service_tier"))


def check_response(resp: Any) -> list[dict[str, Any]]:
    """The reply's choices in index order, or :class:`BadResponse` when it is an infrastructure failure.

    A choice with ``content: null``, or ``""`` with a finish_reason other than stop/length, is never an
    answer: caching or scoring it would turn a server fault into a silent wrong result.
    """
    if not isinstance(resp, dict):
        raise BadResponse("bad_json", f"the reply is not a JSON object: {str(resp)[:200]}")
    if resp.get("error"):
        raise BadResponse("error_body", f"the reply carries an error: {str(resp['error'])[:200]}")
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadResponse("empty_choices", f"the reply has no choices: {str(resp)[:200]}")
    choices = sorted(choices, key=lambda c: (c or {}).get("index", 0) if isinstance(c, dict) else 0)
    for ch in choices:
        if not isinstance(ch, dict) or not isinstance(ch.get("message"), dict):
            raise BadResponse("empty_choices", f"a choice has no message: {str(ch)[:200]}")
        content = ch["message"].get("content")
        finish = ch.get("finish_reason")
        if content is None:
            raise BadResponse("null_content", f"content is null (finish_reason={finish!r})")
        if not isinstance(content, str):
            raise BadResponse("bad_json", f"content is a {type(content).__name__}, not a string")
        if content == "" and finish not in ("stop", "length"):
            raise BadResponse("empty_content", f"content is empty with finish_reason={finish!r}")
    return choices


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    timeout_s: float = 120.0  # per attempt; every shipped config states its own

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
    limiter_wait_s: float = 0.0  # time spent waiting on the rate controller (harness.rate_limit)
    answered: list[Answered] = field(default_factory=list)  # billed replies that were retried (on the bill too)


class Backbone(Protocol):
    name: str
    model: str
    price: Price
    params: float | None
    max_concurrency: int
    supports_n: bool
    adapters: dict[str, dict[str, Any]]

    def identity(self) -> dict[str, Any]: ...

    def cache_identity(self) -> dict[str, Any]: ...

    def adapter_identity(self, name: str) -> dict[str, Any]: ...

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int, *,
                       adapter: str | None = None) -> BackboneResult: ...

    async def aclose(self) -> None: ...


def check_adapter(backbone_name: str, adapters: dict[str, dict[str, Any]], name: str | None) -> None:
    """Refuse an adapter the backbone does not carry, before any request is sent."""
    if name is not None and name not in adapters:
        known = ", ".join(sorted(adapters)) or "none"
        raise BackboneError(
            f"{backbone_name}: unknown adapter {name!r} (this backbone carries: {known}); add it under "
            f"`adapters:` in its config", kind="unknown_adapter", attempts=0)


def _error_headers(exc: Exception) -> Any:
    return getattr(getattr(exc, "response", None), "headers", None)


def _retry_after_seconds(exc: Exception) -> float | None:
    from agentic_repro.harness.rate_limit import retry_after_seconds

    return retry_after_seconds(_error_headers(exc))


def classify(exc: Exception) -> str:
    """The failure kind of an exception raised while sending one request."""
    import openai

    if isinstance(exc, BadResponse):
        return exc.kind
    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError, httpx.TimeoutException)):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        if code == 429:
            return "http_429"
        if code == 408:
            return "http_408"
        return "http_5xx" if code >= 500 else "http_4xx"
    if isinstance(exc, ValueError):  # json.JSONDecodeError: a truncated or garbled body
        return "bad_json"
    return "error"


def _is_retryable(exc: Exception) -> bool:
    return classify(exc) in RETRYABLE_KINDS


class OpenAICompatibleBackbone:
    """OpenAI, a vLLM server, or the embedded llama.cpp server, through AsyncOpenAI.

    Adapters (vLLM ``--enable-lora --lora-modules name=path``): a call with ``adapter="x"`` sends
    ``model: "x"``, which is how vLLM selects a LoRA per request. ``max_n`` (None = unbounded) splits
    a request for more choices than the server allows into several, with consecutive seeds.
    """

    def __init__(self, *, name: str, model: str, base_url: str | None, api_key: str,
                 price: Price, params: float | None = None, max_concurrency: int = 8,
                 supports_n: bool = True, retry: RetryPolicy | None = None,
                 extra_identity: dict[str, Any] | None = None, extra_body: dict[str, Any] | None = None,
                 cache_identity: dict[str, Any] | None = None, seed: int = 0,
                 adapters: dict[str, dict[str, Any]] | None = None, max_n: int | None = None,
                 http_library: str = "auto", rate_limit: Any = None, reasoning_effort: str | None = None,
                 service_tier: str | None = None) -> None:
        from openai import AsyncOpenAI

        from agentic_repro.harness.rate_limit import RateLimitSettings, controller_for

        self.name = name
        self.model = model
        self.base_url = base_url
        self.price = price
        self.params = params
        self.max_concurrency = max_concurrency
        self.supports_n = supports_n
        self.max_n = max_n
        self.retry = retry or RetryPolicy()
        self.extra_body = extra_body or {}
        self.adapters: dict[str, dict[str, Any]] = dict(adapters or {})
        # how a request is shaped comes from the model's API family in the price table (reasoning models take
        # max_completion_tokens and refuse temperature/top_p/stop), never from guessing at the model's name
        self.family = price.family
        fam = family_settings(self.family)
        self.max_tokens_field = str(fam.get("max_tokens_field") or "max_tokens")
        self.not_sent = tuple(fam.get("not_sent") or ())
        if reasoning_effort is not None and not fam.get("reasoning_effort"):
            raise BackboneError(f"{name}: reasoning_effort={reasoning_effort!r} is for reasoning models; {model} is "
                                f"of family {self.family!r} (configs/prices.yaml)", kind="config", attempts=0)
        self.reasoning_effort = reasoning_effort
        self.service_tier = service_tier
        shape = {k: v for k, v in (("reasoning_effort", reasoning_effort), ("service_tier", service_tier)) if v}
        self._extra_identity = {**(extra_identity or {}), **shape}
        if self.family != "chat":
            self._extra_identity.update(family=self.family, max_tokens_field=self.max_tokens_field,
                                        not_sent=list(self.not_sent))
        self._cache_identity = {**(cache_identity if cache_identity is not None else {"base_url": base_url}),
                                **({"reasoning_effort": reasoning_effort} if reasoning_effort else {})}
        self._rng = random.Random(seed)
        # mode fixed (the default here; API configs choose adaptive): no controller, max_concurrency per client
        self.rate_limit = rate_limit if rate_limit is not None else RateLimitSettings()
        self.rate_controller = controller_for(self.rate_limit, model=model, base_url=base_url, api_key=api_key)
        from agentic_repro.harness.transport import LeanPost, openai_http_client  # openai's auth and errors, not its per-request cost

        self._client = LeanPost(AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                            timeout=self.retry.timeout_s, http_client=openai_http_client()),
                                library=http_library)

    def identity(self) -> dict[str, Any]:
        """Everything known about the model, for meta.json."""
        from dataclasses import asdict

        out = {"kind": "openai-compatible", "model": self.model, "timeout_s": self.retry.timeout_s,
               "rate_limit": asdict(self.rate_limit), **self._extra_identity}
        if self.adapters:
            out["adapters"] = self.adapters
        return out

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this model's outputs (not a port or a key), for cache keys."""
        return {"model": self.model, **self._cache_identity}

    def adapter_identity(self, name: str) -> dict[str, Any]:
        """``{"name", "sha256", "base_model", "training_data_sha256", "path", ...}`` of a carried adapter."""
        check_adapter(self.name, self.adapters, name)
        return self.adapters[name]

    # -- request shape (subclasses add server-specific fields)
    def request_body(self, messages: list[Message], sampling: dict[str, Any], n: int,
                     adapter: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": adapter if adapter is not None else self.model, "messages": messages,
                                **{k: v for k, v in sampling.items() if v is not None}}
        if n > 1:
            body["n"] = n
        if body.get("logprobs") is False:
            body.pop("logprobs")
            body.pop("top_logprobs", None)
        for key in self.not_sent:  # recorded per call in the ledger (dropped_params) and in meta (not_sent)
            body.pop(key, None)
        if self.max_tokens_field != "max_tokens" and "max_tokens" in body:
            body[self.max_tokens_field] = body.pop("max_tokens")
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        if self.service_tier:
            body["service_tier"] = self.service_tier
        body.update(self.extra_body)
        return body

    async def complete(self, messages: list[Message], sampling: dict[str, Any], n: int, *,
                       adapter: str | None = None) -> BackboneResult:
        check_adapter(self.name, self.adapters, adapter)
        start = time.perf_counter()
        chunks = [n] if not self.max_n or n <= self.max_n else \
            [min(self.max_n, n - i) for i in range(0, n, self.max_n)]
        seed = sampling.get("seed")
        parts = []
        for j, size in enumerate(chunks):
            s = dict(sampling)
            if j and seed is not None:  # the server gives choice k of a request seed+k
                s["seed"] = int(seed) + sum(chunks[:j])
            parts.append(self._complete_one(messages, s, size, adapter))
        results = await asyncio.gather(*parts) if len(parts) > 1 else [await parts[0]]
        comps = [c for r in results for c in r.completions]
        log = [line for r in results for line in r.retry_log]
        return BackboneResult(comps, sum(r.retries for r in results), time.perf_counter() - start, log,
                              sum(r.limiter_wait_s for r in results), [a for r in results for a in r.answered])

    async def _complete_one(self, messages: list[Message], sampling: dict[str, Any], n: int,
                            adapter: str | None) -> BackboneResult:
        body = self.request_body(messages, sampling, n, adapter)
        retries, log, waited = 0, [], 0.0
        answered: list[Answered] = []  # 200 replies retried for their content: the provider billed each one
        resp: Any = None
        ctl = self.rate_controller
        start = time.perf_counter()
        while True:
            lease = None
            try:
                if ctl is not None:  # a slot and the charge of this attempt (harness.rate_limit)
                    lease = await ctl.acquire(messages, n, sampling.get("max_tokens"))
                    waited += lease.waited_s
                # The client's post() keeps its auth, base URL, timeouts and error classes but skips the
                # typed request transform and pydantic response parsing (~2 ms of CPU per call, which
                # caps throughput at high concurrency): the JSON is read directly below.
                resp = None
                raw = await self._client.post("/chat/completions", body=body, cast_to=httpx.Response)
                resp = raw.json()
                choices = check_response(resp)
                if not self.price.free:  # a paid reply without usage cannot be billed: an error, never $0
                    try:
                        Usage.from_openai(resp.get("usage"))
                    except MissingUsage as exc:
                        raise BadResponse("no_usage", str(exc)) from exc
                if lease is not None:
                    lease.done(raw.headers, resp.get("usage"))
                break
            except Exception as exc:  # classified below
                kind = classify(exc)
                if isinstance(exc, BadResponse) and kind != "no_usage":
                    billed = Answered.of(resp)
                    if billed is not None:
                        answered.append(billed)
                wait = self.retry.delay(retries, _retry_after_seconds(exc), self._rng)
                held = 0.0
                if lease is not None:
                    # a 429 holds every sender of the account (Retry-After, else this backoff); the next
                    # acquire waits for it, so this request does not sleep a second time
                    held = lease.failed(kind, _error_headers(exc), wait)
                    if held > 0:
                        wait = 0.0
                if kind not in RETRYABLE_KINDS or retries + 1 >= self.retry.max_attempts:
                    what = "gave up" if kind in RETRYABLE_KINDS else "not retryable"
                    err = BackboneError(
                        f"{self.name}: {type(exc).__name__}: {exc} ({what} after {retries + 1} attempt(s))",
                        kind=kind, attempts=retries + 1, retry_log=log)
                    err.limiter_wait_s = waited  # type: ignore[attr-defined]
                    err.answered = answered  # type: ignore[attr-defined]
                    raise err from exc
                log.append(f"{kind}: {type(exc).__name__}: {str(exc)[:120]}: " + (
                    f"retry in {wait:.2f}s" if held <= 0 else f"retry after the account's hold of {held:.2f}s"))
                retries += 1
                if wait > 0:
                    await asyncio.sleep(wait)
            finally:
                if lease is not None and lease.open:  # cancelled while in flight: free the slot
                    lease.failed("cancelled")
        latency = time.perf_counter() - start
        comps = await self.completions_from(resp, choices, sampling)
        return BackboneResult(comps, retries, latency, log, waited, answered)

    async def completions_from(self, resp: dict[str, Any], choices: list[dict[str, Any]],
                               sampling: dict[str, Any]) -> list[Completion]:
        """Usage is reported per request: the prompt (and its cached part) is charged once, on the first choice;
        completion and reasoning tokens are split evenly."""
        try:
            usage = Usage.from_openai(resp.get("usage"))
        except MissingUsage:  # a free backbone (the paid ones were checked on arrival)
            usage = Usage(0, 0)
        comps = []
        for i, ch in enumerate(choices):
            share = _split(usage, i, len(choices))
            comps.append(_completion(ch, share.prompt_tokens, share.completion_tokens, resp, share))
        return comps

    async def aclose(self) -> None:
        await self._client.close()


def _split(usage: Usage, i: int, n: int) -> Usage:
    """Choice ``i`` of ``n``'s share: every input class on the first choice, output classes split evenly."""
    def part(total: int) -> int:
        return total // n + (1 if i < total % n else 0)

    return Usage(usage.prompt_tokens if i == 0 else 0, part(usage.completion_tokens),
                 cached_tokens=usage.cached_tokens if i == 0 else 0,
                 cache_write_tokens=usage.cache_write_tokens if i == 0 else 0,
                 cache_write_1h_tokens=usage.cache_write_1h_tokens if i == 0 else 0,
                 reasoning_tokens=part(usage.reasoning_tokens),
                 audio_prompt_tokens=usage.audio_prompt_tokens if i == 0 else 0,
                 audio_completion_tokens=part(usage.audio_completion_tokens),
                 accepted_prediction_tokens=part(usage.accepted_prediction_tokens),
                 rejected_prediction_tokens=part(usage.rejected_prediction_tokens))


def _completion(ch: dict[str, Any], prompt_tokens: int, completion_tokens: int, resp: dict[str, Any] | None = None,
                usage: Usage | None = None) -> Completion:
    lp = None
    content_lp = (ch.get("logprobs") or {}).get("content")
    if content_lp:
        lp = [{"token": t.get("token"), "logprob": t.get("logprob")} for t in content_lp]
    resp = resp or {}
    return Completion(text=ch["message"]["content"], prompt_tokens=prompt_tokens,
                      completion_tokens=completion_tokens, finish_reason=ch.get("finish_reason"), logprobs=lp,
                      usage=None if usage is None else usage.to_dict(), served_model=resp.get("model"),
                      system_fingerprint=resp.get("system_fingerprint"), service_tier=resp.get("service_tier"))


class LlamaServerBackbone(OpenAICompatibleBackbone):
    """llama.cpp's ``llama-server``: per-request LoRA through the ``lora`` field, n > 1 counted per choice.

    Every request carries the **full** ``lora`` list (every loaded adapter; the chosen one at its scale,
    the others at 0): this llama.cpp applies every loaded adapter at scale 1.0 to a request with no
    ``lora`` field or ``lora: []``, so a "base" call must say scale 0 for each of them.
    ``lora_ids`` maps adapter name -> the server's adapter id (validated against ``GET /lora-adapters``).

    With ``n > 1`` the server's ``usage.completion_tokens`` counts only the first choice; the others are
    counted here: ``max_tokens`` for a choice cut at the limit (exact), else the re-tokenised content plus
    the end-of-generation token (``POST /tokenize``).
    """

    def __init__(self, *, server_url: str, lora_ids: dict[str, int] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.server_url = server_url.rstrip("/")
        self.lora_ids = dict(lora_ids or {})
        missing = set(self.adapters) - set(self.lora_ids)
        if missing:
            raise BackboneError(f"{self.name}: adapters {sorted(missing)} are not loaded by the server",
                                kind="unknown_adapter", attempts=0)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "kind": "llama-server"}

    def lora_field(self, adapter: str | None) -> list[dict[str, Any]]:
        out = []
        for name, i in sorted(self.lora_ids.items(), key=lambda kv: kv[1]):
            scale = float(self.adapters[name].get("scale", 1.0)) if name == adapter else 0.0
            out.append({"id": i, "scale": scale})
        return out

    def request_body(self, messages: list[Message], sampling: dict[str, Any], n: int,
                     adapter: str | None) -> dict[str, Any]:
        body = super().request_body(messages, sampling, n, None)  # the model stays the base
        if self.lora_ids:
            body["lora"] = self.lora_field(adapter)
        return body

    async def completions_from(self, resp: dict[str, Any], choices: list[dict[str, Any]],
                               sampling: dict[str, Any]) -> list[Completion]:
        usage = resp.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        first = int(usage.get("completion_tokens") or 0)
        comps = [_completion(choices[0], prompt_tokens, first)]
        for ch in choices[1:]:
            comps.append(_completion(ch, 0, await self._count_tokens(ch, sampling)))
        return comps

    async def _count_tokens(self, ch: dict[str, Any], sampling: dict[str, Any]) -> int:
        if ch.get("finish_reason") == "length" and sampling.get("max_tokens"):
            return int(sampling["max_tokens"])
        try:
            r = await self._client.post(f"{self.server_url}/tokenize",
                                        body={"content": ch["message"]["content"], "add_special": False},
                                        cast_to=httpx.Response)
            tokens = r.json().get("tokens")
        except Exception as exc:  # the completion arrived but cannot be billed: an error
            raise BackboneError(f"{self.name}: counting a choice's tokens failed: {exc}",
                                kind=classify(exc)) from exc
        return len(tokens or []) + (1 if ch.get("finish_reason") == "stop" else 0)


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
