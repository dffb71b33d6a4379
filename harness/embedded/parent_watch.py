"""Run a Python module that exits when the process which started it is gone.

    python -m agentic_repro.harness.embedded.parent_watch PARENT_PID -m llama_cpp.server --model ...
    python -m agentic_repro.harness.embedded.parent_watch PARENT_PID path/to/script.py ARGS...
    python -m agentic_repro.harness.embedded.parent_watch PARENT_PID --exec /path/to/llama-server ARGS...

A harness killed with SIGKILL (or a test runner's timeout) cannot stop its embedded
server, which would then keep a core busy for nobody. This wrapper runs the server
module in-process with a watchdog thread that ends it once its parent has changed.
A binary (``--exec``) runs as the watcher's child and is killed with it: it shares
the watcher's process group, so a group signal reaches both, and the watchdog kills
it before exiting when the parent is gone, and with it the whole group when the
watcher leads one (``start_new_session``): a server's own children (vLLM's engine
core and worker) would otherwise outlive it.
"""
from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time

_child: subprocess.Popen[bytes] | None = None


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    if _child is not None and _child.poll() is None:
        _child.kill()
    if os.getpgrp() == os.getpid():
        # started with start_new_session (the servers are): the group holds only what the server started, e.g. vLLM's
        # engine core and worker, which outlive a killed API server; this kills the watcher too
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(0)


def _exec(argv: list[str]) -> int:
    """Run a binary as a child; forward SIGTERM/SIGINT; return its exit code."""
    global _child
    _child = subprocess.Popen(argv)

    def forward(signum: int, _frame: object) -> None:
        if _child is not None and _child.poll() is None:
            _child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return _child.wait()


def main() -> None:
    if len(sys.argv) < 3 or (sys.argv[2] == "-m" and len(sys.argv) < 4):
        raise SystemExit("usage: python -m agentic_repro.harness.embedded.parent_watch PARENT_PID (-m MODULE | SCRIPT) [ARGS...]")
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if sys.argv[2] == "--exec":
        raise SystemExit(_exec(sys.argv[3:]))
    if sys.argv[2] == "-m":
        module, args = sys.argv[3], sys.argv[4:]
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script, args = sys.argv[2], sys.argv[3:]
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
