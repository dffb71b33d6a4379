"""The rate controller (harness/rate_limit.py) on a simulated clock: AIMD steps, header parsing, token charging,
Retry-After, the provider's remaining/reset, the per-host shared limiter, and the config block's validation."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import sqlite3
import time

import pytest

from agentic_repro.harness.rate_limit import (LocalStore, RateController, RateLimitSettings, SharedStore, TokenEstimator,
                                account_key, controller_for, parse_duration, parse_headers, parse_rate_limit,
                                retry_after_seconds)
from agentic_repro.harness.validate import ConfigError


class SimClock:
    """Virtual time: ``sleep`` parks the task until :meth:`run` advances the clock to its wake-up."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self._heap: list = []
        self._seq = itertools.count()

    def __call__(self) -> float:
        return self.t

    async def sleep(self, dt: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (self.t + max(0.0, dt), next(self._seq), fut))
        await fut

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    async def advance(self) -> bool:
        """Run until every task waits; then wake the earliest sleeper. False when nobody sleeps."""
        await self.settle()
        if not self._heap:
            return False
        self.t, _, fut = heapq.heappop(self._heap)
        fut.set_result(None)
        await self.settle()
        return True


def ctl(clock: SimClock, **kw) -> RateController:
    s = RateLimitSettings(**{"mode": "adaptive", "shared": False, **kw})
    return RateController(s, model="m", clock=clock, sleep=clock.sleep,
                          estimator=TokenEstimator("m", use_tiktoken=False))


MSG = [{"role": "user", "content": "x" * 400}]  # chars/4: 100 + 4 per message + 3 priming = 107


# ---- headers ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,seconds", [("6m0s", 360.0), ("1s", 1.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5),
                                          ("0.5", 0.5), ("59.999s", 59.999), ("250us", 0.00025), ("7", 7.0)])
def test_reset_durations_in_openai_format(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "6x", None])
def test_unreadable_reset_is_none(text):
    assert parse_duration(text) is None


def test_rfc3339_reset_is_seconds_from_now():
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    assert 28 <= parse_duration(when) <= 31


def test_openai_and_anthropic_headers():
    oa = parse_headers({"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
                        "x-ratelimit-reset-requests": "120ms", "x-ratelimit-limit-tokens": "200000",
                        "x-ratelimit-remaining-tokens": "150000", "x-ratelimit-reset-tokens": "6m0s"})
    assert (oa["requests"].limit, oa["requests"].remaining, oa["requests"].reset_s) == (500, 499, pytest.approx(0.12))
    assert (oa["tokens"].limit, oa["tokens"].remaining, oa["tokens"].reset_s) == (200000, 150000, 360)
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 10))
    an = parse_headers({"anthropic-ratelimit-tokens-limit": "80000", "anthropic-ratelimit-tokens-remaining": "100",
                        "anthropic-ratelimit-tokens-reset": reset})
    assert set(an) == {"tokens"} and an["tokens"].remaining == 100 and 8 <= an["tokens"].reset_s <= 11
    assert parse_headers({"content-type": "application/json"}) == {} and parse_headers(None) == {}


def test_retry_after_ms_wins_over_seconds_and_dates_are_read():
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 20))
    assert 18 <= retry_after_seconds({"retry-after": date}) <= 21
    assert retry_after_seconds({}) is None


# ---- token charge --------------------------------------------------------------------------------------------
def test_prompt_charged_before_sending_then_calibrated_by_usage():
    est = TokenEstimator("m", use_tiktoken=False)
    c = ctl(SimClock(), tpm=10_000, window_s=1.0, target=1.0)
    c.estimator = est
    costs, base = c.charge(MSG, n=5, max_tokens=64)
    assert base == 107 and costs == {"requests": 1.0, "tokens": 107 + 5 * 64}
    est.observe(base, prompt_tokens=53, completion_tokens=100, n=5)  # the provider counts fewer tokens
    costs2, _ = c.charge(MSG, n=5, max_tokens=64)
    assert costs2["tokens"] == pytest.approx(53 + 320)
    # without max_tokens the completion charge is the replies' average per choice
    before = est.completion_per_choice
    est.observe(base, 53, 5 * 20, 5)
    assert est.completion_per_choice == pytest.approx(0.9 * before + 0.1 * 20)


def test_tiktoken_counts_when_its_encoding_loads_else_the_estimate():
    class WordEncoding:  # stands in for a loaded tiktoken encoding (offline machines cannot fetch the real file)
        def encode(self, text, disallowed_special=()):
            return text.split()

    est = TokenEstimator("gpt-4o-mini", use_tiktoken=False)
    assert est.source == "chars/4" and est.base_count([{"role": "user", "content": "a b c"}]) == 3 + 4 + 5 / 4
    est._encoding = WordEncoding()
    assert est.source == "tiktoken" and est.base_count([{"role": "user", "content": "a b c"}]) == 3 + 4 + 3
    real = TokenEstimator("gpt-4o-mini")  # tries tiktoken in the background; never blocks, never raises
    assert real.prompt_tokens(MSG)[0] > 0


def test_reply_usage_corrects_the_charge_in_the_bucket():
    async def main():
        clock = SimClock()
        c = ctl(clock, tpm=1000, window_s=1.0, target=1.0)  # 1000 tokens/s
        lease = await c.acquire(MSG, n=1, max_tokens=10)        # charged 117
        tat = c.store.tat["tokens"]
        lease.done({}, {"prompt_tokens": 57, "completion_tokens": 3})  # true charge 57 + 10 = 67
        assert c.store.tat["tokens"] == pytest.approx(tat - 50 / 1000)
    asyncio.run(main())


# ---- AIMD ------------------------------------------------------------------------------------------------------
def test_aimd_slow_start_then_halving_once_per_round_trip_then_additive():
    async def main():
        clock = SimClock()
        c = ctl(clock, start=2, min=1, max=16)
        tasks = [asyncio.ensure_future(c.acquire(MSG)) for _ in range(6)]
        await clock.settle()
        assert c.in_flight == 2 and sum(t.done() for t in tasks) == 2
        first = [t.result() for t in tasks if t.done()]
        for lease in first:  # contended (others queued), not paced: +1 each in slow start
            lease.done({}, {})
        await clock.settle()
        assert c.limit == 4 and c.in_flight == 4
        leases = [t.result() for t in tasks if t.done() and t.result().open]
        clock.t += 1
        leases[0].failed("http_429")                         # overload: halve
        assert c.limit == 2 and c.ssthresh == 2
        leases[1].failed("http_5xx")                         # sent before the cut: no second cut
        assert c.limit == 2
        for lease in leases[2:]:
            lease.done({}, {})
        await clock.settle()
        # above ssthresh: +1/L per contended success
        assert 2 < c.limit < 3.5
        rest = [t.result() for t in tasks if t.result().open]
        for lease in rest:
            lease.done({}, {})
        assert c.in_flight == 0
        later = await c.acquire(MSG)  # sent after the cut: a new overload cuts again, never below min
        later.failed("timeout")
        assert c.limit >= 1 and c.limit < 2.1
    asyncio.run(main())


def test_uncontended_or_paced_success_does_not_grow_the_limit():
    async def main():
        clock = SimClock()
        c = ctl(clock, start=4, max=16)
        for _ in range(5):
            (await c.acquire(MSG)).done({}, {})
        assert c.limit == 4  # nothing queued: more concurrency would not have helped
        lease = await c.acquire(MSG)
        lease.failed("bad_json")  # not an overload signal
        assert c.limit == 4
    asyncio.run(main())


def test_a_long_shared_pacing_queue_halves_every_process_on_the_key():
    """Two processes on one account (one store): a request that queued longer than 2 x the target (5% of the window,
    at least the latency) halves its process's limit, once per queue drain."""
    async def main():
        clock = SimClock(0.0)
        store = LocalStore()
        a, b = (RateController(RateLimitSettings(mode="adaptive", shared=False, start=16, tpm=1170, window_s=10.0,
                                                 target=1.0), model="m", store=store, clock=clock, sleep=clock.sleep,
                               estimator=TokenEstimator("m", use_tiktoken=False)) for _ in range(2))
        # 117 tokens per request at 117 tokens/s: one second each in the shared schedule

        async def one(c):
            lease = await c.acquire(MSG, max_tokens=10)
            lease.done({}, {})  # an instant reply: the queue target stays 5% of the window
            return lease.queue_s
        tasks = [asyncio.ensure_future(one(c)) for c in (a, b) for _ in range(3)]
        while not all(t.done() for t in tasks) and await clock.advance():
            pass
        queues = sorted(t.result() for t in tasks)
        assert queues == pytest.approx([0.0, 0.8, 1.8, 2.8, 3.8, 4.8])  # one FIFO schedule for both (0.2 s burst)
        assert a.limit == 8 and b.limit == 8  # each halved once (queues > 1 s), not once per request
    asyncio.run(main())


# ---- pacing ----------------------------------------------------------------------------------------------------
def test_token_pacing_spaces_requests_at_the_configured_rate():
    async def main():
        clock = SimClock(100.0)  # the account idle since t = 0
        c = ctl(clock, start=8, tpm=6000, window_s=60.0, target=1.0)   # 100 tokens/s, burst 1.2 s
        sent = []

        async def one():
            lease = await c.acquire([{"role": "user", "content": "y" * 1572}])  # 393 + 7 = 400 tok, +256 compl
            sent.append(clock())
            lease.done({}, {})
        tasks = [asyncio.ensure_future(one()) for _ in range(6)]
        while await clock.advance():
            pass
        assert all(t.done() for t in tasks)
        gaps = [b - a for a, b in zip(sent, sent[1:])]
        # 656 tokens at 100 tokens/s; the first request after idling may go 1.2 s early (2% of the window), once
        assert gaps == pytest.approx([6.56 - 1.2] + [6.56] * 4, rel=1e-6)
        assert c.stats()["limiter_wait_s"] > 20
    asyncio.run(main())


def test_retry_after_holds_every_sender_of_the_account():
    async def main():
        clock = SimClock(0.0)
        c = ctl(clock, start=4)
        a = await c.acquire(MSG)
        held = a.failed("http_429", {"retry-after-ms": "1500"}, fallback_wait_s=9.0)
        assert held == 1.5
        t = asyncio.ensure_future(c.acquire(MSG))
        while not t.done() and await clock.advance():
            pass
        assert t.done() and clock() == pytest.approx(1.5)
        # without Retry-After the caller's backoff becomes the hold
        assert t.result().failed("http_429", {}, fallback_wait_s=0.7) == 0.7
    asyncio.run(main())


def test_a_429_arriving_while_a_request_is_paced_holds_that_request_too():
    async def main():
        clock = SimClock(0.0)
        c = ctl(clock, start=4, tpm=117, window_s=1.0, target=1.0)  # one 117-token request per second
        a = await c.acquire(MSG, max_tokens=10)
        b = asyncio.ensure_future(c.acquire(MSG, max_tokens=10))    # reserved for t = 0.98 (after a's burst)
        await clock.settle()
        assert not b.done()
        a.failed("http_429", {"retry-after-ms": "1500"})
        while not b.done() and await clock.advance():
            pass
        assert clock() == pytest.approx(1.5)
    asyncio.run(main())


def test_the_providers_remaining_stops_sending_until_its_reset():
    async def main():
        clock = SimClock(0.0)
        c = ctl(clock, start=4)
        a = await c.acquire(MSG, max_tokens=10)
        a.done({"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "200",
                "x-ratelimit-reset-tokens": "4s"}, {"prompt_tokens": 107, "completion_tokens": 3})
        ok = await c.acquire(MSG, max_tokens=10)        # 117 <= 200 left
        assert clock() == 0.0
        t = asyncio.ensure_future(c.acquire(MSG, max_tokens=10))  # 117 + 117 > 200: wait for the reset
        while not t.done() and await clock.advance():
            pass
        assert clock() == pytest.approx(4.0)
        assert c.rates(c.header_limits)["tokens"] == pytest.approx(100000 * 0.97 / 60)  # the limit is learned
        ok.done({}, {})
        t.result().done({}, {})
    asyncio.run(main())


# ---- sharing ---------------------------------------------------------------------------------------------------
def test_shared_store_paces_two_processes_together_and_never_stores_the_key(tmp_path):
    path = tmp_path / "rl.sqlite"
    key = account_key("gpt-4o-mini", None, "sk-secret-123")
    a, b = SharedStore(path, key), SharedStore(path, key)  # two connections, as two processes hold
    rates = lambda learned: {"tokens": 100.0}
    starts = []
    for i in range(10):
        store = a if i % 2 else b
        starts.append(store.reserve({"requests": 1, "tokens": 100}, rates, 0.0, 50.0)[0])  # all asked at t = 50
    assert starts == pytest.approx([50.0 + i for i in range(10)])  # one shared schedule, 1 s per 100 tokens
    a.learn("tokens", 5000)
    assert sqlite3.connect(path).execute("SELECT limit_tokens FROM account").fetchone()[0] == 5000
    a.block(80.0)
    assert b.reserve({"requests": 1}, lambda learned: {}, 0.0, 60.0)[0] == 80.0
    a.close(), b.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"sk-secret-123" not in raw and key != "sk-secret-123"


def test_processes_on_one_key_use_the_mean_of_their_limits(tmp_path):
    """Throughput from the shared schedule follows the requests each process holds in it: equal concurrency for
    the processes active on the account (whoever started first), the mean of their AIMD limits."""
    path = tmp_path / "rl.sqlite"
    clock = SimClock(0.0)
    s = RateLimitSettings(mode="adaptive", start=8, max=64)
    first, second = (RateController(s, model="m", store=SharedStore(path, "acct"), clock=clock, sleep=clock.sleep,
                                    estimator=TokenEstimator("m", use_tiktoken=False)) for _ in range(2))
    first.limit = 40.0
    first._beat()
    assert (first.processes, first.cap()) == (1, 40)  # alone: its own limit
    second._beat()
    assert (second.processes, second.cap()) == (2, 24)  # (40 + 8) / 2
    clock.t = 10.0  # the first stopped asking: after 3 s it no longer counts
    second._beat()
    assert (second.processes, second.cap()) == (1, 8)


def test_host_share_scales_the_paced_rate():
    c = ctl(SimClock(), tpm=60_000, window_s=60.0, target=1.0, host_share=0.25)
    assert c.rates({})["tokens"] == pytest.approx(250.0)
    c.header_limits["tokens"] = 30_000  # the provider's limit is lower: it wins
    assert c.rates({})["tokens"] == pytest.approx(125.0)


def test_one_controller_per_account_in_the_process(tmp_path):
    s = RateLimitSettings(mode="adaptive", share_path=str(tmp_path / "rl.sqlite"))
    one = controller_for(s, model="m", base_url="http://x/v1", api_key="k1")
    assert controller_for(s, model="m", base_url="http://x/v1", api_key="k1") is one
    assert controller_for(s, model="m", base_url="http://x/v1", api_key="k2") is not one
    assert controller_for(RateLimitSettings(mode="fixed"), model="m", base_url=None, api_key="k1") is None
    # a role with another block on the same account still shares the one controller (the last block wins)
    with pytest.warns(UserWarning, match="two rate_limit blocks"):
        again = controller_for(RateLimitSettings(mode="adaptive", max=4, share_path=s.share_path), model="m",
                               base_url="http://x/v1", api_key="k1")
    assert again is one and one.settings.max == 4 and one.limit <= 4
    assert isinstance(ctl(SimClock()).store, LocalStore)


# ---- config ----------------------------------------------------------------------------------------------------
def test_defaults_adaptive_for_api_backbones_fixed_for_local():
    assert parse_rate_limit(None, kind="openai").mode == "adaptive"
    for kind in ("embedded", "peft", "vllm-inprocess"):
        assert parse_rate_limit({}, kind=kind).mode == "fixed"


@pytest.mark.parametrize("block,key", [
    ({"bogus": 1}, "backbone.rate_limit.bogus"), ({"mode": "fast"}, "backbone.rate_limit.mode"),
    ({"start": 0}, "backbone.rate_limit.start"), ({"max": 2.5}, "backbone.rate_limit.max"),
    ({"tpm": -5}, "backbone.rate_limit.tpm"), ({"rpm": True}, "backbone.rate_limit.rpm"),
    ({"target": 1.5}, "backbone.rate_limit.target"), ({"host_share": 0}, "backbone.rate_limit.host_share"),
    ({"window_s": 0}, "backbone.rate_limit.window_s"), ({"shared": "yes"}, "backbone.rate_limit.shared"),
    ({"start": 300, "max": 256}, "start=300"), ({"mode": "fixed", "tpm": 1000}, "mode=fixed"),
    ({"mode": "adaptive"}, "kind peft")])
def test_bad_rate_limit_blocks_are_refused_naming_the_key(block, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_rate_limit(block, kind="peft" if key == "kind peft" else "openai")


def test_run_validation_checks_the_block_of_every_role():
    from agentic_repro.harness.validate import validate_run_config

    cfg = {"seed": 1, "method": {"name": "cot"}, "benchmark": {"name": "gsm8k"},
           "backbone": {"name": "gpt-4o-mini", "kind": "openai", "rate_limit": {"mode": "adaptive"}},
           "roles": {"judge": {"name": "j", "kind": "openai", "rate_limit": {"tmp": 5}}}}
    with pytest.raises(ConfigError, match=r"roles\.judge\.rate_limit\.tmp"):
        validate_run_config(cfg)


def test_rate_limit_never_changes_a_runs_identity():
    from agentic_repro.harness.identity import output_config

    base = {"backbone": {"name": "gpt-4o-mini", "model": "gpt-4o-mini-2024-07-18"}}
    other = {"backbone": {**base["backbone"], "rate_limit": {"mode": "adaptive", "max": 64, "tpm": 10}}}
    assert output_config(base) == output_config(other)


def test_shipped_backbone_configs_have_valid_blocks():
    from pathlib import Path

    import yaml

    folder = Path(__file__).resolve().parents[1] / "configs" / "backbone"
    modes = {}
    for p in folder.glob("*.yaml"):
        cfg = yaml.safe_load(p.read_text())
        if "rate_limit" in cfg or cfg.get("kind"):
            modes[p.stem] = parse_rate_limit(cfg.get("rate_limit"), kind=cfg.get("kind")).mode
    assert modes["gpt-4o-mini"] == "adaptive" and modes["vllm"] == "fixed" and modes["local"] == "fixed"


def test_an_unwritable_share_path_paces_this_process_alone(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    s = RateLimitSettings(mode="adaptive", share_path=str(blocker / "rl.sqlite"))
    with pytest.warns(UserWarning, match="paces alone"):
        c = controller_for(s, model="m", base_url="http://unwritable/v1", api_key="k")
    assert isinstance(c.store, LocalStore)


# ---- what the provider deducts (ChargeLearner) -------------------------------------------------------------------
class Counters:
    """A provider's fixed-window counters as its headers report them: ``admit`` deducts ``tokens`` and one request."""

    def __init__(self, clock, tpm=1_000_000, rpm=10_000, window_s=60.0):
        self.clock, self.tpm, self.rpm, self.window_s = clock, tpm, rpm, window_s
        self.tokens = self.requests = 0

    def admit(self, tokens):
        self.tokens += tokens
        self.requests += 1

    def headers(self):
        reset = self.window_s - (self.clock() % self.window_s)
        return {"x-ratelimit-limit-tokens": str(self.tpm), "x-ratelimit-remaining-tokens": str(self.tpm - self.tokens),
                "x-ratelimit-limit-requests": str(self.rpm),
                "x-ratelimit-remaining-requests": str(self.rpm - self.requests),
                "x-ratelimit-reset-tokens": f"{reset:.3f}s", "x-ratelimit-reset-requests": f"{reset:.3f}s"}


def serve(c, counters, rounds, *, charge_actual, prompt=100, completion=150, n=5, max_tokens=4096):
    """``rounds`` requests one after another (4 in flight), answered by a provider deducting the reply's usage or
    its reservation; the prompt sizes vary (the learner compares per-request means, not single requests)."""
    async def take():
        t = asyncio.ensure_future(c.acquire(MSG, n=n, max_tokens=max_tokens))
        while not t.done():
            assert await counters.clock.advance() or t.done()
        return t.result()

    async def main():
        for r in range(rounds):
            leases = [await take() for _ in range(4)]
            for j, lease in enumerate(leases):
                p = prompt + 37 * ((r + j) % 5)
                counters.admit(p + completion if charge_actual else p + n * max_tokens)
            for j, lease in enumerate(leases):
                counters.clock.t += 0.01
                lease.done(counters.headers(), {"prompt_tokens": prompt + 37 * ((r + j) % 5),
                                                "completion_tokens": completion})
    asyncio.run(main())


@pytest.mark.parametrize("charge_actual,k", [(True, 0.0), (False, 1.0)])
def test_the_providers_counters_tell_whether_it_deducts_usage_or_the_reservation(charge_actual, k):
    clock = SimClock(0.0)
    c = ctl(clock, start=4)
    serve(c, Counters(clock), 10, charge_actual=charge_actual)
    assert c.learner.k == pytest.approx(k, abs=0.02)
    costs, _ = c.charge(MSG, n=5, max_tokens=4096)
    # paced at what the provider will deduct: 107 prompt + 150 of the replies' completion, or the full reservation
    assert costs["tokens"] == pytest.approx(107 * c.estimator.factor + (c.estimator.completion_per_choice * 5
                                            if charge_actual else 5 * 4096), rel=0.02)
    assert c.stats()["charge"]["kept_share_of_reservation"] == pytest.approx(k, abs=0.02)


def test_without_counters_or_across_a_reset_nothing_is_learned():
    clock = SimClock(0.0)
    c = ctl(clock, start=4)

    class NoHeaders(Counters):
        def headers(self):
            return {}
    serve(c, NoHeaders(clock), 10, charge_actual=True)
    assert c.learner.k == 1.0  # the cautious prior: the reservation

    clock2 = SimClock(0.0)
    c2 = ctl(clock2, start=4)
    counters = Counters(clock2, window_s=0.01)  # every reply in a new window: no pair within one window

    serve(c2, counters, 10, charge_actual=True)
    assert c2.learner.provider_requests == 0 and c2.learner.k == 1.0


def test_a_handful_of_requests_is_not_evidence_enough():
    clock = SimClock(0.0)
    c = ctl(clock, start=4)
    counters = Counters(clock)
    serve(c, counters, 2, charge_actual=True)  # 4 requests admitted between two replies: below MIN_REQUESTS
    assert 0 < c.learner.provider_requests < c.learner.MIN_REQUESTS and c.learner.k == 1.0
    serve(c, counters, 2, charge_actual=True)
    assert c.learner.k == pytest.approx(0.0, abs=0.02)


def test_fixed_rules_are_not_learned():
    clock = SimClock(0.0)
    c = ctl(clock, start=4, charge="reserved")
    serve(c, Counters(clock), 10, charge_actual=True)
    assert c.learner.k == 1.0
    assert ctl(SimClock(), charge="actual").learner.k == 0.0


def test_admission_is_checked_by_the_providers_rule_not_by_the_smaller_charge():
    """A provider that deducts usage still refuses a request whose max(prompt, n x max_tokens) does not fit in what
    is left: with 5,000 tokens left, a CoT-SC(5) request at max_tokens 4096 (admission 20,480, charge ~ 900) waits
    for the reset."""
    async def main():
        clock = SimClock(0.0)
        c = ctl(clock, start=4, charge="actual")
        first = await c.acquire(MSG, n=5, max_tokens=4096)
        assert first.costs["tokens"] < 2000 and first.admission == 5 * 4096
        first.done({"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "5000",
                    "x-ratelimit-reset-tokens": "3s"}, {"prompt_tokens": 107, "completion_tokens": 500})
        t = asyncio.ensure_future(c.acquire(MSG, n=5, max_tokens=4096))
        while not t.done() and await clock.advance():
            pass
        assert clock() == pytest.approx(3.0)
        small = await c.acquire(MSG, n=1, max_tokens=10)  # after the reset nothing is known: it goes at once
        assert small.admission == pytest.approx(small.costs["tokens"])
    asyncio.run(main())


def test_requests_queued_at_the_reservation_are_requeued_once_the_charge_is_learned():
    """Charged the full reservation before anything was learned, a request waiting in the pacing schedule moves up
    as soon as the provider is seen to deduct usage, rather than waiting out the reservation's time."""
    async def main():
        clock = SimClock(0.0)
        c = ctl(clock, start=8, tpm=60_000, window_s=60.0, target=1.0)  # 1,000 tokens/s
        first = await c.acquire(MSG, n=5, max_tokens=4096)              # ~20.6k tokens: ~20 s of schedule
        waiting = asyncio.ensure_future(c.acquire(MSG, n=5, max_tokens=4096))
        await clock.settle()
        c.learner.mode = "actual"                                       # what ChargeLearner would conclude
        first.done({}, {"prompt_tokens": 107, "completion_tokens": 500})
        while not waiting.done() and await clock.advance():
            pass
        assert clock() < 3.0, clock()  # not ~20 s: requeued at ~1.4k tokens (107 + 5 x the replies' average)
        assert waiting.result().costs["tokens"] < 2000
    asyncio.run(main())
