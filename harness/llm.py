"""The one door to a backbone: cache lookup, bounded concurrency, ledger records.

Methods never see a raw backbone; they call :meth:`LLMClient.generate` through
their problem context, which attributes every call to (problem, method, stage).
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable

from harness.backbone import SAMPLING_KEYS, Backbone
from harness.cache import ResponseCache, cache_key
from harness.ledger import CallRecord, flops_estimate
from harness.types import Completion, Message


def request_seed(run_seed: int, sample_index: int) -> int:
    """Distinct, reproducible seed per sample: same run seed + index → same draw."""
    return (run_seed * 1_000_003 + sample_index * 7_919) % (2 ** 31 - 1)


class LLMClient:
    def __init__(self, backbone: Backbone, cache: ResponseCache, *, run_id: str, method: str,
                 defaults: dict[str, Any]) -> None:
        self.backbone = backbone
        self.cache = cache
        self.run_id = run_id
        self.method = method
        self.defaults = {k: v for k, v in defaults.items() if k in SAMPLING_KEYS}
        self._sem = asyncio.Semaphore(max(1, int(backbone.max_concurrency)))
        self._backbone_id = json.dumps(backbone.cache_identity(), sort_keys=True, default=str)
        self.backbone_calls = 0  # real requests sent, for benches and tests

    async def generate(self, messages: list[Message], *, stage: str, problem_id: str, seed: int,
                       sink: Callable[[CallRecord], None], n: int = 1, sample_offset: int = 0,
                       **sampling: Any) -> list[Completion]:
        unknown = set(sampling) - set(SAMPLING_KEYS)
        if unknown:
            raise TypeError(f"unknown sampling parameter(s) {sorted(unknown)}; allowed: {SAMPLING_KEYS}")
        params = {**self.defaults, **{k: v for k, v in sampling.items() if v is not None}}
        if isinstance(params.get("stop"), (list, tuple)):
            params["stop"] = list(params["stop"])
        indices = [sample_offset + i for i in range(n)]
        results: dict[int, Completion] = {}
        per_sample_params: dict[int, dict[str, Any]] = {}
        missing: list[int] = []
        for idx in indices:
            p = dict(params)
            p["seed"] = request_seed(seed if p.get("seed") is None else p["seed"], idx)
            per_sample_params[idx] = p
            hit = self.cache.get(cache_key(self._backbone_id, messages, p, idx))
            if hit is not None:
                comp = Completion(**{**hit["completion"], "cached": True})
                results[idx] = comp
                self._record(sink, problem_id, stage, comp, hit.get("latency_s", 0.0), True, 0, idx, p)
            else:
                missing.append(idx)
        if missing:
            if self.backbone.supports_n and len(missing) > 1:
                groups = [missing]  # one request with n choices (the prompt is charged once)
            else:
                groups = [[i] for i in missing]
            fresh = await asyncio.gather(*(self._request(messages, per_sample_params[g[0]], g) for g in groups))
            for group, (comps, latency, retries, log) in zip(groups, fresh):
                for idx, comp in zip(group, comps):
                    p = per_sample_params[idx]
                    self.cache.put(cache_key(self._backbone_id, messages, p, idx),
                                   {"completion": comp.to_dict(), "latency_s": latency / len(group)})
                    results[idx] = comp
                    first = idx == group[0]
                    self._record(sink, problem_id, stage, comp, latency / len(group), False,
                                 retries if first else 0, idx, p, log if first else None)
        return [results[i] for i in indices]

    async def _request(self, messages: list[Message], params: dict[str, Any],
                       group: list[int]) -> tuple[list[Completion], float, int, list[str]]:
        async with self._sem:
            self.backbone_calls += 1
            res = await self.backbone.complete(messages, params, len(group))
        comps = list(res.completions)
        if len(comps) < len(group):
            # A server that ignores n (llama.cpp) returns one choice: fetch the rest one by one.
            raise RuntimeError(f"backbone {self.backbone.name} returned {len(comps)} choices for n={len(group)};"
                               " set supports_n: false in its config")
        return comps[: len(group)], res.latency_s, res.retries, res.retry_log

    def _record(self, sink: Callable[[CallRecord], None], problem_id: str, stage: str, comp: Completion,
                latency: float, hit: bool, retries: int, idx: int, params: dict[str, Any],
                retry_log: list[str] | None = None) -> None:
        tokens = comp.prompt_tokens + comp.completion_tokens
        sink(CallRecord(
            run_id=self.run_id, problem_id=problem_id, method=self.method, stage=stage,
            model=self.backbone.model, prompt_tokens=comp.prompt_tokens,
            completion_tokens=comp.completion_tokens, latency_s=round(latency, 4), cache_hit=hit,
            retries=retries, cost_usd=self.backbone.price.cost(comp.prompt_tokens, comp.completion_tokens),
            flops=flops_estimate(self.backbone.params, tokens), sample_index=idx,
            seed=params.get("seed"), temperature=params.get("temperature"), time=time.time(),
            retry_log=retry_log or None, finish_reason=comp.finish_reason))
