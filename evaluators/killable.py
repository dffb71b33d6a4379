"""Run one pure function in a forked child that is SIGKILLed at a deadline.

Why a process and not a thread or SIGALRM: symbolic checkers (sympy, math-verify) can take
unbounded time or memory on model output (``9^{9^{9}}``), a thread cannot be stopped, and
SIGALRM only works in the main thread while scoring runs in ``asyncio.to_thread`` workers. A
forked child inherits whatever the parent imported (call ``preload`` first), so it starts in
milliseconds. Its memory is bounded too (address space + 2 GiB).
"""
from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any
from collections.abc import Callable

__all__ = ["TIMEOUT", "call_with_deadline"]

TIMEOUT = object()  # returned when the child missed its deadline (a child that died without an answer raises)
_MEMORY_HEADROOM = 2 << 30


def call_with_deadline(fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> Any:
    """``fn(*args)`` in a forked child; its JSON-serialisable result, or :data:`TIMEOUT`.

    An exception in ``fn``, or a child that dies without answering, raises ``RuntimeError`` here.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        code = 1
        try:
            os.close(r)
            try:
                import resource

                with open("/proc/self/statm") as fh:
                    vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
                resource.setrlimit(resource.RLIMIT_AS, (vm + _MEMORY_HEADROOM, vm + _MEMORY_HEADROOM))
            except (OSError, ValueError, ImportError):
                pass
            try:
                payload = {"ok": fn(*args)}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = {"error": repr(exc)[:500]}
            data = json.dumps(payload).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        deadline = time.monotonic() + max(0.0, timeout_s)
        chunks: list[bytes] = []
        complete = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                break
            chunk = os.read(r, 65536)
            if not chunk:
                complete = True
                break
            chunks.append(chunk)
        if not complete:
            return TIMEOUT
        try:
            payload = json.loads(b"".join(chunks))
        except ValueError:
            raise RuntimeError("the child died without an answer") from None
        if "error" in payload:
            raise RuntimeError(payload["error"])
        return payload["ok"]
    finally:
        os.close(r)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
