"""AUQ's variants through the runner on the scripted counter environment with the scripted LLM double: calls
per step by stage, System-2 triggers, the N and D limits, S_cons selection, memory expansion (limited memory
only), the UAM memory format, missing confidences recorded (auq/method.py)."""
from __future__ import annotations

import re
from collections import Counter

import pytest

from agentic_repro.auq.metrics import trajectory_of
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.scripted_env import counter_bench_cfg, counter_data

REFLECT = "Before this action is executed, reflect on it."
EXPAND = "The full history of this episode is now shown above."


@pytest.fixture
def counter(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    return root


def _spec(tmp_path, counter, goals, variant, *, max_steps=10, **params):
    counter_data(counter, goals=goals)
    spec = make_spec(tmp_path, {"name": f"auq_{variant}", "solver": "agentic_repro.auq.method:AUQ",
                                "params": {"variant": variant, "few_shot": 0, **params}})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(counter_bench_cfg(max_steps=max_steps, process=False))
    return spec


def _now(text):
    k = int(re.search(r"current observation is: counter at (-?\d+)", text).group(1))
    goal = int(re.search(r"counter to (-?\d+)", text).group(1))
    return k, goal


def _right(text):
    k, goal = _now(text)
    return "inc" if k < goal else "dec" if k > goal else "stop"


def reply(action, conf, expl="because"):
    c = "" if conf is None else f"<confidence>{conf}</confidence>"
    return f"<think>thinking</think><action>{action}</action>{c}<explanation>{expl}</explanation>"


def _stages(spec):
    return Counter(c["stage"] for c in read_jsonl_tolerant(spec.out_dir / "calls.jsonl"))


def _steps(spec):
    return [t for t in read_jsonl_tolerant(spec.out_dir / "trajectories.jsonl") if t["event"] == "step"]


def _pred(spec):
    return read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]


def test_forward_one_call_per_step_confidence_kept_in_memory(tmp_path, counter):
    seen = []

    def script(messages, sampling):
        text = messages[-1]["content"]
        seen.append(text)
        assert REFLECT not in text
        return reply(_right(text), 0.3, "unsure about the goal")   # low confidence: Forward never reflects

    spec = _spec(tmp_path, counter, [2], "forward")
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    assert _stages(spec) == {"act": 3}
    steps = _steps(spec)
    assert [s["extra"]["confidence"] for s in steps] == [0.3] * 3
    assert all(s["extra"]["auq"]["system2"] is False for s in steps)
    assert "After your action, you MUST provide:" in seen[0]                          # the elicitation
    assert "<confidence>0.3</confidence>\n<explanation>unsure about the goal</explanation>" in seen[1]  # UAM memory
    p = _pred(spec)
    assert p["trace"]["system2_triggers"] == 0 and p["calls"] == 3


def test_inverse_triggers_below_tau_and_reflects_with_the_explanation_as_cue(tmp_path, counter):
    prompts = []

    def script(messages, sampling):
        text = messages[-1]["content"]
        if REFLECT in text:
            prompts.append((text, sampling))
            return reply(_right(text), 0.9)                       # confident after one reflection
        return reply(_right(text), 0.5, "maybe the counter is wrong")

    spec = _spec(tmp_path, counter, [1], "inverse")
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    st = _stages(spec)
    assert st == {"act": 2, "uar_reflect": 6}                     # 2 steps x (1 + N=3 paths x 1 turn)
    assert all(s["extra"]["calls"] == 4 for s in _steps(spec))
    text, sampling = prompts[0]
    assert "<explanation>maybe the counter is wrong</explanation>" in text     # the rational cue
    assert text.count("After your action, you MUST provide:") == 1 and text.index(REFLECT) < \
        text.index("After your action, you MUST provide:")                     # elicitation last
    assert sampling["temperature"] == 0.7
    # UAR-only keeps ReAct's history (no confidences in memory)
    assert "<confidence>0.9</confidence>\n<explanation>" not in prompts[-1][0]
    a = _steps(spec)[0]["extra"]["auq"]
    assert a["system2"] and a["trigger"] == "low_confidence" and a["c_init"] == 0.5 and a["c_final"] == 0.9
    assert len(a["rounds"]) == 1 and [len(p) for p in a["rounds"][0]["paths"]] == [1, 1, 1]
    assert _pred(spec)["trace"]["system2_triggers"] == 2


def test_confident_steps_do_not_trigger_and_d_limits_refinement(tmp_path, counter):
    spec = _spec(tmp_path, counter, [1], "dual")
    assert run(spec, ScriptedBackbone(lambda m, s: reply(_right(m[-1]["content"]), 0.85)))["score"] == 1.0
    assert _stages(spec) == {"act": 2}                             # 0.85 is not < tau = 0.85

    spec = _spec(tmp_path / "d", counter, [1], "dual", max_steps=1)
    assert run(spec, ScriptedBackbone(lambda m, s: reply(_right(m[-1]["content"]), 0.2)))["score"] == 0.0
    # one step: 1 + N=3 paths x (1 sample + D=3 refinements); full memory: no expansion
    assert _stages(spec) == {"act": 1, "uar_reflect": 12}
    a = _steps(spec)[0]["extra"]["auq"]
    assert [len(p) for p in a["rounds"][0]["paths"]] == [4, 4, 4] and not a["expanded"]

    spec = _spec(tmp_path / "n", counter, [1], "dual", max_steps=1, n_paths=2, max_refinements=1)
    run(spec, ScriptedBackbone(lambda m, s: reply(_right(m[-1]["content"]), 0.2)))
    assert _stages(spec) == {"act": 1, "uar_reflect": 4}


def test_selection_is_consistency_weighted(tmp_path, counter):
    n_reflect = []

    def script(messages, sampling):
        text = messages[-1]["content"]
        if REFLECT in text:   # the three paths: two say "dec" (0.9), one says "inc" (0.95), whatever the order
            n_reflect.append(1)
            return reply("dec", 0.9) if len(n_reflect) <= 2 else reply("inc", 0.95)
        return reply("inc", 0.1)

    spec = _spec(tmp_path, counter, [3], "inverse", max_steps=1)
    run(spec, ScriptedBackbone(script))
    step = _steps(spec)[0]
    sel = step["extra"]["auq"]["rounds"][0]["selection"]
    assert sel["votes"] == {"dec": 2, "inc": 1}
    assert sel["s_cons"]["dec"] == pytest.approx(0.6) and sel["s_cons"]["inc"] == pytest.approx(0.95 / 3)
    # S_cons, not the single most confident path: "dec" is executed, with its own confidence
    assert step["action"] == "dec" and step["extra"]["auq"]["c_final"] == 0.9 and step["extra"]["confidence"] == 0.9


def test_memory_expansion_only_in_limited_memory_and_once(tmp_path, counter):
    expand_prompts, window_prompts = [], []

    def script(messages, sampling):
        text = messages[-1]["content"]
        if EXPAND in text:
            expand_prompts.append(text)
            return reply(_right(text), 0.95)
        if REFLECT in text:
            window_prompts.append(text)
            return reply(_right(text), 0.4)
        return reply(_right(text), 0.3)

    spec = _spec(tmp_path, counter, [3], "dual", window=1, max_refinements=1, max_steps=3)
    run(spec, ScriptedBackbone(script))
    st = _stages(spec)
    # 3 steps x (1 act + 3 paths x 2 turns); expansion (3 paths x 1 turn) only at step 3, the first whose window
    # (h=1) hides an earlier step
    assert st == {"act": 3, "uar_reflect": 18, "uar_expand": 3}
    assert [s["extra"]["auq"]["expanded"] for s in _steps(spec)] == [False, False, True]
    a = _steps(spec)[2]["extra"]["auq"]
    assert a["expanded"] and [r["phase"] for r in a["rounds"]] == ["reflect", "expand"] and a["c_final"] == 0.95
    # the expansion prompt shows the full history (both earlier steps), the window prompt only the last one
    last = expand_prompts[-1]
    assert "Step 1:" in last and "Step 2:" in last
    assert "Step 2:" in window_prompts[-1] and "Step 1:" not in window_prompts[-1]
    assert _pred(spec)["trace"]["expansions"] == 1

    spec = _spec(tmp_path / "always", counter, [3], "dual", window=1, max_refinements=1, max_steps=3,
                 expansion_when="always")
    run(spec, ScriptedBackbone(script))
    assert _stages(spec)["uar_expand"] == 9 and _pred(spec)["trace"]["expansions"] == 3

    spec = _spec(tmp_path / "full", counter, [3], "dual", max_refinements=1, max_steps=3)
    run(spec, ScriptedBackbone(script))
    assert "uar_expand" not in _stages(spec)

    spec = _spec(tmp_path / "off", counter, [3], "dual", window=1, max_refinements=1, max_steps=3,
                 memory_expansion=False)
    run(spec, ScriptedBackbone(script))
    assert "uar_expand" not in _stages(spec)


def test_missing_confidence_is_recorded_and_triggers_reflection(tmp_path, counter):
    def script(messages, sampling):
        text = messages[-1]["content"]
        if REFLECT in text:
            return reply(_right(text), "high")          # malformed: still missing after reflection
        return reply(_right(text), None)

    spec = _spec(tmp_path, counter, [1], "dual", max_refinements=0)
    assert run(spec, ScriptedBackbone(script))["score"] == 1.0
    steps = _steps(spec)
    assert [s["extra"]["confidence"] for s in steps] == [None, None]
    assert steps[0]["extra"]["auq"]["trigger"] == "missing_confidence"
    assert steps[0]["extra"]["confidence_status"] == "malformed"
    t = trajectory_of(_pred(spec))
    assert t.confidences == (None, None) and t.n_missing == 2            # never read as 1.0 or 0.0

    spec = _spec(tmp_path / "act", counter, [1], "dual", missing_confidence="act")
    run(spec, ScriptedBackbone(script))
    assert _stages(spec) == {"act": 2}


def test_bad_options_are_refused():
    from agentic_repro.auq.method import AUQ

    with pytest.raises(ValueError):
        AUQ(variant="both")
    with pytest.raises(ValueError):
        AUQ(window=0)
    with pytest.raises(ValueError):
        AUQ(missing_confidence="guess")


def test_dual_on_the_webshop_fixture(tmp_path):
    """WebShop's text interface (the hand-made fixture, never reported as WebShop): search[...] proposals are
    reflected on and voted on like any action; the purchase is scored by the environment."""
    import yaml

    from tests.test_envs_runner import CONFIGS, FIX

    cfg = yaml.safe_load((CONFIGS / "webshop.yaml").read_text())
    cfg.update(name="webshop-fixture", allow_unverified_data=True, limit=1,
               files={"products": str(FIX / "items_shuffle_1000.json"),
                      "attributes": str(FIX / "items_ins_v2_1000.json"), "human": str(FIX / "items_human_ins.json")})
    cfg["env"] = {**cfg["env"], "process": False, "max_steps": 6}

    def script(messages, sampling):
        text = messages[-1]["content"]
        offered = re.findall(r"'([^']+)'", text.split("Your admissible actions of the current situation are:")[-1]
                             .split("\n")[0])
        if any(a.startswith("search[") for a in offered):
            task = re.search(r"Your task is to: (.+)", text).group(1)
            q = " ".join(task.split()[2:6])                                     # "i want a solid wood ..."
            return reply(f"search[ {q} ]", 0.9 if REFLECT in text else 0.5)   # reflected, then searched
        clicks = [a for a in offered if a.lower() == "click[buy now]"] or \
            [a for a in offered if re.match(r"click\[B[0-9A-Z]{9}\]", a, re.IGNORECASE)] or offered
        return reply(clicks[0], 0.95)

    spec = make_spec(tmp_path, {"name": "auq_dual", "solver": "agentic_repro.auq.method:AUQ",
                                "params": {"variant": "dual", "few_shot": 0}})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(cfg)
    run(spec, ScriptedBackbone(script))
    p = _pred(spec)
    assert p["status"] == "ok" and p["score_details"]["rule"] == "environment"
    steps = _steps(spec)
    assert steps[0]["action"].startswith("search[") and steps[-1]["action"].lower() == "click[buy now]"
    a = steps[0]["extra"]["auq"]
    votes = a["rounds"][0]["selection"]["votes"]
    assert a["trigger"] == "low_confidence" and list(votes.values()) == [3] and next(iter(votes)).startswith("search[")
    assert _stages(spec)["uar_reflect"] == 3 and all(not s["extra"]["auq"]["system2"] for s in steps[1:])
