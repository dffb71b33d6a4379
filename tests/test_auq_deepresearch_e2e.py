"""End-to-end: AUQ's research loop on one real DeepResearch Bench task through the real HTTP client and the
embedded model (planner, System 2 forced by tau = 1.0, one researcher over the BM25 fixture corpus, the analyst),
then RACE on the report it wrote. The judge is the scripted double: the embedded 0.5B model cannot write RACE's
four-dimension JSON for a ~3k-token prompt in reasonable time on 2 cores (and its judgement would mean nothing);
the double reads the real judge prompt, checks the report in it, and scores every criterion. The reference
article is a stand-in (the real ones are not in ../shared: `make data` needs internet)."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import _SERVERS, check_run_files, compose
from tests.doubles import ScriptedBackbone
from tests.test_auq_deepresearch import JUDGE_BB, data_dir


@pytest.mark.slow
def test_auq_research_loop_on_one_task_through_the_embedded_model(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    from agentic_repro.harness.backbones import build_backbone
    from agentic_repro.harness.runner import Runner, spec_from_config

    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data_dir(tmp_path, n=1)))
    cfg = compose(["method=auq_deep_research", "benchmark=deepresearch_bench", "backbone=local", "limit=1",
                   "benchmark.search.corpus=corpus.jsonl", "backbone.sampling.max_tokens=48",
                   "method.params.tau=1.0", "method.params.n_paths=2", "method.params.max_refinements=0",
                   "method.params.n_queries=1", "method.params.k=1",
                   f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.sqlite'}",
                   "runner.progress=false"])
    cfg["roles"] = {"judge": dict(JUDGE_BB)}
    spec = spec_from_config(cfg)
    seen: list[str] = []

    def judge(messages, sampling):
        prompt = messages[-1]["content"]
        seen.append(prompt)
        crit = json.loads(re.search(r"<criteria_list>\s*(.*?)\s*</criteria_list>", prompt, re.DOTALL).group(1))
        return json.dumps({d: [{"criterion": c["criterion"], "analysis": "a", "article_1_score": 5,
                                "article_2_score": 5} for c in items] for d, items in crit.items()})

    async def go():
        local = await build_backbone(spec.backbone_cfg, run_dir=spec.out_dir, seed=spec.seed,
                                     servers=_SERVERS[0] if _SERVERS else None)
        return await Runner(spec, backbone={spec.backbone_cfg["name"]: local,
                                            "judge-bb": ScriptedBackbone(judge, name="judge-bb")}).run()

    metrics = asyncio.run(go())
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    p = preds[0]
    assert p["status"] == "ok", p["error"]
    assert metrics["complete"] and p["score"] == pytest.approx(0.5)           # 5 vs 5 on every criterion
    a = p["trace"]["rounds"][0]["auq"]
    assert a["system2"] == (a["c_init"] is None or a["c_init"] < 1.0)        # tau = 1.0: System 2 unless sure
    calls = read_jsonl_tolerant(spec.out_dir / "calls.jsonl")
    stages = [c["stage"] for c in calls]
    assert stages.count("plan") == 1 and stages.count("research") == 1 and stages.count("report") == 1
    assert stages.count("uar_reflect") == (2 if a["system2"] else 0) and stages.count("judge") == 1
    if a["system2"]:
        assert {c["temperature"] for c in calls if c["stage"] == "uar_reflect"} == {0.7}
    assert [c["name"] for c in p["tool_calls"]] == ["search"] and p["trace"]["closed_book"] is False
    assert p["raw_output"].strip() and p["raw_output"].strip() in seen[0]    # the judge read the model's report
    check_run_files(spec, metrics, 1)
