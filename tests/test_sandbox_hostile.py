"""Hostile programs through every untrusted entry point: each returns the RIGHT answer only if the
forbidden thing worked (read the answers, a root-only file, the harness's /proc; wrote outside its
scratch; ran a shell; traced a process; reached a harness socket; switched the audit hook off), so a
guard that silently stops working shows up as a pass, and every test here asserts a failure.

Isolation modes (``mode`` below): ``bwrap`` (the default: the pod's view, namespaces and no
capabilities, plus the audit hook), ``bwrap-no-hook`` (the same with the audit hook lifted: the
operating-system boundary alone must hold), and ``process`` (``sandbox.isolation=process``, which
has no filesystem isolation: only the guards it claims, the audit hook's, are tested there).
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest

from agentic_repro.evaluators.code_tasks import MBPP, HumanEval
from agentic_repro.evaluators.sandbox import Program, humaneval_program, launch, run_program
from agentic_repro.evaluators.sandbox import verdict as verdict_mod
from agentic_repro.harness.types import Problem

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
ROOT = os.geteuid() == 0
TOKEN = "hostile-" + secrets.token_hex(8)
PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


@pytest.fixture(params=["bwrap", "bwrap-no-hook"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _mode(request.param, monkeypatch)


@pytest.fixture(params=["bwrap", "bwrap-no-hook", "process"])
def any_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _mode(request.param, monkeypatch)


@pytest.fixture
def no_hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _mode("bwrap-no-hook", monkeypatch)


@pytest.fixture(params=["bwrap", "process"])
def hooked_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _mode(request.param, monkeypatch)


def _mode(name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)
    monkeypatch.setitem(launch._CONFIG, "isolation", "process" if name == "process" else "bwrap")
    monkeypatch.setitem(launch._PROBED, "privilege", None)  # probed afresh, restored after
    monkeypatch.setitem(launch._PROBED, "refusal", None)
    monkeypatch.setattr(launch, "AUDIT_HOOK", name != "bwrap-no-hook")
    if name != "process":
        assert launch._privilege_mode() == "bwrap", launch._PROBED.get("refusal")
    yield name
    launch._stop_fork_server()
    launch._SERVER = None


def _body(code: str) -> str:
    return "".join(f"    {line}\n" for line in code.strip("\n").splitlines())


def must_fail(body: str, **kw: Any) -> Any:
    """`body` runs inside add(a, b) and decides what add returns."""
    return must_fail_completion(_body(body), **kw)


def must_fail_completion(completion: str, **kw: Any) -> Any:
    """The completion of add's prompt as given (module-level code after the function runs at load)."""
    res = run_program(humaneval_program(PROMPT, completion, TEST, "add"), **{"timeout_s": 20.0, **kw})
    assert not res.passed, res
    assert not res.infrastructure, res
    return res


# ---- what the solution could read -----------------------------------------------------------------

@pytest.fixture(scope="module")
def planted() -> Iterator[dict[str, str]]:
    """Files holding TOKEN where the harness keeps what untrusted code must not see: the data folder
    (made for the test if absent, like the others), the results folder, the response cache's folder,
    the repository itself, and a root-only 0600 file outside the repository."""
    made: list[Path] = []
    dirs: list[Path] = []
    targets: dict[str, str] = {}
    for name, folder in (("data", REPO / "data"), ("results", REPO / "results"), ("cache", REPO / ".cache"),
                         ("repo", REPO)):
        if not folder.exists():
            folder.mkdir()
            dirs.append(folder)
        path = folder / f".{TOKEN}.txt"
        path.write_text(TOKEN)
        os.chmod(path, 0o644)  # world-readable: only the view keeps it out of reach
        made.append(path)
        targets[name] = str(path)
    secret = Path("/root" if ROOT and os.path.isdir("/root") else "/tmp") / f".{TOKEN}-0600"
    secret.write_text(TOKEN)
    os.chmod(secret, 0o600)
    made.append(secret)
    targets["root-only 0600"] = str(secret)
    yield targets
    for path in made:
        path.unlink(missing_ok=True)
    for folder in dirs:
        try:
            folder.rmdir()
        except OSError:  # something else (a run's response cache) moved in meanwhile: leave it
            pass


def _answers_file() -> Path | None:
    for path in (REPO / "data" / "humaneval" / "HumanEval.jsonl", SHARED / "humaneval" / "HumanEval.jsonl"):
        if path.is_file():
            return path
    return None


@pytest.mark.parametrize("target", ["data", "results", "cache", "repo", "root-only 0600"])
def test_reading_the_harness_files_fails(mode: str, planted: dict[str, str], target: str) -> None:
    must_fail(f"try:\n    found = open({planted[target]!r}).read() == {TOKEN!r}\n"
              "except OSError:\n    found = False\nreturn a + b if found else 0\n")


def test_reading_the_benchmark_answers_and_listing_work_fails(mode: str) -> None:
    answers = _answers_file()
    if answers is not None:
        must_fail(f"try:\n    found = 'canonical_solution' in open({str(answers)!r}).read()\n"
                  "except OSError:\n    found = False\nreturn a + b if found else 0\n")
    must_fail(f"import os\ntry:\n    found = len(os.listdir({str(REPO)!r})) > 0 or len(os.listdir('/work')) > 0\n"
              "except OSError:\n    found = False\nreturn a + b if found else 0\n")


@pytest.mark.parametrize("what", ["environ", "cmdline", "mem", "fd"])
def test_reading_the_harness_process_fails(mode: str, what: str) -> None:
    pid = os.getpid()
    if what == "mem":
        probe = f"f = open('/proc/{pid}/mem', 'rb')\nfound = True\n"  # opening it is the leak
    elif what == "fd":
        probe = f"import os\nfound = len(os.listdir('/proc/{pid}/fd')) > 0\n"
    else:
        probe = f"found = b'python' in open('/proc/{pid}/{what}', 'rb').read().lower() or b'PATH=' in " \
                f"open('/proc/{pid}/{what}', 'rb').read()\n"
    must_fail("try:\n" + _body(probe) + "except OSError:\n    found = False\nreturn a + b if found else 0\n")


# ---- what the solution could change --------------------------------------------------------------

def test_writing_outside_the_scratch_fails(mode: str, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)
    host = tmp_path / "escape.txt"
    for target in (str(host), f"{REPO}/escape.txt", "/escape.txt", f"{launch.POD_SITE}/escape.py",
                   os.path.join(os.path.dirname(os.__file__), "escape.py"), "/etc/escape", "/dev/escape"):
        must_fail(f"try:\n    open({target!r}, 'w').write('x')\n    wrote = True\n"
                  "except OSError:\n    wrote = False\nreturn a + b if wrote else 0\n")
    assert not host.exists() and not (REPO / "escape.txt").exists()


# ---- processes, shells, tracing ---------------------------------------------------------------------

SHELLS = {
    "os.system": "import os\nran = os.system('exit 7') >> 8 == 7\n",
    "subprocess": "import subprocess\nran = subprocess.run(['/bin/sh', '-c', 'exit 7']).returncode == 7\n",
    "posix_spawn": "import os\npid = os.posix_spawn('/bin/sh', ['sh', '-c', 'exit 7'], {})\n"
                   "ran = os.waitpid(pid, 0)[1] >> 8 == 7\n",
    "fork+exec": "import os\npid = os.fork()\nif pid == 0:\n    try:\n        os.execv('/bin/sh', ['sh', '-c', 'exit 7'])\n"
                 "    finally:\n        os._exit(1)\nran = os.waitpid(pid, 0)[1] >> 8 == 7\n",
    "ctypes system": "import ctypes\nran = ctypes.CDLL(None).system(b'exit 7') >> 8 == 7\n",
}


@pytest.mark.parametrize("how", list(SHELLS))
def test_running_a_shell_fails(any_mode: str, how: str) -> None:
    """bwrap: there is no /bin/sh in the view (and the audit hook refuses to try); process: the
    audit hook is what refuses it, so allowing e.g. os.system there fails this test."""
    must_fail("try:\n" + _body(SHELLS[how]) + "except BaseException:\n    ran = False\nreturn a + b if ran else 0\n")


@pytest.mark.parametrize("whom", ["harness", "parent"])
def test_ptrace_fails(any_mode: str, whom: str) -> None:
    target = str(os.getpid()) if whom == "harness" else "os.getppid()"
    must_fail(f"import os\ntry:\n    import ctypes\n    libc = ctypes.CDLL(None, use_errno=True)\n"
              f"    traced = libc.ptrace(16, {target}, None, None) == 0\n"  # PTRACE_ATTACH
              "except BaseException:\n    traced = False\nreturn a + b if traced else 0\n")


def test_reaching_a_harness_unix_socket_fails(any_mode: str, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)
    path = tmp_path / "harness.sock"
    named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    named.bind(str(path))
    os.chmod(path, 0o777)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + TOKEN)
    try:
        for sock in (named, abstract):
            sock.listen(5)
        for address in (str(path), "\0" + TOKEN):
            must_fail(f"import socket\ntry:\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                      f"    s.connect({address!r})\n    reached = True\n"
                      "except BaseException:\n    reached = False\nreturn a + b if reached else 0\n")
    finally:
        named.close()
        abstract.close()


# ---- the audit hook itself --------------------------------------------------------------------------

REFLECTION = '''
import sys
try:  # the blocklists of the old hook lived in its defaults, which gc reached
    import gc
    for obj in gc.get_objects():
        defaults = getattr(obj, "__defaults__", None) if callable(obj) else None
        if defaults and any(isinstance(d, frozenset) and "os.system" in d for d in defaults):
            obj.__defaults__ = tuple(frozenset() if isinstance(d, frozenset) else d for d in defaults)
except BaseException:
    pass
for name in ("_audit_guard", "_audit_guard_pod"):  # the hooks are functions of the runner program (__main__):
    try:                                          # swap their code for a no-op
        guard = vars(sys.modules["__main__"]).get(name)
        if guard is not None:
            guard.__code__ = (lambda event, args: None).__code__
    except BaseException:
        pass
try:  # rebind what the hook raises
    vars(sys.modules["__main__"])["PermissionError"] = lambda *a: None
    vars(sys.modules["__main__"])["ImportError"] = lambda *a: None
except BaseException:
    pass
try:  # refused by the hook in every mode (a pod's own network namespace would allow it)
    import socket
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    off = True
except BaseException:
    off = False
return a + b if off else 0
'''


def test_the_audit_hook_cannot_be_switched_off_by_reflection(hooked_mode: str) -> None:
    """On the old hook the gc route worked and this program passed."""
    must_fail(REFLECTION)


def test_a_native_function_cannot_be_looked_up_through_ctypes(hooked_mode: str) -> None:
    """A bwrap pod's hook lets packages import ctypes (sympy, pandas do) but still refuses what reaches libc: a native
    function looked up by name (`CDLL(None).getpid`, harmless itself: the lookup is the point) or a library opened
    by name; under process isolation importing ctypes stays refused."""
    must_fail("try:\n    import ctypes\n    found = ctypes.CDLL(None).getpid() > 0\nexcept BaseException:\n"
              "    found = False\nreturn a + b if found else 0\n")
    must_fail("try:\n    import ctypes\n    found = ctypes.CDLL('libc.so.6') is not None\nexcept BaseException:\n"
              "    found = False\nreturn a + b if found else 0\n")


def test_gc_is_not_preloaded_for_the_solution(hooked_mode: str) -> None:
    must_fail("import sys\nreturn a + b if 'gc' in sys.modules else 0\n")


# ---- the verdict line -------------------------------------------------------------------------------

def test_a_forged_verdict_line_on_the_result_pipe_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever else reaches the result pipe (a line without this run's nonce, an earlier run's
    nonce) cannot pass a wrong program: only the runner's nonce line counts."""
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)
    real_launch = launch._launch
    earlier = secrets.token_hex(16)

    def forging(run: Any) -> None:
        os.write(run.result_w, f"{earlier} passed \"\"\n{'0' * 32} passed \"\"\n".encode())
        real_launch(run)

    monkeypatch.setattr(launch, "_launch", forging)
    res = run_program(humaneval_program(PROMPT, "    return 0\n", TEST, "add"), timeout_s=20)
    assert not res.passed and res.status == "failed", res
    assert verdict_mod.parse_verdict(f"{earlier} passed \"\"\n".encode(), secrets.token_hex(16)) is None


# ---- through the harness's own entry points ----------------------------------------------------------

def _read_answers_body() -> str:
    answers = _answers_file()
    paths = [str(p) for p in (answers, REPO / "results", REPO) if p is not None]
    return ("    import os\n    seen = ''\n"
            f"    for p in {paths!r}:\n"
            "        try:\n            seen += open(p).read()[:100] if os.path.isfile(p) else ' '.join(os.listdir(p))\n"
            "        except OSError:\n            pass\n")


def _humaneval_problem() -> Problem:
    return Problem(id="HumanEval/hostile", index=0, benchmark="humaneval", gold="    return a + b\n",
                   fields={"prompt": PROMPT, "test": TEST, "entry_point": "add",
                           "public_tests": ["assert add(2, 3) == 5"]})


def test_code_scoring_and_the_public_test_tool(mode: str) -> None:
    """HumanEval's and MBPP's scorers and the public-test tool (what DyFlow's TEST_CODE calls) score
    a program that is right only if it read the harness's files: 0, never 1."""
    bench = HumanEval({"name": "humaneval", "execute_code": True, "sandbox": {"timeout_s": 20}})
    answer = "```python\n" + PROMPT + _read_answers_body() + "    return a + b if seen else 0\n```"
    problem = _humaneval_problem()
    assert asyncio.run(bench.score(answer, problem)).value == 0.0
    tool = asyncio.run(bench.run_public_tests(answer, problem))
    assert tool is not None and tool["passed"] == 0, tool
    mbpp = MBPP({"name": "mbpp", "execute_code": True, "sandbox": {"timeout_s": 20}})
    mproblem = Problem(id="mbpp/hostile", index=0, benchmark="mbpp", gold="",
                       fields={"test_list": ["assert add(2, 3) == 5"], "test_imports": [], "entry_point": "add",
                               "public_tests": ["assert add(2, 3) == 5"]})
    manswer = "```python\ndef add(a, b):\n" + _read_answers_body() + "    return a + b if seen else 0\n```"
    assert asyncio.run(mbpp.score(manswer, mproblem)).value == 0.0


def test_plain_programs_and_the_programmer_operator(mode: str, planted: dict[str, str]) -> None:
    """run_program with a plain program (what AFlow's Programmer/Test and MaAS use) passes only if it
    ends normally; and the Programmer's own runner (`run_solve`) hands solve()'s output back to the
    workflow: neither may carry the planted files' contents."""
    from agentic_repro.baselines.autoflow.operators import run_solve

    paths = list(planted.values())
    res = run_program(f"data = ''.join(open(p).read() for p in {paths!r})\nassert {TOKEN!r} in data\n", timeout_s=20)
    assert not res.passed and not res.infrastructure, res
    code = ("def solve():\n    out = []\n"
            f"    for p in {paths!r}:\n"
            "        try:\n            out.append(open(p).read())\n"
            "        except OSError as exc:\n            out.append(type(exc).__name__)\n"
            "    return ' '.join(out)\n")
    status, output = asyncio.run(run_solve(code, timeout_s=20))
    assert status == "Success" and TOKEN not in output, (status, output)


def test_an_honest_program_still_imports_numpy_and_writes_its_scratch(mode: str) -> None:
    """The view is not so small that honest code breaks: numpy from site-packages, files in its cwd."""
    res = run_program(Program("", prelude="", solution="import numpy as np, os, tempfile\n"
                              "def f():\n    open('x.txt', 'w').write('1')\n"
                              "    with tempfile.NamedTemporaryFile() as fh:\n        fh.write(b'1')\n"
                              "    return int(np.array([1, 2]).sum()) + int(open('x.txt').read())\n",
                              test="assert f() == 4\n", entry_points=("f",)), timeout_s=30)
    assert res.passed, res


def test_bwrap_missing_is_an_infrastructure_error_naming_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)
    monkeypatch.setitem(launch._CONFIG, "isolation", "bwrap")
    monkeypatch.setitem(launch._PROBED, "privilege", None)  # probed afresh, restored after
    monkeypatch.setitem(launch._PROBED, "refusal", None)
    monkeypatch.setattr(launch, "BWRAP", "bwrap-not-installed-here")
    res = run_program(humaneval_program(PROMPT, "    return a + b\n", TEST, "add"))
    assert not res.passed and res.status == "error" and res.infrastructure, res
    assert "not installed" in res.detail and "sandbox.isolation=process" in res.detail, res
    assert "\n" not in res.detail
    launch._stop_fork_server()


def test_a_bwrap_that_cannot_build_the_pod_is_refused_with_its_own_error(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """bwrap installed but unable to start a pod here: the probe run (the check) fails, nothing runs, and the one-line
    refusal carries bwrap's own error (asked for only then) and the option; no fork server is left behind."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    launch._stop_fork_server()
    monkeypatch.setattr(launch, "_SERVER", None)
    monkeypatch.setitem(launch._CONFIG, "isolation", "bwrap")
    monkeypatch.setitem(launch._PROBED, "privilege", None)  # probed afresh, restored after
    monkeypatch.setitem(launch._PROBED, "refusal", None)
    monkeypatch.setattr(launch, "BWRAP", str(fake))
    res = run_program(humaneval_program(PROMPT, "    return a + b\n", TEST, "add"))
    assert not res.passed and res.status == "error" and res.infrastructure, res
    assert "Creating new namespace failed" in res.detail and "sandbox.isolation=process" in res.detail, res
    assert "\n" not in res.detail
    assert launch._SERVER is None or not launch._SERVER.alive()
    launch._stop_fork_server()


def test_every_run_can_record_its_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(launch._CONFIG, "isolation", "bwrap")
    record = launch.isolation_record()
    dests = [e["dest"] for e in record["view"]]
    assert record["isolation"] == "bwrap" and "note" not in record
    assert not any(d == "/work" or d.startswith(str(REPO)) for d in dests), dests
    assert f"{launch.POD_SITE}/numpy" in dests and "/scratch" in dests and os.path.realpath(sys.executable) in dests
    monkeypatch.setitem(launch._CONFIG, "isolation", "process")
    assert launch.isolation_record() == {"isolation": "process", "note": launch.NO_ISOLATION_NOTE,
                                         "packages": "the harness's whole site-packages (no view)"}
    with pytest.raises(ValueError):
        launch.configure(isolation="none")


@pytest.mark.parametrize("call", ["ptrace(PTRACE_TRACEME)", "unshare(CLONE_NEWUSER)", "unshare(CLONE_NEWNS)",
                                  "clone(CLONE_NEWUSER)", "keyctl", "perf_event_open"])
def test_escape_system_calls_are_refused_by_the_pods_seccomp_filter(no_hook: str, call: str) -> None:
    """With the audit hook lifted (ctypes allowed), calls that need no privilege at all
    (PTRACE_TRACEME; a user namespace where the kernel allows unprivileged ones) must still fail."""
    if launch.seccomp.program() is None:
        pytest.skip("no seccomp filter for this architecture")
    code = {
        "ptrace(PTRACE_TRACEME)": "libc.ptrace(0, 0, None, None)",
        "unshare(CLONE_NEWUSER)": "libc.unshare(0x10000000)",
        "unshare(CLONE_NEWNS)": "libc.unshare(0x00020000)",
        "clone(CLONE_NEWUSER)": "libc.syscall(56, 0x10000000 | 17, None, None, None, None)",
        "keyctl": "libc.syscall(250, 0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of the session keyring
        "perf_event_open": "libc.syscall(298, None, 0, -1, -1, 0)",
    }[call]
    body = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"rc = {code}\nif rc == 0 and {call.startswith('clone')!r}:\n    os._exit(0)\n"
            "err = ctypes.get_errno()\n"
            "worked = rc >= 0 or err not in (1,)  # EPERM is the filter's answer; anything else got past it\n"
            "return a + b if worked else 0\n")
    must_fail(body)


def test_threads_and_fork_still_work_under_the_filter(mode: str) -> None:
    res = run_program(Program("", prelude="", solution="import threading\n"
                              "def f():\n    out = []\n    t = threading.Thread(target=lambda: out.append(2))\n"
                              "    t.start()\n    t.join()\n    return out[0]\n",
                              test="assert f() == 2\n", entry_points=("f",)), timeout_s=30)
    assert res.passed, res


UNPRIVILEGED = '''
import os, sys
sys.path.insert(0, sys.argv[1])
from agentic_repro.evaluators.sandbox import humaneval_program, launch, run_program
prompt, test = sys.argv[2], sys.argv[3]
honest = run_program(humaneval_program(prompt, "    import os\\n    print(os.getuid(), open('/proc/self/status').read())\\n"
                                       "    return a + b\\n", test, "add"), timeout_s=20)
status = honest.stdout_tail
caps = [l.split()[1] for l in status.splitlines() if l.startswith(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))]
hostile = run_program(humaneval_program(prompt, "    try:\\n        found = open(%r).read() != ''\\n"
                                        "    except OSError:\\n        found = False\\n    return a + b if found else 0\\n"
                                        % sys.argv[4], test, "add"), timeout_s=20)
print("RESULT", honest.passed, status.split()[0] if status else None, set(caps), hostile.passed, hostile.status,
      launch._PROBED.get("refusal"))
'''


def test_an_unprivileged_harness_with_user_namespaces_gets_the_same_pod(planted: dict[str, str]) -> None:
    """The platform line "unprivileged + user namespaces": the harness itself runs as uid 65534 (a
    system interpreter it can read), so bwrap builds the pod in a user namespace of its own."""
    import shutil
    import subprocess
    python = "/usr/bin/python3"
    setpriv = shutil.which("setpriv")
    if not (ROOT and setpriv and os.path.exists(python)):
        pytest.skip("needs root (to become uid 65534), setpriv and a system /usr/bin/python3")
    proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c", UNPRIVILEGED,
                           str(REPO), PROMPT, TEST, planted["repo"]], capture_output=True, text=True, timeout=120,
                          cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"})
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT")), None)
    if line and "user namespace" in line or "setting up uid map" in (line or ""):
        pytest.skip(f"this kernel allows no unprivileged user namespaces: {line}")
    assert line == "RESULT True 65534 {'0000000000000000'} False failed None", (proc.stdout[-2000:], proc.stderr[-2000:])


# ---- issue 28: a test's names, the trusted side's reporting, the runner's working directory ------------------

def _mbpp_row(task_id: int) -> dict[str, Any]:
    import json
    for root in (os.environ.get("AGENTIC_REPRO_DATA"), REPO / "data", SHARED):
        path = Path(root or "") / "mbpp" / "mbpp.jsonl"
        if root and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row["task_id"] == task_id:
                    return row
    pytest.fail("no MBPP data: run `make data`")


def test_a_tests_free_names_resolve_on_the_trusted_side_never_from_the_solution(mode: str) -> None:
    """MBPP/596's asserts use `sys` without importing it: the solution's `class sys` (getsizeof gives 0) and a
    `tuple_size` giving 0 passed before issue 28; the canonical solution still passes (the official verdict)."""
    row = _mbpp_row(596)
    mbpp = MBPP({"name": "mbpp", "execute_code": True, "sandbox": {"timeout_s": 20}})
    problem = mbpp.make_problem(row, 0)
    shadow = ("```python\nclass sys:\n    @staticmethod\n    def getsizeof(x):\n        return 0\n"
              "def tuple_size(t):\n    return 0\n```")
    assert asyncio.run(mbpp.score(shadow, problem)).value == 0.0
    assert asyncio.run(mbpp.score("```python\n" + row["code"] + "\n```", problem)).value == 1.0


MISBEHAVIOUR = {
    # the entry point is a module object named like a module whose import runs code (unittest's main)
    "unittest.__main__ entry point": "    return 0\nimport types\nadd = types.ModuleType('unittest.__main__')\n",
    # 64 MB on stderr: the trusted runner once wrote its traceback to the same file under the same limit (EFBIG)
    "64 MB to stderr": "    return 0\nimport sys\ntry:\n    sys.stderr.write('x' * (65 << 20))\n"
                       "except BaseException:\n    pass\n",
    # every inherited fd closed, then asleep: the trusted side once waited 10 s and blamed the reaper
    "close every fd and sleep": "    return 0\nimport os, time\nos.closerange(0, 4096)\ntime.sleep(60)\n",
}


@pytest.mark.parametrize("how", list(MISBEHAVIOUR))
def test_what_a_program_does_to_its_own_fds_is_its_failure_never_an_error(hooked_mode: str, how: str) -> None:
    """Each would score a + b only through the sandbox failing (an infrastructure error is retried, never scored,
    and an AFlow round with one raises SearchIncomplete): must_fail asserts failed *and* not infrastructure."""
    res = must_fail_completion(MISBEHAVIOUR[how], timeout_s=30.0)
    assert res.duration_s < 15, res  # the channel-closed case is ended at once, not after the 10 s reaper wait


@pytest.mark.parametrize("how", ["64 MB to stderr", "close every fd and sleep"])
def test_a_misbehaving_solve_is_an_error_for_the_programmer_never_a_sandbox_failure(mode: str, how: str) -> None:
    from agentic_repro.baselines.autoflow.operators import run_solve

    body = MISBEHAVIOUR[how].split("\n", 1)[1]  # the module-level misbehaviour, then solve() returns a value
    status, output = asyncio.run(run_solve(body + "def solve():\n    return 42\n", timeout_s=20))  # no SandboxFailure
    # the stderr flood is the program's own business (it caught EFBIG and went on); the closed channel ends it
    assert (status, output) == ("Success", "42") if how.startswith("64") else status == "Error", (status, output)


PWN = '''import sys, os
f = sys._getframe()
while f is not None:  # imported by the trusted runner: forge its verdict with the run's nonce
    if "nonce" in f.f_locals and "result_fd" in f.f_locals:
        os.write(f.f_locals["result_fd"], (f.f_locals["nonce"] + ' passed ""\\n').encode())
        break
    f = f.f_back
'''


def test_the_trusted_runner_never_imports_from_the_solutions_working_directory(hooked_mode: str) -> None:
    """isolation=process ran the root runner in the solution's cwd: a `test_pwn.py` left there and the
    `unittest.__main__` entry point made the runner's test discovery import it and forge a pass."""
    must_fail_completion(f"    return 0\nopen('test_pwn.py', 'w').write({PWN!r})\nimport types\n"
              "add = types.ModuleType('unittest.__main__')\n", timeout_s=30.0)


# ---- issue 28: the pod survives what a run leaves --------------------------------------------------------------

DEEP_TREE = ("    import os\n    os.chdir('/tmp')\n    for _ in range(1200):\n        os.mkdir('d')\n        os.chdir('d')\n"
             "    open('f', 'w').write('x')\n    return 0\n")


def test_a_deep_tree_left_in_tmp_does_not_cost_the_next_problem_its_verdict(mode: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1,200-deep /tmp tree made the init's recursive emptying raise RecursionError and exit; the next problem
    on that runner (a correct answer) then failed with "the runner's pod is gone". The next run must pass, and
    see an empty /tmp."""
    monkeypatch.setattr(launch, "SPARE_RUNNERS", 1)
    launch._stop_fork_server()
    launch._SERVER = None
    for _ in range(3):
        res = run_program(humaneval_program(PROMPT, DEEP_TREE, TEST, "add"), timeout_s=30)
        assert res.status == "failed" and not res.infrastructure, res
        honest = run_program(humaneval_program(PROMPT, "    import os\n    print('PID', os.getpid())\n"
                                               "    return a + b + len(os.listdir('/tmp'))\n", TEST, "add"), timeout_s=30)
        assert honest.passed, honest
        assert int(honest.stdout_tail.split("PID")[1].split()[0]) > 2, honest  # the same pod: its init emptied /tmp


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
                parents[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, pp in parents.items() if pp == pid]
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> bytes:
    """A process listed by ``_descendants`` may have ended since (the run's own process, at load): no command line."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def test_a_pod_that_died_is_replaced_before_the_next_problem(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever ends a pod's init between two runs, the next problem runs in a fresh pod, never an error."""
    import contextlib
    import signal
    import time
    monkeypatch.setattr(launch, "SPARE_RUNNERS", 1)
    launch._stop_fork_server()
    launch._SERVER = None
    honest = humaneval_program(PROMPT, "    import os\n    print('PID', os.getpid())\n    return a + b\n", TEST, "add")
    assert run_program(honest, timeout_s=30).passed
    server = launch._SERVER
    assert server is not None
    inits = [p for p in _descendants(server.proc.pid)
             if b"\n_pod(3, " in _cmdline(p)[-40:]]  # the init's -c ends with its call
    assert inits, "no pod init found"
    for pid in inits:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in inits:  # gone (a zombie at most) before the next problem is sent
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
    for _ in range(3):
        res = run_program(honest, timeout_s=30)
        assert res.passed and not res.infrastructure, res


# ---- issue 28: runs on one pod are independent ------------------------------------------------------------------

LIBC = '''
def libc():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except BaseException:
        pass
    todo, seen = list(object.__subclasses__()), set()  # ctypes types some process loaded before the audit hook
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        if cls.__name__ == "CDLL":
            return cls(None)
        try:
            todo += cls.__subclasses__()
        except TypeError:
            pass
    return None
'''
SHM_KEY = 0x5EED28


def _one_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sequential runs on one persistent runner (and its pod), from a fresh fork server."""
    monkeypatch.setattr(launch, "SPARE_RUNNERS", 1)
    launch._stop_fork_server()
    launch._SERVER = None


def test_a_sysv_shared_memory_value_does_not_reach_the_next_run(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run A leaves a value in SysV shared memory (the pod's IPC namespace was never cleaned), run B reads it."""
    _one_runner(monkeypatch)
    leave = (LIBC + f"lib = libc()\ntry:\n    i = lib.shmget({SHM_KEY}, 4096, 0o1666)\n"
             "    p = lib.shmat(i, None, 0)\n    lib.memcpy(p, b'LEFT-BY-A', 9)\nexcept BaseException:\n    pass\n"
             "return 0\n")
    read = (LIBC + f"lib = libc()\nfound = False\ntry:\n    import ctypes\nexcept BaseException:\n    ctypes = None\n"
            f"try:\n    i = lib.shmget({SHM_KEY}, 4096, 0)\n    lib.shmat.restype = ctypes.c_void_p if ctypes else None\n"
            "    p = lib.shmat(i, None, 0)\n    found = i >= 0 and ctypes is not None and ctypes.string_at(p, 9) == b'LEFT-BY-A'\n"
            "    found = found or i >= 0\nexcept BaseException:\n    pass\nreturn a + b if found else 0\n")
    for _ in range(2):
        must_fail(leave)
        must_fail(read)


def test_the_pid_counter_does_not_carry_a_value_to_the_next_run(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run A starts 50 threads (each takes a pid of the pod's namespace); run B reads its own pid."""
    _one_runner(monkeypatch)
    for _ in range(2):
        must_fail("import threading\nts = [threading.Thread(target=lambda: None) for _ in range(50)]\n"
                  "for t in ts:\n    t.start()\nfor t in ts:\n    t.join()\nreturn 0\n")
        must_fail("import os\nreturn a + b if os.getpid() > 40 else 0\n")


def test_a_file_left_in_dev_shm_or_tmp_does_not_reach_the_next_run(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _one_runner(monkeypatch)
    for _ in range(2):
        must_fail("for d in ('/dev/shm', '/tmp', '.'):\n    try:\n        open(d + '/left', 'w').write('A')\n"
                  "    except OSError:\n        pass\nreturn 0\n")
        must_fail("import os\nreturn a + b if any(os.path.exists(d + '/left') for d in ('/dev/shm', '/tmp', '.')) "
                  "else 0\n")


def test_with_a_pod_per_run_a_run_cannot_tell_whether_another_run_came_before(mode: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``sandbox.pod_per_run=true`` closes the one bit a reused pod leaves (README, class 5): problem A signals
    "continued pod" by leaving the pid counter alone (or "fresh pod" by moving it); problem B, on the same runner,
    recovers A's choice from its own pid (2 in a fresh pod, higher in a continued one) and answers right only if it
    sees A's "continued" signal. With a fresh pod per run, B is PID 2 of a pod that never saw A, every time."""
    monkeypatch.setitem(launch._CONFIG, "pod_per_run", True)
    _one_runner(monkeypatch)
    assert launch.isolation_record()["pod_per_run"] is True
    for _ in range(3):
        must_fail("return 0\n")  # A: the bit "continued" (the pod is kept when its pid counter did not move)
        must_fail("import os\nreturn a + b if os.getpid() != 2 else 0\n")  # B: decodes A's bit


@pytest.mark.parametrize("which", ["bwrap", "process"])
def test_process_isolation_still_reaches_libc_through_loaded_ctypes_types(which: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `isolation=process` row, kept true by this test: there a solution reaches libc without
    `import ctypes` (the types the fork server loaded) and runs a shell through system(); under bwrap the same
    program fails (no /bin/sh, seccomp, no capability)."""
    body = LIBC + "try:\n    ran = libc().system(b'exit 7') >> 8 == 7\nexcept BaseException:\n    ran = False\n" \
                  "return a + b if ran else 0\n"
    for _ in _mode(which, monkeypatch):
        res = run_program(humaneval_program(PROMPT, _body(body), TEST, "add"), timeout_s=30)
        assert res.passed == (which == "process") and not res.infrastructure, res
