"""LLMClient: samples, seeds, cache replay, ledger attribution under concurrency."""
from __future__ import annotations

import asyncio
import random

import pytest

from harness.cache import ResponseCache
from harness.llm import LLMClient
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
