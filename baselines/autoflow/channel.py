"""The narrow channel between a generated workflow (in the sandbox) and the harness.

AFlow, ADAS and JudgeFlow write Python workflows; the authors' repos ``exec`` them in process behind a
substring blacklist. Here a workflow runs only in the harness sandbox (:mod:`agentic_repro.evaluators.sandbox`: its own
process, no network, no fork/exec, rlimits, dropped privileges), as the sandbox's *untrusted* solution with
:mod:`agentic_repro.baselines.autoflow.sandbox_runtime` in front of it. Its only way out is a request for an operator
call: the runtime hands a batch of ``{id, op, args}`` (plain data) to the sandbox's *trusted* side, a relay
that forwards it as one JSON line over a private unix socket to this module; the harness validates each
request (a known operator, plain arguments of bounded size, a call budget), runs it through the ordinary
problem context (ledger, cache, budgets) and sends the answers back the same way.

Whatever the workflow does wrong is a **failed workflow** (:class:`WorkflowOutcome` with ``ok=False``):
it crashes, never answers, computes longer than ``idle_timeout_s`` between answers (the harness kills the
sandbox run), exceeds CPU/memory, asks for an operator it may not (``refused``), or touches files,
processes or sockets (refused inside the sandbox). Infrastructure failures raised by an operator call
(no reply from the backbone, budget exceeded) are not the workflow's fault: the run is killed and the
exception propagates, so the runner records the problem as an error (retried, never scored). So does a
sandbox that could not run the workflow (``ExecResult.infrastructure``, or a trusted runner that died without a
verdict): :class:`~evaluators.sandbox.SandboxFailure`, never a 0.

Every operator call a workflow starts belongs to its run: a message whose batch would pass ``max_calls`` is
refused before any of its calls starts, and when a run ends (answered, failed, refused, killed, or the caller
cancelled) every call still in flight is cancelled and awaited before :func:`run_workflow` returns, so nothing
reaches the backbone (or the ledger) after the problem's solve() has returned.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable

from agentic_repro.baselines.autoflow.operators import model_calls
from agentic_repro.evaluators.sandbox import ExecResult, Program, SandboxFailure, run_program_async

RUNTIME_SOURCE = (Path(__file__).with_name("sandbox_runtime.py")).read_text(encoding="utf-8")
LINE_LIMIT = 1 << 24  # bytes per JSON line on the socket


class OperatorRefused(Exception):
    """The workflow asked for something it may not: the workflow fails (``refused``)."""


class SandboxUnavailable(RuntimeError):
    """The sandbox refuses to run generated code on this machine (an infrastructure error)."""


@dataclass
class Limits:
    """Per-problem limits of one workflow run (the method's ``limits:`` params)."""

    idle_timeout_s: float = 60.0    # the workflow's own compute between two answers (a hang)
    wall_timeout_s: float = 3600.0  # the whole run, operator calls included (the sandbox's wall clock)
    cpu_s: float = 60.0             # RLIMIT_CPU of the sandbox processes
    memory_mb: int = 1024
    max_calls: int = 64             # model calls per problem (a request's count argument, e.g. n=3, counts 3)
    max_count: int = 5              # largest count argument (n, attempts, test_loop, vote_count) a request may pass
    max_arg_chars: int = 200_000    # total characters of one request's arguments


@dataclass
class WorkflowOutcome:
    ok: bool
    answer: str | None
    failure: str | None = None      # crash | timeout | refused | cpu | memory | killed | protocol
    detail: str = ""
    calls: int = 0
    duration_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "failure": self.failure, "detail": self.detail[-2000:], "calls": self.calls,
                "duration_s": round(self.duration_s, 3), "requests": self.requests}


Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]

_PRELUDE = """
import json as _j, socket as _s
_CH = {{"path": {path!r}, "token": {token!r}}}
"""

_RELAY = """
_sock = _s.socket(_s.AF_UNIX, _s.SOCK_STREAM)
_sock.connect(_CH["path"])
_f = _sock.makefile("rwb")
def _rpc(msg):
    _f.write(_j.dumps(msg).encode("utf-8") + b"\\n")
    _f.flush()
    line = _f.readline()
    if not line:
        raise SystemExit("harness closed the channel")
    return _j.loads(line)
_payload = _rpc({"type": "hello", "token": _CH["token"]})["payload"]
_out = _wf_start(_payload)
while True:
    if type(_out) is not dict:
        _rpc({"type": "failed", "error": "the workflow runtime returned %s" % type(_out).__name__})
        break
    if "pending" in _out and type(_out["pending"]) is list:
        _answers = _rpc({"type": "calls", "calls": _out["pending"]})["answers"]
        _out = _wf_step(_answers)
        continue
    if "done" in _out:
        _rpc({"type": "final", "answer": str(_out["done"])})
        break
    _rpc({"type": "failed", "error": str(_out.get("error"))[:4000]})
    break
"""


def workflow_solution(graph: str, prompt: str = "", kind: str = "aflow") -> str:
    """The sandbox "solution": the runtime, the workflow's sources as data, then the seal. ``kind``: ``aflow``
    (an async ``class Workflow`` graph + prompt module) or ``adas`` (a ``def forward(self, taskInfo)`` agent)."""
    return (RUNTIME_SOURCE + "\n_WORKFLOW = " + repr({"graph": graph, "prompt": prompt, "kind": kind})
            + "\n_seal()\n")


async def run_workflow(graph: str, prompt: str, payload: dict[str, Any], handler: Handler,
                       limits: Limits | None = None, kind: str = "aflow") -> WorkflowOutcome:
    """Run one workflow on one problem in the sandbox, answering its operator requests with ``handler``."""
    lim = limits or Limits()
    base = tempfile.mkdtemp(prefix="agentic-wf-")
    os.chmod(base, 0o700)
    path = os.path.join(base, "c.sock")
    token = secrets.token_hex(16)
    st: dict[str, Any] = {"final": None, "failure": None, "infra": None, "connected": False,
                          "last": time.monotonic(), "waiting": False, "calls": 0, "requests": [],
                          "conversation": None, "in_flight": set()}
    finished = asyncio.Event()
    t0 = time.monotonic()

    def admit(calls: list[Any]) -> None:
        """Check a whole batch before any of its calls starts: one bad or excess request refuses them all."""
        sizes, cost = [], 0
        for call in calls:
            if not (isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("op"), str)
                    and isinstance(call.get("args"), dict)):
                raise OperatorRefused(f"malformed request {str(call)[:200]}")
            size = len(json.dumps(call["args"], ensure_ascii=False))
            if size > lim.max_arg_chars:
                raise OperatorRefused(f"{call['op']}: arguments of {size} characters exceed {lim.max_arg_chars}")
            sizes.append(size)
            try:
                cost += model_calls(call["op"], call["args"], lim.max_count)
            except ValueError as exc:
                raise OperatorRefused(str(exc)) from None
        if st["calls"] + cost > lim.max_calls:
            raise OperatorRefused(f"more than {lim.max_calls} model calls ({st['calls']} made, {cost} more asked at "
                                  "once)")
        st["calls"] += cost
        st["requests"].extend({"op": c["op"], "args_chars": n} for c, n in zip(calls, sizes))

    async def answer(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        try:
            return call["id"], {"ok": await handler(call["op"], call["args"])}
        except OperatorCallError as exc:  # the workflow called an operator wrongly: it sees the error
            return call["id"], {"err": str(exc)[:2000]}
        except (OperatorRefused, asyncio.CancelledError):
            raise
        except BaseException as exc:  # the harness side failed (backbone, budget, our bug): not the workflow's
            raise _HarnessFailure(exc) from exc

    async def conversation(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if st["connected"]:  # exactly one conversation per run
            writer.close()
            return
        st["connected"] = True
        st["conversation"] = asyncio.current_task()
        st["last"], st["waiting"] = time.monotonic(), True  # the workflow runs: its idle clock runs too

        async def send(obj: Any) -> None:
            writer.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            await writer.drain()

        try:
            hello = json.loads(await reader.readline() or b"null")
            if not (isinstance(hello, dict) and hello.get("token") == token):
                raise OperatorRefused("the channel was opened without the relay's token")
            await send({"payload": payload})
            while True:
                line = await reader.readline()
                if not line:
                    st["failure"] = st["failure"] or ("crash", "the sandbox closed the channel")
                    return
                st["last"] = time.monotonic()
                msg = json.loads(line)
                kind = msg.get("type") if isinstance(msg, dict) else None
                if kind == "calls" and isinstance(msg.get("calls"), list):
                    st["waiting"] = False
                    admit(msg["calls"])
                    tasks = [asyncio.ensure_future(answer(c)) for c in msg["calls"]]
                    st["in_flight"].update(tasks)
                    try:
                        pairs = await asyncio.gather(*tasks)
                    finally:  # one call failed (or the run ended): its siblings stop too
                        await _cancel_all(tasks)
                        st["in_flight"].difference_update(tasks)
                    await send({"answers": dict(pairs)})
                    st["last"], st["waiting"] = time.monotonic(), True
                elif kind == "final":
                    st["final"] = str(msg.get("answer"))
                    await send({"ok": True})
                    return
                elif kind == "failed":
                    st["failure"] = ("crash", str(msg.get("error"))[:4000])
                    await send({"ok": True})
                    return
                else:
                    raise OperatorRefused(f"unknown message {str(msg)[:200]}")
        except _HarnessFailure as exc:
            st["infra"] = exc.original
        except OperatorRefused as exc:
            st["failure"] = ("refused", str(exc))
        except (ValueError, UnicodeDecodeError, asyncio.LimitOverrunError) as exc:
            st["failure"] = ("protocol", f"{type(exc).__name__}: {exc}")
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            st["failure"] = st["failure"] or ("crash", f"channel lost: {exc}")
        except asyncio.CancelledError:  # run_workflow ended the run
            raise
        except BaseException as exc:  # noqa: BLE001 - an infrastructure error: re-raised by run_workflow
            st["infra"] = exc
        finally:
            finished.set()
            writer.close()

    server = await asyncio.start_unix_server(conversation, path=path, limit=LINE_LIMIT)
    os.chmod(path, 0o600)
    solution = workflow_solution(graph, prompt, kind)
    program = Program(solution + _RELAY, prelude=_PRELUDE.format(path=path, token=token),
                      solution=solution, test=_RELAY, entry_points=("_wf_start", "_wf_step"))
    def runner_took_it() -> None:  # the idle clock starts here: waiting for a runner or its pod is not the workflow's
        if not st["connected"]:
            st["last"], st["waiting"] = time.monotonic(), True

    sandbox = asyncio.ensure_future(run_program_async(program, timeout_s=lim.wall_timeout_s, memory_mb=lim.memory_mb,
                                                      cpu_s=lim.cpu_s, on_start=runner_took_it))
    result = None
    try:
        while True:
            waiter = asyncio.ensure_future(finished.wait())
            try:
                await asyncio.wait({sandbox, waiter}, timeout=min(1.0, lim.idle_timeout_s),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if st["infra"] is not None:
                break
            if sandbox.done():
                break
            if finished.is_set():  # the conversation ended: the sandbox exits by itself
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(sandbox), 15.0)
                break
            if st["waiting"] and time.monotonic() - st["last"] > lim.idle_timeout_s:
                st["failure"] = st["failure"] or ("timeout", f"the workflow ran {lim.idle_timeout_s:g} s without "
                                                             "a request or an answer (killed)")
                break
        if sandbox.done():
            result = sandbox.result()
    finally:
        # the run is over: no call it started may outlive it (answered into a dead channel, billed after solve())
        await _cancel_all([t for t in (st["conversation"], *st["in_flight"]) if t is not None])
        if not sandbox.done():
            sandbox.cancel()  # run_program_async kills the sandbox run on cancellation
            with contextlib.suppress(BaseException):
                await sandbox
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()
        shutil.rmtree(base, ignore_errors=True)
    if st["infra"] is not None:
        raise st["infra"]
    if result is not None and result.status == "error" and "drop privileges" in (result.stderr_tail + result.detail):
        raise SandboxUnavailable(result.stderr_tail or result.detail)
    if result is not None and sandbox_failed(result):
        raise SandboxFailure(f"the sandbox could not run the workflow: {result.status}: {result.detail} "
                             f"{result.stderr_tail[-500:]}".strip())
    outcome = WorkflowOutcome(ok=False, answer=None, calls=st["calls"], duration_s=time.monotonic() - t0,
                              requests=st["requests"])
    if st["final"] is not None and st["failure"] is None:
        outcome.ok, outcome.answer = True, st["final"]
        return outcome
    if st["failure"] is not None:
        outcome.failure, outcome.detail = st["failure"]
    elif result is not None:
        kind = {"timeout": "cpu" if "CPU" in result.detail else "timeout", "memory": "memory",
                "killed": "killed"}.get(result.status, "crash")
        outcome.failure = kind
        outcome.detail = f"sandbox {result.status}: {result.detail} {result.stderr_tail[-1500:]}".strip()
    else:
        outcome.failure, outcome.detail = "crash", "the sandbox ended without a verdict"
    return outcome


#: how :func:`agentic_repro.evaluators.sandbox.verdict.status_without_verdict` says the trusted runner died without a verdict
#: (killed, crashed): the workflow's own process cannot reach the runner, so this is the sandbox failing
RUNNER_LOST = ("runner killed by signal", "no verdict from the runner", "the runner ended without a verdict")


def sandbox_failed(result: ExecResult) -> bool:
    """The sandbox, not the workflow, failed: an infrastructure result, or a runner lost without a verdict (a
    SIGXCPU of the runner stays the workflow's CPU limit)."""
    return bool(result.infrastructure) or (result.status in ("killed", "error")
                                           and result.detail.startswith(RUNNER_LOST))


async def _cancel_all(tasks: list[asyncio.Future]) -> None:
    """Cancel ``tasks`` and wait until each has ended (a cancelled backbone call writes its ledger line)."""
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


class _HarnessFailure(Exception):
    """Wraps an exception raised by the harness's handler, so a backbone's ConnectionError is never read as
    the sandbox's channel closing."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class OperatorCallError(Exception):
    """An operator was called with arguments it does not take: the workflow sees this as an exception."""
