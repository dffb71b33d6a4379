"""source=hub loads through datasets.load_dataset (opt-in; no internet here, so the loader is faked)."""
from __future__ import annotations

import sys
import types

from agentic_repro.evaluators.base import build_benchmark
from tests.conftest import compose


def test_hub_rows_go_through_the_same_problem_builder(monkeypatch):
    calls = []

    def load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return [{"question": "2+2?", "answer": "2+2=4\n#### 4"}, {"question": "3+3?", "answer": "#### 6"}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    cfg = compose(["benchmark=gsm8k", "benchmark.source=hub"])["benchmark"]
    problems, info = build_benchmark(cfg).load()
    assert calls == [("openai/gsm8k", "main", "test")]
    assert [p.gold for p in problems] == ["4", "6"] and info.file.startswith("hub:openai/gsm8k")
    assert len(info.sha256) == 64
