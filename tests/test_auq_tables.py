"""AUQ's table/figure builders (scripts/auq_tables.py) on fixture run folders: hand-made folders in the real
format (numbers checked by hand), and folders written by a real scripted AUQ run (the records the method
actually writes)."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from agentic_repro.scripts import auq_tables
from agentic_repro.scripts.collect import RunIndex
from agentic_repro.scripts.runs import load_experiment


def step(c, auq=None):
    extra = {"confidence": c}
    if auq is not None:
        extra["auq"] = auq
    return {"event": "step", "extra": extra}


def pred(pid, ok, confs, *, s2=None, status="ok", tagger=None):
    traj = [{"event": "reset"}] + [step(c, (s2 or {}).get(i)) for i, c in enumerate(confs)]
    out = {"id": pid, "index": int(pid[1:]), "status": status, "score": 1.0 if ok else 0.0, "calls": 3,
           "episodes": [{"index": 0, "trajectory": traj}]}
    if tagger:
        out["score_details"] = {"rule": "environment", "noun_tagger": tagger}
    return out


def write_run(root, exp, bench, method, preds, *, seed=42, backbone="local", calls=3.0, complete=True, tau=0.85,
              params=None):
    d = root / exp / bench / method / backbone / f"seed={seed}"
    d.mkdir(parents=True)
    cfg = {"method": {"name": method, "params": {"tau": tau, "few_shot": 0, **(params or {})}, "deviations": []},
           "benchmark": {"name": bench, "env": {"max_steps": 8}}, "backbone": {"name": backbone,
                                                                         "sampling": {"max_tokens": 192}}, "seed": seed}
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    ok = [p for p in preds if p["status"] == "ok"]
    errors = len(preds) - len(ok)
    (d / "metrics.json").write_text(json.dumps({
        "score_pct": 100.0 * sum(p["score"] for p in ok) / max(1, len(ok)), "n": len(ok), "n_errors": errors,
        "selected": len(preds), "complete": complete and not errors, "per_problem": {"calls": calls},
        "totals": {"calls": calls * len(preds)}}))
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))


S2 = {"system2": True, "c_init": 0.5, "c_final": 0.9, "expanded": False}


@pytest.fixture(autouse=True)
def png_only(monkeypatch):
    """The figures as PNG only (the PDF twin costs seconds and is the same drawing)."""
    from matplotlib import pyplot

    def save(fig, base):
        base.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(base.with_suffix(".png"), dpi=40)
        pyplot.close(fig)
        return [base.with_suffix(".png")]

    monkeypatch.setattr("agentic_repro.scripts.figstyle.save", save)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "nodata"))   # no WebShop product files
    root = tmp_path / "results"
    # ReAct: p0 ok, p1 fail, p2 fail, p3 ok
    write_run(root, "auq", "alfworld", "react", [pred("p0", True, [0.9, 1.0]), pred("p1", False, [0.6, None]),
                                                 pred("p2", False, [0.8]), pred("p3", True, [None])])
    # AUQ dual: fixes p1, regresses p3; System 2 at p0 step 0 (success) and p2 step 0 (failure)
    write_run(root, "auq", "alfworld", "auq_dual", [
        pred("p0", True, [0.9, 0.95], s2={0: S2}), pred("p1", True, [0.9]),
        pred("p2", False, [0.7], s2={0: {**S2, "c_init": 0.2, "c_final": 0.7}}), pred("p3", False, [0.4])],
        calls=7.0)
    # CoT-SC: no step stated a confidence
    write_run(root, "auq", "alfworld", "agent_cot_sc", [pred("p0", True, [None]), pred("p1", False, [None, None])])
    # Forward: one error -> incomplete, never averaged
    write_run(root, "auq", "alfworld", "auq_forward", [pred("p0", True, [0.9]), pred("p1", False, [0.2], status="error")])
    # Figure 6 points
    for tau, sr_ok, calls in ((0.8, 1, 4.0), (0.9, 2, 9.0)):
        write_run(root, f"auq-tau{tau:g}-full", "alfworld", "auq_dual",
                  [pred("p0", True, [0.9]), pred("p1", sr_ok > 1, [0.9])], calls=calls, tau=tau)
    # Figures 4/5
    write_run(root, "auq-window-h5", "alfworld", "react", [pred("p0", False, [0.5]), pred("p1", False, [0.5])])
    write_run(root, "auq-window-h5", "alfworld", "auq_dual", [pred("p0", True, [0.9]), pred("p1", False, [0.5])])
    write_run(root, "auq-window-h5", "alfworld", "auq_dual-noexp", [pred("p0", False, [0.5]), pred("p1", False, [0.5])])
    write_run(root, "auq-window-full", "alfworld", "react", [pred("p0", True, [0.9]), pred("p1", False, [0.5])])
    return root


def test_tables_numbers_hand_checked(results):
    exp = load_experiment("auq_main")
    out = auq_tables.write_all(results, "local", exp)
    d = out["data"]["local"]
    t1 = {(r["benchmark"], r["method"]): r for r in d["table1"]}
    react = t1[("alfworld", "react")]
    # Φ_last: C = [1.0 (ok), 0.6 (fail), 0.8 (fail)]; p3 has no confidence: excluded, counted
    assert react["n"] == 4 and react["n_conf"] == 3 and react["missing_steps"] == 2
    assert react["last_t_bs"] == pytest.approx((0 + 0.36 + 0.64) / 3)
    assert react["last_t_ece"] == pytest.approx((0 + 0.6 + 0.8) / 3)        # three singleton bins
    assert react["min_t_ece"] == pytest.approx((0.1 + 0.6 + 0.8) / 3)       # min of p0 = 0.9
    assert t1[("alfworld", "auq_forward")]["status"].startswith("incomplete 1/2, 1 error")
    assert t1[("alfworld", "agent_cot_sc")]["status"] == "no confidence" and t1[("alfworld", "agent_cot_sc")]["n"] == 2
    assert "WebShop product files missing" in t1[("webshop", "react")]["status"]
    t2 = {(r["benchmark"], r["method"]): r for r in d["table2"]}
    assert t2[("alfworld", "react")]["sr"] == 50.0 and t2[("alfworld", "auq_dual")]["calls_per_episode"] == 7.0
    assert t2[("alfworld", "react")]["auroc_last"] == pytest.approx(1.0)    # 1.0 > 0.6, 0.8
    assert t2[("alfworld", "auq_dual")]["paper_sr"] == 74.3
    assert t2[("alfworld", "react")]["paper_sr_inferred"] == 63.6
    assert "not implemented" not in (t2[("alfworld", "reflexion")]["status"] or "")
    cmp = t2[("alfworld", "compare")]
    assert (cmp["fixed"], cmp["base_failures"], cmp["regressed"], cmp["base_successes"]) == (1, 2, 1, 2)
    assert cmp["fixed_pct"] == 50.0 and cmp["regressed_pct"] == 50.0
    md = (results / "auq-report" / "table2-local.md").read_text()
    assert "fixes 50.0% of react's failures" in md and "the paper: 14.3% / 3.6%" in md
    assert "10 equal-width bins" in (results / "auq-report" / "table1-local.md").read_text()
    # the reduced settings the runs recorded are footnoted on their rows (and only there)
    assert "ran with step cap 8 (the paper: 50), few_shot 0 (its config: 2), max_tokens 192" in react["footnotes"]
    assert "ran with" not in t1[("alfworld", "reflexion")]["footnotes"]
    assert "not comparable with the paper" in md
    for f in ("figure3", "figure4", "figure5", "figure6"):
        assert (results / "auq-report" / f"{f}-local.png").stat().st_size > 0
    figs = d["figures"]
    s2 = figs["figure3"]["system2"]
    assert s2["n"] == 2 and s2["success"]["mean_delta"] == pytest.approx(0.4) \
        and s2["failure"]["mean_delta"] == pytest.approx(0.5)
    assert figs["figure3"]["auq_dual"]["success"] == 2 and figs["figure3"]["auq_forward"] == {"status": "incomplete"}
    assert [(p["tau"], p["sr"], p["calls_per_episode"]) for p in figs["figure6"]["ours"]["full"]] == \
        [(0.8, 50.0, 4.0), (0.85, None, None), (0.9, 100.0, 9.0), (0.95, None, None)]
    # Figure 5: h=5 bars (ReAct, AUQ no expansion, AUQ + expansion), then the full-memory bars (AUQ full not run)
    assert [b["sr"] for b in figs["figure5"]["bars"]] == [0.0, 0.0, 50.0, 50.0, None]
    g = figs["figure5"]["gains"]
    assert (g["expansion"]["gain"], g["limited"]["gain"], g["full"]["gain"]) == (50.0, 50.0, None)
    assert g["expansion"]["paper"] == {"GPT-5.1": 17.9} and g["full"]["paper"] == {"across models": 7.7}
    cross = figs["figure5_models"]
    assert list(cross["backbones"]) == ["local"] and cross["backbones"]["local"]["limited"]["gain"] == 50.0
    assert "1 backbone(s) with runs on disk (local); the paper: 7 models" in cross["note"]
    assert (results / "auq-report" / "figure5-models.png").stat().st_size > 0
    # Figure 4's arms are ReAct and AUQ without expansion (the paper credits h=1 to the stored (ĉ, ê))
    assert [p["sr"] for p in figs["figure4"]["react"]] == [50.0, None, 0.0, None, None]
    assert [p["sr"] for p in figs["figure4"]["auq_dual-noexp"]] == [None, None, 0.0, None, None]
    assert "auq_dual" not in figs["figure4"]


def test_not_implemented_rows_and_paper_numbers(results):
    exp = copy.deepcopy(load_experiment("auq_main"))
    exp["rows"].append({"label": "Nope", "method": "no_such_method", "group": "x"})
    tables, recs = auq_tables.build_table2(RunIndex.scan(results, "auq"), exp, "local")
    row = next(r for r in tables[0].rows if r[0].text == "Nope")
    assert "not implemented" in row[1]
    dual = next(r for r in tables[0].rows if r[0].text.startswith("Dual"))
    assert dual[4] == "74.3" and dual[8] == "42.5"


def test_plan_covers_every_table_and_figure_run(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "nodata"))
    exp = load_experiment("auq_main")
    proto = auq_tables.resolve_protocol(exp, "local", None)
    assert proto["name"] == "embedded"
    t1 = auq_tables.plan_items(exp, "table1", "local", proto)
    assert len(t1) == 7 and all("benchmark=alfworld" in ov and "benchmark.split=valid_seen" in ov for _, ov in t1)
    f6 = auq_tables.plan_items(exp, "fig6", "local", proto)
    assert len(f6) == 8 and any("method.params.tau=0.95" in ov and "method.params.window=5" in ov
                                and "experiment=auq-tau0.95-h5" in ov for _, ov in f6)
    f5 = auq_tables.plan_items(exp, "fig5", "local", proto)
    assert any("method.name=auq_dual-noexp" in ov and "method.params.memory_expansion=false" in ov for _, ov in f5)
    f4 = auq_tables.plan_items(exp, "fig4", "local", proto)
    # 5 windows x 2 arms + Figure 5's two AUQ-with-expansion bars (h=5, full); its ReAct and no-expansion bars are
    # Figure 4's runs (the same overrides, one run)
    assert len(f4) == 10 + 2
    arm = [ov for _, ov in f4 if "method=auq_dual" in ov and "method.name=auq_dual-noexp" in ov]
    assert len(arm) == 5 and all("method.params.memory_expansion=false" in ov for ov in arm)
    assert sorted(next(o for o in ov if o.startswith("experiment=")) for _, ov in f4
                  if "method=auq_dual" in ov and "method.name=auq_dual-noexp" not in ov) == \
        ["experiment=auq-window-full", "experiment=auq-window-h5"]
    # Tables 1-2 / Figure 3 at the paper's h = 5 (settings.main), every row
    assert all("method.params.window=5" in ov for _, ov in t1)
    # every planned run composes with the real configs
    from agentic_repro.scripts.runs import compose

    for _, ov in t1[:1] + f6[-1:] + f5:
        cfg = compose(ov)
        assert cfg["experiment"].startswith("auq")


def test_builders_read_a_real_scripted_auq_run(tmp_path, monkeypatch):
    """Folders written by the real runner + AUQ on the scripted env: Figure 3's System-2 events are found."""
    import re

    from tests.conftest import make_spec, run
    from tests.doubles import ScriptedBackbone
    from tests.scripted_env import counter_bench_cfg, counter_data

    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "data"))
    counter_data(tmp_path / "data", goals=[1, 2])

    def script(messages, sampling):
        text = messages[-1]["content"]
        k = int(re.search(r"current observation is: counter at (-?\d+)", text).group(1))
        goal = int(re.search(r"counter to (-?\d+)", text).group(1))
        a = "inc" if k < goal else "stop"
        c = 0.95 if "reflect on it" in text else 0.5
        return f"<action>{a}</action><confidence>{c}</confidence><explanation>e</explanation>"

    spec = make_spec(tmp_path, {"name": "auq_dual", "solver": "agentic_repro.auq.method:AUQ",
                                "params": {"variant": "dual", "few_shot": 0, "tau": 0.85}})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(counter_bench_cfg(max_steps=5, process=False))
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    agg = RunIndex.scan(tmp_path / "results", "t").agg("counter", "auq_dual", "scripted")
    assert agg.complete and len(auq_tables.trajectories(agg)) == 2
    ev = auq_tables.system2_events(agg)
    assert len(ev) == 2 + 3 and all(e["c_init"] == 0.5 and e["c_final"] == 0.95 and e["success"] for e in ev)
    exp = copy.deepcopy(load_experiment("auq_main"))
    exp["benchmarks"] = ["counter"]
    exp["figures"]["fig3"]["benchmark"] = "counter"
    exp["experiment"] = "t"
    t1, recs = auq_tables.build_table1(RunIndex.scan(tmp_path / "results", "t"), exp, "scripted")
    dual = next(r for r in recs if r["method"] == "auq_dual")
    assert dual["status"] == "ok" and dual["last_t_ece"] == pytest.approx(0.05)   # C = 0.95, both won
    # the protocol line reads what the real runner recorded (config.yaml, meta.json, calls.jsonl)
    line = next(n for n in t1[0].notes if n.startswith("Protocol (recorded by the runs"))
    assert "backbone scripted-model ≠ paper GPT-4o" in line and "split test" in line and "n 2 of 2" in line
    assert "τ 0.85 = paper" in line and "window h not recorded ≠ paper 5" in line   # make_spec gives no window
    _, data = auq_tables.figure3(RunIndex.scan(tmp_path / "results", "t"), exp, "scripted", tmp_path / "out")
    assert data["auq_dual"]["success"] == 2 and data["system2"]["success"]["mean_delta"] == pytest.approx(0.45)


AUQ_PARAMS = {"variant": "dual", "memory_expansion": True, "n_paths": 3, "max_refinements": 3, "temperature": 0.7}


def test_protocol_lines_t_ece_conventions_and_the_webshop_tagger(tmp_path, monkeypatch):
    """Each table's and figure's protocol line is generated from what its runs recorded (config.yaml,
    predictions), against auq_main.yaml's paper settings for it; T-ECE shows the other bin convention where it
    differs (C on the 0.05 grid: 0.85 failed, 0.9 won: 0.475 left-closed, 0.375 right-closed); every WebShop cell
    scored without the original's spaCy tagger is footnoted with the measured disagreement."""
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path / "nodata"))
    root = tmp_path / "results"
    two = lambda **kw: [pred("p0", True, [0.9], **kw), pred("p1", False, [0.85], **kw)]
    write_run(root, "auq", "alfworld", "react", two(), params={"window": None})            # not the paper's h=5
    write_run(root, "auq", "alfworld", "auq_dual", two(), params={"window": 5, **AUQ_PARAMS})
    write_run(root, "auq", "webshop", "auq_dual", two(tagger="fallback:content-words-v1"),
              params={"window": 5, **AUQ_PARAMS})
    write_run(root, "auq-window-h1", "alfworld", "auq_dual-noexp", two(),
              params={"window": 1, **AUQ_PARAMS, "memory_expansion": False})
    write_run(root, "auq-window-h1", "alfworld", "react", two(), params={"window": 1})
    exp = load_experiment("auq_main")
    d = auq_tables.write_all(root, "local", exp)["data"]["local"]
    t1 = {(r["benchmark"], r["method"]): r for r in d["table1"]}
    dual = t1[("alfworld", "auq_dual")]
    assert dual["last_t_ece"] == pytest.approx(0.475) and dual["last_t_ece_other"] == pytest.approx(0.375)
    assert dual["t_ece_convention"] == "left_closed"
    md1 = (root / "auq-report" / "table1-local.md").read_text()
    assert "| 0.475 (right-closed 0.375) |" in md1 and "left-closed [m/M, (m+1)/M), the last closed at 1" in md1
    line = next(x for x in md1.splitlines() if "Protocol (recorded by the runs" in x and "ALFWorld:" in x)
    # the table's note holds what every row that ran shares; each row's own settings are on its ↳ protocol line
    assert "step cap 8 ≠ paper 50" in line and "backbone local ≠ paper GPT-4o" in line
    assert "window h" not in line and "τ 0.85" not in line and "on its ↳ protocol line" in line
    react_line, dual_line = t1[("alfworld", "react")]["protocol"], dual["protocol"]
    assert react_line == "window h full ≠ paper 5"
    assert dual_line.startswith("window h 5 = paper") and "τ 0.85 = paper" in dual_line \
        and "memory expansion on = paper" in dual_line and "step cap" not in dual_line
    rows1 = md1.split("ALFWorld): calibration")[1]
    assert "| ↳ protocol: window h full ≠ paper 5 |" in rows1.split("| ReAct")[1].split("\n")[1]
    assert f"| ↳ protocol: {dual_line} |" in rows1.split("| Dual-Process (AUQ)")[1].split("\n")[1]
    # the WebShop cells: footnoted with the tagger the runs recorded and the measured disagreement
    ws = t1[("webshop", "auq_dual")]
    assert "noun tagger fallback:content-words-v1 (recorded by the runs)" in ws["footnotes"] and "~20%" in ws["footnotes"]
    assert "not the original's" not in dual["footnotes"]
    md2 = (root / "auq-report" / "table2-local.md").read_text()
    assert "n=2<sup>" in md2.split("Dual-Process (AUQ)")[1].split("\n")[0]
    assert "noun tagger fallback:content-words-v1 ≠ the original's spacy:en_core_web_lg" in md2
    # Table 2: each row's line under its SR cells, per benchmark (WebShop: only Dual ran there: all in the note)
    under_dual = md2.split("| Dual-Process (AUQ)")[1].split("\n")[1]
    assert under_dual.startswith("| ↳ protocol | window h 5 = paper") and "| the note's settings |" in under_dual
    assert "| ↳ protocol | window h full ≠ paper 5 |  |  |  | not run |" in md2
    # the convention is the option: right-closed as the default flips which value is shown beside
    exp2 = copy.deepcopy(exp)
    exp2["t_ece"]["convention"] = "right_closed"
    t1b, recs = auq_tables.build_table1(RunIndex.scan(root, "auq"), exp2, "local")
    r = next(x for x in recs if x["method"] == "auq_dual" and x["benchmark"] == "alfworld")
    assert r["last_t_ece"] == pytest.approx(0.375) and r["last_t_ece_other"] == pytest.approx(0.475)
    assert "0.375 (left-closed 0.475)" in t1b[0].to_markdown()
    # Figure 4's line: its arms' runs, against the paper's Figure 4 settings (no expansion)
    f4 = d["figures"]["figure4"]["protocol"]
    assert "window h 1 (points of the paper's full/10/5/3/1)" in f4
    assert "memory expansion off = paper" in f4
    figmd = (root / "auq-report" / "figures-local.md").read_text()
    assert "**figure4**: Protocol (recorded by the runs, against the paper's fig4 settings" in figmd
