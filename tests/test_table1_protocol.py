"""Table 1's ↳ protocol lines come from what the runs recorded (issue 21), a cell measured by another scorer or on
other problems withholds its Δ, and best/second marks need a significant paired test."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.test_reporting import _fake_metrics

FIXTURE = Path(__file__).parent / "fixtures" / "results" / "table1"


def _as_method(root: Path, bench: str, method: str, edit=None) -> Path:
    """The recorded embedded IO run of ``bench`` (config.yaml, meta.json, calls.jsonl, predictions) filed as
    ``method``'s run, with ``edit`` applied to its config.yaml."""
    d = root / "table1" / bench / method / "local" / "seed=42"
    shutil.copytree(FIXTURE / bench / "io" / "local" / "seed=42", d)
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["method"]["name"] = method
    cfg["method"].pop("label", None)        # the row label is then the paper's (table1.yaml)
    if edit:
        edit(cfg)
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    return d


def _row(t, label):
    i = next(i for i, r in enumerate(t.rows) if str(getattr(r[0], "text", r[0])) == label)
    return i, t.rows[i]


def test_protocol_line_is_generated_from_the_recorded_runs(tmp_path):
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    gsm = _as_method(root, "gsm8k", "denoiseflow")
    _as_method(root, "math", "denoiseflow")
    t, recs = table1.build(root, "local")
    i, _ = _row(t, "DenoiseFlow")
    paper, delta, proto = t.rows[i + 1], t.rows[i + 2], t.rows[i + 3]
    assert paper[0] == "↳ paper" and delta[0] == "↳ Δ (ours − paper)"
    g_cfg = yaml.safe_load((gsm / "config.yaml").read_text())
    g_meta = json.loads((gsm / "meta.json").read_text())["data"]
    # row-wide: the backbone the calls named, their temperature, the max tokens the run's sampling had
    assert proto[0] == (f"↳ protocol: backbone {g_cfg['backbone']['model']} ≠ paper gpt-4o-mini-2024-07-18; "
                             "T 0 ≠ paper 0/0.7; max tokens 512/1024 ≠ paper 4096")   # GSM8K's and MATH's
    assert g_cfg["backbone"]["sampling"]["max_tokens"] == 512
    # GSM8K: the paper's last-number rule on AFlow's test split (a subset of the paper's 1,319): Δ kept
    assert proto[1] == (f"scorer metric=accuracy, extract={g_cfg['benchmark']['extract']} (paper: last number of the "
                        f"output (A.4), no judge); split {g_meta['split']} n={g_meta['selected']} of {g_meta['total']} "
                        "vs paper test split, 1,319 problems (A.1): 2 of the paper's 1319 problems (0.2%); "
                        "seeds 42 ≠ paper 42/123/456")
    ours = next(r for r in recs if r["row"] == "DenoiseFlow" and r["benchmark"] == "gsm8k")
    assert delta[1] == f"−{93.9 - ours['mean']:.1f}" and ours["diff"] == pytest.approx(ours["mean"] - 93.9)
    # MATH: math-verify on AFlow's Level-5 split, neither the paper's sympy rule nor its problems: no Δ
    assert "equivalence=math_verify ≠ paper aflow" in proto[2] and "(other problems than the paper's)" in proto[2]
    assert delta[2] == "≠ measure (scorer equivalence, split)"
    m = next(r for r in recs if r["row"] == "DenoiseFlow" and r["benchmark"] == "math")
    assert m["diff"] is None and m["diff_withheld"] == "scorer equivalence, split" and m["protocol"] == proto[2]


def test_protocol_line_follows_a_changed_config(tmp_path):
    """Another extraction rule recorded in config.yaml: the line names it and the Δ is withheld; MATH on MATH-500 by
    the paper's sympy rule measures what the paper did and keeps its Δ."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"

    def flexible(cfg):
        cfg["benchmark"]["extract"] = "flexible"

    def paper_math(cfg):
        cfg["benchmark"]["equivalence"] = "aflow"

    _as_method(root, "gsm8k", "denoiseflow", flexible)
    d = _as_method(root, "math", "denoiseflow", paper_math)
    meta = json.loads((d / "meta.json").read_text())
    meta["data"].update({"split": "math500", "total": 500})
    (d / "meta.json").write_text(json.dumps(meta))
    res = table1.write_all(root, backbones=["local"])
    t = res["tables"][0]
    i, _ = _row(t, "DenoiseFlow")
    delta, proto = t.rows[i + 2], t.rows[i + 3]
    assert "extract=flexible ≠ paper protocol" in proto[1] and delta[1] == "≠ measure (scorer extract)"
    assert "equivalence=aflow," not in proto[2] and "split math500 n=2 of 500" in proto[2]
    assert "other problems" not in proto[2] and delta[2].startswith("−")
    rows = {r["benchmark"]: r for r in csv.DictReader(open(root / "table1" / "table1.csv")) if r["row"] == "DenoiseFlow"}
    assert rows["gsm8k"]["diff"] == "" and rows["gsm8k"]["diff_withheld"] == "scorer extract"
    assert rows["math"]["diff"] != "" and rows["math"]["protocol"] == proto[2]
    assert rows["gsm8k"]["row_protocol"] == proto[0]
    tex = (root / "table1" / "table1.tex").read_text()   # the protocol line in LaTeX: ≠ typeset, not raw Unicode
    assert "extract=flexible $\\neq$ paper protocol" in tex and "≠" not in tex


def test_marks_vanish_when_not_significant(tmp_path):
    """n = 2: 100% against 0% on both problems is p = 0.5 by exact McNemar: no bold, no underline."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    _fake_metrics(root, "gsm8k", "cot", 42, 100.0, n=2, scores=[1.0, 1.0])
    _fake_metrics(root, "gsm8k", "io", 42, 0.0, n=2, scores=[0.0, 0.0])
    _fake_metrics(root, "gsm8k", "cot_sc", 42, 50.0, n=2, scores=[1.0, 0.0])
    t, _ = table1.build(root, "local")
    for label in ("IO", "CoT", "CoT-SC"):
        cell = _row(t, label)[1][1]
        assert not cell.bold and not cell.underline, label
    assert any("exact McNemar" in n for n in t.notes)


def test_marks_appear_when_significant(tmp_path):
    """n = 20: CoT right on every problem, CoT-SC wrong on 8 of them, IO wrong on 16: every pair is significant
    (McNemar p = 2/2^8, 2/2^16, 2/2^8), so CoT is bold and CoT-SC underlined; IO beside an equal CoT-SC is not."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    _fake_metrics(root, "gsm8k", "cot", 42, 100.0, n=20, scores=[1.0] * 20)
    _fake_metrics(root, "gsm8k", "cot_sc", 42, 60.0, n=20, scores=[0.0] * 8 + [1.0] * 12)
    _fake_metrics(root, "gsm8k", "io", 42, 20.0, n=20, scores=[0.0] * 16 + [1.0] * 4)
    t, _ = table1.build(root, "local")
    assert _row(t, "CoT")[1][1].bold and not _row(t, "CoT")[1][1].underline
    assert _row(t, "CoT-SC")[1][1].underline and not _row(t, "CoT-SC")[1][1].bold
    assert not _row(t, "IO")[1][1].bold and not _row(t, "IO")[1][1].underline
    # the second is not underlined when it does not beat the one below it: CoT-SC and IO differ on 4 problems only
    # in opposite directions (2 each way)
    shutil.rmtree(root)
    _fake_metrics(root, "gsm8k", "cot", 42, 100.0, n=20, scores=[1.0] * 20)
    _fake_metrics(root, "gsm8k", "cot_sc", 42, 50.0, n=20, scores=[0.0] * 10 + [1.0] * 10)
    _fake_metrics(root, "gsm8k", "io", 42, 45.0, n=20, scores=[1.0] * 2 + [0.0] * 11 + [1.0] * 7)
    t, _ = table1.build(root, "local")
    assert _row(t, "CoT")[1][1].bold and not _row(t, "CoT-SC")[1][1].underline


def test_paired_test_hand_checked():
    from agentic_repro.scripts.stats import paired_test

    a = {str(i): 100.0 for i in range(20)}
    b = {str(i): (0.0 if i < 8 else 100.0) for i in range(20)}
    r = paired_test(a, b)   # 8 discordant pairs, all one way: 2 * 0.5^8
    assert (r.method, r.n_shared, r.n_differ, r.p) == ("mcnemar", 20, 8, pytest.approx(2 / 2 ** 8))
    assert paired_test(a, {"x": 0.0}).p == 1.0                     # nothing shared: nothing significant
    f1 = paired_test({str(i): 60.0 for i in range(10)}, {str(i): 50.0 + (i % 2) for i in range(10)})
    assert f1.method == "wilcoxon" and f1.p < 0.01                  # F1 differences, all one way over 10 problems


def test_a_run_that_recorded_no_config_has_its_delta_withheld(tmp_path):
    """A folder without config.yaml / meta.json cannot show it measured what the paper did: the line says "not
    recorded" and the Δ is withheld rather than printed as if like for like."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    _fake_metrics(root, "drop", "denoiseflow", 42, 80.0, n=4, scores=[0.8] * 4)
    t, recs = table1.build(root, "local")
    i, _ = _row(t, "DenoiseFlow")
    delta, proto = t.rows[i + 2], t.rows[i + 3]
    drop = 1 + table1.load_experiment("table1")["benchmarks"].index("drop")
    assert "metric=not recorded ≠ paper f1" in proto[drop] and "split not recorded n=4" in proto[drop]
    assert delta[drop] == "≠ measure (scorer metric not recorded, scorer f1_mode not recorded, split)"
    assert proto[0] == ("↳ protocol: backbone not recorded ≠ paper gpt-4o-mini-2024-07-18; T not recorded ≠ paper "
                        "0/0.7; max tokens not recorded ≠ paper 4096")


def test_paper_size_scores_math_as_the_paper_and_the_embedded_default_keeps_math_verify():
    """Issue 21: at the paper size Table 1's MATH cell runs MATH-500 by AFlow's checker (DenoiseFlow A.1, A.4) for
    every row; the searched rows search MATH on MATH train, which shares no problem with MATH-500 (AFlow's validate
    split shares some, under other ids); the embedded sizes keep math-verify on AFlow's split."""
    from agentic_repro.scripts.reproduce_table1 import build_plan
    from agentic_repro.scripts.runs import load_experiment, method_config

    exp = load_experiment("table1")
    items, info = build_plan(exp, {"backbone": "gpt-4o-mini", "size": "paper"}, [])
    math = [it for it in items if it.extra["benchmark"] == "math"]
    assert info["protocol"] == "paper" and math
    searched = {r["method"] for r in exp["rows"] if r.get("searched")}
    for it in math:
        assert {"benchmark.split=math500", "benchmark.equivalence=aflow"} <= set(it.overrides), it.label
        assert ("method.search.split=train" in it.overrides) == (it.extra["method"] in searched), it.label
    assert {it.extra["method"] for it in math} & searched        # the searched rows are planned on MATH
    other = [it for it in items if it.extra["benchmark"] != "math"]
    assert not any("benchmark.equivalence=aflow" in it.overrides or "method.search.split=train" in it.overrides
                   for it in other)
    for size in ("embedded", "smoke", "large"):
        emb, _ = build_plan(exp, {"backbone": "local", "size": size}, [])
        assert not any(o.startswith(("benchmark.equivalence", "benchmark.split")) for it in emb for o in it.overrides)
    assert yaml.safe_load((Path(__file__).parents[1] / "configs/benchmark/math.yaml").read_text())["equivalence"] \
        == "math_verify"
    assert all(method_config(m) for m in searched)
    data = Path(__file__).parents[1] / "data"

    def problems(rel: str) -> set[str]:
        return {json.loads(x)["problem"].strip() for x in (data / rel).read_text().splitlines() if x.strip()}

    m500 = problems("math/math500_test.jsonl")
    assert len(m500) == 500 and not m500 & problems("math/math_train.jsonl")
    assert m500 & problems("aflow_splits/math_validate.jsonl")    # why the searched rows do not search there
    from agentic_repro.scripts.table1 import size_note

    note = size_note(exp, {"protocol": "paper", "settings": info["protocol_settings"]})
    assert "per benchmark: math: benchmark.split=math500 benchmark.equivalence=aflow" in note
    assert "aflow math: method.search.split=train" in note     # the table says where the searched rows searched


def test_every_cell_names_the_scorer_its_runs_recorded(tmp_path):
    """Issue 21: rows without a ↳ protocol line too: a note names, per benchmark, the scorer rule each cell's runs
    recorded (config.yaml) with the rows that used it, against the paper's; MATH by math-verify and by AFlow's
    checker side by side."""
    from agentic_repro.scripts import table1

    root = tmp_path / "results"
    shutil.copytree(FIXTURE / "math" / "io", root / "table1" / "math" / "io")     # math-verify, as recorded
    _as_method(root, "math", "cot", lambda c: c["benchmark"].update(equivalence="aflow"))
    t, _ = table1.build(root, "local")
    note = next(n for n in t.notes if n.startswith("Scorer each cell's runs recorded"))
    assert "MATH: equivalence=math_verify (IO); equivalence=aflow (CoT) (paper: equivalence=aflow)" in note
    assert "GSM8K" not in note                      # no GSM8K runs: nothing to name


@pytest.mark.parametrize("mode", ["separate", "request", None])
def test_every_protocol_line_says_how_a_sampling_rows_n_reached_the_provider(tmp_path, tiny_data, mode):
    """``method.sampling.n_mode`` (harness/n_mode.py) as the real runner recorded it in config.yaml: Table 1's (and
    DyFlow's, which shares it), DynaGraph's, AUQ's and AUQ deep research's protocol lines name it for a row that samples (n = 3); a row
    that draws one sample (n = 1, no sampling block) has no n_mode part."""
    from agentic_repro.harness.scripted import ScriptedBackbone
    from agentic_repro.scripts import auq_deepresearch, auq_tables, dynagraph_tables, table1
    from agentic_repro.scripts.collect import RunIndex
    from tests.conftest import make_spec, run

    method = {"name": "sc", "solver": "tests.fake_methods:ask_many", "params": {"n": 3 if mode else 1}}
    if mode:
        method["sampling"] = {"n_mode": mode}
    spec = make_spec(tmp_path, method, limit=2)
    spec.full_config["method"] = method
    run(spec, ScriptedBackbone(lambda messages, sampling: "ANSWER: 0"))
    agg = RunIndex.scan(tmp_path / "results", "t").agg("tiny", "sc", "scripted")
    runs = list(agg.runs)
    assert runs and runs[0].config()["method"].get("sampling") == method.get("sampling")
    lines = {"table1": table1.row_protocol("SC", {"tiny": agg}, {}),
             "dynagraph": dynagraph_tables.row_protocol({"label": "SC"}, runs, {}),
             "auq": "; ".join(auq_tables.protocol_parts(runs, {}, "tiny")),
             "auq_deepresearch": auq_deepresearch.protocol_line(agg, {"role": "base"})[0]}
    for name, line in lines.items():
        if mode:
            assert f"n_mode {mode}" in line, (name, line)
        else:
            assert "n_mode" not in line, (name, line)


def test_the_embedded_sizes_run_one_at_a_time_on_every_idle_core():
    """Issue 33, measured (table1.yaml): on the 2-core machine side by side was not faster (1.04x) and a server on
    both cores ran the smoke's cells in 0.55x the time of one: the embedded sizes plan `n_threads=free` for every
    run and one run at a time; the paper size (an API) keeps the backbone's own settings."""
    from agentic_repro.scripts.reproduce_table1 import build_plan, concurrent_runs
    from agentic_repro.scripts.runs import load_experiment

    exp = load_experiment("table1")
    for size in ("embedded", "smoke", "large"):
        items, info = build_plan(exp, {"backbone": "local", "size": size}, [])
        assert items and all("backbone.server.n_threads=free" in it.overrides for it in items), size
        assert concurrent_runs({"backbone": "local"}, info["protocol_settings"], items[0].overrides) == 1
    items, _ = build_plan(exp, {"backbone": "gpt-4o-mini", "size": "paper"}, [])
    assert not any(o.startswith("backbone.server") for it in items for o in it.overrides)


def test_the_embedded_sizes_restore_prompts_from_the_host_cache():
    """Issue 33, measured (table1.yaml): the methods after IO read the same task first, and llama-server's host-RAM
    prompt cache restores it (CoT on HotpotQA 111.5 s -> 11.1 s, the same answers). The embedded sizes turn it on;
    the backbone's default stays 0 (test servers stay small) and the paper size (an API) has no server."""
    from agentic_repro.scripts.reproduce_table1 import build_plan
    from agentic_repro.scripts.runs import load_experiment
    from tests.conftest import compose

    exp = load_experiment("table1")
    for size in ("embedded", "smoke", "large"):
        items, _ = build_plan(exp, {"backbone": "local", "size": size}, [])
        assert items and all("backbone.server.cache_ram_mib=2048" in it.overrides for it in items), size
    assert compose(["backbone=local"])["backbone"]["server"]["cache_ram_mib"] == 0
