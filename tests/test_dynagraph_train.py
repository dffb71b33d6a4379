"""Critic-guided DPO data for the DynaGraph planner and expert SFT data: the critic's reward on hand-computed
trajectories, pair construction from a sampling run (scripted double), and DPO on the tiny model (slow)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentic_repro.dynagraph.critic import CriticOptions, reward, s_cost
from agentic_repro.dynagraph.train.data import critic_plans, expert_steps
from agentic_repro.harness.llm import request_seed
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_dynagraph import plan, script_factory
from agentic_repro.training.datasets import build_dpo, build_sft, find_runs, read_dataset, trajectories


def test_critic_reward_on_hand_computed_trajectories():
    o = CriticOptions()                                    # lam 0.05 / 0.10, sqrt, clip
    assert s_cost(4, 0, o) == pytest.approx(0.10)
    assert reward(1.0, True, 4, 0, o) == pytest.approx(0.90)             # 1 - 0.05*2
    assert reward(1.0, True, 9, 1, o) == pytest.approx(1 - 0.15 - 0.10)  # 0.75
    assert reward(1.0, True, 9, 4, o) == pytest.approx(1 - 0.15 - 0.20)  # sub-linear in eta: 4 recon = 2x 1 recon
    assert reward(1.0, False, 2, 0, o) == 0.0                            # the gate nullifies
    assert reward(0.0, True, 4, 0, o) == 0.0                             # clip: never below a nullified one
    assert reward(0.0, True, 4, 0, CriticOptions(gate="zero")) == pytest.approx(-0.10)
    assert reward(1.0, False, 2, 0, CriticOptions(gate="floor")) == -1.0
    assert reward(1.0, True, 3, 1, CriticOptions(cost_form="log")) == pytest.approx(
        1 - 0.05 * math.log(4) - 0.10 * math.log(2))
    assert reward(1.0, True, 4, 0, CriticOptions(cost_form="linear")) == pytest.approx(0.80)
    with pytest.raises(ValueError):
        CriticOptions(gate="soft")


SEEDS = {request_seed(42, s * 100): s for s in range(3)}


def sampling_script():
    """Sample 0 proposes a cyclic plan first (illegal), sample 1 a 2-node plan, sample 2 a 5-node plan."""
    inner = script_factory(bad_first_plan=False)

    def script(messages, sampling):
        last = messages[-1]["content"]
        if "Write a plan" in last and len(messages) == 2:
            s = SEEDS[sampling["seed"]]
            if s == 0:
                return plan(("v1", "E_logic", ["v2"]), ("v2", "E_logic", ["v1"]))
            if s == 1:
                return plan(("v1", "E_rag", []), ("v2", "E_expr", ["v1"]))
            return plan(("v1", "E_rag", []), ("v2", "E_rag", []), ("v3", "E_rag", ["v1"]), ("v4", "E_rag", ["v2"]),
                        ("v5", "E_expr", ["v3", "v4"]))
        return inner(messages, sampling)
    return script


def _sampling_run(tmp_path: Path, script, limit: int):
    """A dynagraph_sample run (3 plan samples per problem) of the first ``limit`` tiny problems: (spec, metrics)."""
    method = {"name": "dynagraph_sample", "solver": "agentic_repro.dynagraph.method:DynaGraph",
              "roles": ["planner", "expert1", "expert2", "expert3"], "params": {"plan_samples": 3}}
    spec = make_spec(tmp_path, method, limit=limit)
    return spec, run(spec, ScriptedBackbone(script))


@pytest.fixture
def sample_run(tmp_path: Path, tiny_data: Path) -> Path:
    spec, m = _sampling_run(tmp_path, sampling_script(), limit=2)
    assert m["n"] == 2 and m["score"] == 1.0
    return spec.out_dir


def test_pairs_are_critic_ranked_with_provenance(sample_run: Path, tmp_path: Path):
    t = json.loads((sample_run / "predictions.jsonl").read_text().splitlines()[0])["trace"]
    assert [c["sample"] for c in t["candidates"]] == [0, 1, 2]
    assert [c["nodes_executed"] for c in t["candidates"]] == [4, 2, 5]   # sample 0: re-asked, 3-node plan + 1 patch
    ds = build_dpo(find_runs([sample_run]), critic_plans(), tmp_path / "dpo.jsonl")
    assert len(ds.rows) == 2                                   # one (best, worst) pair per training query
    row = ds.rows[0]
    assert json.loads(row["chosen"])["nodes"].__len__() == 2   # the short legal plan wins
    assert "v2" in json.loads(row["rejected"])["nodes"][0]["inputs"]   # the cyclic plan loses
    assert row["chosen_reward"] == pytest.approx(1 - 0.05 * math.sqrt(2)) and row["rejected_reward"] == 0.0
    assert row["prompt"][0]["role"] == "system" and "Write a plan" in row["prompt"][1]["content"]
    back = read_dataset(ds.path)
    assert back.provenance["extractor"].startswith("dynagraph.critic_plans") or "critic_plans" in json.dumps(
        back.provenance)
    assert row["source"]["chosen"]["problem_id"] == "p0"


def test_expert_sft_examples_per_role(sample_run: Path, tmp_path: Path):
    runs = find_runs([sample_run])
    rag = build_sft(runs, expert_steps(), tmp_path / "rag.jsonl", roles=["expert1"])
    expr = build_sft(runs, expert_steps(), tmp_path / "expr.jsonl", roles=["expert3"])
    assert rag.rows and all("You are E_rag" in r["prompt"][0]["content"] for r in rag.rows)
    assert expr.rows and all(json.loads(r["completion"])["draft"].count("ANSWER:") == 1 for r in expr.rows)


@pytest.mark.slow
def test_dpo_on_the_tiny_model_loss_falls_and_the_adapter_changes_generations(sample_run: Path, tmp_path: Path):
    from llama_cpp import Llama

    from agentic_repro.training.fixtures import tiny_base
    from agentic_repro.training.train import compose_config, train

    tiny = tiny_base()
    ds = build_dpo(find_runs([sample_run]), critic_plans(), tmp_path / "dpo.jsonl")
    cfg = compose_config("dpo", [f"data={ds.path}", f"base={tiny.hf_dir}", f"out={tmp_path / 'planner'}",
                                 "threads=1", "lr=3e-2", "grad_accum=1", "warmup_ratio=0", "val_fraction=0",
                                 "max_steps=2", "batch_size=2", "name=planner", "max_length=512"])
    res = train(cfg)
    print(json.dumps({k: v for k, v in json.loads((tmp_path / 'planner' / 'result.json').read_text()).items() if k.endswith('_s') or 'per_step' in k}))
    assert res.losses[0] == pytest.approx(0.6931, abs=1e-3) and res.losses[-1] < res.losses[0] - 0.01, res.losses
    ident = json.loads((tmp_path / "planner" / "adapter.gguf.json").read_text())
    assert ident["training_data_sha256"] == read_dataset(ds.path).sha256
    outs = []
    prompt = read_dataset(ds.path).rows[0]["prompt"]
    for kw in ({}, {"lora_path": str(res.gguf)}):
        llm = Llama(str(tiny.gguf), n_ctx=1024, n_threads=1, verbose=False, seed=0, **kw)
        r = llm.create_chat_completion(prompt, max_tokens=8, temperature=0)
        outs.append(r["choices"][0]["message"]["content"])
        llm.close()
    assert outs[0] != outs[1], outs


# ---- issue 20 item 9: the critic's legality uses the runtime's limits; each candidate its own outcome ---------

def _mixed_script():
    """Sample 0 answers wrong (999); sample 1's first plan has 7 nodes (the runtime's max_plan_nodes is 6: refused
    and re-asked, then a legal 3-node plan answers right); sample 2 plans 2 nodes and answers right."""
    inner = script_factory(bad_first_plan=False)

    def script(messages, sampling):
        last = messages[-1]["content"]
        s = SEEDS.get(sampling["seed"])
        if "Write a plan" in last and len(messages) == 2:
            if s == 1:
                return plan(*[(f"v{i}", "E_rag", []) for i in range(1, 7)], ("v7", "E_expr", [f"v{i}" for i in range(1, 7)]))
            if s == 2:
                return plan(("v1", "E_logic", []), ("v2", "E_expr", ["v1"]))
        out = inner(messages, sampling)
        if messages[0]["content"].startswith("You are E_expr") and s == 0:
            return json.dumps({"draft": "The sum is 999. ANSWER: 999", "unsupported": [], "confidence": 0.9})
        return out
    return script


@pytest.fixture
def mixed_run(tmp_path: Path, tiny_data: Path) -> Path:
    spec, m = _sampling_run(tmp_path, _mixed_script(), limit=1)
    assert m["n"] == 1 and m["score"] == 0.0                      # the scored candidate 0 is wrong
    return spec.out_dir


def test_a_plan_the_runtime_refused_is_illegal_for_the_critic(mixed_run: Path, tmp_path: Path):
    t = json.loads((mixed_run / "predictions.jsonl").read_text().splitlines()[0])["trace"]
    first = t["candidates"][1]["plans"][0]["attempts"]
    assert not first[0]["check"]["ok"] and "at most 6" in first[0]["check"]["errors"][-1] and first[1]["check"]["ok"]
    ex = {e.meta["sample"]: e for e in critic_plans()(next(iter(trajectories(find_runs([mixed_run])))))}
    assert ex[1].meta["legal"] is False and ex[1].label == 0.0    # not credited with the re-asked plan's result
    assert ex[1].meta["phi_task"] == 1.0 and ex[2].meta["legal"] and ex[2].label > 0
    ds = build_dpo(find_runs([mixed_run]), critic_plans(), tmp_path / "dpo.jsonl")
    assert len(json.loads(ds.rows[0]["chosen"])["nodes"]) == 2   # sample 2's legal plan beats both


def test_each_candidate_is_labelled_by_its_own_answer(mixed_run: Path, tmp_path: Path):
    traj = next(iter(trajectories(find_runs([mixed_run]))))
    phis = {e.meta["sample"]: e.meta["phi_task"] for e in critic_plans()(traj)}
    assert phis == {0: 0.0, 1: 1.0, 2: 1.0}
    sft = build_sft(find_runs([mixed_run]), expert_steps(), tmp_path / "expr.jsonl", roles=["expert3"])
    assert sft.rows and all("999" not in r["completion"] for r in sft.rows)   # only the solved candidates' drafts
    labels = {}
    for e in expert_steps()(traj):
        labels.setdefault(e.meta["candidate"], set()).add(e.label)
    assert labels[0] == {False} and True in labels[1] and True in labels[2]


def test_dpo_and_sft_builders_refuse_a_scored_split(mixed_run: Path, tmp_path: Path, capsys):
    from agentic_repro.dynagraph.train.__main__ import main

    assert main(["dpo", str(mixed_run), "--out", str(tmp_path / "dpo.jsonl")]) == 2      # make_spec's split: test
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "read split 'test'" in err and str(mixed_run) in err
    assert not (tmp_path / "dpo.jsonl").exists()
    assert main(["sft", str(mixed_run), "--out", str(tmp_path / "sft")]) == 2
    assert main(["dpo", str(mixed_run), "--out", str(tmp_path / "dpo.jsonl"), "--train-splits", "train,test"]) == 0
