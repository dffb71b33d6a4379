"""bench2 core: LLM-judge scoring beside the deterministic score, samples_per_task and unbiased pass@k, resume."""
from __future__ import annotations

import math
import re

import pytest

from agentic_repro.harness.backbone import BackboneError
from agentic_repro.harness.judge import JudgeSpec, judge_metrics, parse_verdict
from agentic_repro.harness.results import pass_at_k, read_jsonl_tolerant, sample_seed
from agentic_repro.harness.validate import ConfigError
from tests.conftest import compose, make_spec, run
from tests.doubles import ScriptedBackbone

JUDGE_BB = {"name": "judge-bb", "kind": "openai", "model": "judge-model", "price": 0, "max_concurrency": 2}
PROMPT = "JUDGE Q: {question}\nGT: {ground_truth}\nS: {solution}\nSay [[True]] or [[False]]."
ASK = {"name": "m", "solver": "tests.fake_methods:ask_once", "params": {}}


def _n(messages) -> int:
    return int(re.search(r"What is (\d+)\+", messages[-1]["content"]).group(1))


def solver(messages, sampling) -> str:
    i = _n(messages)
    return f"ANSWER: {2 * i if i % 2 == 0 else 99}"  # right on even problems


def judge_script(messages, sampling) -> str:
    text = messages[-1]["content"]
    assert text.startswith("JUDGE Q: What is") and "GT: " in text and "S: ANSWER:" in text
    i = _n(messages)
    if i == 2:
        return "I cannot decide."  # unparsed verdict
    return "reasoning... [[True]]" if i in (0, 1, 4) else "[[False]]"  # p1 a false positive, p6 a false negative


def _judge_spec(tmp_path, limit=8, roles=True):
    spec = make_spec(tmp_path, dict(ASK), limit=limit)
    spec.benchmark_cfg["judge"] = {"enabled": True, "prompt": PROMPT, "max_tokens": 32}
    spec.roles_cfg = {"judge": dict(JUDGE_BB)} if roles else {}
    return spec


def test_parse_verdict_takes_the_last_one():
    assert parse_verdict("[[False]] no wait [[ true ]]") is True
    assert parse_verdict("[[False]]") is False
    assert parse_verdict("True") is None and parse_verdict(None) is None


def test_judge_spec_needs_a_solution_slot():
    assert JudgeSpec.from_config({"enabled": False, "prompt": "x"}) is None
    with pytest.raises(ValueError, match="solution"):
        JudgeSpec.from_config({"enabled": True, "prompt": "no slot"})


def test_judge_scores_beside_the_deterministic_score(tmp_path, tiny_data):
    spec = _judge_spec(tmp_path)
    judge = ScriptedBackbone(judge_script, name="judge")
    m = run(spec, {"scripted": ScriptedBackbone(solver), "judge-bb": judge})
    preds = {p["id"]: p for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")}
    assert m["score"] == 0.5 and m["complete"]  # deterministic: even problems right
    assert preds["p0"]["judge"]["verdict"] == "true" and preds["p6"]["judge"]["score"] == 0.0
    assert preds["p2"]["judge"]["verdict"] == "unparsed" and preds["p2"]["judge"]["score"] is None
    # parsed: p0 T, p1 T, p3 F, p4 T, p5 F, p6 F, p7 F -> judge_score 3/7; agree on p0 p3 p4 p5 p7 = 5/7
    assert m["judge_score"] == pytest.approx(3 / 7) and m["judge_agreement"] == pytest.approx(5 / 7)
    assert m["judge"]["n_judged"] == 8 and m["judge"]["n_unparsed"] == 1
    assert len(judge.requests) == 8 and all(r[1]["max_tokens"] == 32 for r in judge.requests)
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    jc = [c for c in calls if c["role"] == "judge"]
    assert len(jc) == 8 and {c["stage"] for c in jc} == {"judge"}
    assert m["by_role"]["judge"]["calls"] == 8 == m["judge"]["by_role"]["calls"]


def test_no_judge_without_the_judge_role(tmp_path, tiny_data):
    spec = _judge_spec(tmp_path, roles=False)
    bb = ScriptedBackbone(solver)
    m = run(spec, bb)
    assert "judge_score" not in m and len(bb.requests) == 8
    assert all("judge" not in p for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl"))


class DeadJudge(ScriptedBackbone):
    async def complete(self, messages, sampling, n):
        raise BackboneError("connection refused", kind="connection")


def test_a_judge_failure_is_an_error_and_resume_judges_again(tmp_path, tiny_data):
    spec = _judge_spec(tmp_path, limit=2)
    spec.runner_cfg["fail_fast_after"] = 0
    solver_bb = ScriptedBackbone(solver)
    m = run(spec, {"scripted": solver_bb, "judge-bb": DeadJudge(judge_script)})
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert m["n_errors"] == 2 and not m["complete"] and m["n"] == 0  # never scored as 0
    assert all(p["status"] == "error" and p["error"].startswith("JudgeError") for p in preds)
    asked = len(solver_bb.requests)
    m2 = run(spec, {"scripted": solver_bb, "judge-bb": ScriptedBackbone(judge_script)})
    assert m2["complete"] and m2["n"] == 2 and m2["judge_score"] == 1.0  # p0 T, p1 T
    assert len(solver_bb.requests) == asked  # the method's answers replayed from the cache


def test_pass_at_k_is_unbiased_on_hand_computed_counts():
    rows = []
    for pid, outcomes in {"a": [1, 0, 0], "b": [0, 0, 0], "c": [1, 1, 1]}.items():
        rows += [{"id": f"{pid}#{j}", "problem_id": pid, "score": float(o)} for j, o in enumerate(outcomes)]
    out = pass_at_k(rows, 3, 0.5)
    assert out["pass_at_k"]["1"] == pytest.approx(4 / 9)
    assert out["pass_at_k"]["2"] == pytest.approx(5 / 9)  # a: 1 - C(2,2)/C(3,2) = 2/3
    assert out["pass_at_k"]["3"] == pytest.approx(2 / 3)
    # a problem with fewer answered samples than j does not enter pass@j
    short = pass_at_k(rows[:-1], 3, 0.5)
    assert short["pass_at_k_problems"] == {"1": 3, "2": 3, "3": 2}


def seeded(messages, sampling) -> str:
    i = _n(messages)
    ok = (sampling["seed"] + i) % 3 == 0  # correctness depends on the sample's seed
    return f"ANSWER: {2 * i if ok else -1}"


def test_samples_per_task_gives_k_independent_seeded_samples_and_pass_at_k(tmp_path, tiny_data):
    spec = make_spec(tmp_path, dict(ASK), limit=4)
    spec.samples_per_task = 3
    bb = ScriptedBackbone(seeded)
    m = run(spec, bb)
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert sorted(p["id"] for p in preds) == sorted(f"p{i}#{j}" for i in range(4) for j in range(3))
    assert {p["sample_seed"] for p in preds if p["sample"] == 0} == {42}
    assert len({p["sample_seed"] for p in preds}) == 3 and all(p["problem_id"] == p["id"][:2] for p in preds)
    assert len({r[1]["seed"] for r in bb.requests}) == 3  # distinct request seeds reach the backbone
    assert m["samples_per_task"] == 3 and m["n_problems"] == 4 and m["n"] == 12 and m["complete"]
    # independent recomputation from the records
    by = {}
    for p in preds:
        by.setdefault(p["problem_id"], []).append(p["score"] >= 0.5)
    for j in (1, 2, 3):
        want = sum(1 - math.comb(3 - sum(v), j) / math.comb(3, j) for v in by.values()) / 4
        assert m["pass_at_k"][str(j)] == pytest.approx(want)
    assert m["pass_at_k"]["1"] == pytest.approx(m["score"])
    assert 0 < m["pass_at_k"]["1"] < m["pass_at_k"]["3"]  # the seeds really change the answers


def test_sample_zero_replays_a_plain_run(tmp_path, tiny_data):
    plain = make_spec(tmp_path, dict(ASK), limit=2)
    bb = ScriptedBackbone(seeded)
    run(plain, bb)
    spec = make_spec(tmp_path, dict(ASK), limit=2)
    spec.experiment = "k"
    spec.samples_per_task = 2
    before = len(bb.requests)
    run(spec, bb)
    assert len(bb.requests) - before == 2  # sample 0 of both problems came from the cache
    assert sample_seed(42, 0) == 42 and sample_seed(42, 1) != sample_seed(42, 2)


class FlakyOnce(ScriptedBackbone):
    """Fails the first request of one sample's seed, then answers."""

    def __init__(self, bad_seed):
        super().__init__(seeded)
        self.bad_seed, self.failed = bad_seed, False

    async def complete(self, messages, sampling, n):
        if sampling["seed"] == self.bad_seed and not self.failed:
            self.failed = True
            raise BackboneError("boom", kind="http_400")
        return await super().complete(messages, sampling, n)


def test_resume_with_samples_reruns_only_the_errored_sample(tmp_path, tiny_data):
    from agentic_repro.harness.llm import request_seed

    spec = make_spec(tmp_path, dict(ASK), limit=2, runner={"fail_fast_after": 0})
    spec.samples_per_task = 2
    bb = FlakyOnce(request_seed(sample_seed(42, 1), 0))
    m = run(spec, bb)
    assert m["n_errors"] >= 1 and not m["complete"]
    done = {p["id"] for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl") if p["status"] == "ok"}
    before = len(bb.requests)
    m2 = run(spec, bb)
    assert m2["complete"] and m2["n"] == 4 and m2["pass_at_k_problems"] == {"1": 2, "2": 2}
    assert len(bb.requests) - before == 4 - len(done)  # only the errored samples asked again


def test_samples_per_task_is_validated():
    from agentic_repro.harness.runner import spec_from_config

    with pytest.raises(ConfigError, match="samples_per_task"):
        spec_from_config(compose(["samples_per_task=0"]))
    assert spec_from_config(compose(["samples_per_task=5"])).samples_per_task == 5


def test_judge_metrics_empty():
    assert judge_metrics([], 0.5)["judge_score"] is None
