"""``sampling.n_mode`` (harness/n_mode.py): n samples as one request with n choices or as n requests, recorded per
method as its release did, through the real HTTP client against the loopback double (tests/fault_server.py)."""
from __future__ import annotations

import asyncio

import pytest
import yaml

from agentic_repro.harness.compose import compose
from agentic_repro.harness.n_mode import n_mode_of
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.runner import Runner
from agentic_repro.harness.validate import ConfigError
from tests.fault_server import FaultServer, backbone_config
from tests.test_faults import CONSENSUS, fault_spec, tiny_rows


def run(tmp_path, url, n_mode, *, cache="cache.sqlite", results="results"):
    method = {**CONSENSUS, "sampling": {"n_mode": n_mode}}
    spec = fault_spec(tmp_path, url, method=method, cache=cache, results=results,
                      backbone=backbone_config(url, supports_n=True))
    spec.full_config["method"] = method
    metrics = asyncio.run(Runner(spec).run())
    return spec, metrics


@pytest.mark.parametrize("n_mode,requests_per_problem", [("request", 2), ("separate", 6)])
def test_n_samples_are_one_request_or_n_requests_and_the_bill_follows(tmp_path, monkeypatch, n_mode,
                                                                       requests_per_problem):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 4)))
    with FaultServer(max_seconds=60) as srv:
        spec, metrics = run(tmp_path, srv.url, n_mode)
        received = srv.received
    assert metrics["n_errors"] == 0
    # ask_many: 5 samples of one prompt, then one verify call
    assert received == 4 * requests_per_problem
    calls = [c for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl") if c["stage"] == "sample"]
    billed_prompts = sum(1 for c in calls if c["prompt_tokens"] > 0)
    # the prompt is on the bill once per request: once per problem, or once per sample
    assert billed_prompts == 4 * (5 if n_mode == "separate" else 1)
    assert len({c["request"] for c in calls}) == 4 * (5 if n_mode == "separate" else 1)
    recorded = yaml.safe_load((spec.out_dir / "config.yaml").read_text())
    assert recorded["method"]["sampling"]["n_mode"] == n_mode


def test_the_two_layouts_never_share_cached_replies(tmp_path, monkeypatch):
    """A separate-mode run after a request-mode run on one cache asks the provider again (its replies would carry
    the other layout's token counts), while n = 1 calls (verify) are the same request in both and are reused."""
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny_rows(tmp_path / "data", 3)))
    with FaultServer(max_seconds=60) as srv:
        run(tmp_path, srv.url, "request", results="r1")
        before = srv.received
        run(tmp_path, srv.url, "separate", results="r2")
        assert srv.received - before == 3 * 5  # every sample fetched again, no verify call
        run(tmp_path, srv.url, "separate", results="r3")
        assert srv.received - before == 3 * 5  # and a second separate run is all cache


def test_bad_values_are_refused_naming_the_key():
    assert n_mode_of({}) == "request" and n_mode_of({"sampling": {"n_mode": "separate"}}) == "separate"
    with pytest.raises(ConfigError, match=r"method\.sampling\.n_mode='batch'"):
        n_mode_of({"sampling": {"n_mode": "batch"}})
    with pytest.raises(ConfigError, match=r"method\.sampling\.temperature"):
        n_mode_of({"sampling": {"temperature": 0.7}})
    from agentic_repro.harness.validate import validate_run_config
    with pytest.raises(ConfigError, match=r"method\.sampling\.n_mode"):
        validate_run_config({"seed": 1, "method": {"name": "cot_sc", "sampling": {"n_mode": "many"}},
                             "benchmark": {"name": "gsm8k"}, "backbone": {"name": "x", "kind": "scripted"}})


# every method that draws n > 1 samples of one prompt, and what its release did (docs/backbones.md's table)
RELEASES = {"cot_sc": "separate", "dyflow": "separate", "dyflow_wo_kto": "separate", "dyflow_wo_sft": "separate",
            "dyflow_wo_dynamic_planning": "separate", "dyflow_wo_dynamic_operator": "separate",
            "denoiseflow": "request", "agent_cot_sc": "request"}


@pytest.mark.parametrize("method,mode", sorted(RELEASES.items()))
def test_every_sampling_method_states_its_releases_choice(method, mode):
    cfg = compose([f"method={method}", "benchmark=gsm8k", "backbone=scripted"])
    assert cfg["method"]["sampling"]["n_mode"] == mode


def test_the_default_is_not_part_of_the_identity_but_separate_is():
    from agentic_repro.harness.identity import output_config

    base = {"method": {"name": "m"}}
    assert output_config({"method": {"name": "m", "sampling": {"n_mode": "request"}}}) == output_config(base)
    assert output_config({"method": {"name": "m", "sampling": {"n_mode": "separate"}}}) != output_config(base)


def test_the_protocol_line_says_how_n_reached_the_provider(tmp_path):
    from agentic_repro.scripts.protocol import n_modes

    class Run:
        def __init__(self, cfg, sample_index=1):
            self._cfg, self._calls = cfg, [{"sample_index": sample_index}]

        def config(self):
            return self._cfg

        def calls(self):
            return self._calls
    assert n_modes([Run({"method": {"sampling": {"n_mode": "separate"}}})]) == "n_mode separate"
    assert n_modes([Run({"method": {"sampling": {"n_mode": "separate"}}}), Run({"method": {}})]) == \
        "n_mode request (not recorded)/separate"
    assert n_modes([Run({"method": {}}, sample_index=0)]) is None   # one sample per prompt: the choice does not arise
