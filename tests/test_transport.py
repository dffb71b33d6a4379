"""The lean POST raises what the openai client would (so classification and Retry-After are unchanged)."""
from __future__ import annotations

import asyncio
import socket

import openai
import pytest

from agentic_repro.harness.transport import LeanPost
from tests.fault_server import FaultServer

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "What is 1+1?"}]}


def lean(url: str, timeout: float = 5.0, library: str = "auto") -> LeanPost:
    return LeanPost(openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=timeout),
                    library=library)


@pytest.mark.parametrize("library", ["auto", "httpx"])
def test_status_timeout_and_connection_errors_are_openai_errors(library):
    """Whichever HTTP library sends (backbone option http_library), the errors are openai's."""
    async def main(url):
        c = lean(url, timeout=0.5, library=library)
        assert c.library == ("httpx" if library == "httpx" else c.library)
        try:
            ok = (await c.post("/chat/completions", body=BODY)).json()
            srv.fail_all = "429"
            with pytest.raises(openai.RateLimitError) as rate:
                await c.post("/chat/completions", body=BODY)
            srv.fail_all = "503"
            with pytest.raises(openai.APIStatusError) as unavailable:
                await c.post("/chat/completions", body=BODY)
            srv.fail_all = "hang"
            with pytest.raises(openai.APITimeoutError):
                await c.post("/chat/completions", body=BODY)
            srv.fail_all = None
            absolute = (await c.post(f"{url}/models", body={})).json()  # absolute URLs (llama-server /tokenize)
        finally:
            await c.close()
        return ok, rate.value, unavailable.value, absolute

    with FaultServer(retry_after_s=7, hang_s=2) as srv:
        ok, rate, unavailable, absolute = asyncio.run(main(srv.url))
    assert ok["choices"][0]["message"]["content"].startswith("thinking")
    assert rate.status_code == 429 and rate.response.headers["retry-after"] == "7"
    assert unavailable.status_code == 503 and absolute["data"][0]["id"] == "fault-model"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def dead():
        c = lean(f"http://127.0.0.1:{port}/v1", library=library)
        try:
            await c.post("/chat/completions", body=BODY)
        finally:
            await c.close()

    with pytest.raises(openai.APIConnectionError):
        asyncio.run(dead())


def test_the_key_and_organisation_are_sent():
    seen = {}
    c = LeanPost(openai.AsyncOpenAI(base_url="http://127.0.0.1:1/v1", api_key="sk-abc", organization="org-1",
                                    max_retries=0))
    seen.update(c._http.headers)
    asyncio.run(c.close())
    assert seen["authorization"] == "Bearer sk-abc" and seen["openai-organization"] == "org-1"


def test_an_unknown_http_library_is_refused_by_name():
    with pytest.raises(ValueError, match="http_library='requests'"):
        lean("http://127.0.0.1:1/v1", library="requests")


def test_rate_limit_headers_reach_the_backbone_on_replies_and_on_429s():
    """The controller reads x-ratelimit-* from 2xx replies and Retry-After from 429 errors' responses."""
    from tests.rate_limit_server import RateLimitedServer

    async def main(url):
        c = lean(url)
        try:
            ok = await c.post("/chat/completions", body={**BODY, "max_tokens": 10})
            with pytest.raises(openai.RateLimitError) as rate:
                await c.post("/chat/completions", body={**BODY, "max_tokens": 10})
            return ok.headers, rate.value.response.headers
        finally:
            await c.close()

    with RateLimitedServer(rpm=1, tpm=1000, window_s=30.0, base_latency_s=0.0, max_seconds=30) as srv:
        ok, limited = asyncio.run(main(srv.url))
    assert ok["x-ratelimit-limit-requests"] == "1" and ok["x-ratelimit-remaining-requests"] == "0"
    assert limited["retry-after"] and float(limited["retry-after-ms"]) > 0 and limited["x-ratelimit-reset-requests"]
