"""Interactive environments: a benchmark whose problems are episodes (ALFWorld, WebShop, a game).

A method opens a session through its context and acts; the environment, not the method, decides the
score::

    async with ctx.env() as s:
        first = await s.reset()                  # StepResult: observation (+ admissible actions)
        while not first.done:
            first = await s.step(action, confidence=0.8)   # extra keywords are recorded with the step

Three pieces, split by who may see what:

- an **engine** (scorer side) holds the game and its goal. ``async reset(problem, seed)`` /
  ``async step(action)`` return :class:`StepResult`. A synchronous or slow engine (ALFWorld's resets
  take ~1 s) runs in a worker process (:class:`ProcessEngine`, any class with plain ``reset``/``step``)
  or, when ``process: false``, in a thread; the event loop is never blocked.
- the **host** (:class:`EnvHost`, runner side, one per problem attempt) applies the step cap, appends
  every reset, step and note to ``trajectories.jsonl`` as it happens, and keeps the episodes the score
  is computed from. A crashed engine or worker is an error for the problem, never a score of 0.
- the **session** (:class:`EnvSession`, method side) holds no reference to either: it reaches the host
  through the problem's backstage (:mod:`agentic_repro.harness.view`), so a method cannot read the goal.

Config (``configs/benchmark/<name>.yaml``)::

    env:
      engine: my_pkg.games:Engine   # a class; built once per worker with **params
      params: {}
      process: true                 # run it in worker processes (default true)
      max_steps: 50                 # step cap per episode (the benchmark's protocol)
      step_timeout_s: 120           # a reset/step slower than this kills the worker: an error
      workers: 4                    # at most this many worker processes (default: one per open session)

Resume is per problem attempt: an attempt that did not finish (killed mid-episode) left trajectory
lines under its own ``attempt`` id and no prediction; the resumed run replays that problem from
reset (the response cache makes the replay free and identical), and finished problems are skipped.
"""
from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentic_repro.harness.types import Problem

if TYPE_CHECKING:  # typing.Self is Python 3.11+
    from typing_extensions import Self


class EnvironmentFailure(RuntimeError):
    """The environment (engine or its worker process) failed: the problem is an error, not a 0."""


class EpisodeOver(RuntimeError):
    """``step`` after the episode ended (done or step cap) without a new ``reset``: a method bug."""


@dataclass(frozen=True)
class StepResult:
    """What the environment returned; ``actions`` lists the admissible actions when it offers them,
    ``truncated`` says the episode was ended by the step cap rather than by the environment."""

    observation: Any
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    actions: list[str] | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_step_result(out: Any) -> StepResult:
    """Accept a StepResult, a gym-style ``(obs, reward, done, info)`` or a reset's ``(obs, info)``."""
    if isinstance(out, StepResult):
        return out
    if isinstance(out, dict) and "observation" in out:
        return StepResult(**out)
    if isinstance(out, tuple) and len(out) == 4:
        obs, reward, done, info = out
        info = dict(info or {})
        return StepResult(obs, float(reward), bool(done), info, info.get("admissible_actions"))
    if isinstance(out, tuple) and len(out) == 2:
        obs, info = out
        info = dict(info or {})
        return StepResult(obs, 0.0, False, info, info.get("admissible_actions"))
    raise TypeError(f"an engine returned {type(out).__name__}; expected StepResult, (obs, reward, done, info) "
                    "or (obs, info)")


class Engine(Protocol):
    """The scorer-side environment for one session (see the module docstring)."""

    async def reset(self, problem: Problem, seed: int) -> StepResult: ...

    async def step(self, action: Any) -> StepResult: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class EnvSpec:
    """The ``env:`` block of a benchmark config."""

    engine: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    process: bool = True
    max_steps: int | None = None
    step_timeout_s: float = 120.0
    workers: int | None = None

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> EnvSpec | None:
        if not cfg:
            return None
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"benchmark env: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        spec = cls(**{**cfg, "params": dict(cfg.get("params") or {})})
        if spec.max_steps is not None and int(spec.max_steps) < 1:
            raise ValueError(f"benchmark env.max_steps={spec.max_steps}: must be a positive integer or null")
        return spec


def _resolve(target: str) -> Any:
    from agentic_repro.harness.refs import resolve_ref

    return resolve_ref(target, "env.engine")


# ---- engines ------------------------------------------------------------------------------------
class InlineEngine:
    """An engine object in this process: coroutine methods are awaited, plain ones run in a thread."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    async def _call(self, name: str, *args: Any) -> Any:
        fn = getattr(self._obj, name, None)
        if fn is None:
            return None
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        return await asyncio.to_thread(fn, *args)

    async def reset(self, problem: Problem, seed: int) -> StepResult:
        try:
            return as_step_result(await self._call("reset", problem, seed))
        except Exception as exc:
            raise EnvironmentFailure(f"environment reset failed: {type(exc).__name__}: {exc}") from exc

    async def step(self, action: Any) -> StepResult:
        try:
            return as_step_result(await self._call("step", action))
        except Exception as exc:
            raise EnvironmentFailure(f"environment step failed: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self._call("close")


def _worker_main(conn: Any, target: str, params: dict[str, Any]) -> None:
    """The worker process: one engine object, commands over a pipe until 'close' or EOF."""
    try:
        engine = _resolve(target)(**params)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        conn.send(("error", f"cannot build engine {target}: {type(exc).__name__}: {exc}", traceback.format_exc()))
        return
    conn.send(("ready", None, None))
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):
            break
        if op == "close":
            getattr(engine, "close", lambda: None)()
            conn.send(("ok", None, None))
            break
        try:
            out = as_step_result(getattr(engine, op)(*args))
            conn.send(("ok", out.to_dict(), None))
        except Exception as exc:  # noqa: BLE001 - the parent turns this into an EnvironmentFailure
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=6)))


class _Worker:
    """One worker process and its pipe, read without blocking the event loop."""

    def __init__(self, spec: EnvSpec) -> None:
        ctx = mp.get_context("spawn")  # no fork: the parent has threads (sqlite, to_thread pools)
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, spec.engine, spec.params), daemon=True,
                                name=f"env-worker:{spec.engine}")
        self.proc.start()
        child.close()
        self.timeout = float(spec.step_timeout_s)
        self.dead = False

    async def _recv(self, timeout: float) -> tuple[str, Any, Any]:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        fd = self._conn.fileno()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, timeout)
        except asyncio.TimeoutError:
            self.kill()
            raise EnvironmentFailure(f"environment worker did not answer within {timeout:g}s (env.step_timeout_s); "
                                     "it was killed") from None
        finally:
            loop.remove_reader(fd)
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self.proc.join(1.0)
            self.dead = True
            raise EnvironmentFailure(f"environment worker died (exit code {self.proc.exitcode})") from None

    async def start(self) -> None:
        kind, msg, _tb = await self._recv(max(self.timeout, 60.0))
        if kind != "ready":
            self.kill()
            raise EnvironmentFailure(msg)

    async def call(self, op: str, *args: Any) -> StepResult:
        if self.dead:
            raise EnvironmentFailure("environment worker is dead")
        try:
            self._conn.send((op, args))
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise EnvironmentFailure(f"environment worker died (exit code {self.proc.exitcode})") from exc
        kind, payload, _tb = await self._recv(self.timeout)
        if kind == "error":
            raise EnvironmentFailure(f"environment {op} failed in the worker: {payload}")
        return StepResult(**payload)

    async def close(self) -> None:
        if not self.dead:
            try:
                self._conn.send(("close", ()))
                await self._recv(5.0)
            except (EnvironmentFailure, OSError):
                pass
        self.kill()

    def kill(self) -> None:
        self.dead = True
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(2.0)
        self._conn.close()


class WorkerPool:
    """Worker processes for one run's sessions: reused across problems, replaced when one dies."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._slots = asyncio.Semaphore(spec.workers) if spec.workers else None
        self.started = 0  # worker processes started (tests and benches read it)

    async def acquire(self) -> _Worker:
        if self._slots is not None:
            await self._slots.acquire()
        try:
            while self._idle:
                w = self._idle.pop()
                if not w.dead and w.proc.is_alive():
                    return w
            w = _Worker(self.spec)
            self._all.append(w)
            self.started += 1
            await w.start()
            return w
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise

    def release(self, w: _Worker) -> None:
        if not w.dead:
            self._idle.append(w)
        if self._slots is not None:
            self._slots.release()

    async def aclose(self) -> None:
        await asyncio.gather(*(w.close() for w in self._all), return_exceptions=True)
        self._idle.clear()
        self._all.clear()


class ProcessEngine:
    """An engine running in a worker process of ``pool`` (acquired at first reset, released at close)."""

    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool
        self._worker: _Worker | None = None

    async def reset(self, problem: Problem, seed: int) -> StepResult:
        if self._worker is None:
            self._worker = await self._pool.acquire()
        return await self._worker.call("reset", problem, seed)

    async def step(self, action: Any) -> StepResult:
        if self._worker is None:
            raise EpisodeOver("step before reset: call `await s.reset()` first")
        return await self._worker.call("step", action)

    async def close(self) -> None:
        if self._worker is not None:
            self._pool.release(self._worker)
            self._worker = None


class Engines:
    """Makes one engine per session for a run; owns the worker processes (closed with :meth:`aclose`)."""

    def __init__(self, spec: EnvSpec | None) -> None:
        self.spec = spec
        self.pool = WorkerPool(spec) if spec is not None and spec.engine and spec.process else None

    def make(self) -> Engine:
        if self.spec is None or not self.spec.engine:
            raise ValueError("this benchmark is not an environment: its config has no env.engine "
                             "(and its class does not build one in engine())")
        if self.pool is not None:
            return ProcessEngine(self.pool)
        return InlineEngine(_resolve(self.spec.engine)(**self.spec.params))

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()


# ---- episodes and the host ----------------------------------------------------------------------
@dataclass
class Episode:
    """One reset-to-done run, as the score sees it."""

    index: int
    seed: int
    steps: int = 0
    total_reward: float = 0.0
    done: bool = False
    truncated: bool = False
    success: bool | None = None
    trajectory: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_seed(run_seed: int, problem_id: str, episode: int) -> int:
    digest = hashlib.sha256(f"{run_seed}:{problem_id}:{episode}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2 ** 31 - 1)


class TrajectoryLog:
    """``trajectories.jsonl``: one line per reset, step and note, flushed as it happens."""

    def __init__(self, path: Path, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync

    def append(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())


class EnvHost:
    """The runner side of one problem attempt's sessions: engines, step cap, episodes, trajectory log."""

    def __init__(self, problem: Problem, *, engines: Engines, custom: Any, max_steps: int | None, run_seed: int,
                 attempt: str, log: TrajectoryLog | None) -> None:
        self._problem = problem
        self._engines = engines
        self._custom = custom  # Benchmark.engine(problem) when the benchmark builds its own
        self.max_steps = max_steps
        self._run_seed = run_seed
        self._attempt = attempt
        self._log = log
        self._open: dict[int, tuple[Engine, Episode | None]] = {}
        self._next_session = 0
        self.episodes: list[Episode] = []
        self.failure: str | None = None

    def _write(self, ep: Episode, row: dict[str, Any]) -> None:
        row = {"problem_id": self._problem.id, "attempt": self._attempt, "episode": ep.index, **row,
               "time": round(time.time(), 3)}
        ep.trajectory.append({k: v for k, v in row.items() if k not in ("problem_id", "attempt", "time")})
        if self._log is not None:
            self._log.append(row)

    def open(self) -> int:
        sid = self._next_session
        self._next_session += 1
        engine = self._custom if self._custom is not None else self._engines.make()
        self._open[sid] = (engine, None)
        return sid

    async def _guard(self, coro: Any) -> StepResult:
        """Any engine failure (a custom engine's exception too) is recorded: the problem is an error even if
        the method catches it."""
        try:
            return as_step_result(await coro)
        except EnvironmentFailure as exc:
            self.failure = self.failure or str(exc)
            raise
        except Exception as exc:  # a custom engine (Benchmark.engine) raised
            self.failure = self.failure or f"environment failed: {type(exc).__name__}: {exc}"
            raise EnvironmentFailure(self.failure) from exc

    async def reset(self, sid: int, extra: dict[str, Any]) -> StepResult:
        engine, _ = self._session(sid)
        ep = Episode(index=len(self.episodes), seed=episode_seed(self._run_seed, self._problem.id, len(self.episodes)))
        res = await self._guard(engine.reset(self._problem, ep.seed))
        self.episodes.append(ep)
        self._open[sid] = (engine, ep)
        self._write(ep, {"event": "reset", "step": 0, "observation": res.observation, "actions": res.actions,
                         "info": res.info, **({"extra": extra} if extra else {})})
        return res

    async def step(self, sid: int, action: Any, extra: dict[str, Any]) -> StepResult:
        engine, ep = self._session(sid)
        if ep is None:
            raise EpisodeOver("step before reset: call `await s.reset()` first")
        if ep.done:
            raise EpisodeOver(f"episode {ep.index} is over ({'step cap' if ep.truncated else 'done'} after "
                              f"{ep.steps} steps): call `await s.reset()` for a new one")
        res = await self._guard(engine.step(action))
        ep.steps += 1
        ep.total_reward += float(res.reward)
        if "success" in res.info:
            ep.success = bool(res.info["success"])
        if not res.done and self.max_steps is not None and ep.steps >= self.max_steps:
            res = StepResult(res.observation, res.reward, True, res.info, res.actions, truncated=True)
        ep.done, ep.truncated = res.done, res.truncated
        self._write(ep, {"event": "step", "step": ep.steps, "action": action, "observation": res.observation,
                         "reward": res.reward, "done": res.done, "truncated": res.truncated,
                         "actions": res.actions, "info": res.info, **({"extra": extra} if extra else {})})
        return res

    def note(self, sid: int, extra: dict[str, Any]) -> None:
        _, ep = self._session(sid)
        if ep is None:
            raise EpisodeOver("record() before reset: call `await s.reset()` first")
        self._write(ep, {"event": "note", "step": ep.steps, "extra": extra})

    async def close(self, sid: int) -> None:
        engine, _ = self._open.pop(sid, (None, None))
        if engine is not None and engine is not self._custom:
            await engine.close()

    async def close_all(self) -> None:
        for sid in list(self._open):
            await self.close(sid)
        if self._custom is not None:
            await self._custom.close()

    def _session(self, sid: int) -> tuple[Engine, Episode | None]:
        if sid not in self._open:
            raise EpisodeOver("this environment session is closed")
        return self._open[sid]


class EnvSession:
    """The method's handle on an environment: ``reset``, ``step``, ``record``; holds no engine.

    ``await ctx.env()`` opens one; ``async with ctx.env() as s`` also closes it (the runner closes
    any left open when the problem ends).
    """

    def __init__(self, host_of: Any) -> None:
        self._host_of = host_of  # () -> EnvHost of the current problem (through the backstage)
        self._sid: int | None = None
        self.last: StepResult | None = None
        self.steps = 0

    def __await__(self):  # ``s = await ctx.env()``
        return self._open().__await__()

    async def _open(self) -> EnvSession:
        if self._sid is None:
            self._sid = self._host_of().open()
        return self

    async def __aenter__(self) -> Self:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def actions(self) -> list[str] | None:
        """The admissible actions after the last reset/step (None when the environment offers none)."""
        return None if self.last is None else self.last.actions

    @property
    def max_steps(self) -> int | None:
        return self._host_of().max_steps

    async def reset(self, **extra: Any) -> StepResult:
        await self._open()
        self.last = await self._host_of().reset(self._sid, extra)
        self.steps = 0
        return self.last

    async def step(self, action: Any, **extra: Any) -> StepResult:
        """Act; ``extra`` (confidence, a reflection, ...) is recorded with the step in the trajectory."""
        if self._sid is None:
            raise EpisodeOver("step before reset: call `await s.reset()` first")
        self.last = await self._host_of().step(self._sid, action, extra)
        self.steps += 1
        return self.last

    def record(self, **extra: Any) -> None:
        """Attach whatever the method wants kept (confidence, reflections) to the current step."""
        if self._sid is None:
            raise EpisodeOver("record() before reset: call `await s.reset()` first")
        self._host_of().note(self._sid, extra)

    async def close(self) -> None:
        if self._sid is not None:
            await self._host_of().close(self._sid)
            self._sid = None
