"""Running untrusted generated code, with a pass/fail verdict the code cannot forge.

Why two processes. If a test runs in the interpreter that runs the code under test, that
code can rebind builtins, patch ``math.isclose``, return objects whose ``__eq__`` is always
True, exit with status 0, or find and write the pass marker itself; each guard against one
trick leaves the next. So the verdict is decided where generated code never runs:

* a **trusted** runner runs the benchmark's own code: the HumanEval prompt (for helpers such
  as ``poly``), the test and ``check(entry_point)``, or the MBPP imports, setup code and
  asserts. It has forked an **untrusted** process, which runs the solution (prompt +
  completion) and then only answers requests such as "call ``entry_point`` with these
  arguments". Arguments and results cross a socket as JSON-encoded *plain data* (None, bool,
  int, float, complex, str, bytes, list, tuple, dict, set, range, builtin types); the trusted
  side rebuilds exact builtin types, so every ``==``, ``abs``, ``isclose`` and ``assert`` in
  the test runs on values the solution cannot subvert. Anything else (an instance of a class
  the solution defines, say MBPP's ``Pair``) comes back as an opaque handle: it can be passed
  back, called, have attributes read or set, be iterated, measured and converted with
  ``str``/``repr``/``int``/``float``/``bool`` (each answer is again plain data, no more than
  the solution could have returned directly), but ``==``/``<``/``in``/``hash`` raise: those
  would hand the expected value to the solution, so "an object equal to everything" fails;
* the runner reports ``<nonce> <status>`` on a private pipe. The nonce is the last thing the
  runner reads from its stdin, after the untrusted process was forked and closed its own
  stdin, so the solution never has it; the solution's output, exit status and signals
  cannot produce a pass. The runner is non-dumpable (``PR_SET_DUMPABLE 0``): a same-uid
  process cannot read its memory or open ``/proc/<pid>/fd``.

Privileges. As root (the reference container) the untrusted process becomes uid/gid 65534
(nobody) keeping exactly one capability, CAP_DAC_READ_SEARCH, so it can import the
interpreter even where that lives under ``/root`` but cannot write files it does not own,
signal or ptrace the runner; if that is impossible, uid 0 without any capability; if that is
impossible too, nothing runs (status ``error``). It runs in a new pid namespace (cannot see
or signal anything outside; everything it starts dies with it) inside a new network namespace
(no usable interface, so no network even past the audit hook). It is PID 2 there, the child of
a small reaper (PID 1) that never runs solution code: Linux drops signals a namespace's init
sends itself, SIGKILL included, so a solution running as PID 1 could survive its own
``os.kill(os.getpid(), 9)`` and pass. The reaper reports how the solution ended and kills it
if it stopped itself; it is the solution's parent without the namespace too.

Containment (defence in depth; the verdict does not rest on it): a fresh temporary working
directory, deleted afterwards; a minimal environment without proxies; ``python -I -S`` (no
user site, no ``.pth`` files; site-packages are appended to the solution's ``sys.path``);
its own session, SIGKILLed at the wall-clock timeout; RLIMIT_AS (memory), RLIMIT_CPU,
RLIMIT_FSIZE, RLIMIT_CORE=0 and, as nobody, RLIMIT_NPROC; an audit hook in the untrusted
process refusing ``os.fork``/``subprocess``/``os.system``/``exec*``, sockets and DNS, and
imports of ``ctypes``/``_posixsubprocess``; ``PR_SET_NO_NEW_PRIVS``; ``PR_SET_PDEATHSIG``.

Speed. A fork server (one warm ``python -I -S`` per harness process, which never sees run
data) keeps a few runners already forked, each with its untrusted process waiting; a run only
hands one the file descriptors of its spec, stdout, stderr and result pipes. Where a fork
server cannot run, each run starts ``python -I -S`` directly (same protocol).

Residual risks, stated plainly. This is not a VM: the untrusted process can read files
(world-readable ones, and as nobody with CAP_DAC_READ_SEARCH any file) and, when the harness
does not run as root, write wherever the harness user can (its virtualenv included, which
could affect later runs). Code that deliberately reaches native code (e.g. through a
compiled extension in site-packages, or frames of the wrapper) can bypass the audit hook and
so the fork/socket guards, but not the verdict, the rlimits, the namespaces or the uid.
Programs given as plain strings (not a :class:`Program` from :func:`humaneval_program` /
:func:`mbpp_program`) run entirely in the untrusted process and pass when they finish
without an exception: that only stops accidental false passes (exit codes, printed
markers), not an adversary. Compared with the official harness the split is stricter in rare
legitimate cases: non-plain results cannot be compared with ``==`` (numpy scalars and
subclasses of builtin types are converted to plain values first; numpy arrays are not),
arguments are copies (in-place mutation of a test's list is invisible to the test), and the
benchmark's helpers (HumanEval's ``poly``, ``encode_cyclic``) are the prompt's, not versions
a completion redefines.
"""
from __future__ import annotations

import ast
import asyncio
import atexit
import json
import os
import queue
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import symtable
import sysconfig
import tempfile
import threading
import time
import builtins as _builtins
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

__all__ = ["ExecResult", "Program", "run_program", "run_program_async", "humaneval_program", "mbpp_program",
           "STATUSES"]

STATUSES = ("passed", "failed", "timeout", "error", "memory", "killed")
NOBODY = 65534
TAIL_CHARS = 4000
FSIZE_MB = 64  # largest file (including captured stdout/stderr) the program may write
USE_NAMESPACES = True  # private pid + network namespaces when the kernel allows (root); purely additive
USE_FORK_SERVER = True  # fork runners from one warm process (fast); else start `python -I -S` per run
KILL_GRACE_S = 10.0  # after a timeout kill, how long to wait for the runner to be gone
SPARE_RUNNERS = max(1, min(4, os.cpu_count() or 1))  # runners the fork server keeps forked and waiting


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one sandboxed run.

    ``status``: ``passed`` the test ran to completion; ``failed`` the test raised (an assert,
    an exception from the solution, the solution exiting early); ``timeout`` wall clock or CPU
    limit; ``memory`` a MemoryError (RLIMIT_AS) anywhere; ``killed`` the solution or runner died
    from a signal; ``error`` the solution did not load (syntax error, exception at import) or
    the runner produced no verdict. ``detail`` is a one-line reason.
    """

    passed: bool
    status: str
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    detail: str = ""


class Program(str):
    """Program text (what the official harness would ``exec``) plus its trust split.

    ``prelude`` and ``test`` are benchmark code run by the trusted process (prelude first, then
    the solution's ``entry_points`` are bound to proxies, then ``test``); ``solution`` is the
    generated code, run only in the untrusted process. ``str(program)`` is the concatenation.
    """

    prelude: str
    solution: str
    test: str
    entry_points: tuple[str, ...]

    def __new__(cls, text: str, *, prelude: str, solution: str, test: str,
                entry_points: Iterable[str]) -> "Program":
        obj = super().__new__(cls, text)
        obj.prelude, obj.solution, obj.test = prelude, solution, test
        obj.entry_points = tuple(entry_points)
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_program, (str(self), self.prelude, self.solution, self.test, self.entry_points))


def _make_program(text: str, prelude: str, solution: str, test: str, entry_points: tuple[str, ...]) -> Program:
    return Program(text, prelude=prelude, solution=solution, test=test, entry_points=entry_points)


# ---- building programs ---------------------------------------------------------------------------

def _globals_read_and_bound(src: str) -> tuple[set[str], set[str]]:
    """Names ``src`` reads as globals (at any depth) and names it binds at module level."""
    top = symtable.symtable(src, "<test>", "exec")
    read: set[str] = set()
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()
             or s.is_namespace()}
    stack = [top]
    while stack:
        table = stack.pop()
        for sym in table.get_symbols():
            if sym.is_referenced() and (table.get_type() == "module" or sym.is_global()):
                read.add(sym.get_name())
        stack.extend(table.get_children())
    return read, bound


def _entry_points(test: str, prelude: str, explicit: Sequence[str] = (), solution: str | None = None) -> tuple[str, ...]:
    """The names the trusted test needs from the solution.

    Global names the test reads but neither it nor the prelude binds (nor builtins), plus
    ``explicit``. If that is empty (MBPP task 126 calls its function ``sum``), builtin names
    the test reads that the solution itself defines with ``def``/``class``.
    """
    try:
        read, bound = _globals_read_and_bound(test)
    except SyntaxError:
        return tuple(dict.fromkeys(explicit))
    try:
        _, pre_bound = _globals_read_and_bound(prelude) if prelude.strip() else (set(), set())
    except SyntaxError:
        pre_bound = set()
    builtin_names = set(dir(_builtins))
    names = (read - bound - pre_bound - builtin_names) | set(explicit)
    if not names and solution:
        try:
            defined = {n.name for n in ast.parse(solution).body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            defined = set()
        names = (read - bound - pre_bound) & builtin_names & defined
    return tuple(sorted(names))


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's ``prompt + completion + test + check(entry_point)``, split for the sandbox.

    The completion continues the prompt (or restates the whole function): the untrusted side
    runs ``prompt + completion``; the trusted side runs the prompt (for helpers like ``poly``),
    binds ``entry_point`` to the solution's function, then the test and ``check(entry_point)``.
    """
    solution = prompt + completion
    test_code = f"{test}\n\ncheck({entry_point})\n"
    return Program(f"{solution}\n{test_code}", prelude=prompt, solution=solution, test=test_code,
                   entry_points=_entry_points(test_code, prompt, [entry_point]))


def _import_lines(test_imports: Sequence[str] | str | None) -> list[str]:
    if test_imports is None:
        return []
    if isinstance(test_imports, str):
        s = test_imports.strip()
        if not s:
            return []
        if s.startswith("["):
            try:
                value = json.loads(s)
            except ValueError:
                value = ast.literal_eval(s)
            return [str(v) for v in value]
        return [s]
    return [str(v) for v in test_imports]


def mbpp_program(code: str, test_imports: Sequence[str] | str | None, test_list: Sequence[str] | str,
                 test_setup_code: str = "") -> str:
    """MBPP's ``test_imports + code + test_setup_code + asserts``, split for the sandbox.

    ``test_imports`` may be a list of import lines or that list as JSON / Python literal.
    The solution runs with the imports too (as in the official layout, code may rely on them).
    """
    prelude = "\n".join(_import_lines(test_imports))
    tests = [test_list] if isinstance(test_list, str) else list(test_list)
    solution = f"{prelude}\n{code}" if prelude else code
    test_code = f"{test_setup_code or ''}\n" + "\n".join(tests) + "\n"
    return Program(f"{solution}\n{test_code}", prelude=prelude, solution=solution, test=test_code,
                   entry_points=_entry_points(test_code, prelude, (), code))


# ---- the runner (trusted + untrusted halves), executed as `python -I -B -u -c _RUNNER` ------------

_RUNNER = r'''
import os, signal, sys


def print_exc():
    """traceback.print_exc, imported only when something failed (it is slow to import)."""
    import traceback
    traceback.print_exc()


def _open_fds():
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _runner(namespaces, assign_fd=None):
    """The trusted runner. Forks the solution's process first, before it has read anything of
    the run, then (fork-server spares) waits for its run: fds for spec/stdout/stderr/result and
    a working directory. Reads the spec from fd 0 with the nonce last, then runs `trusted`."""
    import json, resource, builtins, socket

    def read_exact(fd, n):
        parts = []
        while n > 0:
            b = os.read(fd, min(n, 1 << 20))
            if not b:
                raise EOFError("short read")
            parts.append(b)
            n -= len(b)
        return b"".join(parts)

    def read_block(fd):
        return read_exact(fd, int.from_bytes(read_exact(fd, 8), "big"))

    class Died(BaseException):
        """The untrusted process is gone (BaseException: `except Exception` in a test must not hide it)."""

    class Protocol(BaseException):
        """The untrusted process sent something that is not a well-formed reply."""

    class Chan:
        def __init__(self, fd):
            self.fd = fd

        def send(self, obj):
            data = json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogatepass")
            view = memoryview(len(data).to_bytes(4, "big") + data)
            while view:
                view = view[os.write(self.fd, view):]

        def recv(self, limit=1 << 29):
            n = int.from_bytes(self._exact(4), "big")
            if n > limit:
                raise Protocol("oversized message")
            return json.loads(self._exact(n).decode("utf-8", "surrogatepass"))

        def _exact(self, n):
            parts = []
            while n > 0:
                b = os.read(self.fd, min(n, 1 << 20))
                if not b:
                    raise EOFError
                parts.append(b)
                n -= len(b)
            return b"".join(parts)

    libc, sealed = None, False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # PR_SET_DUMPABLE 0: same-uid processes can neither read our memory nor open /proc/<us>/fd
        sealed = libc.prctl(4, 0, 0, 0, 0) == 0
    except Exception:
        pass
    if namespaces and libc is not None:
        # new network namespace (no interfaces up: no network even past the audit hook) and
        # new pid namespace, whose init the untrusted process becomes: it cannot see or signal
        # anything outside, and everything it might start dies with it.
        libc.unshare(0x40000000 | 0x20000000)  # CLONE_NEWNET | CLONE_NEWPID; best effort
    import fcntl
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    t_sock, u_sock = (socket.socket(fileno=fcntl.fcntl(p.fileno(), fcntl.F_DUPFD, 10)) for p in pair)
    for p in pair:  # above 10: the run's fds are dup2'ed onto 0-3 later
        p.close()
    st_pipe = os.pipe()  # how the solution's process ended, when a namespace init reaps it
    st_r, st_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in st_pipe)
    for fd in st_pipe:
        os.close(fd)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for fd in _open_fds():
                if fd > 2 and fd not in (u_sock.fileno(), st_w):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            nul = os.open(os.devnull, os.O_RDONLY)
            os.dup2(nul, 0)
            os.close(nul)
            reaper(u_sock, st_w, libc, sealed, Chan)  # forks the solution's process
            code = 0
        except BaseException:
            print_exc()
        finally:
            os._exit(code)
    u_sock.close()
    os.close(st_w)
    chan = Chan(t_sock.fileno())
    if assign_fd is not None:  # a spare: wait for the fork server to hand us a run
        asock = socket.socket(fileno=assign_fd)
        try:
            msg, fds, _, _ = socket.recv_fds(asock, 65536, 4)
        except OSError:
            msg, fds = b"", []
        asock.close()
        if not msg or len(fds) != 4:
            os.kill(pid, signal.SIGKILL)
            os._exit(0)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
        for fd in fds:
            os.close(fd)
        for i, fd in enumerate(high):
            os.dup2(fd, i)
            os.close(fd)
        req = json.loads(msg)
        os.chdir(req["cwd"])
        os.environ["HOME"] = os.environ["TMPDIR"] = req["cwd"]
    header = json.loads(read_block(0))
    result_fd = header["result_fd"]
    lim = header["limits"]
    mem = lim["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(lim["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fsize = lim["fsize_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    solution = read_block(0).decode("utf-8", "surrogatepass")
    setup = {k: header.get(k) for k in ("limits", "privilege", "site_paths", "entry_points")}
    setup.update(sealed=sealed, cwd=os.getcwd())
    try:  # the solution's process gets the run's stdout/stderr, its setup and the solution
        socket.send_fds(t_sock, [b"R"], [1, 2])
        chan.send({"setup": setup, "solution": solution})
    except OSError:
        pass
    spec = json.loads(read_block(0))
    prelude = read_block(0).decode("utf-8", "surrogatepass")
    test = read_block(0).decode("utf-8", "surrogatepass")
    nonce = read_block(0).decode()
    nul = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nul, 0)
    os.close(nul)
    if not sealed:  # the solution waits until the nonce is out of the pipe it could reach via /proc
        try:
            chan.send({"op": "go"})
        except OSError:
            pass
    try:
        status, detail = trusted(pid, chan, spec, prelude, test, Died, Protocol, header.get("site_paths", []), st_r)
    except MemoryError:
        status, detail = "memory", "MemoryError in the runner"
    except BaseException as exc:
        status, detail = "error", "runner: " + repr(exc)[:300]
    try:  # the solution's process is gone before the verdict is out (no writes after it)
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    line = nonce + " " + status + " " + json.dumps(detail) + "\n"
    os.write(result_fd, line.encode())  # one write below PIPE_BUF: atomic
    try:  # reap it ourselves: some container inits never reap re-parented zombies
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if os.getpgrp() == os.getpid():  # leader of our own group (new session): sweep it
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(0)


import builtins as _b
BUILTIN_TYPES = {n: c for n, c in vars(_b).items() if isinstance(c, type) and c.__module__ == "builtins"}
del _b


def _plain(x, depth, conv, enc_handle):
    """Shared plain-data encoder; `conv` turns non-plain values into plain ones or None."""
    if depth > 400:
        raise ValueError("data nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str or t is float:
        return x
    if t is int:
        return x if -(1 << 62) < x < (1 << 62) else {"I": hex(x)}
    d = depth + 1
    if t is list:
        return [_plain(i, d, conv, enc_handle) for i in x]
    if t is tuple:
        return {"T": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is dict:
        return {"D": [[_plain(k, d, conv, enc_handle), _plain(v, d, conv, enc_handle)] for k, v in x.items()]}
    if t is set:
        return {"S": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is frozenset:
        return {"F": [_plain(i, d, conv, enc_handle) for i in x]}
    if t is bytes:
        return {"B": x.hex()}
    if t is bytearray:
        return {"A": x.hex()}
    if t is complex:
        return {"C": [x.real, x.imag]}
    if t is range:
        return {"R": [x.start, x.stop, x.step]}
    if t is type and x.__module__ == "builtins" and BUILTIN_TYPES.get(x.__name__) is x:
        return {"Y": x.__name__}
    y = conv(x)
    if y is not None:
        return _plain(y, d, conv, enc_handle)
    return enc_handle(x)


def _build(v, depth, handle):
    """Shared decoder: JSON value -> exact builtin types; `handle(ref)` for {"H": ref}."""
    if depth > 400:
        raise ValueError("data nested too deeply")
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    d = depth + 1
    if t is list:
        return [_build(i, d, handle) for i in v]
    if t is dict and len(v) == 1:
        (k, a), = v.items()
        if k == "T" and type(a) is list:
            return tuple(_build(i, d, handle) for i in a)
        if k == "D" and type(a) is list:
            out = {}
            for p in a:
                if type(p) is not list or len(p) != 2:
                    raise ValueError("bad dict item")
                out[_build(p[0], d, handle)] = _build(p[1], d, handle)
            return out
        if k == "S" and type(a) is list:
            return {_build(i, d, handle) for i in a}
        if k == "F" and type(a) is list:
            return frozenset(_build(i, d, handle) for i in a)
        if k == "B" and type(a) is str:
            return bytes.fromhex(a)
        if k == "A" and type(a) is str:
            return bytearray.fromhex(a)
        if k == "I" and type(a) is str:
            return int(a, 16)
        if k == "C" and type(a) is list and len(a) == 2 and all(type(z) in (int, float) for z in a):
            return complex(a[0], a[1])
        if k == "R" and type(a) is list and len(a) == 3 and all(type(z) is int for z in a):
            return range(a[0], a[1], a[2])
        if k == "H" and type(a) is int:
            return handle(a)
        if k == "Y" and type(a) is str and a in BUILTIN_TYPES:
            return BUILTIN_TYPES[a]
    raise ValueError("not plain data")


_TABLES = []


def trusted_tables():
    """Builtin exception classes by name, and modules a test may import when it reads a name the
    solution bound to a module (computed once, in the fork server)."""
    if not _TABLES:
        import builtins
        exceptions = {n: c for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, Exception)}
        allowed = set(getattr(sys, "stdlib_module_names", ())) | {
            "numpy", "scipy", "sympy", "pandas", "networkx", "regex"}
        allowed -= {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "webbrowser"}
        _TABLES.extend([exceptions, frozenset(allowed)])
    return _TABLES


def trusted(pid, chan, spec, prelude, test, Died, Protocol, site_paths, status_fd=None):
    """The benchmark's code. Never executes the solution; only talks to it through `chan`.
    `status_fd`: where the reaper reports how the solution's process ended."""
    import builtins, importlib, re

    state = {"dead": None, "protocol": None}
    exceptions, allowed_modules = trusted_tables()

    class SolutionExit(BaseException):
        """The solution raised SystemExit/KeyboardInterrupt/GeneratorExit during a call."""

    class SolutionError(Exception):
        """The solution raised an exception type that is not a builtin one."""

    def untrusted_status():
        """Why the solution's process is gone. Never "passed": it only ever explains a failure."""
        try:
            _, st = os.waitpid(pid, 0)
        except ChildProcessError:
            return "killed", "solution process vanished"
        stopped = 0
        if status_fd is not None:  # the reaper saw how the solution's process ended
            try:
                os.set_blocking(status_fd, False)
                fields = os.read(status_fd, 64).split()
                st, stopped = int(fields[0]), int(fields[1])
            except (OSError, ValueError, IndexError):
                pass
        if stopped:
            return "killed", "solution process stopped itself with signal %d (killed)" % stopped
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            if sig in (signal.SIGXCPU,):
                return "timeout", "solution exceeded its CPU time limit"
            return "killed", "solution process killed by signal %d" % sig
        return "failed", "solution process exited early with code %d" % os.WEXITSTATUS(st)

    def mark_dead(why):
        state["dead"] = state["dead"] or why
        return Died(why)

    def enc(x):
        def conv(y):
            if isinstance(y, Remote):
                return None
            for base in (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset):
                if isinstance(y, base):
                    return base(y)
            raise TypeError("cannot pass %s to the solution process" % type(y).__name__)
        return _plain(x, 0, conv, lambda r: {"H": object.__getattribute__(r, "_h")})

    def dec(v):
        try:
            return _build(v, 0, Remote)
        except (ValueError, TypeError, RecursionError) as exc:
            state["protocol"] = state["protocol"] or "malformed data from the solution"
            raise Protocol(str(exc))

    def request(msg):
        if state["dead"]:
            raise Died(state["dead"])
        try:
            chan.send(msg)
            reply = chan.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise mark_dead("the solution process died")
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            state["protocol"] = "malformed reply from the solution"
            raise Protocol(str(exc))
        if type(reply) is dict and len(reply) == 1 and "ok" in reply:
            return reply["ok"]
        if type(reply) is dict and len(reply) == 1 and "err" in reply:
            err = reply["err"]
            if type(err) is list and len(err) == 2 and type(err[0]) is str and type(err[1]) is str:
                name, text = err
                if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
                    raise SolutionExit("%s: %s" % (name, text))
                exc = None
                cls = exceptions.get(name)
                if cls is not None:
                    try:
                        exc = cls(text)
                    except Exception:  # exception classes needing other constructor arguments
                        exc = None
                raise exc if exc is not None else SolutionError("%s: %s" % (name, text))
        state["protocol"] = "malformed reply from the solution"
        raise Protocol("malformed reply")

    def rpc(**msg):
        return dec(request(msg))

    def refuse(self, *args):
        raise TypeError("the solution returned %r, which is not plain data: comparing it with a value "
                        "would let it claim equality" % (self,))

    class Remote:
        """An object that lives in the solution process (opaque; see the module docs)."""
        __slots__ = ("_h",)

        def __init__(self, h):
            object.__setattr__(self, "_h", h)

        def __call__(self, *args, **kwargs):
            return rpc(op="call", h=self._h, a=enc(list(args)), k=enc(dict(kwargs)))

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return rpc(op="getattr", h=self._h, n=name)

        def __setattr__(self, name, value):
            rpc(op="setattr", h=self._h, n=name, v=enc(value))

        def __iter__(self):
            items = rpc(op="list", h=self._h)
            if type(items) is not list:
                raise TypeError("iteration did not produce a list")
            return iter(items)

        def __len__(self):
            n = rpc(op="len", h=self._h)
            if type(n) is not int:
                raise TypeError("len() did not produce an int")
            return n

        def __getitem__(self, key):
            return rpc(op="getitem", h=self._h, k=enc(key))

        def __str__(self):
            s = rpc(op="str", h=self._h)
            if type(s) is not str:
                raise TypeError("str() did not produce a str")
            return s

        def __repr__(self):
            try:
                s = request({"op": "repr", "h": object.__getattribute__(self, "_h")})
                if type(s) is str:
                    return s
            except BaseException:
                pass
            return "<solution object>"

        def __int__(self):
            v = rpc(op="int", h=self._h)
            if type(v) is not int:
                raise TypeError("int() did not produce an int")
            return v

        __index__ = __int__

        def __float__(self):
            v = rpc(op="float", h=self._h)
            if type(v) is not float:
                raise TypeError("float() did not produce a float")
            return v

        def __bool__(self):  # sound: the solution could as well have returned True/False itself
            v = rpc(op="bool", h=self._h)
            if type(v) is not bool:
                raise TypeError("bool() did not produce a bool")
            return v

        # Not forwarded: these would hand the expected value to the solution ("are you equal to
        # 5?"), letting an object that answers yes to everything pass.
        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __contains__ = refuse


    # 1. the benchmark's own prelude, while the solution loads in its process
    ns = {"__name__": "__main__"}
    prelude_error = test_code = None
    if spec["mode"] != "plain":
        try:
            exec(compile(prelude, "<benchmark prelude>", "exec"), ns)
            test_code = compile(test, "<benchmark test>", "exec")
        except BaseException as exc:
            print_exc()
            prelude_error = "benchmark prelude or test does not run: %r" % (exc,)

    # 2. wait for the solution to load
    try:
        first = chan.recv()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return untrusted_status()
    except (ValueError, UnicodeDecodeError, RecursionError, Protocol):
        return "failed", "malformed message from the solution"
    if type(first) is dict and first.get("ready") is True and type(first.get("globals")) is dict:
        exported = first["globals"]
    elif type(first) is dict and type(first.get("load_error")) is list and len(first["load_error"]) == 2:
        name, text = (str(x)[:500] for x in first["load_error"])
        return ("memory" if name == "MemoryError" else "error"), "solution failed to load: %s: %s" % (name, text)
    else:
        return "failed", "malformed message from the solution"
    if spec["mode"] == "plain":
        return "passed", "plain program ran to completion (verdict not isolated from the program)"
    if prelude_error:
        return "error", prelude_error

    # 3. bind the solution's entry points to proxies
    for name in spec["entry_points"]:
        if name not in exported:
            ns.pop(name, None)
            continue
        raw = exported[name]
        if type(raw) is dict and len(raw) == 1 and "M" in raw:
            mod = raw["M"]
            if type(mod) is str and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", mod) and \
                    mod.split(".")[0] in allowed_modules:
                try:
                    sys.path.extend(p for p in site_paths if p not in sys.path)
                    ns[name] = importlib.import_module(mod)
                    continue
                except Exception:
                    pass
            ns.pop(name, None)
            continue
        try:
            ns[name] = dec(raw)
        except Protocol:
            break

    # 4. the test decides
    status, detail = "passed", ""
    try:
        if not state["dead"] and not state["protocol"]:
            exec(test_code, ns)
    except Died:
        status = None
    except MemoryError:
        print_exc()
        status, detail = "memory", "MemoryError"
    except BaseException as exc:
        print_exc()
        status, detail = "failed", ("%s: %s" % (type(exc).__name__, exc))[:500]
    if state["dead"] or status is None:
        return untrusted_status()
    if state["protocol"]:
        return "failed", state["protocol"]
    return status, detail


_CAPS = []


def cap_structs():
    """capset(2) argument types and the highest capability number, computed once (the fork
    server does it before forking, so runs do not pay for it)."""
    if not _CAPS:
        import ctypes

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        try:
            with open("/proc/sys/kernel/cap_last_cap") as fh:
                last = int(fh.read())
        except (OSError, ValueError):
            last = 40
        _CAPS.extend([Header, Data, last])
    return _CAPS


def drop_privileges(mode, libc):
    """Make the solution's process unable to touch the trusted one (see the module docs).

    "nobody": uid/gid 65534 keeping only CAP_DAC_READ_SEARCH (it may read the interpreter
    even where it lives under /root, and write nowhere the harness owns); "nocaps": uid 0
    without any capability; "none": not root, nothing to drop. Fails closed (raises).
    """
    import resource
    if mode == "none":
        if libc is not None:
            libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        return
    import ctypes
    Header, Data, last = cap_structs()
    keep = (1 << 2) if mode == "nobody" else 0  # CAP_DAC_READ_SEARCH
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    if mode != "nobody":  # uid 0 keeps a full bounding set; as nobody + NO_NEW_PRIVS exec gains nothing
        for cap in range(last + 1):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (best effort)
    if mode == "nobody":
        resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
        if libc.prctl(8, 1, 0, 0, 0) != 0:  # PR_SET_KEEPCAPS across setuid
            raise OSError("PR_SET_KEEPCAPS failed")
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    else:
        libc.prctl(28, 0x2F, 0, 0, 0)  # SECBIT_NOROOT|_LOCKED|NO_SETUID_FIXUP|_LOCKED|KEEP_CAPS_LOCKED
    data = (Data * 2)()
    data[0].effective = data[0].permitted = keep
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError("capset failed: errno %d" % ctypes.get_errno())
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError("PR_SET_NO_NEW_PRIVS failed")
    got = (Data * 2)()
    if libc.capget(ctypes.byref(Header(0x20080522, 0)), got) != 0 or got[1].effective or got[1].permitted \
            or got[0].effective != keep or got[0].permitted != keep or (mode == "nobody" and os.getuid() != 65534):
        raise OSError("privileges were not dropped")


def reaper(sock, status_fd, libc, sealed, Chan):
    """The parent of the solution's process; never runs solution code.

    With the pid namespace it is the namespace's PID 1. Linux drops every signal that processes
    inside a namespace send to its init unless init handles it, SIGKILL and SIGSTOP included, so
    a solution running as PID 1 would survive `os.kill(os.getpid(), 9)` and could still pass.
    The solution therefore runs as PID 2 (a child of this process), where signals act as usual.
    In every mode this process reports how the solution ended (raw wait status, stop signal) on
    `status_fd`, kills it if it stopped itself (SIGSTOP would otherwise hang until the wall-clock
    timeout) and exits; as a namespace init, its exit kills whatever else is left inside."""
    if libc is not None:
        try:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the runner
        except Exception:
            pass
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        code = 70
        try:
            os.close(status_fd)
            untrusted(sock, Chan(sock.fileno()), libc, parent, sealed)
            code = 0
        except BaseException:
            print_exc()
        finally:
            os._exit(code)
    sock.close()  # the runner sees end of file as soon as the solution's process is gone
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: signals from inside are dropped
    stopped = 0
    status = None
    while status is None:
        try:
            pid, st = os.waitpid(-1, os.WUNTRACED)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid != child:
            continue  # an orphan re-parented to us: reaped
        if os.WIFSTOPPED(st):  # SIGSTOP/SIGTSTP on itself: it would hang until the timeout
            stopped = os.WSTOPSIG(st)
            os.kill(child, signal.SIGKILL)
            continue
        status = st
    if status is not None:
        os.write(status_fd, ("%d %d\n" % (status, stopped)).encode())
    os._exit(0)


def untrusted(sock, chan, libc, parent_pid, sealed):
    """The solution's process: wait for a run, load the solution, answer with plain data."""
    import builtins, signal, resource, socket

    try:
        marker, fds, _, _ = socket.recv_fds(sock, 1, 2)
    except OSError:
        marker, fds = b"", []
    if marker != b"R" or len(fds) != 2:  # a spare that was never used
        os._exit(0)
    for i, fd in enumerate(fds, 1):
        os.dup2(fd, i)
        os.close(fd)
    msg = chan.recv()
    header, solution = msg["setup"], msg["solution"]
    os.chdir(header["cwd"])
    os.environ["HOME"] = os.environ["TMPDIR"] = header["cwd"]
    lim = header["limits"]
    mem = lim["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(lim["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fsize = lim["fsize_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    failure = None
    try:
        drop_privileges(header["privilege"], libc)
    except BaseException as exc:
        failure = "cannot drop privileges (%r); refusing to run the solution" % (exc,)
    if libc is not None:
        try:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (after setuid, which clears it)
        except Exception:
            pass
    if os.getppid() != parent_pid:  # its parent (the reaper) is gone already
        os._exit(0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing
    for mod in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[mod]
    libc = None

    if not sealed and chan.recv() != {"op": "go"}:
        os._exit(0)
    if failure:
        chan.send({"load_error": ["SandboxError", failure]})
        return
    sys.path.extend(p for p in header.get("site_paths", []) if p not in sys.path)

    blocked_events = frozenset({
        "os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "subprocess.Popen",
        "socket.__new__", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
        "socket.getnameinfo", "socket.connect", "socket.bind", "socket.sendto"})
    blocked_imports = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "cffi", "_cffi_backend"})

    def guard(event, args, _events=blocked_events, _imports=blocked_imports,
              _perm=PermissionError, _imp=ImportError, _str=str):
        if event in _events:
            raise _perm("sandbox: %s is not allowed" % event)
        if event == "import" and args and type(args[0]) is _str and args[0].partition(".")[0] in _imports:
            raise _imp("sandbox: importing %s is not allowed" % args[0])

    sys.addaudithook(guard)

    import types
    numbers = []
    isinstance_, getattr_, type_, list_, len_, str_, repr_ = isinstance, getattr, type, list, len, str, repr
    handles = {}

    def keep(obj):
        h = len_(handles) + 1
        handles[h] = obj
        return {"H": h}

    def conv(x):
        for base in (int, float, complex, str, bytes):
            if isinstance_(x, base):
                return base(x)
        for base in (list, tuple, dict, set, frozenset):
            if isinstance_(x, base):
                return base(x)
        if type_(x).__module__ == "numpy" and getattr_(x, "shape", None) == () and hasattr(x, "item"):
            v = x.item()
            return v if type_(v) in (bool, int, float, complex, str, bytes) else None
        if not numbers:
            import numbers as mod
            numbers.append(mod)
        if isinstance_(x, numbers[0].Integral):
            return int(x)
        if isinstance_(x, numbers[0].Real):
            return float(x)
        if isinstance_(x, numbers[0].Complex):
            return complex(x)
        return None

    def enc(x):
        return _plain(x, 0, conv, keep)

    def dec(v):
        return _build(v, 0, lambda h: handles[h])

    def text(e):
        try:
            return str_(e)[:2000]
        except BaseException:
            return "<unprintable>"

    ns = {"__name__": "__solution__", "__builtins__": builtins.__dict__}  # as exec(src, {}) gives
    try:
        exec(compile(solution, "<solution>", "exec"), ns)
    except BaseException as exc:
        print_exc()
        chan.send({"load_error": [type_(exc).__name__, text(exc)]})
        return
    exported = {}
    for name in header.get("entry_points", []):
        try:
            if name not in ns:
                raise NameError("name %r is not defined" % name)
            value = ns[name]
            exported[name] = {"M": value.__name__} if isinstance_(value, types.ModuleType) else enc(value)
        except BaseException:
            pass
    chan.send({"ready": True, "globals": exported})

    while True:
        try:
            req = chan.recv()
        except EOFError:
            return
        try:
            op = req["op"]
            if op == "global":
                name = req["n"]
                if name not in ns:
                    raise NameError("name %r is not defined" % name)
                value = ns[name]
                if isinstance_(value, types.ModuleType):
                    reply = {"ok": {"M": value.__name__}}
                else:
                    reply = {"ok": enc(value)}
            else:
                obj = handles[req["h"]]
                if op == "call":
                    reply = {"ok": enc(obj(*dec(req["a"]), **dec(req["k"])))}
                elif op == "getattr":
                    reply = {"ok": enc(getattr_(obj, req["n"]))}
                elif op == "setattr":
                    setattr(obj, req["n"], dec(req["v"]))
                    reply = {"ok": None}
                elif op == "list":
                    reply = {"ok": enc(list_(obj))}
                elif op == "len":
                    reply = {"ok": enc(len_(obj))}
                elif op == "getitem":
                    reply = {"ok": enc(obj[dec(req["k"])])}
                elif op == "str":
                    reply = {"ok": enc(str_(obj))}
                elif op == "repr":
                    reply = {"ok": enc(repr_(obj))}
                elif op == "int":
                    reply = {"ok": enc(int(obj))}
                elif op == "float":
                    reply = {"ok": enc(float(obj))}
                elif op == "bool":
                    reply = {"ok": bool(obj)}
                else:
                    raise ValueError("unknown request")
        except BaseException as exc:
            reply = {"err": [type_(exc).__name__, text(exc)]}
        try:
            chan.send(reply)
        except (BrokenPipeError, OSError):
            return
        except BaseException as exc:
            chan.send({"err": [type_(exc).__name__, text(exc)]})


def _serve(ctl_fd, namespaces, n_spares):
    """Fork server: one warm, trusted process that keeps spare runners ready.

    A spare is a runner that has already forked its solution process and waits: forking and
    first scheduling happen off the critical path. The server never reads run data: a request
    is a run id, a working directory and four file descriptors (spec pipe, stdout, stderr,
    result pipe) over a SOCK_SEQPACKET socket, handed on to a spare. It writes "~pid N" into the
    run's result pipe and closes its copies; "kill" SIGKILLs a run's process group (only while
    it is unreaped, so never a recycled pid). When the harness goes away, everything goes.
    """
    import socket, select, json, resource, importlib, re, types, numbers, traceback, fcntl, ctypes, gc  # warm
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        cap_structs()
    except Exception:
        pass
    trusted_tables()
    gc.collect()
    gc.freeze()  # forked runners share these objects; a collection there would copy their pages
    sock = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *args: None)
    runs, by_id, spares = {}, {}, []

    def make_spare():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.setsid()
                for fd in [sock.fileno(), wake_r, wake_w, mine.fileno()] + [s.fileno() for _, s in spares]:
                    os.close(fd)
                _runner(namespaces, theirs.fileno())
                code = 0
            except BaseException:
                print_exc()
            finally:
                os._exit(code)
        theirs.close()
        spares.append((pid, mine))

    def assign(req, fds):
        for _ in range(3):
            if not spares:
                make_spare()
            pid, mine = spares.pop(0)
            try:
                os.write(fds[3], b"~pid %d\n" % pid)
                socket.send_fds(mine, [json.dumps(req).encode()], fds)
            except OSError:
                mine.close()
                continue
            mine.close()
            runs[pid] = req["id"]
            by_id[req["id"]] = pid
            break
        for fd in fds:  # the result pipe's end of file now means: the runner has exited
            os.close(fd)

    def reap():
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run_id = runs.pop(pid, None)
            if run_id is not None:
                by_id.pop(run_id, None)
            for i, (spare_pid, mine) in enumerate(spares):
                if spare_pid == pid:
                    mine.close()
                    del spares[i]
                    break

    while True:
        while len(spares) < n_spares:
            make_spare()
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            reap()
        if sock in ready:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 65536, 8)
            except (InterruptedError, BlockingIOError):
                continue
            except OSError:
                msg, fds = b"", []
            if not msg:  # the harness went away: take every run and spare with us
                for pid in list(runs) + [p for p, _ in spares]:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                os._exit(0)
            try:
                req = json.loads(msg)
            except ValueError:
                req = {}
            if req.get("op") == "run" and len(fds) == 4:
                assign(req, fds)
            else:
                for fd in fds:
                    os.close(fd)
                pid = by_id.get(req.get("id")) if req.get("op") == "kill" else None
                if pid:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            reap()
'''


# ---- the harness side ------------------------------------------------------------------------------

_LOCK = threading.Lock()
_PROBED: dict[str, Any] = {}
_RUN_IDS = iter(range(1, 1 << 62))


class _ForkServer:
    """The warm runner parent (``_serve``), one per harness process."""

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-u", "-c",
                 f"{_RUNNER}\n_serve({child.fileno()}, {bool(USE_NAMESPACES)}, {int(SPARE_RUNNERS)})\n"],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, cwd="/", env=_base_env("/"), start_new_session=True)
        finally:
            child.close()
        self.sock = parent
        self.owner = os.getpid()
        self.send_lock = threading.Lock()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def send(self, msg: dict[str, Any], fds: Sequence[int] = ()) -> bool:
        with self.send_lock:
            try:
                socket.send_fds(self.sock, [json.dumps(msg).encode()], list(fds))
                return True
            except OSError:
                return False

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_SERVER: _ForkServer | None = None


def _fork_server() -> _ForkServer | None:
    """The fork server, (re)started on demand; None where one cannot run (direct spawns then)."""
    global _SERVER
    if not USE_FORK_SERVER or not hasattr(socket, "send_fds"):
        return None
    with _LOCK:
        if _SERVER is not None and not _SERVER.alive():
            if _SERVER.owner == os.getpid():
                try:
                    _SERVER.sock.close()
                except OSError:
                    pass
            _SERVER = None
        if _SERVER is None:
            try:
                _SERVER = _ForkServer()
            except OSError:
                return None
        return _SERVER


@atexit.register
def _stop_fork_server() -> None:
    if _SERVER is not None and _SERVER.owner == os.getpid():
        _SERVER.close()


def _privilege_mode() -> str:
    """How the solution's process gives up root: "nobody" (uid 65534 + read-only file access),
    "nocaps" (uid 0 without capabilities), "none" (not root) or "unavailable" (fail closed)."""
    if os.geteuid() != 0:
        return "none"
    with _LOCK:
        mode = _PROBED.get("privilege")
    if mode is None:
        mode = "unavailable"
        probe = Program("", prelude="", solution="import json, math, numbers, collections\n"
                        "def check():\n    return 1\n", test="assert check() == 1\n", entry_points=("check",))
        for candidate in ("nobody", "nocaps"):
            if _run_sync(probe, timeout_s=30.0, memory_mb=1024, cpu_s=None, privilege=candidate).passed:
                mode = candidate
                break
        with _LOCK:
            _PROBED["privilege"] = mode
    return mode


def _site_paths() -> list[str]:
    """This interpreter's site-packages, which the runner (started with -S, so that no ``.pth``
    file runs in it) adds for the solution: generated code may import numpy and the like."""
    if "site" not in _PROBED:
        paths = [p for p in {sysconfig.get_paths()[k] for k in ("purelib", "platlib")} if os.path.isdir(p)]
        _PROBED["site"] = sorted(paths)
    return list(_PROBED["site"])


def _base_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home,
            "TMPDIR": home, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _block(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


@dataclass
class _Run:
    id: int
    base: str
    work: str
    spec: bytes
    nonce: str
    spec_r: int
    spec_w: int
    result_r: int
    result_w: int
    out: Any
    err: Any
    server: _ForkServer | None
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0


def _prepare(program: str, timeout_s: float, memory_mb: int, cpu_s: float | None, privilege: str) -> _Run:
    if isinstance(program, Program):
        mode, prelude, solution, test, entries = "split", program.prelude, program.solution, program.test, \
            list(program.entry_points)
    else:
        mode, prelude, solution, test, entries = "plain", "", str(program), "", []
    server = _fork_server()
    base = tempfile.mkdtemp(prefix="agentic-sandbox-")
    work = os.path.join(base, "work")
    os.mkdir(work, 0o700)
    if privilege == "nobody":
        os.chmod(base, 0o711)  # nobody may enter work/ but not list base/ or open the output files
        os.chown(work, NOBODY, NOBODY)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    out = os.fdopen(os.open(os.path.join(base, "stdout"), flags, 0o600), "wb+")
    err = os.fdopen(os.open(os.path.join(base, "stderr"), flags, 0o600), "wb+")
    spec_r, spec_w = os.pipe()
    result_r, result_w = os.pipe()
    nonce = secrets.token_hex(16)
    cpu = int(cpu_s) if cpu_s is not None else int(timeout_s) + 2
    header = {"limits": {"memory_mb": int(memory_mb), "cpu_s": max(1, cpu), "fsize_mb": FSIZE_MB},
              "privilege": privilege, "result_fd": 3 if server else result_w, "site_paths": _site_paths(),
              "entry_points": entries}
    spec = {"mode": mode, "entry_points": entries}
    enc = lambda text: text.encode("utf-8", "surrogatepass")  # noqa: E731
    data = b"".join([_block(json.dumps(header).encode()), _block(enc(solution)), _block(json.dumps(spec).encode()),
                     _block(enc(prelude)), _block(enc(test)), _block(nonce.encode())])
    with _LOCK:
        run_id = next(_RUN_IDS)
    return _Run(run_id, base, work, data, nonce, spec_r, spec_w, result_r, result_w, out, err, server)


def _launch(run: _Run) -> None:
    """Start the runner: through the fork server, else as a fresh ``python -I -S`` (fallback)."""
    run.started = time.monotonic()
    try:
        fds = (run.spec_r, run.out.fileno(), run.err.fileno(), run.result_w)
        if not (run.server and run.server.send({"op": "run", "id": run.id, "cwd": run.work}, fds)):
            if run.server:  # the server died under us: this run and later ones spawn directly
                run.server = None
                _restart_header(run)
            run.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-u", "-c", f"{_RUNNER}\n_runner({bool(USE_NAMESPACES)})\n"],
                stdin=run.spec_r,
                stdout=run.out, stderr=run.err, pass_fds=(run.result_w,), cwd=run.work, env=_base_env(run.work),
                start_new_session=True)
    finally:
        os.close(run.spec_r)
        os.close(run.result_w)
    os.set_blocking(run.spec_w, False)
    os.set_blocking(run.result_r, False)


def _restart_header(run: _Run) -> None:
    n = int.from_bytes(run.spec[:8], "big")
    header = json.loads(run.spec[8:8 + n])
    header["result_fd"] = run.result_w
    run.spec = _block(json.dumps(header).encode()) + run.spec[8 + n:]


def _kill(run: _Run) -> None:
    if run.proc is not None:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    elif run.server is not None:
        run.server.send({"op": "kill", "id": run.id})


def _feed(run: _Run, sent: int) -> int:
    """Write more of the spec to the runner's stdin; returns the new offset (len when done).
    The caller closes the pipe (after unregistering it from any event loop: fd numbers are
    reused at once, and a stale registration would hijack another run's pipe)."""
    try:
        sent += os.write(run.spec_w, run.spec[sent:sent + (1 << 16)])
    except BlockingIOError:
        return sent
    except OSError:  # the runner is gone (BrokenPipeError) or worse: nothing more to send
        return len(run.spec)
    return sent


def _close_spec(run: _Run) -> None:
    if run.spec_w >= 0:
        os.close(run.spec_w)
        run.spec_w = -1


def _read(run: _Run, buf: bytearray) -> bool:
    """Read what the result pipe has; True once the verdict line is in, or at end of file
    (the runner is gone). The runner kills the solution's process before writing its verdict."""
    while True:
        try:
            chunk = os.read(run.result_r, 65536)
        except BlockingIOError:
            break
        if not chunk:
            return True
        if len(buf) < 1 << 20:
            buf += chunk
    i = buf.find(run.nonce.encode())
    return i >= 0 and buf.find(b"\n", i) >= 0


def _tail(fh: Any) -> str:
    try:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - TAIL_CHARS * 4))
        return fh.read().decode("utf-8", "replace")[-TAIL_CHARS:]
    except (OSError, ValueError):
        return ""


def _rmtree(path: str) -> None:
    def onerror(func: Any, p: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=onerror)


_TRASH: "queue.SimpleQueue[str | None]" = queue.SimpleQueue()
_SWEEPER: list[threading.Thread] = []


def _discard(path: str) -> None:
    """Delete a finished run's directory off the caller's path (rmdir can take milliseconds,
    e.g. on ext4 mounted with ``discard``); :func:`_flush_trash` runs at exit."""
    with _LOCK:
        if not _SWEEPER or not _SWEEPER[0].is_alive():
            _SWEEPER[:] = [threading.Thread(target=_sweep, name="sandbox-cleanup", daemon=True)]
            _SWEEPER[0].start()
    _TRASH.put(path)


def _sweep() -> None:
    while True:
        path = _TRASH.get()
        if path is None:
            return
        _rmtree(path)


@atexit.register
def _flush_trash() -> None:
    if _SWEEPER and _SWEEPER[0].is_alive():
        _TRASH.put(None)
        _SWEEPER[0].join(30)
    while True:  # whatever is left (no sweeper, or it timed out)
        try:
            path = _TRASH.get_nowait()
        except queue.Empty:
            return
        if path is not None:
            _rmtree(path)


def _finish(run: _Run, data: bytes, timed_out: bool) -> ExecResult:
    duration = time.monotonic() - run.started
    _close_spec(run)
    os.close(run.result_r)
    status, detail, raw_exit = None, "", None
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 2)
        if status is None and len(parts) >= 2 and secrets.compare_digest(parts[0], run.nonce) \
                and parts[1] in STATUSES:
            status = parts[1]
            try:
                detail = str(json.loads(parts[2])) if len(parts) > 2 else ""
            except ValueError:
                detail = ""
    if run.proc is not None:
        try:
            code = run.proc.wait(5)
            raw_exit = (-code) if code < 0 else (code << 8)
        except subprocess.TimeoutExpired:
            _kill(run)
            run.proc.wait()
    if status is None:
        if timed_out:
            status, detail = "timeout", "wall-clock limit reached"
        elif raw_exit is not None and os.WIFSIGNALED(raw_exit):
            sig = os.WTERMSIG(raw_exit)
            status = "timeout" if sig == signal.SIGXCPU else "killed"
            detail = f"runner killed by signal {sig}"
        elif raw_exit is not None:
            status, detail = "error", f"no verdict from the runner (exit status {raw_exit})"
        else:
            status, detail = "killed", "the runner ended without a verdict"
    result = ExecResult(passed=status == "passed", status=status, duration_s=duration,
                        stdout_tail=_tail(run.out), stderr_tail=_tail(run.err), detail=detail)
    run.out.close()
    run.err.close()
    _discard(run.base)
    return result


def _refused(privilege: str) -> ExecResult | None:
    if privilege != "unavailable":
        return None
    return ExecResult(False, "error", 0.0, "", "", "running as root but unable to drop privileges for the "
                                                   "solution; refusing to run generated code")


def _run_sync(program: str, *, timeout_s: float, memory_mb: int, cpu_s: float | None, privilege: str) -> ExecResult:
    run = _prepare(program, timeout_s, memory_mb, cpu_s, privilege)
    buf = bytearray()
    timed_out = False
    try:
        _launch(run)
        deadline = run.started + timeout_s
        sent, done = 0, False
        while not done:
            now = time.monotonic()
            if now >= deadline:
                if timed_out:  # the kill did not end it within the grace period: give up waiting
                    break
                timed_out = True
                _kill(run)
                deadline = now + KILL_GRACE_S
                continue
            wlist = [run.spec_w] if run.spec_w >= 0 else []
            readable, writable, _ = select.select([run.result_r], wlist, [], deadline - now)
            if writable:
                sent = _feed(run, sent)
                if sent >= len(run.spec):
                    _close_spec(run)
            if readable:
                done = _read(run, buf)
    except BaseException:
        _kill(run)
        _finish(run, bytes(buf), True)
        raise
    return _finish(run, bytes(buf), timed_out)


def run_program(program: str, *, timeout_s: float = 10.0, memory_mb: int = 1024,
                cpu_s: float | None = None) -> ExecResult:
    """Run ``program`` in the sandbox and return the unforgeable verdict (blocking).

    ``program`` is a :class:`Program` from :func:`humaneval_program`/:func:`mbpp_program`
    (isolated verdict) or any complete Python source (passes if it runs without exception).
    ``cpu_s`` defaults to ``timeout_s + 2`` seconds of CPU per process.
    """
    privilege = _privilege_mode()
    return _refused(privilege) or _run_sync(program, timeout_s=timeout_s, memory_mb=memory_mb, cpu_s=cpu_s,
                                            privilege=privilege)


async def run_program_async(program: str, *, timeout_s: float = 10.0, memory_mb: int = 1024,
                            cpu_s: float | None = None) -> ExecResult:
    """:func:`run_program` without blocking the event loop (the result pipe is watched by the loop)."""
    privilege = _PROBED.get("privilege") if os.geteuid() == 0 else "none"
    if privilege is None:  # first call in this process: probe once, off the event loop
        privilege = await asyncio.to_thread(_privilege_mode)
    refused = _refused(privilege)
    if refused:
        return refused
    loop = asyncio.get_running_loop()
    run = _prepare(program, timeout_s, memory_mb, cpu_s, privilege)
    buf = bytearray()
    done = loop.create_future()
    sent = 0
    watching = {"reader": False, "writer": False}

    def on_readable() -> None:
        if _read(run, buf) and not done.done():
            done.set_result(None)

    def stop_writing() -> None:
        if watching["writer"]:
            loop.remove_writer(run.spec_w)  # before the close: the fd number is reused at once
            watching["writer"] = False
        _close_spec(run)

    def on_writable() -> None:
        nonlocal sent
        sent = _feed(run, sent)
        if sent >= len(run.spec):
            stop_writing()

    def stop_watching() -> None:
        if watching["reader"]:
            loop.remove_reader(run.result_r)
            watching["reader"] = False
        stop_writing()

    timed_out = False
    try:
        _launch(run)
        loop.add_reader(run.result_r, on_readable)
        watching["reader"] = True
        loop.add_writer(run.spec_w, on_writable)
        watching["writer"] = True
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
            _kill(run)
            try:
                await asyncio.wait_for(asyncio.shield(done), KILL_GRACE_S)
            except asyncio.TimeoutError:
                pass
    except BaseException:
        _kill(run)
        stop_watching()
        _finish(run, bytes(buf), True)
        raise
    stop_watching()
    if run.proc is not None and run.proc.poll() is None:
        await asyncio.to_thread(run.proc.wait, KILL_GRACE_S)
    return _finish(run, bytes(buf), timed_out)
