"""The generated workflow's side of the channel: runs ONLY inside the sandbox's untrusted process.

Never imported by the harness: :mod:`agentic_repro.baselines.autoflow.channel` reads this file as text and sends it,
followed by the workflow's source, as the sandbox "solution". It gives the workflow

- ``operator``: stub classes in AFlow's spelling (``operator.Custom(llm)``, ``await self.custom(input=...,
  instruction=...)``); each call is a *request* (op name + plain arguments) the harness answers;
- ``create_llm_instance`` / ``self.llm``: ``await self.llm(prompt)`` is the request ``LLM``;
- an ``asyncio`` stand-in (``gather``, ``sleep``, ``create_task``, ``wait_for``, ``Semaphore``): the sandbox
  forbids sockets, so a real event loop cannot start; this small scheduler runs the workflow's coroutines
  until every one waits on a request, then hands the batch of open requests out (``_wf_start`` /
  ``_wf_step`` return ``{"pending": [...]}``, ``{"done": answer}`` or ``{"error": text}``).

After loading, an audit hook of its own refuses ``open`` (files), directory listing, process signals and
imports of modules not loaded yet, on top of the sandbox's (no fork/exec/sockets/ctypes). It is defence in
depth (the sandbox's operating-system boundary is the containment), and it is built so that the workflow
cannot switch it off by reflection (``_seal``).
"""
# (a plain module: everything below runs in the untrusted process's namespace)
import sys as _sys
import json as _json
import re as _re
import math as _math  # preloaded for workflows (imports after loading are refused)
import random as _random
import string as _string
import collections as _collections
import itertools as _itertools
import functools as _functools
import typing as _typing
import types as _types
import traceback as _traceback
import threading as _threading
import string as _string_mod
from collections import namedtuple as _namedtuple, Counter as _Counter

# modules a workflow may import (imports of anything not loaded yet are refused once sealed)
_PRELOADED = (_math, _random, _string, _collections, _itertools, _functools, _typing, _Counter)
_WORKFLOW = {"graph": "", "prompt": "", "kind": "aflow"}  # replaced by the sources appended after this file

_SIGNATURES = {  # op -> positional parameter names (AFlow operator.json interfaces; MaAS's extras)
    "Custom": ("input", "instruction"), "Generate": ("input", "instruction"),
    "GenerateCoT": ("input", "instruction"), "MultiGenerateCoT": ("input", "instruction"),
    "AnswerGenerate": ("input",), "CustomCodeGenerate": ("problem", "entry_point", "instruction"),
    "ScEnsemble": ("solutions", "problem"), "Programmer": ("problem", "analysis"),
    "Test": ("problem", "solution", "entry_point", "test_loop"), "Review": ("problem", "solution"),
    "Revise": ("problem", "solution", "feedback"), "Format": ("problem", "solution"),
    "MdEnsemble": ("solutions", "problem"), "SelfRefine": ("problem", "solution"), "EarlyStop": (),
    "LLM": ("prompt",),
    "ADAS": ("output_fields", "agent_name", "agent", "role", "temperature", "input_infos", "instruction",
             "iteration_idx"),
}


class OperatorError(Exception):
    """The harness refused or could not answer an operator call (its message says why)."""


class _Req:
    """One request to the harness; awaiting it parks the task until the answer comes."""

    __slots__ = ("args", "done", "error", "id", "op", "value")

    def __init__(self, op, args):
        self.op, self.args, self.id, self.value, self.error, self.done = op, args, None, None, None, False

    def __await__(self):
        if not self.done:
            yield self
        if self.error is not None:
            raise OperatorError(self.error)
        return self.value


class _Task:
    __slots__ = ("coro", "done", "exc", "result", "waiters")

    def __init__(self, coro):
        self.coro, self.done, self.result, self.exc, self.waiters = coro, False, None, None, []
        _S["ready"].append((self, None, None))

    def __await__(self):
        if not self.done:
            yield self
        if self.exc is not None:
            raise self.exc
        return self.result

    def cancel(self):
        return False


class _Gather:
    __slots__ = ("return_exceptions", "tasks")

    def __init__(self, tasks, return_exceptions):
        self.tasks, self.return_exceptions = tasks, return_exceptions

    def __await__(self):
        yield self
        out = []
        for t in self.tasks:
            if t.exc is not None:
                if not self.return_exceptions:
                    raise t.exc
                out.append(t.exc)
            else:
                out.append(t.result)
        return out


_S = {"ready": [], "pending": {}, "sent": set(), "next_id": 0, "main": None}


def _as_task(aw):
    if isinstance(aw, _Task):
        return aw

    async def wrap():
        return await aw
    return _Task(wrap())


def _finish(task, result, exc):
    task.done, task.result, task.exc = True, result, exc
    for w in task.waiters:
        w()
    task.waiters = []


def _run_ready():
    """Step tasks until every one is done or waits on a request."""
    while _S["ready"]:
        task, value, exc = _S["ready"].pop(0)
        try:
            yielded = task.coro.throw(exc) if exc is not None else task.coro.send(value)
        except StopIteration as stop:
            _finish(task, stop.value, None)
            continue
        except BaseException as e:  # noqa: BLE001 - the workflow's own failure, reported
            _finish(task, None, e)
            continue
        _park(task, yielded)


def _park(task, y):
    resume = lambda: _S["ready"].append((task, None, None))
    if isinstance(y, _Req):
        y.id = "r%d" % _S["next_id"]
        _S["next_id"] += 1
        _S["pending"][y.id] = (y, resume)
    elif isinstance(y, _Task):
        if y.done:
            resume()
        else:
            y.waiters.append(resume)
    elif isinstance(y, _Gather):
        left = [t for t in y.tasks if not t.done]
        if not left:
            resume()
        count = [len(left)]

        def one():
            count[0] -= 1
            if count[0] == 0:
                resume()
        for t in left:
            t.waiters.append(one)
    elif y is None:  # a bare yield (sleep(0))
        resume()
    else:
        _S["ready"].append((task, None, TypeError("a workflow may only await operators, gather, sleep or tasks "
                                                  "(got %s)" % type(y).__name__)))


def _state():
    main = _S["main"]
    if main.done:
        if main.exc is not None:
            return {"error": "".join(_traceback.format_exception(type(main.exc), main.exc,
                                                                 main.exc.__traceback__))[-3000:]}
        out = main.result
        if isinstance(out, (tuple, list)) and out:  # AFlow graphs return (solution, cost)
            out = out[0]
        return {"done": out if isinstance(out, str) else str(out)}
    if not _S["pending"]:
        return {"error": "the workflow is waiting on nothing (deadlock)"}
    new = [r for r, _ in _S["pending"].values() if r.id not in _S["sent"]]
    if not new:
        return {"error": "the workflow waits on requests it was already answered for"}
    _S["sent"].update(r.id for r in new)
    return {"pending": [{"id": r.id, "op": r.op, "args": r.args} for r in new]}


def _plainify(v):
    """Arguments go out as JSON-able plain data; anything else as its str (the harness checks types)."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plainify(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plainify(x) for k, x in v.items()}
    return str(v)


def _request(op, args, kwargs):
    names = _SIGNATURES[op]
    if len(args) > len(names):
        raise TypeError("%s takes at most %d positional arguments" % (op, len(names)))
    call = dict(zip(names, args))
    call.update(kwargs)
    return _Req(op, _plainify(call))


class _Operator:
    op = ""

    def __init__(self, llm=None, name=None, *a, **k):
        self.llm, self.name = llm, name or self.op

    def __call__(self, *args, **kwargs):
        return _request(self.op, args, kwargs)


class _LLM:
    """``create_llm_instance(config)``: ``await llm(prompt)`` asks the executor; usage is in the harness ledger."""

    def __init__(self, config=None):
        self.config = config

    def __call__(self, prompt, *a, **k):
        return _request("LLM", (prompt,), {})

    async def aask(self, msg, *a, **k):
        return await _request("LLM", (msg,), {})

    def get_usage_summary(self):
        return {"total_cost": 0.0, "total_input_tokens": 0, "total_output_tokens": 0}


def create_llm_instance(config=None):
    return _LLM(config)


class CostManager:
    def __init__(self, *a, **k):
        self.total_cost = 0.0


operator = _types.ModuleType("operator_stubs")
for _name in _SIGNATURES:
    if _name != "LLM":
        setattr(operator, _name, type(_name, (_Operator,), {"op": _name}))
operator.OperatorError = OperatorError


class _Semaphore:
    def __init__(self, value=1):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


class _Sleep:
    def __await__(self):
        yield None


def _gather(*aws, return_exceptions=False):
    return _Gather([_as_task(a) for a in aws], return_exceptions)


async def _wait_for(aw, timeout=None):
    return await aw


asyncio = _types.ModuleType("asyncio")
asyncio.gather = _gather
asyncio.sleep = lambda delay=0, result=None: _Sleep()
asyncio.create_task = asyncio.ensure_future = lambda coro, **k: _as_task(coro)
asyncio.wait_for = _wait_for
asyncio.Semaphore = asyncio.BoundedSemaphore = _Semaphore
asyncio.TimeoutError = TimeoutError
asyncio.CancelledError = type("CancelledError", (BaseException,), {})
asyncio.iscoroutine = lambda o: isinstance(o, _types.CoroutineType)

_AFLOW_IMPORT = _re.compile(r"^(\s*)(?:import\s+((?:workspace|metagpt|scripts)\S*)(?:\s+as\s+(\w+))?|"
                            r"from\s+(?:workspace|metagpt|scripts)\S*\s+import\s+(.+))\s*$")
_INJECT = {"create_llm_instance": create_llm_instance, "CostManager": CostManager, "DatasetType": str}


def _rewrite_imports(src):
    """AFlow's graphs import their operator/prompt modules from its workspace and MetaGPT's helpers; here
    those names are given (operator stubs, the round's prompt module, create_llm_instance)."""
    out = []
    for line in src.splitlines():
        m = _AFLOW_IMPORT.match(line)
        if not m:
            out.append(line)
            continue
        indent, path, alias, names = m.group(1), m.group(2), m.group(3), m.group(4)
        if path is not None:
            target = alias or path.split(".")[0]
            what = "_PROMPT_MODULE" if path.endswith(".prompt") else "operator" if path.endswith(".operator") \
                else "None"
            out.append("%s%s = %s" % (indent, target, what))
        else:  # from <workspace|metagpt|scripts>... import a, b as c: the given helpers, None otherwise
            binds = []
            for part in names.strip("() ").split(","):
                bits = part.split()
                if not bits:
                    continue
                binds.append("%s = _INJECT.get(%r)" % (bits[-1], bits[0]))
            out.append(indent + ("; ".join(binds) or "pass"))
    return "\n".join(out) + "\n"


_PREVENT = frozenset({"open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
                      "os.chmod", "os.chown", "os.kill", "os.killpg", "os.truncate", "os.link", "os.symlink",
                      "os.utime", "os.chdir", "shutil.rmtree", "shutil.copyfile", "signal.pthread_kill",
                      "sys.setprofile", "sys.settrace", "glob.glob", "pty.spawn",
                      "resource.setrlimit", "os.putenv", "os.unsetenv", "marshal.loads", "code.__new__",
                      # reflection that reaches this hook's function object (only the collector enumerates it)
                      "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"})
#: function attributes whose assignment would rewrite a hook (or any function) already installed
_FROZEN_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
#: modules a workflow may not import even though the sandbox loaded them (``gc`` enumerates every object)
_HIDDEN = frozenset({"gc"})


def _seal():
    """Install the audit hook. It must not be switchable off from inside: the hook function refers to no
    global, no closure cell and no mutable object (every name it uses is bound as an immutable default or a
    builtin type, read once here), the only way to reach the function object itself (the collector's
    ``gc.get_objects``/``get_referrers``) is refused, and so is rewriting any function's ``__code__`` or
    defaults; ``gc`` is taken out of ``sys.modules`` and cannot be imported (the sandbox's fork server loaded it)."""
    for name in _HIDDEN:
        _sys.modules.pop(name, None)
    loaded = frozenset(m for m in _sys.modules if m.partition(".")[0] not in _HIDDEN)

    def guard(event, args, _p=_PREVENT, _loaded=loaded, _frozen=_FROZEN_ATTRS, _perm=PermissionError,
              _str=str, _type=type, _len=len):
        if event in _p:
            raise _perm("workflow sandbox: %s is not allowed" % event)
        if event == "object.__setattr__" and _len(args) > 1 and _type(args[1]) is _str and args[1] in _frozen:
            raise _perm("workflow sandbox: setting %s is not allowed" % args[1])
        if event == "import" and args and _type(args[0]) is _str and args[0] not in _loaded \
                and args[0].partition(".")[0] not in _loaded:
            raise _perm("workflow sandbox: importing %s is not allowed (only modules already loaded)" % args[0])
    _sys.addaudithook(guard)


def _load(graph_src, prompt_src):
    """Build the workflow class from the graph and prompt sources (called inside ``_wf_start``)."""
    prompt_mod = _types.ModuleType("prompt_custom")
    exec(compile(prompt_src or "", "<prompt.py>", "exec"), prompt_mod.__dict__)
    ns = {"__name__": "workflow_graph", "operator": operator, "asyncio": asyncio, "_PROMPT_MODULE": prompt_mod,
          "prompt_custom": prompt_mod, "_INJECT": _INJECT, **_INJECT}
    exec(compile(_rewrite_imports(graph_src), "<graph.py>", "exec"), ns)
    for key in ("Workflow", "Agent"):
        if key in ns:
            return ns[key]
    raise NameError("the graph defines no class Workflow")


def _wf_start(payload):
    """Instantiate the workflow and run it until it waits on the harness."""
    try:
        if _WORKFLOW.get("kind") == "adas":
            return _adas_start(payload)
        cls = _load(_WORKFLOW["graph"], _WORKFLOW["prompt"])
        wf = cls(payload.get("name", "workflow"), payload.get("llm_config"), payload.get("dataset"))
        args = [payload["problem"]] + ([payload["entry_point"]] if payload.get("entry_point") else [])
        coro = wf(*args)
        if not isinstance(coro, _types.CoroutineType):
            return {"error": "Workflow.__call__ must be an async def"}
        _S["main"] = _Task(coro)
        _run_ready()
        return _state()
    except BaseException as exc:  # noqa: BLE001 - the workflow's failure, reported as such
        return {"error": ("%s: %s" % (type(exc).__name__, exc))[:3000]}


def _wf_step(answers):
    """Deliver answers ``{id: {"ok": value} | {"err": text}}`` and run until the next wait."""
    try:
        if _WORKFLOW.get("kind") == "adas":
            return _adas_step(answers)
        for rid, ans in dict(answers).items():
            entry = _S["pending"].pop(rid, None)
            if entry is None:
                continue
            req, resume = entry
            req.done = True
            if "err" in ans:
                req.error = str(ans["err"])
            else:
                req.value = ans.get("ok")
            resume()
        _run_ready()
        return _state()
    except BaseException as exc:  # noqa: BLE001
        return {"error": ("%s: %s" % (type(exc).__name__, exc))[:3000]}


# ---- ADAS agents (``def forward(self, taskInfo)``, synchronous LLMAgentBase calls) ----------------------------
# The agent runs in one worker thread; each LLMAgentBase call parks it on a condition until the harness answers.

Info = _namedtuple("Info", ["name", "author", "content", "iteration_idx"])
_SYNC = {"cv": _threading.Condition(), "req": None, "done": False, "result": None, "error": None, "rng": None}


def random_id(length=4):
    chars = _string_mod.ascii_letters + _string_mod.digits
    return "".join(_SYNC["rng"].choice(chars) for _ in range(length))


def _sync_request(op, args):
    req = _request(op, (), args)
    cv = _SYNC["cv"]
    with cv:
        _SYNC["req"] = req
        cv.notify_all()
        while not req.done:
            cv.wait()
    if req.error is not None:
        raise OperatorError(req.error)
    return req.value


class LLMAgentBase:
    """ADAS's agent block: the prompt is built and the JSON reply parsed by the harness (request ``ADAS``)."""

    def __init__(self, output_fields, agent_name, role="helpful assistant", model=None, temperature=0.5):
        self.output_fields, self.agent_name = list(output_fields), agent_name
        self.role, self.model, self.temperature = role, model, temperature
        self.id = random_id()

    def __repr__(self):
        return "%s %s" % (self.agent_name, self.id)

    def query(self, input_infos, instruction, iteration_idx=-1):
        infos = [[i.name, i.author, i.content, i.iteration_idx] for i in input_infos if isinstance(i, Info)]
        reply = _sync_request("ADAS", {"output_fields": [str(f) for f in self.output_fields],
                                       "agent_name": str(self.agent_name), "agent": repr(self),
                                       "role": str(self.role), "temperature": self.temperature,
                                       "input_infos": infos, "instruction": str(instruction),
                                       "iteration_idx": iteration_idx})
        return [Info(k, repr(self), v, iteration_idx) for k, v in reply]

    def __call__(self, input_infos, instruction, iteration_idx=-1):
        return self.query(input_infos, instruction, iteration_idx=iteration_idx)


class AgentSystem:
    pass


def _sync_state():
    cv = _SYNC["cv"]
    with cv:
        while not _SYNC["done"] and (_SYNC["req"] is None or _SYNC["req"].id is not None):
            cv.wait()
        if _SYNC["done"]:
            if _SYNC["error"] is not None:
                e = _SYNC["error"]
                return {"error": "".join(_traceback.format_exception(type(e), e, e.__traceback__))[-3000:]}
            out = _SYNC["result"]
            if isinstance(out, Info):
                out = out.content
            return {"done": out if isinstance(out, str) else str(out)}
        req = _SYNC["req"]
        req.id = "r%d" % _S["next_id"]
        _S["next_id"] += 1
        return {"pending": [{"id": req.id, "op": req.op, "args": req.args}]}


def _adas_start(payload):
    import random as _r
    _SYNC["rng"] = _r.Random(payload.get("seed", 0))
    ns = {"LLMAgentBase": LLMAgentBase, "Info": Info, "random_id": random_id, "json": _json,
          "AgentSystem": AgentSystem, "__name__": "adas_agent"}
    local = {}
    exec(compile(_WORKFLOW["graph"], "<agent.py>", "exec"), ns, local)
    names = list(local)
    if len(names) != 1 or not callable(local[names[0]]):
        raise AssertionError("%d things in namespace. Please only provide 1" % len(names))
    ns.update(local)  # helpers the function defines stay reachable by name
    fn = local[names[0]]
    system = AgentSystem()
    task = Info("task", "User", payload["problem"], -1)

    def work():
        try:
            _SYNC["result"] = fn(system, task)
        except BaseException as exc:  # noqa: BLE001
            _SYNC["error"] = exc
        finally:
            with _SYNC["cv"]:
                _SYNC["done"] = True
                _SYNC["cv"].notify_all()
    _threading.Thread(target=work, daemon=True).start()
    return _sync_state()


def _adas_step(answers):
    req = _SYNC["req"]
    ans = dict(answers).get(req.id) if req is not None else None
    if ans is None:
        return {"error": "no answer for the agent's pending call"}
    with _SYNC["cv"]:
        if "err" in ans:
            req.error = str(ans["err"])
        else:
            req.value = ans.get("ok")
        req.done = True
        _SYNC["req"] = None
        _SYNC["cv"].notify_all()
    return _sync_state()


_sys.modules["asyncio"] = asyncio  # `import asyncio` in a graph gets the scheduler above
