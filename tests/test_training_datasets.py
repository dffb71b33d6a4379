"""Dataset builders (training/datasets.py) on hand-made run folders."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from agentic_repro.training.datasets import (Example, build_dpo, build_kto, build_sft, find_runs, read_dataset, trace_examples,
                               trajectories)


def _run(root: Path, preds: list[dict], calls: list[dict] | None = None, run_id: str = "t/tiny/m/b/42") -> Path:
    root.mkdir(parents=True)
    (root / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (root / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls or []))
    (root / "meta.json").write_text(json.dumps({"run_id": run_id, "benchmark": {"name": "tiny", "version": "3"},
                                                "model": {"kind": "embedded", "model": "qwen"},
                                                "roles": {"designer": {"adapter": None}}}))
    return root


def _pred(pid: str, score: float, stages: list[tuple[str, str]], status: str = "ok", attempt: str | None = None,
          role: str = "designer") -> dict:
    return {"id": pid, "status": status, "attempt": attempt or f"a-{pid}", "score": score, "raw_output": "x",
            "trace": {"training_examples": [{"prompt": p, "completion": c, "role": role} for p, c in stages]}}


@pytest.fixture
def runs(tmp_path: Path):
    preds = [
        _pred("p1", 0.0, [("boom", "boom")], status="error", attempt="old"),  # errored attempt, then retried
        _pred("p1", 1.0, [("s1", "plan A"), ("s2", "finish")]),
        _pred("p2", 0.0, [("s1", "plan B")]),
        _pred("p3", 1.0, [("q3", "answer 3")], status="error"),  # never training data
        _pred("p4", 1.0, [("s1", "plan A")]),                     # duplicate of p1's first stage
    ]
    calls = [{"problem_id": "p1", "attempt": "old", "stage": "x"}, {"problem_id": "p1", "attempt": "a-p1", "stage": "d"}]
    return find_runs([_run(tmp_path / "results" / "r1", preds, calls)])


def test_errored_problems_are_never_training_data_and_only_final_attempts_count(runs):
    ts = {t.id: t for t in trajectories(runs)}
    assert sorted(ts) == ["p1", "p2", "p4"]
    assert ts["p1"].score == 1.0 and [c["stage"] for c in ts["p1"].calls] == ["d"]


def test_sft_keeps_successful_stages_with_provenance(runs, tmp_path: Path):
    ds = build_sft(runs, trace_examples(), tmp_path / "sft.jsonl")
    assert [(r["prompt"], r["completion"]) for r in ds.rows] == [("s1", "plan A"), ("s2", "finish")]
    assert ds.provenance["counts"] == {"trajectories": 3, "examples": 4, "undesirable_dropped": 1, "duplicates": 1,
                                       "rows": 2}
    src = ds.provenance["sources"][0]
    pred_bytes = (runs[0].root / "predictions.jsonl").read_bytes()
    assert src["files"]["predictions.jsonl"] == hashlib.sha256(pred_bytes).hexdigest()
    assert src["run_id"] == "t/tiny/m/b/42" and ds.provenance["scorers"] == ['{"name": "tiny", "version": "3"}']
    assert ds.provenance["builder_version"] and ds.provenance["roles"] == ["designer"]
    assert ds.rows[0]["source"]["problem_id"] == "p1" and ds.rows[0]["source"]["attempt"] == "a-p1"
    again = read_dataset(ds.path)
    assert again.rows == ds.rows and again.sha256 == hashlib.sha256(ds.path.read_bytes()).hexdigest() == ds.sha256
    assert json.loads(ds.path.read_text().splitlines()[0])["provenance"]["kind"] == "sft"


def test_kto_balances_desirable_and_undesirable(tmp_path: Path):
    preds = [_pred(f"ok{i}", 1.0, [(f"q{i}", f"good {i}")]) for i in range(4)] + \
            [_pred(f"bad{i}", 0.0, [(f"r{i}", f"bad {i}")]) for i in range(2)]
    runs = find_runs([_run(tmp_path / "r", preds)])
    one = build_kto(runs, trace_examples(), tmp_path / "kto.jsonl", ratio=1.0, seed=3)
    assert (one.provenance["counts"]["desirable"], one.provenance["counts"]["undesirable"]) == (2, 2)
    assert one.provenance["counts"]["before_balancing"] == {"desirable": 4, "undesirable": 2}
    assert sorted(r["label"] for r in one.rows) == [False, False, True, True]
    same = build_kto(runs, trace_examples(), tmp_path / "kto2.jsonl", ratio=1.0, seed=3)
    assert same.rows == one.rows  # seeded
    everything = build_kto(runs, trace_examples(), tmp_path / "kto3.jsonl", ratio=None)
    assert len(everything.rows) == 6
    two = build_kto(runs, trace_examples(), tmp_path / "kto4.jsonl", ratio=2.0)
    assert (two.provenance["counts"]["desirable"], two.provenance["counts"]["undesirable"]) == (4, 2)
    half = build_kto(runs, trace_examples(), tmp_path / "kto5.jsonl", ratio=0.5)
    assert (half.provenance["counts"]["desirable"], half.provenance["counts"]["undesirable"]) == (1, 2)


def _sampled_plans(t):
    """A DynaGraph-like extractor: several plans per query, each with its critic reward."""
    return [Example(t.trace["query"], p["plan"], float(p["reward"]), "planner") for p in t.trace["plans"]]


def test_dpo_pairs_by_prompt_and_reward(tmp_path: Path):
    preds = [{"id": "q1", "status": "ok", "attempt": "a", "score": 1.0,
              "trace": {"query": "Q1", "plans": [{"plan": "good", "reward": 0.9}, {"plan": "meh", "reward": 0.2},
                                                 {"plan": "meh2", "reward": 0.2}]}},
             {"id": "q2", "status": "ok", "attempt": "b", "score": 0.0,
              "trace": {"query": "Q2", "plans": [{"plan": "x", "reward": 0.5}, {"plan": "y", "reward": 0.5}]}}]
    runs = find_runs([_run(tmp_path / "r", preds)])
    bw = build_dpo(runs, _sampled_plans, tmp_path / "dpo.jsonl")
    assert [(r["prompt"], r["chosen"], r["rejected"]) for r in bw.rows] == [("Q1", "good", "meh2")]
    assert bw.provenance["counts"]["prompts_without_pair"] == 1  # Q2: a tie never makes a pair
    assert bw.rows[0]["source"]["chosen"]["problem_id"] == "q1"
    every = build_dpo(runs, _sampled_plans, tmp_path / "dpo2.jsonl", pairing="all")
    assert sorted((r["chosen"], r["rejected"]) for r in every.rows) == [("good", "meh"), ("good", "meh2")]
    assert build_dpo(runs, _sampled_plans, tmp_path / "dpo3.jsonl", min_margin=0.8).rows == []


def test_role_filter_and_chat_prompts(tmp_path: Path):
    msgs = [{"role": "system", "content": "design"}, {"role": "user", "content": "task"}]
    preds = [{"id": "a", "status": "ok", "attempt": "1", "score": 1.0,
              "trace": {"training_examples": [{"prompt": msgs, "completion": "G", "role": "designer"},
                                              {"prompt": "exec", "completion": "out", "role": "executor"}]}}]
    runs = find_runs([_run(tmp_path / "r", preds)])
    ds = build_sft(runs, trace_examples(), tmp_path / "sft.jsonl", roles=["designer"])
    assert [r["prompt"] for r in ds.rows] == [msgs]


def test_environment_steps_reach_the_extractor(tmp_path: Path):
    """An environment run's steps (trajectories.jsonl, by problem and attempt) are the extractor's to use."""
    root = _run(tmp_path / "r", [{"id": "e1", "status": "ok", "attempt": "x2", "score": 1.0, "trace": {}}])
    steps = [{"problem_id": "e1", "attempt": "x1", "episode": 0, "action": "old attempt"},
             {"problem_id": "e1", "attempt": "x2", "episode": 0, "observation": "a room", "action": "go north"},
             {"problem_id": "e1", "attempt": "x2", "episode": 0, "observation": "a door", "action": "open door"}]
    (root / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))

    def actions(t):
        return [Example(s["observation"], s["action"], t.score >= 1.0, "actor") for s in t.steps]

    runs = find_runs([root])
    ds = build_sft(runs, actions, tmp_path / "acts.jsonl")
    assert [(r["prompt"], r["completion"]) for r in ds.rows] == [("a room", "go north"), ("a door", "open door")]
    assert "trajectories.jsonl" in ds.provenance["sources"][0]["files"]


def test_bad_inputs_fail_clearly(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no run folder"):
        find_runs([tmp_path])
    runs = find_runs([_run(tmp_path / "r", [_pred("p", 1.0, [("a", "b")])])])
    with pytest.raises(TypeError, match="not training.datasets.Example"):
        build_sft(runs, lambda t: [("a", "b", True)], tmp_path / "x.jsonl")
    (tmp_path / "plain.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    with pytest.raises(ValueError, match="provenance header"):
        read_dataset(tmp_path / "plain.jsonl")
    with pytest.raises(ValueError, match="ratio"):
        build_kto(find_runs([_run(tmp_path / "r2", [_pred("p", 1.0, [("a", "b")]), _pred("q", 0.0, [("c", "d")])])]),
                  trace_examples(), tmp_path / "k.jsonl", ratio=0)
