"""A scripted LLM double: implements the Backbone protocol without any model or network."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from harness.backbone import BackboneResult
from harness.ledger import Price
from harness.types import Completion

Script = Callable[[list[dict[str, str]], dict[str, Any]], str]


class ScriptedBackbone:
    """Answers with ``script(messages, sampling)``; counts calls; token counts are word counts."""

    def __init__(self, script: Script, *, name: str = "scripted", price: Price | None = None,
                 max_concurrency: int = 4, supports_n: bool = False, params: float | None = 1e6,
                 delay_s: float = 0.0) -> None:
        self.name = name
        self.model = f"{name}-model"
        self.price = price or Price(1.0, 2.0)
        self.params = params
        self.max_concurrency = max_concurrency
        self.supports_n = supports_n
        self.script = script
        self.delay_s = delay_s
        self.requests: list[tuple[list[dict[str, str]], dict[str, Any], int]] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": "scripted", "model": self.model}

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    async def complete(self, messages, sampling, n) -> BackboneResult:
        self.requests.append((messages, dict(sampling), n))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        texts = [self.script(messages, {**sampling, "choice": i}) for i in range(n)]
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        comps = [Completion(t, prompt_tokens if i == 0 else 0, len(t.split()), "stop") for i, t in enumerate(texts)]
        return BackboneResult(comps, 0, self.delay_s)

    async def aclose(self) -> None:
        return None
