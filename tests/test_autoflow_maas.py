"""MaAS (baselines/autoflow/maas.py) with the scripted double: the controller's sampling rules, the cost-aware
REINFORCE update, the search loop (repetitions x batches on validate), the artifact, resuming mid-search and the
frozen supernet on test."""
from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

import torch  # the train extra, installed by `make test`: missing, it fails here (never a silent skip)

from agentic_repro.baselines.autoflow import maas as M
from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.autoflow_helpers import with_validate_split
from tests.conftest import make_spec as _make_spec, run
from tests.doubles import ScriptedBackbone


def make_spec(*args, **kw):
    return with_validate_split(_make_spec(*args, **kw))

NAMES = ["Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "SelfRefine", "EarlyStop"]


def embeddings(n: int = 6, dim: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(dim, generator=g), torch.randn(n, dim, generator=g)


def test_controller_shapes_match_the_release():
    ctrl = M.build_controller(384, 32, 4, seed=0)
    shapes = {k: tuple(v.shape) for k, v in ctrl.state_dict().items()}
    assert shapes["layers.0.operator_encoder.weight"] == (32, 384)
    assert shapes["layers.1.operator_encoder.weight"] == (32, 768)
    assert shapes["layers.3.query_encoder.weight"] == (32, 384) and len(ctrl.layers) == 4
    same = M.build_controller(384, 32, 4, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(ctrl.state_dict().values(), same.state_dict().values()))


def test_sample_layer_stops_at_the_cumulative_threshold():
    rng = random.Random(0)
    for _ in range(50):
        probs = [0.1, 0.15, 0.2, 0.25, 0.3]
        sel = M.sample_layer(probs, 0.3, rng)
        assert len(set(sel)) == len(sel)
        total = sum(probs[i] for i in sel)
        assert total >= 0.3 and total - probs[sel[-1]] < 0.3   # stops as soon as the threshold is reached


def test_layer0_rules_earlystop_becomes_generate_with_penalty_and_stops():
    q, ops = embeddings(dim=8)
    ctrl = M.build_controller(8, 4, 4, seed=1)
    with torch.no_grad():   # layer 0 puts all mass on EarlyStop
        layer = ctrl.layers[0]
        layer.query_encoder.weight.zero_(); layer.query_encoder.bias.fill_(1.0)
        layer.operator_encoder.weight.zero_(); layer.operator_encoder.bias.fill_(-1.0)
    # all cosines equal -> uniform; force EarlyStop by a custom rng that always picks the last remaining index
    class Last(random.Random):
        def choices(self, population, weights=None, k=1):
            return [population[-1]]
    arch = M.sample_architecture(ctrl, q, ops, NAMES, threshold=0.3, rng=Last())
    assert arch["names"] == [["Generate"]] and arch["penalised"] and arch["penalty"] == 1.5
    lp = M.architecture_log_prob(ctrl, q, ops, arch)
    assert float(lp.detach()) == pytest.approx(float(ctrl.layers[0](q, ops)[0].detach()) - 1.5)


def test_layer0_generate_type_moves_first_and_later_earlystop_stops():
    q, ops = embeddings(dim=8)
    ctrl = M.build_controller(8, 4, 4, seed=2)
    picks = iter([3, 1, 5, 0])   # layer 0: ScEnsemble then GenerateCoT; layer 1: EarlyStop, Generate

    class Scripted(random.Random):
        def choices(self, population, weights=None, k=1):
            want = next(picks)
            return [want if want in population else population[0]]
    # uniform layers (zero weights) -> each pick adds 1/6 < 0.3, so two picks in layer 0, then one more
    with torch.no_grad():
        for p in ctrl.parameters():
            p.zero_()
    arch = M.sample_architecture(ctrl, q, ops, NAMES, threshold=0.3, rng=Scripted())
    assert arch["names"][0] == ["GenerateCoT", "ScEnsemble"]
    assert arch["names"][1] == ["EarlyStop", "Generate"] and len(arch["names"]) == 2 and not arch["penalised"]


def test_reinforce_step_raises_the_probability_of_a_rewarded_architecture():
    q, ops = embeddings(dim=8)
    ctrl = M.build_controller(8, 4, 4, seed=3)
    arch = {"layers": [[0]], "penalty": 0.0}
    before = float(M.architecture_log_prob(ctrl, q, ops, arch).detach())
    adam = torch.optim.Adam(ctrl.parameters(), lr=0.01)
    loss = -(torch.stack([M.architecture_log_prob(ctrl, q, ops, arch)]) * torch.tensor([1.0 - 3 * 0.01])).mean()
    adam.zero_grad(); loss.backward(); adam.step()
    assert float(M.architecture_log_prob(ctrl, q, ops, arch).detach()) > before
    # a negative utility (cost outweighs the score) pushes it down
    ctrl2 = M.build_controller(8, 4, 4, seed=3)
    adam2 = torch.optim.Adam(ctrl2.parameters(), lr=0.01)
    loss2 = -(torch.stack([M.architecture_log_prob(ctrl2, q, ops, arch)]) * torch.tensor([0.0 - 3 * 0.5])).mean()
    adam2.zero_grad(); loss2.backward(); adam2.step()
    assert float(M.architecture_log_prob(ctrl2, q, ops, arch).detach()) < before


# ---- the search loop through the harness -------------------------------------------------------------------

def script(messages, sampling):
    """Generate answers right ('What is i+i?' -> 2i); every other operator answers 0; ScEnsemble picks A."""
    p = messages[-1]["content"]
    if "solution_letter" in p:
        return "<thought>t</thought><solution_letter>A</solution_letter>"
    import re
    m = re.search(r"What is (\d+)\+(\d+)\?", p)
    if p.startswith("End with ANSWER") and m:      # Generate: answer_instruction + query
        return f"ANSWER: {int(m.group(1)) * 2}"
    return "ANSWER: 0"


def maas_method(tmp_path: Path, **search) -> dict:
    params = {"repetitions": 2, "batch_size": 2, "embedder": "hash", "validate_limit": 4, **search}
    return {"name": "maas", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod", "label": "MaAS",
            "deviations": ["test"], "roles": ["executor"],
            "params": {"artifact": str(tmp_path / "results/search/tiny/maas/scripted/seed=42/artifact.json")},
            "search": {"optimiser": "agentic_repro.baselines.autoflow.maas:MaasOptimiser", "split": "validate", "params": params}}


def search(tmp_path: Path, bb, **kw) -> dict:
    from agentic_repro.baselines.autoflow.search import run_search

    spec = make_spec(tmp_path, maas_method(tmp_path, **kw))
    return asyncio.run(run_search(spec, backbone=bb))


def test_search_loop_batches_update_and_artifact(tmp_path, tiny_data):
    bb = ScriptedBackbone(script)
    doc = search(tmp_path, bb)
    hist = doc["history"]
    assert [(h["repetition"], h["batch"]) for h in hist] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [h["ids"] for h in hist] == [["v0", "v1"], ["v2", "v3"]] * 2
    assert all(len(h["utilities"]) == 2 and isinstance(h["loss"], float) for h in hist)
    assert len({h["controller_sha256"] for h in hist}) == 4        # the weights change after every batch
    ex = doc["extra"]
    wf = doc["workflow"]
    assert wf["solver"] == "agentic_repro.baselines.autoflow.maas:MaasSupernet"
    assert wf["params"]["controller_sha256"] == ex["controller_sha256"] and Path(ex["controller"]).exists()
    summary = M.controller_summary(ex["controller"])
    assert summary["sha256"] == ex["controller_sha256"] and summary["operators"] == NAMES
    assert ex["hyperparameters"]["cost_weight"] == 3.0 and ex["hyperparameters"]["threshold"] == 0.3
    assert 0.0 <= doc["validate_score"] <= 1.0 and doc["search_cost"]["total"]["backbone_calls"] > 0
    assert load_artifact(Path(tmp_path / "results/search/tiny/maas/scripted/seed=42/artifact.json"))["sha256"]
    # every validate prediction records the weights it was sampled with and its sampled architecture
    rep1 = read_jsonl_tolerant(next(Path(tmp_path).rglob("maas_rep1/**/predictions.jsonl")))
    assert {r["trace"]["maas"]["controller_sha256"] for r in rep1} == {hist[0]["controller_sha256"],
                                                                      hist[1]["controller_sha256"]}
    assert all(r["trace"]["maas"]["names"][0][0] in M.GENERATE_NAMES for r in rep1)


def test_resume_mid_search_reaches_the_same_controller(tmp_path, tiny_data, monkeypatch):
    from agentic_repro.baselines.autoflow import search as S

    clean = search(tmp_path / "clean", ScriptedBackbone(script))
    real = S.SearchContext.evaluate
    calls = {"n": 0}

    async def flaky(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed mid-search")
        return await real(self, *a, **k)

    monkeypatch.setattr(S.SearchContext, "evaluate", flaky)
    bb = ScriptedBackbone(script)
    with pytest.raises(KeyboardInterrupt):
        search(tmp_path / "resumed", bb)
    state = json.loads(next(Path(tmp_path / "resumed").rglob("search_state.json")).read_text())
    assert state["rep"] == 2 and state["batch"] == 0 and len(state["history"]) == 2
    first = len(bb.requests)
    monkeypatch.setattr(S.SearchContext, "evaluate", real)
    doc = search(tmp_path / "resumed", bb)
    assert [(h["repetition"], h["batch"]) for h in doc["history"]] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert doc["extra"]["controller_sha256"] == clean["extra"]["controller_sha256"]
    assert len(bb.requests) - first < first * 1.5   # repetition 1 was not solved again


def test_frozen_supernet_on_test(tmp_path, tiny_data):
    doc = search(tmp_path, ScriptedBackbone(script))
    spec = make_spec(tmp_path, maas_method(tmp_path), limit=3)
    metrics = run(spec, ScriptedBackbone(script))
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert metrics["complete"] and len(preds) == 3
    for p in preds:
        m = p["trace"]["maas"]
        assert m["controller_sha256"] == doc["extra"]["controller_sha256"] and m["salt"] == "test"
        assert p["trace"]["artifact"]["sha256"] == doc["sha256"]
        assert set(p["cost_by_stage"]) <= {"Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "SelfRefine"}


def test_a_tampered_controller_is_refused(tmp_path, tiny_data):
    doc = search(tmp_path, ScriptedBackbone(script))
    path = Path(doc["extra"]["controller"])
    path.write_bytes(path.read_bytes() + b"x")
    spec = make_spec(tmp_path, maas_method(tmp_path), limit=1)
    run(spec, ScriptedBackbone(script))
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "error" and "sha256" in pred["error"]


def test_table_runs_search_first_when_the_artifact_is_missing(tmp_path, tiny_data, monkeypatch):
    """scripts/runs.py: a searched method's test run is preceded by its search (at the artifact's seed) when the
    artifact is missing, and not when it exists."""
    from agentic_repro.baselines.autoflow import search as S
    from agentic_repro.scripts import runs

    calls = []

    async def fake(spec, **kw):
        calls.append((spec.seed, spec.full_config["seed"]))
        return {}

    monkeypatch.setattr(S, "run_search", fake)
    spec = make_spec(tmp_path, maas_method(tmp_path), seed=123)
    it = runs.Planned(label="maas/tiny", overrides=[])
    it.spec = spec
    runs._ensure_artifact(it, None, lambda m: None)
    assert calls == [(42, 42)]
    from agentic_repro.baselines.autoflow.artifact import ARTIFACT_VERSION

    path = tmp_path / "results/search/tiny/maas/scripted/seed=42/artifact.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": ARTIFACT_VERSION, "search_config": spec.method_cfg["search"]}))
    runs._ensure_artifact(it, None, lambda m: None)  # searched at this run's setting: reused
    assert len(calls) == 1
