"""The trusted verdict channel, harness side: the only way a run can be reported as passed.

The runner writes ``<nonce> <status> <detail-json>`` on a pipe that only it holds, once, after the
solution's process is dead. The nonce is fresh per run (128 bits) and is the last thing the runner
reads from its stdin, after the solution's process was forked and had closed its own stdin, so the
solution never sees it: nothing the solution prints, exits with or signals can produce a pass. No
line with the nonce means no pass: the status is then derived from how the runner ended.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
from dataclasses import dataclass

__all__ = [
    "INFRASTRUCTURE",
    "STATUSES",
    "ExecResult",
    "SandboxFailure",
    "has_verdict",
    "parse_verdict",
    "status_without_verdict",
]

STATUSES = ("passed", "failed", "timeout", "error", "memory", "killed")


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one sandboxed run.

    ``status``: ``passed`` the test ran to completion; ``failed`` the test raised (an assert,
    an exception from the solution, the solution exiting early); ``timeout`` wall clock or CPU
    limit; ``memory`` a MemoryError (RLIMIT_AS) anywhere; ``killed`` the solution or runner died
    from a signal; ``error`` the solution did not load (syntax error, exception at import) or
    the runner produced no verdict. ``detail`` is a one-line reason.

    ``infrastructure``: the sandbox itself failed, so the verdict says nothing about the code
    (privileges could not be dropped, the runner crashed or lost its pod, the benchmark's own
    test does not run). Scorers raise on it (an error, never a 0): see :data:`INFRASTRUCTURE`.
    """

    passed: bool
    status: str
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    detail: str = ""
    infrastructure: bool = False


#: How the trusted runner starts an ``error`` detail when the fault is the sandbox's or the
#: benchmark's, never the code's (the runner's verdict line is nonce-checked, so code cannot forge it).
INFRASTRUCTURE = ("runner: ", "sandbox: ", "benchmark prelude or test does not run")


class SandboxFailure(RuntimeError):
    """The sandbox could not judge the code (:attr:`ExecResult.infrastructure`)."""


def has_verdict(buf: bytes | bytearray, nonce: str) -> bool:
    """True once ``buf`` holds a complete line that starts with ``nonce``."""
    i = buf.find(nonce.encode())
    return i >= 0 and buf.find(b"\n", i) >= 0


def parse_verdict(data: bytes, nonce: str) -> tuple[str, str] | None:
    """(status, detail) from the first line that carries this run's nonce; None without one."""
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) >= 2 and secrets.compare_digest(parts[0], nonce) and parts[1] in STATUSES:
            try:
                detail = str(json.loads(parts[2])) if len(parts) > 2 else ""
            except ValueError:
                detail = ""
            return parts[1], detail
    return None


def status_without_verdict(timed_out: bool, raw_exit: int | None) -> tuple[str, str]:
    """Why there is no verdict; never "passed"."""
    if timed_out:
        return "timeout", "wall-clock limit reached"
    if raw_exit is not None and os.WIFSIGNALED(raw_exit):
        sig = os.WTERMSIG(raw_exit)
        return ("timeout" if sig == signal.SIGXCPU else "killed"), f"runner killed by signal {sig}"
    if raw_exit is not None:
        return "error", f"no verdict from the runner (exit status {raw_exit})"
    return "killed", "the runner ended without a verdict"
