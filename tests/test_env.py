"""The environment protocol with a scripted environment: score from the environment, step cap,
trajectories as they happen, resume after a kill mid-episode, a crashed environment is an error."""
from __future__ import annotations

import asyncio
import json

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.runner import Runner
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.scripted_env import CounterBenchmark, counter_bench_cfg, counter_data, walker_script


@pytest.fixture
def counter(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    return root


def env_spec(tmp_path, *, params=None, runner=None, **env):
    method = {"name": "walker", "solver": "tests.core_methods:env_walker", "params": params or {}}
    spec = make_spec(tmp_path, method, runner={"max_concurrent_problems": 1, **(runner or {})})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(counter_bench_cfg(**env))
    return spec


def load(spec):
    out = spec.out_dir
    return (read_jsonl_tolerant(out / "predictions.jsonl"), read_jsonl_tolerant(out / "trajectories.jsonl"),
            json.loads((out / "metrics.json").read_text()))


def test_score_comes_from_the_environment_not_the_method_claim(tmp_path, counter):
    # the hint the method reads is wrong for g1 and g2: the policy stops at the wrong place, yet claims success
    counter_data(counter, goals=[2, 3, 1], hints=[2, 1, 4])
    spec = env_spec(tmp_path)
    metrics = run(spec, ScriptedBackbone(walker_script))
    preds, traj, _ = load(spec)
    by_id = {p["id"]: p for p in preds}
    assert {k: v["score"] for k, v in by_id.items()} == {"g0": 1.0, "g1": 0.0, "g2": 0.0}
    assert all(p["raw_output"].endswith("SUCCESS") for p in preds)  # the claim is kept, not believed
    assert metrics["score"] == pytest.approx(1 / 3)
    ep = by_id["g0"]["episodes"][0]
    assert ep["success"] is True and ep["done"] and ep["steps"] == 3 and not ep["truncated"]
    # every reset, step and note is in trajectories.jsonl, with what the method recorded
    g0 = [t for t in traj if t["problem_id"] == "g0"]
    assert [t["event"] for t in g0] == ["reset", "step", "note", "step", "note", "step", "note"]
    assert g0[0]["actions"] == ["inc", "dec", "stop"] and g0[0]["extra"] == {"note": "start"}
    assert [t["action"] for t in g0 if t["event"] == "step"] == ["inc", "inc", "stop"]
    assert all(t["extra"]["confidence"] == 0.9 for t in g0 if t["event"] == "step")
    assert g0[2]["extra"]["reflection"].startswith("after 1 steps")
    assert {t["attempt"] for t in g0} == {by_id["g0"]["attempt"]}
    # the final record carries the same trajectory (training reads it from predictions.jsonl)
    assert [s["event"] for s in ep["trajectory"]] == [t["event"] for t in g0]


def test_step_cap_truncates_and_a_step_after_the_end_is_refused(tmp_path, counter):
    counter_data(counter, goals=[5])
    spec = env_spec(tmp_path, max_steps=3, params={"step_after_done": True})
    run(spec, ScriptedBackbone(walker_script))
    preds, traj, metrics = load(spec)
    p = preds[0]
    assert p["status"] == "ok" and p["score"] == 0.0
    ep = p["episodes"][0]
    assert ep["steps"] == 3 and ep["truncated"] and ep["done"] and ep["success"] is None
    assert p["trace"]["truncated"] is True and "step cap" in p["trace"]["episode_over"]
    assert [t["truncated"] for t in traj if t["event"] == "step"] == [False, False, True]


def test_inline_async_engine_and_inline_sync_engine(tmp_path, counter):
    counter_data(counter, goals=[1, 2])
    for i, env in enumerate([{"engine": "tests.scripted_env:AsyncCounterEngine", "process": False},
                             {"process": False}]):
        spec = env_spec(tmp_path / str(i), **env)
        metrics = run(spec, ScriptedBackbone(walker_script))
        assert metrics["score"] == 1.0 and metrics["n"] == 2


class KillAt(ScriptedBackbone):
    """Answers like the walker until request ``at``, then raises KeyboardInterrupt (a simulated kill)."""

    def __init__(self, at: int) -> None:
        super().__init__(walker_script)
        self.at = at

    async def complete(self, messages, sampling, n, **kw):
        if len(self.requests) + 1 == self.at:
            raise KeyboardInterrupt
        return await super().complete(messages, sampling, n)


def test_resume_after_a_kill_mid_episode_gives_identical_results(tmp_path, counter):
    counter_data(counter, goals=[2, 3, 1])
    whole = env_spec(tmp_path / "whole")
    run(whole, ScriptedBackbone(walker_script))
    expected, expected_traj, expected_metrics = load(whole)

    killed = env_spec(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        run(killed, KillAt(at=6))  # g0 takes 3 calls; g1 is killed after 2 of its steps
    preds, traj, _ = load(killed)
    assert [p["id"] for p in preds] == ["g0"]
    assert [t["event"] for t in traj if t["problem_id"] == "g1"] == ["reset", "step", "note", "step", "note"]
    dead_attempt = {t["attempt"] for t in traj if t["problem_id"] == "g1"}

    second = ScriptedBackbone(walker_script)
    run(killed, second)
    preds, traj, metrics = load(killed)
    assert [p["id"] for p in preds] == ["g0", "g1", "g2"]
    # g0 was skipped; g1 restarted from reset with the first two calls replayed from the cache
    assert len(second.requests) == (4 - 2) + 2
    g1 = [p for p in preds if p["id"] == "g1"][0]
    assert g1["attempt"] not in dead_attempt
    g1_lines = [t for t in traj if t["problem_id"] == "g1" and t["attempt"] == g1["attempt"]]
    assert g1_lines[0]["event"] == "reset" and len(g1_lines) == 1 + 2 * 4

    def comparable(rows):
        keep = ("id", "score", "status", "raw_output")
        return [{**{k: r[k] for k in keep}, "episodes": [{k: v for k, v in e.items() if k != "trajectory"}
                                                         for e in r["episodes"]]} for r in rows]

    assert comparable(preds) == comparable(expected)
    assert metrics["score"] == expected_metrics["score"] and metrics["n"] == expected_metrics["n"]


@pytest.mark.parametrize("catch", [False, True])
def test_a_crashed_worker_is_an_error_never_a_zero(tmp_path, counter, catch):
    counter_data(counter, goals=[2, 2, 1])
    spec = env_spec(tmp_path, params={"action_override": "crash", "override_on": "g0", "catch_failure": catch})
    metrics = run(spec, ScriptedBackbone(walker_script))
    preds, _, _ = load(spec)
    by_id = {p["id"]: p for p in preds}
    # even when the method swallows the failure and answers, the problem is an error, not a score
    assert by_id["g0"]["status"] == "error" and "worker died (exit code 3)" in by_id["g0"]["error"]
    assert by_id["g0"]["score"] == 0 and by_id["g0"]["score_details"] == {"not_scored": "the problem errored"}
    assert (by_id["g0"]["trace"].get("swallowed") is not None) == catch
    # the next problems get a fresh worker and are scored from the environment
    assert by_id["g1"]["status"] == by_id["g2"]["status"] == "ok"
    assert by_id["g1"]["score"] == by_id["g2"]["score"] == 1.0
    assert by_id["g1"]["episodes"][0]["trajectory"][0]["info"]["pid"] != \
        [t for t in load(spec)[1] if t["problem_id"] == "g0"][0]["info"]["pid"]
    assert metrics["n_errors"] == 1 and metrics["complete"] is False


def test_an_engine_exception_and_a_hung_step_are_errors(tmp_path, counter):
    counter_data(counter, goals=[2])
    spec = env_spec(tmp_path, params={"action_override": "raise"})
    run(spec, ScriptedBackbone(walker_script))
    p = load(spec)[0][0]
    assert p["status"] == "error" and "engine broke" in p["error"]
    spec = env_spec(tmp_path / "hang", step_timeout_s=1.0, params={"action_override": "hang"})
    run(spec, ScriptedBackbone(walker_script))
    p = load(spec)[0][0]
    assert p["status"] == "error" and "did not answer within 1s" in p["error"]


def test_env_config_is_validated(tmp_path, counter):
    from agentic_repro.harness.env import EnvSpec

    with pytest.raises(ValueError, match="unknown key"):
        EnvSpec.from_config({"engine": "x:y", "max_step": 3})
    with pytest.raises(ValueError, match="max_steps"):
        EnvSpec.from_config({"engine": "x:y", "max_steps": 0})


def test_a_session_left_open_is_closed_by_the_runner(tmp_path, counter):
    """``s = await ctx.env()`` without closing: with one worker allowed, the next problem would wait forever
    unless the runner releases the worker when the problem ends."""
    counter_data(counter, goals=[1, 2, 0])
    spec = env_spec(tmp_path, workers=1)
    spec.method_cfg.update(solver="tests.core_methods:env_no_close")
    metrics = asyncio.run(asyncio.wait_for(Runner(spec, backbone=ScriptedBackbone(walker_script)).run(), 60))
    assert metrics["n"] == 3 and metrics["score"] == 1.0
    preds, traj, _ = load(spec)
    assert len({t["info"]["pid"] for t in traj if t["event"] == "reset"}) == 1  # one worker, reused


class BrokenCustomEngine:
    async def reset(self, problem, seed):
        return "counter at 0", {"admissible_actions": ["inc", "stop"]}

    async def step(self, action):
        raise KeyError("custom engine lost its state")

    async def close(self):
        return None


class CustomBench(CounterBenchmark):
    """A benchmark that builds its own (broken) engine instead of naming one in env.engine."""

    def engine(self, problem):
        return BrokenCustomEngine()


def test_a_custom_engine_that_raises_is_an_error_even_when_the_method_catches_it(tmp_path, counter):
    counter_data(counter, goals=[1])
    spec = env_spec(tmp_path, params={"catch_failure": True})
    spec.benchmark_cfg.update(kind="tests.test_env.CustomBench")
    spec.benchmark_cfg.pop("env")
    run(spec, ScriptedBackbone(walker_script))
    (p,) = load(spec)[0]
    assert p["status"] == "error" and "custom engine lost its state" in p["error"]
    assert "custom engine lost its state" in p["trace"]["swallowed"]


def test_a_method_that_never_plays_an_environment_is_an_error_not_a_zero(tmp_path, counter):
    # before: an environment problem the method never reset scored 0 ("no-episode") with status ok
    counter_data(counter, goals=[1, 2])
    spec = env_spec(tmp_path)
    spec.method_cfg.update({"name": "ask", "solver": "tests.fake_methods:ask_once", "params": {}})
    metrics = run(spec, ScriptedBackbone(lambda m, s: "SUCCESS"))
    preds, _, _ = load(spec)
    assert all(p["status"] == "error" and "played no episode" in p["error"] for p in preds)
    assert metrics["n"] == 0 and metrics["n_errors"] == 2 and metrics["complete"] is False
