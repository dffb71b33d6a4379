"""Bad input through the real command line: each error names the input and the fix, and no work starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(tmp_path: Path, *overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("OPENAI_API_KEY", None) if env is None or "OPENAI_API_KEY" not in env else None
    return subprocess.run([sys.executable, "-m", "agentic_repro.harness.run", *overrides, f"results_root={tmp_path}/results",
                           f"cache.path={tmp_path}/c.sqlite", "runner.progress=false"],
                          cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120)


def test_unknown_method_lists_the_choices(tmp_path):
    r = cli(tmp_path, "method=no_such_method")
    assert r.returncode != 0
    assert "no_such_method" in r.stderr and "Available options" in r.stderr and "cot_sc" in r.stderr


def test_unknown_benchmark_lists_the_choices(tmp_path):
    r = cli(tmp_path, "benchmark=gsm9k")
    assert r.returncode != 0 and "gsm8k" in r.stderr and "Available options" in r.stderr


def test_missing_api_key_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    r = cli(tmp_path, "backbone=gpt-4o-mini", "limit=1")
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr
    assert not list((tmp_path / "results").rglob("predictions.jsonl"))


def test_missing_data_names_the_file_and_make_data(tmp_path):
    r = cli(tmp_path, "benchmark=math", "limit=1", env={"AGENTIC_REPRO_DATA": str(tmp_path / "empty")})
    assert r.returncode == 2
    assert "math_test.jsonl" in r.stderr and "make data" in r.stderr


def test_unavailable_split_says_why(tmp_path):
    r = cli(tmp_path, "benchmark=hotpotqa", "benchmark.split=test", "limit=1")
    assert r.returncode == 2 and "not in ../shared/datasets" in r.stderr and "validate" in r.stderr


def test_unpriced_backbone_is_refused(tmp_path):
    r = cli(tmp_path, "backbone=gpt-4o-mini", "backbone.price=null", "limit=1", env={"OPENAI_API_KEY": "sk-test"})
    assert r.returncode == 2 and "price: 0" in r.stderr
