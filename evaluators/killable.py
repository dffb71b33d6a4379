"""Run one pure function in a forked child that is stopped when it has used its CPU budget.

Why a process and not a thread or SIGALRM: symbolic checkers (sympy, math-verify) can take
unbounded time or memory on model output (``9^{9^{9}}``), a thread cannot be stopped, and
SIGALRM only works in the main thread while scoring runs in ``asyncio.to_thread`` workers. A
forked child inherits whatever the parent imported (call ``preload`` first), so it starts in
milliseconds. Its memory is bounded too (address space + 2 GiB).

The budget is CPU time (RLIMIT_CPU, whole seconds, rounded up), not wall time: the same answer gets the same verdict
on an idle machine and on one running four runs side by side, where a 1 s check can take 5 s of wall time (a wall
limit turned such answers into errors under load). A wall backstop (``WALL_FACTOR`` x the budget, at least
``WALL_MIN_S``) still ends a child that waits instead of computing.
"""
from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import time
from typing import Any
from collections.abc import Callable

__all__ = ["TIMEOUT", "call_with_deadline"]

TIMEOUT = object()  # returned when the child missed its deadline (a child that died without an answer raises)
_MEMORY_HEADROOM = 2 << 30
WALL_FACTOR = 6.0   # wall backstop: a CPU-bound child on 2 cores shared by ~10 busy processes gets ~1/5 of a core
WALL_MIN_S = 10.0


def call_with_deadline(fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> Any:
    """``fn(*args)`` in a forked child; its JSON-serialisable result, or :data:`TIMEOUT` when it used ``timeout_s``
    seconds of CPU (rounded up to whole seconds) or the wall backstop passed.

    An exception in ``fn``, or a child that dies without answering (other than at its CPU limit), raises
    ``RuntimeError`` here.
    """
    cpu_s = max(1, math.ceil(timeout_s))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        code = 1
        try:
            os.close(r)
            try:
                with open("/proc/self/statm") as fh:
                    vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
                resource.setrlimit(resource.RLIMIT_AS, (vm + _MEMORY_HEADROOM, vm + _MEMORY_HEADROOM))
            except (OSError, ValueError):
                pass
            try:  # SIGXCPU at the budget (this process's CPU from now: a fresh fork has used ~none), SIGKILL 1 s on
                used = resource.getrusage(resource.RUSAGE_SELF)
                spent = math.ceil(used.ru_utime + used.ru_stime)
                resource.setrlimit(resource.RLIMIT_CPU, (spent + cpu_s, spent + cpu_s + 1))
            except (OSError, ValueError):
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
    reaped = False
    try:
        deadline = time.monotonic() + max(WALL_MIN_S, WALL_FACTOR * cpu_s)
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
            _, status, usage = os.wait4(pid, 0)
            reaped = True
            spent = usage.ru_utime + usage.ru_stime
            if os.WIFSIGNALED(status) and (os.WTERMSIG(status) == signal.SIGXCPU or
                                           (os.WTERMSIG(status) == signal.SIGKILL and spent >= cpu_s)):
                return TIMEOUT  # stopped at its CPU budget (SIGXCPU, or the hard limit's SIGKILL 1 s later)
            raise RuntimeError("the child died without an answer") from None
        if "error" in payload:
            raise RuntimeError(payload["error"])
        return payload["ok"]
    finally:
        os.close(r)
        if not reaped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
