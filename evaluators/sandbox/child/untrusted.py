"""The solution's side: the reaper (PID 1 of the namespace, reports how the solution ended),
the privilege drop (nobody + CAP_DAC_READ_SEARCH, or uid 0 without capabilities), process limits,
the audit hook (no fork/exec/sockets/ctypes), then loading the solution and answering requests."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

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


def _audit_guard(event, args):
    """The solution's audit hook (defence in depth: the pod's view, namespaces and missing
    capabilities are the boundary). It holds no state reflection could change: its lists are
    constants of its own code (replacing ``__code__`` is itself refused), it has no defaults or
    closure, and it reads no global but the exception it raises (a rebound name still raises)."""
    if event in {"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "subprocess.Popen",
                 "socket.__new__", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                 "socket.getnameinfo", "socket.connect", "socket.bind", "socket.sendto", "gc.get_objects",
                 "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.setprofile", "sys.settrace"}:
        raise PermissionError("sandbox: %s is not allowed" % event)
    if event == "import" and "".__class__.partition(args[0], ".")[0] in {
            "ctypes", "_ctypes", "_posixsubprocess", "cffi", "_cffi_backend"}:
        raise ImportError("sandbox: importing %s is not allowed" % args[0])
    if event == "object.__setattr__" and args[1] == "__code__":  # (defaults: it has none to change)
        raise PermissionError("sandbox: setting __code__ is not allowed")


def _audit_guard_pod(event, args):
    """The audit hook in a bwrap pod, where the boundary is the pod itself (every hostile test also runs there with
    no hook at all): as `_audit_guard`, except that `ctypes`, `_ctypes` and `_posixsubprocess` may be imported, as
    the listed packages do at import time (sympy: `from ctypes import c_long, sizeof`; pandas: `import ctypes`;
    scipy: `import subprocess`), which made them fail to load, and networkx's decorator may set the code of its own
    wrappers (nothing else's: every graph call failed). What ctypes would reach libc with stays refused
    here: loading a library by name and looking a native function up (`CDLL(None).system`); and there is no
    shell, no capability, seccomp, no view beyond the allow-list. Constants only, as `_audit_guard`."""
    if event in {"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "subprocess.Popen",
                 "socket.__new__", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                 "socket.getnameinfo", "socket.connect", "socket.bind", "socket.sendto", "gc.get_objects",
                 "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.setprofile", "sys.settrace",
                 "ctypes.dlsym", "ctypes.dlsym/handle"}:
        raise PermissionError("sandbox: %s is not allowed" % event)
    if event == "ctypes.dlopen" and args[0] is not None:  # (ctypes' own import opens the running program: None)
        raise PermissionError("sandbox: ctypes.dlopen is not allowed")
    if event == "import" and "".__class__.partition(args[0], ".")[0] in {"cffi", "_cffi_backend"}:
        raise ImportError("sandbox: importing %s is not allowed" % args[0])
    if event == "object.__setattr__" and args[1] == "__code__" \
            and args[0].__code__.co_filename != "/sandbox/site-packages/networkx/utils/decorators.py":
        # (networkx's `argmap` compiles a decorated function on its first call and sets the code of its own wrapper,
        # defined in that file; no other function's code can be swapped, this hook's own included)
        raise PermissionError("sandbox: setting __code__ is not allowed")


def _empty_dir(path):
    """Remove everything under `path` (a pod's /scratch or /tmp after a run); raises if it cannot. Without
    recursion and without deep paths, whatever tree a program left (a 1,200-deep one made the recursive
    version raise RecursionError and the init exit): every subdirectory's own subdirectories are moved up
    to `path` itself, so no directory handled is ever more than one level deep."""
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    moved = 0
    try:
        while True:
            entries = list(os.scandir(top))
            if not entries:
                return
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=top)
                    continue
                os.chmod(entry.name, 0o700, dir_fd=top, follow_symlinks=False)
                sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                try:
                    for inner in list(os.scandir(sub)):
                        if inner.is_dir(follow_symlinks=False):
                            moved += 1
                            os.rename(inner.name, ".emptied-%d" % moved, src_dir_fd=sub, dst_dir_fd=top)
                        else:
                            os.unlink(inner.name, dir_fd=sub)
                finally:
                    os.close(sub)
                os.rmdir(entry.name, dir_fd=top)
    finally:
        os.close(top)


def _pod_problem(root):
    """Why this pod's init must not fork solutions (None: it may): any capability left, no
    no_new_privs, or (as root) not uid/gid 65534."""
    try:
        with open("/proc/self/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError as exc:
        return "cannot read /proc/self/status: %r" % (exc,)
    names = ("CapInh", "CapPrm", "CapEff", "CapAmb") + (("CapBnd",) if root else ())
    left = [n for n in names if int(fields.get(n, "1").strip() or "1", 16) != 0]
    if left:
        return "capabilities left: %s" % ", ".join(left)
    if fields.get("NoNewPrivs", "0").strip() != "1":
        return "no_new_privs is not set"
    if root and (os.getresuid() != (65534,) * 3 or os.getresgid() != (65534,) * 3 or os.getgroups()):
        return "not uid/gid 65534"
    return None


def _become_nobody():
    """As root: drop the bounding set (CAP_SETPCAP, which bwrap left for this), become uid/gid
    65534 with no groups (which clears the permitted and effective sets), then clear the
    inheritable set. ctypes goes from sys.modules afterwards (the audit hook refuses it again)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    Header, Data, last = cap_structs()
    for cap in range(last + 1):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG again (bwrap's --die-with-parent; setuid cleared it)
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
        raise OSError("capset failed: errno %d" % ctypes.get_errno())
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (bwrap has set it already)
    del libc
    _CAPS.clear()
    for mod in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[mod]


def _pod(ctl_fd, root):
    """A bwrap pod's init (PID 1 of the pod's pid namespace, inside its read-only view): as root
    it first becomes nobody without any capability; it checks that nothing is left, then readies
    what every solution process it forks would otherwise build for itself (copy-on-write for all
    of them): the common modules, what `untrusted` imports (`resource`: ~1 ms of CPU per run) and
    compile()'s AST types (~1.5 ms per run); it freezes all that out of the garbage collector (a
    collection in a solution process would touch, and so copy, its pages), then is the reaper."""
    import socket, importlib, resource, gc  # noqa: F401  (resource: preloaded for the solution processes)
    _default_signals()
    try:
        if root:
            _become_nobody()
        problem = _pod_problem(root)
    except BaseException as exc:
        problem = "cannot drop privileges: %r" % (exc,)
    if problem:
        sys.stderr.write("sandbox pod: %s; refusing to run solutions\n" % problem)
        os._exit(70)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    compile("", "<pod>", "exec")  # compile()'s first call builds ~120 AST types (~1.5 ms): here, not in every solution
    gc.collect()
    gc.freeze()
    del sys.modules["gc"]  # (untrusted drops it again: the solution never finds gc loaded)
    reaper(socket.socket(fileno=ctl_fd), None, False, Chan, scratch=(SCRATCH_DIR, "/tmp"))


def reaper(ctl, libc, sealed, Chan, scratch=()):
    """The pod's init, parent of every solution process of one runner; never runs solution code
    and never sees run data (it was forked before its runner read any).

    With the pid namespace it is the namespace's PID 1. Linux drops every signal that processes
    inside a namespace send to its init unless init handles it, SIGKILL and SIGSTOP included, so
    a solution running as PID 1 would survive `os.kill(os.getpid(), 9)` and could still pass.
    Solutions therefore run as its children (PID 2, 3, ...), where signals act as usual. For each
    run it forks one solution process and hands the runner (over `ctl`) the socket to it, a
    status pipe and its pidfd; it reports how that process ended (raw wait status, stop signal)
    on the status pipe, kills it if it stopped itself (SIGSTOP would otherwise hang until the
    wall-clock timeout), then sweeps: as a namespace init it SIGKILLs everything else in the
    namespace and reaps it before forking the next one, so nothing a solution started outlives
    its run. It dies with its runner (PDEATHSIG; in a bwrap pod, bwrap's --die-with-parent), and
    the namespace with it. In a bwrap pod it also empties `scratch` (/scratch and /tmp) after
    each run; if it cannot, it exits, and its runner reports the pod gone (an infrastructure error)."""
    import socket, fcntl
    if libc is not None:
        try:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the runner
        except Exception:
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: signals from inside are dropped
    in_namespace = os.getpid() == 1
    parent = os.getpid()
    wake = None
    if scratch:  # a bwrap pod: watch the runner's end while waiting (bwrap's --die-with-parent cannot reach
        import select  # an init that changed its uid), and end everything here when it is gone
        wake = os.pipe()
        for fd in wake:
            os.set_blocking(fd, False)
        signal.signal(signal.SIGCHLD, lambda *args: None)
        signal.set_wakeup_fd(wake[1])
    last_child = 0
    while True:
        pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        t_sock, u_sock = (socket.socket(fileno=fcntl.fcntl(p.fileno(), fcntl.F_DUPFD, 10)) for p in pair)
        for p in pair:
            p.close()
        st_r, st_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in os.pipe())
        child = os.fork()
        if child == 0:
            code = 70
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                if wake is not None:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _close_fds_except({u_sock.fileno()})
                if not in_namespace:  # its own group, swept after the run
                    os.setpgid(0, 0)
                untrusted(u_sock, Chan(u_sock.fileno()), libc, parent, sealed)
                code = 0
            except BaseException:
                print_exc()
            finally:
                os._exit(code)
        u_sock.close()  # the runner sees end of file as soon as the solution's process is gone
        if scratch and last_child and child != last_child + 1:
            # the pod's pid counter moved past its own forks: the last run started threads or processes, and the
            # next run would read how many from its own pid. This pod ends; its runner starts a fresh one.
            os.kill(child, signal.SIGKILL)
            os._exit(0)
        last_child = child
        pidfd = os.pidfd_open(child)
        try:
            socket.send_fds(ctl, [b"S"], [t_sock.fileno(), st_r, pidfd])
        except OSError:  # the runner is gone
            os.kill(child, signal.SIGKILL)
            os._exit(0)
        t_sock.close()
        os.close(st_r)
        os.close(pidfd)
        stopped = 0
        status = None
        while status is None:
            if not in_namespace:  # see it end without reaping it: its group id stays reserved for the sweep
                try:
                    info = os.waitid(os.P_PID, child, os.WEXITED | os.WSTOPPED | os.WNOWAIT)
                except ChildProcessError:
                    break
                except InterruptedError:
                    continue
                if info is not None and info.si_code != os.CLD_STOPPED:
                    try:
                        os.killpg(child, signal.SIGKILL)  # the sweep, before the group id can be reused
                    except OSError:
                        pass
            try:
                pid, st = os.waitpid(-1 if in_namespace else child, os.WUNTRACED | (os.WNOHANG if wake else 0))
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if wake is not None and pid == 0:  # nothing ended yet: wait for a child or the runner's end
                if ctl in select.select([ctl, wake[0]], [], [])[0]:  # the runner is gone: so is the pod
                    try:
                        os.kill(-1, signal.SIGKILL)
                    finally:
                        os._exit(0)
                try:
                    os.read(wake[0], 4096)
                except BlockingIOError:
                    pass
                continue
            if pid != child:
                continue  # an orphan re-parented to us: reaped
            if os.WIFSTOPPED(st):  # SIGSTOP/SIGTSTP on itself: it would hang until the timeout
                stopped = os.WSTOPSIG(st)
                os.kill(child, signal.SIGKILL)
                continue
            status = st
        if status is not None:
            try:
                os.write(st_w, ("%d %d\n" % (status, stopped)).encode())
            except OSError:
                pass
        os.close(st_w)
        if in_namespace:  # the sweep: kill(-1) from a namespace's init reaches everything inside but itself
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        while in_namespace:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
        try:
            for path in scratch:
                _empty_dir(path)
        except BaseException:
            print_exc()
            os._exit(70)


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
    sealed = bool(header.get("sealed", sealed))  # the trusted runner's: it sends "go" when it is not sealed
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
    for mod in [m for m in sys.modules if m in ("ctypes", "gc") or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[mod]  # (the fork server's; a bwrap pod never had them)
    libc = None

    if not sealed and chan.recv() != {"op": "go"}:
        os._exit(0)
    if failure:
        chan.send({"load_error": ["SandboxError", failure]})
        return
    sys.path.extend(p for p in header.get("site_paths", []) if p not in sys.path)

    if header.get("audit_hook", True):
        sys.addaudithook(_audit_guard_pod if header.get("pod") else _audit_guard)

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
