"""Shared pieces of the autoflow tests: a tiny validate/test benchmark and a scripted optimiser + executor."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import make_spec

GOOD_GRAPH = '''class Workflow:
    def __init__(self, name: str, llm_config, dataset: DatasetType) -> None:
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)

    async def __call__(self, problem: str):
        solution = await self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT)
        return solution['response'], self.llm.get_usage_summary()["total_cost"]
'''
HOSTILE_GRAPH = '''import subprocess
class Workflow:
    def __init__(self, name, llm_config, dataset):
        pass

    async def __call__(self, problem: str):
        return subprocess.check_output(["cat", "/etc/passwd"]).decode()
'''


def write_tiny_splits(root: Path, n_validate: int = 4, n_test: int = 3) -> None:
    (root / "tiny").mkdir(parents=True, exist_ok=True)
    val = [{"id": f"v{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)} for i in range(n_validate)]
    test = [{"id": f"t{i}", "q": f"What is {i + 10}+{i + 10}?", "a": str(2 * (i + 10))} for i in range(n_test)]
    (root / "tiny" / "validate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    (root / "tiny" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))


def aflow_spec(tmp_path: Path, **params: Any):
    method = {"name": "aflow", "solver": "agentic_repro.baselines.autoflow.artifact:ArtifactMethod",
              "params": {"artifact": "unused"}, "roles": ["executor"],
              "search": {"optimiser": "agentic_repro.baselines.autoflow.aflow:AFlow", "split": "validate",
                         "params": {"rounds": 2, "validate_runs": 2, "check_convergence": False,
                                    "limits": {"idle_timeout_s": 10}, **params}}}
    spec = make_spec(tmp_path, method)
    spec.benchmark_cfg["splits"] = {"validate": "tiny/validate.jsonl", "test": "tiny/test.jsonl"}
    return spec


class AFlowScript:
    """The optimiser proposes ``graphs`` in turn (each with a SOLVE_PROMPT); the executor answers right only
    when the instruction says 'Think.' (so a proposed graph beats the seed's empty instruction)."""

    def __init__(self, graphs: list[tuple[str, str]] | None = None) -> None:
        self.graphs = graphs or [(GOOD_GRAPH, 'SOLVE_PROMPT = "Think. "'), (GOOD_GRAPH, 'SOLVE_PROMPT = "Guess. "')]
        self.optimizer_prompts: list[str] = []
        self.executor_prompts: list[str] = []

    def __call__(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
        text = messages[-1]["content"]
        if "You are building a Graph" in text:
            i = len(self.optimizer_prompts)
            self.optimizer_prompts.append(text)
            graph, prompt = self.graphs[min(i, len(self.graphs) - 1)]
            return (f"<modification>modification {i}</modification>\n<graph>{graph}</graph>\n"
                    f"<prompt>{prompt}</prompt>")
        self.executor_prompts.append(text)
        n = int(re.search(r"What is (\d+)\+", text).group(1))
        return f"ANSWER: {2 * n}" if text.startswith("Think.") else f"ANSWER: {n}"


ADAS_AGENT = '''def forward(self, taskInfo):
    agent = LLMAgentBase(['thinking', 'answer'], 'Careful Agent', temperature=0.3)
    thinking, answer = agent([taskInfo], "Think. Solve the task.")
    return answer
'''


class ADASScript:
    """Meta agent: proposes ``ADAS_AGENT`` (JSON); reflections return it again. Executor: LLMAgentBase JSON,
    right only when the instruction says 'Think.' (so the proposal beats most of the initial archive)."""

    def __init__(self, code: str = ADAS_AGENT) -> None:
        self.code = code
        self.meta: list[list[dict[str, str]]] = []
        self.executor: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
        if len(messages) > 1 and "expert machine learning researcher" in messages[1]["content"]:
            self.meta.append([dict(m) for m in messages])  # a copy: the search extends its list afterwards
            return json.dumps({"reflection": "ok", "thought": "think first", "name": f"Thinker {len(self.meta)}",
                               "code": self.code})
        self.executor.append(messages)
        user = messages[-1]["content"]
        n = int(re.search(r"What is (\d+)\+", user).group(1))
        good = "Think." in user.split("# Your Task:")[-1].split("\n\n", 1)[-1]
        return json.dumps({"thinking": "...", "answer": f"ANSWER: {2 * n if good else n}"})


class JudgeFlowScript(AFlowScript):
    """Judge: ranks B1 first. Optimiser: replaces the blamed block by a Custom step with 'Think. '.
    Executor: as :class:`AFlowScript` (right only after 'Think.')."""

    def __init__(self, instruction: str = "Think. ") -> None:
        super().__init__()
        self.instruction = instruction
        self.judge_prompts: list[str] = []

    def __call__(self, messages, sampling):
        text = messages[-1]["content"]
        if text.startswith("You are the judge"):
            self.judge_prompts.append(text)
            return json.dumps({"ranking": ["B1"], "reason": "B1 answers without thinking"})
        if text.startswith("You are optimising an agentic workflow"):
            self.optimizer_prompts.append(text)
            n = len(self.optimizer_prompts)
            return json.dumps({"modification": f"think first {n}", "blocks": [
                {"type": "seq", "description": "think", "operators": [{"op": "Custom", "instruction": self.instruction}]}]})
        return super().__call__(messages, sampling)


def with_validate_split(spec):
    """A search fixture's split: a copy of the tiny test file with ids 'p<i>' -> 'v<i>' and each question marked
    ``(validate)`` as ``validate`` (a search refuses a split that shares a problem with test, by id or by task
    text); the search config's ``split`` names it."""
    import os

    root = Path(os.environ["AGENTIC_REPRO_DATA"])
    test = root / spec.benchmark_cfg["splits"]["test"]
    name = test.with_name("validate.jsonl")
    if test.exists() and not name.exists():
        rows = [json.loads(line) for line in test.read_text().splitlines() if line.strip()]
        name.write_text("".join(json.dumps({**r, "id": "v" + str(r["id"])[1:], "q": r["q"] + " (validate)"}) + "\n"
                                for r in rows))
    spec.benchmark_cfg["splits"] = {**spec.benchmark_cfg["splits"], "validate": str(name.relative_to(root))}
    spec.full_config["benchmark"] = spec.benchmark_cfg
    return spec


def tiny_search_on_embedded(tmp_path: Path, overrides: list[str]):
    """An end-to-end test's tiny search through the session's embedded server: (spec, artifact document)."""
    import asyncio

    from agentic_repro.baselines.autoflow.search import run_search
    from agentic_repro.harness.runner import spec_from_config
    from tests import conftest
    from tests.conftest import compose

    cfg = compose([*overrides, f"results_root={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.sqlite'}",
                   "runner.progress=false"])
    spec = spec_from_config(cfg)
    return spec, asyncio.run(run_search(spec, servers=conftest._SERVERS[0] if conftest._SERVERS else None))


def failed_workflow_runs(root: Path) -> list[dict[str, Any]]:
    """Every failed workflow run (re-run by ``crash_attempts``, or the last) recorded under ``root``: what an
    assertion on call counts prints, so a count that is off says why."""
    found = []
    for path in sorted(Path(root).rglob("predictions.jsonl")):
        for line in path.read_text().splitlines():
            trace = json.loads(line).get("trace") or {}
            found += (trace.get("attempts") or {}).get("failed", [])
            if not (trace.get("workflow") or {}).get("ok", True):
                found.append(trace["workflow"])
    return found

