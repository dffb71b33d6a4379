"""Plain data types shared by the core, benchmarks and methods.

They are deliberately small and JSON-serialisable so that every record a run
writes (predictions, calls) can be read back without importing a method.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


@dataclass(frozen=True)
class Problem:
    """One benchmark item.

    ``fields`` holds the raw record as loaded (question, context, prompt, tests, ...);
    ``gold`` the reference answer in the benchmark's own form; ``index`` the position
    in the selected split (the runner's deterministic processing order).
    """

    id: str
    index: int
    fields: dict[str, Any]
    gold: Any
    benchmark: str


@dataclass
class Solution:
    """What a method returns for one problem.

    ``answer`` is the method's final raw text (what the benchmark's extraction
    filter reads); ``confidence`` in [0, 1] when the method estimates one;
    ``trace`` is free-form but JSON-serialisable: the full exchange and every
    intermediate decision a reader needs to audit the answer.
    """

    answer: str
    confidence: float | None = None
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    """One choice returned by a backbone call (possibly replayed from cache)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None
    logprobs: list[dict[str, Any]] | None = None
    cached: bool = False
    usage: dict[str, int] | None = None          # this choice's share of the reply's usage, every token class
    served_model: str | None = None              # the reply's `model`: the snapshot that answered
    system_fingerprint: str | None = None
    service_tier: str | None = None              # as the reply says ("default", "flex", "batch", ...)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Score:
    """A scorer's verdict on one prediction, with the extraction made explicit."""

    value: float
    extracted: Any
    details: dict[str, Any] = field(default_factory=dict)
