"""Claude and Gemini backbones through their native APIs: Anthropic's Messages API and Gemini's generateContent.

**Why native, not their OpenAI-compatible endpoints.** A bill needs every token class the provider charges, and
only the native APIs report them: Anthropic's ``usage`` gives ``cache_creation_input_tokens`` (with its 5-minute /
1-hour split) and ``cache_read_input_tokens``, and Anthropic calls its OpenAI SDK compatibility layer "primarily
intended to test and compare model capabilities ... not production-ready", with prompt caching and extended thinking
only in the native API (docs.anthropic.com/en/api/openai-sdk). Gemini's ``usageMetadata`` gives
``cachedContentTokenCount`` (its implicit cache) and ``thoughtsTokenCount`` (thinking, billed as output); what its
OpenAI-compatible endpoint reports of these is not documented (not verified), so a run there could not be billed
exactly. The harness keeps one request path: :class:`NativeBackbone` is the OpenAI-compatible backbone (its retries,
rate controller, error kinds, ledger fields) with a :class:`NativePost` that translates the request into the
provider's wire format and its reply back into a chat completion, usage included.

Errors: both APIs answer JSON error bodies with the HTTP status that classifies them (Anthropic
``{"type": "error", "error": {"type": "overloaded_error", ...}}``, 529 overloaded and 429 rate_limit_error retried;
Gemini ``{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [RetryInfo]}}``, whose ``retryDelay`` is
read as the Retry-After). Rate limits: Anthropic's ``anthropic-ratelimit-*`` headers are read by
:mod:`agentic_repro.harness.rate_limit`; Gemini sends none (the controller adapts on 429s alone). Neither API returns
several choices per request (``supports_n: false``: n samples are n requests) nor takes OpenAI's ``seed``
(Anthropic: dropped, recorded in the identity as ``seed_sent: false``; Gemini: ``generationConfig.seed``).
"""
from __future__ import annotations

import json
from typing import Any

from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, _completion, _split
from agentic_repro.harness.pricing import MissingUsage, Usage
from agentic_repro.harness.transport import LeanPost
from agentic_repro.harness.types import Completion

ANTHROPIC_VERSION = "2023-06-01"  # the Messages API version header (docs.anthropic.com/en/api/versioning)


class AnthropicWire:
    """Messages API: ``POST {base}/messages``; system prompt apart, ``max_tokens`` required, temperature in [0, 1]."""

    api = "anthropic-messages"
    base_url = "https://api.anthropic.com/v1"
    auth_header = "x-api-key"
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    seed_sent = False
    default_max_tokens = 4096

    def path(self, model: str) -> str:
        return "messages"

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        _refuse_unsupported(body, self.api)
        system = "\n\n".join(str(m["content"]) for m in body["messages"] if m.get("role") == "system")
        out: dict[str, Any] = {"model": body["model"], "max_tokens": int(body.get("max_tokens") or self.default_max_tokens),
                               "messages": [{"role": m["role"], "content": m["content"]} for m in body["messages"]
                                            if m.get("role") != "system"]}
        if system:
            out["system"] = system
        t = body.get("temperature")
        if t is not None:
            if not 0 <= float(t) <= 1:
                raise BackboneError(f"temperature={t}: Anthropic's Messages API takes 0-1", kind="config", attempts=0)
            out["temperature"] = t
        if body.get("top_p") is not None:
            out["top_p"] = body["top_p"]
        if body.get("stop"):
            out["stop_sequences"] = [body["stop"]] if isinstance(body["stop"], str) else list(body["stop"])
        return out

    def reply(self, native: Any) -> dict[str, Any]:
        if not isinstance(native, dict):
            return {"error": f"not a JSON object: {str(native)[:200]}"}
        if native.get("type") == "error" or native.get("error"):
            return {"error": native.get("error") or native}
        blocks = native.get("content")
        texts = [b.get("text") for b in blocks or [] if isinstance(b, dict) and b.get("type") == "text"]
        content = "".join(t for t in texts if isinstance(t, str)) if texts else None
        stop = native.get("stop_reason")
        finish = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}.get(stop, stop)
        out: dict[str, Any] = {"id": native.get("id"), "object": "chat.completion", "model": native.get("model"),
                               "choices": [{"index": 0, "finish_reason": finish,
                                            "message": {"role": "assistant", "content": content}}]}
        usage = self.usage(native.get("usage"))
        if usage is not None:
            out["usage"], out["_usage"] = _openai_usage(usage), usage
        return out

    @staticmethod
    def usage(u: Any) -> Usage | None:
        """``input_tokens`` excludes the cache: the prompt is input + cache reads + cache writes (bill's Usage)."""
        if not isinstance(u, dict) or not all(_is_count(u.get(k)) for k in ("input_tokens", "output_tokens")):
            return None
        read = _count(u, "cache_read_input_tokens")
        created = _count(u, "cache_creation_input_tokens")
        split = u.get("cache_creation") if isinstance(u.get("cache_creation"), dict) else {}
        one_hour = _count(split, "ephemeral_1h_input_tokens")
        five_min = _count(split, "ephemeral_5m_input_tokens") if split else created
        return Usage(u["input_tokens"] + read + created, u["output_tokens"], cached_tokens=read,
                     cache_write_tokens=five_min if split else created - one_hour, cache_write_1h_tokens=one_hour)

    def on_error(self, response: Any) -> Any:
        return response  # Anthropic's 429 carries retry-after itself


class GeminiWire:
    """generateContent: ``POST {base}/models/{model}:generateContent``; roles user/model, systemInstruction apart."""

    api = "gemini-generate-content"
    base_url = "https://generativelanguage.googleapis.com/v1beta"
    auth_header = "x-goog-api-key"
    headers: dict[str, str] = {}
    seed_sent = True

    def path(self, model: str) -> str:
        return f"models/{model}:generateContent"

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        _refuse_unsupported(body, self.api)
        system = "\n\n".join(str(m["content"]) for m in body["messages"] if m.get("role") == "system")
        out: dict[str, Any] = {"contents": [{"role": "model" if m["role"] == "assistant" else "user",
                                             "parts": [{"text": str(m["content"])}]}
                                            for m in body["messages"] if m.get("role") != "system"]}
        if system:
            out["systemInstruction"] = {"parts": [{"text": system}]}
        cfg = {k2: body[k1] for k1, k2 in (("temperature", "temperature"), ("top_p", "topP"),
                                           ("max_tokens", "maxOutputTokens"), ("seed", "seed"))
               if body.get(k1) is not None}
        if body.get("stop"):
            cfg["stopSequences"] = [body["stop"]] if isinstance(body["stop"], str) else list(body["stop"])
        if cfg:
            out["generationConfig"] = cfg
        return out

    def reply(self, native: Any) -> dict[str, Any]:
        if not isinstance(native, dict):
            return {"error": f"not a JSON object: {str(native)[:200]}"}
        if native.get("error"):
            return {"error": native["error"]}
        choices = []
        for i, cand in enumerate(native.get("candidates") or []):
            parts = ((cand or {}).get("content") or {}).get("parts")
            texts = [p.get("text") for p in parts or [] if isinstance(p, dict) and not p.get("thought")
                     and isinstance(p.get("text"), str)]
            reason = (cand or {}).get("finishReason")
            finish = {"STOP": "stop", "MAX_TOKENS": "length"}.get(reason, str(reason).lower() if reason else None)
            choices.append({"index": i, "finish_reason": finish,
                            "message": {"role": "assistant", "content": "".join(texts) if texts else None}})
        out: dict[str, Any] = {"id": native.get("responseId"), "object": "chat.completion",
                               "model": native.get("modelVersion"), "choices": choices}
        usage = self.usage(native.get("usageMetadata"))
        if usage is not None:
            out["usage"], out["_usage"] = _openai_usage(usage), usage
        return out

    @staticmethod
    def usage(u: Any) -> Usage | None:
        """``promptTokenCount`` includes the cached part; thinking (``thoughtsTokenCount``) is billed as output."""
        if not isinstance(u, dict) or not _is_count(u.get("promptTokenCount")):
            return None
        thoughts = _count(u, "thoughtsTokenCount")
        candidates = u.get("candidatesTokenCount", 0)  # absent when nothing was generated
        if not _is_count(candidates):
            return None
        return Usage(u["promptTokenCount"], candidates + thoughts, cached_tokens=_count(u, "cachedContentTokenCount"),
                     reasoning_tokens=thoughts)

    def on_error(self, response: Any) -> Any:
        """A 429's ``RetryInfo.retryDelay`` (``"37s"``) becomes the Retry-After the retry loop honours."""
        try:
            details = (response.json().get("error") or {}).get("details") or []
        except (ValueError, AttributeError):
            return response
        delay = next((d.get("retryDelay") for d in details if isinstance(d, dict) and d.get("retryDelay")), None)
        if not delay or "retry-after" in response.headers:
            return response
        seconds = str(delay).rstrip("s")
        try:
            float(seconds)
        except ValueError:
            return response
        response.headers["retry-after"] = seconds
        return response


WIRES = {"anthropic": AnthropicWire, "gemini": GeminiWire}


def _refuse_unsupported(body: dict[str, Any], api: str) -> None:
    if body.get("logprobs"):
        raise BackboneError(f"logprobs: the {api} API returns none", kind="config", attempts=0)
    if int(body.get("n") or 1) > 1:
        raise BackboneError(f"n={body['n']}: the {api} API returns one choice per request (supports_n: false)",
                            kind="config", attempts=0)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _count(d: Any, key: str) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    return v if _is_count(v) else 0


def _openai_usage(u: Usage) -> dict[str, Any]:
    """The same counts in OpenAI's shape (what the rate controller and the retry path read)."""
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens,
                                      "cache_write_tokens": u.cache_write_tokens + u.cache_write_1h_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}


class NativeReply:
    """A native reply read as a chat completion: ``json()`` translates (a broken body raises ValueError: bad_json)."""

    def __init__(self, raw: Any, wire: Any) -> None:
        self.raw, self.wire, self.headers, self.status_code = raw, wire, raw.headers, raw.status_code

    def json(self) -> dict[str, Any]:
        return self.wire.reply(json.loads(self.raw.content))


class NativePost(LeanPost):
    """:class:`LeanPost` speaking a native API: the key in its own header, the body and the reply translated."""

    def __init__(self, client: Any, library: str, wire: Any, api_key: str) -> None:
        super().__init__(client, library, auth=(wire.auth_header, api_key))
        self.wire = wire

    async def post(self, path: str, *, body: Any, cast_to: Any = None) -> Any:
        raw = await self.send(self.wire.path(body["model"]), self.wire.request(body), self.wire.on_error)
        return NativeReply(raw, self.wire)


class NativeBackbone(OpenAICompatibleBackbone):
    """A Claude or Gemini model (``kind: anthropic`` / ``kind: gemini``), priced from the dated table."""

    def __init__(self, *, wire: str, base_url: str | None, api_key: str, **kw: Any) -> None:
        from openai import AsyncOpenAI

        from agentic_repro.harness.transport import openai_http_client

        w = WIRES[wire]()
        base = base_url or w.base_url
        kw["extra_identity"] = {**(kw.get("extra_identity") or {}), "api": w.api, "base_url": base_url,
                                **({} if w.seed_sent else {"seed_sent": False})}
        super().__init__(base_url=base, api_key=api_key, supports_n=False, cache_identity={}, **kw)
        self.wire, self.kind = w, wire
        self._unused = self._client  # the base's OpenAI-shaped client: never sent through, closed with us
        self._client = NativePost(AsyncOpenAI(base_url=base, api_key=api_key, max_retries=0, default_headers=w.headers,
                                              timeout=self.retry.timeout_s, http_client=openai_http_client()),
                                  kw.get("http_library", "auto"), w, api_key)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "kind": self.kind}

    async def completions_from(self, resp: dict[str, Any], choices: list[dict[str, Any]],
                               sampling: dict[str, Any]) -> list[Completion]:
        usage = resp.get("_usage")
        if not isinstance(usage, Usage):
            try:
                usage = Usage.from_openai(resp.get("usage"))
            except MissingUsage:  # a free backbone (paid replies without usage were refused on arrival)
                usage = Usage(0, 0)
        out = []
        for i, ch in enumerate(choices):
            share = _split(usage, i, len(choices))
            out.append(_completion(ch, share.prompt_tokens, share.completion_tokens, resp, share))
        return out

    async def aclose(self) -> None:
        await self._unused.close()
        await super().aclose()


def build_native_backbone(cfg: dict[str, Any], *, seed: int, rate_limit: Any, common: dict[str, Any]) -> NativeBackbone:
    """The backbone for a ``kind: anthropic`` or ``kind: gemini`` config (configs/backbone/claude-*.yaml, gemini-*)."""
    from agentic_repro.harness.backbone import RetryPolicy, api_key_from_env

    name, kind = cfg["name"], cfg["kind"]
    if common["price"].free:
        raise BackboneError(f"backbone '{name}': {kind} bills every call, but the price is 0: set `price: table`",
                            kind="config", attempts=0)
    if cfg.get("adapters"):
        raise BackboneError(f"backbone '{name}': {kind} serves no adapters", kind="config", attempts=0)
    return NativeBackbone(wire=kind, model=cfg["model"], base_url=cfg.get("base_url"),
                          api_key=api_key_from_env(cfg.get("api_key_env"), name),
                          retry=RetryPolicy(**(cfg.get("retry") or {})), seed=seed,
                          http_library=str(cfg.get("http_library", "auto")), rate_limit=rate_limit, **common)
