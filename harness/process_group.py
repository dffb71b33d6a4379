"""Stopping a child process group: one way for every server the harness starts (llama-server, vLLM, vLLM's engine).

A server runs in a process group of its own (``start_new_session=True``) so that its helpers end with it; stopping it
asks politely first and kills the group only when it does not end in time, so a stuck server never outlives a run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_process_group(proc: subprocess.Popen, *, timeout: float, polite: bool = True,
                       kill_wait: float = 10.0) -> int | None:
    """End ``proc``'s group: SIGTERM (when ``polite``; otherwise the caller has already asked, e.g. by closing stdin),
    wait ``timeout`` s, then SIGKILL and wait ``kill_wait`` s. Returns the exit code, or None if it still runs."""
    if proc.poll() is None:
        if polite:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(kill_wait)
    return proc.poll()
