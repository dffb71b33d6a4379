"""The shared agent loop (agents/loop.py) on the scripted counter environment: window, wasted steps (sent or
skipped), the step cap, what each step records, resume after a kill mid-episode; and confidence parsing."""
from __future__ import annotations

import json

import pytest

from agentic_repro.agents.confidence import elicit, parse_confidence, tag_text
from agentic_repro.agents.loop import UNPARSABLE, AgentState, Decision, Turn, run_episode
from agentic_repro.agents.profiles import ALFWorldProfile, Profile, WebShopProfile
from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.types import Solution
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone
from tests.scripted_env import counter_bench_cfg, counter_data, walker_script


async def policy(problem, ctx, *, window=None, invalid_action="send"):
    """Asks the model with the task, the rendered window and the observation; 'bad' = nothing parsable."""
    async def decide(ctx, state):
        prompt = f"NOW {state.observation}\n{state.task}\nHISTORY\n{state.render()}\nEND"
        text = await ctx.ask(prompt, stage="act")
        conf = elicit(text)
        action = None if text.startswith("bad") else text.split("<")[0].strip()
        return Decision(action, text, conf.confidence, conf.explanation, extra={"confidence_status": conf.status})

    async with ctx.env() as s:
        r = await run_episode(ctx, s, decide, window=window, invalid_action=invalid_action)
    return Solution("done", trace={"episodes": [r.summary()]})


def _spec(tmp_path, counter, goals, *, max_steps=10, runner=None, **params):
    counter_data(counter, goals=goals)
    spec = make_spec(tmp_path, {"name": "p", "solver": "tests.test_agents_loop:policy", "params": params},
                     runner=runner)
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(counter_bench_cfg(max_steps=max_steps, process=False))
    return spec


@pytest.fixture
def counter(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    return root


def _load(spec):
    out = spec.out_dir
    return read_jsonl_tolerant(out / "predictions.jsonl"), read_jsonl_tolerant(out / "trajectories.jsonl")


def test_each_step_is_recorded_with_its_confidence_and_validity(tmp_path, counter):
    def script(messages, sampling):
        a = walker_script(messages, sampling)
        return f"{a} <confidence>0.9</confidence><explanation>count</explanation>" if a == "inc" else a
    spec = _spec(tmp_path, counter, [2])
    metrics = run(spec, ScriptedBackbone(script))
    preds, traj = _load(spec)
    assert metrics["score"] == 1.0 and preds[0]["status"] == "ok"
    ep = preds[0]["trace"]["episodes"][0]
    assert ep["actions"] == ["inc", "inc", "stop"] and ep["valid"] == [True] * 3 and ep["wasted_steps"] == 0
    assert ep["confidences"] == [0.9, 0.9, None]  # the missing tag is None, never 1.0 or 0.0
    steps = [t for t in traj if t["event"] == "step"]
    assert [t["extra"]["confidence"] for t in steps] == [0.9, 0.9, None]
    assert [t["extra"]["confidence_status"] for t in steps] == ["ok", "ok", "missing"]
    assert steps[0]["extra"]["explanation"] == "count" and steps[0]["extra"]["calls"] == 1
    assert steps[0]["extra"]["raw"].startswith("inc <confidence>")


def test_memory_window_shows_the_last_h_steps(tmp_path, counter):
    seen = []

    def script(messages, sampling):
        seen.append(messages[-1]["content"])
        return walker_script(messages, sampling)
    run(_spec(tmp_path, counter, [4], window=2), ScriptedBackbone(script))
    hist = [p.split("HISTORY\n")[1].split("\nEND")[0] for p in seen]
    assert hist[0] == "" and hist[1].count("Step ") == 1 and all(h.count("Step ") == 2 for h in hist[2:])
    assert hist[4].startswith("Step 3:") and "Step 4:" in hist[4] and "Step 2:" not in hist[4]
    seen.clear()
    run(_spec(tmp_path / "full", counter, [4]), ScriptedBackbone(script))
    assert seen[4].split("HISTORY\n")[1].count("Step ") == 4  # h = None: the full trajectory


def test_agent_state_render_numbers_steps_and_shows_uam_lines():
    turns = [Turn(f"o{i}", f"a{i}", "r", confidence=0.5 if i % 2 else None, explanation="e", think="t")
             for i in range(1, 6)]
    st = AgentState(task="T", observation="o6", actions=None, turns=turns, window=3)
    assert [t.action for t in st.history()] == ["a3", "a4", "a5"] and len(st.history(None)) == 5
    text = st.render(with_confidence=True)
    assert text.startswith("Step 3:\nObservation: o3\nAction: <think>t</think> <action>a3</action>\n"
                           "<confidence>0.5</confidence>")
    assert "<confidence>missing</confidence>" in text  # a missing confidence is shown as missing
    assert "<confidence>" not in st.render(h=1) and st.render(h=1).startswith("Step 5:")


def test_unparsable_and_inadmissible_actions_are_wasted_recorded_steps(tmp_path, counter):
    replies = iter(["bad reply", "jump", "inc", "stop"])
    spec = _spec(tmp_path, counter, [1])
    metrics = run(spec, ScriptedBackbone(lambda m, s: next(replies)))
    preds, traj = _load(spec)
    ep = preds[0]["trace"]["episodes"][0]
    assert metrics["score"] == 1.0
    assert ep["valid"] == [False, False, True, True] and ep["wasted_steps"] == 2 and ep["steps"] == 4
    steps = [t for t in traj if t["event"] == "step"]
    assert [t["action"] for t in steps] == [UNPARSABLE, "jump", "inc", "stop"]  # sent: the env counted them
    assert preds[0]["episodes"][0]["steps"] == 4


def test_skip_mode_sends_nothing_and_the_loop_applies_the_cap(tmp_path, counter):
    spec = _spec(tmp_path, counter, [1], max_steps=3, invalid_action="skip")
    run(spec, ScriptedBackbone(lambda m, s: "jump"))
    preds, traj = _load(spec)
    ep = preds[0]["trace"]["episodes"][0]
    assert ep["steps"] == 3 and ep["wasted_steps"] == 3 and ep["truncated"] and not ep["success"]
    assert [t["event"] for t in traj] == ["reset", "note", "note", "note"]
    assert all(t["extra"]["wasted"] and t["extra"]["proposed"] == "jump" for t in traj[1:])


def test_skipped_and_sent_steps_share_the_cap(tmp_path, counter):
    replies = iter(["jump", "inc", "jump", "inc", "inc"])
    spec = _spec(tmp_path, counter, [9], max_steps=4, invalid_action="skip")
    run(spec, ScriptedBackbone(lambda m, s: next(replies)))
    preds, traj = _load(spec)
    ep = preds[0]["trace"]["episodes"][0]
    assert ep["steps"] == 4 and ep["valid"] == [False, True, False, True] and ep["truncated"]
    assert [t["event"] for t in traj] == ["reset", "note", "step", "note", "step"]


def test_step_cap_ends_the_episode(tmp_path, counter):
    spec = _spec(tmp_path, counter, [1], max_steps=4)
    metrics = run(spec, ScriptedBackbone(lambda m, s: "inc"))
    preds, _ = _load(spec)
    ep = preds[0]["trace"]["episodes"][0]
    assert ep["steps"] == 4 and ep["truncated"] and metrics["score"] == 0.0 and preds[0]["status"] == "ok"


class KillAt(ScriptedBackbone):
    def __init__(self, at):
        super().__init__(walker_script)
        self.at = at

    async def complete(self, messages, sampling, n, **kw):
        if len(self.requests) + 1 == self.at:
            raise KeyboardInterrupt
        return await super().complete(messages, sampling, n)


def test_resume_after_a_kill_mid_episode_is_identical(tmp_path, counter):
    one = {"max_concurrent_problems": 1}  # problems in order: the kill lands in g1's episode
    whole = _spec(tmp_path / "whole", counter, [2, 3], window=2, runner=one)
    run(whole, ScriptedBackbone(walker_script))
    expected, _ = _load(whole)
    killed = _spec(tmp_path / "killed", counter, [2, 3], window=2, runner=one)
    with pytest.raises(KeyboardInterrupt):
        run(killed, KillAt(at=6))  # g0: 3 calls; g1 killed after 2 steps
    assert [p["id"] for p in _load(killed)[0]] == ["g0"]
    second = ScriptedBackbone(walker_script)
    run(killed, second)
    preds, traj = _load(killed)
    assert len(second.requests) == 4 - 2  # g1 replayed from reset; its first two calls came from the cache
    keep = ("id", "score", "status", "trace")
    assert [{k: p[k] for k in keep} for p in preds] == [{k: p[k] for k in keep} for p in expected]


@pytest.mark.parametrize("raw,value,status", [
    ("<confidence>0.85</confidence>", 0.85, "ok"),
    ("a <confidence> 0.3 </confidence> b <confidence>0.7</confidence>", 0.7, "ok"),
    ("<confidence>85%</confidence>", None, "malformed"),     # the instruction asks for 0.0-1.0: no rescaling
    ("<confidence>90</confidence>", None, "out_of_range"),
    ("<confidence>1</confidence>", 1.0, "ok"),
    ("<confidence>0</confidence>", 0.0, "ok"),
    ("<confidence>high</confidence>", None, "malformed"),
    ("<confidence></confidence>", None, "empty"),
    ("<confidence>250</confidence>", None, "out_of_range"),
    ("<confidence>-0.2</confidence>", None, "out_of_range"),
    ("<CONFIDENCE>0.6", 0.6, "ok"),                       # unclosed last tag
    ("<confidence>0.6<explanation>x</explanation>", 0.6, "ok"),
    ("no tag at all, confident 0.9", None, "missing"),
    ("", None, "missing"),
    (None, None, "missing"),
])
def test_confidence_parsing_never_invents_a_value(raw, value, status):
    got, st, _ = parse_confidence(raw)
    assert st == status and (got == pytest.approx(value) if value is not None else got is None)


def test_explanation_and_tags():
    e = elicit("<action>go</action><confidence>0.4</confidence><explanation> unsure </explanation>")
    assert (e.confidence, e.status, e.explanation) == (0.4, "ok", "unsure")
    assert elicit("<explanation></explanation>").explanation is None
    assert tag_text("<action>open drawer 1", "action") == "open drawer 1"
    assert json.dumps(e.to_dict())


def test_profiles_admissibility():
    offered = ["go to drawer 1", "move mug 1 to shelf 2", "look"]
    alf = ALFWorldProfile()
    assert alf.admissible("Go to  drawer 1.", offered) == "go to drawer 1"
    assert alf.admissible("put mug 1 in/on shelf 2", offered) == "move mug 1 to shelf 2"
    assert alf.admissible("fly", offered) is None and alf.admissible(None, offered) is None
    assert alf.is_thought("think: first find a mug") and not alf.is_thought("look")
    first = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.\n\nYour task is to: put a mug on shelf."
    assert alf.clean(first, first=True).startswith("You are in") and alf.task(alf.clean(first, True)) == "put a mug on shelf."
    assert alf.clean("You arrive at loc 5. On the shelf 1, you see a mug 1.") == "On the shelf 1, you see a mug 1."
    ws = WebShopProfile()
    page = ["search[<your query>]"]
    assert ws.admissible("search[red shoes]", page) == "search[red shoes]"
    assert ws.admissible("search[]", page) is None and ws.admissible("click[b0]", page) is None
    assert ws.admissible("click[Buy Now]", ["click[buy now]", "click[< prev]"]) == "click[buy now]"
    assert ws.task("WebShop [SEP] Instruction: [SEP] i want red shoes [SEP] Search") == "i want red shoes"
    assert Profile().admissible("anything", None) == "anything"
