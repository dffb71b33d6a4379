"""A model-free backbone: every reply comes from a script, a Python function of the prompt.

It implements the Backbone protocol without a model, a server or a network, so a method, a benchmark and their
configs can be run end to end in seconds: the unit tests script it per test, the search-cost estimates
(baselines/autoflow/estimate.py and its siblings) script replies of a chosen length, and ``backbone=scripted``
(configs/backbone/scripted.yaml) dry-runs any method from the command line. Its scores measure the script, not a
model: its identity says ``kind: scripted``, so such a run never passes for a model's result.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentic_repro.harness.backbone import BackboneError, BackboneResult
from agentic_repro.harness.ledger import Price
from agentic_repro.harness.refs import resolve_ref
from agentic_repro.harness.types import Completion

__all__ = ["Script", "ScriptedBackbone", "build_scripted_backbone", "fixed_reply", "load_script"]

Script = Callable[[list[dict[str, str]], dict[str, Any]], str]


class ScriptedBackbone:
    """Answers with ``script(messages, sampling)`` (``sampling["choice"]`` is the index among ``n``); records every
    request; token counts are word counts."""

    def __init__(self, script: Script, *, name: str = "scripted", price: Price | None = None,
                 max_concurrency: int = 4, supports_n: bool = False, params: float | None = 1e6,
                 delay_s: float = 0.0, identity_extra: dict[str, Any] | None = None) -> None:
        self.name = name
        self.model = f"{name}-model"
        self.price = price or Price(1.0, 2.0)
        self.params = params
        self.max_concurrency = max_concurrency
        self.supports_n = supports_n
        self.script = script
        self.delay_s = delay_s
        self.identity_extra = dict(identity_extra or {})  # e.g. which script: another script is another "model"
        self.requests: list[tuple[list[dict[str, str]], dict[str, Any], int]] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": "scripted", "model": self.model, **self.identity_extra}

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model, **self.identity_extra}

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


def fixed_reply(text: str) -> Script:
    """A script that gives ``text`` to every prompt."""
    return lambda messages, sampling: text


def load_script(ref: str) -> Callable[..., Any]:
    """``package.module:function`` -> the function (a script, or a factory of one given the config's options)."""
    try:
        return resolve_ref(ref, "backbone.script")
    except ValueError as exc:
        raise BackboneError(str(exc), kind="config", attempts=0) from exc


def build_scripted_backbone(cfg: dict[str, Any], *, name: str, price: Price, params: float | None,
                            max_concurrency: int) -> ScriptedBackbone:
    """``kind: scripted``: ``script: null`` gives ``reply`` to every prompt; ``script: pkg.mod:factory`` calls
    ``factory(**script_args)`` for the script."""
    ref = cfg.get("script")
    if ref:
        script = load_script(str(ref))(**dict(cfg.get("script_args") or {}))
        what: dict[str, Any] = {"script": str(ref), "script_args": dict(cfg.get("script_args") or {})}
    else:
        reply = cfg.get("reply")
        if not isinstance(reply, str):
            raise BackboneError(f"backbone '{name}': kind=scripted needs `reply` (a string) or `script`",
                                kind="config", attempts=0)
        script, what = fixed_reply(reply), {"reply": reply}
    return ScriptedBackbone(script, name=name, price=price, params=params, max_concurrency=max_concurrency,
                            supports_n=bool(cfg.get("supports_n", True)), delay_s=float(cfg.get("delay_s", 0.0)),
                            identity_extra=what)
