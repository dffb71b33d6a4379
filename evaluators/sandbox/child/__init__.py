"""The runner program: the code that runs inside the sandbox's own interpreter, never in the harness.

The harness compiles :func:`source` once (``launch._program_fd``: marshal bytes in a sealed memfd) and starts
``python -I -S -B -u -c <a bootstrap that loads it>`` followed by a call: ``_runner(namespaces)``
for one run started directly, or ``_serve(fd, namespaces, n_spares)`` for the fork server (which
forks persistent runners, ``_persistent_runner``; each makes its pod, ``_start_pod``, whose interpreter loads
the same compiled program). The pieces are plain
Python files so they can be read and linted; they share one namespace once concatenated (in this
order), so a name used in one may be defined in another:

* ``runner.py``     the trusted runner (one run, or persistent), the pod and the verdict it writes;
* ``plaindata.py``  the plain-data encoding both processes use;
* ``trusted.py``    the benchmark's test and the proxies that stand for the solution's objects;
* ``untrusted.py``  the reaper (the pod's init), the privilege drop and limits, and the solution's request loop;
* ``forkserver.py`` the warm parent of the persistent runners.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PIECES = ("runner.py", "plaindata.py", "trusted.py", "untrusted.py", "forkserver.py")


@lru_cache(maxsize=1)
def source() -> str:
    """The runner program's text (what ``python -c`` receives before the call)."""
    here = Path(__file__).resolve().parent
    return "\n\n".join((here / name).read_text(encoding="utf-8") for name in PIECES) + "\n"
