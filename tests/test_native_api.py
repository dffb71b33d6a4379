"""Claude and Gemini backbones (harness/native_api.py) end to end: the runner, the real HTTP client, and loopback
doubles that speak Anthropic's Messages API and Gemini's generateContent (tests/provider_doubles.py), errors included."""
from __future__ import annotations

import asyncio

import pytest

from agentic_repro.harness.compose import compose
from agentic_repro.harness.pricing import price_for_model
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.runner import Runner
from tests.provider_doubles import KEY, AnthropicDouble, GeminiDouble, native_config
from tests.test_faults import CONSENSUS, fault_spec, tiny_rows

ONE = {"name": "one", "solver": "tests.fake_methods:ask_many", "params": {"n": 1}}


def run(tmp_path, monkeypatch, bb, problems=3, method=ONE):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", problems)))
    monkeypatch.setenv("DOUBLE_API_KEY", KEY)
    spec = fault_spec(tmp_path, bb["base_url"], backbone=bb, method=method)
    metrics = asyncio.run(Runner(spec).run())
    return metrics, read_jsonl_tolerant(spec.out_dir / "calls.jsonl")


def test_claude_runs_billed_with_every_cache_class_and_retries_429_and_529(tmp_path, monkeypatch):
    with AnthropicDouble(script=[429, 529], cache_read=3, cache_write=2, cache_write_1h=1, max_seconds=60) as srv:
        bb = native_config("anthropic", srv.url, "claude-3-7-sonnet-20250219")
        metrics, calls = run(tmp_path, monkeypatch, bb)
        bodies, statuses = list(srv.requests), list(srv.statuses)
    assert metrics["n_errors"] == 0 and metrics["complete"] is True, metrics.get("first_error")
    assert statuses[:2] == [429, 529] and statuses[2:] == [200] * 6
    # the request in the Messages API's shape: max_tokens given, no OpenAI-only field (seed, n) sent
    assert all(b["max_tokens"] == 32 and "seed" not in b and "n" not in b for b in bodies)
    rates = price_for_model("claude-3-7-sonnet-20250219").rates("standard")
    for c in calls:
        assert c["served_model"] == "claude-3-7-sonnet-20250219"
        assert (c["cached_tokens"], c["cache_write_tokens"]) == (3, 3)  # the ledger sums the 5-min and 1-h writes
        fresh = c["prompt_tokens"] - 6
        want = (fresh * rates.input + 3 * rates.cached_input + 2 * rates.cache_write + 1 * rates.cache_write_1h
                + c["completion_tokens"] * rates.output) / 1e6
        assert c["cost_usd"] == pytest.approx(want, rel=1e-9)
    assert sum(c["attempts"] for c in calls) == len(statuses)  # both overloads on the bill's record of attempts


def test_gemini_runs_billed_with_its_cache_and_thinking_and_honours_retry_info(tmp_path, monkeypatch):
    with GeminiDouble(script=[429, 503], cached=2, thoughts=7, max_seconds=60) as srv:
        bb = native_config("gemini", srv.url, "gemini-2.5-pro")
        metrics, calls = run(tmp_path, monkeypatch, bb)
        bodies, paths, statuses = list(srv.requests), list(srv.paths), list(srv.statuses)
    assert metrics["n_errors"] == 0, metrics.get("first_error")
    assert statuses[:2] == [429, 503] and all(p.endswith("/v1beta/models/gemini-2.5-pro:generateContent") for p in paths)
    assert all(b["generationConfig"]["maxOutputTokens"] == 32 and "seed" in b["generationConfig"] for b in bodies)
    retried = sorted(line.split(":")[0] for c in calls for line in c["retry_log"] or [])
    assert retried == ["http_429", "http_5xx"]  # RESOURCE_EXHAUSTED and UNAVAILABLE, each retried once
    rates = price_for_model("gemini-2.5-pro").rates("standard")
    for c in calls:
        assert c["reasoning_tokens"] == 7 and c["cached_tokens"] == 2 and c["completion_tokens"] >= 7
        want = ((c["prompt_tokens"] - 2) * rates.input + 2 * rates.cached_input + c["completion_tokens"] * rates.output) / 1e6
        assert c["cost_usd"] == pytest.approx(want, rel=1e-9) and c["served_model"] == "gemini-2.5-pro"


def test_gemini_retry_delay_becomes_the_wait(tmp_path, monkeypatch):
    """RetryInfo.retryDelay (0.05 s in the double's body) is read as Retry-After: with a 10 s backoff base the wait
    would otherwise be 5-10 s; with it honoured and a tiny backoff, the retry waits at least the delay."""
    with GeminiDouble(script=[429], max_seconds=60) as srv:
        bb = native_config("gemini", srv.url, "gemini-2.5-pro",
                           retry={"max_attempts": 3, "base_delay_s": 0.001, "max_delay_s": 1.0, "timeout_s": 5.0})
        _, calls = run(tmp_path, monkeypatch, bb, problems=1)
    line = next(c for c in calls if c["retry_log"])["retry_log"][0]
    assert float(line.rsplit("retry in ", 1)[1].rstrip("s")) >= 0.05, line


@pytest.mark.parametrize("double,kind,model", [(AnthropicDouble, "anthropic", "claude-3-5-sonnet-20241022"),
                                               (GeminiDouble, "gemini", "gemini-2.5-pro")])
def test_a_bad_request_is_an_error_not_retried(tmp_path, monkeypatch, double, kind, model):
    with double(script=[400], max_seconds=60) as srv:
        metrics, calls = run(tmp_path, monkeypatch, native_config(kind, srv.url, model), problems=1)
        received = srv.received
    assert metrics["n_errors"] == 1 and received == 1
    assert calls[0]["error_kind"] == "http_4xx" and "scripted 400" in calls[0]["error"]


def test_a_reply_without_usage_is_an_error_never_free(tmp_path, monkeypatch):
    with AnthropicDouble(omit_usage=True, max_seconds=60) as srv:
        metrics, calls = run(tmp_path, monkeypatch, native_config("anthropic", srv.url, "claude-3-5-sonnet-20241022"),
                             problems=1)
    assert metrics["n_errors"] == 1 and calls[0]["error_kind"] == "no_usage"


def test_anthropic_temperature_above_one_is_refused_before_sending(tmp_path, monkeypatch):
    hot = {"name": "hot", "solver": "tests.fake_methods:ask_many", "params": {"n": 1}}
    with AnthropicDouble(max_seconds=60) as srv:
        bb = native_config("anthropic", srv.url, "claude-3-5-sonnet-20241022", sampling={"temperature": 1.5})
        metrics, calls = run(tmp_path, monkeypatch, bb, problems=1, method=hot)
        received = srv.received
    # ask_many samples at T 0.7 (accepted), its verify call inherits the backbone's 1.5: refused, never sent
    assert received == 1 and metrics["n_errors"] == 1
    assert any("takes 0-1" in (c.get("error") or "") for c in calls)


def test_a_wrong_key_is_the_apis_auth_error(tmp_path, monkeypatch):
    with AnthropicDouble(max_seconds=60) as srv:
        bb = native_config("anthropic", srv.url, "claude-3-5-sonnet-20241022")
        monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 1)))
        monkeypatch.setenv("DOUBLE_API_KEY", "wrong")
        spec = fault_spec(tmp_path, srv.url, backbone=bb, method=ONE)
        metrics = asyncio.run(Runner(spec).run())
        statuses = list(srv.statuses)
    assert statuses == [401] and metrics["n_errors"] == 1


def test_anthropic_rate_limit_headers_are_learned(tmp_path, monkeypatch):
    with AnthropicDouble(max_seconds=60) as srv:
        bb = native_config("anthropic", srv.url, "claude-3-5-sonnet-20241022",
                           rate_limit={"mode": "adaptive", "share_path": str(tmp_path / "rl.sqlite")})
        metrics, _ = run(tmp_path, monkeypatch, bb, problems=2)
    ctl = metrics["rate_limit"]["default"]["controller"]
    assert ctl["limits_per_window"] == {"requests": 4000, "tokens": 400000}


def test_n_samples_are_separate_requests(tmp_path, monkeypatch):
    with GeminiDouble(model_version="gemini-2.5-flash", max_seconds=60) as srv:
        metrics, calls = run(tmp_path, monkeypatch, native_config("gemini", srv.url, "gemini-2.5-flash"), problems=2,
                             method=CONSENSUS)
        asked = [(b["contents"][0]["parts"][0]["text"], b["generationConfig"]["seed"]) for b in srv.requests]
    assert metrics["n_errors"] == 0 and srv.received == 2 * 6
    assert len(set(asked)) == len(asked)  # every sample of a prompt its own seed


@pytest.mark.parametrize("paper_roles,role,kind,model,run", [  # run: the method (benchmark) that declares the role
    ("aflow", "optimizer", "anthropic", "claude-3-5-sonnet-20241022", ["method=aflow"]),
    ("dyflow_designer_claude", "designer", "anthropic", "claude-3-7-sonnet-20250219", ["method=dyflow"]),
    ("dyflow_designer_gpt41", "designer", "openai", "gpt-4.1-2025-04-14", ["method=dyflow"]),
    ("deepresearch_judge", "judge", "gemini", "gemini-2.5-pro",
     ["method=auq_deep_research", "benchmark=deepresearch_bench"])])
def test_the_papers_role_assignments_are_named_configs(paper_roles, role, kind, model, run):
    cfg = compose([f"+paper_roles={paper_roles}", *run])
    assert (cfg["roles"][role]["kind"], cfg["roles"][role]["model"]) == (kind, model)
    assert price_for_model(model).model  # priced by the dated table, or this fails before any call


def test_the_docs_role_snippets_are_the_shipped_configs():
    """docs/backbones.md's role section: each yaml snippet is the config file it names, and each command composes."""
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "backbones.md").read_text(encoding="utf-8")
    section = text.split("## The papers' roles on Anthropic and Gemini", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"`(configs/paper_roles/[\w.]+)`[^`]*?```yaml\n(.*?)```", section, re.DOTALL)
    assert len(snippets) == 4
    for path, snippet in snippets:
        assert yaml.safe_load(snippet) == yaml.safe_load((root / path).read_text()), path
    commands = re.findall(r"^python -m agentic_repro\.harness\.run (.+)$", section, re.MULTILINE)
    assert len(commands) == 4
    for line in commands:
        cfg = compose(line.split())
        assert any(r and r.get("kind") in ("anthropic", "gemini", "openai") for r in cfg["roles"].values()), line
