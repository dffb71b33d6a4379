"""Replay: a finished run re-run from the cache into a fresh results folder.

Runs CoT-SC(5) on GSM8K problems against the fixed-delay test double, then deletes the
results folder (keeping the response cache) and runs the same command again.
Reports the second run's backbone calls (goal 0) and its wall time / the first's (goal <= 0.02).
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

from _common import compose, fake_backbone_overrides, fake_server


def measure(problems: int, delay: float, concurrency: int) -> dict:
    """Run, delete the results folder, run again from the cache; the second run's calls and wall ratio."""
    from agentic_repro.harness.runner import run_spec, spec_from_config

    with fake_server(delay) as url, tempfile.TemporaryDirectory() as tmp:
        cfg = compose([*fake_backbone_overrides(url, concurrency), "method=cot_sc", "benchmark=gsm8k",
                       "benchmark.split=full", f"limit={problems}", f"results_root={tmp}/results",
                       f"cache.path={tmp}/cache.sqlite", "runner.progress=false"])
        walls, runs = [], []
        for attempt in range(2):
            if attempt == 1:
                shutil.rmtree(f"{tmp}/results")
            t0 = time.perf_counter()
            runs.append(run_spec(spec_from_config(cfg)))
            walls.append(time.perf_counter() - t0)
    return {"bench": "replay", "problems": runs[1]["n"],
            "first_backbone_calls": runs[0]["this_invocation"]["backbone_calls"],
            "replay_backbone_calls": runs[1]["this_invocation"]["backbone_calls"],
            "first_wall_s": round(walls[0], 2), "replay_wall_s": round(walls[1], 3),
            "wall_ratio": round(walls[1] / walls[0], 4), "same_score": runs[0]["score"] == runs[1]["score"],
            "same_n": runs[0]["n"] == runs[1]["n"], "goal": "replay calls 0, wall ratio <= 0.02"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    print(json.dumps(measure(args.problems, args.delay, args.concurrency)))


if __name__ == "__main__":
    main()
