"""How long the embedded model's answers are, per benchmark and method: the measurement behind ``max_tokens``.

Issue 33: ``max_tokens`` per benchmark must let at least 95% of every cell's calls end with ``stop``. Run the
default size once with a generous cap into its own experiment, then read the lengths back:

    flock /tmp/model-server.lock make reproduce-table1 \\
        ARGS="experiment=table1-lengths ++backbone.sampling.max_tokens=2048"
    python -m agentic_repro.scripts.answer_lengths results/table1-lengths

For each (benchmark, method) it prints the calls, the share that ended with ``stop`` at that cap, the completion
tokens of the stopped calls (max, 95th percentile, mean) and the smallest cap of ``CAPS`` that holds >= 95% of the
cell's calls; then per benchmark the cap that holds every method's cells (the value for
``scripts/experiments/table1.yaml`` ``max_tokens.embedded``). A call cut at the generous cap too is counted
against every cap: a model that repeats itself to any cap is reported, not hidden.
"""
from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from agentic_repro.harness.results import read_jsonl_tolerant

CAPS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
TARGET = 0.95


def cell_lengths(root: Path) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """(benchmark, method) -> [(completion tokens, finish_reason)] over every run folder under ``root``."""
    out: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for calls in sorted(root.rglob("calls.jsonl")):
        cfg_path = calls.parent / "config.yaml"
        if not cfg_path.exists():
            continue
        cfg = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
        key = (str(cfg["benchmark"]["name"]), str(cfg["method"]["name"]))
        for c in read_jsonl_tolerant(calls):
            if c.get("error") or not c.get("finish_reason"):
                continue
            out[key].append((int(c.get("completion_tokens") or 0), str(c["finish_reason"])))
    return out


def cap_for(calls: list[tuple[int, str]]) -> int | None:
    """The smallest cap under which >= TARGET of the calls would have ended with stop (None: none does)."""
    for cap in CAPS:
        ok = sum(1 for n, why in calls if why == "stop" and n < cap)
        if ok >= TARGET * len(calls):
            return cap
    return None


def report(root: Path) -> list[str]:
    cells = cell_lengths(root)
    lines = [f"{'benchmark':10s} {'method':22s} {'calls':>5s} {'stop%':>6s} {'max':>5s} {'p95':>5s} {'mean':>6s}  cap"]
    per_bench: dict[str, list[int | None]] = defaultdict(list)
    for (bench, method), calls in sorted(cells.items()):
        stopped = sorted(n for n, why in calls if why == "stop")
        p95 = stopped[min(len(stopped) - 1, math.ceil(0.95 * len(stopped)) - 1)] if stopped else 0
        cap = cap_for(calls)
        per_bench[bench].append(cap)
        lines.append(f"{bench:10s} {method:22s} {len(calls):5d} {100 * len(stopped) / len(calls):6.1f} "
                     f"{max(stopped, default=0):5d} {p95:5d} {sum(stopped) / max(1, len(stopped)):6.0f}  "
                     f"{cap if cap else 'none (cut even at the probe cap)'}")
    lines.append("per benchmark (every method's cells >= 95% stop): " + ", ".join(
        f"{b}: {max(c) if all(c) else 'none'}" for b, c in sorted(per_bench.items())))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m agentic_repro.scripts.answer_lengths <results/<experiment>>")
    print("\n".join(report(Path(args[0]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
