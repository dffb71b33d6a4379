"""Run a Python module that exits when the process which started it is gone.

    python -m harness.parent_watch PARENT_PID -m llama_cpp.server --model ...
    python -m harness.parent_watch PARENT_PID path/to/script.py ARGS...

A harness killed with SIGKILL (or a test runner's timeout) cannot stop its embedded
server, which would then keep a core busy for nobody. This wrapper runs the server
module in-process with a watchdog thread that ends it once its parent has changed.
"""
from __future__ import annotations

import os
import runpy
import sys
import threading
import time


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main() -> None:
    if len(sys.argv) < 3 or (sys.argv[2] == "-m" and len(sys.argv) < 4):
        raise SystemExit("usage: python -m harness.parent_watch PARENT_PID (-m MODULE | SCRIPT) [ARGS...]")
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
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
