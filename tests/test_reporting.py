"""The reporting layer: Table 1 from results/ (traceable to metrics.json), reuse of finished runs, figures from a
fixture of real run outputs with zero backbone calls, sweeps on Hydra launchers, and the optional wandb logger."""
from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.doubles import ScriptedBackbone

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "results"


def guess(messages, sampling):
    """A deterministic, answer-shaped reply that is right for some problems and not others."""
    h = int(hashlib.sha256((messages[-1]["content"] + str(sampling.get("seed"))).encode()).hexdigest(), 16)
    return f"Reasoning... \\boxed{{{h % 3}}}\nAnswer: {h % 3}"


@pytest.fixture
def scripted(monkeypatch):
    """Every backbone the runner builds is a scripted double; ``made`` counts how many were built."""
    made: list[ScriptedBackbone] = []

    async def fake_build(cfg, *, run_dir, seed, **kw):
        bb = ScriptedBackbone(guess, name=cfg["name"], max_concurrency=2)
        made.append(bb)
        return bb

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", fake_build)
    return made


@pytest.fixture
def no_backbone(monkeypatch):
    async def refuse(cfg, *, run_dir, seed, **kw):
        raise AssertionError("a reporting step tried to build a backbone")

    monkeypatch.setattr("agentic_repro.harness.runner.build_backbone", refuse)


def _args(tmp_path: Path) -> list[str]:
    return [f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false"]


# ---- Table 1: the plan, the runs, the table -----------------------------------------------------------------

def test_table1_rows_are_data_and_missing_methods_show_a_reason(tmp_path):
    from agentic_repro.scripts import table1
    from agentic_repro.scripts.runs import load_experiment

    exp = load_experiment("table1")
    labels = [r["label"] for r in exp["rows"]]
    assert labels[:14] == ["IO", "CoT", "CoT-SC", "Self-Refine", "LLM-Debate", "LLM-Blender", "DyLAN", "GPTSwarm",
                           "ADAS", "AFlow", "MaAS", "MermaidFlow", "JudgeFlow", "DenoiseFlow"]  # the paper's order
    assert labels[14:] == ["ToT", "Self-Reflection", "Self-Reflection/step"]  # other papers' baselines, after
    assert exp["benchmarks"] == ["gsm8k", "math", "mbpp", "humaneval", "hotpotqa", "drop"]
    exp["rows"].append({"label": "Unbuilt", "method": "no_such_method", "group": "other-papers",
                        "missing": "not implemented yet: a test row"})   # every table1.yaml row has a config now
    res = table1.write_all(tmp_path / "results", backbones=["local"], exp=exp)
    md = (tmp_path / "results" / "table1" / "table1.md").read_text()
    # nothing on disk: no number at all in any method row, every row says why
    for row in res["tables"][0].rows:
        if not str(row[0]).startswith("↳"):
            assert all(str(getattr(c, "text", c)) == "—" for c in row[1:]), row
    assert "Unbuilt: not implemented yet: a test row" in md
    assert "GPTSwarm: implemented, not run yet on this backbone" in md
    assert "IO: implemented, not run yet on this backbone" in md
    assert (tmp_path / "results" / "table1" / "table1.tex").read_text().count("\\begin{tabular}") == 1
    rows = list(csv.DictReader(open(tmp_path / "results" / "table1" / "table1.csv")))
    gpt = [r for r in rows if r["row"] == "Unbuilt"]
    assert {r["status"] for r in gpt} == {"missing"} and all(r["mean"] == "" for r in gpt)
    ref = [r for r in rows if r["row"] == "DenoiseFlow" and r["benchmark"] == "math"][0]
    assert ref["paper"] == "61.7" and ref["paper_inferred"] == "True"


def test_reproduce_table1_runs_once_then_reuses_results(tmp_path, scripted, capsys, monkeypatch):
    from agentic_repro.scripts import reproduce_table1

    argv = ["backbone=local", "methods=io,cot,cot_sc", "benchmarks=gsm8k,drop", "seeds=42,123", "limit=3",
            *_args(tmp_path)]
    from agentic_repro.scripts import runs

    composed: list[list[str]] = []
    real_compose = runs.compose

    def counting_compose(overrides):
        composed.append(list(overrides))
        return real_compose(overrides)

    monkeypatch.setattr(runs, "compose", counting_compose)
    assert reproduce_table1.main(argv) == 0
    # the table is rendered after each of the 12 runs; its rows' folder names are composed once per method config
    # (a compose is ~1 s: once per row per render made the main job's table cost ~25 min of CPU)
    row_composes = [o for o in composed if len(o) == 1 and o[0].startswith("method=")]
    assert len(row_composes) == len({o[0] for o in row_composes}), f"{len(row_composes)} composes for row folders"
    first = len(scripted)
    assert first == 3 * 2 * 2  # one backbone per run
    out = tmp_path / "results" / "table1"
    for ext in ("md", "tex", "csv"):
        assert (out / f"table1.{ext}").exists()
    rows = {(r["method"], r["benchmark"]): r for r in csv.DictReader(open(out / "table1.csv"))}
    r = rows[("cot_sc", "gsm8k")]
    assert r["status"] == "ok" and r["n_seeds"] == "2" and r["seeds"] == "42 123" and r["n_problems"] == "3"
    _assert_csv_traces_to_metrics(out / "table1.csv", tmp_path / "results")
    _assert_markdown_numbers_come_from_csv(out / "table1.md", out / "table1.csv")
    runtime = json.loads((out / "runtime-local.json").read_text())
    assert len(runtime["runs"]) == 12 and all(x["state"] == "done" for x in runtime["runs"])

    # the second invocation finds every run complete: no backbone is even built
    assert reproduce_table1.main(argv) == 0
    assert len(scripted) == first
    assert "12 already complete (skipped), 0 to run" in capsys.readouterr().err

    # a larger limit resumes: only the new problems are solved
    calls_before = sum(len(b.requests) for b in scripted)
    assert reproduce_table1.main([*argv[:-4], "limit=4", *argv[-3:]]) == 0
    new_requests = sum(len(b.requests) for b in scripted) - calls_before
    # 2 benchmarks x 2 seeds x (io + cot + cot_sc with the embedded protocol's k=3) for the 1 new problem
    assert new_requests == 2 * 2 * (1 + 1 + 3)


def _fake_metrics(root: Path, bench: str, method: str, seed: int, score: float, complete: bool = True,
                  n: int = 10, n_errors: int = 0, scores: list[float] | None = None, old_format: bool = False) -> Path:
    """A run folder as the runner writes it: metrics.json plus predictions.jsonl whose mean is ``score``."""
    d = root / "table1" / bench / method / "local" / f"seed={seed}"
    d.mkdir(parents=True, exist_ok=True)
    answered = n - n_errors
    scores = scores if scores is not None else [score / 100.0] * answered
    preds = [{"id": f"{bench}-{i}", "index": i, "status": "ok", "score": v} for i, v in enumerate(scores)]
    preds += [{"id": f"{bench}-{answered + i}", "index": answered + i, "status": "error", "score": 0.0,
               "error": "BackboneError: connection refused"} for i in range(n_errors)]
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    metrics = {"score_pct": score, "n": answered, "n_errors": n_errors, "selected": n,
               "complete": complete and not n_errors,
               "per_problem": {"calls": 1, "tokens": 100, "cost_usd": 0.0}, "totals": {"calls": 10}}
    if old_format:   # before n_errors was recorded: n counted errored problems, no n_errors key
        metrics["n"] = n
        del metrics["n_errors"]
    (d / "metrics.json").write_text(json.dumps(metrics))
    return d


def test_table1_best_bold_second_underlined_avg_and_incomplete(tmp_path):
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    benches = ["gsm8k", "math", "mbpp", "humaneval", "hotpotqa", "drop"]
    for i, b in enumerate(benches):
        for seed, jitter in ((42, 0.0), (123, 2.0)):
            _fake_metrics(root, b, "io", seed, 10.0 + i + jitter)
            _fake_metrics(root, b, "cot", seed, 20.0 + i + jitter)
        _fake_metrics(root, b, "cot_sc", 42, 30.0 + i, complete=b != "drop", n=10 if b != "drop" else 12,
                      scores=[0.35] * 10 if b == "drop" else None)
    t, recs = table1.build(root, "local")
    rows = {str(getattr(r[0], "text", r[0])): r for r in t.rows}
    assert rows["CoT-SC"][1].bold and rows["CoT"][1].underline and not rows["IO"][1].bold
    # every problem has the same (non-binary) score: a zero-width t interval; two seeds: n=10x2
    assert rows["IO"][1].text == "11.0 [11.0, 11.0] n=10×2" and rows["CoT-SC"][1].text.startswith("30.0 [")
    assert rows["CoT-SC"][6].text == "incomplete 10/12"  # an incomplete run is marked and never averaged
    assert rows["CoT-SC"][7] == "—"  # no Avg with an incomplete cell; Avg carries no mark (no paired test)
    assert rows["CoT"][7] == f"{sum(20.0 + i + 1.0 for i in range(6)) / 6:.1f}"
    md = t.to_markdown()
    assert "**30.0 [" in md and "<u>21.0 [" in md and "incomplete = the cell's runs" in md
    tex = t.to_latex()
    assert "\\textbf{30.0 [" in tex and "n=10$\\times$2" in tex
    assert rows["Self-Refine"][1] == "—" or getattr(rows["Self-Refine"][1], "text", "") == "—"
    drop = next(r for r in recs if r["row"] == "CoT-SC" and r["benchmark"] == "drop")
    assert drop["status"] == "incomplete" and drop.get("mean") is None


def test_reproduce_refuses_to_mix_configurations(tmp_path, scripted):
    from agentic_repro.scripts import reproduce_table1

    base = ["backbone=local", "methods=cot_sc", "benchmarks=gsm8k", "seeds=42", "limit=2", *_args(tmp_path)]
    assert reproduce_table1.main(base) == 0
    assert reproduce_table1.main([*base, "method.params.k=4"]) == 1  # same folder, other settings: invalid


def test_protocols_embedded_default_is_small_and_paper_is_full():
    from agentic_repro.scripts.reproduce_table1 import build_plan
    from agentic_repro.scripts.runs import load_experiment, method_config

    exp = load_experiment("table1")
    items, info = build_plan(exp, {"backbone": "local"}, [])
    assert info["protocol"] == "embedded"
    assert all("limit=null" not in " ".join(it.overrides) for it in items)
    items, info = build_plan(exp, {"backbone": "gpt-4o-mini"}, [])
    assert info["protocol"] == "paper"
    implemented = [r for r in exp["rows"] if method_config(r["method"]) is not None]
    searched = [r for r in implemented if r.get("searched")]
    # every test split x 3 seeds; a searched method skips HotpotQA, whose only split is the one it searches on
    assert searched and len(items) == (len(implemented) * 6 - len(searched)) * 3
    assert not any(it.extra["benchmark"] == "hotpotqa" for it in items
                   if it.extra["method"] in {r["method"] for r in searched})
    assert all("limit=null" in it.overrides for it in items)


# ---- figures from a fixture of real run outputs -------------------------------------------------------------

def test_fixture_is_real_run_output():
    metas = list(FIXTURE.glob("**/meta.json"))
    assert metas, "tests/fixtures/results is missing"
    for m in metas:
        meta = json.loads(m.read_text())
        assert meta["model"] and len(meta["data"]["sha256"]) == 64
        metrics = json.loads((m.parent / "metrics.json").read_text())
        assert metrics["complete"] is True and metrics["n_errors"] == 0 and metrics["by_role"]
        assert (m.parent / "identity.json").exists() and (m.parent / "config.yaml").exists()
        calls = [json.loads(x) for x in (m.parent / "calls.jsonl").read_text().splitlines() if x.strip()]
        # the real server's finish_reason is in the ledger: the answers were not cut at max_tokens
        assert calls and all(c["finish_reason"] == "stop" for c in calls)


def test_make_figures_from_fixture_with_zero_backbone_calls(tmp_path, no_backbone):
    from agentic_repro.scripts import figures

    root = tmp_path / "results"
    shutil.copytree(FIXTURE, root)
    assert figures.main([f"results_root={root}"]) == 0
    for fig in ("efficiency/figure3-local", "sensitivity/figure2"):
        for ext in ("png", "pdf"):
            p = root / f"{fig}.{ext}"
            assert p.exists() and p.stat().st_size > 5000, p
    assert (root / "efficiency" / "figure3-local.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for t in ("table1/table1", "ablation/table2", "sensitivity/table11", "sensitivity/table14", "efficiency/efficiency"):
        for ext in ("md", "tex", "csv"):
            assert (root / f"{t}.{ext}").exists(), (t, ext)
    _assert_csv_traces_to_metrics(root / "table1" / "table1.csv", root)
    _assert_markdown_numbers_come_from_csv(root / "table1" / "table1.md", root / "table1" / "table1.csv")
    eff = (root / "efficiency" / "efficiency.md").read_text()
    assert "binned" not in eff  # the Spearman statistic is in the figure legend and the CSV
    stats = [r for r in csv.DictReader(open(root / "efficiency" / "efficiency.csv")) if r["table"] == "fig3"]
    assert stats, "Figure 3 found no per-problem risk/confidence in the fixture"


def _assert_csv_traces_to_metrics(csv_path: Path, root: Path) -> None:
    """Every mean in the CSV equals the mean of score_pct over the metrics.json files it names."""
    rows = [r for r in csv.DictReader(open(csv_path)) if r["mean"]]
    assert rows
    for r in rows:
        srcs = r["sources"].split(";")
        assert srcs and all((root / s).exists() for s in srcs), r
        vals = [json.loads((root / s).read_text())["score_pct"] for s in srcs]
        if r["benchmark"] == "avg":
            by_bench: dict[str, list[float]] = {}
            for s, v in zip(srcs, vals):
                by_bench.setdefault(Path(s).parts[1], []).append(v)
            expect = sum(sum(v) / len(v) for v in by_bench.values()) / len(by_bench)
        else:
            expect = sum(vals) / len(vals)
        assert float(r["mean"]) == pytest.approx(expect, abs=1e-3), r


def _assert_markdown_numbers_come_from_csv(md_path: Path, csv_path: Path) -> None:
    """Every number printed in a method row of the Markdown table is a CSV mean/std/interval (to 1 decimal)."""
    rows = list(csv.DictReader(open(csv_path)))
    allowed = {f"{float(r[k]):.1f}" for r in rows for k in ("mean", "std", "ci_low", "ci_high") if r[k]}
    md = md_path.read_text()
    checked = 0
    for line in md.splitlines():
        if not line.startswith("| ") or line.startswith("| Method") or "↳" in line:
            continue
        for cell in line.strip("|").split("|")[1:]:
            for num in re.findall(r"\d+\.\d", cell):
                assert num in allowed, (num, line)
                checked += 1
    assert checked > 0


# ---- sweeps: skip completed points, Hydra launchers ---------------------------------------------------------

def test_sweep_commands_and_point_names():
    from agentic_repro.scripts.runs import compose
    from agentic_repro.scripts.sensitivity import point_name
    from agentic_repro.scripts.sweep import commands
    from agentic_repro.scripts.runs import load_experiment

    exp = load_experiment("sensitivity")
    cmds = commands(exp, {"backbone": "gpt-4o-mini", "launcher": "submitit_slurm", "params": "tau_sim"},
                    ["hydra.launcher.partition=gpu"])
    (cmd,) = cmds
    assert "hydra/launcher=submitit_slurm" in cmd and "hydra.launcher.partition=gpu" in cmd
    assert "method.params.tau_sim=0.7,0.8,0.85,0.9" in cmd and "sample=30" in cmd
    # the folder Hydra derives for a point is the one the report reads
    name_override = next(c for c in cmd if c.startswith("method.name="))
    cfg = compose(["method=cot", "+method.params.tau_sim=0.85", name_override.replace("denoiseflow", "cot", 1)])
    assert cfg["method"]["name"] == point_name({**exp, "method": "cot"}, "tau_sim", 0.85)


def _complete_run(tmp_path: Path, overrides: list[str]) -> None:
    import asyncio

    from agentic_repro.harness.runner import Runner, spec_from_config
    from agentic_repro.scripts.runs import compose

    spec = spec_from_config(compose([*overrides, *_args(tmp_path)]))
    asyncio.run(Runner(spec, backbone=ScriptedBackbone(guess)).run())


def test_run_point_skips_a_completed_point(tmp_path, no_backbone, capsys):
    from agentic_repro.scripts.run_point import run_point
    from agentic_repro.scripts.runs import compose

    ov = ["method=cot", "benchmark=gsm8k", "limit=2", "experiment=sens_test"]
    _complete_run(tmp_path, ov)
    metrics = run_point(compose([*ov, *_args(tmp_path)]))
    assert metrics["n"] == 2
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["skipped"] is True


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_hydra_multirun_skips_completed_points(tmp_path, launcher):
    """A real Hydra multirun (basic or joblib launcher) over points that are already complete: zero calls."""
    pts = ["2", "3"]
    for k in pts:
        _complete_run(tmp_path, ["method=cot_sc", f"method.params.k={k}", f"method.name=cot_sc-k_{k}",
                                 "benchmark=gsm8k", "limit=2", "experiment=sens_k"])
    cmd = [sys.executable, "-m", "agentic_repro.scripts.run_point", "-m", "method=cot_sc", "method.params.k=2,3",
           "method.name=cot_sc-k_${method.params.k}", "benchmark=gsm8k", "limit=2", "experiment=sens_k",
           "backbone=local", *_args(tmp_path), f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    if launcher == "joblib":
        cmd += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    # the embedded backbone pointed at a dead URL: any attempt to start or call it fails fast
    env = {**__import__("os").environ, "AGENTIC_REPRO_LOCAL_URL": "http://127.0.0.1:9"}
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith('{"run"')]
    assert len(lines) == 2 and all(x["skipped"] for x in lines), (out.stdout, out.stderr[-2000:])


# ---- wandb --------------------------------------------------------------------------------------------------

def test_logger_configs_compose():
    from agentic_repro.scripts.runs import compose, logger_override

    cfg = compose(logger_override("wandb"))
    assert cfg["logger"]["name"] == "wandb" and cfg["logger"]["group"] == cfg["experiment"]
    assert logger_override("none") == []


def test_wandb_missing_names_the_extra(monkeypatch):
    from agentic_repro.harness import logging_wandb

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RuntimeError, match=r"\.\[wandb\]"):
        logging_wandb.WandbLogger({"name": "wandb"})


def test_wandb_offline_without_key(monkeypatch, tmp_path):
    from agentic_repro.harness import logging_wandb

    seen = {}

    class FakeRun:
        def log(self, d): seen.setdefault("log", []).append(d)
        def save(self, *a, **k): seen.setdefault("save", []).append(a)
        def finish(self): seen["finished"] = True

    fake = types.SimpleNamespace(init=lambda **kw: (seen.update(init=kw), FakeRun())[1],
                                 Table=lambda columns, data: ("table", columns, data), Image=lambda p: ("image", p))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    wb = logging_wandb.WandbLogger.from_config({"experiment": "x", "logger": {"name": "wandb", "project": "p"}})
    assert seen["init"]["mode"] == "offline" and seen["init"]["config"]["experiment"] == "x"
    wb.log_metrics({"score_pct": 50.0, "totals": {"calls": 3}, "bins": [1, 2]})
    assert seen["log"][-1] == {"score_pct": 50.0, "totals/calls": 3}
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("a,b\n1,2\n")
    wb.log_table("t", csv_path)
    assert seen["log"][-1]["t"] == ("table", ["a", "b"], [["1", "2"]])
    wb.finish()
    assert seen["finished"]
    assert logging_wandb.WandbLogger.from_config({"logger": {"name": "none"}}) is None


def test_wandb_real_package_offline(monkeypatch, tmp_path):
    """With the real wandb package (the `wandb` extra) and no key, everything is logged offline to disk."""
    from agentic_repro.harness.logging_wandb import WandbLogger

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
    wb = WandbLogger.from_config({"experiment": "x", "logger": {"name": "wandb", "project": "agentic-repro",
                                                                 "dir": str(tmp_path)}}, run_name="t")
    wb.log_metrics({"score_pct": 50.0})
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    wb.log_table("t", tmp_path / "t.csv")
    wb.finish()
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))


def test_denoiseflow_traces_feed_tables_9_10_and_figure_3(tmp_path, scripted):
    """DenoiseFlow runs (scripted backbone) -> Tables 3/9/10 via denoiseflow.report and Figure 3 from trace risk."""
    from agentic_repro.scripts.runs import method_config

    assert method_config("denoiseflow") is not None
    from agentic_repro.scripts import efficiency, reproduce_table1

    argv = ["backbone=local", "methods=cot,denoiseflow", "benchmarks=gsm8k,math", "limit=3", *_args(tmp_path)]
    assert reproduce_table1.main(argv) == 0
    res = efficiency.write_all(tmp_path / "results")
    t3, t3_roles, t9, t10 = res["tables"][:4]
    assert [r[0] for r in t3.rows] == ["cot", "denoiseflow"]
    assert t3.rows[0][5] == "—" and t3.rows[1][5] != "—"       # retry % only where the trace records it
    assert t3.rows[0][4] != "—"                                 # FLOPs from the ledger (the local model's size)
    assert t3_roles.title.startswith("Table 3 by role")
    assert [r[0] for r in t9.rows] == ["gsm8k", "math", "all"] and t9.rows[-1][-1] == "6"
    assert [r[0] for r in t10.rows] == ["gsm8k", "math", "all"]
    fig3 = [r for r in res["records"] if r.get("table") == "fig3"]
    assert {r["method"]: r["risk_source"] for r in fig3}.get("denoiseflow") == "risk"
    assert (tmp_path / "results" / "efficiency" / "figure3-local.pdf").exists()
    t8 = res["tables"][-1]
    local = next(r for r in t8.rows if r[0] == "local")
    assert "—" not in local[1:5]                                 # CoT and DenoiseFlow on GSM8K and MATH


def test_sensitivity_tables_and_figure2_from_point_folders(tmp_path):
    """Points written where the sweep writes them become Table 11 rows and Figure 2 lines."""
    from agentic_repro.scripts import sensitivity

    for n in (3, 5):
        for b in ("gsm8k", "hotpotqa"):
            _complete_run(tmp_path, ["method=cot", f"method.name=denoiseflow-n_samples_{n}", f"benchmark={b}",
                                     "sample=2", "experiment=sens_n_samples"])
    res = sensitivity.write_all(tmp_path / "results")
    t11 = res["tables"][0]
    assert t11.title.startswith("Table 11")
    rows = {str(getattr(r[0], "text", r[0])): r for r in t11.rows}
    assert t11.columns[1:7] == ["GSM8K", "MATH", "MBPP", "HumanEval", "HotpotQA", "DROP"]  # all six (paper §4.4)
    assert rows["3"][1] != "—" and rows["3"][5] != "—" and rows["3"][2] == "—"   # gsm8k, hotpotqa run; math not
    assert rows["7"][1] == "—"
    recs = [r for r in res["records"] if r["param"] == "n_samples"]
    assert len(recs) == 4 and all(r["n_problems"] == 2 for r in recs)
    for ext in ("png", "pdf"):
        assert (tmp_path / "results" / "sensitivity" / f"figure2.{ext}").stat().st_size > 5000
