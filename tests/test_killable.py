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
    assert call_with_deadline(_spin, (), 0.3) is TIMEOUT
    assert time.monotonic() - start < 2.0
