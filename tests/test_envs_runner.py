"""ALFWorld and WebShop through the runner: a scripted policy plays fixed actions through ``ctx.env()``
(worker processes, trajectories, the score from the environment), a crashed engine is an error, and one
slow test where the real embedded model acts in a real ALFWorld game."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.types import Solution
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone

CONFIGS = Path(__file__).parents[1] / "configs" / "benchmark"
FIX = Path(__file__).parent / "fixtures" / "webshop"


async def play_plan(problem, ctx, *, plans: dict, default: list | None = None) -> Solution:
    """The scripted policy: the fixed actions of ``plans[problem.id]``, then stop (no model call)."""
    plan = plans.get(problem.id, default or [])
    trace: dict = {}
    async with ctx.env() as s:
        res = await s.reset()
        trace["first_observation"] = res.observation
        trace["offered"] = len(res.actions or [])
        for action in plan:
            if res.done:
                break
            res = await s.step(action, scripted=True)
        trace.update(done=res.done, truncated=res.truncated)
    return Solution("played the plan: SUCCESS", confidence=1.0, trace=trace)


async def model_policy(problem, ctx, *, steps: int = 2) -> Solution:
    """The embedded model picks each action from the observation and the admissible actions."""
    async with ctx.env() as s:
        res = await s.reset()
        for _ in range(steps):
            if res.done:
                break
            prompt = (f"You are in a text game.\n{res.observation}\nAdmissible actions: {', '.join(res.actions)}\n"
                      "Reply with exactly one admissible action and nothing else.")
            text = await ctx.ask(prompt, stage="act")
            line = (text.strip().splitlines() or [""])[0].strip()
            res = await s.step(line, raw=text)
    return Solution(line, trace={"steps": s.steps})


def _spec(tmp_path, bench_cfg, plans, *, default=None, runner=None):
    method = {"name": "plan", "solver": "tests.test_envs_runner:play_plan",
              "params": {"plans": plans, "default": default}}
    spec = make_spec(tmp_path, method, runner={"max_concurrent_problems": 2, **(runner or {})})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(bench_cfg)
    return spec


def _files(spec):
    out = spec.out_dir
    return (read_jsonl_tolerant(out / "predictions.jsonl"), read_jsonl_tolerant(out / "trajectories.jsonl"),
            json.loads((out / "metrics.json").read_text()))


def _alfworld(**kw):
    cfg = yaml.safe_load((CONFIGS / "alfworld.yaml").read_text())
    cfg.update(kw)
    return cfg


def _walkthrough(problem_id: str) -> list[str]:
    from agentic_repro.evaluators.data import data_dir

    return json.loads((data_dir() / "alfworld/json_2.1.1" / problem_id / "game.tw-pddl").read_text())["walkthrough"]


def test_alfworld_scripted_policy_through_the_runner(tmp_path):
    from agentic_repro.envs.alfworld import ALFWorld

    games = [p.id for p in ALFWorld(_alfworld(limit=2)).load()[0]]
    plans = {games[0]: _walkthrough(games[0]), games[1]: ["look", "inventory", "look"]}
    spec = _spec(tmp_path, _alfworld(limit=2), plans)
    metrics = run(spec, ScriptedBackbone(lambda *a, **k: "unused"))
    preds, traj, _ = _files(spec)
    by_id = {p["id"]: p for p in preds}
    assert {k: (v["status"], v["score"]) for k, v in by_id.items()} == {games[0]: ("ok", 1.0), games[1]: ("ok", 0.0)}
    assert metrics["score"] == pytest.approx(0.5) and metrics["n_errors"] == 0
    won = by_id[games[0]]["episodes"][0]
    assert won["success"] is True and won["steps"] == len(plans[games[0]]) and won["done"] and not won["truncated"]
    assert by_id[games[1]]["episodes"][0]["success"] is False  # the claim "SUCCESS" is not believed
    steps = [t for t in traj if t["problem_id"] == games[0] and t["event"] == "step"]
    assert [t["action"] for t in steps] == plans[games[0]] and all(t["extra"] == {"scripted": True} for t in steps)
    assert "Your task is to:" in by_id[games[0]]["trace"]["first_observation"] and by_id[games[0]]["trace"]["offered"]


def test_alfworld_step_cap_truncates(tmp_path):
    cfg = _alfworld(limit=1)
    cfg["env"] = {**cfg["env"], "max_steps": 4}
    spec = _spec(tmp_path, cfg, {}, default=["look"] * 10)
    run(spec, ScriptedBackbone(lambda *a, **k: "unused"))
    preds, traj, _ = _files(spec)
    ep = preds[0]["episodes"][0]
    assert preds[0]["status"] == "ok" and preds[0]["score"] == 0.0
    assert ep["steps"] == 4 and ep["truncated"] and preds[0]["trace"]["truncated"]


def test_a_crashed_alfworld_engine_is_an_error_not_a_zero(tmp_path, monkeypatch):
    from agentic_repro.evaluators.data import data_dir

    src = sorted((data_dir() / "alfworld/json_2.1.1/valid_unseen").glob("*/*/game.tw-pddl"))[0]
    root = tmp_path / "data"
    bad = root / "alfworld/json_2.1.1/valid_unseen" / src.parent.parent.name / src.parent.name / "game.tw-pddl"
    bad.parent.mkdir(parents=True)
    bad.write_text("{ not a game")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))  # the worker processes inherit it
    spec = _spec(tmp_path, _alfworld(allow_partial_split=True), {}, default=["look"])
    metrics = run(spec, ScriptedBackbone(lambda *a, **k: "unused"))
    preds, _, _ = _files(spec)
    assert preds[0]["status"] == "error" and "nvironment" in preds[0]["error"]
    assert metrics["n_errors"] == 1 and metrics["complete"] is False


def _webshop_cfg():
    cfg = yaml.safe_load((CONFIGS / "webshop.yaml").read_text())
    cfg.update(name="webshop-fixture", allow_unverified_data=True,
               files={"products": str(FIX / "items_shuffle_1000.json"),
                      "attributes": str(FIX / "items_ins_v2_1000.json"),
                      "human": str(FIX / "items_human_ins.json")})
    return cfg


def test_webshop_fixture_scripted_policy_through_the_runner(tmp_path):
    from agentic_repro.envs.webshop.benchmark import WebShop

    problems = WebShop(_webshop_cfg()).load()[0]
    plans = {}
    for p in problems:  # the test is the scorer side: it may read the goal to script a perfect purchase
        g = p.gold
        plans[p.id] = [f"search[{g['name']}]", f"click[{g['asin']}]", *[f"click[{o}]" for o in g["goal_options"]],
                       "click[Buy Now]"]
    wrong = problems[0]
    plans[wrong.id] = ["search[coffee mug]", "click[B000MUG000]", "click[Buy Now]"]
    spec = _spec(tmp_path, _webshop_cfg(), plans)
    metrics = run(spec, ScriptedBackbone(lambda *a, **k: "unused"))
    preds, traj, _ = _files(spec)
    by_id = {p["id"]: p for p in preds}
    assert len(preds) == 4 and all(p["status"] == "ok" for p in preds)
    assert by_id[wrong.id]["score"] == 0.0 and by_id[wrong.id]["score_details"]["reward"] < 1.0
    for pid in set(by_id) - {wrong.id}:
        d = by_id[pid]["score_details"]
        assert by_id[pid]["score"] == 1.0 and d["reward"] == 1.0 and d["reward_parts"]["r_type"] == 1.0
        assert d["noun_tagger"].startswith(("fallback", "spacy"))
    assert metrics["score"] == pytest.approx(0.75)
    meta = json.loads((spec.out_dir / "meta.json").read_text())
    assert "not WebShop" in json.dumps(meta)  # the data record says what it is
    # what the method saw (observations, info, admissible actions) never carries the goal's hidden fields
    seen = json.dumps([{k: t.get(k) for k in ("observation", "info", "actions")} for t in traj])
    assert "price_upper" not in seen and "goal_options" not in seen and "instruction_attributes" not in seen


def test_webshop_without_the_product_files_fails_in_one_line(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "webshop").mkdir(parents=True)
    shutil.copy(FIX / "items_ins_v2_1000.json", root / "webshop")
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    cfg = yaml.safe_load((CONFIGS / "webshop.yaml").read_text())
    spec = _spec(tmp_path, cfg, {})
    with pytest.raises(FileNotFoundError, match=r"items_shuffle_1000\.json, items_human_ins\.json .*make data"):
        run(spec, ScriptedBackbone(lambda *a, **k: "unused"))


@pytest.mark.slow
def test_embedded_model_acts_in_a_real_alfworld_game(tmp_path):
    from agentic_repro.harness.runner import run_spec, spec_from_config
    from tests.conftest import _SERVERS, compose

    cfg = compose(["benchmark=alfworld", "backbone=local", "limit=1", "backbone.sampling.max_tokens=24",
                   f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.sqlite'}",
                   "runner.progress=false"])
    cfg["method"] = {"name": "model_policy", "solver": "tests.test_envs_runner:model_policy", "params": {"steps": 2}}
    spec = spec_from_config(cfg)
    metrics = run_spec(spec, servers=_SERVERS[0] if _SERVERS else None)
    preds, traj, _ = _files(spec)
    p = preds[0]
    assert p["status"] == "ok", p["error"]
    assert p["calls"] == 2 and p["completion_tokens"] > 0
    ep = p["episodes"][0]
    assert ep["steps"] == 2 and len([t for t in traj if t["event"] == "step"]) == 2
    assert all(isinstance(t["action"], str) and t["observation"] for t in traj if t["event"] == "step")
    assert p["score_details"]["rule"] == "environment" and p["score"] in (0.0, 1.0)
    assert p["score"] == float(bool(ep["success"]))  # the environment's verdict
    assert metrics["n"] == 1 and metrics["complete"] is True


@pytest.mark.parametrize("bench", ["alfworld", "webshop"])
def test_benchmark_configs_compose_and_validate(bench):
    from agentic_repro.harness.runner import spec_from_config
    from tests.conftest import compose

    spec = spec_from_config(compose([f"benchmark={bench}", "backbone=local"]))
    assert spec.benchmark_cfg["env"]["max_steps"] == 50 and spec.benchmark_cfg["env"]["process"] is True
