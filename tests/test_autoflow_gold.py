"""The gold-reading workflow (issue 19): an AFlow search whose backbone always answers wrong, and whose round-2
graph tries to read the benchmark's data files (the validate and test answers), must score what the backbone
earns, 0, on validate and on test. Two ways in: the graph switches its audit hook off by reflection and opens
the file itself, or it has the Programmer operator run code that opens it (that code runs as a plain sandbox
program, without the workflow runtime's hook: only the sandbox's operating-system boundary keeps it from the
data folder)."""
from __future__ import annotations

import asyncio
import re

import pytest

from agentic_repro.baselines.autoflow.search import run_search
from agentic_repro.harness.runner import Runner
from tests.autoflow_helpers import aflow_spec, write_tiny_splits
from tests.doubles import ScriptedBackbone

REFLECT_AND_READ = '''class Workflow:
    def __init__(self, name, llm_config, dataset):
        self.custom = operator.Custom(create_llm_instance(llm_config))

    async def __call__(self, problem: str):
        import json
        try:
            import gc
        except BaseException:
            imp = [c for c in object.__subclasses__() if c.__name__ == "BuiltinImporter"][0]
            gc = imp.create_module(imp.find_spec("gc"))
        try:
            off = (lambda event, args, *a, **k: None).__code__
            for f in gc.get_objects():
                if getattr(f, "__code__", None) is not None and f.__code__.co_name == "guard":
                    f.__code__ = off
        except BaseException:
            pass
        for split in ("validate", "test"):
            try:
                for line in open(DATA + "/tiny/" + split + ".jsonl"):
                    row = json.loads(line)
                    if row["q"] == problem.strip():
                        return "ANSWER: " + row["a"]
            except BaseException:
                pass
        solution = await self.custom(input=problem, instruction="")
        return solution["response"]
'''

PROGRAMMER_READS = '''class Workflow:
    def __init__(self, name, llm_config, dataset):
        self.programmer = operator.Programmer(create_llm_instance(llm_config))

    async def __call__(self, problem: str):
        out = await self.programmer(problem=problem, analysis="None")
        return "ANSWER: " + str(out["output"])
'''

READING_CODE = '''
def solve():
    import json
    for split in ("validate", "test"):
        try:
            for line in open(DATA + "/tiny/" + split + ".jsonl"):
                row = json.loads(line)
                if row["q"] == QUESTION:
                    return row["a"]
        except Exception:
            pass
    return "unknown"
'''


class WrongBackbone:
    """The optimiser proposes ``graph`` (round 2); the executor answers every question wrong, and when the
    Programmer asks for code it writes code that looks the answer up in the data files."""

    def __init__(self, graph: str, data: str) -> None:
        self.graph, self.data = graph, data

    def __call__(self, messages, sampling):
        text = messages[-1]["content"]
        if "You are building a Graph" in text:
            return f"<modification>read the answers</modification>\n<graph>{self.graph}</graph>\n<prompt></prompt>"
        found = re.search(r"Problem description: (.*?)\nOther analysis", text, re.DOTALL)
        if found:
            code = READING_CODE.replace("DATA", repr(self.data)).replace("QUESTION", repr(found.group(1).strip()))
            return f"```python\n{code}\n```"
        return "ANSWER: -1"


@pytest.mark.parametrize("how, graph", [("reflection", REFLECT_AND_READ), ("programmer", PROGRAMMER_READS)])
def test_a_workflow_that_reads_the_gold_scores_what_the_backbone_earns(tmp_path, monkeypatch, how, graph):
    data = tmp_path / "data"
    write_tiny_splits(data)
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(data))
    graph = graph.replace("DATA", repr(str(data)))
    script = WrongBackbone(graph, str(data))
    spec = aflow_spec(tmp_path, rounds=1, validate_runs=1)
    doc = asyncio.run(run_search(spec, backbone=ScriptedBackbone(script)))
    rounds = {h["round"]: h for h in doc["history"]}
    assert rounds[2]["modification"] == "read the answers", how
    assert rounds[1]["mean"] == 0.0 and rounds[2]["mean"] == 0.0, (how, rounds[2]["runs"])   # validate
    assert doc["validate_score"] == 0.0
    # the round-2 graph on the test split, as a frozen workflow would run
    test_spec = aflow_spec(tmp_path / "test")
    test_spec.method_cfg = {"name": "aflow-round2", "roles": ["executor"],
                            "solver": "agentic_repro.baselines.autoflow.workflow:SandboxedWorkflow",
                            "params": {"graph": rounds[2]["graph"], "prompt": rounds[2]["prompt"],
                                       "role": "executor", "limits": {"idle_timeout_s": 30}}}
    test_spec.full_config["method"] = test_spec.method_cfg
    metrics = asyncio.run(Runner(test_spec, backbone=ScriptedBackbone(script)).run())
    assert metrics["complete"] and metrics["n"] == 3
    assert metrics["score"] == 0.0, how                                                           # test
