"""The fork server: one warm trusted process per harness process that keeps persistent trusted
runners and spare pods (reaper + solution process, made by a child of this process) and hands a
run's file descriptors, with a pod's, to a free runner. It never reads run data."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

# Standard-library modules benchmark code and solutions commonly import (HumanEval prompts import
# typing in 21 of 164 problems: ~8 ms cold, in both processes of a run). Preloading changes nothing
# a run can observe except time: each process gets its own copy-on-write view.
PRELOAD = ("typing", "math", "random", "copy", "string", "collections", "re", "hashlib", "itertools", "functools",
           "heapq", "bisect", "statistics", "fractions", "decimal", "operator", "datetime", "json", "numbers")


SPARE_NICE = 10  # priority of a spare pod while it prepares (forks, copy-on-write faults), until it gets a run
MAX_RUNNERS = 64  # persistent runners at most; runs beyond wait for one to be free


def _serve(ctl_fd, namespaces, n_spares):
    """Fork server: one warm, trusted process that never reads run data.

    It keeps two kinds of children. Persistent runners (`_persistent_runner`, forked from here,
    one run at a time each, for many runs): the trusted side, whose warm pages make a run cheap.
    Spare pods (`n_spares` of them): each made by a short-lived pod maker forked from here, so
    from a process that has read nothing of any run; a pod is the reaper (init of its own pid
    namespace) with the solution's process forked and waiting. A request is a run id, a working
    directory and four file descriptors (spec pipe, stdout, stderr, result pipe) over a
    SOCK_SEQPACKET socket; the server hands them, with a pod's fds, to a free runner and closes
    its copies. "kill" SIGKILLs the run's runner and pod (never a recycled pid: runners are
    unreaped children, pods are held by pidfd). When the harness goes away, everything goes.
    """
    import socket, select, json, resource, importlib, re, types, numbers, traceback, fcntl, ctypes, gc  # warm
    shared_netns = False
    libc, sealed = None, False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sealed = libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE 0 (inherited by every child)
        for name in ("prctl", "unshare", "capset", "capget"):  # looked up once here, not in every child
            getattr(libc, name)
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
    import random  # the runners restore its state after each run (tests may seed or draw from it)
    gc.collect()
    gc.freeze()  # forked children share these objects; a collection there would copy their pages
    sock = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *args: None)
    renice = os.geteuid() == 0  # only root can restore a lowered priority
    making = {}   # pod maker pid -> socket its pod's fds arrive on
    pods = []     # ready pods: (pod maker pid = the pod's process group, [solution socket, status pipe, pidfd])
    runners = {}  # runner pid -> its control socket
    idle = []     # runners without a run
    busy = {}     # runner pid -> (run id, pod maker pid, pidfd of the pod's reaper)
    by_id = {}    # run id -> runner pid
    queue = []    # runs waiting for a pod or a runner: (request, fds)

    def close_all(keep):
        for fd in _open_fds():
            if fd > 2 and fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def child_start():
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        if libc is not None:
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the fork server

    def make_pod():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                child_start()
                if renice:  # preparing a spare yields to runs in flight; dispatch() restores the priority
                    os.setpriority(os.PRIO_PROCESS, 0, SPARE_NICE)
                close_all({theirs.fileno()})
                t_sock, st_r, reaper_pid = _pod(namespaces, shared_netns, libc, sealed)
                pidfd = os.pidfd_open(reaper_pid)
                socket.send_fds(theirs, [b"P"], [t_sock.fileno(), st_r, pidfd])
                t_sock.close()
                for fd in (st_r, pidfd, theirs.fileno()):
                    os.close(fd)
                os.waitpid(reaper_pid, 0)  # the pod's lifetime (the reaper dies with this process)
                code = 0
            except BaseException:
                print_exc()
            finally:
                os._exit(code)
        theirs.close()
        making[pid] = mine

    def make_runner():
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                child_start()
                close_all({theirs.fileno()})
                _persistent_runner(theirs.fileno())
                code = 0
            except BaseException:
                print_exc()
            finally:
                os._exit(code)
        theirs.close()
        runners[pid] = mine
        idle.append(pid)

    def drop_pod(entry):
        for fd in entry[1]:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(entry[0], signal.SIGKILL)
        except OSError:
            pass

    def drop_runner(pid):
        sock_ = runners.pop(pid, None)
        if sock_ is not None:
            sock_.close()
        if pid in idle:
            idle.remove(pid)
        run = busy.pop(pid, None)
        if run is not None:
            by_id.pop(run[0], None)
            try:
                os.close(run[2])
            except OSError:
                pass

    def dispatch():
        while queue and pods:
            if not idle:
                if len(runners) >= MAX_RUNNERS:
                    return
                make_runner()
            entry = pods.pop(0)
            if select.select([entry[1][2]], [], [], 0)[0]:  # that pod's reaper is gone: use another
                drop_pod(entry)
                continue
            req, fds = queue.pop(0)
            rpid = idle.pop()
            if renice:  # the whole pod (maker, reaper, solution process) back to normal priority
                try:
                    os.setpriority(os.PRIO_PGRP, entry[0], 0)
                except OSError:
                    pass
            try:
                socket.send_fds(runners[rpid], [json.dumps(req).encode()], list(fds) + entry[1])
            except OSError:  # that runner is gone: the run waits for another, with this pod
                drop_runner(rpid)
                pods.insert(0, entry)
                queue.insert(0, (req, fds))
                continue
            busy[rpid] = (req["id"], entry[0], os.dup(entry[1][2]))
            by_id[req["id"]] = rpid
            for fd in list(fds) + entry[1]:  # the result pipe's end of file now means: the runner let go
                os.close(fd)

    def reap():
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in runners:
                drop_runner(pid)
            sock_ = making.pop(pid, None)
            if sock_ is not None:
                sock_.close()

    def everything_goes():
        for pid in list(runners) + list(making) + [e[0] for e in pods] + [b[1] for b in busy.values()]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)

    def kill(run_id):
        for i, (req, fds) in enumerate(queue):  # not started yet: its pipes close, the harness sees why
            if req.get("id") == run_id:
                del queue[i]
                for fd in fds:
                    os.close(fd)
                return
        rpid = by_id.get(run_id)
        if rpid is None:
            return
        _, pod_group, pidfd = busy[rpid]
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        for group in (rpid, pod_group):
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass

    while True:
        while len(pods) + len(making) < n_spares:
            make_pod()
        watch = [sock, wake_r] + list(making.values()) + list(runners.values())
        ready, _, _ = select.select(watch, [], [])
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            reap()
        for pid, sock_ in list(making.items()):
            if sock_ in ready:
                try:
                    msg, fds, _, _ = socket.recv_fds(sock_, 16, 3)
                except OSError:
                    msg, fds = b"", []
                del making[pid]
                sock_.close()
                if msg == b"P" and len(fds) == 3:
                    pods.append((pid, fds))
                else:
                    drop_pod((pid, fds))
        for pid, sock_ in list(runners.items()):
            if sock_ in ready:
                try:
                    msg = sock_.recv(16)
                except OSError:
                    msg = b""
                run = busy.pop(pid, None)
                if run is not None:
                    by_id.pop(run[0], None)
                    os.close(run[2])
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
            if msg == b"":  # the harness went away: take every run, runner and pod with us
                everything_goes()
            if msg:
                try:
                    req = json.loads(msg)
                except ValueError:
                    req = {}
                if req.get("op") == "run" and len(fds) == 4:
                    queue.append((req, fds))
                else:
                    for fd in fds:
                        os.close(fd)
                    if req.get("op") == "kill":
                        kill(req.get("id"))
        dispatch()
        reap()
