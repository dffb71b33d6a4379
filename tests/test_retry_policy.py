"""RetryPolicy.delay directly (backoff, jitter bounds, cap, Retry-After), and one real loopback 429 whose
Retry-After the client honours: a delay of 0 (the mutation the suite missed) fails each test here."""
from __future__ import annotations

import asyncio
import random
import time


from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy
from agentic_repro.harness.ledger import Price
from tests.fault_server import FaultServer


def test_backoff_doubles_within_full_jitter_bounds_and_is_capped():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(0)
    for attempt, backoff in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        waits = [policy.delay(attempt, None, rng) for _ in range(200)]
        assert all(0.5 * backoff <= w <= backoff for w in waits), (attempt, min(waits), max(waits))
        assert max(waits) - min(waits) > 0.3 * backoff  # jittered, not a constant
    assert policy.delay(40, None, rng) <= 4.0  # no overflow far out


def test_retry_after_wins_when_longer_and_is_bounded():
    policy = RetryPolicy(base_delay_s=0.1, max_delay_s=2.0)
    rng = random.Random(1)
    assert policy.delay(0, 7.5, rng) == 7.5          # the server's wait, longer than the backoff
    assert policy.delay(0, 60.0, rng) == 10.0        # but never more than 5 x max_delay_s
    assert 0.05 <= policy.delay(0, 0.01, rng) <= 0.1  # a shorter Retry-After does not cut the backoff
    same = [RetryPolicy().delay(2, None, random.Random(9)) for _ in range(2)]
    assert same[0] == same[1]  # reproducible under one seed


def test_a_loopback_429_with_retry_after_is_waited_for():
    async def call(url: str) -> tuple[float, BaseException | None]:
        bb = OpenAICompatibleBackbone(name="t", model="m", base_url=url, api_key="k", price=Price(0, 0),
                                      retry=RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=1.0,
                                                        timeout_s=5.0))
        t0 = time.perf_counter()
        try:
            await bb.complete([{"role": "user", "content": "hi"}], {}, 1)
            return time.perf_counter() - t0, None
        except BackboneError as exc:
            return time.perf_counter() - t0, exc
        finally:
            await bb.aclose()

    with FaultServer(fail_all="429", retry_after_s=0.6) as srv:
        elapsed, exc = asyncio.run(call(srv.url))
        assert srv.received == 2
    assert exc is not None and exc.kind == "http_429" and exc.attempts == 2
    assert elapsed >= 0.6, elapsed  # the backoff alone is ~1 ms: only Retry-After explains the wait
    assert len(exc.retry_log) == 1 and ("0.60s" in exc.retry_log[0]), exc.retry_log
