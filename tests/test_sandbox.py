"""The sandbox: canonical programs pass, and no trick of the code under test makes a fail pass.

Every adversarial completion below returns a WRONG answer (or none) and tries to get the
verdict anyway; each must fail and the harness (this process) must stay alive.
"""
from __future__ import annotations

import asyncio
import json
import os
import pickle
import socket
import time
from pathlib import Path
from collections.abc import Iterator

import pytest

from agentic_repro.evaluators.sandbox import launch
from agentic_repro.evaluators.sandbox import ExecResult, Program, humaneval_program, mbpp_program, run_program, run_program_async

DATA = Path(os.environ.get("AGENTIC_REPRO_DATA") or "data")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ROOT = os.geteuid() == 0

PROMPT = '''import math


def add(a, b):
    """Return a + b.
    >>> add(2, 3)
    5
    """
'''
TEST = '''

METADATA = {}


def check(candidate):
    assert candidate(2, 3) == 5
    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9
    import math
    assert math.isclose(candidate(1, 1), 2)
    assert isinstance(candidate(1, 2), int)
    assert all([candidate(1, 1) == 2, candidate(-1, 1) == 0])
'''
GOOD = "    return a + b\n"


def he(completion: str) -> Program:
    program = humaneval_program(PROMPT, completion, TEST, "add")
    assert isinstance(program, Program)
    return program


def fails(completion: str, **kw: object) -> ExecResult:
    res = run_program(he(completion), **{"timeout_s": 10.0, **kw})
    assert not res.passed, res
    assert res.status != "passed"
    return res


def test_canonical_passes_and_wrong_answer_fails() -> None:
    res = run_program(he(GOOD))
    assert res.passed and res.status == "passed", res
    assert res.duration_s < 10
    res = fails("    return a - b\n")
    assert res.status == "failed" and "AssertionError" in res.detail


# ---- forging attempts --------------------------------------------------------------------------

def test_rebinding_builtins_at_load_does_not_help() -> None:
    fails("    return 0\n"
          "__builtins__['abs'] = lambda x: 0\n"
          "import builtins\n"
          "builtins.all = lambda *a: True\n"
          "builtins.abs = lambda x: 0\n"
          "builtins.isinstance = lambda *a: True\n"
          "builtins.AssertionError = type('Nope', (Exception,), {})\n")


def test_rebinding_builtins_at_call_time_does_not_help() -> None:
    fails("    import builtins, math\n"
          "    builtins.abs = lambda x: 0\n"
          "    builtins.all = lambda *a: True\n"
          "    builtins.isinstance = lambda *a: True\n"
          "    math.isclose = lambda *a, **k: True\n"
          "    return 0\n")


def test_patching_module_functions_does_not_help() -> None:
    fails("    return 0\n"
          "import math\n"
          "math.isclose = lambda *a, **k: True\n")


def test_sys_exit_zero_is_a_failure() -> None:
    assert fails("    return 0\nimport sys\nsys.exit(0)\n").status == "error"  # at load
    fails("    import sys\n    sys.exit(0)\n")  # during a call


def test_os_exit_zero_is_a_failure() -> None:
    fails("    return 0\nimport os\nos._exit(0)\n")
    fails("    import os\n    os._exit(0)\n")


def test_killing_itself_or_its_parent_is_a_failure() -> None:
    fails("    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    return 0\n")
    fails("    import os, signal\n"
          "    for pid in (os.getppid(), 0):\n"
          "        try:\n"
          "            os.kill(pid, signal.SIGKILL)\n"
          "        except OSError:\n"
          "            pass\n"
          "    return 0\n")


def test_printing_fake_pass_markers_is_a_failure() -> None:
    res = fails("    print('passed'); print('PASS passed \"\"'); print('OK'); return 0\n"
                "print('passed')\n")
    assert "passed" in res.stdout_tail  # it printed; it did not matter


def test_writing_to_every_fd_is_a_failure() -> None:
    fails("    import os\n"
          "    for fd in range(0, 64):\n"
          "        for msg in (b'passed\\n', b'PASS passed \"\"\\n', b'\\x00\\x00\\x00\\x0b{\"ok\": 5}'):\n"
          "            try:\n"
          "                os.write(fd, msg)\n"
          "            except OSError:\n"
          "                pass\n"
          "    return 0\n")


def test_closing_fds_is_a_failure() -> None:
    fails("    import os\n"
          "    for fd in range(3, 64):\n"
          "        try:\n"
          "            os.close(fd)\n"
          "        except OSError:\n"
          "            pass\n"
          "    return 5\n")


def test_hunting_for_the_nonce_is_a_failure() -> None:
    """Walk every frame and object in the solution's process, write anything hex to every fd."""
    fails("    import gc, os, re, sys\n"
          "    found = set()\n"
          "    f = sys._getframe()\n"
          "    while f is not None:\n"
          "        found.update(v for v in f.f_locals.values() if isinstance(v, str))\n"
          "        f = f.f_back\n"
          "    for o in gc.get_objects():\n"
          "        if isinstance(o, dict):\n"
          "            found.update(v for v in o.values() if isinstance(v, str))\n"
          "    for s in found:\n"
          "        if re.fullmatch('[0-9a-f]{32}', s):\n"
          "            for fd in range(0, 64):\n"
          "                try:\n"
          "                    os.write(fd, (s + ' passed \"\"\\n').encode())\n"
          "                except OSError:\n"
          "                    pass\n"
          "    return 0\n")


def test_always_equal_object_is_a_failure() -> None:
    res = fails("    class Eq:\n"
                "        def __eq__(self, other): return True\n"
                "        def __ne__(self, other): return False\n"
                "        def __lt__(self, other): return True\n"
                "        def __sub__(self, other): return 0\n"
                "        def __rsub__(self, other): return 0\n"
                "        def __abs__(self): return 0\n"
                "        def __bool__(self): return True\n"
                "    return Eq()\n")
    assert "plain data" in res.stderr_tail


def test_builtin_types_cannot_be_patched_and_subclasses_become_plain_values() -> None:
    # Patching the CLASS of a builtin type is impossible in CPython: the attempt raises.
    fails("    try:\n"
          "        int.__eq__ = lambda self, other: True\n"
          "    except TypeError:\n"
          "        pass\n"
          "    else:\n"
          "        return 5\n"
          "    return 0\n")
    # A subclass keeps its own __eq__ in its own process; the test sees only the plain value.
    fails("    class Liar(int):\n"
          "        def __eq__(self, other): return True\n"
          "        __hash__ = int.__hash__\n"
          "    return Liar(0)\n")
    # ...which is why an honest subclass still passes.
    res = run_program(he("    class Honest(int):\n        pass\n"
                         "    return Honest(a + b) if isinstance(a + b, int) else a + b\n"))
    assert res.passed, res


def test_redefining_check_helpers_does_not_help() -> None:
    """HumanEval/38-style: the test uses a prompt helper; the completion redefines it."""
    prompt = ('def encode(s: str) -> str:\n    return s[::-1]\n\n\n'
              'def decode(s: str) -> str:\n    """Inverse of encode."""\n')
    test = "def check(candidate):\n    for w in ['abc', 'hello']:\n        assert candidate(encode(w)) == w\n"
    cheat = "    return s\n\n\ndef encode(s):\n    return s\n"
    assert not run_program(humaneval_program(prompt, cheat, test, "decode")).passed
    assert run_program(humaneval_program(prompt, "    return s[::-1]\n", test, "decode")).passed


# ---- containment -------------------------------------------------------------------------------

def test_infinite_loop_times_out_quickly() -> None:
    start = time.monotonic()
    res = fails("    while True:\n        pass\n", timeout_s=1.5)
    assert res.status == "timeout"
    assert time.monotonic() - start < 6
    res = run_program("while True:\n    pass\n", timeout_s=1.0)
    assert res.status == "timeout" and not res.passed


def test_fork_bomb_is_a_failure() -> None:
    start = time.monotonic()
    fails("    import os\n"
          "    while True:\n"
          "        os.fork()\n", timeout_s=5)
    fails("    import subprocess\n    subprocess.run(['true'])\n    return 5\n")
    fails("    import os\n    os.system('true')\n    return 5\n")
    assert time.monotonic() - start < 8


def test_huge_allocation_is_a_memory_failure() -> None:
    res = fails("    x = bytearray(4 * 1024 ** 3)\n    return a + b\n", memory_mb=512)
    assert res.status == "memory", res
    res = run_program(he("    return a + b\nx = bytearray(4 * 1024 ** 3)\n"), memory_mb=512)
    assert res.status == "memory" and not res.passed


def test_no_network_even_to_loopback() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        # returns the RIGHT answer only if it reached the listener
        fails("    import socket\n"
              "    try:\n"
              f"        socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n"
              "        return a + b\n"
              "    except OSError:\n"
              "        return 0\n")
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


@pytest.fixture
def process_isolation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """isolation=process for one test (the mode a user must choose explicitly): a fork server of its own."""
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)
    monkeypatch.setitem(launch._CONFIG, "isolation", "process")
    monkeypatch.setitem(launch._PROBED, "privilege", None)  # probed afresh, restored after
    monkeypatch.setitem(launch._PROBED, "refusal", None)
    yield
    launch._stop_fork_server()
    launch._SERVER = None


def test_files_land_in_the_pods_scratch_which_is_emptied_between_runs(tmp_path: Path) -> None:
    """bwrap: the solution works in the pod's /scratch tmpfs; nothing it leaves there (files,
    unreadable directories) is seen by the next run, and nothing lands on the harness's disk."""
    outside = tmp_path / "escape.txt"
    os.chmod(tmp_path, 0o777)
    leave = ("import os\ndef f():\n    print(os.getcwd(), sorted(os.listdir('.')), sorted(os.listdir('/tmp')))\n"
             "    open('marker.txt', 'w').write('x')\n    open('/tmp/t.txt', 'w').write('x')\n"
             "    os.makedirs('d/e')\n    os.chmod('d', 0)\n"
             f"    try:\n        open({str(outside)!r}, 'w').write('x')\n    except OSError:\n        pass\n"
             "    return 1\n")
    for _ in range(3):  # sequential runs share a pod
        res = run_program(Program("", prelude="", solution=leave, test="assert f() == 1\n", entry_points=("f",)))
        assert res.passed, res
        assert res.stdout_tail.strip().splitlines()[0] == "/scratch [] []", res
    assert not Path("marker.txt").exists() and not outside.exists()


def test_files_land_in_a_temporary_directory_that_is_removed(tmp_path: Path, process_isolation: None) -> None:
    outside = tmp_path / "escape.txt"
    res = run_program(he("    open('marker.txt', 'w').write('x')\n"
                         f"    try:\n        open({str(outside)!r}, 'w').write('x')\n"
                         "    except OSError:\n        pass\n"
                         "    import os\n    print(os.getcwd())\n"
                         "    return a + b\n"))
    assert res.passed, res
    cwd = res.stdout_tail.strip().splitlines()[0]
    assert "agentic-sandbox-" in cwd and not Path("marker.txt").exists()
    launch._flush_trash()
    assert not Path(cwd).exists()
    if ROOT:  # as root the solution runs as nobody: it cannot write where root owns the directory
        assert not outside.exists()


# ---- protocol details --------------------------------------------------------------------------

def test_exceptions_keep_their_builtin_type() -> None:
    prompt = "def f(x):\n    '''Raise on negatives.'''\n"
    test = ("def check(candidate):\n"
            "    try:\n        candidate(-1)\n    except ValueError:\n        pass\n"
            "    else:\n        raise AssertionError('no ValueError')\n"
            "    assert candidate(2) == 2\n")
    good = "    if x < 0:\n        raise ValueError('neg')\n    return x\n"
    assert run_program(humaneval_program(prompt, good, test, "f")).passed
    swallow = "    if x < 0:\n        raise SystemExit(0)\n    return x\n"  # escapes `except ValueError`
    assert not run_program(humaneval_program(prompt, swallow, test, "f")).passed


def test_mbpp_programs_with_solution_classes_and_json_imports() -> None:
    code = ("class Pair(object):\n"
            "    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"
            "def max_chain_length(arr, n):\n"
            "    best = [1] * n\n"
            "    for i in range(1, n):\n"
            "        for j in range(i):\n"
            "            if arr[i].a > arr[j].b and best[i] < best[j] + 1:\n"
            "                best[i] = best[j] + 1\n"
            "    return max(best)\n")
    tests = ["assert max_chain_length([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3"]
    assert run_program(mbpp_program(code, "[]", tests)).passed
    setup = "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n"
    node = ("class Node:\n    def __init__(self, d):\n        self.data = d\n        self.left = self.right = None\n"
            "def height(n):\n    return 0 if n is None else 1 + max(height(n.left), height(n.right))\n")
    assert run_program(mbpp_program(node, None, ["assert height(root) == 3"], setup)).passed
    iso = "import math\ndef area(r):\n    return math.pi * r * r\n"
    prog = mbpp_program(iso, json.dumps(["import math"]), ["assert math.isclose(area(1), 3.14159, rel_tol=1e-3)"])
    assert run_program(prog).passed
    summed = "def sum(a, b):\n    return a + b\n"  # MBPP task 126 names its function after a builtin
    prog = mbpp_program(summed, [], ["assert sum(2, 3) == 5"])
    assert prog.entry_points == ("sum",) and run_program(prog).passed
    typed = "def drop(t, ty):\n    return [x for x in t if not isinstance(x, ty)]\n"
    assert run_program(mbpp_program(typed, [], ["assert drop((1, 'a', 2.5), int) == ['a', 2.5]"])).passed
    regex = "import re\ndef starts_a(s):\n    return re.match('a', s)\n"
    assert run_program(mbpp_program(regex, [], ["assert starts_a('abc')", "assert not starts_a('xa')"])).passed


def test_plain_programs_and_output_capture() -> None:
    res = run_program("print('hello from the sandbox')\n")
    assert res.passed and "hello from the sandbox" in res.stdout_tail
    assert not run_program("assert 1 == 2\n").passed
    assert run_program("raise SystemExit(0)\n").status == "error"
    assert not run_program("import os\nos._exit(0)\n").passed
    assert run_program("def f(:\n").status == "error"


def test_program_pickles_with_its_split() -> None:
    program = he(GOOD)
    clone = pickle.loads(pickle.dumps(program))
    assert isinstance(clone, Program) and clone == program and clone.test == program.test
    assert clone.entry_points == ("add",)
    assert "check(add)" in str(program)


def test_async_runs_concurrently_and_keep_the_loop_free() -> None:
    async def main() -> tuple[list[ExecResult], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        results = await asyncio.gather(
            run_program_async(he(GOOD)), run_program_async(he("    return 0\n")),
            run_program_async(he("    while True:\n        pass\n"), timeout_s=1.0),
            run_program_async("print(1)\n"))
        t.cancel()
        return list(results), ticks

    results, ticks = asyncio.run(main())
    assert [r.status for r in results] == ["passed", "failed", "timeout", "passed"]
    assert ticks >= 20  # the event loop kept running during the 1 s timeout


def test_direct_spawn_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "USE_FORK_SERVER", False)
    assert run_program(he(GOOD)).passed
    assert not run_program(he("    return 0\nimport os\nos._exit(0)\n")).passed
    assert run_program(he("    while True:\n        pass\n"), timeout_s=1.0).status == "timeout"


def _humaneval_rows() -> list[dict[str, str]]:
    for path in (DATA / "humaneval" / "HumanEval.jsonl", SHARED / "humaneval" / "HumanEval.jsonl"):
        if path.is_file():
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    raise FileNotFoundError("HumanEval.jsonl is missing: run `make data`")


def test_humaneval_sample_canonical_pass_and_broken_fail() -> None:
    rows = _humaneval_rows()[::20]

    async def main() -> list[ExecResult]:
        progs = [humaneval_program(r["prompt"], r["canonical_solution"], r["test"], r["entry_point"]) for r in rows]
        progs += [humaneval_program(r["prompt"], "    return None\n", r["test"], r["entry_point"]) for r in rows]
        return await asyncio.gather(*(run_program_async(p) for p in progs))

    results = asyncio.run(main())
    n = len(rows)
    assert all(r.passed for r in results[:n]), [r for r in results[:n] if not r.passed]
    assert not any(r.passed for r in results[n:])


def _server_children() -> list[int]:
    server = launch._fork_server()
    assert server is not None
    pid = server.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def _grandchildren(pid: int) -> list[int]:
    """The processes two levels below `pid` (a runner's pod init, or its solution process)."""
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            for child in fh.read().split():
                with open(f"/proc/{child}/task/{child}/children") as gh:
                    out += [int(p) for p in gh.read().split()]
    except FileNotFoundError:
        pass
    return out


def _fresh_server(monkeypatch: pytest.MonkeyPatch) -> None:
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)


def test_runners_persist_and_a_test_cannot_change_the_next_runs_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs reuse the fork server's trusted runners, so what one benchmark test changes in the
    runner (random's state, sys.path, the recursion limit, the environment, the working
    directory) is put back before the next run on that runner."""
    _fresh_server(monkeypatch)
    probe = ("import os, random, sys\n"
             "STATE = (random.random(), tuple(sys.path), sys.getrecursionlimit(), os.environ.get('LEAK'),"
             " os.getcwd())\n")
    meddle = ("import os, random, sys\n"
              "random.seed(12345)\nsys.path.append('/nowhere')\nsys.setrecursionlimit(77)\n"
              "os.environ['LEAK'] = 'yes'\nos.chdir('/tmp')\n")

    def run(test: str) -> ExecResult:
        return run_program(Program("", prelude="", solution="def f():\n    return 1\n",
                                   test=test + "assert f() == 1\n", entry_points=("f",)), timeout_s=10)

    assert run(probe + "assert STATE[3] is None\n").passed
    before = _server_children()
    for _ in range(5):  # sequential runs: one runner serves them all
        assert run(meddle).passed
        res = run(probe + "assert STATE[1][-1] != '/nowhere' and STATE[2] != 77 and STATE[3] is None\n"
                          "assert STATE[4] == '/'\n"  # the runner's own cwd, never the solution's (issue 28)
                          "random.seed(12345)\nassert random.random() != STATE[0]\n")
        assert res.passed, res
    deadline = time.monotonic() + 5
    while True:  # the pod makers of killed pods exit just after the verdicts
        after = _server_children()
        if len(after) <= launch.SPARE_RUNNERS + 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(after) <= launch.SPARE_RUNNERS + 1, after  # one runner served every run, plus the spare pods
    assert set(before) & set(after)  # pods come and go; the runner stays


def test_what_a_test_left_for_the_collector_cannot_close_the_next_runs_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark test runs in the runner (the workflow relay's socket lives there). What it leaves in a reference
    cycle is freed by the collector, maybe during a later run; the runner then reused the fd numbers, so collecting
    the old socket closed the next run's: the workflow relay failed with EBADF after its first calls ("the sandbox
    closed the channel"), a correct workflow crashed, was re-run and billed twice (CI, issue 28's follow-up)."""
    _fresh_server(monkeypatch)
    test = ("import gc, socket\n"
            "a, b = socket.socketpair()\n"
            "keep = [a, b]\nkeep.append(keep)  # a cycle: only the collector frees it\n"
            "gc.collect()  # an earlier run's cycle, were it still alive, is freed here\n"
            "a.sendall(b'x')\nassert b.recv(1) == b'x'\n"
            "assert f() == 1\n")
    for _ in range(4):  # sequential runs: one runner serves them all
        res = run_program(Program("", prelude="", solution="def f():\n    return 1\n", test=test, entry_points=("f",)),
                          timeout_s=10)
        assert res.passed, res


@pytest.mark.parametrize("how", ["async", "threads"])
def test_waiting_for_a_free_runner_is_not_the_programs_time(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A run's clock starts when a runner has it with its solution process (launch.QUEUE_WAIT_S): with one runner,
    three runs of ~0.7 s sent at once with a 1.5 s timeout all pass; counted from the request, the third (which waited
    ~1.4 s for the runner) timed out, a wrong answer caused by the sandbox. Three that sleep still time out, each 1 s
    after a runner took it (never later: the runner's first byte starts the clock)."""
    import types
    from concurrent.futures import ThreadPoolExecutor

    from agentic_repro.evaluators.sandbox import child
    source = child.source().replace("MAX_RUNNERS = 64", "MAX_RUNNERS = 1")
    assert "MAX_RUNNERS = 1 " in source
    monkeypatch.setattr(launch, "runner_program", types.SimpleNamespace(source=lambda: source))
    monkeypatch.setattr(launch, "SPARE_RUNNERS", 1)
    _fresh_server(monkeypatch)
    slow = he("    import time\n    if 'slept' not in globals():  # once per run (the test calls add 6 times)\n"
              "        globals()['slept'] = time.sleep(0.7) or 1\n    return a + b\n")
    assert run_program(he(GOOD)).passed  # the probe and the one runner's pod are up

    def three(program: Program, timeout_s: float) -> list[ExecResult]:
        if how == "async":
            async def main() -> list[ExecResult]:
                return list(await asyncio.gather(*(run_program_async(program, timeout_s=timeout_s) for _ in range(3))))
            return asyncio.run(main())
        with ThreadPoolExecutor(3) as pool:
            return list(pool.map(lambda _: run_program(program, timeout_s=timeout_s), range(3)))

    results = three(slow, 1.5)
    assert [r.status for r in results] == ["passed"] * 3, results
    monkeypatch.setattr(launch, "QUEUE_WAIT_S", 8.0)  # a run no runner took by then: an infrastructure error
    sleepers = three(he("    import time\n    time.sleep(60)\n    return a + b\n"), 1.0)  # wall clock, not CPU
    assert [r.status for r in sleepers] == ["timeout"] * 3 and not any(r.infrastructure for r in sleepers), sleepers
    launch._stop_fork_server()


def test_a_timed_out_run_takes_its_runner_and_the_next_run_still_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_server(monkeypatch)
    assert run_program(he(GOOD)).passed
    res = run_program(Program("", prelude="", solution="def f():\n    return 1\n",
                              test="while True:\n    pass\n", entry_points=("f",)), timeout_s=1.0)
    assert res.status == "timeout" and not res.passed
    results = [run_program(he(GOOD)) for _ in range(3)] + [run_program(he("    return 0\n"))]
    assert [r.status for r in results] == ["passed", "passed", "passed", "failed"]


def test_clean_run_directories_are_reused_and_dirty_ones_are_not(monkeypatch: pytest.MonkeyPatch,
                                                                 process_isolation: None) -> None:
    """isolation=process: a finished run's directory is reused only as it was made: empty work/, mode 0700."""
    _fresh_server(monkeypatch)
    monkeypatch.setattr(launch, "_FREE_DIRS", {})
    show = "    import os, stat\n    print(os.getcwd(), oct(stat.S_IMODE(os.stat('.').st_mode)), sorted(os.listdir('.')))\n"

    def cwd_of(extra: str = "") -> tuple[str, str, str]:
        res = run_program(he(show + extra + "    return a + b\n"))
        assert res.passed, res
        cwd, mode, listing = res.stdout_tail.strip().splitlines()[0].split(" ", 2)
        return cwd, mode, listing

    first = cwd_of("    os.chmod('.', 0o777)\n")
    second = cwd_of()
    assert second[0] == first[0] and second[1] == "0o700" and second[2] == "[]"  # reused, mode reset
    dirty = cwd_of("    open('left-behind.txt', 'w').write('x')\n")
    after = cwd_of()
    assert after[0] != dirty[0] and after[2] == "[]"  # never a directory with an earlier run's file in it
    launch._flush_trash()
    assert not Path(dirty[0]).exists()


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespace", "no-namespace"])
def test_what_a_solution_starts_does_not_outlive_its_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         namespaces: bool, process_isolation: None) -> None:
    """The pod's init sweeps its namespace after each run (without one: the solution's process
    group). The audit hook normally refuses os.fork, so this test lifts it (in a copy of the
    runner program) to stand for code that gets past it: the grandchild the solution leaves
    behind must be dead before it can write."""
    import types

    from agentic_repro.evaluators.sandbox import child
    source = child.source().replace('"os.fork", ', "")  # from both hooks (process, pod)
    assert '"os.fork"' not in source
    monkeypatch.setattr(launch, "runner_program", types.SimpleNamespace(source=lambda: source))
    monkeypatch.setattr(launch, "USE_NAMESPACES", namespaces)
    _fresh_server(monkeypatch)
    os.chmod(tmp_path, 0o777)
    marker = tmp_path / "outlived.txt"
    leave = (f"    import os, time\n    if os.fork() == 0:\n        time.sleep(0.8)\n"
             f"        open({str(marker)!r}, 'w').write('alive')\n        os._exit(0)\n    return a + b\n")
    res = run_program(he(leave))
    assert res.passed, res  # the solution itself is right; what it started is the point
    results = [run_program(he(GOOD)) for _ in range(2)]
    time.sleep(1.5)
    assert not marker.exists()
    assert all(r.passed for r in results)
    launch._stop_fork_server()


def test_what_a_solution_starts_does_not_outlive_its_run_in_a_bwrap_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """bwrap: the same with the audit hook lifted; the next run (same runner, same pod) returns the
    RIGHT answer only if the grandchild survived the sweep and wrote into /scratch."""
    monkeypatch.setattr(launch, "AUDIT_HOOK", False)
    _fresh_server(monkeypatch)
    leave = ("    import os, time\n    if os.fork() == 0:\n        time.sleep(0.8)\n"
             "        open('/scratch/outlived.txt', 'w').write('alive')\n        os._exit(0)\n    return a + b\n")
    assert run_program(he(leave)).passed  # the solution itself is right; what it started is the point
    fails("    import os, time\n    time.sleep(1.5)\n    return a + b if os.path.exists('/scratch/outlived.txt') else 0\n")
    launch._stop_fork_server()


def test_a_runner_whose_pod_died_replaces_it_before_the_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the code's failure, and not the next problem's either: a bwrap runner whose pod died replaces it before
    the next run (issue 28: the run after a pod-killing program used to get "the runner's pod is gone")."""
    import signal as _signal

    _fresh_server(monkeypatch)
    assert run_program(he(GOOD)).passed
    deadline = time.monotonic() + 10
    while not all(_grandchildren(r) for r in _server_children()) and time.monotonic() < deadline:
        time.sleep(0.05)  # every runner has its pod, with the next solution process forked (bwrap takes a while)
    for runner in _server_children():  # kill every runner's pod (its reaper; under bwrap, bwrap and the pod's
        below = _grandchildren(runner)  # init below it), leaving the runners
        try:
            with open(f"/proc/{runner}/task/{runner}/children") as fh:
                for pod in [int(p) for p in fh.read().split()] + below:
                    os.kill(pod, _signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            pass
    time.sleep(0.2)
    for _ in range(3):
        res = run_program(he(GOOD))
        assert res.passed and not res.infrastructure, res
    wrong = run_program(he("    return 0\n"))
    assert wrong.status == "failed" and not wrong.infrastructure
