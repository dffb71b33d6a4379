"""MermaidFlow (baselines/autoflow/mermaidflow.py) with the scripted double: the typed checker (released W1-W5 and
the interpreter's rules), the interpreter (data flow, ensembles, Test -> decision branches), the evolutionary loop
(four children, judge, check with errors fed back, crossover), resume mid-search, and the frozen graph on test."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from agentic_repro.baselines.autoflow import mermaidflow as MF
from agentic_repro.baselines.autoflow import mermaidflow_prompts as P
from agentic_repro.harness.results import read_jsonl_tolerant
from tests.autoflow_helpers import with_validate_split
from tests.conftest import make_spec as _make_spec, run
from tests.doubles import ScriptedBackbone
from tests.test_baselines_multiagent import code_spec


def make_spec(*args, **kw):
    return with_validate_split(_make_spec(*args, **kw))

TWO = """flowchart TD
    PROBLEM([Problem])
    C1["Custom<br/>(role: solver_a)"]
    C2["Custom<br/>(role: solver_b)"]
    ENSEMBLE["ScEnsemble<br/>"]
    RETURN([Return response & cost])
    class PROBLEM Interface
    class RETURN Interface
    class C1 CustomOp
    class C2 CustomOp
    class ENSEMBLE ScEnSembleOp
    PROBLEM --> |input|C1
    PROBLEM --> |input|C2
    C1 --> ENSEMBLE
    C2 --> ENSEMBLE
    ENSEMBLE --> RETURN
"""
TWO_PROMPTS = 'SOLVER_A="Add the numbers."\nSOLVER_B = """Think, then add."""'

CODE = """flowchart TD
    PROBLEM([Problem])
    ENTRY_POINT([entry_point])
    G["CustomCodeGenerate<br/>(instruction: gen)"]
    T["Test<br/>"]
    CHECK{test_result<br/>passed?}
    FIX["CustomCodeGenerate<br/>(instruction: fix)"]
    RETURN([Return response & cost])
    class PROBLEM Interface
    class ENTRY_POINT Interface
    class RETURN Interface
    class G CustomCodeGenerateOp
    class FIX CustomCodeGenerateOp
    class T TestOp
    class CHECK DecisionOp
    PROBLEM --> |input|G
    ENTRY_POINT --> |entry_point|G
    G --> |solution|T
    PROBLEM --> |problem|T
    T --> CHECK
    CHECK -- Passed --> RETURN
    CHECK -- Failed --> FIX
    PROBLEM --> |input|FIX
    FIX --> RETURN
"""


def test_the_released_seeds_parse_and_the_checker_reports_the_released_rules():
    for ds, (graph, prompt) in P.SEED_GRAPHS.items():
        g = MF.parse_mermaid(graph)
        assert not g.syntax_errors and MF.topo_order(g)
        assert {"PROBLEM", "RETURN"} <= set(g.nodes)
    assert MF.check_graph(TWO, "math") == []
    errs = MF.check_graph(P.SEED_GRAPHS["GSM8K"][0], "math")
    assert any(e.startswith("W5") for e in errs)                # the seed's ensemble has a single input
    bad = TWO.replace("class RETURN Interface", "class RETURN CustomOp").replace("C2 --> ENSEMBLE", "")
    errs = MF.check_graph(bad, "math")
    assert any(e.startswith("W3") for e in errs) and any(e.startswith("W2: Node 'C2'") for e in errs)
    assert any(e.startswith("W5") for e in errs)
    cyc = TWO + "    ENSEMBLE --> C1\n"
    assert any(e.startswith("T1") for e in MF.check_graph(cyc, "math"))
    alien = TWO.replace("class C2 CustomOp", "class C2 WebSearchOp")
    assert any(e.startswith("W4: Node 'C2'") for e in MF.check_graph(alien, "math"))
    assert any(e.startswith("T2") for e in MF.check_graph(CODE, "math"))   # Test is not a math operator
    assert MF.check_graph(CODE, "code") == []
    assert MF.parse_prompts(TWO_PROMPTS) == {"SOLVER_A": "Add the numbers.", "SOLVER_B": "Think, then add."}


def run_workflow(tmp_path, graph, prompts, script, *, code=False):
    method = {"name": "mf", "solver": "agentic_repro.baselines.autoflow.mermaidflow:MermaidWorkflow",
              "params": {"graph": graph, "prompt": prompts, "role": None}}
    spec = code_spec(tmp_path, method) if code else make_spec(tmp_path, method, limit=1)
    bb = ScriptedBackbone(script)
    run(spec, bb)
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert pred["status"] == "ok", pred.get("error")
    return pred, bb


def test_interpreter_runs_the_data_flow_and_the_ensemble(tmp_path, tiny_data):
    def script(m, s):
        p = m[-1]["content"]
        if "solution_letter" in p:
            assert "A: \nANSWER: 1" in p and "B: \nANSWER: 0" in p
            return "<solution_letter>B</solution_letter>"
        return "ANSWER: 1" if p.startswith("Add the numbers.") else "ANSWER: 0"
    pred, bb = run_workflow(tmp_path, TWO, TWO_PROMPTS, script)
    assert pred["raw_output"] == "ANSWER: 0" and pred["score"] == 1.0
    assert pred["trace"]["mermaidflow"]["ran"] == ["C1:Custom", "C2:Custom", "ENSEMBLE:ScEnsemble"]
    assert [m[-1]["content"].split("\n")[0] for m, _, _ in bb.requests][:2] == ["Add the numbers.What is 0+0?",
                                                                              "Think, then add.What is 0+0?"]


@pytest.mark.parametrize("passes", [True, False])
def test_interpreter_follows_the_test_decision(tmp_path, tiny_data, passes):
    prompts = 'GEN="Write it."\nFIX="Fix it."'

    def script(m, s):
        p = m[-1]["content"]
        if p.startswith("Fix it."):
            return "```python\ndef f():\n    return 4\n```"
        if "Reflection" in p or "failed to pass test" in p:
            return "```python\ndef f():\n    return 5\n```"
        return f"```python\ndef f():\n    return {4 if passes else 3}\n```"
    pred, bb = run_workflow(tmp_path, CODE, prompts, script, code=True)
    ran = [x.split(":")[0] for x in pred["trace"]["mermaidflow"]["ran"]]
    assert ran == (["G", "T", "CHECK"] if passes else ["G", "T", "CHECK", "FIX"])
    assert "return 4" in pred["raw_output"]


# ---- the search --------------------------------------------------------------------------------------------

def candidates(graphs: list[str], tag: str) -> str:
    out = ""
    for c, g in zip("ABCD", graphs):
        out += f"<modification_{c}>{tag} {c}</modification_{c}><graph_{c}>{g}</graph_{c}><prompt_{c}>{TWO_PROMPTS}</prompt_{c}>"
    return out


def make_script(seen: list[str]):
    def script(m, s):
        p = m[-1]["content"]
        if "graph_candidates" in p:                     # the judge
            seen.append("judge-pair" if "parent_graph_A" in p else "judge-single")
            return "<selected_graph>B</selected_graph><justification>ok</justification>"
        if "combining elements from two parent graphs" in p:
            seen.append("crossover")
            return candidates([TWO] * 4, "cross")
        if "You are building a Graph" in p:
            if "Avoid repeating these errors" in p:
                seen.append("mutation-retry")
                rnd = re.search(r"<score>(.*?)</score>", p).group(1)
                return candidates([TWO] * 4, f"mut{rnd}-{len(seen)}")
            seen.append("mutation")
            broken = TWO.replace("C2 --> ENSEMBLE", "")   # fails W2/W5 on every candidate
            return candidates([broken] * 4, "broken")
        if "solution_letter" in p:
            return "<solution_letter>A</solution_letter>"
        return "ANSWER: 0"
    return script


def method(tmp_path: Path, **kw) -> dict:
    params = {"rounds": 3, "validation_rounds": 1, "validate_limit": 2, "check_convergence": False, **kw}
    return {"name": "mermaidflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod", "label": "MermaidFlow",
            "deviations": ["test"], "roles": ["executor"],
            "params": {"artifact": str(tmp_path / "results/search/tiny/mermaidflow/scripted/seed=42/artifact.json")},
            "search": {"optimiser": "agentic_repro.baselines.autoflow.mermaidflow:MermaidFlowOptimiser", "split": "validate",
                       "params": params}}


def search(tmp_path: Path, bb, **kw) -> dict:
    from agentic_repro.baselines.autoflow.search import run_search

    return asyncio.run(run_search(make_spec(tmp_path, method(tmp_path, **kw)), backbone=bb))


def test_mutation_rounds_judge_check_and_feed_errors_back(tmp_path, tiny_data):
    seen: list[str] = []
    doc = search(tmp_path, ScriptedBackbone(make_script(seen)))
    h = doc["history"]
    assert [x["kind"] for x in h] == ["seed", "mutation", "mutation"]
    assert seen[:4] == ["mutation", "judge-single", "mutation-retry", "judge-single"]
    a = h[1]["attempts"]
    assert a[0]["judged"] == "B" and any(e.startswith("W5") for e in a[0]["errors"]["B"])
    assert h[1]["modification"].startswith("mut") and h[1]["graph"] == TWO.strip()
    assert doc["workflow"]["solver"] == "agentic_repro.baselines.autoflow.mermaidflow:MermaidWorkflow"
    assert doc["extra"]["hyperparameters"]["evolution_probability"] == 0.1


def test_crossover_and_resume(tmp_path, tiny_data, monkeypatch):
    from agentic_repro.baselines.autoflow import search as S

    seen: list[str] = []
    clean = search(tmp_path / "clean", ScriptedBackbone(make_script(seen)), rounds=4, evolution_probability=1.0,
                   evolution_from_round=2)
    assert [x["kind"] for x in clean["history"]] == ["seed", "mutation", "crossover", "crossover"]
    assert "judge-pair" in seen and clean["history"][2]["pair"] and len(set(clean["history"][2]["pair"])) == 2
    real = S.SearchContext.evaluate
    n = {"k": 0}

    async def flaky(self, *a, **k):
        n["k"] += 1
        if n["k"] == 3:
            raise KeyboardInterrupt("killed")
        return await real(self, *a, **k)

    monkeypatch.setattr(S.SearchContext, "evaluate", flaky)
    with pytest.raises(KeyboardInterrupt):
        search(tmp_path / "r", ScriptedBackbone(make_script([])), rounds=4, evolution_probability=1.0,
               evolution_from_round=2)
    state = json.loads(next(Path(tmp_path / "r").rglob("search_state.json")).read_text())
    assert state["next_round"] == 3
    monkeypatch.setattr(S.SearchContext, "evaluate", real)
    doc = search(tmp_path / "r", ScriptedBackbone(make_script([])), rounds=4, evolution_probability=1.0,
                 evolution_from_round=2)
    assert [x["modification"] for x in doc["history"]] == [x["modification"] for x in clean["history"]]

    spec = make_spec(tmp_path / "r", method(tmp_path / "r"), limit=1)   # the frozen graph on test
    metrics = run(spec, ScriptedBackbone(make_script([])))
    pred = read_jsonl_tolerant(spec.out_dir / "predictions.jsonl")[0]
    assert metrics["complete"] and pred["trace"]["artifact"]["sha256"] == doc["sha256"]
