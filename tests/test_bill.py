"""The bill is the provider's bill: runs against a loopback double that bills like OpenAI's chat-completions API
(tests/fault_server.py's OpenAIBilling: snapshots, fingerprints, prompt caching, reasoning tokens, error bodies, and
its own bill from its own price list), through the real command line and HTTP client."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_repro.harness.backbone import BackboneError, OpenAICompatibleBackbone, RetryPolicy
from agentic_repro.harness.cache import ResponseCache
from agentic_repro.harness.llm import LLMClient
from agentic_repro.harness.pricing import Price, PriceError, PriceTable, Usage, price_for_model, price_table
from tests.fault_server import FaultServer, OpenAIBilling

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "omicron", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "river", "mountain", "harbour", "castle", "village", "meadow", "forest", "lantern"]


def hotpot_rows(n: int) -> list[dict]:
    """HotpotQA records in AFlow's format whose context is long enough (> 1,024 tokens) for OpenAI's prompt cache."""
    rows = []
    for i in range(n):
        paras = [[f"Title {i}-{j}", [" ".join(WORDS[(i + j + k) % len(WORDS)] for k in range(60)) + "."]]
                 for j in range(24)]
        rows.append({"_id": f"hq{i}", "question": f"Which river flows past castle {i}?", "answer": f"river {i}",
                     "type": "bridge", "context": paras, "supporting_facts": []})
    return rows


def cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    data = tmp_path / "data"
    (data / "aflow_splits").mkdir(parents=True, exist_ok=True)
    (data / "aflow_splits" / "hotpotqa_validate.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in hotpot_rows(3)))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "AGENTIC_REPRO_DATA": str(data)}
    return subprocess.run([sys.executable, "-m", "agentic_repro.harness.run", "benchmark=hotpotqa",
                           "backbone=gpt-4o-mini", "backbone.retry.base_delay_s=0.01", "backbone.retry.max_delay_s=0.05",
                           "backbone.rate_limit.mode=fixed", "runner.fail_fast_after=0",
                           *overrides, f"results_root={tmp_path}/results", f"cache.path={tmp_path}/c.sqlite",
                           "runner.progress=false"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def ledger(tmp_path: Path) -> list[dict]:
    files = list((tmp_path / "results").rglob("calls.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def test_self_refine_hotpotqa_is_billed_as_the_provider_bills(tmp_path):
    """Cached prompt tokens at OpenAI's cached rate: the ledger's bill equals the double's own within 1%, and the
    papers' list formula (input + output at list price) is reported beside it."""
    with FaultServer(billing=OpenAIBilling()) as srv:
        r = cli(tmp_path, "method=self_refine", "limit=3", f"backbone.base_url={srv.url}")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = ledger(tmp_path)
    paid = [x for x in rows if not x["cache_hit"]]
    billed = sum(x["cost_usd"] for x in paid)
    assert len(paid) == len(srv.billing.lines) >= 6
    assert billed == pytest.approx(srv.billing.bill_usd, rel=0.01)
    cached = sum(x["cached_tokens"] for x in paid)
    assert cached > 0 and cached == sum(li["usage"]["prompt_tokens_details"]["cached_tokens"] for li in srv.billing.lines)
    listed = sum(x["cost_list_usd"] for x in paid)
    assert listed > billed * 1.05  # the papers' formula prices cached tokens at full price
    assert {x["served_model"] for x in rows} == {"gpt-4o-mini-2024-07-18"}
    assert {x["system_fingerprint"] for x in rows} == {srv.billing.fingerprint_of("gpt-4o-mini-2024-07-18")}
    assert {x["priced_as"] for x in rows} == {"gpt-4o-mini"} and not any(x["price_note"] for x in rows)
    metrics = json.loads(next((tmp_path / "results").rglob("metrics.json")).read_text())
    assert metrics["totals"]["served"] == {"gpt-4o-mini-2024-07-18": len(rows)}
    assert metrics["totals"]["cost_list_usd"] == pytest.approx(sum(x["cost_list_usd"] for x in rows), rel=1e-9)
    meta = json.loads(next((tmp_path / "results").rglob("meta.json")).read_text())
    assert meta["served"] == {"snapshots": {"gpt-4o-mini-2024-07-18": len(rows)},
                              "fingerprints": {srv.billing.fingerprint_of("gpt-4o-mini-2024-07-18"): len(rows)}}


def test_o4_mini_runs_with_max_completion_tokens_and_is_priced_as_o4_mini(tmp_path):
    with FaultServer(billing=OpenAIBilling()) as srv:
        r = cli(tmp_path, "method=cot", "limit=2", "backbone.model=o4-mini", f"backbone.base_url={srv.url}",
                "backbone.reasoning_effort=low")
    assert r.returncode == 0, r.stderr[-3000:]
    sent = srv.billing.requests
    assert sent and all("max_completion_tokens" in b and "max_tokens" not in b and "temperature" not in b
                        and b["reasoning_effort"] == "low" for b in sent)
    rows = ledger(tmp_path)
    o4 = price_for_model("o4-mini")
    for x in rows:
        assert x["priced_as"] == "o4-mini" and x["served_model"] == "o4-mini-2025-04-16"
        assert x["reasoning_tokens"] > 0 and "temperature" in (x["dropped_params"] or [])
        usage = Usage(x["prompt_tokens"], x["completion_tokens"], x["cached_tokens"])
        assert x["cost_usd"] == pytest.approx(o4.bill(usage), rel=1e-9)
    assert sum(x["cost_usd"] for x in rows) == pytest.approx(srv.billing.bill_usd, rel=0.01)


def test_an_unknown_model_is_refused_before_any_call(tmp_path):
    with FaultServer(billing=OpenAIBilling()) as srv:
        r = cli(tmp_path, "method=io", "limit=1", "backbone.model=gpt-9-turbo", f"backbone.base_url={srv.url}")
        assert srv.received == 0
    assert r.returncode != 0 and "gpt-9-turbo" in r.stderr and "price table" in r.stderr
    assert not list((tmp_path / "results").rglob("calls.jsonl"))


def test_a_user_set_price_is_recorded_as_such():
    p = Price.from_config({"input_per_1m": 2, "output_per_1m": 4}, "mine", model="my-gateway-model")
    assert (p.origin, p.model, p.bill(Usage(10**6, 10**6))) == ("config", None, 6.0)
    assert price_table().served("anything", p) == (p, None)  # never second-guessed by the served name


# ---- the client against the double, without the run around it ---------------------------------------------------

def _client(url: str, tmp_path: Path, model: str = "gpt-4o-mini", **kw) -> tuple[LLMClient, list]:
    bb = OpenAICompatibleBackbone(name="t", model=model, base_url=url, api_key="k", price=price_for_model(model),
                                  supports_n=True, retry=RetryPolicy(max_attempts=4, base_delay_s=0.01,
                                                                     max_delay_s=0.02, timeout_s=5), **kw)
    records: list = []
    return LLMClient(bb, ResponseCache(tmp_path / "c.sqlite", mode="off"), run_id="r", method="m",
                     defaults={"temperature": 0.0, "max_tokens": 64}), records


def _ask(client: LLMClient, records: list, text: str = "What is 2+2?", n: int = 1):
    async def go():
        try:
            return await client.generate([{"role": "user", "content": text}], stage="s", problem_id="p", seed=1,
                                         sink=records.append, n=n)
        finally:
            await client.backbone.aclose()
    return asyncio.run(go())


def test_a_reply_without_usage_is_an_error_never_free(tmp_path):
    with FaultServer(billing=OpenAIBilling(), fail_all="no_usage") as srv:
        client, records = _client(srv.url, tmp_path)
        with pytest.raises(BackboneError) as err:
            _ask(client, records)
        assert srv.received == 1  # not asked again: a retry would be charged again
    assert err.value.kind == "no_usage"
    [rec] = records
    assert rec.error and rec.error_kind == "no_usage" and "unknown" in rec.price_note


def test_a_retried_200_is_billed_twice(tmp_path):
    """A 200 with null content is retried; the provider charged both replies, and so does the ledger."""
    billing = OpenAIBilling()
    with FaultServer(billing=billing, rate=1.0, kinds=("null_content",), seed=0) as srv:
        srv.rate = 0.0
        srv.fail_all = None
        # first reply null, then good: a one-shot fault through the server's own switch
        srv._decide = _once("null_content", srv._decide)  # type: ignore[method-assign]
        client, records = _client(srv.url, tmp_path)
        [comp] = _ask(client, records)
    assert comp.text and len(billing.lines) == 2
    [rec] = records
    assert rec.attempts == 2 and rec.retried_billed_usd == pytest.approx(billing.lines[0]["usd"], rel=1e-9)
    assert rec.cost_usd == pytest.approx(billing.bill_usd, rel=1e-9)


def _once(kind, decide):
    state = {"n": 0}

    def inner(key):
        state["n"] += 1
        return kind if state["n"] == 1 else None
    return inner


def test_snapshot_fingerprint_and_tier_are_on_every_line(tmp_path):
    billing = OpenAIBilling(snapshots={"gpt-4o-mini": "gpt-4o-mini-2099-01-01"}, fingerprint="fp_other",
                            prices={"gpt-4o-mini-2099-01-01": (0.15, 0.075, 0.60)})
    with FaultServer(billing=billing) as srv:
        client, records = _client(srv.url, tmp_path)
        _ask(client, records, n=2)
    assert [(r.served_model, r.system_fingerprint, r.service_tier) for r in records] == \
        [("gpt-4o-mini-2099-01-01", "fp_other", "standard")] * 2
    # a snapshot the table lacks is priced as the requested model, and the line says so
    assert all(r.priced_as == "gpt-4o-mini" and "not in the price table" in r.price_note for r in records)


def test_the_reasoning_double_refuses_max_tokens_as_openai_does(tmp_path):
    """The double's 400 is what a chat-shaped request to o4-mini meets (why the family table exists)."""
    with FaultServer(billing=OpenAIBilling()) as srv:
        bb = OpenAICompatibleBackbone(name="t", model="o4-mini", base_url=srv.url, api_key="k",
                                      price=Price(1.1, 4.4), retry=RetryPolicy(max_attempts=1, timeout_s=5))
        with pytest.raises(BackboneError) as err:
            asyncio.run(_complete(bb, {"max_tokens": 10, "temperature": 0.0}))
    assert err.value.kind == "http_4xx" and "max_completion_tokens" in str(err.value)


async def _complete(bb, sampling):
    try:
        return await bb.complete([{"role": "user", "content": "hi"}], sampling, 1)
    finally:
        await bb.aclose()


# ---- the table itself -------------------------------------------------------------------------------------------

def test_every_price_names_its_source_and_date_and_the_papers_models_are_in_it():
    t = price_table()
    for name in ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "o4-mini", "o3-mini", "claude-3-5-sonnet-20241022",
                 "claude-3-7-sonnet-20250219", "gemini-2.5-pro"):
        assert t.lookup(name) is not None, name
    for p in t.prices.values():
        assert p.source and p.source.startswith("https://") and p.checked and p.verified in ("provider", "secondary")
        assert p.cached_input_per_1m is None or p.cached_input_per_1m < p.input_per_1m
        assert dict(p.tiers).get("batch") is not None  # every model here has a batch price


def test_bill_prices_every_token_class():
    t = price_table()
    mini = t.price("gpt-4o-mini-2024-07-18")
    u = Usage(2000, 300, cached_tokens=1024, reasoning_tokens=0)
    assert mini.bill(u) == pytest.approx((976 * 0.15 + 1024 * 0.075 + 300 * 0.60) / 1e6, rel=1e-12)
    assert mini.list_cost(u) == pytest.approx((2000 * 0.15 + 300 * 0.60) / 1e6, rel=1e-12)
    assert mini.bill(u, "batch") == pytest.approx(mini.bill(u) / 2, rel=1e-12)
    with pytest.raises(PriceError, match="flex"):
        mini.bill(u, "flex")
    claude = t.price("claude-3-7-sonnet-20250219")
    w = Usage(10_000, 100, cached_tokens=4000, cache_write_tokens=5000)
    assert claude.bill(w) == pytest.approx((1000 * 3 + 4000 * 0.30 + 5000 * 3.75 + 100 * 15) / 1e6, rel=1e-12)
    pro = t.price("gemini-2.5-pro")
    assert pro.bill(Usage(300_000, 10)) == pytest.approx((300_000 * 2.5 + 10 * 15) / 1e6, rel=1e-12)
    with pytest.raises(PriceError, match="audio"):
        mini.bill(Usage(10, 10, audio_prompt_tokens=5))


def test_an_unpriced_token_class_is_on_the_line_and_noted(tmp_path):
    """Audio tokens (no rate in the table) are kept on the line (usage_details) and the line says it is not priced
    as the provider would."""
    def audio_usage(messages, body):
        return "ANSWER: 4"

    class AudioBilling(OpenAIBilling):
        def usage(self, body, texts):
            snap, usage = super().usage(body, texts)
            usage["prompt_tokens_details"]["audio_tokens"] = 3
            return snap, usage

    with FaultServer(billing=AudioBilling(), answer=audio_usage) as srv:
        client, records = _client(srv.url, tmp_path)
        _ask(client, records)
    [rec] = records
    assert rec.usage_details == {"audio_prompt_tokens": 3} and "audio" in rec.price_note


def test_usage_from_openai_refuses_missing_or_partial_usage():
    from agentic_repro.harness.pricing import MissingUsage

    for bad in (None, {}, {"prompt_tokens": 5}, {"completion_tokens": 5}, {"prompt_tokens": "5", "completion_tokens": 1},
                {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 9}}):
        with pytest.raises(MissingUsage):
            Usage.from_openai(bad)
    u = Usage.from_openai({"prompt_tokens": 5, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 2},
                           "completion_tokens_details": {"reasoning_tokens": 3}})
    assert (u.cached_tokens, u.reasoning_tokens) == (2, 3) and Usage.from_dict(u.to_dict()) == u


def test_a_table_with_a_name_twice_is_refused(tmp_path):
    data = {"families": {"chat": {}}, "models": {
        "a": {"standard": {"input": 1, "output": 2}, "aliases": ["x"], "source": "https://a", "verified": "provider"},
        "b": {"standard": {"input": 1, "output": 2}, "aliases": ["x"], "source": "https://b", "verified": "provider"}}}
    with pytest.raises(PriceError, match="already"):
        PriceTable(data)


# ---- the dollar cap -----------------------------------------------------------------------------------------------

def test_the_dollar_cap_stops_the_run_cleanly_and_a_higher_cap_finishes_it(tmp_path):
    """runner.budgets.max_usd: no request is sent once its worst case does not fit under the cap; the finished
    problems are kept, the run is complete: false with one line saying why, and a re-run with a higher cap
    finishes it (the answered calls replayed from the cache, not bought again)."""
    args = ("method=io", "limit=3", "runner.max_concurrent_problems=1", "sampling.max_tokens=64")
    with FaultServer(billing=OpenAIBilling()) as srv:
        r = cli(tmp_path, *args, f"backbone.base_url={srv.url}", "runner.budgets.max_usd=0.0009")
        sent_first = srv.received
        assert r.returncode != 0 and "dollar cap" in r.stderr and "runner.budgets.max_usd" in r.stderr
        metrics = json.loads(next((tmp_path / "results").rglob("metrics.json")).read_text())
        rows = ledger(tmp_path)
        assert metrics["complete"] is False and "dollar cap" in metrics["budget_stop"]
        assert 1 <= metrics["n"] < 3 and metrics["n_errors"] == 0  # finished problems kept, none made an error
        assert len(rows) == sent_first and not any(x.get("error") for x in rows)  # no line for an unsent request
        assert sum(x["cost_usd"] for x in rows) <= 0.0009 and metrics["budget"]["spent_usd"] <= 0.0009
        r2 = cli(tmp_path, *args, f"backbone.base_url={srv.url}", "runner.budgets.max_usd=1")
    assert r2.returncode == 0, r2.stderr[-2000:]
    metrics = json.loads(next((tmp_path / "results").rglob("metrics.json")).read_text())
    assert metrics["complete"] is True and metrics["n"] == 3
    assert srv.received == 3  # IO: one call per problem, none bought twice


def test_the_cap_counts_what_earlier_invocations_spent():
    from agentic_repro.harness.llm import BudgetStop, DollarCap

    cap = DollarCap(1.0, spent=0.6)
    cap.reserve(0.3)
    with pytest.raises(BudgetStop, match="next request may cost"):
        cap.reserve(0.2)
    with pytest.raises(BudgetStop):  # once stopped, every later request is refused too
        cap.reserve(0.0)
    assert DollarCap(1.0, spent=1.0).stopped and cap.summary()["spent_usd"] == 0.6


def test_openai_itself_at_price_zero_is_refused(tmp_path):
    from agentic_repro.harness.backbones import build_backbone

    cfg = {"name": "free-openai", "kind": "openai", "model": "gpt-4o-mini", "base_url": None, "api_key_env": None,
           "price": 0}
    with pytest.raises(BackboneError, match="bills every call"):
        asyncio.run(build_backbone(cfg, run_dir=tmp_path, seed=0))


# ---- the estimate prices with the same table ----------------------------------------------------------------------

def test_the_estimate_prices_caching_and_batch_with_the_runs_table(tmp_path, monkeypatch):
    """`agentic-repro estimate` on runs measured against the double: the prompt-cache share it simulates on the
    runs' own prompts is the share the double actually cached; batch=true prices IO at the Batch API's price."""
    import csv

    from agentic_repro.scripts import estimate_cost

    with FaultServer(billing=OpenAIBilling()) as srv:
        for method in ("self_refine", "io"):
            r = cli(tmp_path, f"method={method}", "limit=3", "experiment=table1", f"backbone.base_url={srv.url}")
            assert r.returncode == 0, r.stderr[-2000:]
    refine = [x for x in ledger_of(tmp_path, "self_refine") if not x["cache_hit"]]
    actual_share = sum(x["cached_tokens"] for x in refine) / sum(x["prompt_tokens"] for x in refine)
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    measured = next((tmp_path / "results" / "table1" / "hotpotqa" / "io").iterdir()).name
    assert estimate_cost.main([f"results_root={tmp_path / 'results'}", f"measured={measured}", "batch=true",
                               f"cache={tmp_path / 'c.sqlite'}"]) == 0
    rows = {r["method"]: r for r in csv.DictReader(open(tmp_path / "results" / "table1" / "cost-estimate-gpt-4o-mini.csv"))}
    sr, io = rows["self_refine"], rows["io"]
    assert actual_share > 0.2 and float(sr["cacheable_prompt_share"]) == pytest.approx(actual_share, abs=0.08)
    assert sr["tier"] == "standard" and float(sr["usd_billed"]) < float(sr["usd_list"])
    assert io["tier"] == "batch" and float(io["cacheable_prompt_share"]) == 0.0  # one call per problem: no prefix
    assert float(io["usd_billed"]) == pytest.approx(float(io["usd_list"]) / 2, rel=0.01)
    text = (tmp_path / "results" / "table1" / "cost-estimate-gpt-4o-mini.md").read_text()
    assert "Batch API" in text and "papers' formula" in text and "configs/prices.yaml" in text


def ledger_of(tmp_path: Path, method: str) -> list[dict]:
    [f] = list((tmp_path / "results").rglob(f"{method}/*/seed=*/calls.jsonl"))
    return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]


def test_docs_price_table_is_the_table():
    """docs/backbones.md's price table is configs/prices.yaml's, row by row (a doc that cannot go stale)."""
    doc = (ROOT / "docs" / "backbones.md").read_text()
    t = price_table()
    assert f"checked {t.checked}" in doc
    cells_of = ([c.strip() for c in line.split("|")[1:-1]] for line in doc.splitlines() if line.startswith("| `"))
    rows = {cells[0].split("`")[1]: cells for cells in cells_of if len(cells) == 10}
    assert set(rows) == set(t.prices)
    for key, p in t.prices.items():
        cells = rows[key]
        assert cells[2].split(" ")[0] == f"{p.input_per_1m:g}" and cells[5] == f"{p.output_per_1m:g}", key
        assert cells[3] == ("—" if p.cached_input_per_1m is None else f"{p.cached_input_per_1m:g}"), key
        batch = dict(p.tiers)["batch"]
        assert cells[6] == f"{batch.input:g} / {batch.output:g}" and cells[8] == p.source and cells[9] == p.verified


async def swallow_backbone_errors(problem, ctx):
    """A method that answers anyway when its backbone fails (as some releases do): its fallback must not be
    recorded as an answer when the failure was the dollar cap."""
    from agentic_repro.harness.types import Solution

    try:
        first = await ctx.ask(problem.fields["q"], stage="answer")
        await ctx.ask("check " + first, stage="check")
        return Solution(first)
    except Exception:  # noqa: BLE001 - the point of this double
        return Solution("ANSWER: 0")


def test_a_method_that_swallows_the_cap_does_not_get_its_fallback_recorded(tmp_path, tiny_data):
    from agentic_repro.harness.scripted import ScriptedBackbone
    from tests.conftest import make_spec, run

    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.test_bill:swallow_backbone_errors", "params": {}},
                     limit=4, runner={"budgets": {"max_usd": 0.02}, "max_concurrent_problems": 1})
    bb = ScriptedBackbone(lambda m, s: "ANSWER: " + "word " * 300, price=Price(10.0, 20.0))
    metrics = run(spec, bb)  # each call reserves ~$0.0014 of prompt + 64 x $20/1M and bills ~$0.006
    preds = [json.loads(x) for x in (spec.results_root).rglob("predictions.jsonl").__next__().read_text().splitlines()]
    assert metrics["complete"] is False and "dollar cap" in metrics["budget_stop"]
    assert preds and all(p["raw_output"] != "ANSWER: 0" for p in preds)  # no fallback answer on record
    assert metrics["budget"]["spent_usd"] < 0.02 + 0.0061  # the call that crossed it (its reply ignored max_tokens)


def test_a_search_stops_at_its_dollar_cap_and_resumes_under_a_higher_one(tmp_path, monkeypatch):
    """runner.budgets.max_usd for a search caps the optimiser and every validate run together: one cap, shared."""
    from agentic_repro.baselines.autoflow.search import run_search, search_dir
    from agentic_repro.harness.llm import BudgetStop
    from agentic_repro.harness.scripted import ScriptedBackbone
    from tests.autoflow_helpers import AFlowScript, aflow_spec, write_tiny_splits

    write_tiny_splits(tmp_path / "data")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    spec = aflow_spec(tmp_path)
    out = search_dir(spec, spec.method_cfg["search"])

    def billed() -> float:
        rows = [json.loads(x) for f in out.rglob("calls.jsonl") for x in f.read_text().splitlines() if x.strip()]
        return sum(r["cost_usd"] for r in rows if not r["cache_hit"])

    # a validate run's first request does not fit: the run stops and so does the search, nothing billed
    spec.runner_cfg["budgets"] = {"max_usd": 0.00001}
    with pytest.raises(BudgetStop, match="in validate run"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert billed() == 0
    # the first round's validate runs fit, the optimiser's proposal (~$0.0016 reserved) does not
    spec.runner_cfg["budgets"] = {"max_usd": 0.001}
    with pytest.raises(BudgetStop, match="search's dollar cap"):
        asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert 0 < billed() <= 0.001 and not (out / "artifact.json").exists()
    spec.runner_cfg["budgets"] = {"max_usd": 1.0}
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(AFlowScript())))
    assert doc["validate_score"] is not None and (out / "artifact.json").exists() and billed() <= 1.0
    # one cap: a validate run after the optimiser's proposals counts what the optimiser was billed
    optimiser = sum(json.loads(x)["cost_usd"] for x in (out / "optimizer" / "calls.jsonl").read_text().splitlines()
                    if x.strip() and not json.loads(x)["cache_hit"])
    spent = [json.loads(m.read_text())["budget"]["spent_usd"] for m in (out / "evals").rglob("metrics.json")]
    assert optimiser > 0 and max(spent) >= optimiser
