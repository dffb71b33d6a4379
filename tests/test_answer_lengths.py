"""scripts/answer_lengths.py (issue 33): the cap per cell is the smallest that lets >= 95% of its calls end with
stop, and a call cut even at the probe's cap counts against every cap (a model that repeats itself is reported)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from agentic_repro.scripts.answer_lengths import report


def _run(root: Path, bench: str, method: str, calls: list[tuple[int, str]]) -> None:
    d = root / bench / method / "local" / "seed=42"
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"benchmark": {"name": bench}, "method": {"name": method}}))
    (d / "calls.jsonl").write_text("".join(json.dumps({"completion_tokens": n, "finish_reason": why}) + "\n"
                                           for n, why in calls))


def test_the_smallest_cap_holding_95_percent_and_cut_calls_against_every_cap(tmp_path):
    _run(tmp_path, "gsm8k", "io", [(100 + 20 * i, "stop") for i in range(19)] + [(2048, "length")])  # 19/20 stop
    _run(tmp_path, "math", "cot", [(300, "stop")] * 18 + [(2048, "length")] * 2)                      # 18/20 stop
    _run(tmp_path, "math", "io", [(700, "stop")] * 20)
    lines = report(tmp_path)
    rows = {tuple(ln.split()[:2]): ln for ln in lines[1:-1]}
    assert rows[("gsm8k", "io")].endswith("  512") and " 95.0 " in rows[("gsm8k", "io")]   # longest stopped: 460
    assert rows[("math", "cot")].endswith("none (cut even at the probe cap)")
    assert rows[("math", "io")].endswith("  768")
    assert lines[-1].endswith("gsm8k: 512, math: none")
