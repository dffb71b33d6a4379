"""The fork server: one warm trusted process per harness process that keeps persistent trusted
runners (each with its pod: a reaper in its own pid namespace forking one solution process per
run) and hands a run's file descriptors to a free one. It never reads run data."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

# Standard-library modules benchmark code and solutions commonly import (HumanEval prompts import
# typing in 21 of 164 problems: ~8 ms cold, in both processes of a run). Preloading changes nothing
# a run can observe except time: each process gets its own copy-on-write view.
PRELOAD = ("typing", "math", "random", "copy", "string", "collections", "re", "hashlib", "itertools", "functools",
           "heapq", "bisect", "statistics", "fractions", "decimal", "operator", "datetime", "json", "numbers")


MAX_RUNNERS = 64  # persistent runners at most; runs beyond wait for one to be free


def _serve(ctl_fd, namespaces, n_spares, pod=None):
    """Fork server: one warm, trusted process that never reads run data.

    It keeps persistent runners (`_persistent_runner`, forked from here, one run at a time each,
    for many runs; at least `n_spares` in all and always one idle, started ahead). Each runner made its pod (the
    reaper, init of its own pid namespace, with the next solution process forked and waiting)
    before it read anything. A request is a run id, a working directory and four file
    descriptors (spec pipe, stdout, stderr, result pipe) over a SOCK_SEQPACKET socket; the server
    hands them to a free runner and closes its copies. "kill" SIGKILLs the run's runner with its
    pod (its process group; only while unreaped, so never a recycled pid). When the harness goes
    away, everything goes.
    """
    import socket, select, json, resource, importlib, re, types, numbers, traceback, fcntl, ctypes, gc, time  # warm
    _default_signals()  # every child (runner, pod, solution) inherits the defaults, however the harness started
    shared_netns = False
    libc = None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0 (inherited by every child)
        for name in ("prctl", "unshare", "capset", "capget"):  # looked up once here, not in every child
            getattr(libc, name)
        cap_structs()
        # one network namespace with no interface up for all runs of this server (tearing a netns
        # down costs the kernel more than a run's own fork); runners still get their own pid
        # namespace. Runs could reach each other only by abstract unix sockets, which the audit
        # hook refuses to create and which hold nothing of the verdict.
        shared_netns = bool(namespaces) and libc.unshare(0x40000000) == 0  # CLONE_NEWNET
    except Exception:
        pass
    trusted_tables()
    for name in PRELOAD:  # imported once here, not twice per run (test side + solution side)
        try:
            importlib.import_module(name)
        except Exception:
            pass
    import random  # the runners restore its state after each run (tests may seed or draw from it)
    compile("", "<fork server>", "exec")  # compile()'s first call builds the AST types: once here, not per runner
    gc.collect()
    gc.freeze()  # forked children share these objects; a collection there would copy their pages
    sock = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *args: None)
    runners = {}  # runner pid -> its control socket
    idle = []     # runners without a run
    busy = {}     # runner pid -> run id
    by_id = {}    # run id -> runner pid
    queue = []    # runs waiting for a runner: (request, fds)

    def make_runner():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.setsid()
                if libc is not None:
                    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the fork server
                _close_fds_except({theirs.fileno()})
                _persistent_runner(theirs.fileno(), namespaces, shared_netns, pod)
                code = 0
            except BaseException:
                print_exc()
            finally:
                os._exit(code)
        theirs.close()
        runners[pid] = mine
        idle.append(pid)

    def drop_runner(pid):
        sock_ = runners.pop(pid, None)
        if sock_ is not None:
            sock_.close()
        if pid in idle:
            idle.remove(pid)
        run_id = busy.pop(pid, None)
        if run_id is not None:
            by_id.pop(run_id, None)

    def dispatch():
        while queue:
            if not idle:
                if len(runners) >= MAX_RUNNERS:
                    return
                make_runner()
            req, fds = queue.pop(0)
            rpid = idle.pop()
            try:
                socket.send_fds(runners[rpid], [json.dumps(req).encode()], fds)
            except OSError:  # that runner is gone: the run waits for another
                drop_runner(rpid)
                queue.insert(0, (req, fds))
                continue
            busy[rpid] = req["id"]
            by_id[req["id"]] = rpid
            for fd in fds:  # the result pipe's end of file now means: the runner let go
                os.close(fd)

    def kill(run_id):
        for i, (req, fds) in enumerate(queue):  # not started yet: its pipes close, the harness sees why
            if req.get("id") == run_id:
                del queue[i]
                for fd in fds:
                    os.close(fd)
                return
        rpid = by_id.get(run_id)
        if rpid is not None:
            try:
                os.killpg(rpid, signal.SIGKILL)  # the runner and its pod
            except OSError:
                pass

    def reap():
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            drop_runner(pid)

    def shut_down():
        """Idle runners end their pods and exit when their socket closes; busy ones are killed.
        Every runner is reaped (so the harness's resource accounting sees their CPU time), for
        at most two seconds; whatever is left then is killed."""
        for pid in list(runners):
            if pid in busy:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            runners[pid].close()
        deadline = time.monotonic() + 2.0
        left = set(runners)
        while left and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                left.discard(pid)
            else:
                time.sleep(0.002)
        for pid in left:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    while True:
        while (len(idle) < 1 or len(runners) < n_spares) and len(runners) < MAX_RUNNERS and not queue:
            make_runner()
        ready, _, _ = select.select([sock, wake_r] + list(runners.values()), [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            reap()
        for pid, sock_ in list(runners.items()):
            if sock_ in ready:
                try:
                    msg = sock_.recv(16)
                except OSError:
                    msg = b""
                run_id = busy.pop(pid, None)
                if run_id is not None:
                    by_id.pop(run_id, None)
                if msg == b"D":
                    idle.append(pid)
                else:  # retired (b"X") or gone
                    drop_runner(pid)
        if sock in ready:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 65536, 8)
            except (InterruptedError, BlockingIOError):
                msg, fds = None, []
            except OSError:
                msg, fds = b"", []
            if msg == b"":  # the harness went away: take every run and runner (pods included) with us
                shut_down()
            if msg:
                try:
                    req = json.loads(msg)
                except ValueError:
                    req = {}
                if req.get("op") == "run" and len(fds) == 5:
                    queue.append((req, fds))
                else:
                    for fd in fds:
                        os.close(fd)
                    if req.get("op") == "kill":
                        kill(req.get("id"))
        dispatch()
