"""The replay bench, small enough for the test suite: a finished run re-run from the cache into a fresh
folder makes zero backbone calls, gives the same numbers, and takes a small fraction of the first wall time.

The full bench (``python bench/replay.py``: 200 problems, 1,000 requests, ~14 s first run) checks the
0.02x goal; at this size (60 problems, 300 requests, ~4 s) the fixed per-run cost (data load, git state,
metrics) weighs more, and under machine load that fixed cost grows while the first run's server waits do
not (measured 0.15x with two test workers beside other jobs at load ~8). The assertion is therefore the
functional one (zero calls, same numbers) plus a bound no replay that waited on the server could meet:
the first run's server time alone is 300 x 50 ms / 4 = 3.75 s, so a replay at <= 0.5x did not re-send.
The ratio itself is printed (``-s``) and measured properly by the bench.
"""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_replay_makes_no_call_and_is_a_fraction_of_the_first_run():
    sys.path.insert(0, str(BENCH))
    try:
        from replay import measure
    finally:
        sys.path.remove(str(BENCH))
    res = measure(problems=60, delay=0.05, concurrency=4)
    assert res["first_backbone_calls"] == 300 and res["replay_backbone_calls"] == 0
    assert res["same_score"] and res["same_n"] and res["problems"] == 60
    print(f"replay wall ratio {res['wall_ratio']} (bench goal 0.02 at 200 problems)")
    assert res["wall_ratio"] <= 0.5, res
