"""The fork server: one warm trusted process per harness process that keeps spare runners forked
(each with its solution process waiting) and hands a run's file descriptors to one. It never
reads run data."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

# Standard-library modules benchmark code and solutions commonly import (HumanEval prompts import
# typing in 21 of 164 problems: ~8 ms cold, in both processes of a run). Preloading changes nothing
# a run can observe except time: each process gets its own copy-on-write view.
PRELOAD = ("typing", "math", "random", "copy", "string", "collections", "re", "hashlib", "itertools", "functools",
           "heapq", "bisect", "statistics", "fractions", "decimal", "operator", "datetime", "json", "numbers")


SPARE_NICE = 10  # priority of a spare while it prepares (forks, copy-on-write faults), until it gets a run


def _serve(ctl_fd, namespaces, n_spares):
    """Fork server: one warm, trusted process that keeps spare runners ready.

    A spare is a runner that has already forked its solution process and waits: forking and
    first scheduling happen off the critical path. The server never reads run data: a request
    is a run id, a working directory and four file descriptors (spec pipe, stdout, stderr,
    result pipe) over a SOCK_SEQPACKET socket, handed on to a spare; it closes its copies. "kill"
    SIGKILLs a run's process group (only while it is unreaped, so never a recycled pid). When the
    harness goes away, everything goes.
    """
    import socket, select, json, resource, importlib, re, types, numbers, traceback, fcntl, ctypes, gc  # warm
    shared_netns = False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        cap_structs()
        # one network namespace with no interface up for all runs of this server (tearing a netns
        # down per run costs the kernel more than the run's own fork); runs still get their own
        # pid namespace. They could reach each other only by abstract unix sockets, which the
        # audit hook refuses to create and which hold nothing of the verdict.
        shared_netns = bool(namespaces) and libc.unshare(0x40000000) == 0  # CLONE_NEWNET
    except Exception:
        pass
    trusted_tables()
    for name in PRELOAD:  # imported once here, not twice per run (test side + solution side)
        try:
            importlib.import_module(name)
        except Exception:
            pass
    gc.collect()
    gc.freeze()  # forked runners share these objects; a collection there would copy their pages
    sock = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *args: None)
    runs, by_id, spares = {}, {}, []
    renice = os.geteuid() == 0  # only root can restore a lowered priority

    def make_spare():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.setsid()
                if renice:  # preparing a spare yields to runs in flight; assign() restores the priority
                    os.setpriority(os.PRIO_PROCESS, 0, SPARE_NICE)
                for fd in [sock.fileno(), wake_r, wake_w, mine.fileno()] + [s.fileno() for _, s in spares]:
                    os.close(fd)
                _runner(namespaces, theirs.fileno(), shared_netns)
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
            if renice:
                try:  # the whole spare (runner, reaper, solution process) back to normal priority
                    os.setpriority(os.PRIO_PGRP, pid, 0)
                except OSError:
                    pass
            try:
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
