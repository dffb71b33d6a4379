"""One rate controller per API account: at the provider's limit, not under it or over it.

An API backbone's wall time is set by the provider's rate limits (requests and tokens per minute), and every
role, concurrent run and sweep process on one key draws from the same account. A fixed ``max_concurrency``
is either too low (the account idles) or too high (a 429 storm, retries, runs dying). So, per backbone model +
base URL + API key (the key itself is never stored, only a hash), this process keeps one
:class:`RateController`, shared by every backbone object built for that account:

- **AIMD concurrency** between ``min`` and ``max`` from ``start``: slow start (+1 per success) until the first
  congestion signal, then +1/L per success; L is halved on an overload (429, 5xx, 408, timeout, connection
  error; at most once per round trip: a request sent before the last cut does not cut again) and when a request
  waited in the account's pacing queue longer than twice its target (5% of the window, at least the reply
  latency; once per queue drain). It grows only when
  requests queue for a slot while the pacing queue is short: a paced account needs no more requests in flight.
  Every process on a key sees the same pacing queue, so they halve together and grow alike: a fair share each.
- **Pacing** of requests and tokens per window (``rpm``/``tpm`` per ``window_s``, the lower of the configured
  value and the provider's ``x-ratelimit-limit-*`` header), at ``target`` of the limit, by GCRA (a token bucket
  in virtual time, so waiting requests are served in order). Every request is charged before it is sent: its
  prompt's tokens (tiktoken when it loads, else chars/4, both calibrated by the replies' ``usage``) plus what the
  provider will deduct for the completion: ``n x max_tokens`` where it keeps the reservation, the replies' average
  where it deducts the actual usage, learned from its own counters (:class:`ChargeLearner`: the
  ``x-ratelimit-remaining-*`` deltas between replies against the replies' ``usage``; ``charge: reserved|actual``
  fixes it). The reply's usage trues the charge up; the provider's admission rule (OpenAI: the larger of
  ``max_tokens`` and the prompt, ``admission: max``) decides only whether what it said was left admits a request.
- **The provider's own view**: ``x-ratelimit-remaining/reset-{requests,tokens}`` (OpenAI, durations such as
  ``6m0s``/``1s``/``20ms``; Anthropic's ``anthropic-ratelimit-*`` with RFC 3339 resets) stop sending once this
  process would spend more than the account has left until the reset; ``Retry-After``/``retry-after-ms`` on
  a 429 hold every sender of the account until then.
- **Across processes** of one sweep (joblib workers, several ``make`` targets on one key): the pacing state
  (virtual times, learned limits, the Retry-After hold) lives in a small SQLite file per host
  (``~/.cache/agentic-repro/rate-limits/<host>.sqlite``), one row per account hash, updated in short
  ``BEGIN IMMEDIATE`` transactions, so N processes together stay under the limit. Each process publishes its
  AIMD limit there twice a second and uses the mean over the processes active on the account: what a process
  gets from the shared schedule follows the requests it holds in it, so equal concurrency is an equal share. Hosts do not share a file (SQLite locking over NFS is unreliable): on a cluster (submitit, Ray) give
  each host its part of the account with ``host_share`` (e.g. 0.25 on 4 nodes).

``mode: fixed`` is the behaviour before this module: ``max_concurrency`` requests in flight per client, 429s
retried with backoff; it stays the default for local backbones. Nothing here turns a failure into an answer:
a request that exhausts its retries is an error exactly as before.
"""
from __future__ import annotations

import asyncio
import collections
import email.utils
import hashlib
import math
import os
import re
import socket
import sqlite3
import threading
import time
import warnings
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

MODES = ("adaptive", "fixed")
#: What the provider deducts from the token limit per request: ``auto`` learns it from its own counters (the
#: ``x-ratelimit-remaining-*`` deltas against the replies' usage), ``reserved`` is the prompt plus ``n x max_tokens``
#: whatever the reply wrote, ``actual`` is the reply's usage (prompt + completion tokens).
CHARGES = ("auto", "reserved", "actual")
#: What the provider checks before it admits a request. ``max``: OpenAI's documented rule, "the maximum of
#: max_tokens and the estimated number of tokens based on the character count of your request"
#: (platform.openai.com/docs/guides/rate-limits, error mitigation), with ``n`` choices ``max(prompt, n x max_tokens)``;
#: ``sum``: prompt + ``n x max_tokens`` (a provider that reserves both).
ADMISSIONS = ("max", "sum")
DIMS = ("requests", "tokens")
#: Failure kinds that mean "the provider is overloaded or limiting us": AIMD halves the concurrency.
OVERLOAD_KINDS = frozenset({"http_429", "http_5xx", "http_408", "timeout", "connection"})


# ---- settings -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateLimitSettings:
    """The ``rate_limit:`` block of a backbone config (README: Backbones, rate limits)."""

    mode: str = "fixed"
    start: int = 8            # concurrency at the start (adaptive)
    min: int = 1              # AIMD never goes below ...
    max: int = 256            # ... nor above
    rpm: int | None = None    # requests per window (null: learned from x-ratelimit-limit-requests, else unpaced)
    tpm: int | None = None    # tokens per window (null: learned from x-ratelimit-limit-tokens, else unpaced)
    window_s: float = 60.0    # the provider's window (60 s for OpenAI's per-minute limits)
    target: float = 0.97      # pace to this fraction of the limit (headroom for clock and window skew)
    host_share: float = 1.0   # this host's fraction of the account (a cluster: 1 / hosts on the key)
    shared: bool = True       # share pacing with the other processes of this host (SQLite file)
    share_path: str | None = None  # that file (null: ~/.cache/agentic-repro/rate-limits/<host>.sqlite)
    charge: str = "auto"      # what the provider deducts per request (CHARGES); auto: learned from its headers
    admission: str = "max"    # what it checks before admitting one (ADMISSIONS)

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"


KEYS = tuple(f.name for f in fields(RateLimitSettings))


def default_mode(kind: str | None) -> str:
    """API backbones (kind openai, anthropic, gemini) adapt; local ones (embedded, peft, vllm-inprocess) keep a
    fixed concurrency."""
    return "adaptive" if kind in ("openai", "anthropic", "gemini") else "fixed"


def parse_rate_limit(block: Any, *, kind: str | None = None, where: str = "backbone.rate_limit") -> RateLimitSettings:
    """The validated settings; :class:`agentic_repro.harness.validate.ConfigError` naming the key for an unknown key or a bad value."""
    from agentic_repro.harness.validate import ConfigError

    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}={block!r} is not allowed: a mapping with keys {', '.join(KEYS)}")
    unknown = sorted(set(block) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(f'{where}.{k}' for k in unknown)}: known rate_limit options: "
                          f"{', '.join(KEYS)}")
    values = {k: v for k, v in block.items() if v is not None or k in ("rpm", "tpm", "share_path")}
    values.setdefault("mode", default_mode(kind))

    def bad(key: str, allowed: str) -> None:
        raise ConfigError(f"{where}.{key}={block.get(key, values.get(key))!r} is not allowed: {allowed}")

    if values["mode"] not in MODES:
        bad("mode", f"one of {', '.join(MODES)}")
    if values.get("charge", "auto") not in CHARGES:
        bad("charge", f"one of {', '.join(CHARGES)} (what the provider deducts per request; auto learns it)")
    if values.get("admission", "max") not in ADMISSIONS:
        bad("admission", f"one of {', '.join(ADMISSIONS)} (what the provider checks before admitting a request)")
    for key in ("start", "min", "max"):
        v = values.get(key)
        if v is not None and not (_is_int(v) and v >= 1):
            bad(key, "a positive integer (requests in flight)")
    for key in ("rpm", "tpm"):
        v = values.get(key)
        if v is not None and not (_is_int(v) and v >= 1):
            bad(key, "a positive integer per window, or null to learn it from the provider's headers")
    if "window_s" in values and not (_is_num(values["window_s"]) and values["window_s"] > 0):
        bad("window_s", "a positive number of seconds (60 for per-minute limits)")
    for key in ("target", "host_share"):
        if key in values and not (_is_num(values[key]) and 0 < values[key] <= 1):
            bad(key, "a number in (0, 1]")
    if "shared" in values and not isinstance(values["shared"], bool):
        bad("shared", "true or false")
    if values.get("share_path") is not None and not isinstance(values["share_path"], str):
        bad("share_path", "a file path, or null for ~/.cache/agentic-repro/rate-limits/<host>.sqlite")
    s = RateLimitSettings(**values)
    if not s.min <= s.start <= s.max:
        raise ConfigError(f"{where}: min={s.min} <= start={s.start} <= max={s.max} does not hold")
    if s.adaptive and kind in ("vllm-inprocess", "peft"):
        raise ConfigError(f"{where}.mode=adaptive paces requests to an HTTP endpoint; backbone kind {kind} runs in this "
                          "process: use mode=fixed")
    if not s.adaptive and (s.rpm is not None or s.tpm is not None):
        raise ConfigError(f"{where}.mode=fixed sends at max_concurrency and paces nothing: rpm/tpm need mode=adaptive "
                          "(min=start=max gives a fixed concurrency with pacing)")
    return s


def check_backbone_config(prefix: str, bb: Mapping[str, Any]) -> None:
    """Validate a backbone config's ``rate_limit`` block (called by :func:`agentic_repro.harness.validate.validate_run_config`)."""
    if "rate_limit" in bb:
        parse_rate_limit(bb.get("rate_limit"), kind=bb.get("kind"), where=f"{prefix}.rate_limit")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---- headers --------------------------------------------------------------------------------------------------
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|h|m|s)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | None) -> float | None:
    """Seconds in a reset header: Go durations (``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``), a bare number of
    seconds, or an RFC 3339 / HTTP date (Anthropic); None when unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if parts and "".join(a + b for a, b in parts) == text.replace(" ", ""):
        return sum(float(num) * _UNIT_S[unit] for num, unit in parts)
    return _seconds_until(text)


def _seconds_until(text: str) -> float | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if parsed is None:
            return None
        when = parsed.timestamp()
    return max(0.0, when - time.time())


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """``retry-after-ms`` (OpenAI, precise) or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    return parse_duration(value) if value else None


@dataclass
class Window:
    """One dimension of the provider's view in a reply: its limit, what is left, seconds until it resets."""

    limit: float | None = None
    remaining: float | None = None
    reset_s: float | None = None


_HEADER_NAMES = {
    "requests": (("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
                 ("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
                  "anthropic-ratelimit-requests-reset")),
    "tokens": (("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
               ("anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-tokens-reset")),
}


def parse_headers(headers: Mapping[str, str] | None) -> dict[str, Window]:
    """``{"requests": Window, "tokens": Window}`` for the dimensions the reply speaks of (none: ``{}``).

    vLLM's server sends no rate-limit headers (it queues instead): the controller then only adapts concurrency."""
    out: dict[str, Window] = {}
    if not headers:
        return out
    for dim, families in _HEADER_NAMES.items():
        for lim, rem, reset in families:
            w = Window(_number(headers.get(lim)), _number(headers.get(rem)), parse_duration(headers.get(reset)))
            if w.limit is not None or w.remaining is not None:
                out[dim] = w
                break
    return out


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        v = float(str(value).strip())
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None


# ---- token charge ---------------------------------------------------------------------------------------------
class TokenEstimator:
    """Prompt tokens before sending: tiktoken's count for the model when its encoding loads (it is fetched on
    first use, in a background thread, so an offline machine never blocks), else characters / 4; either is
    multiplied by a factor calibrated on the replies' ``usage.prompt_tokens`` (the provider's tokenizer is the
    truth: a vLLM server's Qwen tokenizer is not OpenAI's)."""

    PER_MESSAGE = 4   # role and separators, as OpenAI counts chat messages
    PRIMING = 3       # the assistant reply's priming

    def __init__(self, model: str, *, use_tiktoken: bool = True) -> None:
        self.model = model
        self._encoding: Any = None
        self._sum_est = 0.0
        self._sum_true = 0.0
        self.completion_per_choice = 256.0  # when max_tokens is unset: an average of the replies' usage
        if use_tiktoken:
            threading.Thread(target=self._load, name="tiktoken-load", daemon=True).start()

    def _load(self) -> None:
        try:
            import tiktoken
        except ImportError:
            return
        try:
            try:
                enc = tiktoken.encoding_for_model(self.model)
            except KeyError:
                enc = tiktoken.get_encoding("o200k_base")
            enc.encode("warm up")
        except Exception:  # noqa: BLE001 - no network for the encoding file: keep the estimate
            return
        self._encoding = enc

    @property
    def source(self) -> str:
        return "tiktoken" if self._encoding is not None else "chars/4"

    def base_count(self, messages: list[Mapping[str, Any]]) -> float:
        enc = self._encoding
        total = float(self.PRIMING)
        for m in messages:
            content = m.get("content")
            text = content if isinstance(content, str) else str(content or "")
            total += self.PER_MESSAGE + (len(enc.encode(text, disallowed_special=())) if enc is not None
                                         else len(text) / 4.0)
        return total

    @property
    def factor(self) -> float:
        return self._sum_true / self._sum_est if self._sum_est > 0 else 1.0

    def prompt_tokens(self, messages: list[Mapping[str, Any]]) -> tuple[float, float]:
        """(calibrated estimate, uncalibrated base): the base is handed back to :meth:`observe`."""
        base = self.base_count(messages)
        return base * self.factor, base

    def observe(self, base: float, prompt_tokens: int | None, completion_tokens: int | None, n: int) -> None:
        """Calibrate on one reply (sums decayed so the factor follows the recent prompts)."""
        if prompt_tokens and base > 0:
            self._sum_est = 0.98 * self._sum_est + base
            self._sum_true = 0.98 * self._sum_true + float(prompt_tokens)
        if completion_tokens is not None and n > 0:
            self.completion_per_choice = 0.9 * self.completion_per_choice + 0.1 * (completion_tokens / n)


# ---- pacing state (one process, or every process of the host) ---------------------------------------------------
class LocalStore:
    """GCRA virtual times per dimension, the Retry-After hold and the learned limits, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tat = {d: 0.0 for d in DIMS}
        self.blocked_until = 0.0
        self.limits: dict[str, float | None] = {d: None for d in DIMS}

    def reserve(self, costs: Mapping[str, float], rates_of: Callable[[Mapping[str, float | None]], dict[str, float]],
                burst_s: float, now: float) -> tuple[float, float]:
        with self._lock:
            return _gcra(self.tat, self.blocked_until, costs, rates_of(self.limits), burst_s, now)

    def adjust(self, dim: str, seconds: float) -> None:
        with self._lock:
            self.tat[dim] += seconds

    def block(self, until: float) -> None:
        with self._lock:
            self.blocked_until = max(self.blocked_until, until)

    def learn(self, dim: str, limit: float) -> None:
        with self._lock:
            self.limits[dim] = limit

    def heartbeat(self, who: str, limit: float, now: float) -> tuple[float, int]:
        """(the concurrency each process uses, processes active): alone, its own."""
        return limit, 1

    def close(self) -> None:
        return None


def _gcra(tat: dict[str, float], blocked_until: float, costs: Mapping[str, float], rates: Mapping[str, float],
          burst_s: float, now: float) -> tuple[float, float]:
    """(send time >= now, the part of the wait that is the pacing queue), updating the virtual times in ``tat``."""
    queued = now
    for d, rate in rates.items():
        if rate > 0 and costs.get(d):
            queued = max(queued, tat[d] - burst_s)
    start = max(queued, blocked_until)
    for d, rate in rates.items():
        if rate > 0 and costs.get(d):
            tat[d] = max(tat[d], start) + costs[d] / rate
    return start, queued - now


class SharedStore:
    """The same state in one SQLite row per account, shared by every process of this host."""

    def __init__(self, path: Path, key: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.key = path, key
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # pacing state, not results: a crash loses nothing of value
        self._db.execute("CREATE TABLE IF NOT EXISTS account (key TEXT PRIMARY KEY, tat_requests REAL, tat_tokens REAL,"
                         " blocked_until REAL, limit_requests REAL, limit_tokens REAL)")
        self._db.execute("INSERT OR IGNORE INTO account VALUES (?, 0, 0, 0, NULL, NULL)", (key,))
        self._db.execute("CREATE TABLE IF NOT EXISTS process (key TEXT, who TEXT, seen REAL, concurrency REAL, "
                         "PRIMARY KEY (key, who))")
        self._learned: dict[str, float | None] = {d: None for d in DIMS}

    def _tx(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return out

    def reserve(self, costs: Mapping[str, float], rates_of: Callable[[Mapping[str, float | None]], dict[str, float]],
                burst_s: float, now: float) -> tuple[float, float]:
        def step(db: sqlite3.Connection) -> tuple[float, float]:
            row = db.execute("SELECT tat_requests, tat_tokens, blocked_until, limit_requests, limit_tokens FROM account "
                             "WHERE key=?", (self.key,)).fetchone()
            tat = {"requests": row[0], "tokens": row[1]}
            out = _gcra(tat, row[2], costs, rates_of({"requests": row[3], "tokens": row[4]}), burst_s, now)
            db.execute("UPDATE account SET tat_requests=?, tat_tokens=? WHERE key=?",
                       (tat["requests"], tat["tokens"], self.key))
            return out

        return self._tx(step)

    def adjust(self, dim: str, seconds: float) -> None:
        col = f"tat_{dim}"
        self._tx(lambda db: db.execute(f"UPDATE account SET {col}={col}+? WHERE key=?", (seconds, self.key)))

    def block(self, until: float) -> None:
        self._tx(lambda db: db.execute("UPDATE account SET blocked_until=MAX(blocked_until, ?) WHERE key=?",
                                       (until, self.key)))

    def learn(self, dim: str, limit: float) -> None:
        if self._learned.get(dim) == limit:  # a write only when the provider's limit changes
            return
        self._learned[dim] = limit
        col = f"limit_{dim}"
        self._tx(lambda db: db.execute(f"UPDATE account SET {col}=? WHERE key=?", (limit, self.key)))

    def heartbeat(self, who: str, limit: float, now: float) -> tuple[float, int]:
        """Publish this process's AIMD limit; (the mean over the processes active on the account in the last 3 s,
        how many). Each uses the mean: throughput from the shared schedule is proportional to requests held in
        it, so equal concurrency is an equal share, whoever started first."""
        def step(db: sqlite3.Connection) -> tuple[float, int]:
            db.execute("INSERT OR REPLACE INTO process VALUES (?, ?, ?, ?)", (self.key, who, now, limit))
            db.execute("DELETE FROM process WHERE key=? AND seen < ?", (self.key, now - 60.0))
            mean, n = db.execute("SELECT AVG(concurrency), COUNT(*) FROM process WHERE key=? AND seen >= ?",
                                 (self.key, now - 3.0)).fetchone()
            return float(mean or limit), int(n or 1)

        return self._tx(step)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def default_share_path() -> Path:
    """One file per host: processes of one host share it, hosts never do (an NFS home included)."""
    return Path.home() / ".cache" / "agentic-repro" / "rate-limits" / f"{socket.gethostname() or 'host'}.sqlite"


# ---- what the provider deducts ---------------------------------------------------------------------------------
class ChargeLearner:
    """The share ``k`` of a request's unused reservation (prompt + ``n x max_tokens`` minus what the reply wrote)
    that the provider keeps on the token limit: 1 for a provider that deducts the reservation, 0 for one that
    deducts the reply's actual usage. Pacing charges ``actual + k x (reserved - actual)`` per request.

    Learned from the provider's own counters: between two replies of one rate-limit window (the same reset time)
    the account's used tokens and requests grew by the differences of ``limit - remaining``; the requests this
    process sent between the two replies are (nearly) those the provider admitted in between, and their replies'
    usage says what each would cost under either rule. ``k`` is where the provider's tokens per request fall
    between the two means (per-request means, so other processes on the account with a similar mix do not bias it).
    A pair across a reset, or a provider that sends no limit/remaining headers, teaches nothing: ``k`` then stays at
    its prior 1 (the reservation, the cautious charge)."""

    MIN_REQUESTS = 8       # provider-admitted requests before the estimate replaces the prior
    DECAY = 0.995          # per request learned from: follows a provider that changes its rule

    def __init__(self, mode: str = "auto", window_s: float = 60.0) -> None:
        self.mode, self.window_s = mode, window_s
        self._last: tuple[float, float, float, float] | None = None  # (time, used tokens, used requests, reset at)
        self._sends: collections.deque[Lease] = collections.deque()  # sent since the last observation
        self._pending: collections.deque[tuple[float, float, float, list[Lease]]] = collections.deque()
        self.provider_tokens = self.provider_requests = 0.0
        self.reserved = self.actual = self.requests = 0.0

    @property
    def k(self) -> float:
        if self.mode != "auto":
            return 1.0 if self.mode == "reserved" else 0.0
        if self.provider_requests < self.MIN_REQUESTS or self.requests <= 0:
            return 1.0
        gap = (self.reserved - self.actual) / self.requests
        if gap < 1.0:  # the reservation is what the replies wrote: nothing to tell apart
            return 1.0
        per_request = self.provider_tokens / self.provider_requests
        return min(1.0, max(0.0, (per_request - self.actual / self.requests) / gap))

    def sent(self, lease: Lease) -> None:
        if self.mode == "auto":
            self._sends.append(lease)

    def observe(self, windows: Mapping[str, Window], now: float) -> None:
        """One reply's headers: pair them with the previous reply's, then learn from every finished interval."""
        if self.mode != "auto":
            return
        tok, req = windows.get("tokens"), windows.get("requests")
        if not (tok and req and tok.limit and req.limit and tok.remaining is not None and req.remaining is not None
                and tok.reset_s is not None):
            return
        obs = (now, tok.limit - tok.remaining, req.limit - req.remaining, now + tok.reset_s)
        sends, self._sends = list(self._sends), collections.deque()
        last, self._last = self._last, obs
        if last is not None and abs(obs[3] - last[3]) <= max(0.5, 0.02 * self.window_s):  # one window
            self._pending.append((now, obs[1] - last[1], obs[2] - last[2], sends))
        self._finish(now)

    def _finish(self, now: float) -> None:
        while self._pending:
            at, tokens, requests, sends = self._pending[0]
            if any(lease.open for lease in sends) and now - at < self.window_s:
                return  # wait for their usage (a hung request: at most one window)
            self._pending.popleft()
            answered = [lease for lease in sends if lease.actual is not None]
            if not answered and requests == 0:
                continue
            decay = self.DECAY ** max(1.0, float(len(answered)))
            self.provider_tokens = decay * self.provider_tokens + tokens
            self.provider_requests = decay * self.provider_requests + requests
            self.reserved = decay * self.reserved + sum(lease.reserved for lease in answered)
            self.actual = decay * self.actual + sum(lease.actual for lease in answered)  # type: ignore[misc]
            self.requests = decay * self.requests + len(answered)


# ---- the controller -------------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """The provider's last word on one dimension: what it had left at ``at`` and when it resets."""

    remaining: float
    reset_at: float
    spent: float = 0.0  # charged by this process since


class Lease:
    """One request's slot and charge; :meth:`done` or :meth:`failed` releases it (exactly once)."""

    __slots__ = ("actual", "admission", "base", "contended", "costs", "ctl", "expected", "max_tokens", "n", "open",
                 "paced", "queue_s", "reserved", "reserved_at", "rule", "sent_at", "waited_s")

    def __init__(self, ctl: RateController, costs: dict[str, float], base: float, n: int,
                 max_tokens: int | None) -> None:
        self.ctl, self.costs, self.base, self.n, self.max_tokens = ctl, costs, base, n, max_tokens
        self.reserved_at = 0.0
        self.sent_at = 0.0
        self.waited_s = 0.0
        self.queue_s = 0.0      # of which in the account's pacing queue (GCRA)
        self.contended = False
        self.paced = False
        self.open = True
        self.admission = costs.get("tokens", 0.0)  # what the provider checks before admitting it (tokens)
        self.reserved = 0.0                          # prompt + n x max_tokens (the prompt from usage once answered)
        self.expected = self.admission               # the tokens its reply is expected to use
        self.rule = self.admission                   # the provider's admission rule alone
        self.actual: float | None = None             # the reply's usage: prompt + completion tokens

    def done(self, headers: Mapping[str, str] | None, usage: Mapping[str, Any] | None) -> None:
        if self.open:
            self.open = False
            self.ctl._on_done(self, headers, usage)

    def failed(self, kind: str, headers: Mapping[str, str] | None = None, fallback_wait_s: float = 0.0) -> float:
        """Release after a failed attempt; for a 429 returns how long every sender of the account now waits."""
        if not self.open:
            return 0.0
        self.open = False
        return self.ctl._on_failed(self, kind, headers, fallback_wait_s)


class RateController:
    """AIMD concurrency + GCRA pacing + the provider's headers for one account (see the module docstring).

    ``clock`` (wall seconds, shared across processes) and ``sleep`` are injectable for simulated-clock tests.
    """

    def __init__(self, settings: RateLimitSettings, *, model: str = "", key: str = "local",
                 store: LocalStore | SharedStore | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Any] = asyncio.sleep, estimator: TokenEstimator | None = None) -> None:
        self.settings = settings
        self.key = key
        self.clock, self._sleep = clock, sleep
        self.store = store if store is not None else LocalStore()
        self.estimator = estimator if estimator is not None else TokenEstimator(model)
        self._lock = threading.Lock()
        self.limit = float(settings.start)           # current concurrency limit (AIMD)
        self.ssthresh = float(settings.max)          # slow start below it
        self.in_flight = 0
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = collections.deque()
        self._last_cut = -math.inf
        self._hold_until = 0.0
        self.latency_s = 0.0  # moving average of send -> reply
        self.shared_limit = float(settings.start)  # the mean limit of the account's active processes (heartbeat)
        self.processes = 1
        self._next_beat = -math.inf
        self._who = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.snapshots: dict[str, Snapshot] = {}
        self.header_limits: dict[str, float] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        self.limiter_wait_s = 0.0
        self.peak = 0
        self._recent: collections.deque[tuple[float, float]] = collections.deque()  # (sent at, tokens) for 60 s
        self.learner = ChargeLearner(settings.charge, settings.window_s)

    # -- rates
    def rates(self, learned: Mapping[str, float | None]) -> dict[str, float]:
        """Per-second pacing rate of each dimension: the lower of the configured and the provider's limit,
        times this host's share and the target."""
        s = self.settings
        out = {}
        for d, configured in (("requests", s.rpm), ("tokens", s.tpm)):
            known = [v for v in (configured, learned.get(d), self.header_limits.get(d)) if v]
            if known:
                out[d] = min(known) * s.host_share * s.target / s.window_s
        return out

    @property
    def burst_s(self) -> float:
        return 0.02 * self.settings.window_s  # after idling, at most 2% of a window at once

    # -- acquire
    def charge(self, messages: list[Mapping[str, Any]], n: int, max_tokens: int | None) -> tuple[dict[str, float], float]:
        """({"requests": 1, "tokens": what the provider will deduct, as learned}, the prompt's uncalibrated count)."""
        costs, base, *_ = self._charges(messages, n, max_tokens)
        return costs, base

    def _charges(self, messages: list[Mapping[str, Any]], n: int,
                 max_tokens: int | None) -> tuple[dict[str, float], float, float, float, float]:
        """(costs, base, reserved, admission rule, expected): the pacing charge is the expected reply's tokens plus the learned share
        ``k`` of the rest of the reservation; the admission check is the provider's documented rule, never below
        the charge itself."""
        prompt, base = self.estimator.prompt_tokens(messages)
        per_choice = self.estimator.completion_per_choice
        expected = prompt + n * (min(per_choice, max_tokens) if max_tokens else per_choice)
        reserved = prompt + n * max_tokens if max_tokens else expected
        tokens = expected + self.learner.k * (reserved - expected)
        rule = max(prompt, n * max_tokens) if max_tokens and self.settings.admission == "max" else reserved
        return {"requests": 1.0, "tokens": tokens}, base, reserved, rule, expected

    async def acquire(self, messages: list[Mapping[str, Any]], n: int = 1, max_tokens: int | None = None) -> Lease:
        costs, base, reserved, rule, expected = self._charges(messages, n, max_tokens)
        lease = Lease(self, costs, base, n, max_tokens)
        lease.reserved, lease.rule, lease.expected = reserved, rule, expected
        lease.admission = max(rule, costs["tokens"])
        t0 = self.clock()
        await self._take_slot(lease)
        try:
            await self._pace(lease)
        except BaseException:
            lease.open = False
            self._release_slot()
            raise
        lease.waited_s = max(0.0, self.clock() - t0)
        with self._lock:
            self.limiter_wait_s += lease.waited_s
        return lease

    def cap(self) -> int:
        """Requests in flight allowed now: the AIMD limit, or with other processes on the account their mean."""
        return max(1, int(self.shared_limit if self.processes > 1 else self.limit))

    def _beat(self) -> None:
        now = self.clock()
        if now < self._next_beat:
            return
        self._next_beat = now + 0.5
        mean, n = self.store.heartbeat(self._who, self.limit, now)
        with self._lock:
            self.shared_limit, self.processes = mean, n

    async def _take_slot(self, lease: Lease) -> None:
        self._beat()
        loop = asyncio.get_running_loop()
        woken = False
        while True:
            with self._lock:
                if self.in_flight < self.cap() and (woken or not self._waiters_ahead()):
                    self.in_flight += 1
                    self.peak = max(self.peak, self.in_flight)
                    return
                fut: asyncio.Future[None] = loop.create_future()
                if woken:  # woken but the slot went to a newcomer: first in line again
                    self._waiters.appendleft((loop, fut))
                else:
                    self._waiters.append((loop, fut))
            lease.contended = True
            try:
                await fut
            finally:
                with self._lock:
                    try:
                        self._waiters.remove((loop, fut))
                    except ValueError:
                        pass
            woken = True

    def _waiters_ahead(self) -> bool:
        return any(not f.done() for _, f in self._waiters)

    def _release_slot(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._wake(self.cap() - self.in_flight)

    def _wake(self, free: int) -> None:
        for loop, fut in list(self._waiters):
            if free <= 0:
                break
            if not fut.done():
                loop.call_soon_threadsafe(_resolve, fut)
                free -= 1

    @property
    def queue_target_s(self) -> float:
        """The pacing queue AIMD aims at: long enough to keep the account busy (5% of the window, and at least the
        reply latency: a halving at twice the target never leaves fewer requests than the pipe holds), short enough
        to follow a change of the limit and to halve often (processes on a key converge to fair shares by halving)."""
        return max(0.05 * self.settings.window_s, self.latency_s)

    async def _pace(self, lease: Lease) -> None:
        lease.reserved_at = self.clock()
        start, lease.queue_s = self.store.reserve(lease.costs, self.rates, self.burst_s, lease.reserved_at)
        while True:
            now = self.clock()
            wait = start - now
            if wait > 1e-3 and self._recharge(lease):
                # the provider turned out to deduct less than this request was charged (ChargeLearner): give its
                # place back and queue again at the new charge, so the schedule follows what was learned at once
                start, lease.queue_s = self.store.reserve(lease.costs, self.rates, self.burst_s, now)
                continue
            if wait > 1e-3:
                await self._sleep(min(wait, self.repace_s))
                continue
            hold = self._header_wait(lease, now)
            if hold <= 0:
                self._commit_send(lease, now)
                return
            # the provider says the window is spent (or a 429 said wait): give the slot in the pacing schedule
            # back and queue again after the hold, so held requests do not all go at once when it ends
            lease.paced = True
            self._refund(lease.costs)
            await self._sleep(hold)
            start, _ = self.store.reserve(lease.costs, self.rates, self.burst_s, self.clock())

    @property
    def repace_s(self) -> float:
        """How often a request waiting in the pacing schedule checks whether its charge has fallen."""
        return max(0.25, 0.02 * self.settings.window_s)

    def _recharge(self, lease: Lease) -> bool:
        """Lower a waiting request's token charge to what the learned rule says now (refunding its place); True
        when it fell by more than a tenth."""
        tokens = lease.expected + self.learner.k * (lease.reserved - lease.expected)
        if tokens >= 0.9 * lease.costs["tokens"]:
            return False
        self._refund(lease.costs)
        lease.costs = {**lease.costs, "tokens": tokens}
        lease.admission = max(lease.rule, tokens)
        return True

    def _refund(self, costs: Mapping[str, float]) -> None:
        for d, rate in self.rates(self.header_limits).items():
            if rate > 0 and costs.get(d):
                self.store.adjust(d, -costs[d] / rate)

    def _header_wait(self, lease: Lease, now: float) -> float:
        """Seconds until the provider's window resets when this request would not be admitted by what it said was
        left (tokens: its admission rule, which may exceed what it will deduct)."""
        with self._lock:
            wait = max(0.0, self._hold_until - now)  # a 429's Retry-After seen while this request was paced
            for d, snap in list(self.snapshots.items()):
                need = lease.admission if d == "tokens" else lease.costs.get(d, 0.0)
                if now >= snap.reset_at:
                    del self.snapshots[d]
                elif snap.spent + need > snap.remaining:
                    wait = max(wait, snap.reset_at - now)
        return wait

    def _commit_send(self, lease: Lease, now: float) -> None:
        with self._lock:
            for d, snap in self.snapshots.items():
                snap.spent += lease.costs.get(d, 0.0)
            lease.sent_at = now
            self.learner.sent(lease)
            self.counts["sent"] += 1
            self._recent.append((now, lease.costs["tokens"]))
            while self._recent and self._recent[0][0] < now - 60.0:
                self._recent.popleft()

    # -- outcomes
    def _learn(self, headers: Mapping[str, str] | None, now: float) -> None:
        windows = parse_headers(headers)
        with self._lock:
            self.learner.observe(windows, now)
        for d, w in windows.items():
            if w.limit:
                self.header_limits[d] = w.limit
                self.store.learn(d, w.limit)
            if w.remaining is not None and w.reset_s is not None:
                with self._lock:
                    self.snapshots[d] = Snapshot(w.remaining, now + min(w.reset_s, self.settings.window_s))

    def _on_done(self, lease: Lease, headers: Mapping[str, str] | None, usage: Mapping[str, Any] | None) -> None:
        now = self.clock()
        usage = usage or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt is not None:  # what the reply would cost under either rule (ChargeLearner)
            lease.actual = float(prompt) + float(completion or 0)
            lease.reserved = float(prompt) + (lease.n * lease.max_tokens if lease.max_tokens else float(completion or 0))
        self._learn(headers, now)
        self.estimator.observe(lease.base, prompt, completion, lease.n)
        if lease.actual is not None:  # true up: the provider counted the true prompt, and the reply or the reservation
            true = lease.actual + self.learner.k * (lease.reserved - lease.actual)
            delta = true - lease.costs["tokens"]
            rate = self.rates(self.header_limits).get("tokens")
            if rate and abs(delta) >= 1:
                self.store.adjust("tokens", delta / rate)
                with self._lock:
                    if "tokens" in self.snapshots and lease.sent_at >= now - self.settings.window_s:
                        self.snapshots["tokens"].spent = max(0.0, self.snapshots["tokens"].spent + delta)
        with self._lock:
            self.counts["ok"] += 1
            took = max(0.0, now - lease.sent_at)
            self.latency_s = took if self.counts["ok"] == 1 else 0.9 * self.latency_s + 0.1 * took
            if lease.queue_s > 2 * self.queue_target_s and lease.reserved_at >= self._last_cut:
                # more in flight than the account paces: halve (every process on the key sees the same queue,
                # so they halve together and additive increase evens them out: a fair share each). Only a
                # request that queued after the last cut, once the cut has drained the queue, cuts again.
                self.ssthresh = max(float(self.settings.min), self.limit / 2.0)
                self.limit = self.ssthresh
                self._last_cut = now
            elif (lease.queue_s <= self.queue_target_s and not lease.paced
                  and (lease.contended or self._waiters_ahead())):
                # requests queue for a slot while the pacer had room: the concurrency limit binds, not the account
                self.limit = min(float(self.settings.max),
                                 self.limit + (1.0 if self.limit < self.ssthresh else 1.0 / self.limit))
        self._release_slot()

    def _on_failed(self, lease: Lease, kind: str, headers: Mapping[str, str] | None, fallback_wait_s: float) -> float:
        now = self.clock()
        self._learn(headers, now)
        hold = 0.0
        with self._lock:
            self.counts[kind] += 1
            if kind in OVERLOAD_KINDS and lease.sent_at >= self._last_cut:  # one cut per round trip
                self.ssthresh = max(float(self.settings.min), self.limit / 2.0)
                self.limit = self.ssthresh
                self._last_cut = now
        if kind == "http_429":
            after = retry_after_seconds(headers)
            hold = after if after is not None else fallback_wait_s
            if hold > 0:
                with self._lock:
                    self._hold_until = max(self._hold_until, now + hold)
                self.store.block(now + hold)
        self._release_slot()
        return hold

    def reconfigure(self, settings: RateLimitSettings, store: LocalStore | SharedStore | None = None) -> None:
        """New settings for the same account (requests in flight keep their slots)."""
        with self._lock:
            self.settings = settings
            self.limit = min(float(settings.max), max(float(settings.min), self.limit))
            self.ssthresh = min(self.ssthresh, float(settings.max))
            if store is not None:
                self.store = store

    # -- reporting
    def stats(self) -> dict[str, Any]:
        """Cumulative, for metrics.json: counts by outcome, time waiting on the limiter, the concurrency now and
        at its peak, the limits in force (per window) and where the token counts come from."""
        with self._lock:
            return {"mode": self.settings.mode, "concurrency": round(self.limit, 2), "cap": self.cap(),
                    "processes": self.processes, "peak_in_flight": self.peak,
                    "sent": self.counts["sent"], "ok": self.counts["ok"], "http_429": self.counts["http_429"],
                    "failed": {k: v for k, v in self.counts.items() if k not in ("sent", "ok")},
                    "limiter_wait_s": round(self.limiter_wait_s, 3),
                    "limits_per_window": {d: v for d, v in (("requests", self.settings.rpm or self.header_limits.get(
                        "requests")), ("tokens", self.settings.tpm or self.header_limits.get("tokens"))) if v},
                    "window_s": self.settings.window_s, "tokenizer": self.estimator.source,
                    "prompt_factor": round(self.estimator.factor, 4),
                    "charge": {"rule": self.settings.charge, "kept_share_of_reservation": round(self.learner.k, 4),
                               "learned_from_requests": round(self.learner.provider_requests, 1)},
                    "settings": asdict(self.settings)}

    def progress(self) -> str:
        """``conc=12 req/min=1440 tok/min=1.2M`` over the last minute (the run's progress line)."""
        now = self.clock()
        with self._lock:
            recent = [(t, k) for t, k in self._recent if t >= now - 60.0]
        span = min(60.0, max(1.0, now - recent[0][0])) if recent else 60.0
        rpm, tpm = 60.0 * len(recent) / span, 60.0 * sum(k for _, k in recent) / span
        return f"conc={self.cap()} req/min={rpm:.0f} tok/min={_si(tpm)}"

    def close(self) -> None:
        self.store.close()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _si(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


# ---- one controller per account in this process ------------------------------------------------------------------
_REGISTRY: dict[str, RateController] = {}
_REGISTRY_LOCK = threading.Lock()


def account_key(model: str, base_url: str | None, api_key: str | None) -> str:
    """A hash of model + endpoint + key: the key never leaves this process, not even into the shared file."""
    raw = "\0".join((model or "", base_url or "https://api.openai.com/v1", api_key or ""))
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def controller_for(settings: RateLimitSettings, *, model: str, base_url: str | None,
                   api_key: str | None) -> RateController | None:
    """The process's controller for this account (None in mode fixed). Backbones built later for the same account
    (another role, the next run of a sweep) get the same one, so they share its concurrency and pacing; a different
    ``rate_limit`` block for the account re-configures it (the last one built wins, with a warning)."""
    if not settings.adaptive:
        return None
    key = account_key(model, base_url, api_key)
    with _REGISTRY_LOCK:
        ctl = _REGISTRY.get(key)
        if ctl is None:
            ctl = RateController(settings, model=model, key=key, store=_store(settings, key))
            _REGISTRY[key] = ctl
        elif ctl.settings != settings:
            warnings.warn(f"two rate_limit blocks for one account of model {model}: the controller now follows the "
                          f"last ({settings})", stacklevel=2)
            ctl.reconfigure(settings, _store(settings, key) if (ctl.settings.shared, ctl.settings.share_path) !=
                            (settings.shared, settings.share_path) else None)
        return ctl


def _store(settings: RateLimitSettings, key: str) -> LocalStore | SharedStore:
    if not settings.shared:
        return LocalStore()
    path = Path(os.path.expanduser(settings.share_path)) if settings.share_path else default_share_path()
    try:
        return SharedStore(path, key)
    except (OSError, sqlite3.Error) as exc:  # a read-only home: pace this process alone rather than not run
        warnings.warn(f"rate_limit: cannot open the shared limiter {path} ({exc}); this process paces alone "
                      "(set backbone.rate_limit.share_path to a writable file)", stacklevel=3)
        return LocalStore()
