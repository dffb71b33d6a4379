"""DynaGraph's Table 1/2 script on runs made with the scripted double: our cells (acc, tokens, TFLOPs, latency),
the paper's cells under them, protocol lines generated from the recorded configs, FinQA's two measures, "—" with a reason for what is missing, Figure 6(b)'s mix from the traces."""
from __future__ import annotations

from pathlib import Path

import pytest

from agentic_repro.harness.runner import RunSpec
from agentic_repro.scripts.dynagraph_tables import build, intervention_mix
from agentic_repro.scripts.runs import load_experiment
from agentic_repro.scripts.collect import RunIndex
from tests.conftest import run
from tests.doubles import ScriptedBackbone
from tests.test_dynagraph import script_factory


def spec_for(tmp_path: Path, method: dict, bench_name: str) -> RunSpec:
    bench = {"name": bench_name, "kind": "tests.conftest.EchoBenchmark", "split": "test",
             "splits": {"test": "tiny/test.jsonl"}, "limit": 2, "metric": "accuracy",
             "answer_instruction": "End with ANSWER: <n>."}
    backbone = {"name": "scripted", "price": {"input_per_1m": 0, "output_per_1m": 0}, "max_concurrency": 4}
    runner = {"progress": False, "max_concurrent_problems": 1}       # unbatched, as the table's plan runs them
    full = {"method": method, "benchmark": bench, "backbone": backbone, "seed": 42, "experiment": "dynagraph",
            "runner": runner}
    return RunSpec(experiment="dynagraph", seed=42, method_cfg=method, benchmark_cfg=bench, backbone_cfg=backbone,
                   sampling={"temperature": 0.0, "max_tokens": 64},
                   cache_cfg={"mode": "read-write", "path": str(tmp_path / "cache.sqlite")},
                   runner_cfg=runner, results_root=tmp_path / "results", full_config=full)


def test_table1_cells_paper_column_and_mix(tmp_path: Path, tiny_data: Path):
    method = {"name": "dynagraph", "solver": "agentic_repro.dynagraph.method:DynaGraph",
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
    i = table.rows.index(row)
    paper, proto = table.rows[i + 1], table.rows[i + 2]              # the paper's cells under ours, in our columns
    assert paper[0].text == "↳ paper" and paper[1:4] == ["87.6", "—", "15.3"]
    assert proto[0].text.startswith("↳ protocol: backbone scripted-model vs paper DeepSeek-8B bf16")
    rec = next(r for r in records if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert rec["status"] == "ok" and rec["latency_s"] is not None and rec["paper_acc"] == 87.6
    not_run = next(r for r in records if r["method"] == "react_qa" and r["benchmark"] == "strategyqa")
    assert not_run["status"] == "not_run"
    ref = next(r for r in records if r["row"] == "Qwen2-72B-Instruct" and r["benchmark"] == "math")
    assert ref["status"] == "missing" and ref["paper_acc"] == 89.2
    mix = intervention_mix(RunIndex.scan(root, "dynagraph"), "scripted", ["strategyqa"], {"strategyqa": "StrategyQA"})
    assert "StrategyQA 100% patching of 2" in mix       # one patch per problem in the scripted run
    t2, rec2 = build(root, "scripted", load_experiment("dynagraph_table2"), 2)
    assert [r[0].text for r in t2.rows if not r[0].text.startswith("↳")] == [
        "DynaGraph (full)", "w/o Fine-grained Patching", "w/o Subgraph Reconstruction"]
    assert next(r for r in rec2 if r["method"] == "dynagraph_wo_reconstruction" and r["benchmark"] == "math")[
        "paper_acc"] == 41.5


# ---- issue 20: fallbacks counted, latency from fresh calls only, unknown TFLOPs ------------------------------

DG = {"name": "dynagraph", "solver": "agentic_repro.dynagraph.method:DynaGraph", "roles": ["planner", "expert1", "expert2", "expert3"]}


def _spec(tmp_path: Path, root: str, *, limit: int = 2, **params) -> RunSpec:
    """A DynaGraph run into results folder ``root``; every run of a test shares one response cache."""
    s = spec_for(tmp_path, {**DG, "params": params}, "strategyqa")
    s.benchmark_cfg["limit"] = limit
    s.results_root = tmp_path / root
    return s


def _never_a_plan(messages, sampling):
    last = messages[-1]["content"]
    if "Write a plan" in last or "was rejected" in last or "Write a new sub-plan" in last:
        return "first I think about it"                   # never JSON: every plan is re-asked, then the fallback
    return script_factory(bad_first_plan=False)(messages, sampling)


def _dg_row(table):
    return next(r for r in table.rows if r[0].text == "DynaGraph")


def test_an_all_fallback_run_says_so_in_its_cell_and_fallback_error_makes_it_incomplete(tmp_path: Path, tiny_data):
    run(_spec(tmp_path, "r"), ScriptedBackbone(_never_a_plan))
    exp = load_experiment("dynagraph_table1")
    table, records = build(tmp_path / "r", "scripted", exp, 1)
    cell = _dg_row(table)[1]
    assert cell.startswith("100.0 (n=2)") and "fallback 2, re-asks 4" in cell, cell   # 3 answers per plan: 2 re-asks
    rec = next(r for r in records if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert (rec["fallbacks"], rec["reasks"]) == (2, 4)
    assert any("fallback = problems answered by the labelled fallback plan" in n for n in table.notes)
    cot = next(r for r in table.rows if r[0].text == "CoT")
    assert "fallback" not in str(cot[1])                  # only DynaGraph's own rows carry the counts
    # fallback=error: the same problems are errors, the cell is incomplete and never averaged
    run(_spec(tmp_path, "e", fallback="error"), ScriptedBackbone(_never_a_plan))
    table, records = build(tmp_path / "e", "scripted", exp, 1)
    cell = _dg_row(table)[1]
    assert cell.startswith("incomplete 0/2, 2 errors (2 by fallback=error)"), cell
    assert next(r for r in records if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")[
        "status"] == "incomplete"


def test_latency_comes_from_fresh_calls_only(tmp_path: Path, tiny_data):
    slow = lambda: ScriptedBackbone(script_factory(bad_first_plan=False), delay_s=0.02)
    exp = load_experiment("dynagraph_table1")
    run(_spec(tmp_path, "a", limit=1), slow())              # p0's calls go into the shared cache
    run(_spec(tmp_path, "b", limit=2), slow())              # p0 replayed, p1 fresh
    run(_spec(tmp_path, "c", limit=2), slow())              # everything replayed
    t_b, rec_b = build(tmp_path / "b", "scripted", exp, 1)
    lat_b = _dg_row(t_b)[3]
    assert lat_b.endswith("(1 fresh of 2)"), lat_b
    assert any("latency over 1 of 2 problems (1 replayed calls from the cache)" in n for n in t_b.notes)
    rb = next(r for r in rec_b if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert (rb["latency_problems"], rb["latency_replayed"]) == (1, 1) and rb["latency_s"] >= 0.02 * 6  # 6 calls
    t_c, rec_c = build(tmp_path / "c", "scripted", exp, 1)
    assert _dg_row(t_c)[3] == "—"
    assert any("all 2 problems replayed calls from the cache: no latency measured" in n for n in t_c.notes)
    rc = next(r for r in rec_c if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert rc["latency_s"] is None and "no latency measured" in rc["reason"]
    t2, _ = build(tmp_path / "c", "scripted", load_experiment("dynagraph_table2"), 2)
    assert next(r for r in t2.rows if r[0].text == "DynaGraph (full)")[2] == "—"


def test_tflops_of_a_backbone_without_a_parameter_count_are_unknown_not_zero(tmp_path: Path, tiny_data):
    run(_spec(tmp_path, "r"), ScriptedBackbone(script_factory(bad_first_plan=False), params=None))
    table, records = build(tmp_path / "r", "scripted", load_experiment("dynagraph_table1"), 1)
    toks, tflops = _dg_row(table)[2].split(" / ")
    assert int(toks) > 0 and tflops == "—"
    assert any("TFLOPs unknown: no parameter count for scripted-model" in n for n in table.notes)
    rec = next(r for r in records if r["method"] == "dynagraph" and r["benchmark"] == "strategyqa")
    assert rec["tflops_per_problem"] is None and "TFLOPs unknown" in rec["reason"]


def test_latency_of_a_batched_run_is_not_reported_as_unbatched(tmp_path: Path, tiny_data):
    s = _spec(tmp_path, "r")
    s.runner_cfg["max_concurrent_problems"] = None            # the harness default: problems run concurrently
    run(s, ScriptedBackbone(script_factory(bad_first_plan=False)))
    table, records = build(tmp_path / "r", "scripted", load_experiment("dynagraph_table1"), 1)
    assert _dg_row(table)[3] == "—"
    assert any("latency not measured unbatched (runner.max_concurrent_problems=None" in n for n in table.notes)


# ---- issue 21: protocol lines from the recorded runs, MATH-500 label, "—" for a number the paper does not state,
# FinQA's execution and program accuracy, footnotes citing DynaGraph's own baseline settings -----------------------

def _recorded(root: Path, bench: str, method: str) -> dict:
    import yaml

    (cfg_path,) = (root / "dynagraph" / bench / method / "scripted").glob("seed=*/config.yaml")
    return yaml.safe_load(cfg_path.read_text())


def _answer_double(messages, sampling):
    import re

    return "ANSWER: " + str(2 * int(re.search(r"What is (\d+)", messages[-1]["content"]).group(1)))


def test_protocol_lines_come_from_the_recorded_configs(tmp_path: Path, tiny_data):
    import shutil

    from tests.conftest import compose

    sampling = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 64}
    dg = _spec(tmp_path, "r", tau_c=0.2, tau_u=0.45, temperature=0.7, top_p=0.9, max_tokens_plan=256,
               max_tokens_expert=256)
    dg.full_config["sampling"] = sampling
    run(dg, ScriptedBackbone(script_factory(bad_first_plan=False)))
    sc = spec_for(tmp_path, {"name": "cot_sc", "solver": "agentic_repro.baselines.simple:cot_sc",
                             "params": {"template": "{task}\n\n{answer_instruction}", "k": 3, "temperature": 0.5}},
                  "strategyqa")
    sc.results_root, sc.sampling, sc.full_config["sampling"] = tmp_path / "r", sampling, sampling
    run(sc, ScriptedBackbone(_answer_double))
    # FinQA through its real scorer on the fixture: a program (both measures right), a number (execution right,
    # no program), a wrong number
    shutil.copy(Path(__file__).parent / "fixtures" / "finqa_test.json", tiny_data / "finqa_test.json")
    (tiny_data / "finqa").mkdir()
    shutil.copy(tiny_data / "finqa_test.json", tiny_data / "finqa" / "test.json")
    answers = iter(["Program: subtract(5829, 5735), divide(#0, 5735)", "Answer: 1150", "Answer: 14.1%"])
    fq = spec_for(tmp_path, {"name": "io", "solver": "agentic_repro.baselines.simple:io", "params": {"template": "{task}"}}, "finqa")
    fq.benchmark_cfg = {**compose(["benchmark=finqa"])["benchmark"], "limit": None}
    fq.full_config["benchmark"] = fq.benchmark_cfg
    fq.results_root, fq.runner_cfg["max_concurrent_problems"] = tmp_path / "r", 1
    run(fq, ScriptedBackbone(lambda m, s: next(answers)))

    root = tmp_path / "r"
    exp = load_experiment("dynagraph_table1")
    table, records = build(root, "scripted", exp, 1)
    assert "MATH-500 Acc" in table.columns and "FinQA Exe Acc" in table.columns and "FinQA Prog Acc" in table.columns
    labels = [r[0].text for r in table.rows]

    def proto_of(label):
        i = labels.index(label)
        j = i + 1 if not labels[i + 1].startswith("↳ paper") else i + 2
        assert labels[j].startswith("↳ protocol"), labels[j]
        return table.rows[j]

    # DynaGraph: the recorded tau_c (0.2) differs from the paper's 0.35, tau_u does not; untrained modules
    cfg = _recorded(root, "strategyqa", "dynagraph")
    line = proto_of("DynaGraph")[0].text
    assert f"tau_c {cfg['method']['params']['tau_c']:g} ≠ paper 0.35" in line and "tau_u 0.45 = paper" in line
    assert "T 0.7 = paper" in line and "top-p 0.9 = paper" in line and "max tokens expert 256, plan 256" in line
    assert "modules untrained (base model + role prompts) vs paper DPO planner" in line
    # SC: k and the per-call temperature as recorded, against DynaGraph's k = 5 and T 0.7
    cfg = _recorded(root, "strategyqa", "cot_sc")
    line = proto_of("SC (k=5)")[0].text
    assert f"k {cfg['method']['params']['k']} ≠ paper 5" in line and "T 0.5 ≠ paper 0.7" in line
    sq = labels.index("SC (k=5)")
    cell = proto_of("SC (k=5)")[1 + table.columns[1:].index("StrategyQA Acc")]
    assert "split test n=2 of 8 (size reduced to 25.0%) vs paper StrategyQA, split and n not stated" in cell
    assert "scorer rule accuracy vs paper Acc %, scorer not stated" in cell
    assert table.rows[sq][0].sup                      # its footnote cites DynaGraph's SC, not Wang et al.'s 40 paths
    notes = "\n".join(table.notes)
    assert "DynaGraph §4.1: Self-Consistency (k = 5), majority voting over CoT paths" in notes
    assert "instead of the paper's 40 samples" not in notes
    # FinQA: execution accuracy 2/3, program accuracy 1/3, and how many answers gave a program
    fi = labels.index("Standard")
    row = table.rows[fi]
    assert row[1 + table.columns[1:].index("FinQA Exe Acc")].startswith("66.7 (n=3)")
    assert row[1 + table.columns[1:].index("FinQA Prog Acc")].startswith("33.3 (n=3)")
    fcell = proto_of("Standard")[1 + table.columns[1:].index("FinQA Exe Acc")]
    assert "rule accuracy (numeric_match=official)" in fcell and "split test n=3 of 3 vs" in fcell
    assert "1/3 answers gave a program" in fcell
    rec = next(r for r in records if r["method"] == "io" and r["benchmark"] == "finqa")
    assert (rec["acc"], rec["program_acc"]) == (66.67, 33.33) and rec["protocol"] == fcell
    # a row with paper cells that was never run says so; one with neither has no ↳ lines; the 72B reference row
    # compares with its own backbone
    assert proto_of("Reflexion")[0].text.startswith("↳ protocol: not run")
    assert labels[labels.index("ToT") + 1] == "ReAct"
    assert "paper backbone Qwen2-72B-Instruct" in proto_of("Qwen2-72B-Instruct")[0].text


def test_table2_prints_no_number_the_paper_does_not_state(tmp_path: Path, tiny_data):
    table, records = build(tmp_path / "none", "scripted", load_experiment("dynagraph_table2"), 2)
    labels = [r[0].text for r in table.rows]
    paper = table.rows[labels.index("w/o Fine-grained Patching") + 1]
    assert paper[0].text == "↳ paper"
    assert paper[1 + table.columns[1:].index("StrategyQA Acc")] == "—"    # "remains intact" is no number
    assert paper[1 + table.columns[1:].index("StrategyQA Lat. (s)")] == "29.4"
    assert next(r for r in records if r["method"] == "dynagraph_wo_patching" and r["benchmark"] == "strategyqa")[
        "paper_acc"] is None
    assert any('"remains intact"' in n for n in table.notes)
    assert "MATH-500 Acc" in table.columns
