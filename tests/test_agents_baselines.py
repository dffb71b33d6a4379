"""Each agent baseline's control flow on the scripted counter environment with the scripted LLM double:
calls per step by stage, Reflexion's trials and memory, Self-Reflection's validate/revise, CoT-SC's vote,
confidence elicitation (inline / separate) and what is recorded."""
from __future__ import annotations

import re
from collections import Counter

import pytest

from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.scripted_env import counter_bench_cfg, counter_data

SEPARATE = "Your action for this step is the one you gave above."


@pytest.fixture
def counter(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    return root


def _spec(tmp_path, counter, goals, solver, *, max_steps=10, **params):
    counter_data(counter, goals=goals)
    spec = make_spec(tmp_path, {"name": "a", "solver": solver, "params": params})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(counter_bench_cfg(max_steps=max_steps, process=False))
    return spec


def _now(messages):
    text = messages[-1]["content"]
    k = int(re.search(r"current observation is: counter at (-?\d+)", text).group(1))
    goal = int(re.search(r"counter to (-?\d+)", text).group(1))
    return k, goal, text


def walker(messages, sampling, conf="0.8"):
    text = messages[-1]["content"]
    if text.startswith(SEPARATE):
        return f"<confidence>{conf}</confidence><explanation>sure</explanation>"
    k, goal, _ = _now(messages)
    a = "inc" if k < goal else "dec" if k > goal else "stop"
    return f"<think>at {k}</think><action>{a}</action>"


def _stages(spec):
    return Counter(c["stage"] for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl"))


def _preds(spec):
    return read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")


def _steps(spec):
    return [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]


def test_react_one_call_per_step_and_separate_confidence(tmp_path, counter):
    spec = _spec(tmp_path, counter, [2], "agentic_repro.baselines.react:react", elicit_confidence="none")
    assert run(spec, ScriptedBackbone(walker))["score"] == 1.0
    assert _stages(spec) == {"act": 3}
    assert _preds(spec)[0]["trace"]["episodes"][0]["confidences"] == [None] * 3  # no native confidence
    spec = _spec(tmp_path / "sep", counter, [2], "agentic_repro.baselines.react:react", elicit_confidence="separate")
    assert run(spec, ScriptedBackbone(walker))["score"] == 1.0
    assert _stages(spec) == {"act": 3, "confidence": 3}
    steps = _steps(spec)
    assert [s["extra"]["confidence"] for s in steps] == [0.8] * 3 and all(s["extra"]["calls"] == 2 for s in steps)
    assert steps[0]["extra"]["think"] == "at 0" and steps[0]["extra"]["explanation"] == "sure"


def test_react_inline_elicitation_puts_the_instruction_in_the_act_prompt(tmp_path, counter):
    seen = []

    def script(messages, sampling):
        seen.append(messages[-1]["content"])
        return walker(messages, sampling) + "<confidence>0.6</confidence>"
    spec = _spec(tmp_path, counter, [1], "agentic_repro.baselines.react:react", elicit_confidence="inline", memory_confidence=True)
    run(spec, ScriptedBackbone(script))
    assert _stages(spec) == {"act": 2} and all("<confidence>...</confidence> tags" in p for p in seen)
    assert "<confidence>0.6</confidence>" in seen[1].split("You are now at step")[0]  # UAM memory format
    assert [s["extra"]["confidence"] for s in _steps(spec)] == [0.6, 0.6]


def test_reflexion_reflects_after_a_failed_trial_and_remembers(tmp_path, counter):
    prompts = []

    def script(messages, sampling):
        text = messages[-1]["content"]
        prompts.append(text)
        if "New plan:" in text:
            return f"Plan: go higher ({len([p for p in prompts if 'New plan:' in p])})"
        k, goal, _ = _now(messages)
        if "Your memory for the task below" not in text:
            return "<action>stop</action>"  # the first trial stops short
        return walker(messages, sampling)
    spec = _spec(tmp_path, counter, [2], "agentic_repro.baselines.reflexion:reflexion", trials=4, stop_on_repeat=False,
                 elicit_confidence="none")
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    p = _preds(spec)[0]
    assert [e["success"] for e in p["episodes"]] == [False, True]
    assert p["trace"]["trials_run"] == 2 and _stages(spec) == {"act": 1 + 3, "reflect": 1}
    reflect = next(x for x in prompts if "New plan:" in x)
    assert "You were unsuccessful in completing the task" in reflect and "> stop" in reflect
    assert "Trial 0:\nPlan: go higher (1)" in [x for x in prompts if "memory for the task" in x][0]


def test_reflexion_memory_keeps_the_last_three_and_trials_are_capped(tmp_path, counter):
    prompts = []

    def script(messages, sampling):
        prompts.append(messages[-1]["content"])
        if "New plan:" in messages[-1]["content"]:
            return f"plan-{sum('New plan:' in x for x in prompts)}"
        return "<action>stop</action>"
    spec = _spec(tmp_path, counter, [2], "agentic_repro.baselines.reflexion:reflexion", trials=5, elicit_confidence="none")
    assert run(spec, ScriptedBackbone(script))["score"] == 0.0
    p = _preds(spec)[0]
    assert len(p["episodes"]) == 5 and _stages(spec) == {"act": 5, "reflect": 4}
    last_act = [x for x in prompts if "New plan:" not in x][-1]
    assert "plan-1" not in last_act and all(f"plan-{i}" in last_act for i in (2, 3, 4))
    last_reflect = [x for x in prompts if "New plan:" in x][-1]
    assert "Plans from past attempts:" in last_reflect and "plan-1" in last_reflect and "plan-3" in last_reflect


def test_reflexion_ends_a_trial_that_repeats_its_action(tmp_path, counter):
    spec = _spec(tmp_path, counter, [5], "agentic_repro.baselines.reflexion:reflexion", trials=2, elicit_confidence="none")
    run(spec, ScriptedBackbone(lambda m, s: "plan" if "New plan:" in m[-1]["content"] else "<action>dec</action>"))
    eps = _preds(spec)[0]["episodes"]
    assert [e["steps"] for e in eps] == [2, 2] and not any(e["done"] for e in eps)


@pytest.mark.parametrize("verdict,calls", [("Verdict: valid", 2), ("Verdict: invalid", 3)])
def test_self_reflection_validates_every_step(tmp_path, counter, verdict, calls):
    def script(messages, sampling):
        text = messages[-1]["content"]
        if "Validate the proposed action" in text:
            assert "Proposed action for this step:" in text and "<action>" not in text.split("Proposed")[1][:5]
            return f"looks fine\n{verdict}"
        return walker(messages, sampling)
    spec = _spec(tmp_path, counter, [1], "agentic_repro.baselines.agent_self_reflection:agent_self_reflection",
                 elicit_confidence="none")
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    expect = {"act": 2, "validate": 2} if calls == 2 else {"act": 2, "validate": 2, "revise": 2}
    assert _stages(spec) == expect
    steps = _steps(spec)
    assert all(s["extra"]["calls"] == calls for s in steps)
    refl = steps[0]["extra"]["reflections"][0]
    assert refl["valid"] is (calls == 2) and ("revised" in refl) is (calls == 3)


def test_cot_sc_votes_over_normalised_actions(tmp_path, counter):
    def script(messages, sampling):
        k, goal, _ = _now(messages)
        if k >= goal:
            return "<action>stop</action>"
        return ["<action>INC.</action>", "<action>dec</action>", "<action>inc</action>"][sampling["choice"]]
    spec = _spec(tmp_path, counter, [2], "agentic_repro.baselines.agent_cot_sc:agent_cot_sc", n=3)
    assert run(spec, ScriptedBackbone(script, supports_n=True))["score"] == 1.0
    assert _stages(spec) == {"sample": 9}
    steps = _steps(spec)
    assert [s["action"] for s in steps] == ["inc", "inc", "stop"]  # "INC." and "inc" agree
    assert steps[0]["extra"]["vote_share"] == pytest.approx(2 / 3) and steps[0]["extra"]["confidence"] == pytest.approx(2 / 3)
    assert steps[0]["extra"]["calls"] == 3 and steps[0]["extra"]["votes"] == {"inc": 2, "dec": 1}


def test_cot_sc_inadmissible_samples_do_not_vote(tmp_path, counter):
    def script(messages, sampling):
        k, goal, _ = _now(messages)
        if k >= goal:
            return "<action>stop</action>"
        return ["<action>fly</action>", "garbage", "<action>inc</action>"][sampling["choice"]]
    spec = _spec(tmp_path, counter, [1], "agentic_repro.baselines.agent_cot_sc:agent_cot_sc", n=3, elicit_confidence="inline")
    run(spec, ScriptedBackbone(script, supports_n=True))
    steps = _steps(spec)
    assert steps[0]["action"] == "inc" and steps[0]["extra"]["valid"]
    assert steps[0]["extra"]["confidence"] is None  # inline: no sample gave a confidence -> missing, not 1/3


@pytest.mark.parametrize("method", ["react", "reflexion", "agent_self_reflection", "agent_cot_sc"])
def test_method_configs_compose_with_label_and_deviations(method):
    from agentic_repro.harness.runner import spec_from_config
    from tests.conftest import compose

    spec = spec_from_config(compose(["benchmark=alfworld", f"method={method}", "backbone=local"]))
    m = spec.method_cfg
    assert m["name"] == method and m["label"] and m["deviations"] and m["params"]["window"] is None
    assert m["params"]["style"] == "auq" and m["params"]["elicit_confidence"] in ("none", "inline", "separate")


def test_bad_options_are_refused():
    from agentic_repro.agents.policy import ReactPolicy

    with pytest.raises(ValueError, match="prompt style"):
        ReactPolicy(style="fancy")
    with pytest.raises(ValueError, match="elicit_confidence"):
        ReactPolicy(elicit_confidence="sometimes")
    assert ReactPolicy(elicit_confidence=True).elicit_mode == "inline"
