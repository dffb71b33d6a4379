"""The agents on the real environments with the scripted LLM double: ReAct's prompts on a real ALFWorld game
(AUQ's template with ReAct's few-shot examples and the admissible actions; ReAct's transcript with a thought),
the walkthrough played through the agent loop wins; WebShop on the fixture. Slow: ReAct with the embedded
model in one real ALFWorld game (small step cap, short replies)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone

CONFIGS = Path(__file__).parents[1] / "configs"
FIX = Path(__file__).parent / "fixtures" / "webshop"


def _bench(config, **kw):
    cfg = yaml.safe_load((CONFIGS / "benchmark" / f"{config}.yaml").read_text())
    cfg.update(kw)
    return cfg


def _spec(tmp_path, bench_cfg, method="react", **params):
    m = yaml.safe_load((CONFIGS / "method" / f"{method}.yaml").read_text())
    m["params"].update(params)
    spec = make_spec(tmp_path, {k: m[k] for k in ("name", "solver", "params")})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(bench_cfg)
    return spec


def _walkthrough(problem_id):
    from agentic_repro.evaluators.data import data_dir

    return json.loads((data_dir() / "alfworld/json_2.1.1" / problem_id / "game.tw-pddl").read_text())["walkthrough"]


def _alfworld():
    """The real engine, in a thread (no worker process start: the engine itself is what is tested)."""
    cfg = _bench("alfworld", limit=1)
    cfg["env"] = {**cfg["env"], "process": False}
    return cfg


def _game():
    from agentic_repro.envs.alfworld import ALFWorld

    return ALFWorld(_bench("alfworld", limit=1)).load()[0][0]


@pytest.mark.slow  # the real engine (~3-8 s): a cheap end-to-end test
def test_react_auq_prompt_plays_an_alfworld_walkthrough_to_a_win(tmp_path):
    game = _game()
    plan = _walkthrough(game.id)
    prompts = []

    def script(messages, sampling):
        prompts.append(messages)
        step = int(re.search(r"You are now at step (\d+)", messages[-1]["content"]).group(1))
        return f"<think>following the plan</think>\n<action>{plan[step - 1]}</action>"
    spec = _spec(tmp_path, _alfworld(), elicit_confidence="none")
    metrics = run(spec, ScriptedBackbone(script))
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "ok" and metrics["score"] == 1.0 and pred["episodes"][0]["success"] is True
    assert len(prompts) == len(plan) and pred["trace"]["episodes"][0]["wasted_steps"] == 0
    system, user = prompts[0][0]["content"], prompts[0][1]["content"]
    assert system == "You are an expert agent operating in the ALFRED Embodied Environment."
    assert "Here are examples of solving similar tasks" in user and user.count("Your task is to:") >= 3
    assert "Your admissible actions of the current situation are: ['" in user and "Welcome to TextWorld" not in user
    assert "<think> </think> tags" in user and "Prior to this step" not in user
    later = prompts[2][1]["content"]
    assert "Prior to this step, you have already taken 2 step(s)." in later and "Step 2:\nObservation:" in later


@pytest.mark.slow
def test_react_transcript_style_takes_a_thought_as_a_step(tmp_path):
    game = _game()
    plan = ["think: I should follow the plan.", *_walkthrough(game.id)]
    prompts = []

    def script(messages, sampling):
        prompts.append(messages[-1]["content"])
        assert sampling.get("stop") == ["\n"]
        return plan[len(prompts) - 1]
    spec = _spec(tmp_path, _alfworld(), style="react", elicit_confidence="none")
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    assert prompts[0].startswith("Interact with a household to solve a task. Here are two examples.\n")
    assert "Here is the task:\nYou are in the middle of a room" in prompts[0] and prompts[0].count("> think:") >= 2
    assert "> think: I should follow the plan.\nOK.\n>" in prompts[1]
    steps = [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]
    assert steps[0]["action"] == plan[0] and steps[0]["extra"]["valid"] and len(steps) == len(plan)


def _webshop():
    return _bench("webshop", name="webshop-fixture", allow_unverified_data=True,
                  files={"products": str(FIX / "items_shuffle_1000.json"),
                         "attributes": str(FIX / "items_ins_v2_1000.json"),
                         "human": str(FIX / "items_human_ins.json")}, limit=2)


def test_react_buys_on_the_webshop_fixture(tmp_path):
    from agentic_repro.envs.webshop.benchmark import WebShop

    problems = WebShop(_webshop()).load()[0]
    plans = {}
    for p in problems:  # the test is the scorer side: it reads the goal to script a perfect purchase
        g = p.gold
        plans[g["instruction_text"]] = [f"search[{g['name']}]", f"click[{g['asin']}]",
                                        *[f"click[{o}]" for o in g["goal_options"]], "click[Buy Now]"]

    def script(messages, sampling):
        text = messages[-1]["content"]
        goal = next(k for k in plans if k in text)
        step = int(re.search(r"You are now at step (\d+)", text).group(1))
        return f"<action>{plans[goal][step - 1]}</action>"
    spec = _spec(tmp_path, _webshop(), elicit_confidence="none")
    metrics = run(spec, ScriptedBackbone(script))
    preds = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")
    assert metrics["score"] == 1.0 and all(p["status"] == "ok" and p["score"] == 1.0 for p in preds)
    assert len(preds) == 2


@pytest.mark.slow
def test_react_with_the_embedded_model_in_a_real_alfworld_game(tmp_path):
    """ReAct's transcript style (one line per step, stop at the newline: short replies), 2 steps."""
    from tests.conftest import check_run_files, run_e2e

    spec, metrics = run_e2e(tmp_path, ["benchmark=alfworld", "method=react", "backbone=local", "limit=1",
                                       "benchmark.env.max_steps=2", "backbone.sampling.max_tokens=24",
                                       "method.params.style=react", "method.params.few_shot=0",
                                       "method.params.elicit_confidence=none", "method.params.window=1"])
    preds = check_run_files(spec, metrics, 1)
    p = preds[0]
    assert p["status"] == "ok", p.get("error")
    ep = p["trace"]["episodes"][0]
    assert ep["steps"] == 2 and p["episodes"][0]["steps"] == 2 and p["calls"] == 2
    assert ep["confidences"] == [None, None]  # nothing elicited: missing, never a number
    steps = [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]
    assert len(steps) == 2 and all(isinstance(t["extra"]["valid"], bool) and "raw" in t["extra"] for t in steps)
    assert ep["wasted_steps"] == sum(not t["extra"]["valid"] for t in steps)
    assert p["score"] == float(bool(p["episodes"][0]["success"]))


def test_webshop_transcript_prompt_and_a_missing_prompt_file(tmp_path, monkeypatch):
    from agentic_repro.agents.loop import AgentState, Turn
    from agentic_repro.agents.prompts import PromptFileMissing, react_examples, react_messages

    first = "WebShop \nInstruction:  \ni want red shoes \n[Search]  "
    st = AgentState(task="i want red shoes", observation="OK.", actions=None, first_observation=first,
                    turns=[Turn(first, "think[find shoes]", "r", result="OK.")], memory=["Plan: search better"])
    text = react_messages(st, "webshop", examples=react_examples("webshop", None, 1))[0]["content"]
    assert text.startswith("Webshop \nInstruction:  \ni would like a 3 ounce bottle")  # ReAct's prompt1
    assert "Your memory for the task below:\nTrial 0:\nPlan: search better" in text
    assert f"{first}\n\nAction: think[find shoes]\nObservation: OK.\n\nAction:" in text
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tmp_path))
    with pytest.raises(PromptFileMissing, match="make data"):
        react_examples("alfworld", "pick_and_place_simple", 2, data_dir=str(tmp_path / "none"))


@pytest.mark.slow
def test_react_with_the_embedded_model_on_the_webshop_fixture(tmp_path):
    """The embedded model shops on the fixture (never reported as WebShop): 2 steps, short replies."""
    from tests.conftest import run_e2e

    files = {k: str(FIX / v) for k, v in (("products", "items_shuffle_1000.json"),
                                          ("attributes", "items_ins_v2_1000.json"),
                                          ("human", "items_human_ins.json"))}
    spec, metrics = run_e2e(tmp_path, ["benchmark=webshop", "method=react", "backbone=local", "limit=1",
                                       "benchmark.name=webshop-fixture", "benchmark.allow_unverified_data=true",
                                       *[f"benchmark.files.{k}={v}" for k, v in files.items()],
                                       "benchmark.env.max_steps=2", "benchmark.env.process=false",
                                       "backbone.sampling.max_tokens=24", "method.params.style=react",
                                       "method.params.few_shot=0", "method.params.elicit_confidence=none"])
    p = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert p["status"] == "ok", p.get("error")
    ep = p["trace"]["episodes"][0]
    assert p["calls"] == ep["calls"] == ep["steps"] and 1 <= ep["steps"] <= 2
    assert metrics["complete"] and p["score"] in (0.0, 1.0)
