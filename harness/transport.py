"""A lean POST for OpenAI-compatible endpoints, so the harness keeps up with a fast backbone.

``AsyncOpenAI.post`` costs ~0.3 ms of CPU per request on top of its HTTP library (options copied, headers
rebuilt, retry and auth wrappers) — measured on this machine: 0.70 ms per request for a bare client,
0.98 through ``post``; with 32 requests in flight against a 100 ms server that is what kept the harness
at ~0.83 of a bare client (``bench/overhead.py``). :class:`LeanPost` sends with the same HTTP library,
base URL, key, organisation/project headers and timeout, and raises the ``openai`` exception classes
(``APIStatusError`` subclasses with the response, ``APITimeoutError``, ``APIConnectionError``), so the
backbone's error classification, Retry-After handling and retries are unchanged.
"""
from __future__ import annotations

import functools
import importlib
import ssl
from typing import Any


HTTP_LIBRARIES = ("auto", "httpx2", "httpx")


class LeanPost:
    """``post(path_or_url, body=..., cast_to=...)`` → the raw response (2xx), else an ``openai`` error.

    ``library`` (backbone option ``http_library``): ``auto`` sends with the library the ``openai`` client
    uses (``httpx2`` in recent releases); ``httpx`` or ``httpx2`` pick one explicitly. Both speak the same
    API; which is faster depends on the machine and its load (``bench/overhead.py`` measures both).
    """

    def __init__(self, client: Any, library: str = "auto", auth: tuple[str, str] | None = None) -> None:
        import openai

        if library not in HTTP_LIBRARIES:
            raise ValueError(f"http_library={library!r} is not one of {HTTP_LIBRARIES}")
        self._openai = openai
        self._client = client  # kept for its error factory and closed with us
        http = _http_module(client) if library == "auto" else importlib.import_module(library)
        self.library = http.__name__
        headers = {k: v for k, v in dict(client.default_headers).items() if isinstance(v, str)}
        if auth is not None:  # a native API's own key header (Anthropic: x-api-key, Gemini: x-goog-api-key)
            headers[auth[0]] = auth[1]
        elif client.api_key:
            headers["Authorization"] = f"Bearer {client.api_key}"
        for name, value in (("OpenAI-Organization", getattr(client, "organization", None)),
                            ("OpenAI-Project", getattr(client, "project", None))):
            if isinstance(value, str) and value:
                headers[name] = value
        self._http = http.AsyncClient(base_url=str(client.base_url), headers=headers, timeout=client.timeout,
                                      limits=http.Limits(max_connections=1000, max_keepalive_connections=100),
                                      verify=default_ssl_context(self.library))
        self._timeout_error = http.TimeoutException
        self._transport_error = http.TransportError

    @property
    def base_url(self) -> Any:
        return self._client.base_url

    async def post(self, path: str, *, body: Any, cast_to: Any = None) -> Any:
        return await self.send(path, body)

    async def send(self, path: str, body: Any, on_error: Any = None) -> Any:
        """POST ``body`` as JSON; the 2xx response, else the ``openai`` error for it (``on_error`` may first
        rewrite an error response: a native API's retry hint into ``Retry-After``)."""
        url = path if "://" in path else path.lstrip("/")
        try:
            response = await self._http.post(url, json=body)
        except self._timeout_error as exc:
            raise self._openai.APITimeoutError(request=exc.request) from exc
        except self._transport_error as exc:
            raise self._openai.APIConnectionError(request=exc.request) from exc
        if response.status_code >= 400:
            await response.aread()
            if on_error is not None:
                response = on_error(response)
            make = getattr(self._client, "_make_status_error_from_response", None)
            if make is not None:
                raise make(response)
            raise self._openai.APIStatusError(f"HTTP {response.status_code}", response=response, body=None)
        return response

    async def close(self) -> None:
        await self._http.aclose()
        await self._client.close()


@functools.cache
def default_ssl_context(library: str) -> ssl.SSLContext:
    """``library``'s own default verifying context (its CA bundle; ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured as
    it would), built once per process: loading the CA bundle cost ~37 ms per HTTP client, and every run built
    two (the ``openai`` client's and ours), 0.9% of a 9 s ``bench/overhead.py`` run."""
    return importlib.import_module(library).create_ssl_context()


def openai_http_client() -> Any:
    """The HTTP client to give ``AsyncOpenAI`` (which the harness never sends through: :class:`LeanPost` does),
    with the shared verifying context instead of a fresh one."""
    import openai

    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__[1:] if c.__module__.split(".")[0] != "openai")
    return openai.DefaultAsyncHttpxClient(verify=default_ssl_context(base.__module__.split(".")[0]))


def _http_module(client: Any) -> Any:
    """The HTTP library the ``openai`` client sends with (``httpx2`` in recent releases, else ``httpx``)."""
    for cls in type(client._client).__mro__:
        top = cls.__module__.split(".")[0]
        if top not in ("openai", "builtins"):
            return importlib.import_module(top)
    return importlib.import_module("httpx")
