"""The benchmark's side of a run (in the trusted runner): executes the prelude and the test,
with the solution's entry points bound to proxies (`Remote`) that only exchange plain data and
refuse ==/</hash, so a value the solution returns cannot claim equality."""
# Part of the runner program (see evaluators/sandbox/child/__init__.py). Never imported by the harness:
# its text runs in the sandbox's own `python -I -S -B -u -c`, concatenated with its siblings (one namespace).

_TABLES = []


def trusted_tables():
    """Builtin exception classes by name (computed once, in the fork server)."""
    if not _TABLES:
        import builtins
        exceptions = {n: c for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, Exception)}
        _TABLES.append(exceptions)
    return _TABLES



class SolutionExit(BaseException):
    """The solution raised SystemExit/KeyboardInterrupt/GeneratorExit during a call."""


class SolutionError(Exception):
    """The solution raised an exception type that is not a builtin one."""


# A runner serves exactly one run: `trusted` puts that run's channel functions here, and the proxy
# class below (created once, in the fork server, not once per run) calls them.
_SESSION = {}


def refuse(self, *args):
    raise TypeError("the solution returned %r, which is not plain data: comparing it with a value "
                    "would let it claim equality" % (self,))

class Remote:
    """An object that lives in the solution process (opaque; see the module docs)."""
    __slots__ = ("_h",)

    def __init__(self, h):
        object.__setattr__(self, "_h", h)

    def __call__(self, *args, **kwargs):
        return _SESSION["rpc"](op="call", h=self._h, a=_SESSION["enc"](list(args)), k=_SESSION["enc"](dict(kwargs)))

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _SESSION["rpc"](op="getattr", h=self._h, n=name)

    def __setattr__(self, name, value):
        _SESSION["rpc"](op="setattr", h=self._h, n=name, v=_SESSION["enc"](value))

    def __iter__(self):
        items = _SESSION["rpc"](op="list", h=self._h)
        if type(items) is not list:
            raise TypeError("iteration did not produce a list")
        return iter(items)

    def __len__(self):
        n = _SESSION["rpc"](op="len", h=self._h)
        if type(n) is not int:
            raise TypeError("len() did not produce an int")
        return n

    def __getitem__(self, key):
        return _SESSION["rpc"](op="getitem", h=self._h, k=_SESSION["enc"](key))

    def __str__(self):
        s = _SESSION["rpc"](op="str", h=self._h)
        if type(s) is not str:
            raise TypeError("str() did not produce a str")
        return s

    def __repr__(self):
        try:
            s = _SESSION["request"]({"op": "repr", "h": object.__getattribute__(self, "_h")})
            if type(s) is str:
                return s
        except BaseException:
            pass
        return "<solution object>"

    def __int__(self):
        v = _SESSION["rpc"](op="int", h=self._h)
        if type(v) is not int:
            raise TypeError("int() did not produce an int")
        return v

    __index__ = __int__

    def __float__(self):
        v = _SESSION["rpc"](op="float", h=self._h)
        if type(v) is not float:
            raise TypeError("float() did not produce a float")
        return v

    def __bool__(self):  # sound: the solution could as well have returned True/False itself
        v = _SESSION["rpc"](op="bool", h=self._h)
        if type(v) is not bool:
            raise TypeError("bool() did not produce a bool")
        return v

    # Not forwarded: these would hand the expected value to the solution ("are you equal to
    # 5?"), letting an object that answers yes to everything pass.
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __contains__ = refuse


def trusted(ended, chan, spec, prelude, test, Died, Protocol, status_fd=None, reaper_out_of_reach=False, kill=None):
    """The benchmark's code. Never executes the solution; only talks to it through `chan`.
    `ended(timeout)`: waits until the reaper has reported the solution process's end (True if
    it has); `status_fd`: where it reports how that process ended. `reaper_out_of_reach`: the
    solution cannot signal the reaper (it is its namespace's init, or the solution runs as
    nobody), so a reaper that never reports is the sandbox's failure, not the solution's. `kill()`: SIGKILLs
    the solution's process (one that closed its channel but lives on is ended, and that is its failure)."""

    state = {"dead": None, "protocol": None}
    exceptions, = trusted_tables()

    def untrusted_status():
        """Why the solution's process is gone. Never "passed": it only ever explains a failure."""
        why = None
        if kill is not None and not ended(1.0):  # its channel is closed but it lives on (closed its fds, sleeps)
            why = "the solution closed its channel to the test and did not end (killed)"
            kill()
        if not ended(10.0):  # the reaper reports as soon as the solution's process has ended
            if reaper_out_of_reach:
                return "error", "sandbox: the reaper did not report the solution process's end"
            return "killed", "solution process did not end"
        st, stopped = None, 0
        if status_fd is not None:  # the reaper saw how the solution's process ended
            try:
                os.set_blocking(status_fd, False)
                fields = os.read(status_fd, 64).split()
                st, stopped = int(fields[0]), int(fields[1])
            except (OSError, ValueError, IndexError):
                pass
        if why is not None and st is not None and os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL:
            return "failed", why  # our kill ended it (not its own exit or a limit it hit while we waited)
        if st is None:  # the reaper went without a report
            if reaper_out_of_reach:
                return "error", "sandbox: the pod's reaper is gone"
            return "killed", "solution process vanished"
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

    _SESSION.update(rpc=rpc, enc=enc, request=request)  # what the module-level Remote calls

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
            # a module the solution bound: never imported here (importing `unittest.__main__` would run it in
            # the trusted runner, and an import by a name the solution chose can run code it wrote); a test
            # that needs a standard-library module imports it itself (program._test_modules)
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
