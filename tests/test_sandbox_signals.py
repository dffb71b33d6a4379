"""A solution that signals or exits itself before the verdict fails, in every privilege mode.

The solution returns the RIGHT answer whenever it survives its own signal, so a signal that is
silently ignored shows up as a pass. Before the namespace init (PID 1) was split from the
solution's process, every one of these passed as root: Linux drops signals a namespace's init
sends itself, SIGKILL and SIGSTOP included. (SIGTSTP/SIGTTIN/SIGTTOU are not here: the
solution's process group is orphaned, so the kernel discards job-control stops and the program
simply goes on, in every mode, as it would under any daemon.)
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agentic_repro.evaluators.sandbox import launch as sandbox
from agentic_repro.evaluators.sandbox import humaneval_program, run_program

ROOT = os.geteuid() == 0
PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"

# (name, statements run inside add() before `return a + b`)
SELF_SIGNALS = [
    ("os.kill SIGKILL", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
    ("os.kill 9", "import os\nos.kill(os.getpid(), 9)"),
    ("raise_signal SIGKILL", "import signal\nsignal.raise_signal(signal.SIGKILL)"),
    ("SIGTERM", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"),
    ("SIGSEGV sent", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"),
    ("real segfault", "import faulthandler\nfaulthandler._sigsegv()"),
    ("SIGABRT via abort", "import os\nos.abort()"),
    ("SIGINT", "import os, signal\nos.kill(os.getpid(), signal.SIGINT)"),
    ("SIGQUIT", "import os, signal\nos.kill(os.getpid(), signal.SIGQUIT)"),
    ("SIGHUP", "import os, signal\nos.kill(os.getpid(), signal.SIGHUP)"),
    ("SIGUSR1", "import os, signal\nos.kill(os.getpid(), signal.SIGUSR1)"),
    ("SIGSTOP", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)"),
    ("own process group", "import os, signal\nos.killpg(0, signal.SIGKILL)"),
    ("pid 0", "import os, signal\nos.kill(0, signal.SIGKILL)"),
    ("os._exit(0)", "import os\nos._exit(0)"),
    ("sys.exit(0)", "import sys\nsys.exit(0)"),
]


def _modes() -> list[tuple[bool, str]]:
    # isolation=process: "none" is the unprivileged harness's mode (nothing to drop); as root it runs the
    # same code path. "bwrap": the default isolation (a bubblewrap pod; the namespace flag does not apply)
    privileges = ["nobody", "nocaps", "none"] if ROOT else ["none"]
    return [(True, "bwrap")] + [(ns, priv) for ns in (True, False) for priv in privileges]


@pytest.fixture(params=_modes(), ids=lambda m: "bwrap" if m[1] == "bwrap" else
                f"process-{'namespace' if m[0] else 'no-namespace'}-{m[1]}")
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[bool, str]]:
    namespaces, privilege = request.param
    sandbox._stop_fork_server()  # the fork server starts its runners with the namespace setting
    monkeypatch.setattr(sandbox, "_SERVER", None)
    monkeypatch.setattr(sandbox, "USE_NAMESPACES", namespaces)
    monkeypatch.setitem(sandbox._CONFIG, "isolation", "bwrap" if privilege == "bwrap" else "process")
    monkeypatch.setitem(sandbox._PROBED, "privilege", privilege)
    yield request.param
    sandbox._stop_fork_server()
    sandbox._SERVER = None


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" for line in code.splitlines())


def test_the_honest_solution_passes_in_this_mode(mode: tuple[bool, str]) -> None:
    res = run_program(humaneval_program(PROMPT, "    return a + b\n", TEST, "add"), timeout_s=10)
    assert res.passed, res


@pytest.mark.parametrize("name, code", SELF_SIGNALS, ids=[n for n, _ in SELF_SIGNALS])
def test_self_signal_during_the_call_fails(mode: tuple[bool, str], name: str, code: str) -> None:
    completion = _indent(code) + "    return a + b\n"
    res = run_program(humaneval_program(PROMPT, completion, TEST, "add"), timeout_s=10)
    assert not res.passed and res.status in ("killed", "failed", "error"), res
    assert res.duration_s < 8, res  # SIGSTOP/SIGTSTP are caught when they happen, not at the timeout


@pytest.mark.parametrize("name, code", SELF_SIGNALS[:4] + SELF_SIGNALS[11:12] + SELF_SIGNALS[14:15],
                         ids=[n for n, _ in SELF_SIGNALS[:4] + SELF_SIGNALS[11:12] + SELF_SIGNALS[14:15]])
def test_self_signal_at_load_fails(mode: tuple[bool, str], name: str, code: str) -> None:
    completion = "    return a + b\n\n" + code + "\n"
    res = run_program(humaneval_program(PROMPT, completion, TEST, "add"), timeout_s=10)
    assert not res.passed, res


@pytest.mark.parametrize("name, code", SELF_SIGNALS[:3], ids=[n for n, _ in SELF_SIGNALS[:3]])
def test_plain_program_that_kills_itself_fails(mode: tuple[bool, str], name: str, code: str) -> None:
    res = run_program(code + "\n", timeout_s=10)
    assert not res.passed and res.status == "killed", res


def test_the_solution_is_not_pid_1_of_its_namespace(mode: tuple[bool, str]) -> None:
    """Where signals to oneself are dropped (namespace init), the solution must not be that init."""
    res = run_program(humaneval_program(PROMPT, "    import os\n    print('pid', os.getpid())\n"
                                                "    return a + b\n", TEST, "add"), timeout_s=10)
    assert res.passed, res
    assert "pid 1\n" not in res.stdout_tail


@pytest.mark.parametrize("fork_server", [True, False], ids=["fork-server", "direct"])
def test_verdicts_do_not_depend_on_signals_the_harness_inherited_ignored(monkeypatch: pytest.MonkeyPatch,
                                                                         fork_server: bool) -> None:
    """Under `nohup`, or as a background job of a script, the harness starts with SIGHUP, SIGQUIT and
    SIGINT ignored, and children inherit that: a solution that signals itself then survived and passed
    there (CI caught it), while it fails anywhere else. The sandbox resets them."""
    import signal

    sandbox._stop_fork_server()
    monkeypatch.setattr(sandbox, "_SERVER", None)
    monkeypatch.setattr(sandbox, "USE_FORK_SERVER", fork_server)
    previous = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT)}
    try:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        for name in ("SIGHUP", "SIGQUIT", "SIGINT"):
            code = f"import os, signal\nos.kill(os.getpid(), signal.{name})"
            res = run_program(humaneval_program(PROMPT, _indent(code) + "    return a + b\n", TEST, "add"),
                              timeout_s=10)
            assert not res.passed, (name, res)
        assert run_program(humaneval_program(PROMPT, "    return a + b\n", TEST, "add"), timeout_s=10).passed
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sandbox._stop_fork_server()
        sandbox._SERVER = None
