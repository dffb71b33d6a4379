"""The provider's bill: what a reply's usage costs at the dated price of the model that served it.

``configs/prices.yaml`` is the table: per model its served snapshots and aliases, its API family (how a request is
shaped: :func:`family_settings`), standard rates and the batch/flex tiers it offers, each with its source page and
the date it was read. :class:`Usage` is a reply's usage, every token class of it (cached reads, cache writes,
reasoning, audio); :meth:`Price.bill` prices it as the provider does, :meth:`Price.list_cost` as the papers'
releases did (input + output at list price, no cache discount).

A model the table does not hold is refused before the first call (:func:`price_for_model`), unless the config sets
its own price (``backbone.price: {input_per_1m: X, output_per_1m: Y}``), which is then recorded as ``origin:
config``. A reply that carries no usage, or usage without its token counts, cannot be priced: :class:`MissingUsage`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

TABLE_PATH = Path(__file__).resolve().parents[1] / "configs" / "prices.yaml"
TIERS = ("standard", "batch", "flex")


class PriceError(ValueError):
    """No price for this model or tier, or a price config that cannot be read: refused before any call."""


class MissingUsage(ValueError):
    """A paid reply without the usage that prices it (missing, or without prompt/completion token counts)."""


@dataclass(frozen=True)
class Usage:
    """A reply's usage in one shape for every provider. ``prompt_tokens`` counts every input token (cached reads and
    cache writes included, as OpenAI reports it); ``completion_tokens`` every output token (reasoning included)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0               # input read from the provider's prompt cache
    cache_write_tokens: int = 0          # input written to the cache (Anthropic, 5-minute TTL)
    cache_write_1h_tokens: int = 0       # input written to the cache with a 1-hour TTL (Anthropic)
    reasoning_tokens: int = 0            # part of completion_tokens
    audio_prompt_tokens: int = 0         # part of prompt_tokens
    audio_completion_tokens: int = 0     # part of completion_tokens
    accepted_prediction_tokens: int = 0  # predicted outputs (part of completion_tokens)
    rejected_prediction_tokens: int = 0  # billed as output though not returned

    @classmethod
    def from_openai(cls, usage: Any) -> Usage:
        """OpenAI's chat-completions ``usage`` object (``prompt_tokens_details``, ``completion_tokens_details``)."""
        if not isinstance(usage, dict):
            raise MissingUsage(f"the reply carries no usage (got {str(usage)[:80]})")
        counts = {}
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MissingUsage(f"the reply's usage has no {name} (got {str(usage)[:200]})")
            counts[name] = value
        pd = usage.get("prompt_tokens_details") or {}
        cd = usage.get("completion_tokens_details") or {}
        out = cls(**counts, cached_tokens=_count(pd, "cached_tokens"),
                  cache_write_tokens=_count(pd, "cache_write_tokens"),
                  audio_prompt_tokens=_count(pd, "audio_tokens"), reasoning_tokens=_count(cd, "reasoning_tokens"),
                  audio_completion_tokens=_count(cd, "audio_tokens"),
                  accepted_prediction_tokens=_count(cd, "accepted_prediction_tokens"),
                  rejected_prediction_tokens=_count(cd, "rejected_prediction_tokens"))
        if out.cached_tokens + out.cache_write_tokens > out.prompt_tokens or out.reasoning_tokens > out.completion_tokens:
            raise MissingUsage(f"the reply's usage does not add up: {str(usage)[:200]}")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Usage | None:
        if not d:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, int]:
        """Prompt and completion counts and every non-zero detail (a compact ledger/cache field)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in ("prompt_tokens", "completion_tokens") or getattr(self, f.name)}

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


def _count(d: Any, name: str) -> int:
    value = d.get(name) if isinstance(d, dict) else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MissingUsage(f"usage detail {name}={value!r} is not a token count")
    return value


@dataclass(frozen=True)
class Rates:
    """USD per 1M tokens of one tier; ``None``: the provider has no separate rate (billed as input)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None
    long_context: tuple[int, Rates] | None = None  # (above_prompt_tokens, the rates then)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> Rates:
        try:
            lc = d.get("long_context")
            long = None if not lc else (int(lc["above_prompt_tokens"]),
                                        cls.from_dict({k: v for k, v in lc.items() if k != "above_prompt_tokens"},
                                                      where))
            return cls(input=float(d["input"]), output=float(d["output"]), cached_input=_opt(d.get("cached_input")),
                       cache_write=_opt(d.get("cache_write")), cache_write_1h=_opt(d.get("cache_write_1h")),
                       long_context=long)
        except (KeyError, TypeError, ValueError) as exc:
            raise PriceError(f"{where}: a price needs input and output (USD per 1M tokens), got {d!r}") from exc

    def for_prompt(self, prompt_tokens: int) -> Rates:
        if self.long_context is not None and prompt_tokens > self.long_context[0]:
            return self.long_context[1]
        return self

    def bill(self, u: Usage) -> float:
        r = self.for_prompt(u.prompt_tokens)
        writes_1h = u.cache_write_1h_tokens
        plain = u.prompt_tokens - u.cached_tokens - u.cache_write_tokens - writes_1h
        cw = r.input if r.cache_write is None else r.cache_write
        usd = (plain * r.input + u.cached_tokens * (r.input if r.cached_input is None else r.cached_input)
               + u.cache_write_tokens * cw + writes_1h * (cw if r.cache_write_1h is None else r.cache_write_1h)
               + u.completion_tokens * r.output)
        return usd / 1e6


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True)
class Price:
    """One model's price: standard list rates (``input_per_1m``, ``output_per_1m``, the papers' formula) plus
    what the provider bills beyond them (cached reads, cache writes, long-context and batch/flex tiers).

    ``origin``: ``table`` (configs/prices.yaml, with ``source`` and ``checked``), ``config`` (set by the user in
    ``backbone.price``) or ``free`` (``price: 0``: a local or self-hosted model)."""

    input_per_1m: float
    output_per_1m: float
    cached_input_per_1m: float | None = None
    cache_write_per_1m: float | None = None
    cache_write_1h_per_1m: float | None = None
    long_context: tuple[int, Rates] | None = None
    tiers: tuple[tuple[str, Rates], ...] = ()   # ("batch", Rates), ("flex", Rates)
    model: str | None = None                   # the table's entry (None for a config or free price)
    family: str = "chat"
    provider: str | None = None
    snapshots: tuple[str, ...] = ()
    source: str | None = None
    checked: str | None = None
    verified: str | None = None
    origin: str = "config"
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    # -- construction
    @classmethod
    def from_config(cls, cfg: Any, backbone_name: str, model: str | None = None) -> Price:
        """``price: table`` (the dated table's price for ``model``), ``price: 0`` (free) or an explicit
        ``{input_per_1m, output_per_1m[, cached_input_per_1m, cache_write_per_1m]}`` (recorded as origin config)."""
        if cfg is None:
            raise PriceError(
                f"backbone '{backbone_name}' has no price: set `price: table` (the dated table, configs/prices.yaml), "
                f"`price: 0` in configs/backbone/{backbone_name}.yaml for a free model, or "
                "`price: {input_per_1m: X, output_per_1m: Y}` (USD per 1M tokens)")
        if isinstance(cfg, str) and cfg == "table":
            if not model:
                raise PriceError(f"backbone '{backbone_name}': `price: table` needs a model")
            return price_for_model(model)
        if isinstance(cfg, bool) or (not isinstance(cfg, (int, float, dict)) and not hasattr(cfg, "keys")):
            raise PriceError(f"backbone '{backbone_name}': price needs input_per_1m and output_per_1m, `table` "
                             f"or 0 (got {cfg!r})")
        if isinstance(cfg, (int, float)):
            if cfg != 0:
                raise PriceError(f"backbone '{backbone_name}': a scalar price must be 0; "
                                 "give input_per_1m and output_per_1m otherwise")
            return cls(0.0, 0.0, origin="free")
        try:
            return cls(float(cfg["input_per_1m"]), float(cfg["output_per_1m"]),
                       cached_input_per_1m=_opt(cfg.get("cached_input_per_1m")),
                       cache_write_per_1m=_opt(cfg.get("cache_write_per_1m")),
                       family=str(cfg.get("family") or (family_of(model) if model else "chat")), origin="config")
        except (KeyError, TypeError, ValueError) as exc:
            raise PriceError(f"backbone '{backbone_name}': price needs input_per_1m and "
                             f"output_per_1m (got {cfg!r})") from exc

    # -- reading
    @property
    def free(self) -> bool:
        return self.origin == "free" or (self.input_per_1m == 0 and self.output_per_1m == 0 and not self.tiers)

    def rates(self, tier: str | None = "standard") -> Rates:
        """The rates of ``tier`` (standard | batch | flex); a tier the model does not offer is a :class:`PriceError`."""
        tier = tier or "standard"
        if tier in ("standard", "default", "auto"):
            return Rates(self.input_per_1m, self.output_per_1m, self.cached_input_per_1m, self.cache_write_per_1m,
                         self.cache_write_1h_per_1m, self.long_context)
        for name, r in self.tiers:
            if name == tier:
                return r
        if self.free:
            return Rates(0.0, 0.0)
        raise PriceError(f"{self.model or 'this model'} has no {tier!r} price in the table "
                         f"(tiers: standard{''.join(', ' + n for n, _ in self.tiers)})")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The papers' formula: input + output tokens at the standard list price."""
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1e6

    def list_cost(self, usage: Usage) -> float:
        return self.cost(usage.prompt_tokens, usage.completion_tokens)

    def bill(self, usage: Usage, tier: str | None = "standard") -> float:
        """What the provider charges for ``usage`` at ``tier``: cached reads, cache writes and long prompts at their
        rates, reasoning tokens as output. Audio tokens have no rate here: refused rather than priced as text."""
        if self.free:
            return 0.0
        if usage.audio_prompt_tokens or usage.audio_completion_tokens:
            raise PriceError(f"{self.model or 'this model'}: the reply has audio tokens, which the table does not "
                             "price")
        return self.rates(tier).bill(usage)

    def describe(self) -> dict[str, Any]:
        """For meta.json and the estimate's notes: where this price comes from."""
        out: dict[str, Any] = {"origin": self.origin, "input_per_1m": self.input_per_1m,
                               "output_per_1m": self.output_per_1m}
        for k in ("cached_input_per_1m", "cache_write_per_1m", "model", "source", "checked", "verified"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.tiers:
            out["tiers"] = {n: {"input": r.input, "cached_input": r.cached_input, "output": r.output}
                            for n, r in self.tiers}
        out["family"] = self.family
        return out


class PriceTable:
    """``configs/prices.yaml`` read once: entries by name (entry key, snapshot or alias) and the API families."""

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.path = path
        self.checked = str(data.get("checked") or "")
        self.families: dict[str, dict[str, Any]] = dict(data.get("families") or {})
        self.providers: dict[str, dict[str, Any]] = dict(data.get("providers") or {})
        self.prices: dict[str, Price] = {}
        self.index: dict[str, str] = {}
        for key, e in (data.get("models") or {}).items():
            where = f"{path or 'price table'}: {key}"
            std = Rates.from_dict(e.get("standard") or {}, where)
            tiers = tuple((t, Rates.from_dict(e[t], f"{where} ({t})")) for t in TIERS[1:] if e.get(t))
            family = str(e.get("family") or "chat")
            if family not in self.families:
                raise PriceError(f"{where}: family {family!r} is not one of {sorted(self.families)}")
            snaps = tuple(str(s) for s in e.get("snapshots") or ())
            self.prices[key] = Price(std.input, std.output, std.cached_input, std.cache_write, std.cache_write_1h,
                                     std.long_context, tiers, model=key, family=family, provider=e.get("provider"),
                                     snapshots=snaps, source=e.get("source"),
                                     checked=str(e.get("checked") or self.checked), verified=e.get("verified"),
                                     origin="table", extra={k: e[k] for k in ("via", "note") if e.get(k)})
            for name in (key, *snaps, *(e.get("aliases") or ())):
                if name in self.index and self.index[name] != key:
                    raise PriceError(f"{where}: {name!r} is already an entry of {self.index[name]}")
                self.index[str(name)] = key

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        p = Path(path or TABLE_PATH)
        return cls(yaml.safe_load(p.read_text(encoding="utf-8")) or {}, p)

    def lookup(self, model: str) -> Price | None:
        key = self.index.get(model)
        return None if key is None else self.prices[key]

    def price(self, model: str) -> Price:
        hit = self.lookup(model)
        if hit is None:
            raise PriceError(
                f"model {model!r} is not in the price table ({self.path}): add it there with its source and date, "
                f"or set its price in the backbone config (backbone.price={{input_per_1m: X, output_per_1m: Y}}, "
                f"recorded as a user-set price). Known: {', '.join(sorted(self.index))}")
        return hit

    def served(self, served_model: str | None, requested: Price) -> tuple[Price, str | None]:
        """The price for a reply whose ``model`` field says ``served_model``: the served snapshot's entry when the
        table holds it; else the requested price, with a note saying so (a user-set price is never second-guessed)."""
        if requested.origin != "table" or not served_model:
            return requested, None
        hit = self.lookup(served_model)
        if hit is not None:
            return hit, None
        return requested, f"served snapshot {served_model!r} is not in the price table: priced as {requested.model}"


@functools.cache
def price_table() -> PriceTable:
    """The process's table (read once; tests build their own :class:`PriceTable`)."""
    return PriceTable.load()


def price_for_model(model: str) -> Price:
    """The dated price of ``model`` (an entry, a snapshot or an alias), or :class:`PriceError` before any call."""
    return price_table().price(model)


def family_of(model: str | None) -> str:
    """The API family of ``model`` in the table; ``chat`` for a model the table does not hold (a local server)."""
    hit = price_table().lookup(model) if model else None
    return "chat" if hit is None else hit.family


def family_settings(family: str) -> dict[str, Any]:
    """How a request to a model of ``family`` is shaped: ``max_tokens_field``, ``not_sent``, ``reasoning_effort``."""
    fams = price_table().families
    if family not in fams:
        raise PriceError(f"API family {family!r} is not one of {sorted(fams)} (configs/prices.yaml families:)")
    return fams[family]
