"""Estimate what a target costs on a priced backbone from the ledger of runs already measured on another one.

    python -m agentic_repro.scripts.estimate_cost [results_root=results] [measured=local] [target=gpt-4o-mini] [experiment=table1]

For every (benchmark, method) measured under results/<experiment>/<benchmark>/<method>/<measured>/, the mean
prompt and completion tokens per problem (from metrics.json totals, i.e. calls.jsonl) are scaled to the
paper protocol's size (every problem of the configured split x the protocol's seeds) and priced with the
target backbone's price. An ESTIMATE: another model writes longer or shorter answers; cached calls count as
paid. Also prints the measured wall time per problem (on this machine) for the same runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from agentic_repro.scripts.collect import RunIndex
from agentic_repro.scripts.render import Table, write_csv, write_tables
from agentic_repro.scripts.runs import CONFIGS, compose, load_experiment, parse_args


def split_size(benchmark: str) -> int:
    from agentic_repro.evaluators.base import build_benchmark

    cfg = compose([f"benchmark={benchmark}"])["benchmark"]
    problems, _ = build_benchmark(cfg).load()
    return len(problems)


def main(argv: list[str] | None = None) -> int:
    opts, rest = parse_args(list(sys.argv[1:] if argv is None else argv),
                            {"results_root": "results", "measured": "local", "target": "gpt-4o-mini",
                             "experiment": "table1"})
    if rest:
        raise SystemExit(f"unknown arguments {rest}")
    root = Path(opts["results_root"])
    exp = load_experiment("table1")
    seeds = len(exp["protocols"]["paper"]["seeds"])
    price = yaml.safe_load((CONFIGS / "backbone" / f"{opts['target']}.yaml").read_text())["price"]
    pin, pout = float(price["input_per_1m"]) / 1e6, float(price["output_per_1m"]) / 1e6
    order = [r["method"] for r in exp["rows"]]
    index = RunIndex.scan(root, opts["experiment"])
    methods = sorted(index.methods(), key=lambda m: (order.index(m) if m in order else 99, m))
    t = Table(f"Estimated cost of the paper protocol on {opts['target']} (from {opts['measured']} ledgers)",
              ["Method", *[exp["benchmark_labels"][b] for b in exp["benchmarks"]], "Total $", "Calls/problem"])
    recs, sizes, grand = [], {}, 0.0
    for m in methods:
        row, total, calls_pp = [m], 0.0, []
        for b in exp["benchmarks"]:
            agg = index.agg(b, m, opts["measured"])
            n = sum(r.n for r in agg.scored)
            if not n:
                row.append("—")
                continue
            if b not in sizes:
                sizes[b] = split_size(b)
            ptok = sum(r.totals("prompt_tokens") for r in agg.scored) / n
            ctok = sum(r.totals("completion_tokens") for r in agg.scored) / n
            usd = (ptok * pin + ctok * pout) * sizes[b] * seeds
            wall = sum(float((r.metrics.get("this_invocation") or {}).get("wall_s") or 0) for r in agg.scored) / n
            calls_pp.append(sum(r.totals("calls") for r in agg.scored) / n)
            total += usd
            row.append(f"${usd:.2f}")
            recs.append({"method": m, "benchmark": b, "measured_problems": n, "prompt_tokens_per_problem": round(ptok),
                         "completion_tokens_per_problem": round(ctok), "paper_problems": sizes[b], "seeds": seeds,
                         "usd_estimate": round(usd, 4), "measured_wall_s_per_problem": round(wall, 1)})
        grand += total
        row += [f"${total:.2f}", f"{sum(calls_pp) / len(calls_pp):.1f}" if calls_pp else "—"]
        t.rows.append(row)
    t.notes = [f"Paper protocol sizes: {', '.join(f'{b}={n}' for b, n in sizes.items())} problems x {seeds} seeds. "
               f"Price: ${price['input_per_1m']}/1M input, ${price['output_per_1m']}/1M output tokens. "
               f"Grand total ≈ ${grand:.2f}. An estimate: token counts measured on {opts['measured']}."]
    out = root / opts["experiment"]
    write_tables(out / f"cost-estimate-{opts['target']}", [t])
    write_csv(out / f"cost-estimate-{opts['target']}.csv", recs, list(recs[0]) if recs else ["method"])
    print(t.to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
