"""The tables a user reads: 95% intervals, incomplete cells (errors are not wrong answers), deviation footnotes,
per-role costs, the size protocols of the main job, re-rendering after each run, the stop-share check."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from agentic_repro.harness.backbone import BackboneResult
from agentic_repro.harness.types import Completion
from tests.doubles import ScriptedBackbone
from tests.test_reporting import _args, _fake_metrics, guess


# ---- intervals ---------------------------------------------------------------------------------------------

def test_wilson_interval_hand_checked():
    from agentic_repro.scripts.stats import interval, wilson

    ci = wilson(3, 10)             # textbook: 3/10 -> [0.108, 0.603]
    assert (round(ci.low, 1), round(ci.high, 1), ci.method) == (10.8, 60.3, "wilson")
    ci = wilson(0, 1)              # one wrong answer: still a wide interval, never [0, 0]
    assert (round(ci.low, 1), round(ci.high, 1)) == (0.0, 79.3)
    ci = wilson(10, 10)
    assert round(ci.low, 1) == 72.2 and ci.high == 100.0
    assert interval([100.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 0.0, 100.0, 0.0]).method == "wilson"


def test_t_interval_for_f1_hand_checked():
    from agentic_repro.scripts.stats import interval

    ci = interval([40.0, 60.0, 50.0, 70.0])        # mean 55, s = 12.91, t(0.975, 3) = 3.182 -> ±20.54
    assert ci.method == "t" and ci.low == pytest.approx(34.46, abs=0.01) and ci.high == pytest.approx(75.54, abs=0.01)
    wide = interval([0.0, 50.0, 100.0])            # clipped to [0, 100]
    assert (wide.low, wide.high) == (0.0, 100.0)
    assert interval([37.5]) is None and interval([]) is None   # no interval from one F1 value


def test_cell_interval_over_problems_averaged_over_seeds(tmp_path):
    from agentic_repro.scripts.collect import load_runs

    root = tmp_path / "results"
    # two seeds that disagree on problem 0: per-problem means 50, 100, 0, 0 -> not binary -> t interval
    _fake_metrics(root, "gsm8k", "cot", 42, 50.0, n=4, scores=[1.0, 1.0, 0.0, 0.0])
    _fake_metrics(root, "gsm8k", "cot", 123, 25.0, n=4, scores=[0.0, 1.0, 0.0, 0.0])
    a = load_runs(root, "table1", "gsm8k", "cot", "local")
    assert a.problem_means() == [50.0, 100.0, 0.0, 0.0] and a.mean == pytest.approx(37.5)
    ci = a.ci()
    # 37.5 ± t(0.975, 3)·47.87/2 = [−38.7, 113.7], clipped to the score range
    assert ci.method == "t" and ci.n == 4 and (ci.low, ci.high) == (0.0, 100.0)


# ---- incomplete cells: never averaged ---------------------------------------------------------------------

@pytest.mark.parametrize("old_format", [False, True])
def test_cell_with_errors_is_incomplete_not_averaged(tmp_path, old_format):
    """A run with errors (metrics with n_errors, or an old file without it whose predictions hold errors) is shown
    as incomplete, excluded from Avg and from best/second."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    benches = ["gsm8k", "math", "mbpp", "humaneval", "hotpotqa", "drop"]
    for b in benches:
        _fake_metrics(root, b, "io", 42, 10.0)
        # 8 answered at 90%, 2 errors: averaging them as zeros would print 72.0 — it must print no number at all
        _fake_metrics(root, b, "cot", 42, 72.0 if old_format and b == "gsm8k" else 90.0, n=10,
                      n_errors=2 if b == "gsm8k" else 0,
                      scores=[0.9] * (8 if b == "gsm8k" else 10), old_format=old_format)
    t, recs = table1.build(root, "local")
    rows = {str(getattr(r[0], "text", r[0])): r for r in t.rows}
    assert rows["CoT"][1].text == "incomplete 8/10, 2 errors"
    assert rows["CoT"][7] == "—"                                   # no Avg over an incomplete cell
    assert rows["IO"][1].text.startswith("10.0 [") and not rows["IO"][1].bold   # only one complete: no ranking
    rec = next(r for r in recs if r["row"] == "CoT" and r["benchmark"] == "gsm8k")
    assert rec["status"] == "incomplete" and rec["n_errors"] == 2 and rec["answered"] == 8 and rec.get("mean") is None
    assert "connection refused" in rec["first_error"]
    md = t.to_markdown()
    assert "72.0" not in md and "CoT / GSM8K: incomplete 8/10, 2 errors (first error: BackboneError" in md


class _FlakyBackbone(ScriptedBackbone):
    """A server that refuses every request of one problem (the first prompt it sees), answers the others."""

    bad: dict[str, str] = {}

    async def complete(self, messages, sampling, n):
        content = messages[-1]["content"]
        first = self.bad.setdefault(self.name, content)
        if content == first:
            raise ConnectionError("connection refused (injected)")
        return await super().complete(messages, sampling, n)


def test_reproduce_exits_nonzero_naming_incomplete_runs(tmp_path, monkeypatch, capsys):
    from agentic_repro.scripts import reproduce_table1

    async def fake_build(cfg, *, run_dir, seed, **kw):
        cls = _FlakyBackbone if "gsm8k" in str(run_dir) else ScriptedBackbone
        return cls(guess, name=f"{cfg['name']}-{Path(str(run_dir)).parts[-4]}", max_concurrency=2)

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    argv = ["backbone=local", "methods=io", "benchmarks=gsm8k,mbpp", "limit=3", *_args(tmp_path)]
    assert reproduce_table1.main(argv) == 1
    err = capsys.readouterr().err
    assert "cells are incomplete" in err and "io/gsm8k/local/seed=42" in err and "io/mbpp" not in err.split(
        "cells are incomplete")[1]
    rows = {r["benchmark"]: r for r in csv.DictReader(open(tmp_path / "results" / "table1" / "table1.csv"))
            if r["row"] == "IO"}
    assert rows["gsm8k"]["status"] == "incomplete" and rows["gsm8k"]["mean"] == ""
    assert rows["mbpp"]["status"] == "ok"


# ---- footnotes -------------------------------------------------------------------------------------------

def _write_config(d: Path, method: str, bench: str, deviations=None, label=None) -> None:
    import yaml

    m = {"name": method}
    if deviations is not None:
        m["deviations"] = deviations
    if label:
        m["label"] = label
    (d / "config.yaml").write_text(yaml.safe_dump({"seed": 42, "method": m, "benchmark": {"name": bench},
                                                   "backbone": {"name": "local"}}))


def test_deviations_become_numbered_footnotes_in_md_tex_csv(tmp_path):
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    shared = "one backbone stands in for several models"
    for b in ("gsm8k", "math"):
        _write_config(_fake_metrics(root, b, "llm_blender", 42, 20.0), "llm_blender", b,
                      deviations=[shared, "the ranker is the backbone"], label="LLM-Blender (backbone ranker/fuser)")
        _write_config(_fake_metrics(root, b, "llm_debate", 42, 30.0), "llm_debate", b, deviations=[shared])
        _write_config(_fake_metrics(root, b, "io", 42, 10.0), "io", b, deviations=[])
    res = table1.write_all(root, backbones=["local"])
    t = res["tables"][0]
    rows = {str(getattr(r[0], "text", r[0])): r for r in t.rows}
    # the method's own label says what ran; recorded deviations are numbered once and shared between rows
    assert rows["LLM-Debate"][0].sup == "1" and rows["LLM-Blender (backbone ranker/fuser)"][0].sup == "1,2"
    assert getattr(rows["IO"][0], "sup", "") == ""                 # recorded `deviations: []`: no footnote
    md = (root / "table1" / "table1.md").read_text()
    assert "| LLM-Debate<sup>1</sup> |" in md and f"- 1. {shared}" in md and "- 2. the ranker is the backbone" in md
    tex = (root / "table1" / "table1.tex").read_text()
    assert "LLM-Debate$^{1}$" in tex and "LLM-Blender (backbone ranker/fuser)$^{1,2}$" in tex
    recs = [r for r in csv.DictReader(open(root / "table1" / "table1.csv")) if r["row"] == "LLM-Debate"]
    assert recs and all(r["footnotes"] == f"[1] {shared}" for r in recs)


def test_footnotes_fall_back_to_the_method_yaml_and_name_the_size_protocol(tmp_path):
    """Runs made before `deviations` existed (no key in config.yaml): the method's yaml; a method run at the
    protocol's reduced setting gets a footnote naming it."""
    from agentic_repro.scripts import table1
    from agentic_repro.scripts.runs import method_config

    root = tmp_path / "results"
    _write_config(_fake_metrics(root, "gsm8k", "cot_sc", 42, 20.0), "cot_sc", "gsm8k")
    (root / "table1" / "protocol-local.json").write_text(json.dumps(
        {"backbone": "local", "protocol": "embedded",
         "settings": {"seeds": [42], "limit": 12, "method_overrides": {"cot_sc": ["method.params.k=3"]}}}))
    t, recs = table1.build(root, "local")
    row = next(r for r in t.rows if str(getattr(r[0], "text", r[0])).startswith("CoT-SC"))
    expected = [*(method_config("cot_sc").get("deviations") or []),
                "run at the reduced setting of size protocol 'embedded': method.params.k=3"]
    assert row[0].sup == ",".join(str(i) for i in range(1, len(expected) + 1))
    assert t.notes[-len(expected) - 1:][1:] == [f"{i}. {d}" for i, d in enumerate(expected, 1)] or \
        [n for n in t.notes if n[:1].isdigit()] == [f"{i}. {d}" for i, d in enumerate(expected, 1)]


# ---- per-role costs --------------------------------------------------------------------------------------

def test_cost_table_per_role_when_a_run_has_several_roles(tmp_path):
    from agentic_repro.scripts import efficiency

    root = tmp_path / "results"
    d = _fake_metrics(root, "gsm8k", "cot", 42, 50.0, n=2, scores=[1.0, 0.0])
    m = json.loads((d / "metrics.json").read_text())
    m["by_role"] = {"designer": {"calls": 2, "prompt_tokens": 100, "completion_tokens": 40, "cost_usd": 0.002,
                                 "flops": 1.4e11},
                    "executor": {"calls": 6, "prompt_tokens": 600, "completion_tokens": 300, "cost_usd": 0.01,
                                 "flops": 9.0e11}}
    (d / "metrics.json").write_text(json.dumps(m))
    _fake_metrics(root, "gsm8k", "io", 42, 50.0, n=2, scores=[1.0, 0.0])    # one role only: not in the role table
    (_fake_metrics(root, "gsm8k", "io", 42, 50.0, n=2, scores=[1.0, 0.0]) / "calls.jsonl").write_text(
        json.dumps({"role": None, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.0, "flops": 1e9}) + "\n")
    res = efficiency.write_all(root)
    t3, t3r = res["tables"][:2]
    assert [r[:2] for r in t3r.rows] == [["cot", "designer"], ["cot", "executor"]]
    assert t3r.rows[1][2:] == ["3.00", "300", "150", "0.00500", "4.50e+11"]     # per problem: totals / 2
    cot = next(r for r in t3.rows if r[0] == "cot")
    assert cot[4] == f"{(1.4e11 + 9.0e11) / 2:.2e}"                              # FLOPs per problem, all roles
    roles_csv = [r for r in csv.DictReader(open(root / "efficiency" / "efficiency.csv")) if r["table"] == "3-role"]
    assert {r["role"] for r in roles_csv} == {"designer", "executor"}


# ---- the size protocols of the main job ------------------------------------------------------------------

def test_smoke_is_a_prefix_of_the_default_size_same_folders_same_settings():
    from agentic_repro.scripts.reproduce_table1 import build_plan, resolve_protocol
    from agentic_repro.scripts.runs import load_experiment

    exp = load_experiment("table1")
    smoke, info = build_plan(exp, {"backbone": "local", "size": "smoke"}, [])
    assert info["protocol"] == "smoke"
    full, info = build_plan(exp, {"backbone": "local"}, [])
    assert info["protocol"] == "embedded" and resolve_protocol(exp, "embedded")["first_pass"] == "smoke"
    strip = lambda ov: [o for o in ov if not o.startswith("limit=")]
    # the default first runs exactly the smoke plan, then grows the same folders (same overrides but the limit)
    assert [strip(it.overrides) for it in full[:len(smoke)]] == [strip(it.overrides) for it in smoke]
    by_cell = {(it.extra["method"], it.extra["benchmark"]): it for it in full[len(smoke):]}
    for it in smoke:
        big = by_cell[(it.extra["method"], it.extra["benchmark"])]
        assert strip(big.overrides) == strip(it.overrides) and big.extra["limit"] >= it.extra["limit"]
    # cheap methods fill the table first; answers are not cut at 160 tokens any more
    order = [it.extra["method"] for it in smoke]
    assert order[0] == "io" and order.index("cot") < order.index("cot_sc") < order.index("denoiseflow")
    assert all("backbone.sampling.max_tokens=160" not in it.overrides for it in full)
    mt = exp["max_tokens"]["embedded"]
    for it in full:
        assert f"backbone.sampling.max_tokens={mt[it.extra['benchmark']]}" in it.overrides
    # every implemented unsearched method has a cell in the smoke size, one benchmark per domain (GSM8K, MBPP, DROP)
    # in the default, all six in `large`
    methods = {it.extra["method"] for it in full}
    assert methods == {it.extra["method"] for it in smoke}      # the default adds problems and benchmarks
    # the searched methods (each a search before its test run) run from size `large` on
    benches = lambda plan, m: {it.extra["benchmark"] for it in plan if it.extra["method"] == m}
    large, _ = build_plan(exp, {"backbone": "local", "size": "large"}, [])
    searched = {r["method"] for r in exp["rows"] if r.get("searched")} & {it.extra["method"] for it in large}
    assert searched and not searched & methods
    assert all({"gsm8k", "mbpp", "drop"} <= benches(full, m) for m in methods - searched)
    assert all(len(benches(large, m)) == 6 for m in methods - searched)
    # HotpotQA's only split is the validate split a search uses: the searched rows skip it
    assert all(benches(large, m) == {"gsm8k", "mbpp", "drop", "humaneval", "math"} for m in searched)


def test_size_option_names_the_choices():
    from agentic_repro.scripts.reproduce_table1 import build_plan
    from agentic_repro.scripts.runs import load_experiment

    with pytest.raises(SystemExit, match="smoke"):
        build_plan(load_experiment("table1"), {"backbone": "local", "size": "huge"}, [])


# ---- re-rendering after each run, Ctrl-C, resume ---------------------------------------------------------

def test_table_is_rerendered_after_each_run_and_survives_an_interrupt(tmp_path, monkeypatch, capsys):
    """While run k is going, table1.md already shows runs 1..k-1; a Ctrl-C mid-plan leaves the table up to date
    and the same command resumes with only the rest."""
    from agentic_repro.scripts import reproduce_table1

    md = tmp_path / "results" / "table1" / "table1.md"
    seen: list[str] = []
    state = {"interrupt": True}

    def script(messages, sampling):
        seen.append(md.read_text() if md.exists() else "")
        return guess(messages, sampling)

    class Interrupting(ScriptedBackbone):
        async def complete(self, messages, sampling, n):
            raise KeyboardInterrupt          # Ctrl-C during the third run

    async def fake_build(cfg, *, run_dir, seed, **kw):
        cls = Interrupting if state["interrupt"] and "humaneval" in str(run_dir) else ScriptedBackbone
        return cls(script, name=cfg["name"], max_concurrency=1)

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    argv = ["backbone=local", "methods=io", "benchmarks=gsm8k,mbpp,humaneval", "limit=2", "concurrent_runs=1",
            "runner.max_concurrent_problems=1", *_args(tmp_path)]   # one run at a time: "run k sees 1..k-1"
    with pytest.raises(KeyboardInterrupt):
        reproduce_table1.main(argv)
    assert len(seen) == 4 and seen[0] == ""                  # 2 GSM8K calls, then 2 MBPP calls
    io_row = seen[2].split("| IO |")[1].split("|")           # while MBPP runs: GSM8K's cell is there, MBPP's not
    assert "n=2" in io_row[0] and io_row[1].strip() == "—"
    rows = {r["benchmark"]: r for r in csv.DictReader(open(md.with_suffix(".csv"))) if r["row"] == "IO"}
    assert rows["gsm8k"]["status"] == "ok" and rows["mbpp"]["status"] == "ok"      # rendered before the Ctrl-C
    assert rows["humaneval"]["status"] in ("incomplete", "not_run")
    state["interrupt"] = False
    capsys.readouterr()
    assert reproduce_table1.main(argv) == 0
    assert "2 already complete (skipped), 1 to run" in capsys.readouterr().err


# ---- answers not cut: the stop share --------------------------------------------------------------------

class _CutBackbone(ScriptedBackbone):
    async def complete(self, messages, sampling, n):
        res = await super().complete(messages, sampling, n)
        return BackboneResult([Completion(c.text, c.prompt_tokens, c.completion_tokens, "length")
                               for c in res.completions], res.retries, res.latency_s)


def test_stop_share_is_computed_from_calls_jsonl_and_warned_below_90_percent(tmp_path, monkeypatch, capsys):
    from agentic_repro.scripts import reproduce_table1

    async def fake_build(cfg, *, run_dir, seed, **kw):
        cls = _CutBackbone if "mbpp" in str(run_dir) else ScriptedBackbone
        return cls(guess, name=cfg["name"], max_concurrency=2)

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    argv = ["backbone=local", "methods=io", "benchmarks=gsm8k,mbpp", "limit=3", *_args(tmp_path)]
    assert reproduce_table1.main(argv) == 0
    err = capsys.readouterr().err
    assert "answers: 100% of 3 calls ended with stop" in err
    assert "answers: 0% of 3 calls ended with stop (WARNING: below 95%" in err
    assert "answers not cut at max_tokens: 50% of 6 calls ended with stop (WARNING" in err
    rt = json.loads((tmp_path / "results" / "table1" / "runtime-local.json").read_text())
    assert {r["run"]: r["stop_pct"] for r in rt["runs"]} == {"io/gsm8k/local/seed=42": 100.0,
                                                              "io/mbpp/local/seed=42": 0.0}
    assert rt["stop_pct_all_runs"] == 50.0
    md = (tmp_path / "results" / "table1" / "table1.md").read_text()
    assert "50.0% of 6 calls ended with finish_reason=stop" in md and "BELOW 90%" in md


def test_runs_are_found_by_their_config_and_two_models_of_one_backbone_get_two_tables(tmp_path):
    """The index keys runs by config.yaml (not the path), naming the backbone as the results path does
    (harness.spec.backbone_dir): two models served under backbone=vllm are two tables, not one average."""
    import yaml

    from agentic_repro.scripts import table1
    from agentic_repro.scripts.collect import RunIndex

    root = tmp_path / "results"
    for model, score in (("Qwen/Qwen2.5-7B-Instruct", 40.0), ("meta-llama/Llama-3.1-8B-Instruct", 60.0)):
        d = root / "table1" / "somewhere" / model.replace("/", "_") / "deeper" / "seed=42"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"score_pct": score, "n": 1, "n_errors": 0, "selected": 1,
                                                    "complete": True}))
        (d / "predictions.jsonl").write_text(json.dumps({"id": "g-0", "index": 0, "status": "ok",
                                                         "score": score / 100}) + "\n")
        (d / "config.yaml").write_text(yaml.safe_dump({"seed": 42, "method": {"name": "io"},
                                                       "benchmark": {"name": "gsm8k"},
                                                       "backbone": {"name": "vllm", "kind": "openai", "model": model}}))
    labels = RunIndex.scan(root, "table1").backbones()
    assert len(labels) == 2 and all(b.startswith("vllm@") for b in labels)
    res = table1.write_all(root)
    cells = {t.title.split(" (")[0]: next(r for r in t.rows if str(getattr(r[0], "text", r[0])) == "IO")[1].text
             for t in res["tables"]}
    assert sorted(v.split(" ")[0] for v in cells.values()) == ["40.0", "60.0"]


def test_ablation_and_sweep_reports_mark_incomplete_cells_and_exit_nonzero(tmp_path, capsys):
    from agentic_repro.scripts import ablation, sensitivity

    root = tmp_path / "results"
    for b in ("gsm8k", "mbpp", "hotpotqa"):
        d = _fake_metrics(root, b, "denoiseflow", 42, 50.0, n=4, scores=[1.0, 0.0, 1.0, 0.0])
        d2 = _fake_metrics(root, b, "denoiseflow-wo_sa", 42, 25.0, n=4, n_errors=1 if b == "mbpp" else 0,
                           scores=[1.0, 0.0, 0.0] if b == "mbpp" else [1.0, 0.0, 0.0, 0.0])
        for x in (d, d2):     # the ablation reads experiment "ablation"
            dest = root / "ablation" / x.relative_to(root / "table1")
            dest.parent.mkdir(parents=True, exist_ok=True)
            x.rename(dest)
    assert ablation.main([f"results_root={root}", "report_only=true"]) == 1
    captured = capsys.readouterr()
    assert "1 cells are incomplete" in captured.err and "wo_sa/mbpp: 3/4 answered, 1 errors" in captured.err
    t = ablation.write_all(root)["tables"][0]
    wo_sa = next(r for r in t.rows if str(getattr(r[0], "text", r[0])) == "w/o SA")
    assert wo_sa[4] == "incomplete 3/4, 1 error" and wo_sa[-3] == "—"          # MBPP score; no Avg
    full = next(r for r in t.rows if str(getattr(r[0], "text", r[0])).startswith("DenoiseFlow"))
    assert full[1].startswith("50.0 [") and full[1].endswith("n=4")

    # a sweep point with an error: shown incomplete, the report exits 1 naming it
    d = _fake_metrics(root, "gsm8k", "x", 42, 0.0, n=2, n_errors=1, scores=[1.0])
    dest = root / "sens_k_max" / "gsm8k" / "denoiseflow-k_max_3" / "local" / "seed=42"
    dest.parent.mkdir(parents=True, exist_ok=True)
    d.rename(dest)
    assert sensitivity.main([f"results_root={root}"]) == 1
    assert "k_max=3 gsm8k: 1/2 answered, 1 errors" in capsys.readouterr().err


def test_sweeps_on_the_embedded_default_cover_six_benchmarks_with_their_max_tokens():
    from agentic_repro.scripts.runs import load_experiment
    from agentic_repro.scripts.sweep import commands

    exp = load_experiment("sensitivity")
    assert exp["benchmarks"] == ["gsm8k", "math", "mbpp", "humaneval", "hotpotqa", "drop"]
    cmds = commands(exp, {"backbone": "local", "params": "k_max"}, [])
    mt = load_experiment("table1")["max_tokens"]["embedded"]
    assert len(cmds) == 6                      # one multirun per benchmark: each has its own max_tokens
    for cmd, b in zip(cmds, exp["benchmarks"]):
        assert f"benchmark={b}" in cmd and f"backbone.sampling.max_tokens={mt[b]}" in cmd and "sample=1" in cmd


def test_time_estimate_from_measured_runs(tmp_path):
    """The estimate for the runs still to do: per answered problem of a same-cell run on disk, its measured
    backbone time and its tokens at the idle per-token costs."""
    from agentic_repro.scripts.reproduce_table1 import build_plan, estimate_s
    from agentic_repro.scripts.runs import load_experiment, plan

    root = tmp_path / "results"
    d = _fake_metrics(root, "gsm8k", "io", 42, 50.0, n=2, scores=[1.0, 0.0])
    m = json.loads((d / "metrics.json").read_text())
    m["totals"] = {"calls": 2, "latency_s": 20.0, "prompt_tokens": 200, "completion_tokens": 300}
    (d / "metrics.json").write_text(json.dumps(m))
    exp = load_experiment("table1")
    items, _ = build_plan(exp, {"backbone": "local", "methods": "io,cot", "benchmarks": "gsm8k", "limit": "5"},
                          [f"results_root={root}"])
    plan(items, [])
    est = estimate_s(items, root, "table1", {"gen_s_per_token": 0.1, "prompt_s_per_token": 0.01})
    # io: 5 - 2 done = 3 problems x 10 s measured, x (150 x 0.1 + 100 x 0.01) = 16 s at the rates; cot: no data
    assert est == {"latency_s": 30.0, "tokens_s": pytest.approx(48.0), "estimated": 1, "to_do": 2}


# ---- one reading of a cell (issue 29 items 1-4): runs through the real runner, backbone scripted --------------

def _echo_data(root: Path, monkeypatch, bench: str, n: int, splits: dict[str, range] | None = None) -> None:
    """``n`` EchoBenchmark problems "What is i+i?" of benchmark ``bench`` (one file per split)."""
    for split, idx in (splits or {"test": range(n)}).items():
        (root / bench).mkdir(parents=True, exist_ok=True)
        (root / bench / f"{split}.jsonl").write_text("".join(
            json.dumps({"id": f"p{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)}) + "\n" for i in idx))
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))


def _right_on(ok):
    """A script right on problem i when ``ok(i)``, wrong elsewhere."""
    import re

    def script(messages, sampling):
        i = int(re.search(r"What is (\d+)\+", messages[-1]["content"]).group(1))
        return f"ANSWER: {2 * i if ok(i) else -1}"
    return script


def _echo_run(tmp_path: Path, bench: str, method: str, ok, *, seed: int = 42, limit=None, sample=None,
              experiment: str = "table1", backbone: str = "scripted", bench_extra=None, method_extra=None):
    """A run of ``method`` (its real config) on the EchoBenchmark ``bench`` through the runner, scripted backbone."""
    from agentic_repro.harness.compose import compose
    from agentic_repro.harness.runner import RunSpec
    from tests.conftest import run

    m = {**dict(compose([f"method={method}"])["method"]), **(method_extra or {})}
    b = {"name": bench, "kind": "tests.conftest.EchoBenchmark", "split": "test", "splits": {"test": f"{bench}/test.jsonl"},
         "limit": limit, "sample": sample, "metric": "accuracy", "answer_instruction": "End with ANSWER: <n>.",
         **(bench_extra or {})}
    bb = {"name": backbone, "kind": "scripted", "model": "scripted-model", "price": {"input_per_1m": 0, "output_per_1m": 0}}
    spec = RunSpec(experiment=experiment, seed=seed, method_cfg=m, benchmark_cfg=b, backbone_cfg=bb,
                   sampling={"temperature": 0.0, "max_tokens": 64},
                   cache_cfg={"mode": "off", "path": str(tmp_path / "cache.sqlite")}, runner_cfg={"progress": False},
                   results_root=tmp_path / "results",
                   full_config={"method": m, "benchmark": b, "backbone": bb, "seed": seed, "experiment": experiment})
    return spec, run(spec, ScriptedBackbone(_right_on(ok), name=backbone))


def _cell(table, label: str, col: int = 1):
    row = next(r for r in table.rows if str(getattr(r[0], "text", r[0])) == label)
    return row[col]


def test_a_mark_takes_its_direction_from_the_shared_problems(tmp_path, monkeypatch):
    """Item 1: IO 75.0 on 40 problems (wrong on the 10 CoT ran) vs CoT 60.0 on those 10 (right on 6): IO's own
    mean is higher, but on the problems both answered CoT wins 6-0 (McNemar p = 0.031 against IO). IO must not be
    bold. Where the shared problems carry it (IO right on them, CoT right on 4 of 10, IO wins 6-0) IO is bold."""
    from agentic_repro.scripts import table1
    from agentic_repro.scripts.stats import paired_test

    _echo_data(tmp_path / "data", monkeypatch, "gsm8k", 40)
    _echo_data(tmp_path / "data", monkeypatch, "math", 40)
    _echo_run(tmp_path, "gsm8k", "io", lambda i: i >= 10)
    _echo_run(tmp_path, "gsm8k", "cot", lambda i: i < 6, limit=10)
    _echo_run(tmp_path, "math", "io", lambda i: i < 30)
    _echo_run(tmp_path, "math", "cot", lambda i: i < 4, limit=10)
    t, _ = table1.build(tmp_path / "results", "scripted")
    io, cot = _cell(t, "IO"), _cell(t, "CoT")
    assert io.text.startswith("75.0 [") and "n=40" in io.text and cot.text.startswith("60.0 [") and "n=10" in cot.text
    io_s = {f"p{i}": 100.0 * (i >= 10) for i in range(40)}
    p = paired_test(io_s, {f"p{i}": 100.0 * (i < 6) for i in range(10)})
    assert (p.n_shared, p.n_differ, round(p.p, 4)) == (10, 6, 0.0312)      # significant, and against IO
    assert not io.bold and not cot.bold and not io.underline
    assert _cell(t, "IO", 2).bold and not _cell(t, "CoT", 2).bold       # the shared problems carry it: IO bold
    assert "direction and the p-value" in table1.marks_note(0.05)


def test_a_cell_over_seeds_is_one_set_of_problem_seed_scores(tmp_path, monkeypatch):
    """Item 2: seed 42 on 8 problems, seed 123 on 3 is not averaged (the old cell printed the unweighted mean of
    the two seed means with an interval over the 3 shared problems, the mean outside it). Seeds on the same
    selection: mean, interval and n from the same (problem, seed) set, the mean inside its interval."""
    from agentic_repro.scripts import table1
    from agentic_repro.scripts.stats import interval

    _echo_data(tmp_path / "data", monkeypatch, "gsm8k", 8)
    _echo_data(tmp_path / "data", monkeypatch, "math", 8)
    _echo_run(tmp_path, "gsm8k", "io", lambda i: i < 3, seed=42)
    _echo_run(tmp_path, "gsm8k", "io", lambda i: True, seed=123, limit=3)
    _echo_run(tmp_path, "math", "io", lambda i: i < 3, seed=42, limit=4)
    _echo_run(tmp_path, "math", "io", lambda i: i < 1, seed=123, limit=4)
    t, recs = table1.build(tmp_path / "results", "scripted")
    assert _cell(t, "IO").text == "seeds ran different problems (42: 8, 123: 3): not averaged"
    rec = next(r for r in recs if r["row"] == "IO" and r["benchmark"] == "gsm8k")
    assert rec["status"] == "incomplete" and rec.get("mean") is None
    same = _cell(t, "IO", 2).text                       # per problem over seeds: 100, 50, 50, 0 -> 50.0
    ci = interval([100.0, 50.0, 50.0, 0.0])
    assert same == f"50.0 {ci.text()} n=4×2" and ci.low <= 50.0 <= ci.high


def test_a_rerun_at_a_smaller_sample_reads_the_problems_it_selects(tmp_path, monkeypatch):
    """Item 3: a folder run with sample=6, then in place with sample=3 (another seeded subset): the cell is the 3
    problems the current selection holds (recorded in meta.json by the runner), not "the first 3 records" of
    predictions.jsonl. A run whose metrics.json covers another selection than the current one (running, killed,
    re-run) is stale: never averaged."""
    from agentic_repro.evaluators.data import select
    from agentic_repro.scripts import table1
    from agentic_repro.scripts.stats import wilson

    _echo_data(tmp_path / "data", monkeypatch, "gsm8k", 12)
    now = {f"p{i}" for i in select(list(range(12)), limit=None, sample=3, sample_seed=0)}
    ok = lambda i: f"p{i}" not in now                   # right exactly on the problems NOT selected now
    _echo_run(tmp_path, "gsm8k", "io", ok, sample=6)
    spec, m = _echo_run(tmp_path, "gsm8k", "io", ok, sample=3)
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert set(meta["ids"]) == now and set(m["ids"]) == now and m["score_pct"] == 0.0
    t, _ = table1.build(tmp_path / "results", "scripted")
    assert _cell(t, "IO").text == f"0.0 {wilson(0, 3).text()} n=3"
    meta["ids"] = sorted(now | {"p0", "p1"})            # an invocation selecting 5 started after these metrics
    (spec.out_dir / "meta.json").write_text(json.dumps(meta))
    t, recs = table1.build(tmp_path / "results", "scripted")
    assert _cell(t, "IO").text.startswith("stale ") and "covers another selection" in _cell(t, "IO").text
    assert next(r for r in recs if r["row"] == "IO" and r["benchmark"] == "gsm8k").get("mean") is None


def test_two_folders_with_one_run_key_are_an_error_naming_both(tmp_path, monkeypatch):
    """Item 4: a kept copy seed=42.old (an older 20% run) beside the current seed=42 (90%): one key, two folders.
    Before, the copy sorted last and its score replaced the current run's; now neither is read."""
    import shutil

    from agentic_repro.scripts import table1
    from agentic_repro.scripts.collect import DuplicateRunKey

    _echo_data(tmp_path / "data", monkeypatch, "gsm8k", 10)
    spec, _ = _echo_run(tmp_path, "gsm8k", "io", lambda i: i < 2)
    old = spec.out_dir.with_name("seed=42.old")
    shutil.copytree(spec.out_dir, old)
    shutil.rmtree(spec.out_dir)
    _echo_run(tmp_path, "gsm8k", "io", lambda i: i < 9)
    with pytest.raises(DuplicateRunKey) as err:
        table1.build(tmp_path / "results", "scripted")
    assert str(spec.out_dir) in str(err.value) and str(old) in str(err.value) and "gsm8k/io/scripted/seed=42" in str(err.value)
    shutil.move(str(old), str(tmp_path / "kept-seed=42.old"))      # kept outside the experiment: the run reads
    t, _ = table1.build(tmp_path / "results", "scripted")
    assert _cell(t, "IO").text.startswith("90.0 [")
