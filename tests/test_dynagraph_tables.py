"""DynaGraph's Table 1/2 script on runs made with the scripted double: our cells (acc, tokens, TFLOPs, latency),
the paper's cells beside them, "—" with a reason for what is missing, Figure 6(b)'s mix from the traces."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.runner import RunSpec
from scripts.dynagraph_tables import build, intervention_mix
from scripts.runs import load_experiment
from scripts.collect import RunIndex
from tests.conftest import run
from tests.doubles import ScriptedBackbone
from tests.test_dynagraph import script_factory


def spec_for(tmp_path: Path, method: dict, bench_name: str) -> RunSpec:
    bench = {"name": bench_name, "kind": "tests.conftest.EchoBenchmark", "split": "test",
             "splits": {"test": "tiny/test.jsonl"}, "limit": 2, "metric": "accuracy",
             "answer_instruction": "End with ANSWER: <n>."}
    backbone = {"name": "scripted", "price": {"input_per_1m": 0, "output_per_1m": 0}, "max_concurrency": 4}
    full = {"method": method, "benchmark": bench, "backbone": backbone, "seed": 42, "experiment": "dynagraph"}
    return RunSpec(experiment="dynagraph", seed=42, method_cfg=method, benchmark_cfg=bench, backbone_cfg=backbone,
                   sampling={"temperature": 0.0, "max_tokens": 64},
                   cache_cfg={"mode": "read-write", "path": str(tmp_path / "cache.sqlite")},
                   runner_cfg={"progress": False}, results_root=tmp_path / "results", full_config=full)


def test_table1_cells_paper_column_and_mix(tmp_path: Path, tiny_data: Path):
    method = {"name": "dynagraph", "solver": "dynagraph.method:DynaGraph",
              "roles": ["planner", "expert1", "expert2", "expert3"], "params": {}}
    m = run(spec_for(tmp_path, method, "strategyqa"), ScriptedBackbone(script_factory()))
    assert m["score"] == 1.0
    exp = load_experiment("dynagraph_table1")
    root = tmp_path / "results"
    table, records = build(root, "scripted", exp, 1)
    row = next(r for r in table.rows if r[0].text == "DynaGraph")
    assert row[1].startswith("100.0 (n=2)")
    toks, tflops = row[2].split(" / ")
    assert int(toks) == round(m["per_problem"]["tokens"])
    # TFLOPs = 2 x parameters (the double's 1e6) x tokens, per problem
    assert float(tflops) == pytest.approx(2 * 1e6 * m["per_problem"]["tokens"] / 1e12, rel=1e-2)
    assert row[4] == "87.6% / 15.3 s"                               # the paper's StrategyQA cell beside ours
    rec = next(r for r in records if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert rec["status"] == "ok" and rec["latency_s"] is not None and rec["paper_acc"] == 87.6
    not_run = next(r for r in records if r["method"] == "react_qa" and r["benchmark"] == "strategyqa")
    assert not_run["status"] == "not_run"
    ref = next(r for r in records if r["row"] == "Qwen2-72B-Instruct" and r["benchmark"] == "math")
    assert ref["status"] == "missing" and ref["paper_acc"] == 89.2
    mix = intervention_mix(RunIndex.scan(root, "dynagraph"), "scripted", ["strategyqa"], {"strategyqa": "StrategyQA"})
    assert "StrategyQA 100% patching of 2" in mix       # one patch per problem in the scripted run
    t2, rec2 = build(root, "scripted", load_experiment("dynagraph_table2"), 2)
    assert [r[0].text for r in t2.rows] == ["DynaGraph (full)", "w/o Fine-grained Patching",
                                             "w/o Subgraph Reconstruction"]
    assert next(r for r in rec2 if r["method"] == "dynagraph_wo_reconstruction" and r["benchmark"] == "math")[
        "paper_acc"] == 41.5
