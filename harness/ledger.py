"""Per-call cost ledger.

Every backbone call is one :class:`CallRecord`, attributed to (run, problem,
method, stage) at the moment it is made. Per-problem cost is the sum of that
problem's records, never the difference of a running total (AFlow's and
MaAS's bug under concurrency).
"""
from __future__ import annotations

import time
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentic_repro.harness.pricing import Price, Usage  # noqa: F401 - Price lives with the table; re-exported


@dataclass
class CallRecord:
    run_id: str
    problem_id: str
    method: str
    stage: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cache_hit: bool
    retries: int
    cost_usd: float
    flops: float | None
    sample_index: int
    seed: int | None
    temperature: float | None
    time: float = field(default_factory=time.time)
    error: str | None = None            # None when the call returned; else why it failed for good
    retry_log: list[str] | None = None  # why each retry happened and how long it waited
    finish_reason: str | None = None    # "stop" | "length" | ...: the reports check that answers were not cut
    role: str | None = None             # the run role whose backbone served the call ("default" = the run's)
    model_identity: str | None = None   # short, stable id of the model that answered (name#hash of its identity)
    adapter: str | None = None          # LoRA adapter name, None = the base model
    adapter_sha256: str | None = None
    attempts: int = 1                   # requests sent for this record (1 + retries)
    error_kind: str | None = None       # BackboneError.kind ("connection", "timeout", "null_content", ...)
    request: str | None = None          # id of the request (requests.jsonl has its line from when it was sent)
    key: str | None = None              # response-cache key of the reply (its prompt and text, for the run viewer)
    # the provider's bill (harness.pricing): cost_usd is what the provider charges for this line (cached input at
    # its rate, reasoning as output, batch/flex tier, plus answered attempts that were retried); cost_list_usd is
    # the papers' formula (prompt + completion tokens at the standard list price)
    cost_list_usd: float | None = None
    cached_tokens: int = 0              # prompt tokens read from the provider's prompt cache
    cache_write_tokens: int = 0         # prompt tokens written to it (Anthropic)
    reasoning_tokens: int = 0           # completion tokens spent reasoning (billed as output)
    served_model: str | None = None     # the snapshot that answered (the reply's `model`)
    system_fingerprint: str | None = None
    service_tier: str | None = None     # the tier billed: standard | batch | flex (as the reply said)
    priced_as: str | None = None        # the price-table entry (None: a user-set or free price)
    price_note: str | None = None       # why a line is priced otherwise than by its served snapshot
    retried_billed_usd: float = 0.0     # part of cost_usd: answered replies retried (null content...), billed too
    dropped_params: list[str] | None = None  # sampling parameters the model's API family does not take (not sent)
    usage_details: dict[str, int] | None = None  # other non-zero usage classes (audio, predicted outputs, 1 h writes)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # flat fields: a shallow copy is the record (asdict's deep copy cost ~20 us)


@dataclass
class CallSummary:
    """Totals over a set of records. ``cost_usd``: the provider's bill for every line's tokens (cache hits priced
    as when they were paid); ``billed_usd``: the same without cache hits (what the provider charged this time);
    ``cost_list_usd``: the papers' formula (input + output at list price, no cache discount, hits included)."""

    calls: int = 0
    backbone_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    billed_usd: float = 0.0
    latency_s: float = 0.0
    errors: int = 0  # calls that failed for good (no completion, maybe billed by the provider)
    by_stage: dict[str, dict[str, float]] = field(default_factory=dict)
    by_role: dict[str, dict[str, float]] = field(default_factory=dict)
    cost_list_usd: float = 0.0   # the papers' formula (input + output at list price), cache hits included
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    served: dict[str, int] = field(default_factory=dict)        # served snapshot -> lines
    fingerprints: dict[str, int] = field(default_factory=dict)  # system_fingerprint -> lines
    price_notes: int = 0         # lines priced otherwise than by their served snapshot (see their price_note)

    @classmethod
    def of(cls, records: list[CallRecord] | list[dict[str, Any]]) -> CallSummary:
        s = cls()
        for r in records:
            d = r if isinstance(r, dict) else r.to_dict()
            s.calls += 1
            s.backbone_calls += 0 if d["cache_hit"] else 1
            s.prompt_tokens += d["prompt_tokens"]
            s.completion_tokens += d["completion_tokens"]
            s.cost_usd += d["cost_usd"]
            s.billed_usd += 0.0 if d["cache_hit"] else d["cost_usd"]
            s.latency_s += d["latency_s"]
            s.errors += 1 if d.get("error") else 0
            s.cost_list_usd += d.get("cost_list_usd") or 0.0
            s.cached_tokens += d.get("cached_tokens") or 0
            s.reasoning_tokens += d.get("reasoning_tokens") or 0
            if d.get("served_model"):
                s.served[d["served_model"]] = s.served.get(d["served_model"], 0) + 1
            if d.get("system_fingerprint"):
                s.fingerprints[d["system_fingerprint"]] = s.fingerprints.get(d["system_fingerprint"], 0) + 1
            s.price_notes += 1 if d.get("price_note") else 0
            st = s.by_stage.setdefault(d["stage"], {"calls": 0, "tokens": 0, "cost_usd": 0.0})
            st["calls"] += 1
            st["tokens"] += d["prompt_tokens"] + d["completion_tokens"]
            st["cost_usd"] += d["cost_usd"]
            ro = s.by_role.setdefault(d.get("role") or "default", {
                "calls": 0, "backbone_calls": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0,
                "cost_usd": 0.0, "flops": 0.0})
            ro["calls"] += 1
            ro["backbone_calls"] += 0 if d["cache_hit"] else 1
            ro["errors"] += 1 if d.get("error") else 0
            ro["prompt_tokens"] += d["prompt_tokens"]
            ro["completion_tokens"] += d["completion_tokens"]
            ro["cost_usd"] += d["cost_usd"]
            ro["flops"] += d.get("flops") or 0.0
        return s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flops_estimate(params: float | None, tokens: int) -> float | None:
    """Forward-pass FLOPs ≈ 2 × parameters × tokens, for models of known size."""
    return None if not params else 2.0 * float(params) * tokens


class CallLog(list):
    """One problem attempt's calls. Each record appended is also written to ``calls.jsonl`` at once (tagged
    with the attempt id), so the file is the bill even when the problem later errors or the run is killed."""

    def __init__(self, ledger: LedgerFile, attempt: str, journal: LedgerFile | None = None) -> None:
        super().__init__()
        self.ledger = ledger
        self.attempt = attempt
        self.journal = journal

    def append(self, record: CallRecord) -> None:  # type: ignore[override]
        super().append(record)
        self.ledger.write({**record.to_dict(), "attempt": self.attempt})

    def sent(self, request: str, key: str, problem_id: str) -> None:
        """A request is about to go out: journal it, so a kill before it returns is still on record."""
        if self.journal is not None:
            self.journal.write({"request": request, "key": key, "problem_id": problem_id, "attempt": self.attempt,
                                "time": time.time()})


class LedgerFile:
    """Append-only ``calls.jsonl``: one line per call, flushed to the OS when written (``fsync`` on request)."""

    def __init__(self, path: Path, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._fh: Any = None
        self.error: OSError | None = None  # the first failed write: the runner stops on it even if a method swallowed it

    def write(self, row: dict[str, Any]) -> None:
        try:
            if self._fh is None:
                self._fh = open(self.path, "a", encoding="utf-8")  # one handle for the run, closed by close()
            self._fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())
        except OSError as exc:  # a full or read-only disk: name the file (a write error carries no filename)
            from agentic_repro.harness.results import ResultsWriteError

            err = exc if isinstance(exc, ResultsWriteError) else ResultsWriteError(self.path, exc)
            self.error = self.error or err
            self.close()  # a half-written line is repaired (dropped) by the next run
            raise err from exc

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
