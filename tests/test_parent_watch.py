"""An embedded server must not outlive a harness that was killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys, os, time
child = subprocess.Popen([sys.executable, "-m", "harness.parent_watch", str(os.getpid()), "-m", "http.server",
                          "0", "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie has exited
        return fh.read().split()[2] != "Z"


def test_child_exits_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(1.0)
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _alive(child):
        time.sleep(0.2)
    gone = not _alive(child)
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the watched child outlived its parent"
