"""Issue 10 in the core: option validation, one configuration per results folder, errors are not answers,
the ledger is the bill, and a broken results disk gives one clear line (scripted double; fast)."""
from __future__ import annotations

import errno
import json
import os

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import compose, make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_runner import arithmetic, load

ONCE = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}
MANY = {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 5}}


# ---- every run option validated up front -------------------------------------------------------------------

@pytest.mark.parametrize("override, key, allowed", [
    ("limit=-1", "limit", "positive integer"),
    ("limit=0", "limit", "positive integer"),
    ("limit=abc", "limit", "positive integer"),
    ("limit=1.5", "limit", "positive integer"),
    ("sample=-3", "sample", "positive integer"),
    ("seed=abc", "seed", "non-negative integer"),
    ("seed=-1", "seed", "non-negative integer"),
    ("cache.mode=sometimes", "cache.mode", "read-write"),
    ("runner.max_concurrent_problems=0", "runner.max_concurrent_problems", "positive integer"),
    ("backbone.max_concurrency=abc", "backbone.max_concurrency", "positive integer"),
    ("runner.progress=maybe", "runner.progress", "true or false"),
    ("sampling.temperature=-1", "sampling.temperature", "[0.0, 2.0]"),
    ("sampling.max_tokens=0", "sampling.max_tokens", "positive integer"),
    ("runner.fail_fast_after=-2", "runner.fail_fast_after", "non-negative integer"),
    ("experiment=../x", "experiment", "no '..'"),
])
def test_bad_option_names_the_key_the_value_and_what_is_allowed(override, key, allowed):
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.harness.validate import ConfigError

    cfg = compose(["backbone=gpt-4o-mini", override])
    with pytest.raises(ConfigError) as info:
        spec_from_config(cfg)
    msg = str(info.value)
    value = override.split("=", 1)[1]
    assert msg.startswith(f"{key}=") and value in msg and allowed in msg, msg


@pytest.mark.parametrize("override, name", [("+lmit=5", "lmit"), ("+runner.max_concurent_problems=4",
                                                                    "runner.max_concurent_problems")])
def test_an_unknown_added_key_is_an_error(override, name):
    from agentic_repro.harness.runner import spec_from_config
    from agentic_repro.harness.validate import ConfigError

    with pytest.raises(ConfigError, match=f"unknown option.*{name}.*no part of the harness reads it"):
        spec_from_config(compose([override]))


def test_the_shipped_defaults_and_every_group_validate():
    from pathlib import Path

    from agentic_repro.harness.validate import validate_run_config

    root = Path(__file__).resolve().parents[1] / "configs"
    for group in ("method", "benchmark", "backbone"):
        for f in sorted((root / group).glob("*.yaml")):
            validate_run_config(compose([f"{group}={f.stem}"]))
    validate_run_config(compose(["limit=3", "sample=5", "seed=123", "restart=true", "runner.fail_fast_after=0"]))


# ---- a results folder belongs to one configuration ------------------------------------------------------------

def test_changed_configuration_is_refused_with_the_keys_and_both_fixes(tmp_path, tiny_data):
    from agentic_repro.harness.identity import IdentityMismatch

    spec = make_spec(tmp_path, ONCE, limit=3)
    run(spec, ScriptedBackbone(arithmetic))
    hotter = make_spec(tmp_path, ONCE, limit=3)
    hotter.sampling["temperature"] = 0.7
    hotter.full_config["sampling"] = {"temperature": 0.7}
    bb = ScriptedBackbone(arithmetic)
    with pytest.raises(IdentityMismatch) as info:
        run(hotter, bb)
    msg = str(info.value)
    assert "sampling" in msg and "experiment=" in msg and "restart=true" in msg and str(spec.out_dir) in msg
    assert bb.requests == []  # refused before any call
    assert len(read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")) == 3  # nothing mixed in


def test_changed_model_identity_is_refused_and_restart_starts_over(tmp_path, tiny_data):
    from agentic_repro.harness.identity import IdentityMismatch

    spec = make_spec(tmp_path, ONCE, limit=2)
    run(spec, ScriptedBackbone(arithmetic))
    other = ScriptedBackbone(arithmetic)
    other.model = "another-model"
    with pytest.raises(IdentityMismatch, match="backbone identity"):
        run(spec, other)
    restart = make_spec(tmp_path, ONCE, limit=2)
    restart.full_config["restart"] = True
    metrics = run(restart, other)
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert metrics["n"] == 2 and len(preds) == 2 and len(other.requests) == 2
    ident = json.loads((spec.out_dir / "identity.json").read_text())
    assert ident["backbones"]["default"]["model"] == "another-model"


def test_neutral_keys_and_problem_selection_do_not_change_the_identity(tmp_path, tiny_data):
    run(make_spec(tmp_path, ONCE, limit=2), ScriptedBackbone(arithmetic))
    wider = make_spec(tmp_path, ONCE, limit=5, runner={"max_concurrent_problems": 3, "fsync": True})
    wider.full_config.update(runner={"progress": False, "max_concurrent_problems": 3}, logger={"name": "none"},
                             method={**ONCE, "label": "Ask once", "deviations": ["a footnote"]})
    bb = ScriptedBackbone(arithmetic)
    assert run(wider, bb)["n"] == 5 and len(bb.requests) == 3


def test_server_threads_and_the_prompt_cache_are_not_part_of_a_runs_identity_but_slots_are():
    """Table 1's embedded sizes set `n_threads=free` and `cache_ram_mib=2048` (table1.yaml): neither changes what is
    asked or answered, so runs made without them resume; the number of slots does (batched decoding)."""
    from agentic_repro.harness.identity import output_config

    def ident(*overrides: str) -> dict:
        return output_config(compose(["backbone=local", *overrides]))

    assert ident() == ident("backbone.server.n_threads=free", "backbone.server.cache_ram_mib=2048")
    assert ident() != ident("backbone.server.parallel=1")


def test_a_folder_from_before_identity_json_is_checked_against_its_config(tmp_path, tiny_data):
    from agentic_repro.harness.identity import IdentityMismatch

    spec = make_spec(tmp_path, ONCE, limit=2)
    run(spec, ScriptedBackbone(arithmetic))
    (spec.out_dir / "identity.json").unlink()
    changed = make_spec(tmp_path, {**ONCE, "params": {"stage": "other"}}, limit=2)
    with pytest.raises(IdentityMismatch, match="method.params.stage"):
        run(changed, ScriptedBackbone(arithmetic))
    run(spec, ScriptedBackbone(arithmetic))  # the same configuration adopts the folder
    assert (spec.out_dir / "identity.json").exists()


def test_the_folder_path_names_the_model_for_endpoint_backbones():
    from agentic_repro.harness.spec import backbone_dir

    assert backbone_dir({"name": "local", "kind": "embedded", "model": "qwen2.5-coder-0.5b"}) == "local"
    assert backbone_dir({"name": "vllm", "kind": "openai", "model": "Qwen/Qwen2.5-7B-Instruct"}) == \
        "vllm@qwen--qwen2.5-7b-instruct"
    assert backbone_dir({"name": "gpt-4o-mini", "kind": "openai", "model": "gpt-4o-mini-2024-07-18"}) == \
        "gpt-4o-mini@gpt-4o-mini-2024-07-18"
    assert backbone_dir({"name": "fake", "kind": "openai", "model": "fake"}) == "fake"
    from agentic_repro.harness.runner import spec_from_config

    a = spec_from_config(compose(["backbone=vllm", "backbone.model=org/model-a"])).out_dir
    b = spec_from_config(compose(["backbone=vllm", "backbone.model=org/model-b"])).out_dir
    assert a != b and a.parent.name == "vllm@org--model-a"


# ---- errors are not wrong answers; the ledger is the bill ------------------------------------------------------

def test_failed_calls_are_ledger_lines_and_the_problem_is_an_error(tmp_path, tiny_data):
    from agentic_repro.harness.backbone import BackboneError

    class HalfDead(ScriptedBackbone):
        async def complete(self, messages, sampling, n, **kw):
            if "What is 3+" in messages[-1]["content"]:
                self.requests.append((messages, sampling, n))
                raise BackboneError("HTTP 500 from the server", kind="http_5xx", attempts=4,
                                    retry_log=["500: retry in 0.01s"] * 3)
            return await super().complete(messages, sampling, n)

    spec = make_spec(tmp_path, MANY)
    metrics = run(spec, HalfDead(arithmetic))
    preds, calls, disk = load(spec)
    p3 = [p for p in preds if p["id"] == "p3"][0]
    assert p3["status"] == "error" and disk["n_errors"] == 1 and disk["n"] == 7 and disk["complete"] is False
    failed = [c for c in calls if c["error"]]
    assert len(failed) == 5 and all(c["attempts"] == 4 and c["error_kind"] == "http_5xx" for c in failed)
    assert all(c["attempt"] == p3["attempt"] for c in failed)
    assert disk["bill"]["errors"] == 5 and disk["bill"]["calls"] == len(calls)
    assert disk["first_error"]["kind"] == "http_5xx"
    assert set(disk["by_role"]) == {"default"} and disk["by_role"]["default"]["calls"] == disk["totals"]["calls"]
    assert set(disk["by_stage"]) == {"sample", "verify"}
    assert metrics == disk


def test_calls_reach_the_ledger_when_they_return_not_when_the_problem_ends(tmp_path, tiny_data):
    """A kill in the middle of a problem leaves its answered calls in calls.jsonl (and in the cache)."""
    import asyncio

    from agentic_repro.harness.runner import Runner

    spec = make_spec(tmp_path, MANY, limit=1)

    async def main():
        seen = []

        class Watch(ScriptedBackbone):
            async def complete(self, messages, sampling, n, **kw):
                if messages[-1]["content"].startswith("verify"):
                    path = spec.out_dir / "calls.jsonl"
                    seen.append(len(read_jsonl_tolerant(path)))
                    await asyncio.sleep(30)  # killed here
                return await super().complete(messages, sampling, n)

        task = asyncio.create_task(Runner(spec, backbone=Watch(arithmetic)).run())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if seen:
                break
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return seen

    seen = asyncio.run(main())
    assert seen == [5]  # the five samples were on disk before the problem finished
    requests = read_jsonl_tolerant(spec.out_dir / "requests.jsonl")
    assert len(requests) == 6  # five samples and the verify call in flight, each journalled when sent
    again = ScriptedBackbone(arithmetic)
    metrics = run(spec, again)
    assert len(again.requests) == 1  # only the call in flight at the stop is bought again
    assert metrics["this_invocation"]["resumed"]["rebought"] <= 1


def test_a_dead_backbone_fails_fast(tmp_path, tiny_data):
    from agentic_repro.harness.backbone import BackboneError

    class Dead(ScriptedBackbone):
        async def complete(self, messages, sampling, n, **kw):
            self.requests.append((messages, sampling, n))
            raise BackboneError("Connection refused", kind="connection", attempts=6)

    bb = Dead(arithmetic, max_concurrency=1)
    spec = make_spec(tmp_path, ONCE, runner={"fail_fast_after": 2, "max_concurrent_problems": 1})
    metrics = run(spec, bb)
    assert len(bb.requests) == 2 and metrics["complete"] is False and "none succeeded" in metrics["aborted"]
    assert metrics["n"] == 0 and metrics["n_errors"] == 2
    assert metrics["first_error"]["kind"] == "connection"


# ---- a broken results disk ------------------------------------------------------------------------------------

def test_a_full_disk_names_the_path_and_errno_and_leaves_no_tmp(tmp_path, tiny_data):
    from agentic_repro.harness.results import ResultsWriteError

    spec = make_spec(tmp_path, ONCE, limit=2)
    run(spec, ScriptedBackbone(arithmetic))
    tmp = spec.out_dir / "metrics.json.tmp"
    os.symlink("/dev/full", tmp)  # writing the new metrics fails with ENOSPC
    with pytest.raises(ResultsWriteError) as info:
        run(spec, ScriptedBackbone(arithmetic))
    assert info.value.errno == errno.ENOSPC and "metrics.json" in str(info.value) and "Errno 28" in str(info.value)
    assert not os.path.lexists(tmp)
    assert len(read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")) == 2  # nothing finished is lost


def test_a_metrics_write_error_does_not_mask_the_original_one(tmp_path, tiny_data, monkeypatch):
    from agentic_repro.harness import results

    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}, limit=2)
    orig_append = results.ResultWriter.append

    def broken_append(self, prediction, calls):
        raise OSError(errno.EROFS, "Read-only file system", str(self.paths.predictions))

    real_write = results.ResultWriter.write_json

    def broken_metrics(self, path, obj):
        if path.name == "metrics.json":
            raise results.ResultsWriteError(path, OSError(errno.EROFS, "Read-only file system"))
        return real_write(self, path, obj)

    monkeypatch.setattr(results.ResultWriter, "append", broken_append)
    monkeypatch.setattr(results.ResultWriter, "write_json", broken_metrics)
    with pytest.raises(OSError) as info:
        run(spec, ScriptedBackbone(arithmetic))
    assert "predictions.jsonl" in str(info.value.filename)  # the first failure, not the metrics write
    assert orig_append is not None and not (spec.out_dir / "metrics.json.tmp").exists()
