"""A loopback double of OpenAI's Batch API beside tests/fault_server.py's chat completions (one server, one port).

    with BatchDouble(hold=True) as srv:   # POST /v1/files, POST /v1/batches, GET /v1/batches/{id},
        ...                               # GET /v1/files/{id}/content, and POST /v1/chat/completions online

As OpenAI documents it: the input file is uploaded as multipart form data (``purpose=batch``, ``file``) and answered
with a file object; a batch is created from ``input_file_id`` + ``endpoint`` + ``completion_window`` and reported as
``validating`` -> ``in_progress`` -> ``completed`` with ``output_file_id``, ``error_file_id`` and ``request_counts``;
each output line is ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``, each
failed line is in the error file with a non-200 ``status_code`` and the API's error body. A line's body is answered
exactly as the online endpoint answers it (the fault server's deterministic answer), so a batch run and an online run
see the same replies. ``hold=True`` keeps every batch ``in_progress`` until ``release()``; ``fail_lines`` the
0-based line numbers (of every batch) answered 400.
"""
from __future__ import annotations

import json
import time
from typing import Any

from tests.fault_server import FaultServer


class BatchDouble(FaultServer):
    def __init__(self, *, hold: bool = False, fail_lines: set[int] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.hold, self.fail_lines = hold, set(fail_lines or ())
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.uploads = 0
        self.batches_created = 0
        self.polls = 0
        self.online = 0

    def release(self) -> None:
        self.hold = False

    async def _json(self, writer: Any, status: int, obj: Any) -> bool:
        await self._send(writer, status, json.dumps(obj).encode())
        return True

    async def _handle(self, method: str, path: str, raw: bytes, writer: Any) -> bool:
        route = path.split("?")[0].rstrip("/")
        if route.endswith("/chat/completions"):
            self.online += 1
            return await super()._handle(method, path, raw, writer)
        if route.endswith("/v1/files") and method == "POST":
            purpose, content = _multipart(raw, self.last_headers.get("content-type", ""))
            if purpose != "batch" or content is None:
                return await self._json(writer, 400, {"error": {"message": "purpose must be batch, with a file",
                                                                "type": "invalid_request_error"}})
            self.uploads += 1
            fid = f"file-{self.uploads}"
            self.files[fid] = content
            return await self._json(writer, 200, {"id": fid, "object": "file", "bytes": len(content),
                                                  "created_at": int(time.time()), "filename": "batch.jsonl",
                                                  "purpose": "batch"})
        if route.endswith("/content") and "/v1/files/" in route and method == "GET":
            fid = route.split("/v1/files/")[1].split("/")[0]
            if fid not in self.files:
                return await self._json(writer, 404, {"error": {"message": f"No such File object: {fid}"}})
            await self._send(writer, 200, self.files[fid])
            return True
        if route.endswith("/v1/batches") and method == "POST":
            req = json.loads(raw or b"{}")
            if req.get("input_file_id") not in self.files or req.get("endpoint") != "/v1/chat/completions":
                return await self._json(writer, 400, {"error": {"message": "bad input_file_id or endpoint"}})
            self.batches_created += 1
            bid = f"batch_{self.batches_created}"
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "status": "validating",
                                 "input_file_id": req["input_file_id"], "completion_window": req.get("completion_window"),
                                 "created_at": int(time.time()), "output_file_id": None, "error_file_id": None,
                                 "request_counts": {"total": 0, "completed": 0, "failed": 0}}
            return await self._json(writer, 200, self.batches[bid])
        if "/v1/batches/" in route and method == "GET":
            bid = route.split("/v1/batches/")[1]
            batch = self.batches.get(bid)
            if batch is None:
                return await self._json(writer, 404, {"error": {"message": f"No such Batch: {bid}"}})
            self.polls += 1
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
            elif batch["status"] == "in_progress" and not self.hold:
                self._complete(batch)
            return await self._json(writer, 200, batch)
        return await super()._handle(method, path, raw, writer)

    def _complete(self, batch: dict[str, Any]) -> None:
        out, err = [], []
        lines = [json.loads(t) for t in self.files[batch["input_file_id"]].decode().splitlines() if t.strip()]
        for i, line in enumerate(lines):
            rid = f"req_{batch['id']}_{i}"
            if i in self.fail_lines:
                err.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"],
                            "response": {"status_code": 400, "request_id": rid, "body": {"error": {
                                "message": "scripted line error", "type": "invalid_request_error"}}},
                            "error": None})
                continue
            out.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"],
                        "response": {"status_code": 200, "request_id": rid, "body": self._reply(line["body"])},
                        "error": None})
            self.answered += 1
        for key, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                fid = f"file-{batch['id']}-{key.split('_')[0]}"
                self.files[fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[key] = fid
        batch["status"] = "completed"
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


def _multipart(raw: bytes, content_type: str) -> tuple[str | None, bytes | None]:
    """(the ``purpose`` field, the ``file`` part's bytes) of a multipart/form-data body."""
    if "boundary=" not in content_type:
        return None, None
    boundary = ("--" + content_type.split("boundary=", 1)[1].strip().strip('"')).encode()
    purpose, content = None, None
    for part in raw.split(boundary):
        head, sep, data = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        data = data[:-2] if data.endswith(b"\r\n") else data
        if b'name="purpose"' in head:
            purpose = data.decode()
        elif b'name="file"' in head:
            content = data
    return purpose, content
