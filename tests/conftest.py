"""Shared fixtures: a tiny on-disk benchmark and a way to build runs with a scripted backbone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentic_repro.evaluators.base import Benchmark
from agentic_repro.harness.compose import compose  # the tests import it from here
from agentic_repro.harness.runner import RunSpec, Runner
from agentic_repro.harness.types import Problem, Score


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


# CI: a missing optional dependency fails, never skips (hooks of tests/strict_deps.py)
from tests.strict_deps import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401

#: pytest-timeout for slow-marked tests (the default, pyproject's ``timeout``, is 300 s)
SLOW_TIMEOUT_S = 900


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    # longest first, so that no long test is a tail under xdist: an xdist group (tests/test_vllm_e2e.py's one vLLM
    # server, ~15 min on one worker while the other takes the rest), then the slow tests, then the rest (stable)
    items.sort(key=schedule_rank)


def schedule_rank(item) -> int:
    """0: an xdist group; 1: slow (the real model); 2: the rest. pytest runs (and xdist hands out) the lowest first."""
    if item.get_closest_marker("xdist_group") is not None:
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


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


_SERVERS: list[Any] = []  # the test session's embedded-server pool (see the fixture below)


@pytest.fixture(scope="session", autouse=True)
def embedded_servers():
    """One pool for the whole test session: the embedded model server starts once and stops at the end."""
    from agentic_repro.harness.embedded.server import ServerPool

    with ServerPool() as pool:
        _SERVERS.append(pool)
        yield pool
        _SERVERS.clear()


def run_e2e(tmp_path: Path, overrides: list[str]) -> tuple[RunSpec, dict[str, Any]]:
    """A real run (real HTTP client, real embedded model unless overridden) into ``tmp_path``.

    The embedded server is started once per test session and reused by every run.
    """
    from agentic_repro.harness.runner import run_spec, spec_from_config

    cfg = compose([*overrides, f"results_root={tmp_path / 'results'}",
                   f"cache.path={tmp_path / 'cache.sqlite'}", "runner.progress=false"])
    spec = spec_from_config(cfg)
    return spec, run_spec(spec, servers=_SERVERS[0] if _SERVERS else None)


def check_run_files(spec: RunSpec, metrics: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Every result file exists and the numbers in them agree with each other."""
    from agentic_repro.harness.results import read_jsonl_tolerant

    out = spec.out_dir
    for name in ("predictions.jsonl", "calls.jsonl", "metrics.json", "config.yaml", "meta.json"):
        assert (out / name).exists(), name
    preds = read_jsonl_tolerant(out / "predictions.jsonl")
    calls = read_jsonl_tolerant(out / "calls.jsonl")
    assert metrics["n"] == n == len(preds)
    assert metrics["totals"]["calls"] == len(calls) == sum(p["calls"] for p in preds) > 0
    tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
    assert tokens == metrics["totals"]["prompt_tokens"] + metrics["totals"]["completion_tokens"] > 0
    assert abs(metrics["score"] - sum(p["score"] for p in preds) / n) < 1e-9
    assert json.loads((out / "metrics.json").read_text())["n"] == n
    meta = json.loads((out / "meta.json").read_text())
    assert meta["model"] and len(meta["data"]["sha256"]) == 64
    return preds
