"""Errors a newcomer meets (issue 29 item 9), through the real command line or the real runner: each names what
failed and where to look, and where it says to look holds what it says."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentic_repro.harness.results import read_jsonl_tolerant
from agentic_repro.harness.run import incomplete_message
from tests.conftest import EchoBenchmark, make_spec, run
from tests.doubles import ScriptedBackbone

ROOT = Path(__file__).resolve().parents[1]


def test_a_data_row_missing_a_field_names_the_benchmark_file_row_and_field(tmp_path: Path):
    """It printed ``error: 'answer'``: no file, no row, no benchmark (a KeyError's repr)."""
    split = tmp_path / "data" / "aflow_splits" / "gsm8k_test.jsonl"
    split.parent.mkdir(parents=True)
    rows = [{"question": "1+1?", "answer": "2", "cot": "c"}, {"question": "2+2?", "cot": "c"},
            {"question": "3+3?", "answer": "6", "cot": "c"}]
    split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = subprocess.run([sys.executable, "-m", "agentic_repro.harness.run", "benchmark=gsm8k", "backbone=scripted",
                        "limit=3", f"results_root={tmp_path}/results", f"cache.path={tmp_path}/c.sqlite",
                        "runner.progress=false"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "AGENTIC_REPRO_DATA": str(tmp_path / "data")})
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: benchmark gsm8k: row 1 (0-based) of ") and str(split) in line, line
    assert "has no field 'answer'" in line and "question, cot" in line and "make data" in line, line
    assert not list((tmp_path / "results").rglob("predictions.jsonl"))          # no work started


class CrashingScorer(EchoBenchmark):
    """The tiny benchmark whose scorer crashes on p1 (our code failing, not the answer)."""

    async def score(self, text, problem):
        if problem.id == "p1":
            raise ZeroDivisionError("the checker divided by zero")
        return await super().score(text, problem)


def test_a_scorer_crash_points_to_where_its_traceback_is(tmp_path: Path, tiny_data: Path):
    """The message said ``trace.traceback``, which a scorer crash leaves empty: the runner keeps the scorer's
    traceback in ``score_details.traceback``. The field it names must hold the traceback."""
    spec = make_spec(tmp_path, {"name": "io", "solver": "agentic_repro.baselines.simple:io",
                                "params": {"template": "{task}\n\n{answer_instruction}"}}, limit=2)
    spec.benchmark_cfg = {**spec.benchmark_cfg, "kind": "tests.test_newcomer_errors.CrashingScorer"}
    metrics = run(spec, ScriptedBackbone(lambda m, s: "ANSWER: 2"))
    assert metrics["n_errors"] == 1 and metrics["first_error"]["id"] == "p1"
    message = incomplete_message(metrics)
    assert "ZeroDivisionError" in message and "(score_details.traceback)" in message, message
    (p1,) = [p for p in read_jsonl_tolerant(spec.out_dir / "predictions.jsonl") if p["id"] == "p1"]
    assert "ZeroDivisionError: the checker divided by zero" in p1["score_details"]["traceback"]
    assert not (p1.get("trace") or {}).get("traceback")                       # where it used to point: empty
