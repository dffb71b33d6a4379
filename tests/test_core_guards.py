"""Issue 20, the core: the bill is complete, run identity at both edges, errors that name the file, latency
without scoring, scoring retried once, and a resume that does not re-run finished problems. Each test fails
on the code before the fix (or on the named mutation)."""
from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest

from agentic_repro.harness.results import compute_metrics, read_jsonl_tolerant
from tests.conftest import EchoBenchmark, make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_runner import arithmetic, load

ONCE = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}


# ---- the bill is complete ------------------------------------------------------------------------------------

class _FullDisk:
    """An sqlite connection whose writes fail like a full disk (reads pass through)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, *args):
        if sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._db, name)


def test_a_failing_cache_write_keeps_the_paid_call_on_the_bill_and_stops_naming_the_cache(tmp_path, tiny_data,
                                                                                         monkeypatch):
    import agentic_repro.harness.cache as cache_mod
    from agentic_repro.harness.cache import CacheError

    real_connect = sqlite3.connect
    monkeypatch.setattr(cache_mod.sqlite3, "connect", lambda *a, **k: _FullDisk(real_connect(*a, **k)))
    spec = make_spec(tmp_path, ONCE, limit=4)
    bb = ScriptedBackbone(arithmetic)
    with pytest.raises(CacheError) as info:
        run(spec, bb)
    msg = str(info.value)
    assert str(tmp_path / "cache.sqlite") in msg and "database or disk is full" in msg and "cache.mode=off" in msg
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    answered = [c for c in calls if not c["error"]]
    # before: the cache write came first, so every answered, paid request was missing from calls.jsonl
    assert bb.requests and len(answered) == len(bb.requests)
    assert not (spec.out_dir / "predictions.jsonl").exists() or not read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")


def test_a_missing_or_torn_ledger_makes_the_run_incomplete_and_the_resume_repairs_it(tmp_path, tiny_data):
    from agentic_repro.harness.run import incomplete_message

    spec = make_spec(tmp_path, ONCE, limit=4)
    first = run(spec, ScriptedBackbone(arithmetic))
    assert first["complete"] is True and first["ledger_gap"] is None
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    calls_path = spec.out_dir / "calls.jsonl"
    lines = calls_path.read_text().splitlines(keepends=True)
    calls_path.write_text("".join(lines[:2]) + lines[2][:30])  # a torn ledger: two whole lines, one cut
    torn = compute_metrics(preds, read_jsonl_tolerant(calls_path), "accuracy", selected=4)
    # before: complete with a bill of two calls for four answers
    assert torn["complete"] is False and torn["ledger_gap"]["n"] == 2
    assert "calls.jsonl does not cover 2 answered problem(s)" in incomplete_message(torn)
    calls_path.unlink()
    gone = compute_metrics(preds, [], "accuracy", selected=4)
    assert gone["complete"] is False and gone["ledger_gap"]["n"] == 4 and gone["totals"]["cost_usd"] == 0
    replay = ScriptedBackbone(arithmetic)
    again = run(spec, replay)  # the four answers are re-made from the cache: the bill covers them again
    assert replay.requests == [] and again["complete"] is True and again["ledger_gap"] is None
    assert first["totals"]["cost_usd"] > 0 and again["totals"]["cost_usd"] == pytest.approx(first["totals"]["cost_usd"])
    assert again["score"] == first["score"]


class _FullFile:
    """A file on a full disk: opening works, writing fails with ENOSPC (and, like a real write, no filename)."""

    def __init__(self, *a, **k) -> None:
        pass

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    flush = fileno = lambda self: None

    def close(self) -> None:
        pass


def test_a_full_results_disk_names_the_ledger_file(tmp_path, tiny_data, monkeypatch):
    from agentic_repro import harness
    from agentic_repro.harness.results import ResultsWriteError
    from agentic_repro.harness.run import disk_message

    spec = make_spec(tmp_path, ONCE, limit=3)
    monkeypatch.setattr(harness.ledger, "open", lambda path, *a, **k: _FullFile() if Path(path).name == "calls.jsonl"
                        else open(path, *a, **k), raising=False)
    with pytest.raises(ResultsWriteError) as info:
        run(spec, ScriptedBackbone(arithmetic))
    line = disk_message(info.value)
    assert line.startswith(f"cannot write {spec.out_dir / 'calls.jsonl'}: [Errno 28]"), line  # before: (unknown path)
    assert not read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")  # no answer without its bill


# ---- resume re-runs nothing finished (the cache would hide it) -----------------------------------------------

SOLVED: list[str] = []


async def counting(problem, ctx):
    from tests.fake_methods import ask_once

    SOLVED.append(problem.id)
    return await ask_once(problem, ctx)


def test_resume_does_not_solve_finished_problems_again(tmp_path, tiny_data):
    method = {"name": "m", "solver": "tests.test_core_guards:counting", "params": {}}
    SOLVED.clear()
    run(make_spec(tmp_path, method, limit=3), ScriptedBackbone(arithmetic))
    assert sorted(SOLVED) == ["p0", "p1", "p2"]
    SOLVED.clear()
    metrics = run(make_spec(tmp_path, method), ScriptedBackbone(arithmetic))
    # mutation `todo = list(tasks)`: every problem solved again (cache hits), duplicated predictions and ledger lines
    assert sorted(SOLVED) == ["p3", "p4", "p5", "p6", "p7"] and metrics["n"] == 8
    spec = make_spec(tmp_path, method)
    assert len(read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")) == 8
    assert len(read_jsonl_tolerant(spec.out_dir / "calls.jsonl")) == 8


# ---- run identity at both edges ------------------------------------------------------------------------------

def test_data_changed_under_the_same_ids_is_refused_naming_the_file(tmp_path, tiny_data):
    from agentic_repro.harness.identity import IdentityMismatch

    spec = make_spec(tmp_path, ONCE, limit=3)
    run(spec, ScriptedBackbone(arithmetic))
    ident = json.loads((spec.out_dir / "identity.json").read_text())
    data_file = tiny_data / "tiny" / "test.jsonl"
    assert ident["data"]["sha256"] and ident["data"]["file"] == str(data_file)
    rows = [json.loads(x) for x in data_file.read_text().splitlines()]
    rows[0]["a"] = "999"  # the same ids, another gold
    data_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bb = ScriptedBackbone(arithmetic)
    with pytest.raises(IdentityMismatch) as info:
        run(make_spec(tmp_path, ONCE, limit=5), bb)
    msg = str(info.value)
    assert str(data_file) in msg and "restart=true" in msg and "experiment=" in msg
    assert bb.requests == []  # before: two answers mixed in under the new data


@pytest.mark.parametrize("key,value", [("split", "validate"), ("extract", "flexible"), ("version", "2")])
def test_a_changed_benchmark_block_is_refused(tmp_path, tiny_data, key, value):
    from agentic_repro.harness.identity import IdentityMismatch

    run(make_spec(tmp_path, ONCE, limit=2), ScriptedBackbone(arithmetic))
    changed = make_spec(tmp_path, ONCE, limit=2)
    changed.benchmark_cfg["splits"]["validate"] = "tiny/test.jsonl"  # the same file under another split
    changed.benchmark_cfg[key] = value  # (full_config["benchmark"] is this dict)
    with pytest.raises(IdentityMismatch, match=f"benchmark.{key}"):  # mutation: the benchmark block made neutral
        run(changed, ScriptedBackbone(arithmetic))


def test_the_endpoint_is_not_the_model(tmp_path):
    """A vLLM server on another port, or localhost vs 127.0.0.1: one identity, one cache key."""
    from agentic_repro.harness.backbones import build_backbone
    from agentic_repro.harness.identity import backbone_identity
    from tests.fault_server import backbone_config

    async def ident(url: str) -> dict:
        bb = await build_backbone(backbone_config(url), run_dir=tmp_path, seed=0)
        try:
            return backbone_identity(bb)
        finally:
            await bb.aclose()

    a = asyncio.run(ident("http://localhost:8000/v1"))
    b = asyncio.run(ident("http://127.0.0.1:8011/v1"))
    assert a == b and "8000" not in json.dumps(a)


def test_a_server_restarted_on_another_port_resumes_and_replays(tmp_path, monkeypatch):
    from tests.fault_server import FaultServer
    from tests.test_faults import fault_spec, run_spec, tiny_rows

    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 4)))
    once = {"name": "once", "solver": "tests.fake_methods:ask_once", "params": {}}
    with FaultServer() as first:
        spec = fault_spec(tmp_path, first.url, method=once)
        spec.benchmark_cfg["limit"] = 2
        run_spec(spec)
    with FaultServer() as second:  # another port
        assert second.url != first.url
        resumed = run_spec(fault_spec(tmp_path, second.url, method=once))  # before: refused (backbone identity)
        assert resumed["n"] == 4 and second.received == 2  # only the two unfinished problems
        replay = run_spec(fault_spec(tmp_path, second.url.replace("127.0.0.1", "localhost"), method=once,
                                     results="elsewhere"))
        assert replay["n"] == 4 and second.received == 2  # before: every call paid again (cache keyed by URL)


# ---- errors that name the file or key ------------------------------------------------------------------------

def test_a_corrupt_identity_json_names_the_file_and_the_fix(tmp_path, tiny_data):
    from agentic_repro.harness.results import CorruptFile

    spec = make_spec(tmp_path, ONCE, limit=2)
    run(spec, ScriptedBackbone(arithmetic))
    (spec.out_dir / "identity.json").write_text('{"identity_sha256": ')
    with pytest.raises(CorruptFile) as info:  # before: "Expecting value: line 1 column 21"
        run(spec, ScriptedBackbone(arithmetic))
    assert str(spec.out_dir / "identity.json") in str(info.value) and "restart=true" in str(info.value)


def test_read_json_names_the_file_what_it_is_and_the_fix(tmp_path):
    from agentic_repro.harness.results import CorruptFile, read_json

    assert read_json(tmp_path / "absent.json", what="x", default={"a": 1}) == {"a": 1}
    (tmp_path / "ok.json").write_text('{"a": 2}')
    assert read_json(tmp_path / "ok.json", what="x") == {"a": 2}
    (tmp_path / "search_state.json").write_text("")
    with pytest.raises(CorruptFile, match=r"search_state.json \(a search's checkpoint\) is damaged.*it is empty.*"
                                          r"fix: delete it to restart the search"):
        read_json(tmp_path / "search_state.json", what="a search's checkpoint", fix="delete it to restart the search")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(CorruptFile, match="bin.json"):
        read_json(tmp_path / "bin.json", what="x")


def test_a_corrupt_response_cache_names_the_file_and_the_fix(tmp_path, tiny_data):
    from agentic_repro.harness.cache import CacheError
    from agentic_repro.harness.run import disk_message

    (tmp_path / "cache.sqlite").write_bytes(b"this is not an sqlite database" * 200)
    spec = make_spec(tmp_path, ONCE, limit=2)
    bb = ScriptedBackbone(arithmetic)
    with pytest.raises(CacheError) as info:  # before: sqlite3.DatabaseError traceback, "file is not a database"
        run(spec, bb)
    line = disk_message(info.value)
    assert str(tmp_path / "cache.sqlite") in line and "not a database" in line and "cache.path=" in line
    assert bb.requests == []


def test_a_cache_entry_that_is_not_json_names_the_file(tmp_path):
    from agentic_repro.harness.cache import CacheError, ResponseCache

    c = ResponseCache(tmp_path / "c.sqlite")
    c._db.execute("INSERT INTO responses VALUES ('k', '{torn', 0)")
    with pytest.raises(CacheError, match="c.sqlite"):
        c.get("k")
    c.close()


def test_a_corrupt_method_state_names_the_file(tmp_path, tiny_data):
    from agentic_repro.harness.results import CorruptFile

    method = {"name": "w", "solver": "tests.fake_methods:WindowCounter", "params": {}}
    spec = make_spec(tmp_path, method, limit=4)
    run(spec, ScriptedBackbone(arithmetic))
    (spec.out_dir / "method_state.json").write_text("{")
    with pytest.raises(CorruptFile, match="method_state.json"):
        run(spec, ScriptedBackbone(arithmetic))


# ---- latency and scoring -------------------------------------------------------------------------------------

class SlowScorer(EchoBenchmark):
    async def score(self, text, problem):
        await asyncio.sleep(0.6)
        return await super().score(text, problem)


def test_latency_excludes_scoring_time(tmp_path, tiny_data):
    spec = make_spec(tmp_path, ONCE, limit=2)
    spec.benchmark_cfg["kind"] = "tests.test_core_guards.SlowScorer"
    run(spec, ScriptedBackbone(arithmetic))
    preds, _, _ = load(spec)
    assert all(p["latency_s"] < 0.5 for p in preds), [p["latency_s"] for p in preds]  # before: >= 0.6


class FlakyScorer(EchoBenchmark):
    """An evaluator that cannot judge the first ``fails`` times it is asked about a problem."""

    fails = 1
    seen: dict[str, int] = {}

    async def score(self, text, problem):
        n = self.seen[problem.id] = self.seen.get(problem.id, 0) + 1
        if n <= self.fails:
            raise TimeoutError("the equivalence child did not answer")
        return await super().score(text, problem)


@pytest.mark.parametrize("fails,retries,errors", [(1, None, 0), (2, None, 2), (1, 0, 2)])
def test_a_scoring_failure_is_retried_once_then_an_error(tmp_path, tiny_data, fails, retries, errors):
    FlakyScorer.fails, FlakyScorer.seen = fails, {}
    spec = make_spec(tmp_path, ONCE, limit=2, runner=None if retries is None else {"score_retries": retries})
    spec.benchmark_cfg["kind"] = "tests.test_core_guards.FlakyScorer"
    metrics = run(spec, ScriptedBackbone(arithmetic))
    assert metrics["n_errors"] == errors and metrics["complete"] is (errors == 0)
    if errors:
        assert "ScoringError: TimeoutError" in metrics["first_error"]["error"]
    else:
        assert metrics["n"] == 2 and FlakyScorer.seen == {"p0": 2, "p1": 2}


def test_score_retries_is_validated_by_name():
    from agentic_repro.harness.validate import ConfigError, validate_run_config
    from tests.conftest import compose

    with pytest.raises(ConfigError, match="runner.score_retries=-1"):
        validate_run_config(compose(["runner.score_retries=-1"]))


def test_the_peft_folder_beside_a_gguf_is_checked_before_loading(tmp_path):
    from agentic_repro.harness.backbone import BackboneError
    from agentic_repro.harness.embedded.peft import peft_dir_for
    from tests.adapter_files import write_gguf_lora, write_peft_dir

    gguf = write_gguf_lora(tmp_path / "planner.gguf")
    folder = write_peft_dir(tmp_path / "planner")
    assert peft_dir_for(gguf) == folder
    (folder / "adapter_model.safetensors").write_bytes(b"")  # before: accepted, failed inside peft
    with pytest.raises(BackboneError, match=f"{folder} is not a usable peft adapter folder: .*is empty"):
        peft_dir_for(gguf)


# ---- the cache's own contract (what the mutation run found untested) -----------------------------------------

def test_cache_keys_are_stable_and_the_adapter_enters_only_when_set():
    import hashlib

    from agentic_repro.harness.cache import cache_key

    msgs = [{"role": "user", "content": "Größe?", "name": "ignored"}]
    params = {"temperature": 0.0, "seed": 7, "stop": None}
    payload = {"backbone": "bb", "messages": [{"role": "user", "content": "Größe?"}],
               "params": {"seed": 7, "temperature": 0.0}, "sample_index": 0}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    golden = hashlib.sha256(blob.encode("utf-8")).hexdigest()  # keys written by earlier versions stay valid
    assert cache_key("bb", msgs, params, 0) == cache_key("bb", msgs, params, 0, None) == golden
    with_adapter = cache_key("bb", msgs, params, 0, {"name": "a", "sha256": "x"})
    assert with_adapter != golden and cache_key("bb", msgs, params, 1) != golden


def test_cache_counts_closes_and_makes_its_folder(tmp_path):
    from agentic_repro.harness.cache import ResponseCache

    assert len(ResponseCache(tmp_path / "off.sqlite", "off")) == 0
    c = ResponseCache(tmp_path / "new" / "dir" / "c.sqlite")  # a folder that does not exist yet
    c.put("a", {"v": 1})
    c.put("b", {"v": 2})
    assert len(c) == 2 and c.get("a") == {"v": 1}
    c.close()
    assert len(c) == 0 and c.get("a") is None  # closed: nothing served after the run ended
    c.close()
    ro = ResponseCache(tmp_path / "new" / "dir" / "c.sqlite", "read-only")
    ro.put("c", {"v": 3})
    assert len(ro) == 2 and ro.get("c") is None
    ro.close()


async def swallowing(problem, ctx):
    """A method that catches every failure of its call and answers anyway (as some fallbacks do)."""
    from agentic_repro.harness.types import Solution

    try:
        return Solution(await ctx.ask(problem.fields["q"], stage="answer"))
    except Exception:  # noqa: BLE001
        return Solution("ANSWER: 0")


def test_a_failed_cache_write_stops_the_run_even_when_the_method_swallows_it(tmp_path, tiny_data, monkeypatch):
    import agentic_repro.harness.cache as cache_mod
    from agentic_repro.harness.cache import CacheError

    real_connect = sqlite3.connect
    monkeypatch.setattr(cache_mod.sqlite3, "connect", lambda *a, **k: _FullDisk(real_connect(*a, **k)))
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.test_core_guards:swallowing", "params": {}}, limit=3)
    with pytest.raises(CacheError, match="cannot write the response cache") as info:
        run(spec, ScriptedBackbone(arithmetic))
    assert info.value.errno == 0  # an sqlite failure has no OS errno: none is invented
    assert not read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")  # no answer made without its cache write
