"""An embedded server must not outlive a harness that was killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys, os, time
child = subprocess.Popen([sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "-m", "http.server",
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


PARENT_EXEC = """
import subprocess, sys, os, time
w = subprocess.Popen([sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "--exec", "sleep", "60"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
time.sleep(1.0)
kids = open(f"/proc/{w.pid}/task/{w.pid}/children").read().split()
print(w.pid, kids[0], flush=True)
time.sleep(60)
"""


def test_exec_binary_exits_when_its_parent_is_killed():
    """llama-server is a binary: the watcher runs it as a child and kills it when the harness dies."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT_EXEC], stdout=subprocess.PIPE, text=True)
    watcher, binary = map(int, parent.stdout.readline().split())
    assert _alive(watcher) and _alive(binary)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline and (_alive(binary) or _alive(watcher)):
        time.sleep(0.2)
    gone = not _alive(binary) and not _alive(watcher)
    for pid in (binary, watcher):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert gone, "the watched binary outlived its parent"


PARENT_EXEC_TREE = """
import subprocess, sys, os, time
w = subprocess.Popen([sys.executable, "-m", "agentic_repro.harness.embedded.parent_watch", str(os.getpid()), "--exec",
                      "sh", "-c", "sleep 60 & wait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
time.sleep(1.0)
binary = open(f"/proc/{w.pid}/task/{w.pid}/children").read().split()[0]
grandchild = open(f"/proc/{binary}/task/{binary}/children").read().split()[0]
print(w.pid, binary, grandchild, flush=True)
time.sleep(60)
"""


def test_exec_binarys_own_children_exit_when_its_parent_is_killed():
    """vLLM's API server runs its engine core and worker as child processes (~4.4 GB on this machine): killing only
    the binary orphaned them, holding the memory and a core for nobody (seen: a test worker was OOM-killed beside
    them). The watcher leads its process group and kills all of it."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT_EXEC_TREE], stdout=subprocess.PIPE, text=True)
    pids = list(map(int, parent.stdout.readline().split()))
    assert all(_alive(p) for p in pids)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    left = [p for p in pids if _alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"outlived their parent: {left} of watcher, binary, grandchild {pids}"
