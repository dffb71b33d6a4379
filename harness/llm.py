"""The one door to a backbone: cache lookup, bounded concurrency, ledger records.

Methods never see a raw backbone; they call :meth:`LLMClient.generate` through
their problem context, which attributes every call to (problem, method, stage, role).

Three rules keep paid work from being lost or hidden:
- each completion is cached the moment its request returns (not when its siblings do), so a failed
  sibling or a kill discards nothing already answered;
- every request sent is one ledger record, written when it returns *or* fails for good (with its
  attempts and error), so ``calls.jsonl`` is the bill;
- an error is never cached and never becomes a completion: it is raised to the method (and the runner
  records the problem as ``status: error``).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from agentic_repro.harness.backbone import SAMPLING_KEYS, Backbone, BackboneError
from agentic_repro.harness.cache import ResponseCache, cache_key
from agentic_repro.harness.ledger import CallLog, CallRecord, flops_estimate
from agentic_repro.harness.pricing import Price, PriceError, Usage, price_table
from agentic_repro.harness.types import Completion, Message


def request_seed(run_seed: int, sample_index: int) -> int:
    """Distinct, reproducible seed per sample: same run seed + index → same draw."""
    return (run_seed * 1_000_003 + sample_index * 7_919) % (2 ** 31 - 1)


class RunAborted(BackboneError):
    """Every backbone call of this invocation so far failed for good: stop instead of burning the retry
    budget on every remaining problem (``runner.fail_fast_after``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="aborted", attempts=0)


class BudgetStop(RunAborted):
    """The run's (or the search's) dollar cap, ``runner.budgets.max_usd``, is reached: the run stops cleanly at a
    call boundary (no request sent past it), keeping every finished problem; the unfinished ones resume later."""

    def __init__(self, message: str) -> None:
        BackboneError.__init__(self, message, kind="budget", attempts=0)


class DollarCap:
    """A hard limit on what the provider may bill one run or one search, shared by every client that spends for it.

    Before a paid request: its worst case is reserved (the prompt at ~3 characters a token, plus ``n`` x
    ``max_tokens`` of output, at the model's input/output rates); a request whose reservation does not fit under
    the cap is not sent. After it: the reservation is settled at the request's bill, and a bill that reaches the cap
    stops the run. ``spent`` starts at what earlier invocations of the run were billed (its calls.jsonl)."""

    def __init__(self, max_usd: float, *, scope: str = "run", spent: float = 0.0) -> None:
        if not max_usd > 0:
            raise ValueError(f"runner.budgets.max_usd must be a positive number of dollars (got {max_usd!r})")
        self.max_usd, self.scope = float(max_usd), scope
        self.spent = float(spent)
        self.reserved = 0.0
        self.stopped: str | None = None
        if self.spent >= self.max_usd:
            self._stop(f"${self.spent:.4f} was billed before this invocation")

    def _stop(self, why: str) -> None:
        self.stopped = self.stopped or (f"the {self.scope}'s dollar cap runner.budgets.max_usd=${self.max_usd:g} "
                                        f"is reached ({why})")

    def check(self) -> None:
        if self.stopped:
            raise BudgetStop(self.stopped)

    def reserve(self, usd: float) -> None:
        self.check()
        if self.spent + self.reserved + usd > self.max_usd:
            self._stop(f"${self.spent:.4f} billed, ${self.reserved:.4f} in flight, the next request may cost "
                       f"up to ${usd:.4f}")
            self.check()
        self.reserved += usd

    def settle(self, reserved: float, billed: float) -> None:
        self.reserved = max(0.0, self.reserved - reserved)
        self.spent += billed
        if self.spent >= self.max_usd:
            self._stop(f"${self.spent:.4f} billed")

    def summary(self) -> dict[str, Any]:
        return {"max_usd": self.max_usd, "spent_usd": round(self.spent, 6), "stopped": self.stopped}


def reservation_usd(price: Any, messages: list[Message], n: int, max_tokens: int | None) -> float:
    """A paid request's worst case: its prompt at ~3 characters a token (an over-estimate for English and code)
    plus ``n`` x ``max_tokens`` (4,096 when unset) of output, at the standard list rates."""
    if price.free:
        return 0.0
    prompt = sum(len(str(m.get("content") or "")) for m in messages) // 3 + 4 * len(messages)
    return price.cost(prompt, n * int(max_tokens or 4096))


def model_identity(backbone: Any) -> str:
    """A short stable string for the model behind ``backbone``: its name plus a hash of its cache identity."""
    ident = json.dumps(backbone.cache_identity(), sort_keys=True, default=str)
    return f"{backbone.model}#{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


class LLMClient:
    """One client per role (``role`` names it in the ledger); ``fail_fast_after`` (0 = never) is how many
    calls may fail for good, with none succeeding, before every further call raises :class:`RunAborted`."""

    def __init__(self, backbone: Backbone, cache: ResponseCache, *, run_id: str, method: str,
                 defaults: dict[str, Any], role: str = "default", fail_fast_after: int = 0,
                 n_mode: str = "request") -> None:
        self.backbone = backbone
        self.n_mode = n_mode  # harness/n_mode.py: n choices in one request, or n requests (the method's release)
        self.cache = cache
        self.run_id = run_id
        self.method = method
        self.role = role
        self.defaults = {k: v for k, v in defaults.items() if k in SAMPLING_KEYS}
        # adaptive rate limiting (harness.rate_limit): the account's controller bounds the requests in flight
        # (shared by every client on that account); fixed: max_concurrency per client, as before
        self.rate_controller = getattr(backbone, "rate_controller", None)
        bound = self.rate_controller.settings.max if self.rate_controller is not None else backbone.max_concurrency
        self._sem = asyncio.Semaphore(max(1, int(bound)))
        self._backbone_id = json.dumps(backbone.cache_identity(), sort_keys=True, default=str)
        self.model_identity = model_identity(backbone)
        self._adapters: dict[str, dict[str, Any]] = {}
        self.fail_fast_after = int(fail_fast_after or 0)
        self.cap: DollarCap | None = None  # runner.budgets.max_usd (set by the runner or a search; None: no cap)
        self.backbone_calls = 0  # real requests sent, for benches and tests
        self.ok_calls = 0        # requests that returned completions
        self.failed_calls = 0    # requests that failed for good
        self.first_error: str | None = None
        self._invocation = uuid.uuid4().hex[:8]
        self.rate = RateStats()

    def rate_summary(self) -> dict[str, Any]:
        """``metrics.json``'s ``rate_limit`` entry for this client (harness.rate_limit)."""
        return self.rate.summary(self.rate_controller)

    def progress(self) -> str | None:
        """The account's concurrency and requests/tokens per minute, for the progress line (adaptive only)."""
        return None if self.rate_controller is None else self.rate_controller.progress()

    # ---- adapters ---------------------------------------------------------------------------------------
    def adapter_identity(self, adapter: str | None) -> dict[str, Any] | None:
        """The adapter's identity (validated before any request); None for the base model."""
        if adapter is None:
            return None
        if adapter not in self._adapters:
            lookup = getattr(self.backbone, "adapter_identity", None)
            if lookup is None:
                raise BackboneError(f"backbone {self.backbone.name} serves no adapters; adapter={adapter!r} "
                                    "needs a backbone config with `adapters: {name: {path: ...}}`")
            self._adapters[adapter] = dict(lookup(adapter))
        return self._adapters[adapter]

    # ---- the call ---------------------------------------------------------------------------------------
    async def generate(self, messages: list[Message], *, stage: str, problem_id: str, seed: int,
                       sink: Callable[[CallRecord], None], n: int = 1, sample_offset: int = 0,
                       role: str | None = None, adapter: str | None = None, **sampling: Any) -> list[Completion]:
        unknown = set(sampling) - set(SAMPLING_KEYS)
        if unknown:
            raise TypeError(f"unknown sampling parameter(s) {sorted(unknown)}; allowed: {SAMPLING_KEYS}")
        params = {**self.defaults, **{k: v for k, v in sampling.items() if v is not None}}
        if isinstance(params.get("stop"), (list, tuple)):
            params["stop"] = list(params["stop"])
        ad = self.adapter_identity(adapter)
        key_adapter = None if ad is None else {"name": adapter, "sha256": ad.get("sha256"),
                                               **({"scale": ad["scale"]} if ad.get("scale", 1.0) != 1.0 else {})}
        call = _Call(self, sink, problem_id, stage, role or self.role, adapter, ad)
        indices = [sample_offset + i for i in range(n)]
        results: dict[int, Completion] = {}
        per_sample: dict[int, tuple[dict[str, Any], str]] = {}
        missing: list[int] = []
        for idx in indices:
            p = dict(params)
            p["seed"] = request_seed(seed if p.get("seed") is None else p["seed"], idx)
            # n separate requests bill and pace differently from one request's n choices: their replies are kept
            # apart in the cache, so a run never replays the other layout's token counts (n = 1 is the same request)
            key = cache_key(self._backbone_id, messages, {**p, "n_mode": "separate"} if self.n_mode == "separate"
                            and n > 1 else p, idx, key_adapter)
            per_sample[idx] = (p, key)
            hit = self.cache.get(key)
            if hit is not None:
                comp = Completion(**{**hit["completion"], "cached": True})
                results[idx] = comp
                call.record(comp, hit.get("latency_s", 0.0), True, 0, idx, p, key=key)
            else:
                missing.append(idx)
        if missing:
            if self.backbone.supports_n and len(missing) > 1 and self.n_mode == "request":
                groups = [missing]  # one request with n choices (the prompt is charged once)
            else:
                groups = [[i] for i in missing]
            # Siblings are awaited to the end even when one fails: each one's answer is cached and its
            # ledger record written as it arrives; only then is the first failure raised.
            outcomes = await asyncio.gather(*(self._fetch(call, messages, per_sample, g, results) for g in groups),
                                            return_exceptions=True)
            failures = [o for o in outcomes if isinstance(o, BaseException)]
            if failures:
                cancelled = [f for f in failures if isinstance(f, asyncio.CancelledError)]
                raise cancelled[0] if cancelled else failures[0]
        return [results[i] for i in indices]

    async def _fetch(self, call: _Call, messages: list[Message], per_sample: dict[int, tuple[dict[str, Any], str]],
                     group: list[int], results: dict[int, Completion]) -> None:
        params = per_sample[group[0]][0]
        kwargs = {} if call.adapter is None else {"adapter": call.adapter}
        async with self._sem:
            if self.fail_fast_after and self.ok_calls == 0 and self.failed_calls >= self.fail_fast_after:
                raise RunAborted(f"{self.failed_calls} backbone calls failed and none succeeded "
                                 f"(first: {self.first_error})")
            reserved = 0.0
            if self.cap is not None:  # the dollar cap: this request's worst case must fit, or it is not sent
                reserved = reservation_usd(self.backbone.price, messages, len(group), params.get("max_tokens"))
                self.cap.reserve(reserved)
            self.backbone_calls += 1
            rid = f"{self._invocation}-{self.backbone_calls}"
            if call.journal is not None:
                call.journal.sent(rid, per_sample[group[0]][1], call.problem_id)
            start = time.perf_counter()
            self.rate.started()
            try:
                res = await self.backbone.complete(messages, params, len(group), **kwargs)
                self.rate.add(res.retry_log, res.limiter_wait_s, sum(c.prompt_tokens + c.completion_tokens
                                                                      for c in res.completions), res.retries + 1)
                comps = list(res.completions)
                if len(comps) < len(group):
                    # A server that ignores n (llama.cpp) returns one choice: fetch the rest one by one.
                    raise BackboneError(f"backbone {self.backbone.name} returned {len(comps)} choices for "
                                        f"n={len(group)}; set supports_n: false in its config")
            except asyncio.CancelledError:
                call.failure(time.perf_counter() - start, group[0], params, "cancelled: the run stopped while "
                             "this request was in flight", "cancelled", 1, None, rid)
                if self.cap is not None:
                    self.cap.settle(reserved, 0.0)
                raise
            except Exception as exc:  # recorded, then raised to the method
                self.failed_calls += 1
                msg = f"{type(exc).__name__}: {exc}"
                if self.first_error is None:
                    self.first_error = msg
                attempts = getattr(exc, "attempts", 1)
                self.rate.add(list(getattr(exc, "retry_log", None) or []), getattr(exc, "limiter_wait_s", 0.0), 0,
                              1 if attempts is None else int(attempts), getattr(exc, "kind", None))
                billed = call.failure(time.perf_counter() - start, group[0], params, msg,
                                      getattr(exc, "kind", None) or type(exc).__name__,
                                      1 if attempts is None else int(attempts),
                                      list(getattr(exc, "retry_log", None) or []), rid,
                                      answered=getattr(exc, "answered", None))
                if self.cap is not None:
                    self.cap.settle(reserved, billed)
                raise
        self.ok_calls += 1
        latency = res.latency_s / len(group)
        billed = 0.0
        for j, (idx, comp) in enumerate(zip(group, comps)):  # the bill first: a failing cache loses no paid call
            first = j == 0
            billed += call.record(comp, latency, False, res.retries + 1 if first else 1, idx, per_sample[idx][0],
                                  res.retry_log if first else None, rid, key=per_sample[idx][1],
                                  answered=getattr(res, "answered", None) if first else None)
        for idx, comp in zip(group, comps):
            # the prompt is stored with its reply (not in the key): the run viewer shows both from the ledger's key
            self.cache.put(per_sample[idx][1], {"completion": dict(comp.__dict__), "latency_s": latency,  # asdict: ~20 us more
                                                "messages": [{"role": m["role"], "content": m["content"]}
                                                             for m in messages]})
            results[idx] = comp
        if self.cap is not None:  # after the bill: a run whose bill reached the cap stops (this answer is kept)
            self.cap.settle(reserved, billed)
            self.cap.check()


class RateStats:
    """What this client's requests met at the provider, for metrics.json (``rate_limit``): 429s received, time
    waiting on the rate controller, and the achieved rate over the client's busy span."""

    def __init__(self) -> None:
        self.http_429 = 0
        self.attempts = 0
        self.limiter_wait_s = 0.0
        self.tokens = 0
        self.first: float | None = None
        self.last: float | None = None

    def started(self) -> None:
        if self.first is None:
            self.first = time.time()

    def add(self, retry_log: list[str], waited: float, tokens: int, attempts: int, final_kind: str | None = None) -> None:
        self.http_429 += sum(1 for line in retry_log if line.startswith("http_429")) + (final_kind == "http_429")
        self.attempts += attempts
        self.limiter_wait_s += float(waited or 0.0)
        self.tokens += tokens
        self.last = time.time()

    def summary(self, controller: Any = None) -> dict[str, Any]:
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        out: dict[str, Any] = {
            "mode": "adaptive" if controller is not None else "fixed", "requests": self.attempts,
            "http_429": self.http_429, "http_429_share": round(self.http_429 / self.attempts, 4) if self.attempts else 0.0,
            "limiter_wait_s": round(self.limiter_wait_s, 3), "busy_s": round(span, 3),
            "achieved": {"requests_per_min": round(60 * self.attempts / span, 1) if span > 0 else None,
                         "tokens_per_min": round(60 * self.tokens / span, 1) if span > 0 else None}}
        if controller is not None:
            out["controller"] = controller.stats()
        return out


class _Call:
    """Writes the ledger records of one ``generate`` call (shared fields computed once)."""

    __slots__ = ("adapter", "adapter_sha256", "journal", "llm", "problem_id", "role", "sink", "stage")

    def __init__(self, llm: LLMClient, sink: Callable[[CallRecord], None], problem_id: str, stage: str, role: str,
                 adapter: str | None, adapter_identity: dict[str, Any] | None) -> None:
        self.llm, self.sink, self.problem_id, self.stage, self.role = llm, sink, problem_id, stage, role
        self.adapter = adapter
        self.adapter_sha256 = None if adapter_identity is None else adapter_identity.get("sha256")
        owner = getattr(sink, "__self__", None)  # a CallLog (the runner's) also journals requests as sent
        self.journal = owner if isinstance(owner, CallLog) else None

    def record(self, comp: Completion, latency: float, hit: bool, attempts: int, idx: int, params: dict[str, Any],
               retry_log: list[str] | None = None, request: str | None = None, *, key: str | None = None,
               answered: list[Any] | None = None) -> float:
        """Write the line; returns its bill (USD)."""
        bb = self.llm.backbone
        tokens = comp.prompt_tokens + comp.completion_tokens
        usage = Usage.from_dict(comp.usage) or Usage(comp.prompt_tokens, comp.completion_tokens)
        bill = price_line(bb.price, usage, comp.served_model, comp.service_tier)
        retried = sum(price_line(bb.price, a.usage, a.served_model, a.service_tier).usd for a in answered or ())
        dropped = sorted(k for k in getattr(bb, "not_sent", ()) if params.get(k) is not None) or None
        self.sink(CallRecord(
            run_id=self.llm.run_id, problem_id=self.problem_id, method=self.llm.method, stage=self.stage,
            model=bb.model, prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
            latency_s=round(latency, 4), cache_hit=hit, retries=max(0, attempts - 1),
            cost_usd=bill.usd + retried, flops=flops_estimate(bb.params, tokens), sample_index=idx,
            seed=params.get("seed"), temperature=params.get("temperature"), time=time.time(),
            retry_log=retry_log or None, finish_reason=comp.finish_reason, role=self.role,
            model_identity=self.llm.model_identity, adapter=self.adapter, adapter_sha256=self.adapter_sha256,
            attempts=attempts, request=request, key=key, cost_list_usd=bb.price.list_cost(usage),
            cached_tokens=usage.cached_tokens, cache_write_tokens=usage.cache_write_tokens + usage.cache_write_1h_tokens,
            reasoning_tokens=usage.reasoning_tokens, served_model=comp.served_model,
            system_fingerprint=comp.system_fingerprint, service_tier=bill.tier, priced_as=bill.priced_as,
            price_note=bill.note, retried_billed_usd=retried, dropped_params=dropped,
            usage_details={k: v for k, v in usage.to_dict().items() if k in OTHER_USAGE} or None))
        return bill.usd + retried

    def failure(self, latency: float, idx: int, params: dict[str, Any], error: str, kind: str, attempts: int,
                retry_log: list[str] | None, request: str | None, answered: list[Any] | None = None) -> float:
        bb = self.llm.backbone
        # a request that failed for good is on the bill for every reply the provider answered before it gave up
        retried = sum(price_line(bb.price, a.usage, a.served_model, a.service_tier).usd for a in answered or ())
        self.sink(CallRecord(
            run_id=self.llm.run_id, problem_id=self.problem_id, method=self.llm.method, stage=self.stage,
            model=bb.model, prompt_tokens=0, completion_tokens=0, latency_s=round(latency, 4), cache_hit=False,
            retries=max(0, attempts - 1), cost_usd=retried, flops=None, sample_index=idx, seed=params.get("seed"),
            temperature=params.get("temperature"), time=time.time(), error=error[:500], retry_log=retry_log or None,
            role=self.role, model_identity=self.llm.model_identity, adapter=self.adapter,
            adapter_sha256=self.adapter_sha256, attempts=attempts, error_kind=kind, request=request,
            cost_list_usd=0.0, retried_billed_usd=retried,
            price_note="no usage: the provider's charge for this reply is unknown" if kind == "no_usage" else None))
        return retried


#: usage classes a ledger line keeps beside its named fields (harness.pricing.Usage)
OTHER_USAGE = ("audio_prompt_tokens", "audio_completion_tokens", "accepted_prediction_tokens",
               "rejected_prediction_tokens", "cache_write_1h_tokens")


class LineBill:
    """One line's price: ``usd`` at ``tier`` from the table entry ``priced_as`` (``note`` when not the served one)."""

    __slots__ = ("note", "priced_as", "tier", "usd")

    def __init__(self, usd: float, tier: str, priced_as: str | None, note: str | None) -> None:
        self.usd, self.tier, self.priced_as, self.note = usd, tier, priced_as, note


def price_line(requested: Price, usage: Usage, served_model: str | None, service_tier: str | None) -> LineBill:
    """Price ``usage`` at the served snapshot's dated price and the tier the reply says it was served at."""
    price, note = price_table().served(served_model, requested)
    tier = service_tier if service_tier in ("batch", "flex") else "standard"
    try:
        usd = price.bill(usage, tier)
    except PriceError as exc:  # an unpriced tier or token class: priced at standard text rates, and said so
        usd = price.rates("standard").bill(Usage(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens))
        note = f"{note + '; ' if note else ''}{exc}"
    return LineBill(usd, tier, price.model, note)
