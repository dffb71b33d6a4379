"""The table runner keeps the backbone's slots busy by running independent runs side by side (issue 33), on the
scripted backbone (no model): each call waits ``delay_s`` so overlapping runs are visible, and the script answers
from the prompt so every run's answers are its own.

- ``make reproduce-table1`` (``agentic-repro table table1``) with ``concurrent_runs=3``: six one-call runs; at
  some moment exactly three calls are in flight (never more: the bound holds), and the progress line per finished
  run counts 1..6 with every run once.
- six two-problem runs one at a time and three side by side (into other results folders) give the same answers,
  scores and call keys; a side-by-side pass over the cache the sequential pass filled replays every call.
- two runs of one folder (a first pass and the full size) never overlap: the second starts after the first ends.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path

import pytest

from agentic_repro.harness import cli
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.test_launchers_identity import gsm8k_data  # noqa: F401 - the fixture: two GSM8K problems

DELAY_S = 1.0
SEEDS = "1,2,3"   # x methods io, cot = 6 runs of one call each

_CALLS: list[tuple[float, str]] = []   # (monotonic time the call's reply was made, its prompt digest)
_CALLS_LOCK = threading.Lock()


def prompt_script():
    """The scripted backbone's script: an answer that depends on the prompt (so runs differ), and a record of when
    each call ended (its ``delay_s`` wait is the interval before that)."""
    def script(messages, sampling):
        text = "\n".join(m["content"] for m in messages)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with _CALLS_LOCK:
            _CALLS.append((time.monotonic(), digest[:12]))
        return f"Working it out. The answer is {int(digest[:4], 16) % 10}."
    return script


def peak_in_flight(ends: list[float], delay: float) -> int:
    """Most calls in flight at once, each call being the interval [end - delay, end]."""
    events = sorted([(t - delay, 1) for t in ends] + [(t, -1) for t in ends], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _table1(root: Path, cache: Path, concurrent: int, *extra: str) -> list[str]:
    argv = ["table", "table1", "backbone=scripted", "methods=io,cot", "benchmarks=gsm8k", f"seeds={SEEDS}", "limit=1",
            f"concurrent_runs={concurrent}", f"results_root={root}", f"cache.path={cache}",
            "backbone.script=tests.test_launchers_concurrent:prompt_script", f"backbone.delay_s={DELAY_S}",
            "sandbox.isolation=process", *extra]
    assert cli.main(argv) == 0
    return argv


def _answers(root: Path) -> dict[str, list[tuple]]:
    out = {}
    for preds in sorted((root / "table1").glob("gsm8k/*/scripted/seed=*/predictions.jsonl")):
        run = str(preds.parent.relative_to(root))
        calls = read_jsonl_tolerant(preds.parent / "calls.jsonl")
        out[run] = sorted((p["id"], p["raw_output"], p["score"]) for p in read_jsonl_tolerant(preds))
        out[run + " calls"] = sorted(c["key"] for c in calls)
    return out


def test_runs_go_side_by_side_bounded_and_one_line_per_finished_run(tmp_path, gsm8k_data, capsys):
    _CALLS.clear()
    _table1(tmp_path / "results", tmp_path / "c.sqlite", 3)
    err = capsys.readouterr().err
    assert len(_CALLS) == 6
    assert peak_in_flight([t for t, _ in _CALLS], DELAY_S) == 3, _CALLS   # three at once, never four
    done = [ln for ln in err.splitlines() if re.match(r"\[\d+/\d+ runs done\] ", ln)]
    assert [ln.split("]")[0] for ln in done] == [f"[{i}/6 runs done" for i in range(1, 7)]
    labels = sorted(ln.split("] ", 1)[1].split(":")[0] for ln in done)
    assert labels == sorted(f"{m}/gsm8k/scripted/seed={s}" for m in ("io", "cot") for s in SEEDS.split(","))
    assert "6 runs planned, 3 side by side" in err
    runtime = json.loads((tmp_path / "results" / "table1" / "runtime-scripted.json").read_text())
    assert runtime["concurrent_runs"] == 3 and len(runtime["runs"]) == 6


def _plan(root: Path, cache: Path) -> list:
    from agentic_repro.scripts.runs import Planned, plan

    base = ["experiment=table1", "benchmark=gsm8k", "backbone=scripted", "limit=2", f"backbone.delay_s={DELAY_S}",
            "backbone.script=tests.test_launchers_concurrent:prompt_script", f"results_root={root}",
            f"cache.path={cache}", "runner.progress=false", "sandbox.isolation=process"]
    return plan([Planned(f"{m}/{s}", [*base, f"method={m}", f"seed={s}"]) for m in ("io", "cot")
                 for s in SEEDS.split(",")], [])


def test_side_by_side_gives_the_sequential_answers_and_shares_its_cache(tmp_path, gsm8k_data):
    from agentic_repro.scripts.concurrent_runs import execute_concurrently

    _CALLS.clear()
    execute_concurrently(_plan(tmp_path / "seq", tmp_path / "c.sqlite"), concurrency=1, log=lambda _: None)
    assert peak_in_flight([t for t, _ in _CALLS], DELAY_S) == 2   # one run at a time (its two problems at once)
    _CALLS.clear()
    execute_concurrently(_plan(tmp_path / "side", tmp_path / "other.sqlite"), concurrency=3, log=lambda _: None)
    assert peak_in_flight([t for t, _ in _CALLS], DELAY_S) == 6   # three runs at once
    seq, side = _answers(tmp_path / "seq"), _answers(tmp_path / "side")
    assert len(seq) == 12 and all(len(v) == 2 for v in seq.values()) and seq == side
    _CALLS.clear()
    replayed = execute_concurrently(_plan(tmp_path / "replayed", tmp_path / "c.sqlite"), concurrency=3,
                                    log=lambda _: None)   # over the sequential pass's cache: every call replayed
    assert _CALLS == [] and _answers(tmp_path / "replayed") == seq
    assert {it.metrics["this_invocation"]["backbone_calls"] for it in replayed} == {0}


def test_two_runs_of_one_folder_never_overlap(tmp_path, gsm8k_data):
    """A first pass (limit=1) and the full size (limit=2) of one folder, and an independent run: the folder's
    second run waits for its first (plan order), the independent one goes beside them."""
    from agentic_repro.scripts.concurrent_runs import execute_concurrently
    from agentic_repro.scripts.runs import Planned, plan

    base = ["experiment=table1", "method=io", "benchmark=gsm8k", "backbone=scripted", f"backbone.delay_s={DELAY_S}",
            "backbone.script=tests.test_launchers_concurrent:prompt_script", f"results_root={tmp_path / 'r'}",
            f"cache.path={tmp_path / 'c.sqlite'}", "runner.progress=false", "sandbox.isolation=process"]
    items = plan([Planned("first pass", [*base, "seed=1", "limit=1"]), Planned("full", [*base, "seed=1", "limit=2"]),
                  Planned("other", [*base, "seed=2", "limit=1"])], [])
    assert [it.state for it in items] == ["new", "new", "new"], [it.error for it in items]
    events: list[str] = []
    execute_concurrently(items, concurrency=4, log=events.append, on_done=lambda it: events.append(f"done {it.label}"))
    assert [it.state for it in items] == ["done", "done", "done"], [it.error for it in items]
    starts = [e for e in events if re.match(r"\[\d/3\] ", e) or e.startswith("done ")]
    assert starts.index("done first pass") < next(i for i, e in enumerate(starts) if e.startswith("[") and "full" in e)
    assert starts[:2] == ["[1/3] first pass (new)", "[2/3] other (new)"]   # the independent run goes beside
    assert items[1].metrics["n"] == 2 and items[1].metrics["this_invocation"]["backbone_calls"] == 1  # resumed


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_concurrent_runs_is_refused(value):
    from agentic_repro.scripts.reproduce_table1 import concurrent_runs

    with pytest.raises(SystemExit, match="concurrent_runs"):
        concurrent_runs({"concurrent_runs": value, "backbone": "scripted"}, {}, [])
