"""Batch mode (``runner.batch=true``): a run's independent calls through OpenAI's Batch API, at the batch price.

A cell whose method makes independent calls (IO, CoT, CoT-SC: every call's prompt is known without waiting for
another's answer) costs half as much through the Batch API (50% on every token class, configs/prices.yaml). This
module wraps the run's OpenAI-compatible backbone (:class:`BatchingBackbone`): ``complete`` queues the request body
the online path would send; once no new request has arrived for ``flush_s`` the queued bodies go up as one JSONL file
(``POST /files``, purpose ``batch``) and one batch (``POST /batches``, endpoint ``/v1/chat/completions``), which is
polled (``GET /batches/{id}``) until it ends; its output file's lines (and its error file's) answer the waiting calls
by ``custom_id``. Everything above the backbone is the online run's: the response cache and its keys, the ledger,
the run identity (``runner.batch`` is not part of it); each completion says ``service_tier: batch``, so the ledger
prices it at the table's batch rates.

**Resumable**: every submitted batch is appended to ``<run>/batches.jsonl`` (its id and the ``custom_id`` of every
line, a hash of the request body) *before* the run waits on it; a process stopped between submission and completion
finds its requests there when it runs again and polls that batch instead of submitting them twice. A line the batch
answers with an error (or a batch that fails or expires) is the call's error, never an answer.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentic_repro.harness.backbone import BackboneError, BackboneResult, check_response

#: methods whose calls are independent (one problem's calls never wait on another call's answer)
BATCHABLE_METHODS = ("io", "cot", "cot_sc")
DONE = ("completed", "failed", "expired", "cancelled")


def check_batch(runner_cfg: Mapping[str, Any], method: str, backbone_kind: str | None) -> bool:
    """Whether the run goes through the Batch API; ConfigError when it asks for it where it cannot."""
    from agentic_repro.harness.validate import ConfigError

    if not runner_cfg.get("batch"):
        return False
    if runner_cfg.get("batch") is not True:
        raise ConfigError(f"runner.batch={runner_cfg.get('batch')!r} is not allowed: true or false")
    if method not in BATCHABLE_METHODS:
        raise ConfigError(f"runner.batch=true runs methods whose calls are independent ({', '.join(BATCHABLE_METHODS)}"
                          f"); {method} waits on its own answers")
    if backbone_kind not in ("openai", "anthropic"):
        raise ConfigError(f"runner.batch=true needs OpenAI's Batch API (kind openai) or Anthropic's Message Batches "
                          f"(kind anthropic), not {backbone_kind}")
    return True


def custom_id(body: Mapping[str, Any]) -> str:
    """The request's id in the batch: a hash of its body, so a resumed run finds the same request again."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:40]


class BatchLog:
    """``<run>/batches.jsonl``: one line per submitted batch, written before the run waits on it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a kill: its batch was not recorded, so it is submitted again
                continue
        return out

    def append(self, entry: dict[str, Any]) -> None:
        import os

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())


class OpenAIBatches:
    """OpenAI's Batch API: a JSONL file (``POST /files``), a batch (``POST /batches``), ``GET /batches/{id}`` until
    it ends, then its output and error files; each line's ``response.body`` is a chat completion."""

    def __init__(self, backbone: Any) -> None:
        self.bb, self.http = backbone, backbone._client._http

    async def submit(self, lines: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        jsonl = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body})
                        + "\n" for cid, body in lines.items())
        # multipart by hand: the client's default Content-Type (application/json) would replace httpx's own
        b = uuid.uuid4().hex
        form = (f'--{b}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--{b}\r\n'
                'Content-Disposition: form-data; name="file"; filename="batch.jsonl"\r\n'
                'Content-Type: application/jsonl\r\n\r\n').encode() + jsonl.encode() + f"\r\n--{b}--\r\n".encode()
        up = await self.http.post("files", content=form, headers={"Content-Type": f"multipart/form-data; boundary={b}"})
        up.raise_for_status()
        file_id = up.json()["id"]
        made = await self.http.post("batches", json={"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                     "completion_window": "24h"})
        made.raise_for_status()
        return made.json()["id"], {"input_file_id": file_id}

    async def status(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        got = await self.http.get(f"batches/{batch_id}")
        got.raise_for_status()
        batch = got.json()
        return batch.get("status") in DONE, batch

    async def results(self, batch: dict[str, Any]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key in ("output_file_id", "error_file_id"):
            if batch.get(key):
                content = await self.http.get(f"files/{batch[key]}/content")
                content.raise_for_status()
                for text in content.text.splitlines():
                    if text.strip():
                        line = json.loads(text)
                        seen[line["custom_id"]] = line
        return seen

    def reply(self, line: Mapping[str, Any], cid: str) -> dict[str, Any]:
        return _line_reply(line, cid)


class AnthropicBatches:
    """Anthropic's Message Batches: ``POST /messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``,
    ``GET /messages/batches/{id}`` until ``processing_status`` is ``ended``, then its ``results_url`` (JSONL of
    ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} | canceled | expired}``)."""

    def __init__(self, backbone: Any) -> None:
        self.bb, self.http = backbone, backbone._client._http

    async def submit(self, lines: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        reqs = [{"custom_id": cid, "params": self.bb.wire.request(body)} for cid, body in lines.items()]
        made = await self.http.post("messages/batches", json={"requests": reqs})
        made.raise_for_status()
        return made.json()["id"], {}

    async def status(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        got = await self.http.get(f"messages/batches/{batch_id}")
        got.raise_for_status()
        batch = got.json()
        return batch.get("processing_status") == "ended", batch

    async def results(self, batch: dict[str, Any]) -> dict[str, Any]:
        if not batch.get("results_url"):
            return {}
        got = await self.http.get(batch["results_url"])
        got.raise_for_status()
        return {line["custom_id"]: line for line in (json.loads(t) for t in got.text.splitlines() if t.strip())}

    def reply(self, line: Mapping[str, Any], cid: str) -> dict[str, Any]:
        result = line.get("result") or {}
        if result.get("type") != "succeeded":
            err = (result.get("error") or {}).get("error") or result.get("error") or {}
            etype = err.get("type") if isinstance(err, dict) else None
            kind = {"rate_limit_error": "http_429", "overloaded_error": "http_5xx", "api_error": "http_5xx",
                    "invalid_request_error": "http_4xx"}.get(str(etype), f"batch_{result.get('type') or 'error'}")
            raise BackboneError(f"batch line {cid}: {result.get('type')}: {err}", kind=kind, attempts=1)
        return self.bb.wire.reply(result.get("message"))


class BatchingBackbone:
    """The run's backbone, its requests sent as batches (module docstring). Attributes are the inner backbone's."""

    rate_controller = None  # a batch is not paced by the online rate limits

    def __init__(self, inner: Any, run_dir: Path, *, poll_s: float = 30.0, flush_s: float = 1.0,
                 max_lines: int = 50_000) -> None:
        self.inner, self.poll_s, self.flush_s, self.max_lines = inner, poll_s, flush_s, max_lines
        self.api = AnthropicBatches(inner) if getattr(inner, "kind", None) == "anthropic" else OpenAIBatches(inner)
        self.log = BatchLog(Path(run_dir) / "batches.jsonl")
        self._queue: dict[str, dict[str, Any]] = {}
        self._waiters: dict[str, list[asyncio.Future[Any]]] = {}
        self._results: dict[str, Any] = {}
        self._known: dict[str, str] = {}  # custom_id -> batch id, from batches.jsonl (a stopped run's submissions)
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._last = 0.0
        self.submitted: list[str] = []
        for entry in self.log.read():
            for cid in entry.get("custom_ids") or []:
                self._known[cid] = entry["batch_id"]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity()

    # -- the call
    async def complete(self, messages: list[Any], sampling: dict[str, Any], n: int, *,
                       adapter: str | None = None) -> BackboneResult:
        start = time.perf_counter()
        body = self.inner.request_body(messages, sampling, n, adapter)
        cid = custom_id(body)
        line = await self._result(cid, body)
        resp = self.api.reply(line, cid)
        try:
            choices = check_response(resp)
        except Exception as exc:  # a bad line is this call's error, never an answer
            raise BackboneError(f"{self.inner.name}: batch line {cid}: {exc}", kind=getattr(exc, "kind", "bad_json"),
                                attempts=1) from exc
        resp = {**resp, "service_tier": "batch"}  # billed at the batch rates (harness.llm.price_line)
        comps = await self.inner.completions_from(resp, choices, sampling)
        return BackboneResult(comps, 0, time.perf_counter() - start)

    async def _result(self, cid: str, body: dict[str, Any]) -> Any:
        if cid in self._results:
            return self._results[cid]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(cid, []).append(fut)
        if cid in self._known:  # submitted by a stopped run: wait on that batch, never submit it again
            self._poll(self._known[cid])
        elif cid not in self._queue:
            self._queue[cid] = body
            self._last = time.monotonic()
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.ensure_future(self._flush_when_quiet())
        return await fut

    async def _flush_when_quiet(self) -> None:
        while self._queue:
            idle = time.monotonic() - self._last
            if idle < self.flush_s and len(self._queue) < self.max_lines:
                await asyncio.sleep(self.flush_s - idle)
                continue
            lines, self._queue = self._queue, {}
            try:
                batch_id = await self._submit(lines)
            except Exception as exc:  # noqa: BLE001 - every waiting call gets the error
                self._fail(list(lines), BackboneError(f"{self.inner.name}: batch submission failed: {exc}",
                                                      kind="batch_submit", attempts=1))
                continue
            for cid in lines:
                self._known[cid] = batch_id
            self._poll(batch_id)

    async def _submit(self, lines: dict[str, dict[str, Any]]) -> str:
        batch_id, extra = await self.api.submit(lines)
        # recorded before waiting: a process stopped from here on resumes this batch instead of paying twice
        self.log.append({"batch_id": batch_id, **extra, "custom_ids": list(lines),
                         "submitted_at": time.time(), "model": self.inner.model})
        self.submitted.append(batch_id)
        return batch_id

    def _poll(self, batch_id: str) -> None:
        if batch_id not in self._pollers or self._pollers[batch_id].done():
            self._pollers[batch_id] = asyncio.ensure_future(self._wait(batch_id))

    async def _wait(self, batch_id: str) -> None:
        ids = [cid for cid, b in self._known.items() if b == batch_id]
        try:
            while True:
                done, batch = await self.api.status(batch_id)
                if done:
                    break
                await asyncio.sleep(self.poll_s)
            seen = await self.api.results(batch)
        except Exception as exc:  # noqa: BLE001 - polling failed: the waiting calls fail (a re-run resumes the batch)
            self._fail(ids, BackboneError(f"{self.inner.name}: polling batch {batch_id} failed: {exc}",
                                          kind="batch_poll", attempts=1))
            return
        for cid in ids:
            line = seen.get(cid) or {"custom_id": cid, "error": {
                "code": "batch_missing", "message": f"batch {batch_id} ended ({batch.get('status')}) "
                                                                   "without this request's line"}}
            self._results[cid] = line
            for fut in self._waiters.pop(cid, []):
                if not fut.done():
                    fut.set_result(line)

    def _fail(self, ids: list[str], err: BackboneError) -> None:
        for cid in ids:
            for fut in self._waiters.pop(cid, []):
                if not fut.done():
                    fut.set_exception(err)

    async def aclose(self) -> None:
        for task in [*self._pollers.values(), *([self._flusher] if self._flusher else [])]:
            task.cancel()
        await self.inner.aclose()


def _line_reply(line: Mapping[str, Any], cid: str) -> dict[str, Any]:
    """The chat completion a batch line carries; BackboneError for a line that is an error."""
    response = line.get("response") or {}
    status = response.get("status_code")
    if line.get("error") or status != 200:
        err = line.get("error") or (response.get("body") or {}).get("error") or {}
        code = status or 0
        kind = "http_429" if code == 429 else "http_5xx" if code >= 500 else "http_4xx" if code >= 400 else \
            str(err.get("code") or "batch_error")
        raise BackboneError(f"batch line {cid}: {err.get('message') or err or 'no response'}", kind=kind, attempts=1)
    body = response.get("body")
    if not isinstance(body, dict):
        raise BackboneError(f"batch line {cid}: no response body", kind="bad_json", attempts=1)
    return body
