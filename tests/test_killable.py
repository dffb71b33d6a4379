"""The killable child used by both MATH checkers: result, exception, death and deadline."""
from __future__ import annotations

import os
import time

import pytest

from agentic_repro.evaluators.killable import TIMEOUT, call_with_deadline


def _add(a: int, b: int) -> int:
    return a + b


def _raise() -> None:
    raise ValueError("bad input")


def _die() -> None:
    os._exit(3)


def _spin() -> None:
    while True:
        pass


def test_result_exception_death_and_deadline() -> None:
    assert call_with_deadline(_add, (2, 3), 5.0) == 5
    with pytest.raises(RuntimeError, match="bad input"):
        call_with_deadline(_raise, (), 5.0)
    with pytest.raises(RuntimeError, match="without an answer"):
        call_with_deadline(_die, (), 5.0)
    start = time.monotonic()
    assert call_with_deadline(_spin, (), 0.3) is TIMEOUT  # its CPU budget, rounded up to 1 s
    # 1 s of CPU (the budget rounded up): ~1 s idle; on a busy machine the wall backstop (10 s here) at the latest
    assert time.monotonic() - start < 15.0


def _wait_then_answer() -> int:
    time.sleep(1.5)  # what a check that waits for the CPU on a busy machine looks like: wall time, no CPU time
    return 7


def test_the_budget_is_cpu_time_so_a_busy_machine_does_not_change_the_verdict() -> None:
    # 1.5 s of wall time but ~0 CPU: within a 1 s CPU budget (a wall deadline made such checks errors under load)
    assert call_with_deadline(_wait_then_answer, (), 1.0) == 7


def _sleep_forever() -> None:
    time.sleep(3600)


def test_a_child_that_waits_forever_meets_the_wall_backstop(monkeypatch) -> None:
    from agentic_repro.evaluators import killable

    monkeypatch.setattr(killable, "WALL_MIN_S", 0.5)
    monkeypatch.setattr(killable, "WALL_FACTOR", 0.5)
    start = time.monotonic()
    assert call_with_deadline(_sleep_forever, (), 1.0) is TIMEOUT
    assert time.monotonic() - start < 5.0
