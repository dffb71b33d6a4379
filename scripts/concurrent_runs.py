"""Run planned runs side by side in one process, so a backbone's parallel slots stay busy (issue 33).

Most cells of a table hold one or a few problems, so one run at a time leaves the embedded llama.cpp server's
slots (``server.parallel``, continuous batching) mostly idle. Here up to ``concurrency`` independent runs go at
once, in one event loop, against one server pool and one response cache. Each run is still exactly what
:func:`agentic_repro.harness.runner.run_spec` makes: one folder, its lock, its ledger, its identity check.

Runs are independent unless they share a folder (a first pass and the full size of one cell) or a searched
method's artifact: such runs go in plan order, one after the other. Everything else starts in plan order as a
slot frees up, and ``on_done`` is called for each run as it finishes (one at a time, off the event loop), so a
caller prints a line per finished run and re-renders its table as before. With deterministic decoding
(``server.parallel=1``, the scripted backbone) every run's answers are those of the sequential order: a run's
calls depend on its own configuration and seed only, and their cache keys are the same.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentic_repro.scripts.runs import Planned, _ensure_artifact, announce_plan


def backbone_concurrency(items: list[Planned]) -> int:
    """How many runs to keep in flight by default: the requests the backbone takes at once
    (``backbone.max_concurrency``, one per embedded server slot), the smallest among the planned runs."""
    bounds = [int(it.spec.backbone_cfg.get("max_concurrency") or 1) for it in items if it.spec is not None]
    return max(1, min(bounds)) if bounds else 1


def exclusive_keys(it: Planned) -> set[str]:
    """What a run must hold alone: its folder and, for a searched method, its artifact's search."""
    keys = {f"folder:{Path(it.spec.out_dir).resolve()}"}
    m = it.spec.method_cfg
    if m.get("search"):
        keys.add(f"search:{m['name']}/{it.spec.benchmark_cfg['name']}")
    return keys


def execute_concurrently(items: list[Planned], *, concurrency: int, log: Callable[[str], None] = print,
                         on_done: Callable[[Planned], None] | None = None, keep_going: bool = True,
                         pool: Any = None) -> list[Planned]:
    """:func:`agentic_repro.scripts.runs.execute` with up to ``concurrency`` runs in flight (1: one after the
    other). Ctrl-C cancels the runs in flight; each saves what it finished (the runner's summary is written
    whatever stopped it), and the same command resumes."""
    if pool is not None:
        return asyncio.run(_execute(items, pool, max(1, int(concurrency)), log, on_done, keep_going))
    from agentic_repro.harness.embedded.server import ServerPool

    with ServerPool() as own:
        return asyncio.run(_execute(items, own, max(1, int(concurrency)), log, on_done, keep_going))


async def _execute(items: list[Planned], pool: Any, concurrency: int, log: Callable[[str], None],
                   on_done: Callable[[Planned], None] | None, keep_going: bool) -> list[Planned]:
    todo = announce_plan(items, log, side_by_side=concurrency)
    keys = {id(it): exclusive_keys(it) for it in todo}
    pending = list(todo)
    held: set[str] = set()
    running: dict[asyncio.Task, Planned] = {}
    callbacks = asyncio.Lock()  # on_done one at a time (it renders tables, writes the runtime record)
    started = 0
    failure: BaseException | None = None

    def startable() -> Planned | None:
        blocked: set[str] = set(held)
        for it in pending:  # plan order: a run waits for an earlier pending run sharing a key
            if not keys[id(it)] & blocked:
                return it
            blocked |= keys[id(it)]
        return None

    try:
        while pending or running:
            while pending and len(running) < concurrency and failure is None:
                it = startable()
                if it is None:
                    break
                pending.remove(it)
                held.update(keys[id(it)])
                started += 1
                log(f"[{started}/{len(todo)}] {it.label} ({it.state})")
                running[asyncio.ensure_future(_one(it, pool, log))] = it
            if not running:
                break
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                it = running.pop(task)
                held.difference_update(keys[id(it)])
                exc = task.exception()
                if exc is not None and not keep_going and failure is None:
                    failure = exc
                if on_done:
                    async with callbacks:
                        await asyncio.to_thread(on_done, it)
    except BaseException:  # Ctrl-C (the loop's main task cancelled) or a failing callback: stop the runs in flight
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise
    if failure is not None:
        raise failure
    return items


async def _one(it: Planned, pool: Any, log: Callable[[str], None]) -> None:
    """One run, as :func:`agentic_repro.scripts.runs.execute` makes it: its search first if its artifact is
    missing, then :class:`~agentic_repro.harness.runner.Runner` on the shared pool. Its failure is recorded on
    the item (``failed``) and re-raised for ``keep_going=False``."""
    from agentic_repro.harness.runner import Runner

    t0 = time.time()
    try:
        if it.spec.method_cfg.get("search"):
            await asyncio.to_thread(_ensure_artifact, it, pool, log)  # its own event loop, in a worker thread
        it.metrics = await Runner(it.spec, servers=pool).run()
        it.state = "done" if it.metrics.get("complete") else "partial"
    except Exception as exc:
        it.state, it.error = "failed", f"{type(exc).__name__}: {exc}"
        log(f"  ! {it.label} failed: {it.error}")
        raise
    finally:
        it.wall_s = time.time() - t0
    if it.metrics:
        log(f"  {it.label}: score={it.metrics['score_pct']:.1f} n={it.metrics['n']} "
            f"calls={it.metrics['totals']['calls']} wall={it.wall_s:.0f}s")
