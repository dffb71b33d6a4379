"""agentic_repro.scripts.dyflow_tables on fixture run folders: Table 1 (values, intervals, best, Avg, the paper's rows and Δ,
incomplete cells never averaged, "—" with the reason), the cost tables from by_role and a search artifact,
pass@k curves, operator usage from traces, and the run plan (the trained adapter bound as the designer role)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_repro.scripts import dyflow_tables as dt
from tests.test_dyflow_train import make_run

BENCHES = ["socialmaze", "pubmedqa", "math_l5", "livebench", "humaneval_dyflow"]


def fake_run(root: Path, exp: str, bench: str, method: str, scores: list[float], *, backbone: str = "local",
             seed: int = 42, n_errors: int = 0, by_role: dict | None = None, pass_at_k: dict | None = None,
             calls: list[dict] | None = None) -> Path:
    d = root / exp / bench / method / backbone / f"seed={seed}"
    d.mkdir(parents=True, exist_ok=True)
    preds = [{"id": f"{bench}-{i}", "index": i, "status": "ok", "score": v} for i, v in enumerate(scores)]
    preds += [{"id": f"{bench}-e{i}", "index": len(scores) + i, "status": "error", "score": 0.0,
               "error": "BackboneError: timeout"} for i in range(n_errors)]
    if not (d / "predictions.jsonl").exists():
        (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    n = len(scores)
    m = {"score_pct": 100.0 * sum(scores) / n, "n": n, "n_errors": n_errors, "selected": n + n_errors,
         "complete": not n_errors, "by_role": by_role or {}, "totals": {"calls": n}}
    if pass_at_k:
        m["pass_at_k"] = pass_at_k
    (d / "metrics.json").write_text(json.dumps(m))
    if calls is not None:
        (d / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return d


def call(role: str, p: int, c: int, usd: float, hit: bool = False) -> dict:
    return {"role": role, "prompt_tokens": p, "completion_tokens": c, "cost_usd": usd, "cache_hit": hit,
            "latency_s": 0.0 if hit else 1.0, "error": None}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for i, b in enumerate(BENCHES):
        fake_run(root, "dyflow_table1", b, "io", [1.0, 0.0, 0.0, 0.0])                       # 25 %
        fake_run(root, "dyflow_table1", b, "cot", [1.0, 1.0, 0.0, 0.0],                        # 50 %
                 n_errors=1 if b == "livebench" else 0)
        # DyFlow: real traces (make_run) + metrics; 75 % everywhere
        d = make_run(root / "dyflow_table1", b, [1.0, 1.0, 1.0, 0.0],
                     plan=[["GENERATE_PLAN", "GENERATE_ANSWER"], ["REVIEW_SOLUTION"], ["ORGANIZE_SOLUTION"]]
                     if b == "livebench" else [["GENERATE_ANSWER"], ["ORGANIZE_SOLUTION"]])
        (d / "config.yaml").unlink()        # path-keyed like the fake runs (no config.yaml)
        fake_run(root, "dyflow_table1", b, "dyflow", [1.0, 1.0, 1.0, 0.0],
                 by_role={"designer": {"prompt_tokens": 1000, "completion_tokens": 200, "cost_usd": 0.01},
                          "executor": {"prompt_tokens": 3000, "completion_tokens": 900, "cost_usd": 0.02},
                          "summarizer": {"prompt_tokens": 500, "completion_tokens": 100, "cost_usd": 0.001}})
    fake_run(root, "dyflow_selfplay", "math_l5", "dyflow", [1.0, 0.0],      # by_role counts a replayed call too
             by_role={"designer": {"prompt_tokens": 777 + 300, "completion_tokens": 77 + 30, "cost_usd": 0.5 + 0.2}},
             calls=[call("designer", 700, 70, 0.4), call("designer", 77, 7, 0.1), call("executor", 5, 5, 0.0),
                    call("designer", 300, 30, 0.2, hit=True)])     # a resume's replay: paid once, never twice
    art = root / "search" / "math_l5" / "aflow" / "local" / "seed=42"
    art.mkdir(parents=True)
    (art / "artifact.json").write_text(json.dumps({"search_cost": {
        "optimizer": {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.2},
        "executor": {"prompt_tokens": 50, "completion_tokens": 5, "cost_usd": 0.1}}}))
    for b in BENCHES:
        fake_run(root, "dyflow_passk", b, "cot", [1.0, 0.0], pass_at_k={"1": 0.5, "2": 0.6, "3": 0.7})
        fake_run(root, "dyflow_passk", b, "dyflow", [1.0, 1.0], pass_at_k={"1": 0.6, "2": 0.8, "3": 0.9})
    return root


def rows_of(table) -> dict[str, list]:
    out = {}
    for r in table.rows:
        key = str(getattr(r[0], "text", r[0]))
        out.setdefault(key, r)
    return out


def txt(c) -> str:
    return str(getattr(c, "text", c))


def test_table1_values_paper_rows_incomplete_and_missing(results: Path, tmp_path: Path):
    res = dt.write_all(results, ["table1"], ["local"], tmp_path / "out")
    t = res["tables"]["table1"][0]
    rows = rows_of(t)
    assert txt(rows["Vanilla"][1]).startswith("25.0 [") and txt(rows["Vanilla"][1]).endswith("n=4")
    # n = 4 per cell: 75% against 50% and 25% is no significant difference (McNemar), so no bold; Avg is never marked
    assert not rows["DyFlow (Ours)"][1].bold and txt(rows["DyFlow (Ours)"][6]) == "75.0"
    assert isinstance(rows["DyFlow (Ours)"][6], str)
    assert txt(rows["CoT"][4]) == "incomplete 4/5, 1 error" and rows["CoT"][6] == "—"   # never averaged
    # the paper's row and Δ under DyFlow: 75.0 - 17.18 on SocialMaze
    i = t.rows.index(rows["DyFlow (Ours)"])
    assert t.rows[i + 1][0] == "↳ designer failures / fallback answers"       # the traces' counts, under the row
    assert t.rows[i + 2][1] == "17.18" and t.rows[i + 3][1] == "+57.8" and t.rows[i + 3][6] == "+13.5"   # 75 - 61.45
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "numbers on the embedded model (local), not comparable" in md
    assert "— Self-Refine: implemented, not run yet on this backbone" in md
    recs = list(__import__("csv").DictReader((tmp_path / "out" / "table1.csv").open()))
    dy = next(r for r in recs if r["row"] == "DyFlow (Ours)" and r["benchmark"] == "socialmaze")
    assert float(dy["mean"]) == 75.0 and float(dy["paper"]) == 17.18 and "metrics.json" in dy["sources"]


def test_cost_tables_from_by_role_and_artifacts(results: Path, tmp_path: Path):
    res = dt.write_all(results, ["table8"], ["local"], tmp_path / "out")
    rows = rows_of(res["tables"]["table8"][0])
    assert rows["DyFlow (D.)"][1:4] == ["777", "77", "0.50"]               # training = the self-play designer's
    assert any("DyFlow (D.) training: 1 calls replayed from the cache are not counted" in n   # fresh calls only
               for n in res["tables"]["table8"][0].notes)
    assert rows["DyFlow (D.)"][4:8] == ["1,000", "200", "0.0100", "75.0"]   # inference: the designer role only
    assert rows["DyFlow (E.)"][4:6] == ["3,000", "900"] and rows["DyFlow (E.)"][7] == "—"
    assert rows["DyFlow (S.)"][4:6] == ["500", "100"]                       # the summariser's cost is shown
    assert rows["AFlow"][1:4] == ["150", "15", "0.30"]                      # the search artifact's cost per role
    assert rows["DyFlow (D.)"][8] == "788,910 / 297,669 / 3.96"


def test_passk_curves_and_figures(results: Path, tmp_path: Path):
    res = dt.write_all(results, ["passk"], ["local"], tmp_path / "out")
    t = res["tables"]["passk"][0]
    avg = [r for r in t.rows if r[1] == "Avg"]
    assert [r[0] for r in avg] == ["CoT", "DyFlow"] and avg[1][2:] == ["60.0", "80.0", "90.0"]
    assert (tmp_path / "out" / "figures" / "fig3_passk_average-local.png").stat().st_size > 1000
    assert (tmp_path / "out" / "figures" / "fig7_passk_per_benchmark-local.png").is_file()


def test_operator_usage_from_traces(results: Path, tmp_path: Path):
    res = dt.write_all(results, ["operators"], ["local"], tmp_path / "out")
    rows = rows_of(res["tables"]["operators"][0])
    cols = res["tables"]["operators"][0].columns
    lb = cols.index("LiveBench")
    # LiveBench: 4 problems x (PLAN, ANSWER, REVIEW, ORGANIZE) = 16 instances, a quarter each
    assert rows["REVIEW_SOLUTION"][lb] == "25.0% (4)" and rows["GENERATE_ANSWER"][cols.index("MATH")] == "50.0% (4)"
    assert rows["REVIEW_SOLUTION"][cols.index("MATH")] == "0.0% (0)"
    assert (tmp_path / "out" / "figures" / "fig6_operator_usage-local.png").is_file()


def test_plan_binds_the_trained_designer_or_says_why_not(tmp_path: Path, monkeypatch):
    spec = dt.load_spec()
    size = spec["sizes"]["embedded"]
    items, skipped = dt.plan_items(spec, "table4", "local", size, {}, [])
    assert any("w/o KTO: needs the trained designer adapter 'dyplanner_sft'" in s and "make reproduce-dyflow-train" in s
               for s in skipped)
    # with the adapters on disk, the DyFlow rows declare them and bind dyplanner to the designer role
    ad = tmp_path / "adapters"
    for sub in ("kto", "sft", "kto_only"):
        (ad / sub).mkdir(parents=True)
        (ad / sub / "adapter.gguf").write_bytes(b"x")
    spec["adapters"]["dir"] = str(ad)
    items, skipped = dt.plan_items(spec, "table1", "local", size, {}, [])
    dy = [it for it in items if it.extra["method"] == "dyflow" and "experiment=dyflow_table1" in it.overrides]
    untrained = [it for it in items if it.extra["method"] == "dyflow" and "experiment=dyflow_table2-base" in it.overrides]
    assert untrained and not any("roles.designer" in o for it in untrained for o in it.overrides)
    assert dy and all(f"+backbone.adapters.dyplanner.path={ad / 'kto' / 'adapter.gguf'}" in it.overrides
                      and "roles.designer.adapter=dyplanner" in it.overrides and "limit=1" in it.overrides
                      for it in dy)
    assert {it.extra["benchmark"] for it in dy} == set(BENCHES) - {b for b in BENCHES if dt.bench_missing(b)}
    io = next(it for it in items if it.extra["method"] == "io")
    assert "limit=2" in io.overrides and not any("roles.designer" in o for o in io.overrides)
    ov, why = dt.row_needs(spec, {"label": "x", "method": "dyflow", "designer_backbone": "no-such-model"}, "local")
    assert ov == [] and "no configs/backbone/no-such-model.yaml" in why
    assert dt.row_needs(spec, {"label": "x", "method": "no_such_method"}, "local")[1].startswith("not implemented yet")


def test_selfplay_plan_runs_the_train_splits():
    spec = dt.load_spec()
    items, _ = dt.plan_items(spec, "selfplay", "local", spec["sizes"]["embedded"], {"methods": "dyflow"}, [])
    assert {it.extra["benchmark"] for it in items} <= {"math_l5", "pubmedqa", "livebench"} and items
    assert all("benchmark.split=train" in it.overrides and "limit=4" in it.overrides
               and "experiment=dyflow_selfplay" in it.overrides for it in items)
    b, _ = dt.plan_items(spec, "selfplay-B", "local", spec["sizes"]["embedded"], {"benchmarks": "socialmaze"}, [])
    assert [it.extra["benchmark"] for it in b] == ["socialmaze"] and "experiment=dyflow_selfplay-B" in b[0].overrides


def test_searched_rows_search_on_the_train_split_at_the_sizes_setting():
    spec = dt.load_spec()
    assert spec["searched"]["split"] == "train"
    for size_name in ("embedded", "paper"):
        size = spec["sizes"][size_name]
        items, skipped = dt.plan_items(spec, "table1", "local", size, {"methods": "adas,aflow,maas,cot"}, [])
        by = {}
        for it in items:
            by.setdefault(it.extra["method"], []).append(it)
        assert set(by) == {"adas", "aflow", "maas", "cot"} and not any("ADAS" in s for s in skipped)
        for m in ("adas", "aflow", "maas"):
            assert {it.extra["benchmark"] for it in by[m]} == set(BENCHES)
            assert all("method.search.split=train" in it.overrides for it in by[m])
            tiny = (size.get("method_overrides") or {}).get(m) or []
            assert all(all(o in it.overrides for o in tiny) for it in by[m])
        assert not any(o.startswith("method.search") for it in by["cot"] for o in it.overrides)
        if size_name == "embedded":
            ad = by["adas"][0].overrides
            assert "method.search.params.initial_archive=[Chain-of-Thought]" in ad and "limit=1" in ad
        else:
            assert not any(o.startswith("method.search.params") for it in items for o in it.overrides)
    # the overrides compose, and the composed search config is what the search and the artifact record
    from agentic_repro.scripts.runs import compose

    it = next(i for i in dt.plan_items(spec, "table1", "local", spec["sizes"]["embedded"],
                                       {"methods": "adas", "benchmarks": "pubmedqa"}, [])[0])
    search = compose(it.overrides)["method"]["search"]
    assert search["split"] == "train" and search["params"]["initial_archive"] == ["Chain-of-Thought"]
    assert search["params"]["generations"] == 1 and search["params"]["meta_max_tokens"] == 320


def test_searched_rows_footnote_the_split_and_reduced_setting_their_runs_recorded(results: Path, tmp_path: Path):
    import yaml

    for b in BENCHES[:2]:
        d = fake_run(results, "dyflow_table1", b, "adas", [1.0, 0.0])
        method = dt.method_config("adas")
        method["search"]["split"] = "train"
        method["search"]["params"].update(generations=1, initial_archive=["Chain-of-Thought"])
        (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "benchmark": {"name": b},
                                                       "backbone": {"name": "local"}, "seed": 42}))
    res = dt.write_all(results, ["table1"], ["local"], tmp_path / "out")
    md = (tmp_path / "out" / "table1.md").read_text()
    assert ("search on the train split at a reduced setting: generations=1 (config: 30), "
            'initial_archive=["Chain-of-Thought"] (config: null)') in md
    assert "searched on DyFlow's train split" in md                     # the row's own deviation (it has runs)
    rows = rows_of(res["tables"]["table1"][0])
    assert rows["ADAS"][0].sup and not getattr(rows["AFlow"][0], "sup", None)   # AFlow has no runs: no marks


def test_designer_failures_and_fallback_answers_are_shown_under_the_dyflow_row(tmp_path: Path):
    """Invalid designs, stages given up and fallback answers (a review text scored as the answer) of DyFlow's
    answered problems, summed from the traces, under the row (and in the CSV)."""
    root = tmp_path / "results"
    for b in BENCHES:
        fake_run(root, "dyflow_table1", b, "dyflow", [1.0, 0.0])
    d = root / "dyflow_table1" / "math_l5" / "dyflow" / "local" / "seed=42"
    failed = {"status": "design_failed", "stage": None, "attempts": [{"status": "invalid"}, {"status": "invalid"}]}
    ok = {"status": "executed", "stage": {}, "attempts": [{"status": "invalid"}, {"status": "valid"}]}
    preds = [{"id": "m0", "index": 0, "status": "ok", "score": 1.0,      # a trace written before trace.counts
              "trace": {"stages": [failed, ok], "answer_from": "last_any_output", "answer_template": "REVIEW_SOLUTION"}},
             {"id": "m1", "index": 1, "status": "ok", "score": 0.0,
              "trace": {"stages": [ok], "answer_from": "terminal",
                        "counts": {"invalid_designs": 1, "stages_given_up": 0, "fallback_answers": 0,
                                   "review_answers": 0}}}]
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    res = dt.write_all(root, ["table1"], ["local"], tmp_path / "out")
    t = res["tables"]["table1"][0]
    i = next(k for k, r in enumerate(t.rows) if txt(r[0]) == "DyFlow (Ours)")
    under = t.rows[i + 1]
    assert under[0] == "↳ designer failures / fallback answers"
    math = t.columns.index("MATH")
    assert under[math] == "4 invalid designs, 1 stages given up, 1 fallback answers (1 a review)"
    assert under[t.columns.index("PubMedQA")] == "0 invalid designs, 0 stages given up, 0 fallback answers (0 a review)"
    assert any("a REVIEW_SOLUTION text scored as the answer" in n for n in t.notes)
    recs = list(__import__("csv").DictReader((tmp_path / "out" / "table1.csv").open()))
    r = next(r for r in recs if r["row"] == "DyFlow (Ours)" and r["benchmark"] == "math_l5")
    assert (r["invalid_designs"], r["stages_given_up"], r["fallback_answers"], r["review_answers"]) == ("4", "1", "1", "1")


# ---- the measurement protocol (issue 21) -------------------------------------------------------------------------
def _by(items) -> dict[tuple[str, str], list[str]]:
    return {(it.extra["method"], it.extra["benchmark"]): it.overrides for it in items}


def test_paper_protocol_scores_humaneval_on_all_164_and_pubmedqa_by_the_release_rule():
    from agentic_repro.evaluators.base import build_benchmark
    from agentic_repro.scripts.runs import compose

    spec = dt.load_spec()
    assert spec["protocol"] == "paper"
    size = spec["sizes"]["embedded"]
    by = _by(dt.plan_items(spec, "table1", "local", size, {"methods": "cot,io,aflow"}, [])[0])
    assert "benchmark.split=full" in by[("cot", "humaneval_dyflow")] and "benchmark.split=full" in by[("io", "humaneval_dyflow")]
    assert not any(o.startswith("benchmark.split") for o in by[("aflow", "humaneval_dyflow")])   # searched on train
    assert "benchmark.extraction=dyflow_release" in by[("cot", "pubmedqa")]
    assert not any(o.startswith("benchmark.split") for o in by[("cot", "math_l5")])
    cfg = compose(by[("cot", "humaneval_dyflow")])["benchmark"]
    cfg["limit"] = None
    assert cfg["split"] == "full" and len(build_benchmark(cfg).load()[0]) == 164
    assert "experiment=dyflow_table1" in by[("cot", "humaneval_dyflow")]
    # self-play learns from the train part: never the whole file
    sp = dt.plan_items(spec, "selfplay-B", "local", size, {"benchmarks": "humaneval_dyflow"}, [])[0]
    assert sp and all("benchmark.split=full" not in it.overrides for it in sp)
    # a designer trained on HumanEval (split B) keeps the 109-problem test part
    prot = spec["protocols"]["paper"]
    assert dt.protocol_overrides(prot, "dyflow", "humaneval_dyflow", trained_on=["humaneval_dyflow"]) == []
    assert dt.protocol_overrides(prot, "dyflow", "humaneval_dyflow", trained_on=["math_l5"]) == ["benchmark.split=full"]


def test_ours_protocol_is_a_named_option_in_its_own_experiments(results: Path, tmp_path: Path):
    spec = dt.load_spec()
    by = _by(dt.plan_items(spec, "table1", "local", spec["sizes"]["embedded"],
                           {"methods": "cot", "protocol": "ours"}, [])[0])
    assert "experiment=dyflow_table1-ours" in by[("cot", "pubmedqa")]
    assert "benchmark.extraction=last_label" in by[("cot", "pubmedqa")]
    assert not any(o.startswith("benchmark.split") for o in by[("cot", "humaneval_dyflow")])
    with pytest.raises(SystemExit, match="protocol='x'"):
        dt.protocol_of(spec, "x")
    # rendering under protocol=ours reads the -ours experiments only (the fixture has none: every row "—")
    res = dt.write_all(results, ["table1"], ["local"], tmp_path / "ours", protocol="ours")
    assert all(r[1] == "—" for r in res["tables"]["table1"][0].rows if isinstance(r[0], str) and not r[0].startswith("↳"))


def test_protocol_line_comes_from_what_the_runs_recorded(tmp_path: Path):
    import yaml

    root = tmp_path / "results"
    for m, split in (("cot", "full"), ("aflow", "test")):
        d = fake_run(root, "dyflow_table1", "humaneval_dyflow", m, [1.0, 0.0])
        (d / "config.yaml").write_text(yaml.safe_dump({"benchmark": {"name": "humaneval_dyflow", "split": split,
                                                                     "limit": 2}, "method": {"name": m},
                                                   "backbone": {"name": "local"}, "seed": 42}))
    d = fake_run(root, "dyflow_table1", "pubmedqa", "cot", [1.0])
    (d / "config.yaml").write_text(yaml.safe_dump({"benchmark": {"name": "pubmedqa", "split": "test", "limit": None,
                                                                 "extraction": "dyflow_release"},
                                               "method": {"name": "cot"}, "backbone": {"name": "local"}, "seed": 42}))
    t = dt.write_all(root, ["table1"], ["local"], tmp_path / "out")["tables"]["table1"][0]
    line = next(n for n in t.notes if n.startswith("Protocol (recorded by the runs)"))
    assert "PubMedQA: split test, extraction dyflow_release, every problem" in line
    assert "HumanEval: split full, limit 2 (CoT); split test, limit 2 (AFlow)" in line
    (d / "meta.json").write_text(json.dumps({"data": {"split": "test", "total": 251, "selected": 1}}))   # PubMedQA
    t = dt.write_all(root, ["table1"], ["local"], tmp_path / "out2")["tables"]["table1"][0]
    assert "PubMedQA: split test, extraction dyflow_release, 1 of 251 problems" in \
        next(n for n in t.notes if n.startswith("Protocol (recorded by the runs)"))


def test_table9_compares_designer_with_designer(results: Path, tmp_path: Path):
    """The paper's Table 9 columns are the designer's (its MATH GPT-4.1 row is Table 8's DyFlow (D.) training row):
    ours beside them are the designer role's, never the all-roles totals."""
    spec = dt.load_spec()
    assert spec["table9"]["reference"]["math_l5"]["GPT-4.1"] == spec["table8"]["reference"]["DyFlow (D.)"]["training"]
    assert spec["table9"]["reference"]["math_l5"]["DyPlanner"] == spec["table8"]["reference"]["DyFlow (D.)"]["inference"]
    t = dt.write_all(results, ["table9"], ["local"], tmp_path / "out")["tables"]["table9"][0]
    row = next(r for r in t.rows if r[0] == "MATH" and r[1] == "DyPlanner")
    assert row[2:6] == ["1,000", "200", "0.0100", "773,625 / 225,737 / 0.0900"]   # designer vs the paper's designer
    assert row[6:9] == ["3,000 / 900", "500 / 100", "4,500 / 1,200 / 0.0310"]     # other roles and the whole run beside
    assert t.columns[2] == "Designer input tokens" and "Designer with designer" in t.notes[0]


def test_paper_protocol_binds_the_judge_on_the_judged_benchmarks_and_the_summariser_off_embedded():
    spec = dt.load_spec()
    size = spec["sizes"]["embedded"]
    by = _by(dt.plan_items(spec, "table1", "local", size, {"methods": "cot,dyflow"}, [])[0])
    for b in ("socialmaze", "math_l5", "livebench"):
        assert "backbone@roles.judge=local" in by[("cot", b)]           # embedded: the embedded model judges
    assert not any("roles.judge" in o for o in by[("cot", "pubmedqa")] + by[("cot", "humaneval_dyflow")])
    assert not any("roles.summarizer" in o for o in by[("dyflow", "math_l5")])   # embedded: the run's own model
    items, skipped = dt.plan_items(spec, "table1", "vllm", spec["sizes"]["paper"], {"methods": "cot,dyflow"}, [])
    api = _by(items)
    assert "backbone@roles.summarizer=gpt-4o-mini" in api[("dyflow", "pubmedqa")]   # the paper's f_summary model
    assert not any("roles.summarizer" in o for o in api[("cot", "pubmedqa")])      # CoT has no summariser role
    if not (dt.CONFIGS / "backbone" / "gpt-4.1-mini.yaml").exists():   # the paper's judge, when configured
        assert any("judge gpt-4.1-mini: no configs/backbone/gpt-4.1-mini.yaml" in s for s in skipped)
    ours = _by(dt.plan_items(spec, "table1", "local", size, {"methods": "cot", "protocol": "ours"}, [])[0])
    assert not any("roles.judge" in o for ov in ours.values() for o in ov)


def test_judge_scored_cells_show_the_judge_with_the_rule_based_score_beside(tmp_path: Path):
    import yaml

    root = tmp_path / "results"
    d = fake_run(root, "dyflow_table1", "math_l5", "cot", [1.0, 0.0, 0.0, 0.0])       # rule: 25 %
    preds = [json.loads(x) for x in (d / "predictions.jsonl").read_text().splitlines()]
    for p, verdict in zip(preds, (1.0, 1.0, 1.0, 0.0)):                                 # judge: 75 %
        p["judge"] = {"score": verdict, "verdict": "true" if verdict else "false"}
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (d / "config.yaml").write_text(yaml.safe_dump({
        "benchmark": {"name": "math_l5", "split": "test", "limit": 4, "judge": {"enabled": True}},
        "method": {"name": "cot"}, "backbone": {"name": "local"}, "roles": {"judge": {"name": "local"}}, "seed": 42}))
    d2 = fake_run(root, "dyflow_table1", "livebench", "cot", [1.0, 0.0])              # not judged: rule headline
    (d2 / "config.yaml").write_text(yaml.safe_dump({
        "benchmark": {"name": "livebench", "split": "test", "limit": 2, "judge": {"enabled": True}},
        "method": {"name": "cot"}, "backbone": {"name": "local"}, "seed": 42}))
    res = dt.write_all(root, ["table1"], ["local"], tmp_path / "out")
    t = res["tables"]["table1"][0]
    i = next(k for k, r in enumerate(t.rows) if txt(r[0]) == "CoT")
    assert txt(t.rows[i][3]).startswith("75.0 [")                                    # the judge's score is the cell
    assert t.rows[i + 1][0] == "↳ rule-based score" and t.rows[i + 1][3].startswith("25.0 [")
    assert txt(t.rows[i][4]).startswith("50.0 [") and t.rows[i + 1][4] == ""         # LiveBench: rule, no judge ran
    line = next(n for n in t.notes if n.startswith("Protocol (recorded by the runs)"))
    assert "MATH: split test, limit 4, headline = LLM judge local (the paper: gpt-4.1-mini)" in line
    assert "LiveBench: split test, limit 2, headline = rule-based (no judge ran" in line
    recs = list(__import__("csv").DictReader((tmp_path / "out" / "table1.csv").open()))
    m = next(r for r in recs if r["row"] == "CoT" and r["benchmark"] == "math_l5")
    assert m["scorer"] == "judge" and float(m["mean"]) == 75.0 and float(m["rule_mean"]) == 25.0
    t3 = dt.write_all(root, ["table3"], ["local"], tmp_path / "out3")["tables"]["table3"][0]
    mr = next(r for r in t3.rows if r[0] == "MR (MATH)")
    assert mr[2].startswith("75.0 [")                                                # Table 3's CoT: the judge too
    assert any("rule-based score in the CSV (rule_mean)" in n for n in t3.notes)


def test_a_judge_cell_with_an_unparsed_verdict_says_so_not_the_dash_of_not_run(tmp_path: Path):
    """Issue 29 item 8: one answer the judge gave no verdict on left the cell without a number, printed "—", exactly
    as a cell that was not run."""
    import yaml

    root = tmp_path / "results"
    d = fake_run(root, "dyflow_table1", "math_l5", "cot", [1.0, 0.0, 0.0, 0.0])
    preds = [json.loads(x) for x in (d / "predictions.jsonl").read_text().splitlines()]
    for p, verdict in zip(preds, (1.0, None, 1.0, 0.0)):                      # the second reply had no [[verdict]]
        p["judge"] = {"score": verdict, "verdict": "unparsed" if verdict is None else "true" if verdict else "false"}
    (d / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (d / "config.yaml").write_text(yaml.safe_dump({
        "benchmark": {"name": "math_l5", "split": "test", "limit": 4, "judge": {"enabled": True}},
        "method": {"name": "cot"}, "backbone": {"name": "local"}, "roles": {"judge": {"name": "local"}}, "seed": 42}))
    t = dt.write_all(root, ["table1"], ["local"], tmp_path / "out")["tables"]["table1"][0]
    i = next(k for k, r in enumerate(t.rows) if txt(r[0]) == "CoT")
    assert txt(t.rows[i][3]) == "judge: no verdict on 1/4 answers (not averaged)"
    assert txt(t.rows[i][4]) == "—"                                            # LiveBench: not run, still "—"
    recs = list(__import__("csv").DictReader((tmp_path / "out" / "table1.csv").open()))
    assert next(r for r in recs if r["row"] == "CoT" and r["benchmark"] == "math_l5")["status"] == "judge_unparsed"


def test_best_and_second_marks_need_a_significant_paired_test(tmp_path: Path):
    """Issue 21: a column of n = 2 cells (100% against 0%: exact McNemar p = 0.5) gets no bold winner; a clearly
    separated pair at n = 20 (CoT right on all, Vanilla on 4: p = 2/2^16) is bold, and the legend names the test."""
    root = tmp_path / "results"
    fake_run(root, "dyflow_table1", "math_l5", "io", [0.0, 0.0])
    fake_run(root, "dyflow_table1", "math_l5", "cot", [1.0, 1.0])
    rows = rows_of(dt.write_all(root, ["table1"], ["local"], tmp_path / "out")["tables"]["table1"][0])
    col = 1 + BENCHES.index("math_l5")
    assert not any(rows[r][col].bold or rows[r][col].underline for r in ("Vanilla", "CoT"))
    root2 = tmp_path / "results2"
    fake_run(root2, "dyflow_table1", "math_l5", "io", [0.0] * 16 + [1.0] * 4)
    fake_run(root2, "dyflow_table1", "math_l5", "cot", [1.0] * 20)
    t = dt.write_all(root2, ["table1"], ["local"], tmp_path / "out2")["tables"]["table1"][0]
    rows = rows_of(t)
    assert rows["CoT"][col].bold and not rows["Vanilla"][col].bold and not rows["Vanilla"][col].underline
    assert any("exact McNemar" in n and "dyflow_tables.yaml" in n for n in t.notes)


def test_humaneval_cells_footnote_the_release_code_rewrite_when_it_was_off(tmp_path: Path):
    """Issue 21: every DyFlow HumanEval cell whose runs recorded code_postprocess other than the release's rewrite
    carries a generated footnote saying so (Tables 1 and 3); a run with it on, a CoT cell and a non-code DyFlow
    cell carry none."""
    import yaml

    def dy(root: Path, bench: str, post: str | None, exp: str = "dyflow_table1") -> None:
        d = fake_run(root, exp, bench, "dyflow", [1.0, 0.0])
        params = {} if post is None else {"code_postprocess": post}
        (d / "config.yaml").write_text(yaml.safe_dump({"benchmark": {"name": bench, "split": "test"},
                                                       "method": {"name": "dyflow", "params": params},
                                                       "backbone": {"name": "local"}, "seed": 42}))

    root = tmp_path / "results"
    dy(root, "humaneval_dyflow", None)          # the recorded params omit it: DyFlow's default (none)
    dy(root, "math_l5", None)
    fake_run(root, "dyflow_table1", "humaneval_dyflow", "cot", [1.0, 0.0])
    t = dt.write_all(root, ["table1"], ["local"], tmp_path / "out")["tables"]["table1"][0]
    rows = rows_of(t)
    he, ma = 1 + BENCHES.index("humaneval_dyflow"), 1 + BENCHES.index("math_l5")
    mark = rows["DyFlow (Ours)"][he].sup
    assert mark and not rows["DyFlow (Ours)"][ma].sup and not rows["CoT"][he].sup
    note = next(n for n in t.notes if n.startswith(f"{mark}. HumanEval: the release's final-code rewrite"))
    assert "code_postprocess=none recorded by the runs" in note
    assert f"<sup>{mark}</sup>" in (tmp_path / "out" / "table1.md").read_text()
    spec = dt.load_spec()
    ex = next(r["experiment"] for r in spec["table3"]["rows"] if r["test"] == "humaneval_dyflow")
    dy(root, "humaneval_dyflow", "none", ex)
    t3 = dt.write_all(root, ["table3"], ["local"], tmp_path / "out3")["tables"]["table3"][0]
    r3 = next(r for r in t3.rows if r[0].startswith(spec["domains"]["humaneval_dyflow"] + " "))
    assert r3[3].sup and any("final-code rewrite" in n for n in t3.notes)
    dy(root, "humaneval_dyflow", None, "dyflow_table10")         # Table 10: the embedded executor's DyFlow row
    t10 = dt.write_all(root, ["table10"], ["local"], tmp_path / "out10")["tables"]["table10"][0]
    r10 = next(r for r in t10.rows if r[0] == "Qwen2.5-Coder-0.5B (embedded) (DyFlow)")
    assert r10[he].sup and any("final-code rewrite" in n for n in t10.notes)
    root2 = tmp_path / "results2"
    dy(root2, "humaneval_dyflow", "release")    # the rewrite on: no footnote
    t2 = dt.write_all(root2, ["table1"], ["local"], tmp_path / "out2")["tables"]["table1"][0]
    assert not rows_of(t2)["DyFlow (Ours)"][he].sup and not any("final-code rewrite" in n for n in t2.notes)


def test_each_paper_row_has_a_protocol_line_from_its_runs(tmp_path: Path, monkeypatch):
    """Item 10 (issue 29): under each "↳ paper" row of DyFlow's Table 1 a "↳ protocol" line generated from what the
    row's runs recorded against the paper's (Phi-4 executor, temperature 0.01, HumanEval on all 164): Vanilla on the
    whole file, AFlow (a searched row: its test run from CoT's solver here) on the test split, which says it holds
    out the search's part and is n of the paper's 164."""
    from tests.test_tables import _echo_data, _echo_run

    _echo_data(tmp_path / "data", monkeypatch, "humaneval_dyflow", 16,
               splits={"full": range(16), "test": range(4, 16)})
    splits = {"splits": {"full": "humaneval_dyflow/full.jsonl", "test": "humaneval_dyflow/test.jsonl"}, "metric": "pass@1"}
    _echo_run(tmp_path, "humaneval_dyflow", "io", lambda i: i % 2 == 0, experiment="dyflow_table1", backbone="local",
              bench_extra={**splits, "split": "full"})
    _echo_run(tmp_path, "humaneval_dyflow", "cot", lambda i: i % 3 == 0, experiment="dyflow_table1", backbone="local",
              bench_extra=splits, method_extra={"name": "aflow", "search": {"split": "train", "params": {}}})
    res = dt.write_all(tmp_path / "results", ["table1"], ["local"], tmp_path / "out")
    rows = res["tables"]["table1"][0].rows
    labels = [str(getattr(r[0], "text", r[0])) for r in rows]
    for name, n, split in (("Vanilla", 16, "full"), ("AFlow", 12, "test")):
        i = labels.index(name)
        assert labels[i + 1:i + 3] == ["↳ paper", "↳ Δ (ours − paper)"]
        proto = rows[i + 3]
        assert proto[0].startswith("↳ protocol: backbone local-model ≠ paper phi-4; T 0 ≠ paper 0.01")
        he = proto[5]
        assert f"split {split} n={n} of {n} vs paper full (all 164): {n} of the paper's 164 problems" in he
        assert "metric=pass@1" in he and "(paper: pass@1, check(entry_point), no judge)" in he
        assert ("a searched row runs the test split only: its train part is held out for the search" in he) == \
            (name == "AFlow")
    assert labels[labels.index("DyFlow (Ours)") + 3].startswith("↳ protocol: not run; paper backbone phi-4; designer")
    import csv

    recs = [r for r in csv.DictReader(open(tmp_path / "out" / "table1.csv"))
            if r["row"] == "AFlow" and r["benchmark"] == "humaneval_dyflow"]
    assert recs[0]["protocol"].startswith("scorer metric=pass@1") and recs[0]["row_protocol"].startswith("↳ protocol")
