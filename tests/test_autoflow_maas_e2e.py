"""End-to-end: tiny searches through the real Hydra config, HTTP client, embedded model, cache and ledger, then the
frozen result on 1 test problem (MaAS: DROP, short answers and no Programmer step; GPTSwarm, MermaidFlow: GSM8K,
short prompts). MaAS also loads the real all-MiniLM-L6-v2 embedder (offline). Sizes are cut
for CI (the paper's are in configs/method/<m>.yaml and unit-tested with the scripted double)."""
from __future__ import annotations


import pytest

from agentic_repro.baselines.autoflow.artifact import load_artifact
from agentic_repro.baselines.autoflow.search import search_dir
from tests.autoflow_helpers import tiny_search_on_embedded
from tests.conftest import check_run_files, run_e2e

pytestmark = pytest.mark.slow

BASE = ["benchmark=drop", "backbone=local", "backbone.sampling.max_tokens=24"]
GSM = ["benchmark=gsm8k", "backbone=local", "backbone.sampling.max_tokens=24"]


def _search(tmp_path, overrides):
    spec, doc = tiny_search_on_embedded(tmp_path, overrides)
    assert load_artifact(search_dir(spec, spec.method_cfg["search"]) / "artifact.json")["sha256"] == doc["sha256"]
    return doc


def test_maas_tiny_search_then_test(tmp_path):
    # CI size: 1 validate problem, 1 repetition, a 2-operator supernet (Generate, EarlyStop): ~1-3 calls a problem
    ops = ["method.search.params.operators=[Generate,EarlyStop]"]
    # DROP's AFlow validate file shares 5 problems with its test file: the search runs on validate without them
    doc = _search(tmp_path, ["method=maas", *BASE, "limit=1", "method.search.params.repetitions=1",
                             "method.search.params.batch_size=1", "+method.search.shared_with_test=exclude", *ops])
    (h,) = doc["history"]
    assert h["ids"] and len(h["utilities"]) == len(h["ids"]) == 1 and isinstance(h["loss"], float)
    assert all(a[0] == ["Generate"] for a in h["architectures"])
    assert doc["extra"]["embedder"] == "all-MiniLM-L6-v2" and doc["extra"]["dims"]["input_dim"] == 384
    assert doc["search_cost"]["by_role"]["executor"]["calls"] > 0

    spec, metrics = run_e2e(tmp_path, ["method=maas", *BASE, "limit=1", *ops])
    preds = check_run_files(spec, metrics, 1)
    assert metrics["complete"] and set(metrics["by_role"]) == {"executor"}
    t = preds[0]["trace"]
    assert t["artifact"]["sha256"] == doc["sha256"] and t["maas"]["controller_sha256"] == doc["extra"]["controller_sha256"]
    assert set(preds[0]["cost_by_stage"]) <= {"Generate", "ScEnsemble"} and t["maas"]["graph"] == "qa"


def test_gptswarm_tiny_search_then_test(tmp_path):
    doc = _search(tmp_path, ["method=gptswarm", *GSM, "limit=1", "method.search.params.num_iters=1",
                             "method.search.params.batch_size=1", "method.search.params.agents=[IO,IO]"])
    (h,) = doc["history"]
    assert h["ids"] and len(doc["workflow"]["params"]["edge_logits"]) == 2 * 1 + 2
    spec, metrics = run_e2e(tmp_path, ["method=gptswarm", *GSM, "limit=1", "method.search.params.agents=[IO,IO]"])
    preds = check_run_files(spec, metrics, 1) if metrics["totals"]["calls"] else []
    assert metrics["complete"]
    for p in preds:
        assert p["trace"]["gptswarm"]["mode"] == "mask" and set(p["cost_by_stage"]) <= {"DirectAnswer"}


def test_mermaidflow_seed_round_then_test(tmp_path):
    """Round 1 (the released seed graph, interpreted) on 1 validate problem; the optimiser's rounds are covered by
    the unit tests (a 0.5B model rarely writes four parseable Mermaid children)."""
    doc = _search(tmp_path, ["method=mermaidflow", *GSM, "limit=1", "method.search.params.rounds=1",
                             "method.search.params.validation_rounds=1", "method.search.params.validate_limit=1"])
    assert [h["kind"] for h in doc["history"]] == ["seed"] and doc["history"][0]["status"] == "ok"
    spec, metrics = run_e2e(tmp_path, ["method=mermaidflow", *GSM, "limit=1"])
    preds = check_run_files(spec, metrics, 1)
    assert metrics["complete"] and preds[0]["trace"]["mermaidflow"]["ran"] == ["C:Custom", "ENSEMBLE:ScEnsemble"]
