"""DynaGraph's Table 1 baselines with the scripted double: ReAct and Reflexion for QA (the same evidence tool as
E_rag), and the static three-model pipeline."""
from __future__ import annotations

import json
from pathlib import Path

from agentic_repro.baselines.react_qa import parse_action
from tests.conftest import make_spec, run
from tests.doubles import ScriptedBackbone


def preds_of(spec):
    return [json.loads(l) for l in (spec.out_dir / "predictions.jsonl").read_text().splitlines()]


def test_parse_action():
    assert parse_action("Thought: x\nAction: Search[Nile length]") == ("Search", "Nile length")
    assert parse_action("Action: finish[ANSWER: \\boxed{[1, 2]}] trailing") == ("Finish", "ANSWER: \\boxed{[1, 2]}")
    assert parse_action("Thought: hmm") == (None, "")


def test_react_searches_the_configured_corpus_then_finishes(tmp_path: Path, tiny_data: Path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Doubling a number means adding it to itself.\nRivers flow to the sea.\n")

    def script(messages, sampling):
        content = messages[-1]["content"]
        i = int(content.split("What is ")[1].split("+")[0])
        if "Observation: [1] Doubling" in content:
            return f"Thought: so it is {2 * i}.\nAction: Finish[ANSWER: {2 * i}]"
        return "Thought: I should look it up.\nAction: Search[doubling a number]\nObservation: (made up)"
    spec = make_spec(tmp_path, {"name": "react_qa", "solver": "agentic_repro.baselines.react_qa:react_qa",
                                "params": {"evidence": "bm25", "corpus": str(corpus)}}, limit=2)
    m = run(spec, ScriptedBackbone(script))
    assert m["score"] == 1.0
    t = preds_of(spec)[0]["trace"]
    assert [x["action"] for x in t["turns"]] == ["Search", "Finish"] and t["evidence"]["kind"] == "bm25"
    assert "(made up)" not in json.dumps(t["turns"][0]["observation"])   # the model's own Observation is cut


def test_react_closed_book_has_no_search_and_a_forced_final_answer(tmp_path: Path, tiny_data: Path):
    double = ScriptedBackbone(lambda m, s: "ANSWER: 0" if "out of steps" in m[-1]["content"] else "Thought: hmm")
    spec = make_spec(tmp_path, {"name": "react_qa", "solver": "agentic_repro.baselines.react_qa:react_qa",
                                "params": {"max_steps": 2}}, limit=1)
    run(spec, double)
    p = preds_of(spec)[0]
    assert p["trace"]["steps"] == 2 and not p["trace"]["finished"] and p["score"] == 1.0
    assert all("Search[" not in msgs[-1]["content"] for msgs, _, _ in double.requests)


def test_reflexion_reflects_after_a_self_judged_failure(tmp_path: Path, tiny_data: Path):
    def script(messages, sampling):
        c = messages[-1]["content"]
        if "Is the proposed answer correct?" in c:
            return "Verdict: CORRECT" if "ANSWER: 0" in c.split("Proposed answer:")[1] and "wrong" not in c \
                else "Verdict: INCORRECT"
        if "diagnose" in c:
            return "I guessed. Plan: add carefully."
        if "Reflections from earlier trials" in c:
            return "Action: Finish[ANSWER: 0]"
        return "Action: Finish[ANSWER: 7]"
    spec = make_spec(tmp_path, {"name": "reflexion_qa", "solver": "agentic_repro.baselines.reflexion_qa:reflexion_qa",
                                "params": {}}, limit=1)
    run(spec, ScriptedBackbone(script))
    p = preds_of(spec)[0]
    t = p["trace"]
    assert [x["self_judged_correct"] for x in t["trials"]] == [False, True]
    assert t["reflections"] == ["I guessed. Plan: add carefully."] and p["score"] == 1.0


def test_multi_agent3_static_pipeline_and_instance_label(tmp_path: Path, tiny_data: Path):
    def script(messages, sampling):
        c = messages[-1]["content"]
        if "Check this solution" in c:
            return "It is correct."
        if "write the final answer" in c:
            return "ANSWER: 0"
        return "0+0 is 0."
    spec = make_spec(tmp_path, {"name": "multi_agent3", "solver": "agentic_repro.baselines.multi_agent3:multi_agent3",
                                "roles": ["expert1", "expert2", "expert3"], "params": {}}, limit=1)
    run(spec, ScriptedBackbone(script))
    p = preds_of(spec)[0]
    assert p["score"] == 1.0 and p["trace"]["instances"] == 1 and "shared" in p["trace"]["label"]
    roles = [json.loads(l)["role"] for l in (spec.out_dir / "calls.jsonl").read_text().splitlines()]
    assert roles == ["expert1", "expert2", "expert3"]
