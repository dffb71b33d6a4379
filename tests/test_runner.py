"""The runner with a scripted backbone: files, consistent numbers, resume, errors, windows."""
from __future__ import annotations

import json
import re

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import EchoBenchmark, make_spec, run
from tests.doubles import ScriptedBackbone


def arithmetic(messages, sampling):
    """Correct for even i, wrong for odd i: a known 50% score."""
    m = re.search(r"What is (\d+)\+", messages[-1]["content"])
    if not m:
        return "yes"
    i = int(m.group(1))
    return f"thinking... ANSWER: {2 * i if i % 2 == 0 else 2 * i + 1}"


def load(spec):
    out = spec.out_dir
    preds = read_jsonl_tolerant(out / "predictions.jsonl")
    calls = read_jsonl_tolerant(out / "calls.jsonl")
    metrics = json.loads((out / "metrics.json").read_text())
    return preds, calls, metrics


def test_writes_every_file_with_consistent_numbers(tmp_path, tiny_data):
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 3}})
    bb = ScriptedBackbone(arithmetic)
    metrics = run(spec, bb)
    preds, calls, disk = load(spec)
    for f in ("predictions.jsonl", "calls.jsonl", "metrics.json", "config.yaml", "meta.json", "reliability.png"):
        assert (spec.out_dir / f).exists(), f
    assert metrics == disk
    assert metrics["n"] == 8 and metrics["score"] == pytest.approx(0.5)
    assert len(calls) == 8 * 4 and len(bb.requests) == 8 * 4  # 3 samples (separate requests) + 1 verify
    # per-problem cost is the sum of that problem's own calls, and totals add up
    for p in preds:
        own = [c for c in calls if c["problem_id"] == p["id"]]
        assert p["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in own))
        assert p["cost_by_stage"]["sample"]["calls"] == 3 and p["cost_by_stage"]["verify"]["calls"] == 1
    assert metrics["totals"]["cost_usd"] == pytest.approx(sum(p["cost_usd"] for p in preds))
    assert metrics["totals"]["cost_usd"] > 0
    # samples of one problem have distinct seeds; the same index across problems reuses its seed
    seeds = {c["seed"] for c in calls if c["problem_id"] == "p0" and c["stage"] == "sample"}
    assert len(seeds) == 3
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert len(meta["data"]["sha256"]) == 64 and meta["ended"] is not None
    assert "calibration" in metrics and 0 <= metrics["calibration"]["ece"] <= 1


def test_resume_skips_finished_and_replay_makes_no_backbone_call(tmp_path, tiny_data):
    method = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}
    first = ScriptedBackbone(arithmetic)
    run(make_spec(tmp_path, method, limit=3), first)
    assert len(first.requests) == 3
    second = ScriptedBackbone(arithmetic)
    metrics = run(make_spec(tmp_path, method), second)
    assert len(second.requests) == 5  # only the 5 unfinished problems
    assert metrics["n"] == 8
    third = ScriptedBackbone(arithmetic)
    again = run(make_spec(tmp_path, method), third)
    assert third.requests == [] and again["this_invocation"]["backbone_calls"] == 0
    assert again["score"] == metrics["score"]


def test_a_smaller_limit_is_no_interruption_and_a_kill_counts_only_the_problems_resumed(tmp_path, tiny_data, capsys):
    # before: a re-run at a smaller limit read the other problems' finished attempts as interrupted
    # ("resumed: 4 problem(s) were interrupted") though nothing had stopped
    method = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}
    run(make_spec(tmp_path, method), ScriptedBackbone(arithmetic))
    smaller = run(make_spec(tmp_path, method, limit=4), ScriptedBackbone(arithmetic))
    assert smaller["this_invocation"]["resumed"]["interrupted_problems"] == 0
    assert "resumed:" not in capsys.readouterr().err
    # a kill after p2's and p6's calls were logged, before their predictions were written
    preds = make_spec(tmp_path, method).out_dir
    rows = [r for r in read_jsonl_tolerant(preds / "predictions.jsonl") if r["id"] not in ("p2", "p6")]
    (preds / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bb = ScriptedBackbone(arithmetic)
    first = run(make_spec(tmp_path, method, limit=4), bb)["this_invocation"]["resumed"]
    assert bb.requests == [] and first["interrupted_problems"] == 1 and first["replayed_from_cache"] == 1  # p2 only
    assert "resumed: 1 problem(s) were interrupted" in capsys.readouterr().err
    rest = run(make_spec(tmp_path, method), ScriptedBackbone(arithmetic))["this_invocation"]["resumed"]
    assert rest["interrupted_problems"] == 1 and rest["replayed_from_cache"] == 1  # p6, resumed now


def test_cache_replays_a_finished_run_into_a_new_folder(tmp_path, tiny_data):
    method = {"name": "m", "solver": "tests.fake_methods:ask_many", "params": {"n": 3}}
    run(make_spec(tmp_path, method), ScriptedBackbone(arithmetic))
    import shutil

    shutil.rmtree(tmp_path / "results")
    replay = ScriptedBackbone(arithmetic)
    metrics = run(make_spec(tmp_path, method), replay)
    assert replay.requests == []
    _, calls, _ = load(make_spec(tmp_path, method))
    assert all(c["cache_hit"] for c in calls) and metrics["totals"]["billed_usd"] == 0
    assert metrics["totals"]["cost_usd"] > 0  # the cost of producing these answers is still reported


def test_torn_last_line_is_repaired_on_resume(tmp_path, tiny_data):
    method = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}
    spec = make_spec(tmp_path, method, limit=4)
    run(spec, ScriptedBackbone(arithmetic))
    preds = spec.out_dir / "predictions.jsonl"
    lines = preds.read_text().splitlines(keepends=True)
    preds.write_text("".join(lines[:3]) + lines[3][:25])  # killed mid-write
    metrics = run(spec, ScriptedBackbone(arithmetic))
    assert metrics["n"] == 4
    assert len(read_jsonl_tolerant(preds)) == 4


def test_a_failing_problem_scores_zero_keeps_going_and_is_retried(tmp_path, tiny_data):
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:explode_on_p3", "params": {}})
    metrics = run(spec, ScriptedBackbone(arithmetic))
    preds, _, _ = load(spec)
    bad = next(p for p in preds if p["id"] == "p3")
    assert bad["status"] == "error" and "boom" in bad["error"] and bad["score"] == 0
    # an error is not a wrong answer: out of the headline, counted apart, and the run is not complete
    assert metrics["n"] == 7 and metrics["n_errors"] == 1 and metrics["complete"] is False
    assert metrics["first_error"]["id"] == "p3" and "boom" in metrics["first_error"]["error"]
    answered = [p["score"] for p in preds if p["id"] != "p3"]
    assert metrics["score"] == pytest.approx(sum(answered) / 7)
    again = run(spec, ScriptedBackbone(arithmetic))
    preds, _, _ = load(spec)
    assert [p["id"] for p in preds].count("p3") == 2  # retried on resume; the others were skipped
    assert len(preds) == 9 and again["n"] == 7 and again["n_errors"] == 1  # p3 fails again: still an error


def test_malformed_output_scores_zero_with_raw_output_kept(tmp_path, tiny_data):
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}, limit=2)
    run(spec, ScriptedBackbone(lambda m, s: "I refuse to answer."))
    preds, _, _ = load(spec)
    assert all(p["score"] == 0 and p["raw_output"] == "I refuse to answer." and p["extracted"] is None for p in preds)


def test_stateful_method_windows_are_ordered_and_resumable(tmp_path, tiny_data):
    method = {"name": "w", "solver": "tests.fake_methods:WindowCounter", "params": {}}
    spec = make_spec(tmp_path, method, limit=5)
    run(spec, ScriptedBackbone(arithmetic))
    state = json.loads((spec.out_dir / "method_state.json").read_text())
    assert state["windows_done"] == 2 and state["state"]["seen"] == ["p0", "p1", "p2", "p3", "p4"]
    preds, _, _ = load(spec)
    at_solve = {p["id"]: p["trace"]["state_at_solve"] for p in preds}
    assert at_solve == {"p0": 0, "p1": 0, "p2": 0, "p3": 3, "p4": 3}
    # a different selection cannot silently reuse the state
    with pytest.raises(ValueError, match="another problem selection"):
        run(make_spec(tmp_path, method), ScriptedBackbone(arithmetic))


def test_stateful_method_resumes_to_the_same_numbers(tmp_path, tiny_data):
    method = {"name": "w", "solver": "tests.fake_methods:WindowCounter", "params": {}}
    whole = make_spec(tmp_path / "a", method, limit=7)
    run(whole, ScriptedBackbone(arithmetic))
    expected = {p["id"]: p["trace"]["state_at_solve"] for p in load(whole)[0]}
    # simulate a kill in window 1: only window 0 was closed, and one of window 1's problems finished
    crashed = make_spec(tmp_path / "b", method, limit=7)
    run(crashed, ScriptedBackbone(arithmetic))
    preds_path = crashed.out_dir / "predictions.jsonl"
    rows = sorted(read_jsonl_tolerant(preds_path), key=lambda r: r["index"])[:4]
    preds_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    state = json.loads((crashed.out_dir / "method_state.json").read_text())
    state.update(windows_done=1, windows=state["windows"][:1], state={"seen": ["p0", "p1", "p2"]})
    (crashed.out_dir / "method_state.json").write_text(json.dumps(state))
    bb = ScriptedBackbone(arithmetic)
    run(crashed, bb)
    got = {p["id"]: p["trace"]["state_at_solve"] for p in load(crashed)[0]}
    assert got == expected and len(got) == 7


class RaisingScorer(EchoBenchmark):
    """A scorer with a bug: it raises on p1 (a crash in our code, not a wrong answer)."""

    async def score(self, text, problem):
        if problem.id == "p1":
            raise KeyError("scorer bug")
        return await super().score(text, problem)


def test_a_scorer_crash_is_an_error_not_a_zero(tmp_path, tiny_data):
    # before: the exception became score 0 with status ok, averaged into the headline as a wrong answer
    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}, limit=3)
    spec.benchmark_cfg["kind"] = "tests.test_runner.RaisingScorer"
    metrics = run(spec, ScriptedBackbone(arithmetic))
    preds, _, _ = load(spec)
    bad = next(p for p in preds if p["id"] == "p1")
    assert bad["status"] == "error" and "ScoringError" in bad["error"] and "scorer bug" in bad["error"]
    assert metrics["n"] == 2 and metrics["n_errors"] == 1 and metrics["complete"] is False


def shifted_arithmetic(offset: int = 0):
    """A script factory for ``backbone.script``: the right sum plus ``offset``."""
    def script(messages, sampling):
        i = int(re.search(r"What is (\d+)\+", messages[-1]["content"]).group(1))
        return f"ANSWER: {2 * i + offset}"
    return script


def scripted_spec(tmp_path, overrides):
    """The tiny benchmark on ``configs/backbone/scripted.yaml`` as ``backbone=scripted`` resolves it."""
    from agentic_repro.harness.compose import compose

    spec = make_spec(tmp_path, {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}, limit=3)
    spec.backbone_cfg.clear()
    spec.backbone_cfg.update(compose(["backbone=scripted", *overrides])["backbone"])
    spec.full_config["backbone"] = spec.backbone_cfg
    return spec


def test_backbone_scripted_is_built_from_its_config(tmp_path, tiny_data):
    # backbone=scripted: no double passed in, the runner builds it (harness.backbones kind scripted)
    import asyncio

    from agentic_repro.harness.runner import Runner

    spec = scripted_spec(tmp_path, ["backbone.reply=ANSWER: 2"])
    metrics = asyncio.run(Runner(spec).run())
    preds, calls, _ = load(spec)
    assert metrics["complete"] and metrics["n"] == 3 and len(calls) == 3
    assert {p["id"]: p["score"] for p in preds} == {"p0": 0.0, "p1": 1.0, "p2": 0.0}
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert meta["roles"]["default"]["model"] == {"kind": "scripted", "model": "scripted-model", "reply": "ANSWER: 2"}

    spec = scripted_spec(tmp_path / "factory", ["backbone.script=tests.test_runner:shifted_arithmetic",
                                                "+backbone.script_args.offset=0"])
    metrics = asyncio.run(Runner(spec).run())
    assert metrics["complete"] and metrics["score"] == 1.0


def test_backbone_scripted_refuses_a_script_it_cannot_load(tmp_path, tiny_data):
    import asyncio

    from agentic_repro.harness.backbone import BackboneError
    from agentic_repro.harness.runner import Runner

    spec = scripted_spec(tmp_path, ["backbone.script=tests.test_runner:no_such_script"])
    with pytest.raises(BackboneError, match="no_such_script"):
        asyncio.run(Runner(spec).run())
