"""The trusted runner: takes the run's solution process from its pod (forked before the runner
read anything of any run), reads the run spec (nonce last), runs the benchmark's test through
`trusted`, and writes the only verdict the harness accepts: `<nonce> <status> <detail>` on the
private result pipe, after killing the solution's process."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

import json, os, signal, sys


def print_exc():
    """traceback.print_exc, imported only when something failed (it is slow to import)."""
    import traceback
    traceback.print_exc()


def _open_fds():
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _close_fds_except(keep):
    """Close every fd above 2 but `keep`: a freshly forked child keeps only what it needs."""
    for fd in _open_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


class Died(BaseException):
    """The untrusted process is gone (BaseException: `except Exception` in a test must not hide it)."""


class Protocol(BaseException):
    """The untrusted process sent something that is not a well-formed reply."""


class Chan:
    """Length-prefixed JSON messages over the socket between the two processes."""

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


def _read_exact(fd, n):
    parts = []
    while n > 0:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError("short read")
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def _read_block(fd):
    return _read_exact(fd, int.from_bytes(_read_exact(fd, 8), "big"))


# Python's own start-up dispositions (it ignores SIGPIPE and SIGXFSZ); everything else is reset.
_KEEP_IGNORED = ("SIGPIPE", "SIGXFSZ")


def _default_signals():
    """Every signal at its default disposition (SIGINT: Python's KeyboardInterrupt handler), whatever the
    harness inherited: under `nohup` or as a background job of a script, SIGHUP, SIGQUIT and SIGINT
    arrive ignored, and a solution that signals itself would then survive and pass there but fail
    elsewhere. A verdict must not depend on how the harness was started."""
    keep = {getattr(signal, n) for n in _KEEP_IGNORED if hasattr(signal, n)}
    for sig in signal.valid_signals():
        if sig in keep or sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _seal():
    """(libc, sealed): PR_SET_DUMPABLE 0, so that same-uid processes can neither read this
    process's memory nor open /proc/<it>/fd."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc, libc.prctl(4, 0, 0, 0, 0) == 0
    except Exception:
        return None, False


_PROGRAM = []  # the compiled runner program (marshal bytes), appended by the bootstrap that loaded it (launch)


def _program_fd():
    """A sealed memfd (above 10) holding the compiled runner program, for a pod's interpreter to load (fd 5)."""
    import fcntl
    data = _PROGRAM[0]
    fd = os.memfd_create("sandbox-runner", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.pwrite(fd, view, len(data) - len(view)):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def _start_pod(namespaces, shared_netns, libc, sealed, pod=None):
    """The pod: started while this runner has read nothing of any run. Its init (the reaper) forks
    one solution process per run and hands it over `pod` (see `reaper`). With `pod` (a bwrap spec
    from the harness) the pod is a fresh interpreter in its own bubblewrap view (`_pod`), built
    once here for all of this runner's runs; else a fork of this runner. Returns (pod socket, pid,
    whether the solution is out of reach of everything outside, the solution's cwd or None)."""
    import socket, fcntl
    isolated = False
    if pod is None and namespaces and libc is not None:
        # new pid namespace (the reaper is its init, the solutions PID 2, 3, ...): they cannot see
        # or signal anything outside, and everything they start dies with the run's sweep; and a
        # network namespace with no interface up (no network even past the audit hook): a fresh one,
        # or the fork server's own (`shared_netns`: created once, shared by its runners)
        isolated = libc.unshare(0x20000000 | (0 if shared_netns else 0x40000000)) == 0  # CLONE_NEWPID [| CLONE_NEWNET]
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours, theirs = (socket.socket(fileno=fcntl.fcntl(p.fileno(), fcntl.F_DUPFD, 10)) for p in pair)
    for p in pair:  # above 10: the run's fds are dup2'ed onto 0-3 later
        p.close()
    argv = filt = program = None
    if pod is not None:  # the pod's interpreter loads the compiled runner program from fd 5 (see launch._bootstrap)
        program = _program_fd()
        argv = list(pod["argv"]) + ["-I", "-S", "-B", "-u", "-c",
                                    "import marshal, os\nexec(marshal.loads(os.pread(5, %d, 0)))\nos.close(5)\n"
                                    "_pod(3, %r)\n" % (len(_PROGRAM[0]), bool(pod.get("root")))]
        if pod.get("seccomp"):  # bwrap reads the filter from fd 4 (a pipe filled before the fork)
            argv[1:1] = ["--seccomp", "4"]
            low = os.pipe()
            filt = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low]  # above 10: fds 3 and 4 are set below
            for fd in low:
                os.close(fd)
            os.write(filt[1], pod["seccomp"])
            os.close(filt[1])
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            if argv is not None:  # bwrap gets only the pod's end of the socket, as fd 3 (the filter, 4; the program, 5)
                os.dup2(theirs.fileno(), 3)
                if filt is not None:
                    os.dup2(filt[0], 4)
                os.dup2(program, 5)
                _close_fds_except({3, 4, 5} if filt is not None else {3, 5})
                nul = os.open(os.devnull, os.O_RDONLY)
                os.dup2(nul, 0)
                os.close(nul)
                os.execve(argv[0], argv, {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            _close_fds_except({theirs.fileno()})
            nul = os.open(os.devnull, os.O_RDONLY)
            os.dup2(nul, 0)
            os.close(nul)
            reaper(theirs, libc, sealed, Chan)
            code = 0
        except BaseException:
            print_exc()
        finally:
            os._exit(code)
    theirs.close()
    if filt is not None:
        os.close(filt[0])
    if program is not None:
        os.close(program)
    return ours, pid, isolated or pod is not None, (SCRATCH_DIR if pod is not None else None)


SCRATCH_DIR = "/scratch"  # the solution's working directory in a bwrap pod (launch.SCRATCH)


def _take_solution(pod):
    """The pod's waiting solution process: (socket to it, status pipe, its pidfd)."""
    import socket, fcntl
    msg, fds, _, _ = socket.recv_fds(pod, 16, 3)
    if msg != b"S" or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise EOFError("the pod is gone")
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    return socket.socket(fileno=high[0]), high[1], high[2]


def _readable(fd, timeout):
    """Wait until `fd` has data or is at end of file; True if it is."""
    import select
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):
        return True


def _kill_solution(pidfd):
    """SIGKILL the run's solution process (by pidfd: never a recycled pid); its pod's init then
    sweeps whatever else is in the namespace before forking the next one."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass


def _set_limit(resource, which, value, persistent):
    """A fresh runner sets soft and hard limits; a persistent one (it serves many runs, and
    could not raise a lowered hard limit without privileges) sets the soft limit only."""
    if persistent:
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, hard))
    else:
        resource.setrlimit(which, (value, value))


def _one_run(sealed, t_sock, st_r, pidfd, persistent, isolated, pod_cwd=None, solution_fds=None):
    """One run, with the run's spec on fd 0, this runner's own log on 1/2, the solution's stdout/stderr
    on `solution_fds` (default: the header's) and the result fd the header names: reads the spec (nonce
    last), sends the solution its setup and output files, runs `trusted`, kills the solution's process,
    then returns the one verdict line (and the fd it goes to). The runner never shares a file, a limit on
    one or a working directory with the solution: what the solution does to its stdout/stderr/fds or
    its cwd cannot turn into this runner failing."""
    import json, resource, socket
    chan = Chan(t_sock.fileno())
    header = json.loads(_read_block(0))
    result_fd = header["result_fd"]
    lim = header["limits"]
    mem = lim["memory_mb"] << 20
    _set_limit(resource, resource.RLIMIT_AS, mem, persistent)
    cpu = int(lim["cpu_s"])
    if persistent:  # this run's CPU on top of what earlier runs used
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu += int(used.ru_utime + used.ru_stime) + 1
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
    else:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fsize = lim["fsize_mb"] << 20
    _set_limit(resource, resource.RLIMIT_FSIZE, fsize, persistent)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    solution = _read_block(0).decode("utf-8", "surrogatepass")
    setup = {k: header.get(k) for k in ("limits", "privilege", "entry_points", "audit_hook")}
    setup.update(sealed=sealed, cwd=pod_cwd or header["cwd"], pod=pod_cwd is not None,
                 site_paths=header.get("solution_site_paths", header.get("site_paths", [])))
    out_fds = list(solution_fds or header["solution_fds"])
    try:  # the solution's process gets the run's stdout/stderr, its setup and the solution
        socket.send_fds(t_sock, [b"R"], out_fds)
        chan.send({"setup": setup, "solution": solution})
    except OSError:
        pass
    for fd in out_fds:  # this runner keeps no handle on the solution's output files
        try:
            os.close(fd)
        except OSError:
            pass
    spec = json.loads(_read_block(0))
    prelude = _read_block(0).decode("utf-8", "surrogatepass")
    test = _read_block(0).decode("utf-8", "surrogatepass")
    nonce = _read_block(0).decode()
    nul = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nul, 0)
    os.close(nul)
    if not sealed:  # the solution waits until the nonce is out of the pipe it could reach via /proc
        try:
            chan.send({"op": "go"})
        except OSError:
            pass
    try:
        status, detail = trusted(lambda timeout: _readable(st_r, timeout), chan, spec, prelude, test, Died, Protocol,
                                 st_r, reaper_out_of_reach=isolated or header.get("privilege") == "nobody",
                                 kill=lambda: _kill_solution(pidfd))
    except MemoryError:
        status, detail = "memory", "MemoryError in the runner"
    except BaseException as exc:
        status, detail = "error", "runner: " + repr(exc)[:300]
    _kill_solution(pidfd)  # the solution's side is killed before the verdict is out
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    return result_fd, (nonce + " " + status + " " + json.dumps(detail) + "\n").encode()


def _sandbox_error(detail):
    """Answer the run on fd 0 with an ``error`` verdict whose detail marks it as the sandbox's
    fault (the harness reports it as an error, never as the code's failure)."""
    import json
    header = json.loads(_read_block(0))
    for _ in range(4):  # solution, spec, prelude, test
        _read_block(0)
    nonce = _read_block(0).decode()
    os.write(header["result_fd"], (nonce + " error " + json.dumps(detail) + "\n").encode())


def _runner(namespaces, pod_spec=None):
    """A runner started directly (no fork server): a fresh interpreter that makes its pod, then
    serves the one run on stdin/stdout/stderr, and exits."""
    _default_signals()
    libc, sealed = _seal()
    try:
        pod, _, isolated, pod_cwd = _start_pod(namespaces, False, libc, sealed, pod_spec)
        t_sock, st_r, pidfd = _take_solution(pod)
    except (OSError, EOFError) as exc:
        _sandbox_error("sandbox: no solution process (%r)" % (exc,))
        os._exit(0)
    result_fd, line = _one_run(sealed, t_sock, st_r, pidfd, False, isolated, pod_cwd)
    os.write(result_fd, line)  # one write below PIPE_BUF: atomic
    if os.getpgrp() == os.getpid():  # leader of our own group (new session): sweep it, pod included
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(0)


def _end_pod(pod, pod_pid, watches):
    """End the pod and reap it. A bwrap pod's init ends by itself when its socket closes, and is
    then reaped by bwrap, so its CPU time reaches the harness's accounting (a SIGKILLed bwrap would
    leave it to the system's init); wait for that a little, then kill."""
    import time
    if watches:
        pod.close()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if os.waitpid(pod_pid, os.WNOHANG)[0]:
                return
            time.sleep(0.002)
    os.kill(pod_pid, signal.SIGKILL)
    os.waitpid(pod_pid, 0)


RUNS_PER_RUNNER = 1000  # a persistent runner retires after this many runs (bounds any slow growth)


def _persistent_runner(ctl_fd, namespaces, shared_netns, pod_spec=None):
    """A trusted runner the fork server keeps for many runs, one at a time. Forked from the
    fork server, it makes its pod before it reads anything, so every solution process is forked
    from the pod's init, which never sees run data. Per run it gets the run's fds (spec, stdout,
    stderr, result) and working directory from the fork server and the next solution process
    from its pod; after the verdict it restores the state a test may change and says it is free."""
    import json, socket, fcntl, random, gc
    libc, sealed = _seal()
    ctl = socket.socket(fileno=fcntl.fcntl(ctl_fd, fcntl.F_DUPFD, 10))
    os.close(ctl_fd)
    pod, pod_pid, isolated, pod_cwd = _start_pod(namespaces, shared_netns, libc, sealed, pod_spec)
    random_state, recursion, path = random.getstate(), sys.getrecursionlimit(), list(sys.path)
    environ = dict(os.environ)
    for n in range(RUNS_PER_RUNNER):
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 65536, 5)
        except OSError:
            msg, fds = b"", []
        if not msg or len(fds) != 5:  # the fork server closes: end the pod and reap it (its CPU time counts)
            _end_pod(pod, pod_pid, pod_cwd is not None)
            os._exit(0)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
        for fd in fds:
            os.close(fd)
        for i, fd in zip((0, 5, 6, 3, 1), high):  # spec, the solution's stdout/stderr, result, this runner's log
            os.dup2(fd, i)
            os.close(fd)
        os.dup2(1, 2)
        req = json.loads(msg)
        t_sock = st_r = pidfd = None
        for attempt in range(2):
            try:
                t_sock, st_r, pidfd = _take_solution(pod)
                if pod_cwd is not None and _readable(pod.fileno(), 0):  # its init has gone since it forked this one
                    t_sock.close()
                    os.close(st_r)
                    os.close(pidfd)
                    t_sock = st_r = pidfd = None
                    raise EOFError("the pod's init is gone")
                break
            except (OSError, EOFError):
                if attempt or pod_cwd is None:
                    break
            # a bwrap pod that died (whatever a program left it) is replaced before this run, never reported as
            # this run's error: a fresh interpreter in a fresh view, which has seen nothing of any run
            try:
                _end_pod(pod, pod_pid, False)
            except OSError:
                pass
            pod, pod_pid, isolated, pod_cwd = _start_pod(namespaces, shared_netns, libc, sealed, pod_spec)
        if t_sock is None:  # no solution process: this run gets an infrastructure error
            _sandbox_error("sandbox: the runner's pod is gone and could not be replaced")
            os.killpg(os.getpgrp(), signal.SIGKILL)  # the fork server starts another runner
        try:  # the run's clock starts now, with its solution process in hand (launch.QUEUE_WAIT_S): the wait for a
            os.write(3, b"\n")  # free runner and a pod replaced above are the sandbox's time, not the program's
        except OSError:
            pass
        try:  # the runner's own cwd stays "/": never the solution's (whose files a test discovery could import)
            result_fd, line = _one_run(sealed, t_sock, st_r, pidfd, True, isolated, pod_cwd, (5, 6))
            # what the test left in reference cycles (the workflow relay's socket) is freed now, while its fds are
            # still its own: collected in a later run, it closed fd numbers that run had been given (EBADF)
            gc.collect()
        except BaseException:  # a broken run or pod leaves no verdict: the harness reports it; the runner goes
            print_exc()
            os.killpg(os.getpgrp(), signal.SIGKILL)
        t_sock.close()
        os.close(st_r)
        os.close(pidfd)
        result_fd = fcntl.fcntl(result_fd, fcntl.F_DUPFD, 10)
        nul = os.open(os.devnull, os.O_RDWR)
        for i in range(7):  # drop this run's files
            os.dup2(nul, i)
        os.close(nul)
        os.chdir("/")  # a test may have changed it
        os.environ.clear()
        os.environ.update(environ)
        random.setstate(random_state)
        sys.setrecursionlimit(recursion)
        sys.path[:] = path
        last = n == RUNS_PER_RUNNER - 1
        fresh = bool(pod_spec and pod_spec.get("per_run")) and not last
        if not fresh:  # free before the verdict is out: the harness's next run then finds this runner free
            ctl.send(b"D" if not last else b"X")
        os.write(result_fd, line)  # one write below PIPE_BUF: atomic
        os.close(result_fd)  # the harness sees the result pipe's end
        if fresh:  # sandbox.pod_per_run: the next run gets a fresh pod (fresh pid and IPC namespaces, fresh /tmp),
            # so nothing of this run, not even that there was one, reaches it; free only once that pod is up
            _end_pod(pod, pod_pid, True)
            pod, pod_pid, isolated, pod_cwd = _start_pod(namespaces, shared_netns, libc, sealed, pod_spec)
            ctl.send(b"D")
    os.killpg(os.getpgrp(), signal.SIGKILL)  # retired: the pod goes with it
