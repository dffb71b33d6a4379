"""DynaGraph end to end (slow): one StrategyQA problem through the real HTTP client and the real embedded model,
the planner on one LoRA adapter and the three experts on another, both served by the embedded llama-server and
chosen per request. The adapters are the train helper's random LoRAs on the embedded base (cached by content;
the memory bench uses the same ones), at scale 0.3 so that the 0.5B model still writes JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import check_run_files, run_e2e

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from agentic_repro.training.fixtures import lora_gguf

    out = tmp_path_factory.mktemp("dg-adapters")
    return {"planner": lora_gguf("local", out, seed=1, name="planner"),
            "experts": lora_gguf("local", out, seed=2, name="experts")}


def test_dynagraph_on_strategyqa_with_two_adapters_on_the_embedded_server(tmp_path: Path, adapters):
    ov = ["method=dynagraph", "benchmark=strategyqa", "backbone=local", "limit=1",
          f"+backbone.adapters.planner.path={adapters['planner']}", "+backbone.adapters.planner.scale=0.3",
          f"+backbone.adapters.experts.path={adapters['experts']}", "+backbone.adapters.experts.scale=0.3",
          "roles.planner.adapter=planner", "roles.expert1.adapter=experts", "roles.expert2.adapter=experts",
          "roles.expert3.adapter=experts",
          # CI budget (<= ~5 calls): one plan answer (cut at 128 tokens: repaired or the labelled fallback), 3 node
          # executions, one patch, no reconstruction
          "method.params.max_tokens_plan=128", "method.params.max_tokens_expert=64", "method.params.max_plan_nodes=3",
          "method.params.max_plan_attempts=1", "method.params.max_nodes=3", "method.params.max_patches=1",
          "method.params.max_reconstructions=0"]
    spec, metrics = run_e2e(tmp_path, ov)
    assert metrics["complete"] and metrics["n_errors"] == 0
    preds = check_run_files(spec, metrics, 1)
    t = preds[0]["trace"]
    calls = [json.loads(l) for l in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    by_role = {c["role"]: c for c in calls}
    assert by_role["planner"]["adapter"] == "planner" and by_role["planner"]["adapter_sha256"]
    assert all(c["adapter"] == "experts" for c in calls if c["role"].startswith("expert"))
    assert any(c["role"].startswith("expert") for c in calls)
    assert {m["module"]: m["label"] for m in t["modules"]} == {
        "plan": "LoRA adapter planner", "E_rag": "LoRA adapter experts", "E_logic": "LoRA adapter experts",
        "E_expr": "LoRA adapter experts"}
    assert t["topology_history"][0]["op"] == "plan" and t["nodes_executed"] >= 1
    assert all(c["temperature"] == 0.7 for c in calls)
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert meta["roles"]["planner"]["adapter"]["name"] == "planner"
    print(f"\nDynaGraph e2e: {len(calls)} calls, {t['nodes_executed']} nodes, patches {t['patches']}, "
          f"reconstructions {t['reconstructions']}, fallback {t['fallback_plan']}, score {preds[0]['score']}, "
          f"latency {preds[0]['latency_s']} s")
