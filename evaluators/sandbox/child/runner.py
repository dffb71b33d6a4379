"""The trusted runner: forks the solution's side, reads the run spec (nonce last), runs the
benchmark's test through `trusted`, and writes the only verdict the harness accepts:
`<nonce> <status> <detail>` on the private result pipe, after the solution's process is dead."""
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


def _runner(namespaces, assign_fd=None, shared_netns=False):
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

    libc, sealed = None, False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # PR_SET_DUMPABLE 0: same-uid processes can neither read our memory nor open /proc/<us>/fd
        sealed = libc.prctl(4, 0, 0, 0, 0) == 0
    except Exception:
        pass
    if namespaces and libc is not None:
        # new pid namespace (the reaper is its init, the solution PID 2): it cannot see or signal
        # anything outside, and everything it might start dies with it; and a network namespace
        # with no interface up (no network even past the audit hook): a fresh one per run, or the
        # fork server's own (`shared_netns`: created once, shared by its runs; saves ~1 ms a run)
        libc.unshare(0x20000000 | (0 if shared_netns else 0x40000000))  # CLONE_NEWPID [| CLONE_NEWNET]
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
