"""Reflexion (an AUQ baseline row) reflects with its release's per-environment instruction: WebShop's prompt
(webshop_runs/generate_reflections.py) carries none of ALFWorld's sentences (baselines/reflexion.py)."""
from __future__ import annotations

import re

import yaml

from agentic_repro.baselines.reflexion import reflection_prompt
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone

# The release's ALFWorld-only sentences (alfworld_runs/generate_reflections.py), typed from the release here so
# the test does not read them from the module it checks.
ALFWORLD_ONLY = ("For example, if you tried A and B but forgot C",
                 "You will need this later when you are solving the same task",
                 'Give your plan after "Plan"',
                 "Here are two examples:")
WEBSHOP_LEAD = ("You will be given the history of a past experience in which you were placed in an environment "
                "and given a task to complete. You were unsuccessful in completing the task. Do not summarize your "
                "environment, but rather think about the strategy and path you took to attempt to complete the "
                "task. Devise a concise, new plan of action that accounts for your mistake with reference to "
                "specific actions that you should have taken. There are two examples below.\n\n")


def test_webshop_reflection_prompt_is_the_releases_without_alfworld_sentences():
    q = reflection_prompt("webshop", "i want a blue chair [SEP] ...", ["buy the cheaper one"])
    assert q.startswith(WEBSHOP_LEAD)
    for s in ALFWORLD_ONLY:
        assert s not in q, s
    assert "\n\nInstruction: i want a blue chair" in q and q.endswith("Trial #0: buy the cheaper one\n\n\nNew plan:")


def test_alfworld_reflection_prompt_keeps_its_sentences():
    q = reflection_prompt("alfworld", "You are in the middle of a room.", [])
    for s in ALFWORLD_ONLY:
        assert s in q, s
    assert "There are two examples below." not in q


def test_no_alfworld_sentence_reaches_a_webshop_run(tmp_path):
    """Through the runner on the WebShop fixture: a failed first trial (a repeated search ends it) makes Reflexion
    ask its reflection; that prompt, like every prompt of the run, has no ALFWorld-only sentence."""
    from tests.test_envs_runner import CONFIGS, FIX

    cfg = yaml.safe_load((CONFIGS / "webshop.yaml").read_text())
    cfg.update(name="webshop-fixture", allow_unverified_data=True, limit=1,
               files={"products": str(FIX / "items_shuffle_1000.json"),
                      "attributes": str(FIX / "items_ins_v2_1000.json"), "human": str(FIX / "items_human_ins.json")})
    cfg["env"] = {**cfg["env"], "process": False, "max_steps": 4}
    prompts: list[str] = []

    def script(messages, sampling):
        text = "\n".join(m["content"] for m in messages)
        prompts.append(text)
        if text.rstrip().endswith("New plan:"):
            return "Plan: search with fewer words."
        if "<confidence>" in text and "confidence level" in messages[-1]["content"]:
            return "<confidence>0.5</confidence><explanation>unsure</explanation>"
        return "<think>t</think><action>search[ zzz nothing ]</action>"

    spec = make_spec(tmp_path, {"name": "reflexion", "solver": "agentic_repro.baselines.reflexion:reflexion",
                                "params": {"trials": 2, "few_shot": 0, "style": "auq"}})
    spec.benchmark_cfg.clear()
    spec.benchmark_cfg.update(cfg)
    run(spec, ScriptedBackbone(script))
    reflections = [p for p in prompts if p.rstrip().endswith("New plan:")]
    assert len(reflections) == 1 and reflections[0].startswith(WEBSHOP_LEAD)
    for p in prompts:
        for s in ALFWORLD_ONLY:
            assert s not in p, (s, p[:200])
    assert re.search(r"\n\nInstruction: ", reflections[0])
