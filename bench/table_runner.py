"""Table 1's runner: its cell list one run at a time vs. side by side, in one process against one server (issue 33).

The cells are those ``make reproduce-table1`` plans (scripts/reproduce_table1.py ``build_plan``: the size's rows,
benchmarks, limits and per-benchmark ``max_tokens``). They run twice, each pass into its own scratch results
folder with the response cache off (every call is made), sharing one server pool, so the embedded llama.cpp server
starts once, before either pass is timed (a one-problem warm-up run): first one run at a time
(``concurrent_runs=1``, today's order), then ``concurrent_runs`` side by side (default: the backbone's
``max_concurrency``). It prints each pass's wall time, calls, tokens and throughput (completion tokens/s and all
tokens/s), the share of calls that ended with ``stop``, and the wall ratio side-by-side / sequential, with the load
average before and after (the ratio is only meaningful on an otherwise idle machine).

    python bench/table_runner.py                                      # size smoke on the embedded default (local)
    python bench/table_runner.py size=smoke methods=io,cot benchmarks=gsm8k,mbpp
    python bench/table_runner.py backbone=scripted backbone.delay_s=0.5 size=paper limit=1 seeds=42 \
        methods=io,cot,cot_sc benchmarks=gsm8k,drop sandbox.isolation=process   # no model: the scheduling only
    python bench/table_runner.py size=embedded --json out.json        # the default size's 48 cells (long)

Options as reproduce_table1's (backbone, size, methods, benchmarks, seeds, limit, concurrent_runs); any other
``key=value`` is a Hydra override for every run. The embedded server must run alone: ``flock
/tmp/model-server.lock python bench/table_runner.py ...``.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentic_repro.scripts.concurrent_runs import execute_concurrently
from agentic_repro.scripts.reproduce_table1 import OPTIONS, build_plan, concurrent_runs
from agentic_repro.scripts.runs import Planned, load_experiment, parse_args, plan


def cells(opts: dict[str, Any], overrides: list[str]) -> list[Planned]:
    """The size's planned runs, one per folder (a folder's first pass and full size are one cell here)."""
    items, _ = build_plan(load_experiment("table1"), opts, overrides)
    last = {}
    for it in items:
        key = it.label.split(" [")[0]
        last[key] = it
    return list(last.values())


def run_pass(items: list[Planned], root: Path, overrides: list[str], concurrency: int, pool: Any) -> dict[str, Any]:
    fresh = [Planned(it.label, [*it.overrides, f"results_root={root}", "cache.mode=off", "runner.progress=false",
                                *overrides]) for it in items]
    plan(fresh, [])
    bad = [f"{it.label}: {it.error}" for it in fresh if it.state == "invalid"]
    if bad:
        raise SystemExit("invalid cells: " + "; ".join(bad))
    t0 = time.perf_counter()
    execute_concurrently(fresh, concurrency=concurrency, log=lambda _: None, pool=pool)
    wall = time.perf_counter() - t0
    tot = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "stop": 0, "finish_known": 0}
    failed = [f"{it.label}: {it.error}" for it in fresh if it.state == "failed"]
    for it in fresh:
        t = (it.metrics or {}).get("totals", {})
        for k in ("calls", "prompt_tokens", "completion_tokens"):
            tot[k] += int(t.get(k) or 0)
        for c in _calls(Path(it.spec.out_dir)):
            if c.get("finish_reason"):
                tot["finish_known"] += 1
                tot["stop"] += c["finish_reason"] == "stop"
    return {"concurrent_runs": concurrency, "runs": len(fresh), "failed": failed, "wall_s": round(wall, 1), **tot,
            "completion_tok_per_s": round(tot["completion_tokens"] / wall, 2) if wall else None,
            "all_tok_per_s": round((tot["prompt_tokens"] + tot["completion_tokens"]) / wall, 2) if wall else None,
            "stop_pct": round(100 * tot["stop"] / tot["finish_known"], 1) if tot["finish_known"] else None}


def _calls(folder: Path) -> list[dict[str, Any]]:
    from agentic_repro.harness.results import read_jsonl_tolerant

    path = folder / "calls.jsonl"
    return read_jsonl_tolerant(path) if path.exists() else []


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out_json = None
    if "--json" in args:
        i = args.index("--json")
        out_json = Path(args[i + 1])
        del args[i:i + 2]
    opts, overrides = parse_args(args, {**OPTIONS, "size": "smoke"})
    items = cells(opts, overrides)
    side = concurrent_runs({**opts, "concurrent_runs": opts.get("concurrent_runs") or "auto"}, {}, items[0].overrides)
    load0 = os.getloadavg()
    print(f"{len(items)} cells (backbone={opts['backbone']}, size={opts['size']}), sequential then {side} side by "
          f"side; load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    from agentic_repro.harness.embedded.server import ServerPool

    with tempfile.TemporaryDirectory(prefix="table-runner-") as tmp, ServerPool() as pool:
        warm = [Planned("warm-up", [*items[0].overrides, "limit=1"])]   # starts the server outside the timings
        run_pass(warm, Path(tmp) / "warm", overrides, 1, pool)
        seq = run_pass(items, Path(tmp) / "seq", overrides, 1, pool)
        print(f"sequential:   {_line(seq)}", flush=True)
        par = run_pass(items, Path(tmp) / "side", overrides, side, pool)
        print(f"side by side: {_line(par)}", flush=True)
    load1 = os.getloadavg()
    ratio = par["wall_s"] / seq["wall_s"] if seq["wall_s"] else float("nan")
    print(f"wall ratio side-by-side/sequential: {ratio:.2f}x; completion tokens/s {seq['completion_tok_per_s']} -> "
          f"{par['completion_tok_per_s']}; load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if out_json:
        out_json.write_text(json.dumps({"cells": [it.label for it in items], "sequential": seq, "side_by_side": par,
                                        "wall_ratio": round(ratio, 3), "load_before": load0, "load_after": load1},
                                       indent=2), encoding="utf-8")
    return 1 if seq["failed"] or par["failed"] else 0


def _line(p: dict[str, Any]) -> str:
    fails = f", {len(p['failed'])} FAILED: {p['failed'][0]}" if p["failed"] else ""
    return (f"{p['runs']} runs in {p['wall_s']:.1f} s, {p['calls']} calls, {p['completion_tokens']} completion + "
            f"{p['prompt_tokens']} prompt tokens: {p['completion_tok_per_s']} completion tok/s, {p['all_tok_per_s']} "
            f"tok/s all; {p['stop_pct']}% of calls ended with stop{fails}")


if __name__ == "__main__":
    raise SystemExit(main())
