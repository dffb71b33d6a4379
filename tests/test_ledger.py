"""The ledger's arithmetic and files, exactly (the mutation run found prices, summaries and FLOPs untested:
the suite only compared sums of the same formula with themselves)."""
from __future__ import annotations

import dataclasses
import errno
import json
import os

import pytest

from agentic_repro.harness.ledger import CallLog, CallRecord, CallSummary, LedgerFile, Price, flops_estimate


def test_price_cost_is_usd_per_million_tokens():
    assert Price(0.15, 0.6).cost(1000, 500) == pytest.approx((1000 * 0.15 + 500 * 0.6) / 1e6, rel=1e-12)
    assert Price(2.0, 0.0).cost(3, 7) == pytest.approx(6e-6, rel=1e-12)
    assert Price(0.0, 5.0).cost(3, 7) == pytest.approx(35e-6, rel=1e-12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Price(1.0, 1.0).input_per_1m = 2.0  # type: ignore[misc]


def test_price_from_config_accepts_zero_or_both_rates_only():
    free = Price.from_config(0, "m")
    assert (free.input_per_1m, free.output_per_1m, free.origin, free.free) == (0.0, 0.0, "free", True)
    assert Price.from_config({"input_per_1m": "1.5", "output_per_1m": 3}, "m") == Price(1.5, 3.0)
    with pytest.raises(ValueError, match="price: 0"):
        Price.from_config(None, "m")
    for scalar in (0.5, -1, 2):
        with pytest.raises(ValueError, match="scalar price must be 0"):
            Price.from_config(scalar, "m")
    for bad in ({"input_per_1m": 1.0}, "cheap", [1, 2]):
        with pytest.raises(ValueError, match="needs input_per_1m and output_per_1m"):
            Price.from_config(bad, "m")


def test_flops_are_two_x_params_x_tokens_when_the_size_is_known():
    assert flops_estimate(None, 10) is None and flops_estimate(0, 10) is None
    assert flops_estimate(1e6, 10) == 2e7 and flops_estimate("3", 5) == 30.0


def rec(**kw) -> CallRecord:
    base = dict(run_id="r", problem_id="p", method="m", stage="answer", model="x", prompt_tokens=10,
                completion_tokens=5, latency_s=0.5, cache_hit=False, retries=0, cost_usd=0.25, flops=100.0,
                sample_index=0, seed=1, temperature=0.0)
    return CallRecord(**{**base, **kw})


def test_call_summary_totals_by_stage_and_by_role_exactly():
    assert CallSummary().to_dict() == {"calls": 0, "backbone_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                       "cost_usd": 0.0, "billed_usd": 0.0, "latency_s": 0.0, "errors": 0,
                                       "by_stage": {}, "by_role": {}, "cost_list_usd": 0.0, "cached_tokens": 0,
                                       "reasoning_tokens": 0, "served": {}, "fingerprints": {}, "price_notes": 0}
    assert rec().attempts == 1 and rec().error is None
    rows = [rec(), rec(cache_hit=True, stage="verify", role="critic", flops=None, latency_s=0.0),
            rec(prompt_tokens=0, completion_tokens=0, cost_usd=0.0, error="boom", role="critic", flops=None).to_dict()]
    s = CallSummary.of(rows)
    assert (s.calls, s.backbone_calls, s.prompt_tokens, s.completion_tokens, s.errors) == (3, 2, 20, 10, 1)
    assert s.cost_usd == pytest.approx(0.5) and s.billed_usd == pytest.approx(0.25) and s.latency_s == pytest.approx(1.0)
    assert s.by_stage == {"answer": {"calls": 2, "tokens": 15, "cost_usd": 0.25},
                          "verify": {"calls": 1, "tokens": 15, "cost_usd": 0.25}}
    assert s.by_role == {
        "default": {"calls": 1, "backbone_calls": 1, "errors": 0, "prompt_tokens": 10, "completion_tokens": 5,
                    "cost_usd": 0.25, "flops": 100.0},
        "critic": {"calls": 2, "backbone_calls": 1, "errors": 1, "prompt_tokens": 10, "completion_tokens": 5,
                   "cost_usd": 0.25, "flops": 0.0}}


def test_ledger_file_lines_fsync_and_journal(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    plain = LedgerFile(tmp_path / "calls.jsonl")
    assert plain.fsync is False
    log = CallLog(plain, "att1")  # no journal: sent() is a no-op
    log.sent("r1", "k", "p")
    log.append(rec(stage="é"))
    assert synced == []
    line = (tmp_path / "calls.jsonl").read_text(encoding="utf-8")
    assert '"stage": "é"' in line and json.loads(line)["attempt"] == "att1" and line.endswith("\n")
    journal = LedgerFile(tmp_path / "requests.jsonl", fsync=True)
    CallLog(plain, "att2", journal=journal).sent("r2", "key", "p9")
    assert len(synced) == 1
    row = json.loads((tmp_path / "requests.jsonl").read_text())
    assert (row["request"], row["key"], row["problem_id"], row["attempt"]) == ("r2", "key", "p9", "att2")
    plain.close()
    journal.close()


class _Broken:
    def __init__(self, err: int) -> None:
        self.err = err

    def write(self, text):
        raise OSError(self.err, os.strerror(self.err))

    def flush(self):
        pass

    def close(self):
        raise OSError(self.err, os.strerror(self.err))  # closing a file on a full disk fails too


def test_a_failed_ledger_write_is_named_and_the_first_failure_kept(tmp_path):
    from agentic_repro.harness.results import ResultsWriteError

    led = LedgerFile(tmp_path / "calls.jsonl")
    led._fh = _Broken(errno.ENOSPC)
    with pytest.raises(ResultsWriteError, match=r"calls.jsonl: \[Errno 28\]"):
        led.write({"a": 1})
    first = led.error
    led._fh = _Broken(errno.EROFS)
    with pytest.raises(ResultsWriteError, match=r"Errno 30"):
        led.write({"a": 2})
    assert led.error is first and first.errno == errno.ENOSPC
