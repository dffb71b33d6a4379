"""Shared fixtures: a tiny on-disk benchmark and a way to build runs with a scripted backbone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluators.base import Benchmark
from harness.runner import RunSpec, Runner
from harness.types import Problem, Score


class EchoBenchmark(Benchmark):
    """Test benchmark: the answer is the text after 'ANSWER:'; exact match with the gold."""

    domain = "qa"

    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        return Problem(id=row["id"], index=row_index, fields={"q": row["q"]}, gold=row["a"], benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["q"]

    def extract(self, text: str, problem: Problem):
        if "ANSWER:" not in (text or ""):
            return None, "none"
        return text.rsplit("ANSWER:", 1)[1].strip(), "after-marker"

    async def score(self, text: str, problem: Problem) -> Score:
        pred, rule = self.extract(text, problem)
        return Score(float(pred == problem.gold), pred, {"rule": rule})


@pytest.fixture
def tiny_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "data"
    (root / "tiny").mkdir(parents=True)
    rows = [{"id": f"p{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)} for i in range(8)]
    (root / "tiny" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(root))
    return root


def make_spec(tmp_path: Path, method: dict[str, Any], *, limit: int | None = None, seed: int = 42,
              cache_mode: str = "read-write", runner: dict[str, Any] | None = None) -> RunSpec:
    bench = {"name": "tiny", "kind": "tests.conftest.EchoBenchmark", "split": "test",
             "splits": {"test": "tiny/test.jsonl"}, "limit": limit, "metric": "accuracy",
             "answer_instruction": "End with ANSWER: <n>."}
    backbone = {"name": "scripted", "price": {"input_per_1m": 1.0, "output_per_1m": 2.0}, "max_concurrency": 4}
    full = {"method": method, "benchmark": bench, "backbone": backbone, "seed": seed}
    return RunSpec(experiment="t", seed=seed, method_cfg=method, benchmark_cfg=bench, backbone_cfg=backbone,
                   sampling={"temperature": 0.0, "max_tokens": 64},
                   cache_cfg={"mode": cache_mode, "path": str(tmp_path / "cache.sqlite")},
                   runner_cfg={"progress": False, **(runner or {})}, results_root=tmp_path / "results",
                   full_config=full)


def run(spec: RunSpec, backbone: Any) -> dict[str, Any]:
    import asyncio

    return asyncio.run(Runner(spec, backbone=backbone).run())
