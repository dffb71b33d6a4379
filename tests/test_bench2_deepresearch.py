"""DeepResearch Bench: loader, RACE scoring by the judge role (hand-computed cases), the BM25 search tool, the
research agent's control flow, and the clear errors (no reference file, no judge role)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from agentic_repro.evaluators.deepresearch import BM25Corpus, criteria_for_prompt, parse_race_json, race_scores
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "data" / "deepresearch_bench"  # copied by `make data` (make test runs it first)
CORPUS = ROOT / "tests" / "fixtures" / "deepresearch_corpus.jsonl"
JUDGE_BB = {"name": "judge-bb", "kind": "openai", "model": "judge-model", "price": 0, "max_concurrency": 2}

CRIT = {"dimension_weight": {"comprehensiveness": 0.5, "insight": 0.5},
        "criterions": {"comprehensiveness": [{"criterion": "Coverage", "explanation": "e", "weight": 0.75},
                                             {"criterion": "Data", "explanation": "e", "weight": 0.25}],
                       "insight": [{"criterion": "Depth", "explanation": "e", "weight": 1.0}]}}


def test_race_scores_hand_computed():
    judged = {"comprehensiveness": [{"criterion": "coverage", "article_1_score": 8, "article_2_score": 4},  # case
                                    {"criterion": "Data support", "article_1_score": 4, "article_2_score": 8}],
              "insight": [{"criterion": "Something else", "article_1_score": 6, "article_2_score": 6}],
              "readability": [{"criterion": "x", "article_1_score": 10, "article_2_score": 0}]}  # not weighted: skipped
    r = race_scores(judged, CRIT)
    # comprehensiveness: target (8*.75 + 4*.25) = 7, reference (4*.75 + 8*.25) = 5; insight: unmatched -> mean weight, 6 / 6
    assert r["dims"]["comprehensiveness"]["target"] == pytest.approx(7.0)
    assert r["dims"]["comprehensiveness"]["reference"] == pytest.approx(5.0)
    assert r["target_total"] == pytest.approx(0.5 * 7 + 0.5 * 6) and r["reference_total"] == pytest.approx(5.5)
    assert r["overall"] == pytest.approx(6.5 / 12) and r["unmatched"] == ["insight:Something else"]
    assert json.loads(criteria_for_prompt(CRIT))["comprehensiveness"][0] == {"criterion": "Coverage", "explanation": "e"}


def test_parse_race_json():
    body = {d: [] for d in ("comprehensiveness", "insight", "instruction_following", "readability")}
    assert parse_race_json("```json\n" + json.dumps(body) + "\n```") == body
    assert parse_race_json("noise " + json.dumps(body) + " more {noise}") == body   # the first balanced object
    # broken JSON is not repaired (the release asks again): no parser reads it and it names no scores
    assert parse_race_json("noise " + json.dumps(body)[:-1] + ",}") is None
    assert parse_race_json(json.dumps({"insight": []})) is None  # a dimension missing
    assert parse_race_json("no json") is None
    # a dimension that is present but not a list passes here (the release checks the keys only)
    assert parse_race_json(json.dumps({**body, "insight": "n/a"}))["insight"] == "n/a"


def test_parse_race_json_keyword_fallback_as_the_release():
    """A reply no JSON parser reads, that names criteria and both scores: the release's last resort pairs the
    criterion/score triples per dimension (in order, up to the next dimension's name)."""
    text = ('{"comprehensiveness": [{"criterion": "Coverage", "analysis": "it says "fine"", "article_1_score": 7, '
            '"article_2_score": 5.5}], "insight": [{"criterion": "Depth", "article_1_score": 6, "article_2_score": 4},'
            ' {"criterion": "Novelty", "article_1_score": 3}], "instruction_following": [], "readability": []')
    got = parse_race_json(text)
    assert got["comprehensiveness"] == [{"criterion": "Coverage", "article_1_score": 7.0, "article_2_score": 5.5}]
    assert got["insight"] == [{"criterion": "Depth", "article_1_score": 6.0, "article_2_score": 4.0}]  # zip: 1 pair
    assert got["instruction_following"] == [] and got["readability"] == []


def test_bm25_search_finds_the_relevant_passage():
    pytest.importorskip("bm25s")
    hits = BM25Corpus(CORPUS).search("battery storage prices", k=2)
    assert hits[0]["id"] == "d3" and len(hits) <= 2


def _data(tmp_path, n=2, reference=True):
    if not (TASKS / "query.jsonl").is_file():
        pytest.fail(f"{TASKS}/query.jsonl is missing: run `make data` (make test does)")
    root = tmp_path / "data" / "deepresearch_bench"
    root.mkdir(parents=True)
    shutil.copy(TASKS / "criteria.jsonl", root / "criteria.jsonl")
    rows = [json.loads(line) for line in (TASKS / "query.jsonl").read_text().splitlines()]
    picked = [r for r in rows if r["language"] == "en"][:n]
    (root / "query.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in picked))
    if reference:
        refs = [{"id": r["id"], "prompt": r["prompt"], "article": f"Reference article for task {r['id']}."} for r in picked]
        (root / "reference.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in refs))
    shutil.copy(CORPUS, tmp_path / "data" / "corpus.jsonl")
    return tmp_path / "data"


def _spec(tmp_path, monkeypatch, data, judge=True):
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data))
    spec = make_spec(tmp_path, {"name": "deep_research", "solver": "agentic_repro.baselines.deep_research:deep_research",
                                "params": {"n_queries": 2, "k": 2}, "roles": ["planner"]})
    bench = yaml.safe_load((ROOT / "configs/benchmark/deepresearch_bench.yaml").read_text())
    bench["search"]["corpus"] = "corpus.jsonl"
    spec.benchmark_cfg = bench
    spec.roles_cfg = {"judge": dict(JUDGE_BB)} if judge else {}
    return spec


def agent_script(messages, sampling) -> str:
    text = messages[-1]["content"]
    if text.startswith("You are the planner"):
        return "1. solar panel efficiency\n2. battery storage costs\n3. ignored third query"
    if text.startswith("You are a researcher"):
        ids = re.findall(r"^\[(d\d)\]", text, re.MULTILINE)
        return f"notes citing {ids}"
    assert text.startswith("You are the analyst") and "notes citing" in text
    return "# Report\nSolar and batteries [d1] [d3]."


class RaceJudge(ScriptedBackbone):
    """The first attempt's reply (sample 0) is unusable; the next scores every criterion 6 (report) vs 4."""

    def __init__(self):
        super().__init__(self.reply)
        self.seen: list[str] = []

    def reply(self, messages, sampling):
        prompt = messages[-1]["content"]
        self.seen.append(prompt)
        from agentic_repro.harness.llm import request_seed

        if sampling["seed"] == request_seed(42, 0):
            return "I think the first article is better."  # no JSON: asked again
        crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", prompt, re.DOTALL).group(1))
        return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": 6,
                                "article_2_score": 4} for c in items] for d, items in crit.items()})


def test_race_run_end_to_end_with_scripted_backbones(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    data = _data(tmp_path)
    spec = _spec(tmp_path, monkeypatch, data)
    judge = RaceJudge()
    m = run(spec, {"scripted": ScriptedBackbone(agent_script), "judge-bb": judge})
    assert m["complete"] and m["n"] == 2
    assert m["score"] == pytest.approx(0.6) and m["judge_score"] == pytest.approx(0.6)  # 6 / (6 + 4)
    assert set(m["judge"]["dimensions"]) == {"comprehensiveness", "insight", "instruction_following", "readability"}
    assert "Reference article for task" in judge.seen[0] and "# Report" in judge.seen[0]
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    for p in preds:
        assert p["judge"]["attempts"] == 2 and p["score_details"]["scored_by"] == "judge"
        assert [c["name"] for c in p["tool_calls"]] == ["search", "search"]
        assert p["trace"]["queries"] == ["solar panel efficiency", "battery storage costs"]
        assert "criteria" not in json.dumps(p["trace"])
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    assert {c["stage"] for c in calls} == {"plan", "research", "report", "judge"}


def test_race_needs_the_judge_role_and_the_reference_file(tmp_path, monkeypatch):
    from agentic_repro.harness.runner import Runner

    data = _data(tmp_path, reference=False)
    with pytest.raises(ValueError, match="judge role"):
        Runner(_spec(tmp_path, monkeypatch, data, judge=False))
    spec = _spec(tmp_path, monkeypatch, data)
    with pytest.raises(FileNotFoundError, match="make data"):
        run(spec, {"scripted": ScriptedBackbone(agent_script), "judge-bb": RaceJudge()})


def test_tavily_backend_needs_a_key_and_reads_results(monkeypatch):
    import http.server
    import threading

    from agentic_repro.evaluators.deepresearch import DeepResearchBench

    def bench():
        return DeepResearchBench({"name": "d", "search": {"backend": "tavily", "url": url}})

    url = "http://127.0.0.1:1/search"
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="TAVILY_API_KEY"):
        bench()._index

    seen = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's name
            seen["body"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen["auth"] = self.headers["Authorization"]
            out = json.dumps({"results": [{"url": "https://x", "title": "X", "content": "about x"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/search"
        monkeypatch.setenv("TAVILY_API_KEY", "k123")
        hits = bench()._index.search("what is x", 2)
    finally:
        server.shutdown()
    assert hits == [{"id": "https://x", "title": "X", "text": "about x"}]
    assert seen == {"body": {"query": "what is x", "max_results": 2}, "auth": "Bearer k123"}


# ---- RACE as the release (deepresearch_bench_race.py / utils/score_calculator.py @ 214741e) -----------------

def test_race_missing_reference_score_counts_for_the_target_as_the_release():
    """A criterion without article_2_score keeps its weight in the denominator; the reference gets nothing
    for it (it used to be skipped, which scored only the other criterion)."""
    judged = {"comprehensiveness": [{"criterion": "Coverage", "article_1_score": 8},          # no reference score
                                    {"criterion": "Data", "article_1_score": 4, "article_2_score": 8}],
              "insight": [{"criterion": "Depth", "article_1_score": 6, "article_2_score": 6}]}
    r = race_scores(judged, CRIT)
    comp = r["dims"]["comprehensiveness"]
    assert comp["target"] == pytest.approx(8 * .75 + 4 * .25)     # 7
    assert comp["reference"] == pytest.approx(8 * .25)            # 2: Coverage gives the reference nothing
    assert r["missing_reference"] == ["comprehensiveness:Coverage"] and r["reference_zeroed"] == []
    assert r["overall"] == pytest.approx((0.5 * 7 + 0.5 * 6) / (0.5 * 7 + 0.5 * 6 + 0.5 * 2 + 0.5 * 6))


def test_race_last_item_without_reference_zeroes_the_dimension_reference_as_the_release():
    """The release tests the *last* item's article_2_score after its loop: when it is missing, the whole
    dimension's reference average is 0."""
    judged = {"comprehensiveness": [{"criterion": "Data", "article_1_score": 4, "article_2_score": 8},
                                    {"criterion": "Coverage", "article_1_score": 8}],        # last: no reference
              "insight": [{"criterion": "Depth", "article_1_score": 6, "article_2_score": 6}]}
    r = race_scores(judged, CRIT)
    assert r["dims"]["comprehensiveness"] == {"target": pytest.approx(7.0), "reference": 0.0, "relative": 1.0}
    assert r["reference_zeroed"] == ["comprehensiveness"]
    assert r["overall"] == pytest.approx(6.5 / (6.5 + 3.0))


def test_race_empty_criterion_is_skipped_as_the_release():
    """An empty (or blank) criterion text is skipped; it used to match the first criterion by substring
    ("" is in every string) and count with its weight."""
    judged = {"comprehensiveness": [{"criterion": "Coverage", "article_1_score": 6, "article_2_score": 4},
                                    {"criterion": "  ", "article_1_score": 0, "article_2_score": 10},
                                    {"criterion": "", "article_1_score": 0, "article_2_score": 10},
                                    {"article_1_score": 0, "article_2_score": 10}],
              "insight": [{"criterion": "Depth", "article_1_score": 6, "article_2_score": 4}]}
    r = race_scores(judged, CRIT)
    assert r["dims"]["comprehensiveness"]["target"] == pytest.approx(6.0)
    assert r["dims"]["comprehensiveness"]["reference"] == pytest.approx(4.0)
    assert r["empty_criteria"] == 3 and r["overall"] == pytest.approx(0.6)


def test_race_target_score_and_unreadable_scores_as_the_release():
    judged = {"comprehensiveness": [{"criterion": "Coverage", "target_score": 6, "article_2_score": "4"},
                                    {"criterion": "Data", "article_1_score": "high", "article_2_score": 1},
                                    {"criterion": "Data", "article_1_score": float("nan"), "article_2_score": 1}],
              "insight": [{"criterion": "Depth", "article_2_score": 9},                     # no target: skipped
                          {"criterion": "Depth", "article_1_score": 6, "article_2_score": 4}]}
    r = race_scores(judged, CRIT)
    assert r["dims"]["comprehensiveness"] == {"target": 6.0, "reference": 4.0, "relative": pytest.approx(0.6)}
    assert r["invalid_score"] == 2 and r["no_target_score"] == 1 and r["overall"] == pytest.approx(0.6)


def test_race_empty_dimension_scores_as_the_release_and_zero_over_zero_is_no_score():
    """A weighted dimension the judge left empty averages 0 for both articles (the release): the reply is
    a judgement (it used to be asked again); the dimension's 0/0 ratio is undefined, not 0. Both totals 0 is
    no score at all: the reply is unusable (the release would write 0)."""
    from agentic_repro.evaluators.deepresearch import DeepResearchBench
    from agentic_repro.harness.types import Problem

    judged = {"comprehensiveness": [{"criterion": "Coverage", "article_1_score": 6, "article_2_score": 4}],
              "insight": [], "instruction_following": [], "readability": []}
    r = race_scores(judged, CRIT)
    assert r["unscored"] == ["insight"] and set(r["dims"]) == {"comprehensiveness"}
    assert r["overall"] == pytest.approx(0.6)                    # (0.5*6 + 0) / (0.5*6 + 0.5*4 + 0)
    problem = Problem(id="x", index=0, fields={"criteria": CRIT}, gold=None, benchmark="d")
    bench = DeepResearchBench({"name": "d"})
    got = bench.judge_parse(json.dumps(judged), problem)
    assert got["score"] == pytest.approx(0.6) and got["race"]["unscored"] == ["insight"]
    none = {d: [] for d in ("comprehensiveness", "insight", "instruction_following", "readability")}
    assert race_scores(none, CRIT)["overall"] is None and bench.judge_parse(json.dumps(none), problem) is None
    zeros = {**none, "comprehensiveness": [{"criterion": "Coverage", "article_1_score": 0, "article_2_score": 0}]}
    assert bench.judge_parse(json.dumps(zeros), problem) is None


class FailingJudge(ScriptedBackbone):
    """Unusable replies for the first ``fails`` attempts of each problem, then every criterion 6 vs 4."""

    def __init__(self, fails: int):
        super().__init__(self.reply)
        self.fails = fails
        self.attempts: list[int] = []

    def reply(self, messages, sampling):
        from agentic_repro.harness.llm import request_seed

        prompt = messages[-1]["content"]
        attempt = next(i for i in range(50) if request_seed(42, i) == sampling["seed"])
        self.attempts.append(attempt)
        if attempt < self.fails:
            return "```json\n{\"comprehensiveness\": [}\n```"         # not JSON, no scores named: asked again
        crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", prompt, re.DOTALL).group(1))
        return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": 6,
                                "article_2_score": 4} for c in items] for d, items in crit.items()})


@pytest.mark.parametrize("fails", [9, 10])
def test_race_judge_is_asked_exactly_10_times_then_the_problem_is_an_error(tmp_path, monkeypatch, fails):
    """The benchmark config asks an unusable judge 10 times (the release's MAX_RETRIES; it was 3): 9 failures
    are still scored at the 10th attempt; 10 make the problem an error, never a 0, and the run incomplete."""
    pytest.importorskip("bm25s")
    data = _data(tmp_path, n=1)
    spec = _spec(tmp_path, monkeypatch, data)
    judge = FailingJudge(fails)
    m = run(spec, {"scripted": ScriptedBackbone(agent_script), "judge-bb": judge})
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[-1]
    assert judge.attempts == list(range(min(fails + 1, 10)))
    if fails < 10:
        assert p["status"] == "ok" and p["judge"]["attempts"] == 10 and p["score"] == pytest.approx(0.6)
        assert m["complete"]
    else:
        assert p["status"] == "error" and "JudgeError" in p["error"] and "10 attempt" in p["error"]
        assert not m["complete"] and m["n_errors"] == 1
