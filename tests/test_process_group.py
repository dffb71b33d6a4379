"""stop_process_group: every server the harness starts ends with its whole group, asked first, killed if stuck."""

import os
import signal
import subprocess
import sys
import time

from agentic_repro.harness.process_group import stop_process_group

# a parent that starts a grandchild in its group, then waits; with IGNORE it ignores SIGTERM (a stuck server)
PROGRAM = """
import signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(child.pid, flush=True)
while True:
    time.sleep(1)
"""


def _start(mode: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, mode], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (reaped by init later) is gone
        return f.read().split(")")[-1].split()[0] != "Z"


def _gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_polite_server_ends_on_sigterm_and_its_group_with_it():
    proc, grandchild = _start("polite")
    start = time.monotonic()
    rc = stop_process_group(proc, timeout=10)
    assert rc == -signal.SIGTERM and time.monotonic() - start < 5  # asked, not killed
    if _alive(grandchild):  # it ignores SIGTERM once its handler is set: clean up
        os.kill(grandchild, signal.SIGKILL)


def test_a_server_that_ignores_sigterm_is_killed_with_its_group_after_the_timeout():
    proc, grandchild = _start("ignore")
    start = time.monotonic()
    rc = stop_process_group(proc, timeout=0.5)
    assert rc == -signal.SIGKILL and 0.5 <= time.monotonic() - start < 5
    assert _gone(grandchild)


def test_not_polite_waits_for_the_caller_s_own_request_then_kills():
    proc, grandchild = _start("polite")
    start = time.monotonic()
    rc = stop_process_group(proc, timeout=0.5, polite=False)  # no SIGTERM sent: it would have ended at once
    assert rc == -signal.SIGKILL and time.monotonic() - start >= 0.5
    assert _gone(grandchild)
