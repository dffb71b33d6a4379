"""The run viewer's data layer and site, on run folders made by real runs with the scripted double."""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.types import Completion
from tests.conftest import EchoBenchmark, make_spec, run
from tests.doubles import ScriptedBackbone
from agentic_repro.viewer import cli, data, methods, site

IO = {"name": "io", "solver": "agentic_repro.baselines.simple:io", "params": {"template": "{task}\n\n{answer_instruction}"}}


def right_on_1(messages, sampling):
    return "ANSWER: 2" if "What is 1+1?" in messages[-1]["content"] else "I think ANSWER: 7"


def right_on_1_and_2(messages, sampling):
    t = messages[-1]["content"]
    return "ANSWER: 2" if "1+1" in t else "ANSWER: 4" if "2+2" in t else "ANSWER: 9"


def spec_of(tmp_path: Path, method: dict[str, Any], **kw: Any):
    """``make_spec`` with the cache in config.yaml, as ``agentic_repro.harness.run`` writes it (the viewer finds it there)."""
    spec = make_spec(tmp_path, method, **kw)
    spec.full_config["cache"] = dict(spec.cache_cfg)
    return spec


def io_run(tmp_path: Path, script=right_on_1, *, seed: int = 42, limit: int = 4, backbone=None):
    spec = spec_of(tmp_path, IO, limit=limit, seed=seed)
    bb = backbone or ScriptedBackbone(script)
    metrics = run(spec, bb)
    return spec, metrics, bb


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (names, bytes and mtimes): what a read-only viewer must leave as it was."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_runs_are_found_with_score_interval_cost_and_status(tmp_path: Path, tiny_data: Path):
    _, metrics, _ = io_run(tmp_path)
    spec2, _, _ = io_run(tmp_path, right_on_1_and_2, seed=7)
    runs = data.find_runs(tmp_path / "results")
    assert [r.rel for r in runs] == ["t/tiny/io/scripted/seed=42", "t/tiny/io/scripted/seed=7"]
    s = runs[0].summary()
    assert (s["method"], s["benchmark"], s["backbone"], s["seed"], s["experiment"]) == \
        ("io", "tiny", "scripted", 42, "t")
    assert s["score_pct"] == 25.0 and s["n"] == 4 and s["n_errors"] == 0 and s["status"] == "complete"
    assert s["interval"] == [4.6, 69.9]                       # Wilson 1/4, as Table 1 computes a cell
    assert s["calls"] == 4 and s["cost_usd"] == pytest.approx(metrics["totals"]["cost_usd"])
    assert runs[1].summary()["score_pct"] == 50.0
    (spec2.out_dir / "metrics.json").unlink()                    # as a run still going (or killed) looks
    s2 = data.find_runs(tmp_path / "results")[1].summary()
    assert s2["status"] == "no metrics" and s2["score_pct"] is None and s2["interval"] is None


def test_every_call_shows_its_full_prompt_and_reply_also_when_replayed_from_the_cache(tmp_path: Path, tiny_data: Path):
    spec, _, bb = io_run(tmp_path)
    sent = {m[-1]["content"]: m for m, _s, _n in bb.requests}
    (run_,) = data.find_runs(tmp_path / "results")
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    store = data.ReplyStore(data.cache_path(run_))
    p1 = data.problems_of(run_)["p1"]
    (c,) = data.problem_calls(run_, p1, calls, data.request_keys(run_), store)
    assert c["messages"] == sent["What is 1+1?\n\nEnd with ANSWER: <n>."] and c["reply"] == "ANSWER: 2"
    assert not c["cache_hit"] and c["stage"] == "answer" and c["role"] == "default" and c["found"]
    # the same run again in a fresh folder: every call a cache hit, each still joined to its prompt and reply
    spec_b = spec_of(tmp_path, {**IO, "name": "io_again"}, limit=4)
    run(spec_b, ScriptedBackbone(lambda m, s: pytest.fail("replayed calls must not reach the backbone")))
    run_b = data.load_run(spec_b.out_dir, tmp_path / "results")
    calls_b = read_jsonl_tolerant(spec_b.out_dir / "calls.jsonl")
    (cb,) = data.problem_calls(run_b, data.problems_of(run_b)["p1"], calls_b, data.request_keys(run_b), store)
    assert cb["cache_hit"] and cb["messages"] == c["messages"] and cb["reply"] == "ANSWER: 2"
    store.close()


def test_a_run_from_before_ledger_keys_is_joined_through_requests_jsonl(tmp_path: Path, tiny_data: Path):
    spec, _, _ = io_run(tmp_path)
    calls = [{k: v for k, v in c.items() if k != "key"} for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl")]
    (run_,) = data.find_runs(tmp_path / "results")
    store = data.ReplyStore(data.cache_path(run_))
    (c,) = data.problem_calls(run_, data.problems_of(run_)["p0"], calls, data.request_keys(run_), store)
    assert c["reply"] == "I think ANSWER: 7" and c["key"] and c["prompt_from"] == "cache"
    # a cache entry from before prompts were stored: IO's prompt comes from its trace, and says so
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    for key, value in db.execute("SELECT key, value FROM responses").fetchall():
        v = json.loads(value)
        del v["messages"]
        db.execute("UPDATE responses SET value=? WHERE key=?", (json.dumps(v), key))
    db.commit()
    db.close()
    (old,) = data.problem_calls(run_, data.problems_of(run_)["p0"], calls, data.request_keys(run_), store)
    assert old["prompt_from"] == "trace" and old["messages"][-1]["content"].startswith("What is 0+0?")
    assert old["reply"] == "I think ANSWER: 7"
    store.close()


class Flaky(ScriptedBackbone):
    """p2's call fails for good (a dead server); p3's answer is cut by the token limit."""

    async def complete(self, messages, sampling, n):
        text = messages[-1]["content"]
        if "2+2" in text:
            raise ConnectionError("server went away")
        res = await super().complete(messages, sampling, n)
        if "3+3" in text:
            res.completions[0] = Completion("ANSWER: 6 and then some", 5, 64, "length")
        return res


def test_errors_are_errors_and_cut_answers_and_fallbacks_are_flagged(tmp_path: Path, tiny_data: Path):
    spec = spec_of(tmp_path, IO, limit=4, runner={"fail_fast_after": 0})
    metrics = run(spec, Flaky(right_on_1))
    assert metrics["n_errors"] == 1
    (run_,) = data.find_runs(tmp_path / "results")
    assert run_.status == "errors"
    rows = {r["id"]: r for r in data.problem_rows(run_)}
    assert rows["p2"]["status"] == "error" and not rows["p2"]["wrong"] and not rows["p2"]["right"]   # never "wrong"
    assert rows["p0"]["wrong"] and rows["p1"]["right"] and rows["p3"]["cut"] and not rows["p0"]["cut"]
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    (failed,) = data.problem_calls(run_, data.problems_of(run_)["p2"], calls, data.request_keys(run_),
                                   data.ReplyStore(data.cache_path(run_)))
    assert failed["error"] and failed["reply"] is None and not failed["found"]
    out = tmp_path / "site"
    site.build([tmp_path / "results"], out, quiet=True)
    page = (out / "runs" / run_.id / "p" / rows["p2"]["page"]).read_text()
    assert "server went away" in page and "a failed call is never cached" in page


def test_fallback_flag_from_a_dynagraph_fallback_plan(tmp_path: Path, tiny_data: Path):
    import tests.test_dynagraph as tdg

    def script(messages, sampling):
        last = messages[-1]["content"]
        if "Write a plan" in last or "was rejected" in last:
            return "first I think"
        return tdg.script_factory(bad_first_plan=False)(messages, sampling)
    spec = make_spec(tmp_path, tdg.method_cfg(max_plan_attempts=2), limit=2)
    run(spec, ScriptedBackbone(script))
    (run_,) = data.find_runs(tmp_path / "results")
    assert all(r["fallback"] for r in data.problem_rows(run_))
    io_run(tmp_path / "plain")
    assert not any(r["fallback"] for r in data.problem_rows(data.find_runs(tmp_path / "plain" / "results")[0]))


def _views(spec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (run_,) = data.find_runs(spec.results_root)
    p = next(iter(data.problems_of(run_).values()))
    events = data.trajectory(run_, p)
    return {v["kind"]: v for v in methods.views(p["trace"], events)}, events


def test_method_views_dynagraph_dyflow_denoiseflow(tmp_path: Path, tiny_data: Path):
    import tests.test_denoiseflow as tdf
    import tests.test_dynagraph as tdg
    import tests.test_dyflow as tdy

    spec = make_spec(tmp_path / "dg", tdg.method_cfg(), limit=1)
    run(spec, ScriptedBackbone(tdg.script_factory()))
    v, _ = _views(spec)
    dg = v["dynagraph"]
    assert [h["op"] for h in dg["history"]] == ["plan", "patch"]
    assert 'data-id="v2_patch1"' in dg["graph"] and 'data-id="v2"' in dg["graph"]       # the patch and what it replaced
    assert not dg["plans"][0]["attempts"][0]["check"]["ok"]                              # the rejected first plan
    assert list(v) == ["dynagraph"]

    tdy.run_dyflow(tmp_path / "dy", tdy.Script([[tdy.SOLVE], [tdy.ORGANIZE]]))
    v, _ = _views(make_spec(tmp_path / "dy", {"name": "x"}))
    dy = v["dyflow"]
    assert [s["id"] for s in dy["stages"]] == ["stage_1", "stage_2"] and dy["facts"]["terminated_by"] == "organize"
    assert 'data-id="act_2"' in dy["stages"][0]["graph"] and "REVIEW_SOLUTION" in dy["stages"][0]["graph"]
    assert dy["stages"][0]["attempts"][0]["status"] == "valid"

    spec = make_spec(tmp_path / "df", tdf.df_method("full"), limit=1)
    run(spec, ScriptedBackbone(tdf.world))
    v, _ = _views(spec)
    df = v["denoiseflow"]
    assert df["regulate"]["route"] in ("direct", "branch", "refine", "full") and df["branches"]
    assert "u_slots" in df["sense"] and "first_verdict" in df["correct"] and df["clusters"]
    assert 'data-id="s2"' in df["step_graph"] and len(df["steps"]) == 2                # the reasoning steps' graph


def test_auq_view_has_the_confidence_curve_and_where_system2_fired(tmp_path: Path, monkeypatch):
    import tests.test_auq_method as ta

    root = tmp_path / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))

    def script(messages, sampling):
        text = messages[-1]["content"]
        if ta.REFLECT in text:
            return ta.reply(ta._right(text), 0.9)
        k, _goal = ta._now(text)
        return ta.reply(ta._right(text), 0.95 if k == 0 else 0.5, "maybe")   # confident first step, unsure second
    spec = ta._spec(tmp_path, root, [2], "dual")
    run(spec, ScriptedBackbone(script))
    v, _ = _views(spec)
    a = v["auq"]
    assert [s["system2"] for s in a["steps"]] == [False, True, True]           # counter 0 -> 1 -> 2, then stop
    assert a["steps"][1]["c_init"] == 0.5 and a["steps"][1]["c_final"] == 0.9 and a["tau"] == 0.85
    assert a["curve"].count("<title>step") == 3 and a["curve"].count('r="5"') == 2      # System 2 steps stand out
    assert "System 1 0.50, final 0.90 (System 2 fired)" in a["curve"]                     # where it dropped, and after


def test_auq_research_view_shows_each_planner_step_its_confidence_and_system2(tmp_path: Path, monkeypatch):
    """A research run records no episode events, only ``trace.rounds``: before, its AUQ panel was an empty table."""
    from tests.test_auq_deepresearch import PLAN_A, PLAN_B, Agent, judge_reply, reply
    from tests.test_auq_deepresearch_tables import scripted_run

    class TwoSteps(Agent):   # planner step 1 unsure (System 2 picks PLAN_B), step 2 sure (System 1 passes)
        def __call__(self, messages, sampling):
            text = messages[-1]["content"]
            if text.startswith("You are the planner") and "Before the researchers are dispatched" not in text:
                self.system1 = reply(PLAN_A, 0.9, "unsure about 2025 data") if "round 1" not in text.lower() \
                    else reply(["wind capacity 2025"], 0.99, "sure now")
            return super().__call__(messages, sampling)

    results = tmp_path / "results"
    scripted_run(tmp_path / "a", monkeypatch, results, "auq_deep_research", TwoSteps(""), judge_reply,
                 corpus=False, evidence="closed_book", rounds=2)
    (run_,) = data.find_runs(results)
    p = next(iter(data.problems_of(run_).values()))
    assert [r["auq"]["system2"] for r in p["trace"]["rounds"]] == [True, False]
    (a,) = [v for v in methods.views(p["trace"], data.trajectory(run_, p)) if v["kind"] == "auq"]
    one, two = a["steps"]
    assert one["system2"] and one["trigger"] == "low_confidence" and (one["c_init"], one["c_final"]) == (0.9, 0.97)
    assert one["action"] == json.dumps(PLAN_B) and one["confidence"] == 0.97 and one["calls"] > 0
    assert not two["system2"] and two["confidence"] == two["c_init"] == 0.99 and two["explanation"] == "sure now"
    assert a["facts"]["system2_triggers"] == 1 and a["curve"].count("<title>step") == 2
    out = tmp_path / "site"
    site.build([results], out, quiet=True)
    page = next((out / "runs" / run_.id / "p").glob("*.html")).read_text()
    table = page[page.index('<table id="auq-steps"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr") == 3 and "planner step" in page and "sure now" in table and "perovskite" in table
    # a trace with no step at all (a research run stopped before its first plan was kept) gets no empty table
    (bare,) = methods.views({"agent": "auq_dual", "tau": 0.95, "system2_triggers": 0, "rounds": []}, [])
    html = site.environment().get_template("view_auq.html").render(v=bare)
    assert "auq-steps" not in html and "no step recorded" in html


def test_a_searched_methods_artifact_search_history_and_validate_runs(tmp_path: Path, tiny_data: Path):
    from agentic_repro.baselines.autoflow.artifact import write_artifact

    folder = tmp_path / "results" / "search" / "tiny" / "aflow" / "scripted" / "seed=42"
    evals = make_spec(tmp_path, IO, limit=2)                       # a validate run the search made, in its folder
    evals.results_root = folder / "evals"
    run(evals, ScriptedBackbone(right_on_1))
    write_artifact(folder / "artifact.json", {
        "method": "aflow", "benchmark": "tiny", "split": "validate", "seed": 42,
        "workflow": {"solver": "agentic_repro.baselines.simple:io", "params": {}}, "validate_score": 0.75,
        "history": [{"round": 1, "score": 0.5, "graph": {"ops": ["Custom"]}}, {"round": 2, "score": 0.75}],
        "roles": {}, "search_cost": {"total": {"cost_usd": 0.01, "calls": 12}}})
    spec = make_spec(tmp_path, IO, limit=1)
    named = str(folder).replace("/tiny/", "/{benchmark}/") + "/artifact.json"   # as configs/method/aflow.yaml names it
    spec.full_config["method"] = {**IO, "params": {**IO["params"], "artifact": named}}
    run(spec, ScriptedBackbone(right_on_1))
    test_run = data.load_run(spec.out_dir, tmp_path / "results")
    a = data.artifact_of(test_run)
    assert a["validate_score"] == 0.75 and [h["round"] for h in a["history"]] == [1, 2]
    h = data.history_table(a["history"])
    assert h["columns"] == ["round", "score"] and h["nested"] == [{"graph": {"ops": ["Custom"]}}, {}]
    (search,) = data.find_searches(tmp_path / "results")
    s = search.summary()
    assert (s["method"], s["backbone"], s["rounds"], s["cost_usd"], s["calls"]) == ("aflow", "scripted", 2, 0.01, 12)
    out = tmp_path / "site"
    info = site.build([tmp_path / "results"], out, quiet=True)
    assert info["searches"] == 1 and info["runs"] == 2
    page = (out / "runs" / test_run.id / "index.html").read_text()
    assert "Searched workflow" in page and "search history (2 rounds)" in page
    spage = (out / "searches" / f"{search.id}.html").read_text()
    assert "search history (2 rounds)" in spage and "evals/t/tiny/io/scripted/seed=42" in spage
    assert 'class="search-link"' in (out / "index.html").read_text()


def test_the_site_is_built_without_writing_under_results_and_serves_on_loopback(tmp_path: Path, tiny_data: Path):
    io_run(tmp_path)
    io_run(tmp_path, right_on_1_and_2, seed=7)
    results = tmp_path / "results"
    before, cache_before = tree_digest(results), tree_digest(tmp_path)["cache.sqlite"]
    out = tmp_path / "export"
    assert cli.main([str(results), "--export", str(out)]) == 0
    assert tree_digest(results) == before and tree_digest(tmp_path)["cache.sqlite"] == cache_before
    index = (out / "index.html").read_text()
    assert index.count('class="run-link"') == 2 and 'src="./static/app.js"' in index
    (run_,) = [r for r in data.find_runs(results) if r.seed == 42]
    js = (out / "runs" / run_.id / "problems.js").read_text()
    rows = json.loads(re.search(r"= (\{.*\});\s*$", js, re.DOTALL).group(1))
    assert [r["id"] for r in rows["rows"]] == ["p0", "p1", "p2", "p3"] and rows["rows"][1]["right"]
    page = (out / "runs" / run_.id / "p" / f"{data.slug('p1')}.html").read_text()
    assert "What is 1+1?" in page and "ANSWER: 2" in page and "#1</b> answer" in page
    for bad in (results, results / "t", tmp_path):            # inside, equal to, or above the results tree
        with pytest.raises(site.ExportError):
            site.build([results], bad, quiet=True)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    assert cli.main([str(results), "--export", str(tmp_path / "foreign")]) == 2
    assert cli.main([str(tmp_path / "nowhere")]) == 2
    assert cli.main([str(results), "--export", str(out)]) == 0           # the viewer's own export is rewritten
    server = cli.serve(out, 0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/{run_.id}/index.html", timeout=10) as r:
            assert r.status == 200 and b"problem-link" in r.read()
    finally:
        server.shutdown()
        server.server_close()
    assert tree_digest(results) == before


def test_view_serves_until_ctrl_c_then_removes_its_temporary_site(tmp_path: Path, tiny_data: Path):
    import signal
    import subprocess
    import sys

    io_run(tmp_path)
    before = tree_digest(tmp_path / "results")
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "agentic_repro.viewer", str(tmp_path / "results"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/index\.html", line).group(0)
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200 and b'class="run-link"' in r.read()
        assert len(list((tmp_path / "tmp").iterdir())) == 1                # the site, outside results/
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert list((tmp_path / "tmp").iterdir()) == [] and tree_digest(tmp_path / "results") == before


def test_tool_calls_and_their_verdicts_are_on_the_problem_page(tmp_path: Path, tiny_data: Path):
    import tests.test_denoiseflow as tdf

    def script(messages, sampling):
        m = messages[-1]["content"]
        if m.startswith("You are analyzing"):
            return json.dumps({"goal": "double", "constraints": [], "outputs": {"answer_form": "code"},
                               "plan": ["write f", "return the double"]})
        return "ANSWER: def f(x): return 2*x" if "failed verification" in m else "ANSWER: def f(x): return x"
    spec = spec_of(tmp_path, tdf.df_method(), limit=1)
    spec.benchmark_cfg.update(kind="tests.test_denoiseflow.PublicOnly", execute_code=True)
    run(spec, ScriptedBackbone(script))
    (run_,) = data.find_runs(tmp_path / "results")
    p = next(iter(data.problems_of(run_).values()))
    assert [t["name"] for t in p["tool_calls"]][:1] == ["run_public_tests"]
    out = tmp_path / "site"
    site.build([tmp_path / "results"], out, quiet=True)
    page = (out / "runs" / run_.id / "p" / f"{data.slug(p['id'])}.html").read_text()
    table = page[page.index('id="tool-calls"'):]
    assert "<b>run_public_tests</b>" in table and "AssertionError" in table     # the failing public test's verdict


def test_svg_a_cycle_is_drawn_not_looped_and_a_missing_confidence_is_a_gap_not_zero():
    from agentic_repro.viewer import svg

    g = svg.dag([{"id": "v1", "inputs": ["v2"]}, {"id": "v2", "inputs": ["v1"]}, {"id": "v3", "inputs": ["x"]}])
    assert all(f'data-id="{n}"' in g for n in ("v1", "v2", "v3", "x"))   # an unknown input is drawn as a source
    assert g.count("<line") == 3
    c = svg.curve([(0.9, 0.9, False), (None, None, False), (0.4, 0.8, True)], tau=0.5)
    assert c.count("<title>step") == 2 and "step 2" not in c                   # no point for the missing step
    assert c.count("<polyline") == 0                                          # no line across the gap


def test_a_damaged_file_is_named_on_the_run_page_not_skipped(tmp_path: Path, tiny_data: Path):
    spec, _, _ = io_run(tmp_path)
    (spec.out_dir / "metrics.json").write_text("{not json")
    (run_,) = data.find_runs(tmp_path / "results")
    assert run_.status == "no metrics" and run_.notes and run_.notes[0].startswith("metrics.json could not be read")
    site.build([tmp_path / "results"], tmp_path / "site", quiet=True)
    assert "metrics.json could not be read" in (tmp_path / "site" / "runs" / run_.id / "index.html").read_text()


# ---- issue 29: what the numbers cover, judge re-asks, graded scores ---------------------------------------------

def right_from_4(messages, sampling):
    """Right on p4..p7 only (the tiny benchmark's question i is "What is i+i?")."""
    i = int(re.search(r"What is (\d+)\+", messages[-1]["content"]).group(1))
    return f"ANSWER: {2 * i}" if i >= 4 else "ANSWER: -1"


def test_a_folder_rerun_at_a_smaller_limit_shows_only_what_metrics_json_covers(tmp_path: Path, tiny_data: Path):
    """Issue 29 item 5: run at limit 8 (right on p4..p7: 50%), re-run in the same folder at limit 4 (0%). The
    viewer printed metrics.json's 0.0% beside the interval of all 8 predictions ([21.5, 78.5]) and listed 8."""
    io_run(tmp_path, right_from_4, limit=8)
    spec, metrics, _ = io_run(tmp_path, right_from_4, limit=4)
    assert metrics["score_pct"] == 0.0 and metrics["ids"] == ["p0", "p1", "p2", "p3"]
    (run_,) = data.find_runs(tmp_path / "results")
    s = run_.summary()
    assert (s["status"], s["score_pct"], s["n"], s["source"]) == ("complete", 0.0, 4, "metrics.json")
    assert s["interval"] == [0.0, 49.0]                                      # Wilson 0/4, not 4/8's [21.5, 78.5]
    rows = data.problem_rows(run_)
    assert [r["id"] for r in rows if r["covered"]] == ["p0", "p1", "p2", "p3"]
    assert [r["id"] for r in rows if not r["covered"]] == ["p4", "p5", "p6", "p7"]
    out = tmp_path / "site"
    site.build([tmp_path / "results"], out, quiet=True)
    page = (out / "runs" / run_.id / "index.html").read_text()
    assert "0.0% [0.0, 49.0]" in page and "21.5" not in page and "<h2>Problems <small>4</small>" in page
    assert "4 more problem(s) in predictions.jsonl that metrics.json does not cover" in page
    js = (out / "runs" / run_.id / "problems.js").read_text()
    assert len(json.loads(js.split("] = ", 1)[1].rsplit(";", 1)[0])["rows"]) == 4   # the comparison reads the same 4
    # a folder made before runs recorded their selection (no ids in metrics.json or meta.json): metrics.json's
    # numbers, no interval rather than another selection's
    for name in ("metrics.json", "meta.json"):
        doc = json.loads((spec.out_dir / name).read_text())
        del doc["ids"]
        (spec.out_dir / name).write_text(json.dumps(doc))
    s = data.find_runs(tmp_path / "results")[0].summary()
    assert s["score_pct"] == 0.0 and s["interval"] is None and "recorded no selection" in s["covers"]


KILLED_CHILD = """
import sys
from pathlib import Path
from tests.doubles import ScriptedBackbone
from tests.test_viewer import io_run, right_from_4
io_run(Path(sys.argv[1]), right_from_4, limit=8,
       backbone=ScriptedBackbone(right_from_4, max_concurrency=1, delay_s=0.2))
"""


def test_a_resume_killed_midway_is_running_stale_with_its_own_counts(tmp_path: Path, tiny_data: Path):
    """Issue 29 item 5: a run complete at limit 4, resumed at limit 8 and SIGKILLed after 6 predictions: the viewer
    said ``complete`` with metrics.json's 4 over 6 listed problems. Now: running/stale, its own count over the 6
    (p4, p5 right: 2/6), of the 8 selected, and metrics.json's totals not shown as this invocation's."""
    import signal
    import subprocess
    import sys
    import time

    spec, _, _ = io_run(tmp_path, right_from_4, limit=4)
    preds = spec.out_dir / "predictions.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path)], env=env,
                             cwd=Path(__file__).resolve().parents[1])
    try:
        deadline = time.time() + 120
        while len(read_jsonl_tolerant(preds)) < 6 and time.time() < deadline and child.poll() is None:
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(read_jsonl_tolerant(preds)) == 6, "the child was not killed midway"
    (run_,) = data.find_runs(tmp_path / "results")
    s = run_.summary()
    assert s["status"] == "running/stale" and s["source"] == "predictions.jsonl (own count)"
    assert (s["n"], s["selected"], s["n_errors"]) == (6, 8, 0) and s["score_pct"] == pytest.approx(100 * 2 / 6)
    assert s["interval"] == [9.7, 70.0] and s["cost_usd"] is None              # Wilson 2/6
    out = tmp_path / "site"
    site.build([tmp_path / "results"], out, quiet=True)
    index = (out / "index.html").read_text()
    assert '<span class="status running-stale"' in index and 'class="status complete"' not in index
    page = (out / "runs" / run_.id / "index.html").read_text()
    assert "33.3% [9.7, 70.0]" in page and "6 answered of 8 selected" in page and "running or killed" in page


class F1Benchmark(EchoBenchmark):
    """The tiny benchmark scored by token F1 (graded, as HotpotQA/DROP are)."""

    async def score(self, text: str, problem):
        from agentic_repro.evaluators.text_f1 import token_f1
        from agentic_repro.harness.types import Score

        pred, rule = self.extract(text, problem)
        return Score(token_f1(pred or "", f"{problem.gold} apples"), pred, {"rule": rule})


def f1_run(tmp_path: Path, script, seed: int):
    spec = spec_of(tmp_path, IO, limit=2, seed=seed)
    spec.benchmark_cfg = {**spec.benchmark_cfg, "kind": "tests.test_viewer.F1Benchmark", "metric": "f1"}
    spec.full_config["benchmark"] = spec.benchmark_cfg
    return run(spec, ScriptedBackbone(script))


def test_a_graded_score_is_higher_or_lower_never_wrong(tmp_path: Path, tiny_data: Path):
    """Issue 29 item 8: an F1 of 0.67 was "wrong" (score < 1) on the run page, and a pair 0.67 vs 0.4 "both wrong"
    on the compare page. Graded runs have no right/wrong rows: the compare page reads which is higher."""
    f1_run(tmp_path, lambda m, s: "ANSWER: 0 apples" if "0+0" in m[-1]["content"] else "ANSWER: 2 apples x y", 1)
    (run_,) = data.find_runs(tmp_path / "results")
    rows = {r["id"]: r for r in data.problem_rows(run_)}
    assert rows["p0"]["score"] == 1.0 and 0 < rows["p1"]["score"] < 1
    assert run_.summary()["graded"] and not rows["p1"]["wrong"] and rows["p1"]["below"]
    assert not rows["p0"]["right"] and not rows["p0"]["wrong"]
    out = tmp_path / "site"
    site.build([tmp_path / "results"], out, quiet=True)
    page = (out / "runs" / run_.id / "index.html").read_text()
    assert 'value="below"> below full score' in page and 'value="wrong"' not in page


def test_the_run_page_shows_judge_reasks_and_answers_scored_without_a_reference(tmp_path: Path, monkeypatch):
    """Issue 29 item 7: RACE replies asked again (by why) per run and per problem; an answer judged before RACE 4
    from a reply that did not score the reference (the release's reference 0) is counted and flagged."""
    from agentic_repro.evaluators.deepresearch import DeepResearchBench, parse_race_json, race_scores
    from tests.test_auq_deepresearch import PLAN_A, Agent, reply
    from tests.test_auq_deepresearch_tables import reference_judge, scripted_run

    results = tmp_path / "results"
    scripted_run(tmp_path / "a", monkeypatch, results, "deep_research", Agent(reply(PLAN_A, 0.99)),
                 reference_judge(3, lambda attempt: attempt >= 1), corpus=False, evidence="closed_book")
    (run_,) = data.find_runs(results)
    assert run_.summary()["judge"] == {"reasks": 2, "rejected": {"missing_reference": 2},
                                       "scored_without_reference": 0}
    assert all(r["reasks"] == 1 and r["rejected"] == {"missing_reference": 1} for r in data.problem_rows(run_))
    out = tmp_path / "site"
    site.build([results], out, quiet=True)
    page = (out / "runs" / run_.id / "index.html").read_text()
    assert "2 replies asked again (missing_reference 2)" in page and "judge re-asked ×1" in page
    assert "judge re-asks 2" in (out / "index.html").read_text()

    # a folder judged by RACE 3 (the release's reading: a reply without reference scores was a judgement)
    old = tmp_path / "old"
    def race3(self, text, problem):   # RACE 3: usable unless unparsed, off-scale or 0/0
        race = race_scores(parse_race_json(text), problem.fields["criteria"])
        return race, None if race["overall"] is not None and not race["off_scale"] else "no_score"
    monkeypatch.setattr(DeepResearchBench, "_race_reading", race3)
    scripted_run(tmp_path / "b", monkeypatch, old, "deep_research", Agent(reply(PLAN_A, 0.99)),
                 reference_judge(3, lambda attempt: False), corpus=False, evidence="closed_book")
    (run_,) = data.find_runs(old)
    assert run_.summary()["score_pct"] == 100.0 and run_.summary()["judge"]["scored_without_reference"] == 2
    assert all(r["no_reference"] for r in data.problem_rows(run_))
    out = tmp_path / "site-old"
    site.build([old], out, quiet=True)
    page = (out / "runs" / run_.id / "index.html").read_text()
    assert "2 answer(s) scored from a reply that did not score the reference" in page and "no reference score" in page
