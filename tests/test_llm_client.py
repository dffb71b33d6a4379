"""LLMClient: samples, seeds, cache replay, ledger attribution under concurrency."""
from __future__ import annotations

import asyncio
import random

import pytest

from agentic_repro.harness.cache import ResponseCache
from agentic_repro.harness.llm import LLMClient
from tests.doubles import ScriptedBackbone

MSG = [{"role": "user", "content": "draw"}]


def seeded(messages, sampling):
    return f"sample seed={sampling['seed']} choice={sampling['choice']}"


def client(tmp_path, bb, mode="read-write"):
    return LLMClient(bb, ResponseCache(tmp_path / "c.sqlite", mode), run_id="r", method="m",
                     defaults={"temperature": 0.0, "max_tokens": 16})


def test_n_samples_become_separate_requests_with_distinct_seeds(tmp_path):
    bb = ScriptedBackbone(seeded, supports_n=False)
    records = []
    outs = asyncio.run(client(tmp_path, bb).generate(MSG, stage="sample", problem_id="p", seed=42,
                                                     sink=records.append, n=5, temperature=0.7))
    assert len(bb.requests) == 5 and len({o.text for o in outs}) == 5
    assert [r.sample_index for r in records] == [0, 1, 2, 3, 4] and len({r.seed for r in records}) == 5


def test_backbone_with_n_gets_one_request(tmp_path):
    bb = ScriptedBackbone(seeded, supports_n=True)
    records = []
    asyncio.run(client(tmp_path, bb).generate(MSG, stage="sample", problem_id="p", seed=42, sink=records.append,
                                              n=5, temperature=0.7))
    assert len(bb.requests) == 1 and bb.requests[0][2] == 5 and len(records) == 5


def test_same_seed_replays_from_cache_and_other_seed_does_not(tmp_path):
    bb = ScriptedBackbone(seeded)
    c = client(tmp_path, bb)
    first = asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=42, sink=lambda r: None, n=3, temperature=0.7))
    again = asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=42, sink=lambda r: None, n=3, temperature=0.7))
    assert [o.text for o in first] == [o.text for o in again] and all(o.cached for o in again)
    assert len(bb.requests) == 3
    asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=123, sink=lambda r: None, n=3, temperature=0.7))
    assert len(bb.requests) == 6
    # sample_offset draws new samples for the same prompt
    asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=42, sink=lambda r: None, n=2, sample_offset=3,
                           temperature=0.7))
    assert len(bb.requests) == 8


def test_read_only_cache_never_writes(tmp_path):
    bb = ScriptedBackbone(seeded)
    c = client(tmp_path, bb, mode="read-only")
    for _ in range(2):
        asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=1, sink=lambda r: None))
    assert len(bb.requests) == 2


def test_ledger_attributes_calls_to_their_problem_under_concurrency(tmp_path):
    bb = ScriptedBackbone(lambda m, s: "x " * len(m[0]["content"]), delay_s=0.0, max_concurrency=3)
    c = client(tmp_path, bb)
    sinks = {f"p{i}": [] for i in range(12)}

    async def solve(pid, words):
        await asyncio.sleep(random.random() / 100)
        for j in range(words):
            await c.generate([{"role": "user", "content": pid * (j + 1)}], stage="s", problem_id=pid, seed=1,
                             sink=sinks[pid].append)

    async def main():
        await asyncio.gather(*(solve(pid, 1 + i % 4) for i, pid in enumerate(sinks)))

    asyncio.run(main())
    for i, (pid, recs) in enumerate(sinks.items()):
        assert len(recs) == 1 + i % 4 and all(r.problem_id == pid for r in recs)
        expected = sum(len(pid * (j + 1)) for j in range(len(recs)))  # completion words = prompt chars
        assert sum(r.completion_tokens for r in recs) == expected


def test_unknown_sampling_parameter_is_rejected(tmp_path):
    with pytest.raises(TypeError, match="temprature"):
        asyncio.run(client(tmp_path, ScriptedBackbone(seeded)).generate(MSG, stage="s", problem_id="p", seed=1,
                                                                        sink=lambda r: None, temprature=0.5))


# ---- issue 10: errors are never cached, answered samples are kept, every request is a ledger line ----------

class FlakyBackbone(ScriptedBackbone):
    """Fails the requests whose sample seed is in ``fail_seeds`` (after a short delay), answers the others."""

    def __init__(self, fail_indices, *, delay_s=0.0, **kw):
        super().__init__(seeded, delay_s=delay_s, **kw)
        self.fail_indices = set(fail_indices)
        self.seen_seeds = []

    async def complete(self, messages, sampling, n, **kw):
        from agentic_repro.harness.backbone import BackboneError

        self.seen_seeds.append(sampling["seed"])
        if len(self.seen_seeds) - 1 in self.fail_indices:
            await asyncio.sleep(0.01)
            raise BackboneError("scripted outage", kind="http_5xx", attempts=3, retry_log=["500: retry in 0.1s"] * 2)
        return await super().complete(messages, sampling, n)


def test_answered_samples_are_cached_even_when_a_sibling_fails(tmp_path):
    from agentic_repro.harness.backbone import BackboneError

    bb = FlakyBackbone({2})  # the third of five sample requests fails for good
    c = client(tmp_path, bb)
    records = []
    with pytest.raises(BackboneError, match="scripted outage"):
        asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=42, sink=records.append, n=5, temperature=0.7))
    assert len(records) == 5  # four answers and one failure: every request sent is a record
    failed = [r for r in records if r.error]
    assert len(failed) == 1 and failed[0].attempts == 3 and failed[0].error_kind == "http_5xx"
    assert failed[0].retry_log and failed[0].cost_usd == 0
    assert all(r.attempts == 1 and r.error is None for r in records if r is not failed[0])
    # the re-run buys only the failed sample; the error itself was not cached
    healthy = ScriptedBackbone(seeded)
    again = []
    outs = asyncio.run(client(tmp_path, healthy).generate(MSG, stage="s", problem_id="p", seed=42, sink=again.append,
                                                          n=5, temperature=0.7))
    assert len(healthy.requests) == 1 and len(outs) == 5 and sum(r.cache_hit for r in again) == 4


def test_each_completion_is_cached_the_moment_it_arrives(tmp_path):
    """A kill while siblings are still in flight loses only the requests in flight."""

    async def main():
        bb = ScriptedBackbone(seeded)
        slow = {3, 4}

        async def complete(messages, sampling, n, **kw):
            i = len(bb.requests)
            bb.requests.append((messages, sampling, n))
            await asyncio.sleep(10 if i in slow else 0.0)
            return await ScriptedBackbone.complete(ScriptedBackbone(seeded), messages, sampling, n)

        bb.complete = complete
        c = client(tmp_path, bb)
        records = []
        task = asyncio.create_task(c.generate(MSG, stage="s", problem_id="p", seed=7, sink=records.append, n=5,
                                              temperature=0.7))
        await asyncio.sleep(0.2)
        task.cancel()  # like a kill: three answered, two in flight
        with pytest.raises(asyncio.CancelledError):
            await task
        return records

    records = asyncio.run(main())
    assert sum(1 for r in records if r.error is None) == 3
    assert sum(1 for r in records if r.error_kind == "cancelled") == 2
    healthy = ScriptedBackbone(seeded)
    asyncio.run(client(tmp_path, healthy).generate(MSG, stage="s", problem_id="p", seed=7, sink=lambda r: None, n=5,
                                                   temperature=0.7))
    assert len(healthy.requests) == 2  # only the two that were in flight are bought again


def test_records_carry_role_model_identity_and_adapter(tmp_path):
    from agentic_repro.harness.backbone import BackboneError

    class WithAdapters(ScriptedBackbone):
        adapters = {"planner": {"name": "planner", "sha256": "ab" * 32}}

        def adapter_identity(self, name):
            if name not in self.adapters:
                raise BackboneError(f"unknown adapter {name!r}", kind="unknown_adapter", attempts=0)
            return self.adapters[name]

        async def complete(self, messages, sampling, n, *, adapter=None):
            self.last_adapter = adapter
            return await super().complete(messages, sampling, n)

    bb = WithAdapters(seeded)
    c = LLMClient(bb, ResponseCache(tmp_path / "c.sqlite"), run_id="r", method="m", defaults={}, role="planner")
    recs = []
    asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=1, sink=recs.append, adapter="planner"))
    asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=1, sink=recs.append))
    assert bb.last_adapter is None and len(bb.requests) == 2  # the adapter is part of the cache key
    a, base = recs
    assert a.role == base.role == "planner" and a.model_identity.startswith("scripted-model#")
    assert a.adapter == "planner" and a.adapter_sha256 == "ab" * 32 and base.adapter is None
    with pytest.raises(BackboneError, match="unknown adapter"):
        asyncio.run(c.generate(MSG, stage="s", problem_id="p", seed=1, sink=recs.append, adapter="nope"))
    assert len(bb.requests) == 2  # validated before any request
    # a base-model key is unchanged by the adapter feature (existing caches stay valid)
    from agentic_repro.harness.cache import cache_key

    assert cache_key("b", MSG, {"seed": 1}, 0) == cache_key("b", MSG, {"seed": 1}, 0, None)


def test_fail_fast_stops_calling_a_dead_backbone(tmp_path):
    from agentic_repro.harness.backbone import BackboneError
    from agentic_repro.harness.llm import RunAborted

    class Dead(ScriptedBackbone):
        async def complete(self, messages, sampling, n, **kw):
            self.requests.append(messages)
            raise BackboneError("connection refused", kind="connection", attempts=6)

    bb = Dead(seeded)
    c = LLMClient(bb, ResponseCache(tmp_path / "c.sqlite"), run_id="r", method="m", defaults={}, fail_fast_after=3)
    errors = []
    for i in range(6):
        try:
            asyncio.run(c.generate([{"role": "user", "content": str(i)}], stage="s", problem_id="p", seed=1,
                                   sink=lambda r: None))
        except BackboneError as exc:
            errors.append(exc)
    assert len(bb.requests) == 3 and all(isinstance(e, RunAborted) for e in errors[3:])
    assert "connection refused" in str(errors[-1])
